"""A first version's data files go straight into manifests (`IcebergJava._stage_data_manifests`, the
JVM's `ContentFileBatch.stageDataManifests`), closed at a target size: the snapshot is the one the row
delta gives when it holds every data file itself (files, counts, metrics, partitions, DVs, summary), it
reads back the same through Iceberg Java, and a commit that fails leaves none of those manifests, nor
does a first version whose data files fail part-way while they are staged."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from benchmarks.million import CHECKPOINT_VERSION, FILES_PER_DELETE, FIRST_DV, ROWS_PER_FILE, build
from dv_assets.mirror.errors import MirrorConflictError
from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.settings import CatalogConfig
from dv_assets.mirror.sync import sync_table
from tests.helpers.faults import FailWhileStaging, RaceAfterStaging
from tests.helpers.paths import DELTA_FIXTURES, expected_rows
from tests.helpers.readers import current_snapshot_id, iceberg_java_rows
from tests.helpers.rows import sorted_rows

pytestmark = pytest.mark.spark

# Summary keys that count manifests, which differ by design (many small manifests against one).
MANIFEST_COUNTS = {"manifests-created", "manifests-kept", "manifests-replaced", "entries-processed"}


def _files(spark: SparkSession, table: str, snapshot_id: int) -> list[dict]:
    """The snapshot's content files, every column of Iceberg Java's `files` metadata table (paths,
    partitions, counts, sizes, metrics and bounds, DV offsets, first row ids); a delete file, which the
    mirror writes under the table's own folder with a name of its own, by its folder's name only."""
    rows = [
        row.asDict(recursive=True)
        for row in spark.sql(f"SELECT * FROM dvmirror.{table}.files VERSION AS OF {snapshot_id}").collect()
    ]
    for row in rows:
        if row["content"] != 0:
            row["file_path"] = Path(row["file_path"]).parent.name
    return sorted_rows(rows)


def _summary(spark: SparkSession, table: str, snapshot_id: int) -> dict[str, str]:
    (row,) = spark.sql(
        f"SELECT summary FROM dvmirror.{table}.snapshots WHERE snapshot_id = {snapshot_id}"
    ).collect()
    return dict(row["summary"])


def _data_manifests(spark: SparkSession, table: str, snapshot_id: int) -> list[str]:
    rows = spark.sql(
        f"SELECT path FROM dvmirror.{table}.all_manifests WHERE content = 0 "
        f"AND reference_snapshot_id = {snapshot_id}"
    ).collect()
    return [row["path"] for row in rows]


def _first_snapshot(spark: SparkSession, table: str) -> int:
    (row,) = spark.sql(
        f"SELECT snapshot_id FROM dvmirror.{table}.snapshots WHERE parent_id IS NULL"
    ).collect()
    return int(row["snapshot_id"])


def _mirror_both_ways(spark: SparkSession, root: Path, name: str, **sync_args) -> tuple[str, str]:
    """The Delta table mirrored into `<name>_rows` (the row delta holds every data file) and into
    `<name>_manifests` (data manifests of at most 250 files: the writer checks its size every 250)."""
    held, streamed = f"first_version.{name}_rows", f"first_version.{name}_manifests"
    sync_table(spark, root, held, iceberg=IcebergJava(spark, data_manifests=False), **sync_args)
    sync_table(spark, root, streamed, iceberg=IcebergJava(spark, manifest_target_bytes=1), **sync_args)
    return held, streamed


def _assert_same_snapshot(spark: SparkSession, held: str, streamed: str, snapshots: tuple[int, int]) -> dict:
    held_id, streamed_id = snapshots
    assert _files(spark, streamed, streamed_id) == _files(spark, held, held_id)
    held_summary = _summary(spark, held, held_id)
    streamed_summary = _summary(spark, streamed, streamed_id)
    assert {k: v for k, v in streamed_summary.items() if k not in MANIFEST_COUNTS} == {
        k: v for k, v in held_summary.items() if k not in MANIFEST_COUNTS
    }
    assert iceberg_java_rows(spark, streamed, streamed_id) == iceberg_java_rows(spark, held, held_id)
    return streamed_summary


def test_a_first_version_of_many_manifests_is_the_snapshot_of_the_row_delta(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The million bench's table at 600 files (a checkpoint, 100 files with a DV): its first version,
    the checkpoint's whole state, in three data manifests of the mirror's own."""
    root = tmp_path / "t"
    build(root, 600, repeats=1)
    deleted = FILES_PER_DELETE * CHECKPOINT_VERSION * len(FIRST_DV)  # at the checkpoint's version
    held, streamed = _mirror_both_ways(spark, root, "synthetic", until_version=CHECKPOINT_VERSION)
    first = (_first_snapshot(spark, held), _first_snapshot(spark, streamed))
    summary = _assert_same_snapshot(spark, held, streamed, first)

    assert {key: summary[key] for key in ("added-data-files", "total-data-files")} == {
        "added-data-files": "600",
        "total-data-files": "600",
    }
    assert int(summary["added-records"]) == int(summary["total-records"]) == 600 * ROWS_PER_FILE
    sizes = sum(row["file_size_in_bytes"] for row in _files(spark, streamed, first[1]) if row["content"] == 0)
    assert int(summary["added-files-size"]) > sizes  # the data files and the Puffin file of the DVs
    assert int(summary["total-position-deletes"]) == deleted
    assert summary["changed-partition-count"] == "1"
    manifests = _data_manifests(spark, streamed, first[1])
    assert len(manifests) == 3
    assert all(Path(m).name.startswith("dvmirror-") and "/metadata/" in m for m in manifests)
    assert len(_data_manifests(spark, held, first[0])) == 1
    rows = spark.table(f"dvmirror.{streamed}").count()
    assert rows == 600 * ROWS_PER_FILE - deleted

    # The next version goes on top as before: its DELETE is mirrored the same way on both.
    sync_table(spark, root, held)
    sync_table(spark, root, streamed)
    latest = (current_snapshot_id(spark, held), current_snapshot_id(spark, streamed))
    _assert_same_snapshot(spark, held, streamed, latest)  # type: ignore[arg-type]


