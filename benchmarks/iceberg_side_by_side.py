"""Side by side with Iceberg's own DELETE (issue 18; `make bench`, or alone
`.venv/bin/python benchmarks/bench.py --only iceberg`).

The same rows (ROWS rows, `id` and a 64-character `payload`, written by one Spark task per file, so each
file holds a contiguous range of ids) as a Delta table with deletion vectors on (written by Delta Spark)
and as Iceberg v3 and v2 tables with `write.delete.mode=merge-on-read` (written by Iceberg's Spark
writer), at 400 and at 10,000 files. Then the same 1% DELETE, `id % 100 = 0`, which touches every file:
once on the Delta table, mirrored into a v3 and a v2 mirror; and on each Iceberg table, Iceberg's own
Spark DELETE. The figure is the mirror's per-version seconds (the sync's VersionResult.seconds of the
Delta DELETE version) over the wall time of Iceberg's DELETE statement, each the median of `repeats`.

Each repetition mirrors the same Delta DELETE version into fresh mirrors (synced to the version before
first, untimed), so every repetition does the same work; each Iceberg repetition first rolls the table
back to its snapshot before the DELETE (merge-on-read leaves the data files as they were). Every count is
compared after every repetition: Delta Spark's, each mirror's through Iceberg Java (Spark on the
`dvmirror` catalog), each Iceberg table's; and the DELETE must have given every file of the Delta table a
DV and written ROWS / 100 position deletes in Iceberg. A mismatch fails the bench. Everything runs in the
bench's one Spark session (its small-machine settings: 2 shuffle partitions), Spark start-up excluded.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from benchmarks.figures import Figure
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.sync import sync_table

ROWS = 2_000_000
FILE_COUNTS = (400, 10_000)
DELETE_WHERE = "id % 100 = 0"
DELETED = ROWS // 100
NAMESPACE = "dvmirror.iceberg_side"  # Iceberg's own tables; the mirrors go to `bench`
FORMAT_VERSIONS = (3, 2)


def _rows(spark: SparkSession, files: int) -> DataFrame:
    """ROWS rows in `files` Spark partitions of contiguous ids: one file each, each hit by the DELETE."""
    return spark.range(0, ROWS, 1, files).selectExpr("id", "sha2(CAST(id AS STRING), 256) AS payload")


def _fail_unless(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(f"side by side with Iceberg: {what}")


def _write_delta(spark: SparkSession, root: Path, files: int) -> float:
    began = time.monotonic()
    spark.sql(
        f"CREATE TABLE delta.`{root}` (id BIGINT, payload STRING) USING delta "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    _rows(spark, files).write.format("delta").mode("append").save(str(root))
    seconds = time.monotonic() - began
    (detail,) = spark.sql(f"DESCRIBE DETAIL delta.`{root}`").collect()
    _fail_unless(detail["numFiles"] == files, f"Delta wrote {detail['numFiles']} files, not {files}")
    return seconds


def _write_iceberg(spark: SparkSession, table: str, files: int, format_version: int) -> int:
    """The Iceberg table of the same rows; its snapshot id before any DELETE."""
    spark.sql(
        f"CREATE TABLE {table} (id BIGINT, payload STRING) USING iceberg TBLPROPERTIES "
        f"('format-version' = '{format_version}', 'write.delete.mode' = 'merge-on-read')"
    )
    _rows(spark, files).writeTo(table).option("distribution-mode", "none").append()
    written = spark.sql(f"SELECT count(*) AS n FROM {table}.files").collect()[0]["n"]
    _fail_unless(written == files, f"Iceberg wrote {written} files to {table}, not {files}")
    return _current_snapshot(spark, table)


def _current_snapshot(spark: SparkSession, table: str) -> int:
    (row,) = spark.sql(
        f"SELECT snapshot_id FROM {table}.history WHERE is_current_ancestor "
        "ORDER BY made_current_at DESC LIMIT 1"
    ).collect()
    return int(row["snapshot_id"])


def _iceberg_delete(spark: SparkSession, table: str) -> float:
    """Iceberg's own DELETE, timed; it must have written the deleted rows as position deletes."""
    began = time.monotonic()
    spark.sql(f"DELETE FROM {table} WHERE {DELETE_WHERE}")
    seconds = time.monotonic() - began
    (row,) = spark.sql(
        f"SELECT s.summary FROM {table}.snapshots s JOIN {table}.history h ON s.snapshot_id = h.snapshot_id "
        "WHERE h.is_current_ancestor ORDER BY h.made_current_at DESC LIMIT 1"
    ).collect()
    added = int(dict(row["summary"]).get("added-position-deletes", 0))
    _fail_unless(
        added == DELETED, f"Iceberg's DELETE on {table} wrote {added} position deletes, not {DELETED}"
    )
    return seconds


