"""A column that was optional in any schema of the table's history stays optional in the mirror.

The case of issue 36: a partitioned Delta table with `x STRING NOT NULL`, a CREATE OR REPLACE that makes
`x` nullable and writes nulls, then a RESTORE to a version of the first schema, which makes `x` NOT NULL
again in Delta. Had the mirror's current schema `x` required again (same field id), Iceberg Java 1.12
would answer `VERSION AS OF <an older snapshot> WHERE x IS NULL` wrongly: `BaseSparkScanBuilder` binds
the pushed filter to the table's *current* schema, where `x IS NULL` on a required column folds to
false, and Spark drops its own filter. The mirror keeps `x` optional (`iceberg/schema.py`, `evolve`), so
every reader answers `IS NULL` / `IS NOT NULL` at every version as Delta does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table
from dv_assets.mirror.settings import ICEBERG_CATALOG_NAME
from tests.helpers.delta_histories import delta_ref, fast_spark, latest_version, mirror, tblproperties
from tests.helpers.readers import shared_duckdb
from tests.helpers.rows import sorted_rows

PREDICATES = ("x IS NULL", "x IS NOT NULL")


def _nullable_then_restored(spark, root: Path) -> int:
    """The history of the issue; the version of the RESTORE."""
    ref = delta_ref(root)
    props = tblproperties()
    spark.sql(
        f"CREATE TABLE {ref} (id BIGINT, p INT, x STRING NOT NULL) USING delta PARTITIONED BY (p) "
        f"TBLPROPERTIES ({props})"
    )  # 0
    spark.sql(
        f"INSERT INTO {ref} SELECT /*+ REPARTITION(2) */ id, CAST(id % 3 AS INT), concat('a', id) "
        "FROM range(0, 30) t(id)"
    )  # 1
    spark.sql(f"DELETE FROM {ref} WHERE id % 5 = 0")  # 2: deletion vectors
    spark.sql(
        f"CREATE OR REPLACE TABLE {ref} USING delta PARTITIONED BY (p) TBLPROPERTIES ({props}) AS SELECT "
        "/*+ REPARTITION(2) */ id, CAST(id % 3 AS INT) AS p, "
        "CASE WHEN id % 4 = 0 THEN NULL ELSE concat('b', id) END AS x FROM range(0, 40) t(id)"
    )  # 3: x nullable, 10 nulls
    spark.sql(f"DELETE FROM {ref} WHERE id % 7 = 1")  # 4
    spark.sql(f"RESTORE TABLE {ref} TO VERSION AS OF 2")  # 5: x NOT NULL again
    spark.sql(f"INSERT INTO {ref} SELECT id, CAST(id % 3 AS INT), concat('c', id) FROM range(50, 55) t(id)")
    return 5


@pytest.mark.extended  # minutes on a loaded 2-core machine: make test-extended (CI too)
def test_a_column_made_not_null_again_by_restore_stays_optional(spark, catalog, tmp_path: Path) -> None:
    root = tmp_path / "restored"
    with fast_spark(spark):
        restore = _nullable_then_restored(spark, root)
        latest = latest_version(root)
        schemas = {
            v: {
                f.name: f.nullable
                for f in spark.read.format("delta").option("versionAsOf", v).load(str(root)).schema
            }
            for v in (0, 3, restore)
        }
        assert [s["x"] for s in schemas.values()] == [False, True, False], schemas  # the case as Delta has it

        mirrored = mirror(spark, root, "nullability.restored", 3, split_at=[restore - 1])
        assert sorted(mirrored.snapshots) == list(range(latest + 1))

        table = read_mirror_table(catalog, "nullability.restored")
        assert table is not None
        (x,) = [f for f in table.schema.fields if f.name == "x"]
        first_x = next(f for f in table.schemas[0].fields if f.name == "x")
        assert (x.id, x.required) == (first_x.id, False), table.schema  # the same column, optional for good
        assert first_x.required  # NOT NULL kept where it always held: the versions before the replacement

        # Per version: Delta's rows read once (filtered here), Iceberg Java through Spark SQL's time travel
        # (the filter pushed to its scan, as the issue read it), DuckDB and pyiceberg with the filter in
        # their scans.
        iceberg = catalog.pyiceberg_catalog().load_table("nullability.restored")
        compared, nulls = 0, 0
        for version, snapshot_id in sorted(mirrored.snapshots.items()):
            delta = spark.read.format("delta").option("versionAsOf", version).load(str(root))
            rows = delta.toArrow().to_pylist()
            for predicate, wanted in (("x IS NULL", True), ("x IS NOT NULL", False)):
                expected = sorted_rows(r for r in rows if (r["x"] is None) == wanted)
                nulls += len(expected) if wanted else 0
                java = spark.sql(
                    f"SELECT * FROM {ICEBERG_CATALOG_NAME}.nullability.restored VERSION AS OF {snapshot_id} "
                    f"WHERE {predicate}"
                )
                duckdb = shared_duckdb().execute(
                    f"SELECT * FROM iceberg_scan(?, snapshot_from_id := ?) WHERE {predicate}",
                    [iceberg.metadata_location, snapshot_id],
                )
                scan = iceberg.scan(row_filter=predicate, snapshot_id=snapshot_id)
                reads = {
                    "Iceberg Java": sorted_rows(java.toArrow().to_pylist()),
                    "DuckDB": sorted_rows(duckdb.to_arrow_table().to_pylist()),
                    "pyiceberg": sorted_rows(scan.to_arrow().to_pylist()),
                }
                for reader, got in reads.items():
                    assert got == expected, (
                        f"v{version} WHERE {predicate}: {reader} {len(got)} rows, Delta {len(expected)}"
                    )
                compared += 1
        assert compared == 2 * (latest + 1) and nulls > 0  # the case has nulls to find
