"""Sensors: new Delta commits become ordered partitions and one run per backlog; a mirror behind Delta
has its lag recorded on every tick; compacted DVs request the cleanup."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import dagster as dg
import pytest

from dv_assets.defs.sources import DeltaSource
from dv_assets.mirror.settings import CatalogConfig
from dv_assets.mirror.sync import sync_table
from tests.helpers.dagster import definitions, evaluate_sensor, make_source, record_tick
from tests.helpers.delta_log import set_commit_time
from tests.helpers.paths import DELTA_FIXTURES, expected_versions
from tests.helpers.processes import free_port

RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"


def test_delta_version_sensor_adds_partitions_in_order_and_requests_one_run(copy_fixture, catalog) -> None:
    table = copy_fixture("dv-partitioned-with-checkpoint")
    source = make_source(table)
    defs = definitions([source], catalog)
    with dg.instance_for_test() as instance:
        result = evaluate_sensor(defs, source.version_sensor_name, instance, None)
        (add,) = result.dynamic_partitions_requests
        assert add.partitions_def_name == source.partitions_name
        assert list(add.partition_keys) == [str(v) for v in range(16)]
        # The backlog of 16 versions is one run over the partition range 0..15, not 16 runs.
        (run,) = result.run_requests
        assert run.job_name == f"mirror_{source.name}"
        assert run.partition_key is None
        assert (run.tags[RANGE_START], run.tags[RANGE_END]) == ("0", "15")
        assert run.tags["dvmirror/delta-versions"] == "0-15"
        assert run.tags["dvmirror/table"] == source.name
        assert run.run_key == f"{source.name}:v0-15"
        assert json.loads(result.cursor)[source.name] == 15  # beside it, the lag check's last report

        assert evaluate_sensor(defs, source.version_sensor_name, instance, result.cursor).run_requests == []

        # A new commit (a blind append of nothing but commitInfo) is found on the next tick.
        (table / "_delta_log" / f"{16:020d}.json").write_text(
            json.dumps({"commitInfo": {"timestamp": 1, "operation": "WRITE"}}) + "\n"
        )
        instance.add_dynamic_partitions(source.partitions_name, [str(v) for v in range(16)])
        later = evaluate_sensor(defs, source.version_sensor_name, instance, result.cursor)
        (one,) = later.run_requests
        assert (one.tags[RANGE_START], one.tags[RANGE_END]) == ("16", "16")
        assert one.run_key == f"{source.name}:v16"
        assert list(later.dynamic_partitions_requests[0].partition_keys) == ["16"]
        assert json.loads(later.cursor)[source.name] == 16


def test_delta_version_sensor_skips_a_missing_table(tmp_path, catalog) -> None:
    source = make_source(tmp_path / "nothing-here")
    with dg.instance_for_test() as instance:
        result = evaluate_sensor(definitions([source], catalog), source.version_sensor_name, instance, None)
    assert result.run_requests == []
    (key,) = json.loads(result.cursor)  # no version: only why it was skipped
    assert key == f"{source.name}:error"
    assert result.skip_reason is not None and source.name in result.skip_reason.skip_message


@pytest.mark.spark
def test_compacted_deletes_sensor_requests_cleanup(spark, catalog, copy_fixture) -> None:
    table = copy_fixture("dv-partitioned-with-checkpoint")
    source = make_source(table)
    defs = definitions([source], catalog)
    with dg.instance_for_test() as instance:
        assert (
            evaluate_sensor(defs, source.compacted_sensor_name, instance, None).run_requests == []
        )  # no mirror

        sync_table(spark, table, source.iceberg_table, until_version=5)
        quiet = evaluate_sensor(defs, source.compacted_sensor_name, instance, None)
        assert quiet.run_requests == [] and json.loads(quiet.cursor) == {source.name: 5}

        # v6-v8 replace DVs, v9-v13 remove data files that carried DVs.
        sync_table(spark, table, source.iceberg_table)
        result = evaluate_sensor(defs, source.compacted_sensor_name, instance, quiet.cursor)
        (request,) = result.run_requests
        assert request.job_name == source.cleanup_job_name == f"cleanup_{source.name}"
        assert request.tags["dvmirror/compacted-versions"] == "6,7,8,9,10,11,12,13"
        assert request.run_config["ops"][source.cleanup_op_name]["config"]["sources"] == [source.name]
        assert json.loads(result.cursor)[source.name] == 15  # beside it, the lag check's last report
        assert evaluate_sensor(defs, source.compacted_sensor_name, instance, result.cursor).run_requests == []


@pytest.mark.spark
def test_one_unreadable_source_does_not_stop_the_others_cleanup(spark, catalog, copy_fixture) -> None:
    good = make_source(copy_fixture("dv-partitioned-with-checkpoint"))
    broken_table = copy_fixture("table-with-dv-small")
    broken = make_source(broken_table)
    sync_table(spark, good.delta_path, good.iceberg_table, until_version=5)
    sync_table(spark, broken_table, broken.iceberg_table)
    defs = definitions([broken, good], catalog)
    assert broken.compacted_sensor_name == good.compacted_sensor_name == "compacted_deletes_sensor"
    with dg.instance_for_test() as instance:
        first = evaluate_sensor(defs, good.compacted_sensor_name, instance, None)
        assert first.run_requests == []  # first sight of each mirror: its current version
        assert json.loads(first.cursor) == {broken.name: 1, good.name: 5}

        sync_table(spark, good.delta_path, good.iceberg_table)  # v6-v13 drop DVs
        shutil.rmtree(broken_table / "_delta_log")
        (broken_table / "_delta_log").write_text("not a folder\n")  # cannot be listed
        result = evaluate_sensor(defs, good.compacted_sensor_name, instance, first.cursor)
    # The broken table is reported in its own cursor entry and keeps its version; the good table's
    # cleanup is requested as before.
    (request,) = result.run_requests
    assert request.job_name == good.cleanup_job_name
    assert request.run_config["ops"][good.cleanup_op_name]["config"]["sources"] == [good.name]
    cursor = json.loads(result.cursor)
    assert (cursor[good.name], cursor[broken.name]) == (15, 1)
    assert "cannot list the Delta log" in cursor[f"{broken.name}:error"]


def test_a_broken_delta_log_does_not_stop_the_other_tables_runs(copy_fixture, catalog) -> None:
    """One sensor evaluates every table: a table whose log cannot be read is caught, named in the
    cursor (and in the skip message when nothing else is requested), and the others' runs go out."""
    sources = [make_source(copy_fixture("table-with-dv-small", f"table-with-dv-small-{i}")) for i in range(3)]
    broken = sources[1]
    for commit in (Path(broken.delta_path) / "_delta_log").glob("*.json"):
        commit.write_text("not json\n")
    (Path(broken.delta_path) / "_delta_log" / f"{0:020d}.json").unlink()  # a gap: refused by the replay
    defs = definitions(sources, catalog)
    with dg.instance_for_test() as instance:
        tick = evaluate_sensor(defs, "delta_version_sensor", instance, None)
        assert sorted(r.run_key for r in tick.run_requests) == sorted(
            f"{s.name}:v0-1" for s in sources if s is not broken
        )
        cursor = json.loads(tick.cursor)
        assert f"{broken.name}:error" in cursor and broken.name not in cursor
        assert all(f"{s.name}:error" not in cursor for s in sources if s is not broken)

        # Nothing else to request: the tick is a skip that names the broken table.
        again = evaluate_sensor(defs, "delta_version_sensor", instance, tick.cursor)
        assert again.run_requests == []
        assert again.skip_reason is not None and broken.name in again.skip_reason.skip_message

        # Repaired: its entry goes and its run is requested.
        shutil.rmtree(broken.delta_path)
        shutil.copytree(DELTA_FIXTURES / "table-with-dv-small", broken.delta_path)
        repaired = evaluate_sensor(defs, "delta_version_sensor", instance, again.cursor)
        assert [r.run_key for r in repaired.run_requests] == [f"{broken.name}:v0-1"]
        assert f"{broken.name}:error" not in json.loads(repaired.cursor)


