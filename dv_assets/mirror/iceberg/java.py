"""The one seam to Iceberg Java: every py4j call of the project is in this module.

Iceberg Java runs in the Spark JVM, behind the Spark session's catalog `dvmirror` (the catalog pyiceberg
opens too). What crosses the seam is Python values: a `MirrorTable` (location, format version,
properties, schema, snapshots with their Delta versions), `DeleteFile`s by data file, the files each
snapshot references; and typed requests in (`NewTable`, `CommitRequest`). Content files cross py4j as
the JSON of Iceberg's own `ContentFileParser`, so Iceberg Java builds its `DataFile`/`DeleteFile`
objects itself (py4j would otherwise box longs as Integers inside metrics maps and partition tuples).

Each Delta version becomes one Iceberg transaction: optional schema/property updates and one row-delta
snapshot, committed together or not at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from dv_assets.mirror.iceberg.content_files import DataFile, DeleteFile
from dv_assets.mirror.iceberg.snapshots import DELTA_VERSION_PROPERTY, delta_version_of
from dv_assets.mirror.settings import ICEBERG_CATALOG_NAME

DELTA_TABLE_PROPERTY = "dvmirror.delta-table"
DELTA_TABLE_ID_PROPERTY = "dvmirror.delta-table-id"
NAME_MAPPING_PROPERTY = "schema.name-mapping.default"


@dataclass(frozen=True)
class Snapshot:
    snapshot_id: int
    parent_id: int | None
    timestamp_ms: int
    summary: Mapping[str, str]

    @property
    def delta_version(self) -> int | None:
        """The Delta version this snapshot mirrors (None for a snapshot the mirror did not write)."""
        return delta_version_of(self.summary)


@dataclass(frozen=True)
class MirrorTable:
    """An Iceberg table as the mirror sees it, read once: a value, not a handle."""

    name: str
    location: str
    format_version: int
    properties: Mapping[str, str]
    schema: dict[str, Any]  # Iceberg schema JSON (SchemaParser)
    current_snapshot_id: int | None
    snapshots: tuple[Snapshot, ...]  # in the table's order (oldest first)

    @property
    def current_snapshot(self) -> Snapshot | None:
        return next((s for s in self.snapshots if s.snapshot_id == self.current_snapshot_id), None)

    @property
    def last_mirrored_version(self) -> int | None:
        """The Delta version of the current snapshot: what the mirror shows now."""
        current = self.current_snapshot
        return None if current is None else current.delta_version

    def mirror_snapshots(self) -> list[Snapshot]:
        """Snapshots that carry a Delta version, oldest first."""
        found = [s for s in self.snapshots if s.delta_version is not None]
        return sorted(found, key=lambda s: (s.timestamp_ms, s.delta_version))

    def snapshot_for_version(self, delta_version: int) -> Snapshot | None:
        """The newest retained snapshot recording `delta_version`, if any."""
        matching = [s for s in self.mirror_snapshots() if s.delta_version == delta_version]
        return matching[-1] if matching else None


@dataclass(frozen=True)
class NewTable:
    """What creating the mirror table needs; field ids are kept exactly as given."""

    schema_json: dict[str, Any]
    partition_spec_json: dict[str, Any]
    properties: Mapping[str, str]


@dataclass(frozen=True)
class CommitRequest:
    """Everything one Delta version changes on the Iceberg side: one snapshot."""

    delta_version: int
    summary: Mapping[str, str]
    add_data_files: tuple[DataFile, ...] = ()
    remove_data_files: tuple[DataFile, ...] = ()
    add_delete_files: tuple[DeleteFile, ...] = ()
    remove_delete_files: tuple[DeleteFile, ...] = ()
    # Set when the Delta schema changed: the table's new schema, field ids exactly as given, and the
    # name mapping that goes with it.
    schema_json: dict[str, Any] | None = None
    name_mapping: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class CommitOutcome:
    snapshot_id: int
    schema: dict[str, Any]  # the table's schema after the commit


@dataclass(frozen=True)
class SnapshotFiles:
    """The files one snapshot references besides data files: its manifest list and manifests
    (Iceberg's metadata) and its delete files."""

    metadata_files: frozenset[str] = field(default_factory=frozenset)
    delete_files: frozenset[str] = field(default_factory=frozenset)


class IcebergJava:
    """Iceberg Java through the Spark session's `dvmirror` catalog."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._jvm = spark._jvm
        self._iceberg = self._jvm.org.apache.iceberg
        spark_catalog = spark._jsparkSession.sessionState().catalogManager().catalog(ICEBERG_CATALOG_NAME)
        self._catalog = spark_catalog.icebergCatalog()

    # -- reading -----------------------------------------------------------------------------------
    def _identifier(self, table_name: str):
        return self._iceberg.catalog.TableIdentifier.parse(table_name)

    def _java_table(self, table_name: str):
        """The Java table, or None when the catalog has no such table."""
        ident = self._identifier(table_name)
        if not self._catalog.tableExists(ident):
            return None
        return self._catalog.loadTable(ident)

    def _require(self, table_name: str):
        table = self._java_table(table_name)
        if table is None:
            raise LookupError(f"Iceberg table {table_name} does not exist in catalog {ICEBERG_CATALOG_NAME}")
        return table

    def exists(self, table_name: str) -> bool:
        return bool(self._catalog.tableExists(self._identifier(table_name)))

    def load(self, table_name: str) -> MirrorTable | None:
        table = self._java_table(table_name)
        return None if table is None else self._mirror_table(table_name, table)

    def _mirror_table(self, table_name: str, table) -> MirrorTable:
        current = table.currentSnapshot()
        return MirrorTable(
            name=table_name,
            location=str(table.location()),
            # From the metadata: `format-version` is a reserved property that Iceberg does not keep in
            # the properties map once the metadata is rewritten.
            format_version=int(table.operations().current().formatVersion()),
            properties=dict(table.properties()),
            schema=json.loads(self._iceberg.SchemaParser.toJson(table.schema())),
            current_snapshot_id=None if current is None else int(current.snapshotId()),
            snapshots=tuple(self._snapshot(s) for s in table.snapshots()),
        )

    @staticmethod
    def _snapshot(snapshot) -> Snapshot:
        parent = snapshot.parentId()
        return Snapshot(
            snapshot_id=int(snapshot.snapshotId()),
            parent_id=None if parent is None else int(parent),
            timestamp_ms=int(snapshot.timestampMillis()),
            summary=dict(snapshot.summary()),
        )

    def default_location(self, table_name: str) -> str:
        """Where the JDBC catalog would put the table: `<warehouse>/<namespace…>/<name>`."""
        warehouse = self._spark.conf.get(f"spark.sql.catalog.{ICEBERG_CATALOG_NAME}.warehouse").rstrip("/")
        return "/".join([warehouse, *table_name.split(".")])

    def delete_files_by_data_file(self, table_name: str) -> dict[str, DeleteFile]:
        """The current snapshot's delete files, keyed by the data file each one references."""
        table = self._require(table_name)
        snapshot = table.currentSnapshot()
        if snapshot is None:
            return {}
        found: dict[str, DeleteFile] = {}
        for delete_file in self._delete_entries(table, snapshot.deleteManifests(table.io())):
            spec = table.specs().get(delete_file.specId())
            parsed = DeleteFile.from_json(
                json.loads(self._iceberg.ContentFileParser.toJson(delete_file, spec))
            )
            found[parsed.referenced_data_file] = parsed
        return found

    def snapshot_files(self, table_name: str, snapshot_ids: Iterable[int]) -> dict[int, SnapshotFiles]:
        """Manifest list, manifests and delete files of each snapshot; every manifest is read once."""
        table = self._require(table_name)
        io = table.io()
        wanted = set(snapshot_ids)
        deletes_of_manifest: dict[str, frozenset[str]] = {}
        out: dict[int, SnapshotFiles] = {}
        for snapshot in table.snapshots():
            snapshot_id = int(snapshot.snapshotId())
            if snapshot_id not in wanted:
                continue
            metadata = {str(m.path()) for m in snapshot.allManifests(io)}
            if snapshot.manifestListLocation() is not None:
                metadata.add(str(snapshot.manifestListLocation()))
            deletes: set[str] = set()
            for manifest in snapshot.deleteManifests(io):
                path = str(manifest.path())
                if path not in deletes_of_manifest:
                    entries = self._delete_entries(table, [manifest])
                    deletes_of_manifest[path] = frozenset(str(f.location()) for f in entries)
                deletes |= deletes_of_manifest[path]
            out[snapshot_id] = SnapshotFiles(frozenset(metadata), frozenset(deletes))
        return out

    def _delete_entries(self, table, manifests) -> Iterator[Any]:
        io, specs = table.io(), table.specs()
        for manifest in manifests:
            entries = self._iceberg.ManifestFiles.readDeleteManifest(manifest, io, specs)
            iterator = entries.iterator()
            try:
                while iterator.hasNext():
                    yield iterator.next()
            finally:
                entries.close()

    # -- writing -----------------------------------------------------------------------------------
    def _content_file(self, content_file: DataFile | DeleteFile, spec):
        node = self._iceberg.util.JsonUtil.mapper().readTree(json.dumps(content_file.to_json()))
        return self._iceberg.ContentFileParser.fromJson(node, spec)

    def create(self, table_name: str, new_table: NewTable, location: str) -> MirrorTable:
        """Create the (empty) mirror table with the schema's field ids exactly as given.

        `Catalog.createTable` would renumber every field; Delta's column-mapping ids must survive, since
        Parquet files written with field ids are read by id. So the metadata is built here, written as the
        table's first metadata file, and registered with the catalog.
        """
        iceberg = self._iceberg
        schema = iceberg.SchemaParser.fromJson(json.dumps(new_table.schema_json))
        spec = iceberg.PartitionSpecParser.fromJson(schema, json.dumps(new_table.partition_spec_json))
        props = self._jvm.java.util.HashMap()
        for key, value in new_table.properties.items():
            props.put(key, value)
        metadata = (
            iceberg.TableMetadata.buildFromEmpty(int(new_table.properties.get("format-version", "2")))
            .assignUUID()
            .setLocation(location)
            .setCurrentSchema(schema, schema.highestFieldId())
            .setDefaultPartitionSpec(spec)
            .setDefaultSortOrder(iceberg.SortOrder.unsorted())
            .setProperties(props)
            .build()
        )
        io = iceberg.hadoop.HadoopFileIO(self._spark._jsc.hadoopConfiguration())
        metadata_file = f"{location}/metadata/00000-{self._jvm.java.util.UUID.randomUUID()}.metadata.json"
        iceberg.TableMetadataParser.write(metadata, io.newOutputFile(metadata_file))
        ident = self._identifier(table_name)
        if not self._catalog.namespaceExists(ident.namespace()):
            self._catalog.createNamespace(ident.namespace())
        return self._mirror_table(table_name, self._catalog.registerTable(ident, metadata_file))

    def commit(self, table_name: str, request: CommitRequest) -> CommitOutcome:
        """Commit one Delta version as one snapshot, all or nothing."""
        iceberg = self._iceberg
        txn = self._require(table_name).newTransaction()

        if request.schema_json is not None:
            self._set_schema(txn, request.schema_json)
        if request.name_mapping is not None:
            txn.updateProperties().set(NAME_MAPPING_PROPERTY, json.dumps(request.name_mapping)).commit()

        spec = txn.table().spec()
        row_delta = txn.newRowDelta()
        current = txn.table().currentSnapshot()
        if current is not None:
            # Only DVs added after the state we planned against are conflicts; a file that had a DV
            # earlier in history (then removed, e.g. before a RESTORE) may get one again.
            row_delta = row_delta.validateFromSnapshot(current.snapshotId())
        for delete_file in request.remove_delete_files:
            row_delta = row_delta.removeDeletes(self._content_file(delete_file, spec))
        for data_file in request.remove_data_files:
            row_delta = row_delta.removeRows(self._content_file(data_file, spec))
        for data_file in request.add_data_files:
            row_delta = row_delta.addRows(self._content_file(data_file, spec))
        for delete_file in request.add_delete_files:
            row_delta = row_delta.addDeletes(self._content_file(delete_file, spec))
        row_delta = row_delta.set(DELTA_VERSION_PROPERTY, str(request.delta_version))
        for key, value in request.summary.items():
            row_delta = row_delta.set(key, value)
        row_delta.commit()
        txn.commitTransaction()
        table = txn.table()
        if request.schema_json is not None:
            planned = iceberg.SchemaParser.fromJson(json.dumps(request.schema_json))
            if not table.schema().sameSchema(planned):
                raise RuntimeError(
                    f"{table_name}: the committed schema is not the planned one (concurrent change?)"
                )
        return CommitOutcome(
            snapshot_id=int(table.currentSnapshot().snapshotId()),
            schema=json.loads(iceberg.SchemaParser.toJson(table.schema())),
        )

    def _set_schema(self, txn, schema_json: dict[str, Any]) -> None:
        """Make `schema_json` the current schema inside the transaction, keeping its field ids.

        `UpdateSchema` would number new columns itself; Delta's column-mapping ids must survive, so the
        transaction's own table operations get the new metadata (committed with the snapshot).
        """
        iceberg = self._iceberg
        ops = txn.table().operations()
        base = ops.current()
        schema = iceberg.SchemaParser.fromJson(json.dumps(schema_json))
        last_column_id = max(base.lastColumnId(), schema.highestFieldId())
        ops.commit(
            base, iceberg.TableMetadata.buildFrom(base).setCurrentSchema(schema, last_column_id).build()
        )

    # -- maintenance -------------------------------------------------------------------------------
    def expire_snapshots(
        self, table_name: str, *, older_than_ms: int, retain_last: int, dry_run: bool = False
    ) -> list[int]:
        """Expire snapshots older than `older_than_ms` beyond the newest `retain_last`; the expired ids.

        Iceberg's own file cleanup stays off: the table's data files are Delta's. What the expired
        snapshots alone referenced is reclaimed by `iceberg.maintenance`, the mirror's own files only.
        """
        expire = (
            self._require(table_name)
            .expireSnapshots()
            .expireOlderThan(older_than_ms)
            .retainLast(retain_last)
            .cleanExpiredFiles(False)
        )
        expired = sorted(int(s.snapshotId()) for s in expire.apply())
        if expired and not dry_run:
            expire.commit()
        return expired

    def unregister(self, table_name: str) -> bool:
        """Remove the table from the catalog without deleting any file (never a purge: the data files
        are Delta's). False when there was no such table."""
        return bool(self._catalog.dropTable(self._identifier(table_name), False))
