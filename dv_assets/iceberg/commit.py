"""The one place that talks to Iceberg Java (through py4j, in the Spark JVM).

Each Delta version becomes one Iceberg transaction: optional schema/property updates and one row-delta
snapshot, committed together or not at all. Files cross the py4j boundary as the JSON of Iceberg's own
`ContentFileParser`, so Iceberg Java builds its `DataFile`/`DeleteFile` objects itself (py4j would
otherwise box longs as Integers inside metrics maps and partition tuples).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from resources.spark import ICEBERG_CATALOG_NAME

DELTA_VERSION_PROPERTY = "dvmirror.delta-version"
DELTA_TABLE_PROPERTY = "dvmirror.delta-table"
DELTA_TABLE_ID_PROPERTY = "dvmirror.delta-table-id"


@dataclass
class VersionCommit:
    """Everything one Delta version changes on the Iceberg side, as ContentFileParser JSON dicts."""

    delta_version: int
    summary: dict[str, str]
    add_data_files: list[dict] = field(default_factory=list)
    remove_data_files: list[dict] = field(default_factory=list)
    add_delete_files: list[dict] = field(default_factory=list)
    remove_delete_files: list[dict] = field(default_factory=list)
    schema_json: dict | None = None  # set when the Delta schema changed: union by name into the table
    properties: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class NewTable:
    """What creating the mirror table needs; created in the same transaction as its first snapshot."""

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

    def commit(self, table_name: str, commit: VersionCommit, new_table: NewTable | None = None) -> int:
        """Commit one Delta version as one snapshot; returns its snapshot id. All or nothing."""
        iceberg = self._iceberg
        if new_table is not None:
            schema = iceberg.SchemaParser.fromJson(json.dumps(new_table.schema_json))
            spec = iceberg.PartitionSpecParser.fromJson(schema, json.dumps(new_table.partition_spec_json))
            props = self._jvm.java.util.HashMap()
            for key, value in new_table.properties.items():
                props.put(key, value)
            txn = self._catalog.newCreateTableTransaction(self._identifier(table_name), schema, spec, props)
        else:
            table = self._catalog.loadTable(self._identifier(table_name))
            txn = table.newTransaction()

        if commit.schema_json is not None:
            new_schema = iceberg.SchemaParser.fromJson(json.dumps(commit.schema_json))
            txn.updateSchema().unionByNameWith(new_schema).commit()
        if commit.properties:
            update = txn.updateProperties()
            for key, value in commit.properties.items():
                update = update.set(key, value)
            update.commit()

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
        return int(txn.table().currentSnapshot().snapshotId())

    def schema_after(self, table_name: str) -> dict[str, Any]:
        return self.schema_json(self._catalog.loadTable(self._identifier(table_name)))
