"""Reading the mirror back with readers dv-mirror did not write: Iceberg Java (Spark), pyiceberg, and
Delta Spark for the source side. Every reader's rows go through Arrow and `tests.helpers.rows`."""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

from dv_assets.mirror.iceberg.mirror_table import DELTA_VERSION_SUMMARY
from dv_assets.mirror.settings import ICEBERG_CATALOG_NAME, CatalogConfig
from tests.helpers.rows import sorted_rows

# Delta Spark may write timestamps as Parquet INT96 (nanoseconds). Iceberg Java reads those as
# timestamptz; pyiceberg does so for v3 tables only with this switch (it is on by default for v2).
os.environ.setdefault("PYICEBERG_DOWNCAST_NS_TIMESTAMP_TO_US_ON_WRITE", "true")


def snapshots_by_delta_version(catalog: CatalogConfig, table_name: str) -> dict[int, int]:
    """Delta version → Iceberg snapshot id, from the snapshot summaries, as pyiceberg sees them
    (snapshots other writers added, such as rewrite_manifests's, carry no Delta version)."""
    table = catalog.pyiceberg_catalog().load_table(table_name)
    found: dict[int, int] = {}
    for snapshot in table.snapshots():
        value = None if snapshot.summary is None else snapshot.summary[DELTA_VERSION_SUMMARY]
        if value is None:
            continue
        version = int(value)
        assert version not in found, f"two snapshots for Delta version {version}"
        found[version] = snapshot.snapshot_id
    return found


def iceberg_java_rows(spark: SparkSession, table_name: str, snapshot_id: int) -> list[dict]:
    df = spark.read.option("versionAsOf", snapshot_id).table(f"{ICEBERG_CATALOG_NAME}.{table_name}")
    return sorted_rows(df.toArrow().to_pylist())


def pyiceberg_rows(catalog: CatalogConfig, table_name: str, snapshot_id: int) -> list[dict]:
    table = catalog.pyiceberg_catalog().load_table(table_name)
    return sorted_rows(table.scan(snapshot_id=snapshot_id).to_arrow().to_pylist())


def delta_spark_rows(spark: SparkSession, delta_path: str, version: int) -> list[dict]:
    df = spark.read.format("delta").option("versionAsOf", version).load(str(delta_path))
    return sorted_rows(df.toArrow().to_pylist())
