"""`mirror_lag_within_freshness`: whether the mirror is actually behind Delta, against the table's
freshness window; reported by `delta_version_sensor_<name>` when its outcome changes, and executed like
any check (`checks_<name>`)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.test_utils import freeze_time  # dates a runless event; not dg.*

from dv_assets.defs.iceberg.freshness import MIRROR_LAG_CHECK, LagOutcome, lag_outcome
from dv_assets.defs.sources import DeltaSource, Freshness
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.status import mirror_status
from dv_assets.mirror.sync import sync_table
from tests.helpers.dagster import definitions, evaluate_sensor, make_source, record_tick
from tests.helpers.delta_log import add, base_commit, set_commit_time, write_log

HOUR_MS = 3600 * 1000


def committed_at(timestamp_ms: int, *actions: dict) -> list[dict]:
    return [{"commitInfo": {"timestamp": timestamp_ms, "operation": "WRITE"}}, *actions]


def synthetic_log(root: Path, *commit_times_ms: int) -> Path:
    """A Delta log (no data files needed: nothing here reads them) with one commit per time."""
    first, *later = commit_times_ms
    commits = [committed_at(first, *base_commit(add("0.parquet"))[1:])]  # base_commit's own commitInfo out
    commits += [committed_at(at, add(f"{v}.parquet")) for v, at in enumerate(later, start=1)]
    return write_log(root, commits)


def outcome_at(root: Path, freshness: Freshness, now: datetime) -> tuple[LagOutcome, str]:
    """The outcome for a table not mirrored yet (every version missing), at `now`."""
    now_s = now.timestamp()
    status = mirror_status(DeltaTable(root), None, "ns.t", now_ms=int(now_s * 1000))
    return lag_outcome(status, freshness, now_s)


def test_the_outcome_against_a_window_and_a_cron_deadline(tmp_path: Path) -> None:
    now = datetime(2026, 3, 4, 12, 0, tzinfo=UTC)  # a Wednesday
    now_ms = int(now.timestamp() * 1000)
    table = synthetic_log(tmp_path, now_ms - 3 * HOUR_MS, now_ms - HOUR_MS)  # v0 waits 3 h
    window = Freshness(fail_window_hours=4, warn_window_hours=2)
    outcome, description = outcome_at(table, window, now)
    assert outcome is LagOutcome.WARN
    assert description == (
        "2 version(s) behind (Delta 0..1 not mirrored); the oldest missing commit (v0) has waited 10800 s, "
        "past the 2.0 h warn window"
    )
    assert outcome_at(table, Freshness(fail_window_hours=3), now)[0] is LagOutcome.FAIL  # >=, as Dagster
    assert outcome_at(table, Freshness(fail_window_hours=3.5), now)[0] is LagOutcome.PASS

    # Daily deadline 11:00, lower bound 1 h: commits before 10:00 are due by 11:00. v0 (09:00) is late.
    deadline = Freshness(deadline_cron="0 11 * * *", lower_bound_hours=1)
    outcome, description = outcome_at(table, deadline, now)
    assert outcome is LagOutcome.FAIL
    assert description.endswith(
        "waited 10800 s; it was due: the deadline 2026-03-04T11:00:00+00:00 covers commits before "
        "2026-03-04 10:00 UTC"
    )
    # At 10:30 the last deadline is yesterday's: commits before yesterday 10:00 were due, v0 is not yet.
    assert outcome_at(table, deadline, datetime(2026, 3, 4, 10, 30, tzinfo=UTC))[0] is LagOutcome.PASS

    # A missing commit without a recorded time cannot be shown to be within the window.
    (table / "_delta_log" / f"{0:020d}.json").write_text(
        "".join(json.dumps(a) + "\n" for a in base_commit(add("a.parquet"))[1:])
    )
    outcome, description = outcome_at(table, Freshness(fail_window_hours=1000), now)
    assert outcome is LagOutcome.FAIL and "Delta version 0 records no commit time" in description


def lag_evaluations(instance: dg.DagsterInstance, source: DeltaSource) -> list[dg.AssetCheckEvaluation]:
    """Every evaluation of the lag check the instance recorded, oldest first."""
    records = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey(source.mirror_asset_key), MIRROR_LAG_CHECK), limit=100
    )
    evaluations = [r.evaluation for r in reversed(records)]
    assert all(e is not None for e in evaluations)
    return [e for e in evaluations if e is not None]


def test_the_sensor_reports_a_failing_lag_once_per_outcome(tmp_path: Path, catalog) -> None:
    """Not mirrored yet, its first commit 30 hours old: past the 24-hour window. No Spark: the catalog
    has no table, so every version is missing."""
    now_ms = int(time.time() * 1000)
    source = make_source(synthetic_log(tmp_path / "quiet", now_ms - 30 * HOUR_MS, now_ms - 2 * HOUR_MS))
    defs = definitions([source], catalog)
    with dg.instance_for_test() as instance:
        first = evaluate_sensor(defs, source.version_sensor_name, instance, None)
        record_tick(instance, first)
        (failed,) = lag_evaluations(instance, source)
        assert (failed.passed, failed.severity, failed.partition) == (
            False,
            dg.AssetCheckSeverity.ERROR,
            None,
        )
        assert failed.description is not None and failed.description.startswith(
            "2 version(s) behind (Delta 0..1 not mirrored); the oldest missing commit (v0) has waited 108"
        )
        assert failed.description.endswith("s, past the 24.0 h fail window")
        metadata = {k: v.value for k, v in failed.metadata.items()}
        assert (metadata["dvmirror/lag_versions"], metadata["delta_latest_version"]) == (2, "1")
        assert 30 * 3600 <= metadata["dvmirror/lag_seconds"] < 30 * 3600 + 60
        cursor = json.loads(first.cursor)
        assert cursor[source.name] == 1 and cursor[f"{source.name}:lag_outcome"] == LagOutcome.FAIL

        # The same outcome on the next tick: nothing reported (a tick every 30 seconds).
        second = evaluate_sensor(defs, source.version_sensor_name, instance, first.cursor)
        assert not [e for e in second.asset_events if isinstance(e, dg.AssetCheckEvaluation)]
        record_tick(instance, second)
        assert len(lag_evaluations(instance, source)) == 1

        # A cursor of the format before the lag check (versions only) still loads: it reports again.
        old = evaluate_sensor(defs, source.version_sensor_name, instance, json.dumps({source.name: 1}))
        assert old.run_requests == []
        (again,) = [e for e in old.asset_events if isinstance(e, dg.AssetCheckEvaluation)]
        assert not again.passed

        # Ten minutes after the last report the same outcome is reported again (current figures).
        stale = {**cursor, f"{source.name}:lag_reported_at": cursor[f"{source.name}:lag_reported_at"] - 600}
        later = evaluate_sensor(defs, source.version_sensor_name, instance, json.dumps(stale))
        assert [e.passed for e in later.asset_events if isinstance(e, dg.AssetCheckEvaluation)] == [False]


def test_a_table_without_freshness_has_no_lag_check(tmp_path: Path, catalog) -> None:
    now_ms = int(time.time() * 1000)
    source = make_source(synthetic_log(tmp_path / "t", now_ms - 30 * HOUR_MS)).model_copy(
        update={"freshness": None}
    )
    defs = definitions([source], catalog)
    assert MIRROR_LAG_CHECK not in {k.name for k in defs.resolve_asset_graph().asset_check_keys}
    with dg.instance_for_test() as instance:
        tick = evaluate_sensor(defs, source.version_sensor_name, instance, None)
    assert [type(e) for e in tick.asset_events] == [dg.AssetObservation]  # the lag, no evaluation
    assert set(json.loads(tick.cursor)) == {source.name}


@pytest.mark.spark
def test_a_quiet_table_whose_mirror_is_current_passes(spark, catalog, copy_fixture) -> None:
    """Commits three days old, the last materialization too: Dagster's freshness (time since the last
    materialization) says FAIL; the lag check says FAIL only while a version is missing."""
    table = copy_fixture("table-with-dv-small")  # versions 0 and 1
    three_days_ago = int(time.time() * 1000) - 72 * HOUR_MS
    for version in (0, 1):
        set_commit_time(table, version, three_days_ago + version * 1000)
    source = make_source(table)
    sync_table(spark, table, source.iceberg_table, until_version=0)
    defs = definitions([source], catalog)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(source.partitions_name, ["0"])
        with freeze_time(three_days_ago / 1000):
            instance.report_runless_asset_event(
                dg.AssetMaterialization(asset_key=source.mirror_asset_key, partition="0")
            )
        behind = evaluate_sensor(defs, source.version_sensor_name, instance, None)
        record_tick(instance, behind)
        (failed,) = lag_evaluations(instance, source)
        assert not failed.passed and (failed.description or "").startswith(
            "1 version(s) behind (Delta 1..1 not mirrored)"
        )
        # The evaluation is about the asset's latest materialization, three days old.
        assert failed.target_materialization_data is not None
        assert failed.target_materialization_data.timestamp == pytest.approx(three_days_ago / 1000)

        sync_table(spark, table, source.iceberg_table)  # caught up; nothing new after it
        caught_up = evaluate_sensor(defs, source.version_sensor_name, instance, behind.cursor)
        record_tick(instance, caught_up)
        passed = lag_evaluations(instance, source)[-1]
        assert passed.passed and passed.description == "up to date: Delta version 1 is mirrored"
        assert {k: v.value for k, v in passed.metadata.items()} == {
            "dvmirror/lag_versions": 0,
            "delta_latest_version": "1",
            "dvmirror/lag_seconds": 0.0,
        }
        quiet = evaluate_sensor(defs, source.version_sensor_name, instance, caught_up.cursor)
        assert quiet.asset_events == []  # current and unchanged: nothing to report

        # Executed like any check: the checks job (a Delta version's partition, as CI runs it).
        latest = instance.get_latest_materialization_event(dg.AssetKey(source.mirror_asset_key))
        assert latest is not None and time.time() - latest.timestamp > 24 * 3600  # older than the window
        result = defs.resolve_job_def(source.checks_job_name).execute_in_process(
            instance=instance, tags={"dagster/partition": "0"}, raise_on_error=False
        )
        (executed,) = [e for e in result.get_asset_check_evaluations() if e.check_name == MIRROR_LAG_CHECK]
        assert executed.passed and executed.partition is None
        assert len(lag_evaluations(instance, source)) == 3
