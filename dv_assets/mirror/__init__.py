"""dv-mirror's engine: Delta log → plan of changes → Iceberg commit, with no Dagster in it.

Usable from a plain Python program or a Spark job:

```python
from dv_assets.mirror import MirrorSettings, get_or_create_spark, sync_table

settings = MirrorSettings.resolve(catalog_properties={"type": "rest", "uri": "http://127.0.0.1:8181"})
result = sync_table(get_or_create_spark(settings), "/data/delta/events", "ns.events")
```

The public surface is re-exported here; the Dagster platform (`dv_assets.defs`, `dv_assets.components`,
`resources`, `dv_assets.definitions`, `dv_assets.ci_checks`) imports nothing else of the engine but these
names, and uses the typed values they return (tests/test_import_graph.py holds it to that).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    # configuration
    "MirrorSettings": "dv_assets.mirror.settings",
    "CatalogConfig": "dv_assets.mirror.settings",
    "ICEBERG_CATALOG_NAME": "dv_assets.mirror.settings",
    "get_or_create_spark": "dv_assets.mirror.spark",
    "FileIO": "dv_assets.mirror.io",
    # the one parser of the mirror's YAML files (configuration file, tables file)
    "ConfigFileError": "dv_assets.mirror.config_file",
    "Located": "dv_assets.mirror.config_file",
    "Source": "dv_assets.mirror.config_file",
    "TABLES_FILE": "dv_assets.mirror.config_file",
    "catalog_properties": "dv_assets.mirror.config_file",
    "line_of": "dv_assets.mirror.config_file",
    "read_documents": "dv_assets.mirror.config_file",
    "substitute": "dv_assets.mirror.config_file",
    # one mirrored table (the tables file's documents, the component's attributes) and the file's loader
    "TableSpec": "dv_assets.mirror.table_spec",
    "TableAttributes": "dv_assets.mirror.table_spec",
    "RetentionAttributes": "dv_assets.mirror.table_spec",
    "FreshnessAttributes": "dv_assets.mirror.table_spec",
    "FreshnessSpec": "dv_assets.mirror.table_spec",
    "MirrorConfigError": "dv_assets.mirror.table_spec",
    "TablesFileError": "dv_assets.mirror.table_spec",
    "check_tables_fit": "dv_assets.mirror.table_spec",
    "check_name": "dv_assets.mirror.table_spec",
    "check_iceberg_table": "dv_assets.mirror.table_spec",
    "check_format_version": "dv_assets.mirror.table_spec",
    "load_tables_file": "dv_assets.mirror.table_spec",
    "TableLocation": "dv_assets.mirror.locations",
    "masked": "dv_assets.mirror.secrets",  # every text shown: secrets as ***
    # the sync
    "sync_table": "dv_assets.mirror.sync",
    "SyncResult": "dv_assets.mirror.results",
    "VersionResult": "dv_assets.mirror.results",
    "MirrorInputError": "dv_assets.mirror.errors",
    "MirrorConflictError": "dv_assets.mirror.errors",
    "StorageError": "dv_assets.mirror.errors",
    # a run over a range of versions (a Dagster run of `iceberg/<source>`)
    "RangeSync": "dv_assets.mirror.range_sync",
    "sync_range": "dv_assets.mirror.range_sync",
    "read_back": "dv_assets.mirror.range_sync",
    "current_after": "dv_assets.mirror.range_sync",
    "versions_text": "dv_assets.mirror.range_sync",
    # the Delta side, read from the log alone
    "DeltaTable": "dv_assets.mirror.delta.replay",
    "CommitFacts": "dv_assets.mirror.delta.facts",
    "commit_facts": "dv_assets.mirror.delta.facts",
    "operation_parameters_text": "dv_assets.mirror.delta.facts",
    "drops_dv_files": "dv_assets.mirror.delta.facts",
    "live_rows": "dv_assets.mirror.delta.facts",
    "live_rows_from_stats": "dv_assets.mirror.delta.facts",
    "StatsRowCount": "dv_assets.mirror.delta.facts",
    # the Iceberg side: the mirror table as values, read with Iceberg Java (Spark) or pyiceberg (no JVM)
    "IcebergJava": "dv_assets.mirror.iceberg.java",
    "MirrorTable": "dv_assets.mirror.iceberg.mirror_table",
    "Snapshot": "dv_assets.mirror.iceberg.mirror_table",
    "SnapshotTotals": "dv_assets.mirror.iceberg.mirror_table",
    # the typed schemas: Iceberg's Schema, Delta's StructType, and the node kind both are made of
    "Schema": "dv_assets.mirror.iceberg.types",
    "StructType": "dv_assets.mirror.delta.schema",
    "SchemaNode": "dv_assets.mirror.schema_visitor",
    "read_mirror_table": "dv_assets.mirror.iceberg.pyiceberg_reader",
    "last_mirrored_version": "dv_assets.mirror.iceberg.pyiceberg_reader",
    # maintenance and verification
    "Retention": "dv_assets.mirror.iceberg.maintenance",
    "DEFAULT_RETENTION": "dv_assets.mirror.iceberg.maintenance",
    "MaintenanceReport": "dv_assets.mirror.iceberg.maintenance",
    "expire_and_reclaim": "dv_assets.mirror.iceberg.maintenance",
    "plan_without_jvm": "dv_assets.mirror.iceberg.maintenance",
    "CleanupOutcome": "dv_assets.mirror.cleanup",
    "clean_table": "dv_assets.mirror.cleanup",
    "MirrorStatus": "dv_assets.mirror.status",
    "mirror_status": "dv_assets.mirror.status",
    "recorded_first_readable_version": "dv_assets.mirror.status",
    "readable_versions": "dv_assets.mirror.status",
    "expired_versions": "dv_assets.mirror.status",
    "version_ranges": "dv_assets.mirror.status",
    "DvFindings": "dv_assets.mirror.dv_findings",
    "dv_findings": "dv_assets.mirror.dv_findings",
    "SnapshotFiles": "dv_assets.mirror.iceberg.mirror_table",
    "snapshot_files_with_spark": "dv_assets.mirror.dv_findings",
    "read_snapshot_files": "dv_assets.mirror.iceberg.pyiceberg_reader",
    # the checks of one mirrored version (the Dagster asset checks and `dvmirror verify`)
    "CheckOutcome": "dv_assets.mirror.exactness_checks",
    "CHECK_NAMES": "dv_assets.mirror.exactness_checks",
    "METADATA_ROW_COUNT": "dv_assets.mirror.exactness_checks",
    "ONE_DV": "dv_assets.mirror.exactness_checks",
    "ROW_COUNT_SCAN": "dv_assets.mirror.exactness_checks",
    "check_metadata_row_count": "dv_assets.mirror.exactness_checks",
    "check_one_dv_per_data_file": "dv_assets.mirror.exactness_checks",
    "check_row_count_scan": "dv_assets.mirror.exactness_checks",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    # Lazy, so that `dvmirror --help` and the Delta-only sensors do not import pyspark.
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)
