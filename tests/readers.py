"""Reading the mirror back with readers dv-mirror did not write: Iceberg Java (Spark) and pyiceberg."""

from __future__ import annotations

import datetime as dt
import json
import os
from decimal import Decimal
from typing import Any

from pyspark.sql import SparkSession

from dv_assets.iceberg.commit import DELTA_VERSION_PROPERTY
from resources.spark import ICEBERG_CATALOG_NAME, CatalogLocation

# Delta Spark may write timestamps as Parquet INT96 (nanoseconds). Iceberg Java reads those as
# timestamptz; pyiceberg does so for v3 tables only with this switch (it is on by default for v2).
os.environ.setdefault("PYICEBERG_DOWNCAST_NS_TIMESTAMP_TO_US_ON_WRITE", "true")


def normalize(value: Any) -> Any:
    """One comparable form for values from Spark, pyarrow and the fixtures' JSON lines."""
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        return str(aware.astimezone(dt.UTC))
    if isinstance(value, Decimal | dt.date):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [normalize(v) for v in value]
    if hasattr(value, "asDict"):
        return normalize(value.asDict(recursive=True))
    return value


def sorted_rows(rows: list[dict]) -> list[dict]:
    normalized = [normalize(r) for r in rows]
    return sorted(normalized, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def snapshots_by_delta_version(catalog: CatalogLocation, table_name: str) -> dict[int, int]:
    """Delta version → Iceberg snapshot id, from the snapshot summaries, as pyiceberg sees them."""
    table = catalog.pyiceberg_catalog().load_table(table_name)
    found: dict[int, int] = {}
    for snapshot in table.snapshots():
        version = int(snapshot.summary[DELTA_VERSION_PROPERTY])
        assert version not in found, f"two snapshots for Delta version {version}"
        found[version] = snapshot.snapshot_id
    return found


def iceberg_java_rows(spark: SparkSession, table_name: str, snapshot_id: int) -> list[dict]:
    df = spark.read.option("versionAsOf", snapshot_id).table(f"{ICEBERG_CATALOG_NAME}.{table_name}")
    return sorted_rows([r.asDict(recursive=True) for r in df.collect()])


def pyiceberg_rows(catalog: CatalogLocation, table_name: str, snapshot_id: int) -> list[dict]:
    table = catalog.pyiceberg_catalog().load_table(table_name)
    return sorted_rows(table.scan(snapshot_id=snapshot_id).to_arrow().to_pylist())


def delta_spark_rows(spark: SparkSession, delta_path: str, version: int) -> list[dict]:
    df = spark.read.format("delta").option("versionAsOf", version).load(str(delta_path))
    return sorted_rows([r.asDict(recursive=True) for r in df.collect()])
