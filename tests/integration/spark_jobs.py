"""Spark programs the integration tests run in a process of their own (a process holds one Spark
session and one catalog): write a Delta table with deletion vectors through Hadoop's S3A, GCS connector
or ABFS, and read a mirror back with Iceberg Java. Each prints JSON on its last stdout line.

    python -m tests.integration.spark_jobs write-delta URI [--catalog-property K=V ...]
    python -m tests.integration.spark_jobs read-iceberg NS.TABLE [--catalog-property K=V ...]
"""

from __future__ import annotations

import argparse
import json

from dv_assets.mirror.iceberg.mirror_table import DELTA_VERSION_SUMMARY
from dv_assets.mirror.settings import ICEBERG_CATALOG_NAME, MirrorSettings, parse_property
from dv_assets.mirror.spark import get_or_create_spark
from tests.helpers.readers import delta_spark_rows
from tests.helpers.rows import sorted_rows

# A small history with every kind of DV change: DELETEs (new DVs, a DV growing), an UPDATE (DV + new
# file), and an OPTIMIZE-free append, on a partitioned table.
DML = (
    "CREATE TABLE delta.`{path}` (id BIGINT, name STRING, part INT) USING delta PARTITIONED BY (part) "
    "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
    "INSERT INTO delta.`{path}` SELECT id, concat('n', id), CAST(id % 3 AS INT) FROM range(0, 300)",
    "DELETE FROM delta.`{path}` WHERE id % 10 = 0",
    "INSERT INTO delta.`{path}` SELECT id, concat('m', id), CAST(id % 3 AS INT) FROM range(300, 400)",
    "DELETE FROM delta.`{path}` WHERE id % 7 = 1",
    "UPDATE delta.`{path}` SET name = 'updated' WHERE id % 11 = 2",
)


def write_delta(spark, path: str) -> dict[int, list[dict]]:
    """Run the DML through Delta Spark; the rows of every version, as Delta Spark reads them."""
    for statement in DML:
        spark.sql(statement.format(path=path))
    latest = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").agg({"version": "max"}).collect()[0][0]
    dvs = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]
    assert "deletionVectors" in dvs["tableFeatures"], dvs["tableFeatures"]
    return {v: delta_spark_rows(spark, path, v) for v in range(latest + 1)}


def read_iceberg(spark, table: str) -> dict[int, list[dict]]:
    """Rows of every mirrored Delta version, read by Iceberg Java at the snapshot that records it."""
    name = f"{ICEBERG_CATALOG_NAME}.{table}"
    found: dict[int, list[dict]] = {}
    for row in spark.sql(f"SELECT snapshot_id, summary FROM {name}.snapshots").collect():
        version = row["summary"].get(DELTA_VERSION_SUMMARY)
        if version is not None:
            df = spark.sql(f"SELECT * FROM {name} VERSION AS OF {row['snapshot_id']}")
            found[int(version)] = sorted_rows(df.toArrow().to_pylist())
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("job", choices=("write-delta", "read-iceberg"))
    parser.add_argument("target")
    parser.add_argument("--catalog-property", action="append", default=[])
    args = parser.parse_args()
    properties = dict(parse_property(p) for p in args.catalog_property)
    settings = MirrorSettings.resolve(catalog_properties=properties).for_location(args.target)
    spark = get_or_create_spark(settings)
    if args.job == "write-delta":
        result = write_delta(spark, args.target)
    else:
        result = read_iceberg(spark, args.target)
    print(json.dumps({str(k): v for k, v in result.items()}))
    spark.stop()


if __name__ == "__main__":
    main()
