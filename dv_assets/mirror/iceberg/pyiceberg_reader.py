"""The mirror table read through pyiceberg, for callers that must not start a JVM (the Dagster sensors,
the metadata-only checks, `dvmirror status`): the same `MirrorTable` value `IcebergJava.load` returns,
so "where the mirror stands" (`MirrorTable.mirrored_base`) has one answer whichever adapter read it;
and a snapshot's live content files (`SnapshotFiles`), the rows Spark's `files` metadata table gives.
From the embedded sqlite catalog neither goes through pyiceberg's `Table` (whose schema parser fails on
a `variant` column): the metadata file is read as JSON, the manifests with pyiceberg's Avro reader."""

from __future__ import annotations

import gzip
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.iceberg.mirror_table import (
    DeleteFileRow,
    MirrorTable,
    ReferencedFiles,
    Snapshot,
    SnapshotFiles,
    TableHistory,
)
from dv_assets.mirror.iceberg.types import Schema
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.settings import ICEBERG_CATALOG_NAME, CatalogConfig

DATA_CONTENT = 0  # a manifest entry's data_file.content: 0 data, 1 position deletes (and DVs), 2 equality
DELETED_ENTRY = 2  # a manifest entry's status: 0 existing, 1 added, 2 deleted (not in the snapshot)


def read_mirror_table(catalog: CatalogConfig, table_name: str) -> MirrorTable | None:
    """The table as a `MirrorTable`, None when the catalog has no such table.

    From the embedded sqlite catalog, read from the table's metadata file by
    `MirrorTable.from_metadata` (the parser Iceberg Java's adapter uses too), never through pyiceberg's
    `Table`: pyiceberg 0.12 cannot parse a schema with a `variant` column ("Unsupported field type:
    'variant'"), which a v3 mirror of a Delta VARIANT column has. Only the catalog's pointer to the
    metadata file is asked for. Other catalogs (another JDBC database, REST, Hive, Glue) are read through
    pyiceberg's public API, which hands out a parsed `Table` only (with the table's own FileIO, e.g.
    vended credentials), and a variant table there is refused by name (`_load_table`)."""
    if not _reads_metadata_itself(catalog):
        table = _load_table(catalog, table_name)
        return None if table is None else mirror_table_of(table_name, table)
    found = _metadata_of(catalog, table_name)
    if found is None:
        return None
    location, metadata = found
    return MirrorTable.from_metadata(table_name, metadata, location)


def _reads_metadata_itself(catalog: CatalogConfig) -> bool:
    """Whether the metadata location comes from the catalog's database: the embedded sqlite catalog's,
    read directly (other JDBC databases go through pyiceberg's SqlCatalog, whose public API hands out a
    parsed `Table` only)."""
    return catalog.sqlite_path is not None


def _load_table(catalog: CatalogConfig, table_name: str) -> Any:
    """pyiceberg's `Table` (None: no such table); a schema it cannot parse is refused by name."""
    from pyiceberg.exceptions import NoSuchTableError, ValidationError

    try:
        return catalog.pyiceberg_catalog().load_table(table_name)
    except NoSuchTableError:
        return None
    except (ValueError, ValidationError) as err:  # pyiceberg wraps pydantic's error in its own
        if "Unsupported field type: 'variant'" not in str(err):
            raise
        raise MirrorInputError(
            f"pyiceberg 0.12 cannot load Iceberg table {table_name} from the {catalog.kind} catalog: its "
            "schema has a variant column (\"Unsupported field type: 'variant'\"); dv-mirror reads such a "
            "table without pyiceberg from the embedded sqlite catalog only (Iceberg Java, the sync's reader, "
            "reads it)",
            table=table_name,
        ) from err


def _metadata_of(catalog: CatalogConfig, table_name: str) -> tuple[str, dict[str, Any]] | None:
    """A JDBC catalog's table's current metadata file: its location (the catalog's `iceberg_tables`
    row, the table Iceberg Java's JdbcCatalog and pyiceberg's SqlCatalog both keep) and its JSON;
    None: no such table. Read without importing pyiceberg (~1 s of a `dvmirror status` otherwise)."""
    sqlite = catalog.sqlite_path
    location = None if sqlite is None else _sqlite_metadata_location(sqlite, table_name)
    if location is None:
        return None
    content = FileIO(catalog.storage_properties()).read(location)
    if content[:2] == b"\x1f\x8b":  # write.metadata.compression-codec=gzip
        content = gzip.decompress(content)
    return location, json.loads(content)


