"""The bench's synthetic tables (tests/helpers/delta_log.py `SyntheticTable`) with hard-linked data
files, Delta Spark's classic checkpoint and a cleaned-up log read as delta-rs reads them."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from benchmarks.million import CHECKPOINT_VERSION, build, check_with_delta_rs
from dv_assets.mirror.delta.replay import DeltaTable
from tests.helpers.delta_log import DELTA_SPARK_CHECKPOINT_SCHEMA, SyntheticTable, assert_matches_delta_rs
from tests.helpers.paths import DELTA_FIXTURES


def test_checkpoint_schema_is_delta_sparks() -> None:
    written_by_spark = (
        DELTA_FIXTURES / "basic-dv-with-checkpoint" / "_delta_log" / f"{10:020d}.checkpoint.parquet"
    )
    assert pq.read_schema(written_by_spark).remove_metadata() == DELTA_SPARK_CHECKPOINT_SCHEMA


def test_linked_files_checkpoint_and_cleanup_read_as_delta_rs_reads_them(tmp_path: Path) -> None:
    table = SyntheticTable(tmp_path / "t", rows_per_file=20)
    table.create(30, real=5)
    for version in range(1, 4):
        table.delete(table.files[version - 1 : version + 1], lambda i, v=version: range(0, 20, 5 - v))
    checkpoint = table.write_checkpoint()
    table.clean_up_log()
    table.delete(table.files[:2], lambda _i: range(0, 20, 2))

    sizes = {(table.root / name).stat().st_size for name in table.files}
    assert sizes == {len(table.content)}
    links = [(table.root / name).stat().st_nlink for name in table.files]
    assert links[:5] == [1] * 5 and links[5:] == [25] * 25  # the first linked file and its 24 links
    assert pq.read_metadata(checkpoint).num_rows == 2 + 30
    delta = DeltaTable(table.root)
    assert (delta.oldest_version(), delta.latest_version()) == (3, 4)
    assert not (table.root / "_delta_log" / f"{2:020d}.json").exists()
    at_checkpoint = assert_matches_delta_rs(delta, table.root, 3)
    assert len(at_checkpoint.files) == 30
    assert {
        Path(loc).name: f.deletion_vector.cardinality
        for loc, f in at_checkpoint.files.items()
        if f.deletion_vector
    } == {
        table.files[0]: 5,
        table.files[1]: 7,
        table.files[2]: 10,
        table.files[3]: 10,
    }
    assert_matches_delta_rs(delta, table.root, 4)
    assert os.path.samefile(table.root / table.files[5], table.root / table.files[29])


def test_the_million_bench_table_is_checked_with_delta_rs(tmp_path: Path) -> None:
    """benchmarks/million.py's table, at 300 files: delta-rs reads what the builder meant, and the check
    fails on a file count or a deleted-row count that is off."""
    root = tmp_path / "t"
    deleted = build(root, 300, repeats=2)
    latest = CHECKPOINT_VERSION + 2
    assert DeltaTable(root).oldest_version() == CHECKPOINT_VERSION
    assert len(deleted) == 100 and sum(deleted.values()) == 20 * 20 + 80 * 10
    check_with_delta_rs(root, 300, latest, deleted)
    with pytest.raises(AssertionError, match="files"):
        check_with_delta_rs(root, 301, latest, deleted)
    with pytest.raises(AssertionError, match="deleted rows"):
        check_with_delta_rs(root, 300, latest, {**deleted, next(iter(deleted)): 11})