def test_a_partitioned_first_version_with_dvs_and_stats(spark: SparkSession) -> None:
    """Delta Spark's partitioned table: partitions, bounds from its stats, DVs; every version after."""
    fixture = "dv-partitioned-with-checkpoint"
    held, streamed = _mirror_both_ways(spark, DELTA_FIXTURES / fixture, "partitioned", until_version=0)
    first = (_first_snapshot(spark, held), _first_snapshot(spark, streamed))
    summary = _assert_same_snapshot(spark, held, streamed, first)
    assert int(summary["changed-partition-count"]) > 1
    assert any(row["lower_bounds"] for row in _files(spark, streamed, first[1]))
    assert sorted_rows(iceberg_java_rows(spark, streamed, first[1])) == expected_rows(fixture, 0)
    sync_table(spark, DELTA_FIXTURES / fixture, held)
    sync_table(spark, DELTA_FIXTURES / fixture, streamed)
    latest = (current_snapshot_id(spark, held), current_snapshot_id(spark, streamed))
    _assert_same_snapshot(spark, held, streamed, latest)  # type: ignore[arg-type]


def test_the_manifests_of_a_first_version_that_did_not_land_are_deleted(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = tmp_path / "t"
    build(root, 300, repeats=0)
    table = "first_version.raced"
    iceberg = RaceAfterStaging(spark, root, table, until_version=CHECKPOINT_VERSION)
    with pytest.raises(MirrorConflictError, match="another writer committed"):
        sync_table(spark, root, table, iceberg=iceberg, until_version=CHECKPOINT_VERSION)
    assert len(iceberg.staged) == 2
    assert not any(Path(m.removeprefix("file:")).exists() for m in iceberg.staged)
    # The other sync's commit stands, whole.
    summary = _summary(spark, table, current_snapshot_id(spark, table))  # type: ignore[arg-type]
    assert summary["total-data-files"] == "300"


def test_data_files_that_fail_part_way_leave_no_manifest_and_no_snapshot(
    spark: SparkSession, catalog: CatalogConfig, tmp_path: Path
) -> None:
    """The 261st data file fails in Python while the data files are staged for the JVM: the error is
    Python's, no manifest is written, the table has no snapshot; a rerun mirrors the version whole."""
    root = tmp_path / "t"
    build(root, 300, repeats=0)
    table = "first_version.broken_stream"
    with pytest.raises(RuntimeError, match="injected: data file 260 failed"):
        sync_table(
            spark, root, table, iceberg=FailWhileStaging(spark, after=260), until_version=CHECKPOINT_VERSION
        )
    assert current_snapshot_id(spark, table) is None
    manifests = Path(catalog.warehouse) / "first_version" / "broken_stream" / "metadata"
    assert not list(manifests.glob("dvmirror-*-m*.avro"))
    sync_table(spark, root, table, until_version=CHECKPOINT_VERSION)
    assert len(list(manifests.glob("dvmirror-*-m*.avro"))) == 1  # where they would have been
    summary = _summary(spark, table, current_snapshot_id(spark, table))  # type: ignore[arg-type]
    assert summary["total-data-files"] == "300"