def _count(spark: SparkSession, table: str) -> int:
    return spark.table(table).count()


def side_by_side(spark: SparkSession, tmp: Path, files: int, repeats: int) -> list[Figure]:
    root = tmp / f"side_by_side_{files}"
    delta_write = _write_delta(spark, root, files)
    before = DeltaTable(root).latest_version()
    began = time.monotonic()
    spark.sql(f"DELETE FROM delta.`{root}` WHERE {DELETE_WHERE}")
    delta_delete = time.monotonic() - began
    version = DeltaTable(root).latest_version()
    _fail_unless(version == before + 1, f"Delta's DELETE made versions {before + 1}..{version}")
    delta_count = spark.read.format("delta").load(str(root)).count()
    _fail_unless(
        delta_count == ROWS - DELETED, f"Delta Spark counts {delta_count} rows, not {ROWS - DELETED}"
    )

    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NAMESPACE}")
    began = time.monotonic()
    iceberg = {fmt: f"{NAMESPACE}.t{files}_v{fmt}" for fmt in FORMAT_VERSIONS}
    before_delete = {fmt: _write_iceberg(spark, table, files, fmt) for fmt, table in iceberg.items()}
    iceberg_write = time.monotonic() - began

    mirror_seconds: dict[int, list[float]] = {fmt: [] for fmt in FORMAT_VERSIONS}
    iceberg_seconds: dict[int, list[float]] = {fmt: [] for fmt in FORMAT_VERSIONS}
    for repeat in range(repeats):
        for fmt, table in iceberg.items():
            if repeat:
                name = table.removeprefix("dvmirror.")
                spark.sql(f"CALL dvmirror.system.rollback_to_snapshot('{name}', {before_delete[fmt]})")
                restored = _count(spark, table)
                _fail_unless(restored == ROWS, f"{table} rolled back counts {restored} rows, not {ROWS}")
            iceberg_seconds[fmt].append(_iceberg_delete(spark, table))
            counted = _count(spark, table)
            _fail_unless(
                counted == delta_count, f"Iceberg counts {counted} rows in {table}, Delta {delta_count}"
            )
        for fmt in FORMAT_VERSIONS:
            mirror = f"bench.side_{files}_v{fmt}_r{repeat}"
            sync_table(spark, root, mirror, format_version=fmt, until_version=before)
            result = sync_table(spark, root, mirror, until_version=version)
            (mirrored,) = result.versions
            _fail_unless(
                mirrored.dvs_written == files,
                f"the mirror {mirror} wrote {mirrored.dvs_written} DVs for a DELETE of all {files} files",
            )
            _fail_unless(
                mirrored.rows_deleted_by_new_dvs == DELETED,
                f"the mirror {mirror} deleted {mirrored.rows_deleted_by_new_dvs} rows, not {DELETED}",
            )
            mirror_seconds[fmt].append(mirrored.seconds)
            counted = _count(spark, f"dvmirror.{mirror}")
            _fail_unless(
                counted == delta_count, f"Iceberg Java counts {counted} rows in {mirror}, Delta {delta_count}"
            )
    print(
        f"  {ROWS:,} rows in {files:,} files: written by Delta Spark in {delta_write:.1f} s, by Iceberg "
        f"(v3 and v2) in {iceberg_write:.1f} s; Delta's own DELETE {delta_delete:.2f} s; "
        f"every count {delta_count:,}"
    )
    figures = []
    for fmt in FORMAT_VERSIONS:
        mirror, own = statistics.median(mirror_seconds[fmt]), statistics.median(iceberg_seconds[fmt])
        print(
            f"    v{fmt}: mirroring the Delta DELETE {mirror:.2f} s ("
            + ", ".join(f"{s:.2f}" for s in mirror_seconds[fmt])
            + f"), Iceberg's own DELETE {own:.2f} s ("
            + ", ".join(f"{s:.2f}" for s in iceberg_seconds[fmt])
            + f"); median of {repeats}"
        )
        figures.append(
            Figure(
                f"mirroring a 1% DELETE vs Iceberg's own, v{fmt}, {files:,} files",
                mirror / own,
                "of Iceberg",
                0.25,
                True,
            )
        )
    return figures


def iceberg_side_by_side_figures(spark: SparkSession, tmp: Path, repeats: int = 3) -> list[Figure]:
    """The four ratios: v3 and v2, at each of FILE_COUNTS touched files."""
    figures: list[Figure] = []
    for files in FILE_COUNTS:
        figures += side_by_side(spark, tmp, files, repeats)
    return figures