def test_a_table_that_starts_stopped_has_its_own_sensor_and_is_not_in_the_shared_one(
    copy_fixture, catalog
) -> None:
    running = make_source(copy_fixture("table-with-dv-small"))
    paused = make_source(copy_fixture("basic-dv-no-checkpoint")).model_copy(update={"start_running": False})
    defs = definitions([running, paused], catalog)
    repository = defs.get_repository_def()
    assert paused.version_sensor_name == f"delta_version_sensor_{paused.name}"
    statuses = {s.name: s.default_status for s in repository.sensor_defs}
    assert statuses[paused.version_sensor_name] == dg.DefaultSensorStatus.STOPPED
    assert statuses["delta_version_sensor"] == dg.DefaultSensorStatus.RUNNING
    with dg.instance_for_test() as instance:
        shared = evaluate_sensor(defs, "delta_version_sensor", instance, None)
        assert [r.tags["dvmirror/table"] for r in shared.run_requests] == [running.name]
        own = evaluate_sensor(defs, paused.version_sensor_name, instance, None)
        assert [r.tags["dvmirror/table"] for r in own.run_requests] == [paused.name]


@pytest.mark.spark
def test_a_first_deploy_requests_one_run_per_table_behind_and_no_cleanup_flood(
    spark, catalog, copy_fixture
) -> None:
    """A fresh instance over eight tables, three already mirrored by the engine (two of them through
    versions that dropped DVs): the first ticks request one mirror run per table not mirrored, none for
    the mirrored ones, and no cleanup; a settled table is left alone until its log grows."""
    compacting = [
        make_source(copy_fixture("dv-partitioned-with-checkpoint", f"dv-partitioned-with-checkpoint-{i}"))
        for i in range(2)
    ]
    small = [make_source(copy_fixture("table-with-dv-small", f"table-with-dv-small-{i}")) for i in range(6)]
    mirrored = [*compacting, small[0]]
    for source in mirrored:
        sync_table(spark, source.delta_path, source.iceberg_table)
    sources = [*compacting, *small]
    # The fixtures' versions, as delta-rs read them.
    compacting_versions = expected_versions("dv-partitioned-with-checkpoint")
    small_versions = expected_versions("table-with-dv-small")
    defs = definitions(sources, catalog)
    with dg.instance_for_test() as instance:
        tick = evaluate_sensor(defs, "delta_version_sensor", instance, None)
        # One run per table behind, for all its versions; every table's versions become its partitions.
        assert sorted(r.run_key for r in tick.run_requests) == sorted(f"{s.name}:v0-1" for s in small[1:])
        added = {r.partitions_def_name: list(r.partition_keys) for r in tick.dynamic_partitions_requests}
        assert added == {
            **{s.partitions_name: [str(v) for v in compacting_versions] for s in compacting},
            **{s.partitions_name: [str(v) for v in small_versions] for s in small},
        }
        record_tick(instance, tick)
        cleanup = evaluate_sensor(defs, "compacted_deletes_sensor", instance, None)
        assert cleanup.run_requests == []  # the compactions at v6-v13 were mirrored before it looked
        assert json.loads(cleanup.cursor) == {
            **{s.name: compacting_versions[-1] for s in compacting},
            small[0].name: small_versions[-1],
        }

        # The mirrored tables are settled: the next tick lists their logs only and requests nothing.
        cursor = json.loads(tick.cursor)
        assert {s.name for s in sources if f"{s.name}:settled" in cursor} == {s.name for s in mirrored}
        quiet = evaluate_sensor(defs, "delta_version_sensor", instance, tick.cursor)
        assert quiet.run_requests == [] and quiet.dynamic_partitions_requests == []

        # A new commit on a settled table is found on the next tick.
        (Path(small[0].delta_path) / "_delta_log" / f"{2:020d}.json").write_text(
            json.dumps({"commitInfo": {"timestamp": 1, "operation": "WRITE"}}) + "\n"
        )
        later = evaluate_sensor(defs, "delta_version_sensor", instance, quiet.cursor)
        assert [r.run_key for r in later.run_requests] == [f"{small[0].name}:v2"]
        assert f"{small[0].name}:settled" not in json.loads(later.cursor)