def _sqlite_metadata_location(database: Path, table_name: str) -> str | None:
    if not database.is_file():
        return None
    namespace, _, name = table_name.rpartition(".")
    with closing(sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True)) as db:
        columns = {row[1] for row in db.execute("PRAGMA table_info(iceberg_tables)")}
        if not columns:  # a catalog that holds no table yet
            return None
        # A V1 catalog schema keeps views in the same rows (`iceberg_type` TABLE or VIEW).
        tables_only = (
            " AND (iceberg_type IS NULL OR iceberg_type = 'TABLE')" if "iceberg_type" in columns else ""
        )
        row = db.execute(
            "SELECT metadata_location FROM iceberg_tables "
            f"WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?{tables_only}",
            (ICEBERG_CATALOG_NAME, namespace, name),
        ).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def last_mirrored_version(catalog: CatalogConfig, table_name: str) -> int | None:
    """The Delta version the mirror shows (None: no table, or nothing mirrored yet). A snapshot another
    writer added on top that changed content is refused (`MirrorInputError`), as the sync refuses it."""
    table = read_mirror_table(catalog, table_name)
    return None if table is None else table.last_mirrored_version


def read_snapshot_files(catalog: CatalogConfig, table_name: str, snapshot_id: int) -> SnapshotFiles:
    """The live content files of snapshot `snapshot_id` of `table_name`, from its manifests.

    pyiceberg's own manifest reader (and `inspect.files`) projects the v2 schema, which lacks
    `referenced_data_file` (field 143), the field the DV check is about: the manifests are read here
    with the v3 entry schema instead (fields a v2 manifest lacks read as null, as in Iceberg Java).
    """
    from pyiceberg.avro.file import AvroFile
    from pyiceberg.io import load_file_io
    from pyiceberg.manifest import DATA_FILE_TYPE, MANIFEST_ENTRY_SCHEMAS, read_manifest_list
    from pyiceberg.typedef import Record

    if _reads_metadata_itself(catalog):
        # The metadata file read as JSON, not by pyiceberg's parser (`read_mirror_table`): only the
        # snapshot's manifest list is needed.
        found = _metadata_of(catalog, table_name)
        if found is None:
            raise ValueError(f"the catalog has no Iceberg table {table_name}")
        location, metadata = found
        snapshot = next(
            (s for s in metadata.get("snapshots", ()) if int(s["snapshot-id"]) == snapshot_id), None
        )
        if snapshot is None:
            raise ValueError(f"Iceberg table {table_name} has no snapshot {snapshot_id}")
        properties = {**catalog.pyiceberg_properties(), **(metadata.get("properties") or {})}
        io = load_file_io(properties, location)
        manifest_list = str(snapshot["manifest-list"])
    else:
        table = _load_table(catalog, table_name)
        if table is None:
            raise ValueError(f"the catalog has no Iceberg table {table_name}")
        table_snapshot = table.snapshot_by_id(snapshot_id)
        if table_snapshot is None:
            raise ValueError(f"Iceberg table {table_name} has no snapshot {snapshot_id}")
        io, manifest_list = table.io, table_snapshot.manifest_list
    entry_schema = MANIFEST_ENTRY_SCHEMAS[3]
    status_at, file_at = (
        [f.name for f in entry_schema.fields].index(name) for name in ("status", "data_file")
    )
    fields = [f.name for f in DATA_FILE_TYPE[3].fields]
    content_at, path_at, count_at, referenced_at = (
        fields.index(name) for name in ("content", "file_path", "record_count", "referenced_data_file")
    )
    data_files: set[str] = set()
    deletes: list[DeleteFileRow] = []
    for manifest in read_manifest_list(io.new_input(manifest_list)):
        with AvroFile[Record](io.new_input(manifest.manifest_path), entry_schema) as entries:
            for entry in entries:
                if entry[status_at] == DELETED_ENTRY:
                    continue
                content_file = entry[file_at]
                if content_file[content_at] == DATA_CONTENT:
                    data_files.add(content_file[path_at])
                else:
                    deletes.append(
                        DeleteFileRow(
                            content_file[path_at], content_file[referenced_at], content_file[count_at]
                        )
                    )
    return SnapshotFiles(data_files=frozenset(data_files), deletes=tuple(deletes))


