"""The mirror table read through pyiceberg, for callers that must not start a JVM (the Dagster sensors,
the metadata-only checks, `dvmirror status`): the same `MirrorTable` value `IcebergJava.load` returns,
so "where the mirror stands" (`MirrorTable.mirrored_base`) has one answer whichever adapter read it;
and a snapshot's live content files (`SnapshotFiles`), the rows Spark's `files` metadata table gives."""

from __future__ import annotations

import gzip
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from dv_assets.mirror.iceberg.mirror_table import MirrorTable, Snapshot
from dv_assets.mirror.iceberg.types import Schema
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.settings import ICEBERG_CATALOG_NAME, CatalogConfig
from dv_assets.mirror.verify import DeleteFileRow, SnapshotFiles

DATA_CONTENT = 0  # a manifest entry's data_file.content: 0 data, 1 position deletes (and DVs), 2 equality
DELETED_ENTRY = 2  # a manifest entry's status: 0 existing, 1 added, 2 deleted (not in the snapshot)


def read_mirror_table(catalog: CatalogConfig, table_name: str) -> MirrorTable | None:
    """The table as a `MirrorTable`, None when the catalog has no such table."""
    if catalog.sqlite_path is not None:
        return _read_from_sqlite(catalog, catalog.sqlite_path, table_name)
    from pyiceberg.exceptions import NoSuchTableError

    try:
        table = catalog.pyiceberg_catalog().load_table(table_name)
    except NoSuchTableError:
        return None
    return mirror_table_of(table_name, table)


def _read_from_sqlite(catalog: CatalogConfig, database: Path, table_name: str) -> MirrorTable | None:
    """The embedded catalog's table without importing pyiceberg (~1 s of a `dvmirror status` otherwise):
    its metadata location from the JDBC catalog's own `iceberg_tables` row (the table Iceberg Java's
    JdbcCatalog and pyiceberg's SqlCatalog both keep), its metadata file parsed by
    `MirrorTable.from_metadata`, the parser Iceberg Java's adapter uses too."""
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
    if row is None or row[0] is None:
        return None
    content = FileIO(catalog.storage_properties()).read(row[0])
    if content[:2] == b"\x1f\x8b":  # write.metadata.compression-codec=gzip
        content = gzip.decompress(content)
    return MirrorTable.from_metadata(table_name, json.loads(content), row[0])


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
    from pyiceberg.manifest import DATA_FILE_TYPE, MANIFEST_ENTRY_SCHEMAS
    from pyiceberg.typedef import Record

    table = catalog.pyiceberg_catalog().load_table(table_name)
    snapshot = table.snapshot_by_id(snapshot_id)
    if snapshot is None:
        raise ValueError(f"Iceberg table {table_name} has no snapshot {snapshot_id}")
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
    for manifest in snapshot.manifests(table.io):
        with AvroFile[Record](table.io.new_input(manifest.manifest_path), entry_schema) as entries:
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


def mirror_table_of(table_name: str, table: Any) -> MirrorTable:
    """A pyiceberg `Table` as a `MirrorTable`."""
    metadata = table.metadata
    return MirrorTable(
        name=table_name,
        location=table.location(),
        format_version=int(metadata.format_version),
        properties=dict(table.properties),
        schema=schema_of(table.schema()),
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
        schemas={s.schema_id: schema_of(s) for s in metadata.schemas},
        metadata_location=table.metadata_location,
    )


def schema_of(pyiceberg_schema: Any) -> Schema:
    """A pyiceberg `Schema` as a `Schema` (through its JSON: the same keys as Iceberg Java's)."""
    return Schema.from_json(json.loads(pyiceberg_schema.model_dump_json()))