def lag_observations(instance: dg.DagsterInstance, source: DeltaSource) -> list[dict]:
    """The metadata (raw values) of the observations of iceberg/<source> the instance holds, oldest first."""
    records = instance.fetch_observations(
        dg.AssetKey(source.mirror_asset_key), limit=100, ascending=True
    ).records
    return [
        {k: v.value for k, v in r.asset_observation.metadata.items()}
        for r in records
        if r.asset_observation is not None
    ]


def assert_lag(observed: dict, versions: int, latest: int, waiting_since_ms: int, began: float) -> None:
    assert (observed["dvmirror/lag_versions"], observed["delta_latest_version"]) == (versions, str(latest))
    # Seconds since the first missing commit, measured during the tick (rounded to milliseconds).
    assert began - waiting_since_ms / 1000 - 0.001 <= observed["dvmirror/lag_seconds"]
    assert observed["dvmirror/lag_seconds"] <= time.time() - waiting_since_ms / 1000 + 0.001


def test_delta_version_sensor_records_the_lag_of_a_table_not_yet_mirrored(copy_fixture, catalog) -> None:
    table = copy_fixture("dv-partitioned-with-checkpoint")
    two_hours_ago = int(time.time() * 1000) - 2 * 3600 * 1000
    set_commit_time(table, 0, two_hours_ago)
    source = make_source(table)
    defs = definitions([source], catalog)
    with dg.instance_for_test() as instance:
        began = time.time()
        tick = evaluate_sensor(defs, source.version_sensor_name, instance, None)
        record_tick(instance, tick)  # as the sensor daemon records a tick's asset events
        (observed,) = lag_observations(instance, source)
    # No mirror yet: every version 0..15 is missing, the first since two hours.
    assert_lag(observed, 16, 15, two_hours_ago, began)
    assert observed["dvmirror/lag_seconds"] >= 7200
    (run,) = tick.run_requests
    assert run.tags["dvmirror/delta-versions"] == "0-15"