def table_state_and_files(
    catalog: CatalogConfig, table_name: str
) -> tuple[TableHistory, dict[int, ReferencedFiles]] | None:
    """What expiry needs of the table (`mirror_table.TableHistory`) and, for every snapshot, the files it
    references besides data files (`IcebergJava.snapshot_files`' values: manifest list, manifests, live
    delete files), read without a JVM; None: no such table. Every manifest is read once."""
    from pyiceberg.avro.file import AvroFile
    from pyiceberg.manifest import DATA_FILE_TYPE, MANIFEST_ENTRY_SCHEMAS, ManifestContent, read_manifest_list
    from pyiceberg.typedef import Record

    found = table_metadata(catalog, table_name)
    if found is None:
        return None
    location, metadata, io = found
    state = TableHistory.of(metadata, location)
    entry_schema = MANIFEST_ENTRY_SCHEMAS[3]
    status_at, file_at = (
        [f.name for f in entry_schema.fields].index(name) for name in ("status", "data_file")
    )
    path_at = [f.name for f in DATA_FILE_TYPE[3].fields].index("file_path")
    deletes_of_manifest: dict[str, frozenset[str]] = {}
    files: dict[int, ReferencedFiles] = {}
    for snapshot in metadata.get("snapshots", ()):
        manifest_list = str(snapshot["manifest-list"])
        referenced = {manifest_list}
        deletes: set[str] = set()
        for manifest in read_manifest_list(io.new_input(manifest_list)):
            referenced.add(manifest.manifest_path)
            if manifest.content != ManifestContent.DELETES:
                continue
            if manifest.manifest_path not in deletes_of_manifest:
                with AvroFile[Record](io.new_input(manifest.manifest_path), entry_schema) as entries:
                    deletes_of_manifest[manifest.manifest_path] = frozenset(
                        entry[file_at][path_at] for entry in entries if entry[status_at] != DELETED_ENTRY
                    )
            deletes |= deletes_of_manifest[manifest.manifest_path]
        files[int(snapshot["snapshot-id"])] = ReferencedFiles(frozenset(referenced), frozenset(deletes))
    return state, files


def table_metadata(catalog: CatalogConfig, table_name: str) -> tuple[str, dict[str, Any], Any] | None:
    """The table's current metadata file: its location, its JSON (Iceberg's table spec) and the pyiceberg
    FileIO that reads the files it names (the table's own, e.g. vended credentials); None: no such table.
    From the embedded sqlite catalog the JSON is read as it is (see `read_mirror_table`)."""
    from pyiceberg.io import load_file_io

    if _reads_metadata_itself(catalog):
        found = _metadata_of(catalog, table_name)
        if found is None:
            return None
        location, metadata = found
        properties = {**catalog.pyiceberg_properties(), **(metadata.get("properties") or {})}
        return location, metadata, load_file_io(properties, location)
    table = _load_table(catalog, table_name)
    if table is None:
        return None
    return table.metadata_location, json.loads(table.metadata.model_dump_json()), table.io


def mirror_table_of(table_name: str, table: Any) -> MirrorTable:
    """A pyiceberg `Table` as a `MirrorTable`."""
    metadata = table.metadata
    return MirrorTable(
        name=table_name,
        location=table.location(),
        format_version=int(metadata.format_version),
        properties=dict(table.properties),
        schema=schema_from_pyiceberg(table.schema()),
        current_snapshot_id=metadata.current_snapshot_id,
        snapshots=tuple(
            Snapshot(
                snapshot_id=s.snapshot_id,
                parent_id=s.parent_snapshot_id,
                timestamp_ms=s.timestamp_ms,
                summary={}
                if s.summary is None
                else {"operation": s.summary.operation.value, **s.summary.additional_properties},
                schema_id=s.schema_id,
            )
            for s in metadata.snapshots
        ),
        schemas={s.schema_id: schema_from_pyiceberg(s) for s in metadata.schemas},
        metadata_location=table.metadata_location,
    )


def schema_from_pyiceberg(pyiceberg_schema: Any) -> Schema:
    """A pyiceberg `Schema` as a `Schema` (through its JSON: the same keys as Iceberg Java's)."""
    return Schema.from_json(json.loads(pyiceberg_schema.model_dump_json()))
