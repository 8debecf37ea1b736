"""`dv_assets.mirror.range_sync` without Dagster: a run over a range of Delta versions on a real local
Delta table and a real mirror says what became of each version of the range (mirrored, below the range
first, already held, expired, absent) and keeps the versions committed before a failure."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.dv.reader import resolve_dv_location
from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.iceberg.maintenance import Retention, expire_and_reclaim
from dv_assets.mirror.range_sync import current_after, read_back, sync_range

pytestmark = pytest.mark.spark


def _table() -> str:
    return f"range_sync.t{uuid.uuid4().hex[:10]}"


def test_a_range_mirrors_the_gap_below_it_then_holds_what_it_mirrored(spark, catalog, copy_fixture) -> None:
    delta = copy_fixture("dv-partitioned-with-checkpoint")
    table = _table()
    lines: list[str] = []
    first = sync_range(
        spark, [3, 4], delta_path=str(delta), iceberg_table=table, format_version=3, log=lines.append
    )
    assert first.error is None and first.absent == [] and first.latest == 15
    assert [r.delta_version for r in first.mirrored] == [0, 1, 2, 3, 4]
    assert [r.delta_version for r in first.mirrored_below] == [0, 1, 2]
    assert (first.span, first.existing, first.expired, first.vacuumed) == ("3..4", {}, [], [])
    assert sum(line.startswith("mirrored Delta version") for line in lines) == 5

    # The same range again: nothing to sync, both versions held with their snapshots.
    again = sync_range(spark, [3, 4], delta_path=str(delta), iceberg_table=table, format_version=3)
    assert again.mirrored == [] and again.absent == [] and again.latest is None
    assert sorted(again.existing) == [3, 4]
    assert {v: s.snapshot_id for v, s in again.existing.items()} == {
        r.delta_version: r.snapshot_id for r in first.mirrored if r.delta_version in (3, 4)
    }

    mirror, status = read_back(catalog, DeltaTable(str(delta)), table)
    assert (status.mirrored_version, status.delta_latest_version, status.lag_versions) == (4, 15, 11)
    # An older range: the mirror's current version (4) is recorded again after it, so it stays the latest.
    current = current_after(mirror, 2)
    assert current is not None and current.delta_version == 4
    assert current_after(mirror, 4) is None


def test_versions_delta_does_not_have_are_absent_after_the_others_are_mirrored(
    spark, catalog, copy_fixture
) -> None:
    delta = copy_fixture("table-with-dv-small")
    run = sync_range(spark, [1, 7], delta_path=str(delta), iceberg_table=_table(), format_version=3)
    assert run.error is None
    assert [r.delta_version for r in run.mirrored] == [0, 1]
    assert run.absent == [7]
    assert run.absent_text(str(delta)) == f"Delta version(s) 7 do not exist in {delta} (latest is 1)"


def test_expired_snapshots_are_held_as_expired_not_mirrored_again(spark, catalog, copy_fixture) -> None:
    delta = copy_fixture("dv-partitioned-with-checkpoint")
    table = _table()
    assert sync_range(spark, [5], delta_path=str(delta), iceberg_table=table, format_version=3).error is None
    expire_and_reclaim(IcebergJava(spark), table, Retention(retain_last=2, orphan_min_age_hours=1))
    lines: list[str] = []
    run = sync_range(
        spark, [2, 3, 4, 5], delta_path=str(delta), iceberg_table=table, format_version=3, log=lines.append
    )
    assert run.mirrored == [] and run.absent == []
    assert run.expired == [2, 3] and sorted(run.existing) == [4, 5]
    assert any("2, 3 already mirrored; their snapshots have expired" in line for line in lines)


def test_a_refusal_is_kept_with_the_versions_committed_before_it(spark, catalog, copy_fixture) -> None:
    delta = copy_fixture("dv-partitioned-with-checkpoint")
    # Version 3's DV file is gone: versions 0..2 are committed, 3 is refused.
    actions = [
        json.loads(line) for line in (delta / "_delta_log" / f"{3:020d}.json").read_text().splitlines()
    ]
    (dv,) = [a["add"]["deletionVector"] for a in actions if "add" in a]
    location = resolve_dv_location(str(delta), dv["storageType"], dv["pathOrInlineDv"])
    assert location is not None
    Path(location.removeprefix("file:")).unlink()
    run = sync_range(spark, [4], delta_path=str(delta), iceberg_table=_table(), format_version=3)
    assert isinstance(run.error, MirrorInputError)
    assert [r.delta_version for r in run.mirrored] == [0, 1, 2]