def test_an_unreadable_mirror_records_no_lag_and_still_requests_the_run(copy_fixture) -> None:
    """The lag is informative: a catalog that cannot be reached costs the observation, not the run."""
    source = make_source(copy_fixture("table-with-dv-small"))
    unreachable = CatalogConfig({"type": "rest", "uri": f"http://127.0.0.1:{free_port()}"})
    defs = definitions([source], unreachable)
    with dg.instance_for_test() as instance:
        tick = evaluate_sensor(defs, source.version_sensor_name, instance, None)
    assert tick.asset_events == []
    (run,) = tick.run_requests
    assert run.tags["dvmirror/delta-versions"] == "0-1"


@pytest.mark.spark
def test_delta_version_sensor_records_the_lag_on_every_tick_behind_and_none_once_caught_up(
    spark, catalog, copy_fixture
) -> None:
    table = copy_fixture("dv-partitioned-with-checkpoint")
    an_hour_ago = int(time.time() * 1000) - 3600 * 1000
    set_commit_time(table, 6, an_hour_ago)  # the first version the mirror lacks below
    source = make_source(table)
    sync_table(spark, table, source.iceberg_table, until_version=5)
    defs = definitions([source], catalog)
    with dg.instance_for_test() as instance:
        began = time.time()
        first = evaluate_sensor(defs, source.version_sensor_name, instance, None)
        record_tick(instance, first)
        (observed,) = lag_observations(instance, source)
        assert_lag(observed, 10, 15, an_hour_ago, began)  # versions 6..15

        # No new Delta version, but the mirror is still behind (its run has not happened): recorded again.
        began = time.time()
        second = evaluate_sensor(defs, source.version_sensor_name, instance, first.cursor)
        assert second.run_requests == []
        record_tick(instance, second)
        observations = lag_observations(instance, source)
        assert len(observations) == 2
        assert_lag(observations[1], 10, 15, an_hour_ago, began)

        # Caught up: nothing recorded (the materialization that caught it up records its lag). The lag
        # check passed while behind (an hour, within the 24-hour window): its outcome did not change.
        sync_table(spark, table, source.iceberg_table)
        third = evaluate_sensor(defs, source.version_sensor_name, instance, second.cursor)
        assert third.asset_events == [] and third.run_requests == []
        record_tick(instance, third)
        assert len(lag_observations(instance, source)) == 2


@pytest.mark.spark
def test_switching_the_sensor_on_after_a_sync_requests_only_the_missing_versions(
    spark, catalog, copy_fixture
) -> None:
    """The sensor starts after the newest version the mirror holds, read from the mirror: after a CLI
    sync, or with its cursor reset, it requests only what is missing, and no run when the mirror is
    current; the versions the mirror holds still become partitions (none of them requested)."""
    table = copy_fixture("dv-partitioned-with-checkpoint")
    source = make_source(table)
    sync_table(spark, table, source.iceberg_table, until_version=5)  # as `dvmirror sync` does
    defs = definitions([source], catalog)
    with dg.instance_for_test() as instance:
        first = evaluate_sensor(defs, source.version_sensor_name, instance, None)
        (add,) = first.dynamic_partitions_requests
        assert list(add.partition_keys) == [str(v) for v in range(16)]  # held 0..5, missing 6..15
        (run,) = first.run_requests
        assert (run.tags[RANGE_START], run.tags[RANGE_END], run.run_key) == (
            "6",
            "15",
            f"{source.name}:v6-15",
        )
        record_tick(instance, first)

        # The rest mirrored outside Dagster: an empty (reset) or a stale cursor asks for nothing.
        sync_table(spark, table, source.iceberg_table)
        for cursor in (None, json.dumps({source.name: 3})):
            tick = evaluate_sensor(defs, source.version_sensor_name, instance, cursor)
            assert tick.run_requests == [] and tick.dynamic_partitions_requests == []
            assert json.loads(tick.cursor)[source.name] == 15

    # A fresh instance (the sensor switched on after the CLI): every held version a partition, no run.
    with dg.instance_for_test() as instance:
        tick = evaluate_sensor(defs, source.version_sensor_name, instance, None)
        assert tick.run_requests == []
        (add,) = tick.dynamic_partitions_requests
        assert list(add.partition_keys) == [str(v) for v in range(16)]
