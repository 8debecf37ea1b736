"""With Spark: each conformance fixture mirrored one version per run (every run after a checkpoint takes
the restricted replay and a bounded listing of `_delta_log`, and reads the checkpoint through the index the
run that reached it built) gives the snapshots, content files and rows of the mirror made in one run."""

from __future__ import annotations

from pathlib import Path

import pytest

from dv_assets.mirror.delta.checkpoint_index import FOLDER_PREFIX, CheckpointIndexes
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.errors import InvalidDeletionVectorError
from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.iceberg.layout import MirrorLayout
from dv_assets.mirror.iceberg.maintenance import Retention, expire_and_reclaim
from dv_assets.mirror.settings import ICEBERG_CATALOG_NAME
from dv_assets.mirror.sync import sync_table
from tests.conformance.test_fixtures import MALFORMED
from tests.helpers.paths import (
    DELTA_FIXTURES,
    conformance_table,
    expected_rows,
    expected_versions,
    fixture_tables,
)
from tests.helpers.readers import iceberg_java_rows, snapshots_by_delta_version

CHECKPOINTED = {"basic-dv-with-checkpoint", "dv-partitioned-with-checkpoint"}
LONG = {"basic-dv-with-checkpoint"}


def content_files(spark, table_name: str, snapshot_id: int) -> list[tuple]:
    """A snapshot's data files (by path) and delete files (by the data file they reference, with their
    record count and blob size: their own paths differ from mirror to mirror), sorted."""
    files = spark.sql(
        "SELECT content, IF(content = 0, file_path, referenced_data_file) AS file, record_count, "
        f"IF(content = 0, NULL, content_size_in_bytes) AS blob_bytes "
        f"FROM {ICEBERG_CATALOG_NAME}.{table_name}.files VERSION AS OF {snapshot_id}"
    ).collect()
    return sorted(tuple(row) for row in files)


@pytest.mark.spark
@pytest.mark.parametrize(
    ("table", "format_version"),
    [
        pytest.param(t, 3, marks=[pytest.mark.slow] if t in LONG else [])  # 40 runs of their own: ~1 min
        for t in fixture_tables()
    ]
    + [("dv-partitioned-with-checkpoint", 2)],
)
def test_one_version_per_run_equals_one_run(
    spark, catalog, table: str, format_version: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    delta_path = DELTA_FIXTURES / table
    versions = expected_versions(table)
    if table == MALFORMED[0]:
        versions = [v for v in versions if v < MALFORMED[1]]
    one_run = conformance_table(table, format_version) + "_one_run"
    per_version = conformance_table(table, format_version) + "_per_version"
    sync_table(spark, delta_path, one_run, format_version=format_version, until_version=versions[-1])

    restricted: list[int] = []  # the versions the restricted replay handed out
    changes = DeltaTable._restricted_changes

    def recorded(self, *args, **kwargs):
        for change in changes(self, *args, **kwargs):
            restricted.append(change.version)
            yield change

    monkeypatch.setattr(DeltaTable, "_restricted_changes", recorded)
    index_reads: list[bool] = []  # each read of a checkpoint's index: whether it answered
    read = CheckpointIndexes.read

    def read_recorded(self, index, candidates):
        actions = read(self, index, candidates)
        index_reads.append(actions is not None)
        return actions

    monkeypatch.setattr(CheckpointIndexes, "read", read_recorded)
    for version in versions:
        result = sync_table(
            spark, delta_path, per_version, format_version=format_version, until_version=version
        )
        assert [v.delta_version for v in result.versions] == [version]
    if table == MALFORMED[0]:
        with pytest.raises(InvalidDeletionVectorError, match=f"version {MALFORMED[1]}"):
            sync_table(spark, delta_path, per_version, format_version=format_version)
    iceberg = IcebergJava(spark)
    index_dir = Path(
        MirrorLayout(iceberg.load(per_version).location).checkpoint_index_dir.removeprefix("file:")
    )
    if table in CHECKPOINTED:
        checkpoint = 10  # both fixtures' first checkpoint: every run after it replays restricted
        assert restricted == [v for v in versions if v > checkpoint]
        # The run that mirrored the checkpoint's version indexed it; every later run read it so.
        assert index_reads == [True] * len(restricted)
        checkpoints = [int(p.name[:20]) for p in (delta_path / "_delta_log").glob("*.checkpoint.parquet")]
        last = max(c for c in checkpoints if c <= max(versions))
        (newest,) = index_dir.iterdir()  # older checkpoints' indexes removed
        assert newest.name.startswith(f"{FOLDER_PREFIX}{last:020d}-")
    else:
        assert restricted == index_reads == []

    ours, theirs = (
        snapshots_by_delta_version(catalog, per_version),
        snapshots_by_delta_version(catalog, one_run),
    )
    assert sorted(ours) == sorted(theirs) == versions
    for version in versions:
        assert content_files(spark, per_version, ours[version]) == content_files(
            spark, one_run, theirs[version]
        )
        assert iceberg_java_rows(spark, per_version, ours[version]) == expected_rows(table, version), version
    if table in CHECKPOINTED:
        # The mirror's maintenance leaves the index alone (it is neither a delete file nor metadata).
        before = sorted(p.name for p in index_dir.rglob("*"))
        report = expire_and_reclaim(iceberg, per_version, Retention(retain_last=1, orphan_min_age_hours=1))
        assert report.expired_snapshot_ids and sorted(p.name for p in index_dir.rglob("*")) == before
