"""The one place that talks to Iceberg Java (through py4j, in the Spark JVM).

Each Delta version becomes one Iceberg transaction: optional schema/property updates and one row-delta
snapshot, committed together or not at all. Files cross the py4j boundary as the JSON of Iceberg's own
`ContentFileParser`, so Iceberg Java builds its `DataFile`/`DeleteFile` objects itself (py4j would
otherwise box longs as Integers inside metrics maps and partition tuples).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from resources.spark import ICEBERG_CATALOG_NAME

DELTA_VERSION_PROPERTY = "dvmirror.delta-version"
DELTA_TABLE_PROPERTY = "dvmirror.delta-table"
DELTA_TABLE_ID_PROPERTY = "dvmirror.delta-table-id"
NAME_MAPPING_PROPERTY = "schema.name-mapping.default"


@dataclass
class VersionCommit:
    """Everything one Delta version changes on the Iceberg side, as ContentFileParser JSON dicts."""

    delta_version: int
    summary: dict[str, str]
    add_data_files: list[dict] = field(default_factory=list)
    remove_data_files: list[dict] = field(default_factory=list)
    add_delete_files: list[dict] = field(default_factory=list)
    remove_delete_files: list[dict] = field(default_factory=list)
    # Set when the Delta schema changed: the table's new schema, field ids exactly as given, and the
    # name mapping that goes with it.
    schema_json: dict | None = None
    name_mapping: list | None = None


@dataclass(frozen=True)
class NewTable:
    """What creating the mirror table needs."""

    schema_json: dict
    partition_spec_json: dict
    properties: dict[str, str]


class IcebergJava:
    """Iceberg Java through the Spark session's `dvmirror` catalog (the catalog pyiceberg opens too)."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._jvm = spark._jvm
        self._iceberg = self._jvm.org.apache.iceberg
        spark_catalog = spark._jsparkSession.sessionState().catalogManager().catalog(ICEBERG_CATALOG_NAME)
        self._catalog = spark_catalog.icebergCatalog()

    # -- reading -----------------------------------------------------------------------------------
    def _identifier(self, table_name: str):
        return self._iceberg.catalog.TableIdentifier.parse(table_name)

    def load(self, table_name: str):
        """The Java table, or None when the catalog has no such table."""
        ident = self._identifier(table_name)
        if not self._catalog.tableExists(ident):
            return None
        return self._catalog.loadTable(ident)

    @staticmethod
    def properties(table) -> dict[str, str]:
        return dict(table.properties())

    @staticmethod
    def format_version(table) -> int:
        """The table's format version, from its metadata (`format-version` is a reserved property that
        Iceberg does not keep in the properties map once the metadata is rewritten)."""
        return int(table.operations().current().formatVersion())

    @staticmethod
    def last_mirrored_version(table) -> int | None:
        snapshot = table.currentSnapshot()
        if snapshot is None:
            return None
        value = snapshot.summary().get(DELTA_VERSION_PROPERTY)
        return None if value is None else int(value)

    @staticmethod
    def location(table) -> str:
        return table.location()

    def schema_json(self, table) -> dict:
        return json.loads(self._iceberg.SchemaParser.toJson(table.schema()))

    def delete_files_by_data_file(self, table) -> dict[str, dict]:
        """The current snapshot's delete files, keyed by the data file each one references.

        Read once per sync run and then kept up to date from the plans, so mirroring a range of
        versions never lists the table's delete manifests again.
        """
        snapshot = table.currentSnapshot()
        if snapshot is None:
            return {}
        io = table.io()
        specs = table.specs()
        found: dict[str, dict] = {}
        for manifest in snapshot.deleteManifests(io):
            entries = self._iceberg.ManifestFiles.readDeleteManifest(manifest, io, specs)
            iterator = entries.iterator()
            try:
                while iterator.hasNext():
                    delete_file = iterator.next()
                    spec = specs.get(delete_file.specId())
                    as_json = json.loads(self._iceberg.ContentFileParser.toJson(delete_file, spec))
                    found[as_json["referenced-data-file"]] = as_json
            finally:
                entries.close()
        return found

    # -- writing -----------------------------------------------------------------------------------
    def _content_file(self, as_json: dict, spec):
        node = self._iceberg.util.JsonUtil.mapper().readTree(json.dumps(as_json))
        return self._iceberg.ContentFileParser.fromJson(node, spec)

    def default_location(self, table_name: str) -> str:
        """Where the JDBC catalog would put the table: `<warehouse>/<namespace…>/<name>`."""
        warehouse = self._spark.conf.get(f"spark.sql.catalog.{ICEBERG_CATALOG_NAME}.warehouse").rstrip("/")
        return "/".join([warehouse, *table_name.split(".")])

    def create(self, table_name: str, new_table: NewTable, location: str) -> None:
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
        self._catalog.registerTable(ident, metadata_file)

    def commit(self, table_name: str, commit: VersionCommit) -> tuple[int, dict]:
        """Commit one Delta version as one snapshot, all or nothing: (snapshot id, table schema JSON)."""
        iceberg = self._iceberg
        txn = self._catalog.loadTable(self._identifier(table_name)).newTransaction()

        if commit.schema_json is not None:
            self._set_schema(txn, commit.schema_json)
        if commit.name_mapping is not None:
            txn.updateProperties().set(NAME_MAPPING_PROPERTY, json.dumps(commit.name_mapping)).commit()

        spec = txn.table().spec()
        row_delta = txn.newRowDelta()
        current = txn.table().currentSnapshot()
        if current is not None:
            # Only DVs added after the state we planned against are conflicts; a file that had a DV
            # earlier in history (then removed, e.g. before a RESTORE) may get one again.
            row_delta = row_delta.validateFromSnapshot(current.snapshotId())
        for as_json in commit.remove_delete_files:
            row_delta = row_delta.removeDeletes(self._content_file(as_json, spec))
        for as_json in commit.remove_data_files:
            row_delta = row_delta.removeRows(self._content_file(as_json, spec))
        for as_json in commit.add_data_files:
            row_delta = row_delta.addRows(self._content_file(as_json, spec))
        for as_json in commit.add_delete_files:
            row_delta = row_delta.addDeletes(self._content_file(as_json, spec))
        row_delta = row_delta.set(DELTA_VERSION_PROPERTY, str(commit.delta_version))
        for key, value in commit.summary.items():
            row_delta = row_delta.set(key, value)
        row_delta.commit()
        txn.commitTransaction()
        table = txn.table()
        planned = (
            None
            if commit.schema_json is None
            else iceberg.SchemaParser.fromJson(json.dumps(commit.schema_json))
        )
        if planned is not None and not table.schema().sameSchema(planned):
            raise RuntimeError(
                f"{table_name}: the committed schema is not the planned one (concurrent change?)"
            )
        return int(table.currentSnapshot().snapshotId()), self.schema_json(table)

    def _set_schema(self, txn, schema_json: dict) -> None:
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
