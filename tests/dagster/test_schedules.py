"""`cleanup_schedule_<name>`: an append-only table (nothing compacted, so the compaction sensor never asks)
still has its snapshots expired to its retention, and only the mirror's own files go; a fleet's cleanups
are spread over the night, not fired together."""

from __future__ import annotations

import os
from collections import Counter
from datetime import UTC, datetime, timedelta

import dagster as dg
import pytest
from dagster._utils.schedules import schedule_execution_time_iterator  # the scheduler's; not dg.*

from dv_assets.defs.sources import CLEANUP_WINDOW_HOURS, DeltaSource, spread_cleanup_cron
from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.iceberg.layout import MirrorLayout
from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table
from dv_assets.mirror.sync import sync_table
from tests.helpers.dagster import (
    definitions,
    evaluate_schedule,
    evaluate_sensor,
    execute_run_request,
    hash_tree,
    make_source,
)
from tests.helpers.delta_log import SyntheticTable


@pytest.mark.spark
def test_cleanup_schedule_expires_an_append_only_mirror_to_its_retention(spark, catalog, tmp_path) -> None:
    table = SyntheticTable(tmp_path / "appends", rows_per_file=5)
    table.create(files=1)
    for _ in range(4):
        table.append()  # versions 1..4: blind appends, no DV anywhere
    source = make_source(table.root, retain_last=2)
    sync_table(spark, table.root, source.iceberg_table)
    before = read_mirror_table(catalog, source.iceberg_table)
    assert before is not None and len(before.snapshots) == 5
    newest = before.current_snapshot_id

    mirror_dir = MirrorLayout(before.location).delete_dir.removeprefix("file:")
    os.makedirs(mirror_dir, exist_ok=True)
    not_ours = f"{mirror_dir}/someone-elses.parquet"
    with open(not_ours, "wb") as out:
        out.write(b"x" * 100)
    delta_before = hash_tree(table.root)

    defs = definitions([source], catalog)
    with dg.instance_for_test() as instance:
        # Nothing was compacted: the compaction sensor requests no cleanup ...
        assert evaluate_sensor(defs, source.compacted_sensor_name, instance, None).run_requests == []
        # ... the schedule's daily tick does.
        (request,) = evaluate_schedule(
            defs, source.cleanup_schedule_name, instance, datetime(2026, 5, 1, 3, 0, tzinfo=UTC)
        )
        assert request.job_name == source.cleanup_job_name
        assert (
            request.tags["dvmirror/table"] == source.name and request.tags["dvmirror/trigger"] == "schedule"
        )
        result = execute_run_request(defs, instance, request)
    assert result.success
    (observation,) = [
        e.event_specific_data.asset_observation
        for e in result.all_events
        if e.event_type_value == "ASSET_OBSERVATION"
    ]
    meta = {k: v.value for k, v in observation.metadata.items()}
    assert (meta["snapshots_before"], meta["snapshots_expired"], meta["snapshots_retained"]) == (5, 3, 2)
    assert meta["metadata_files_reclaimed"] > 0  # the expired snapshots' manifest lists

    after = read_mirror_table(catalog, source.iceberg_table)  # pyiceberg
    assert after is not None
    assert after.current_snapshot_id == newest
    assert sorted(s.delta_version for s in after.snapshots) == [3, 4]  # the newest two retained
    java = IcebergJava(spark).load(source.iceberg_table)  # and Iceberg Java agrees
    assert java is not None and {s.snapshot_id for s in java.snapshots} == {
        s.snapshot_id for s in after.snapshots
    }
    assert hash_tree(table.root) == delta_before  # not one Delta byte touched
    assert os.path.exists(not_ours)
    assert spark.sql(f"SELECT count(*) FROM {source.spark_table}").first()[0] == 5 * 5


def test_a_fleets_cleanup_schedules_are_spread_over_the_night(catalog) -> None:
    """300 tables without a cleanup_cron: each schedule fires daily at a minute of 01:00-05:00 UTC derived
    from the table's name (the same in every process), spread over the window, not all at 03:00; a
    table's own cleanup_cron wins."""
    sources = [
        DeltaSource(name=f"t{i:03d}", delta_path=f"/data/t{i:03d}", iceberg_table=f"fleet.t{i:03d}")
        for i in range(300)
    ]
    sources.append(
        DeltaSource(
            name="own", delta_path="/data/own", iceberg_table="fleet.own", cleanup_cron="30 */6 * * *"
        )
    )
    repository = definitions(sources, catalog).get_repository_def()
    schedules = {s.name: s for s in repository.schedule_defs}
    assert len(schedules) == 301
    assert schedules["cleanup_schedule_own"].cron_schedule == "30 */6 * * *"

    first, end = CLEANUP_WINDOW_HOURS
    day = datetime(2026, 5, 1, tzinfo=UTC)
    fires: list[datetime] = []
    for source in sources[:-1]:
        schedule = schedules[source.cleanup_schedule_name]
        assert schedule.cron_schedule == spread_cleanup_cron(source.name)  # stable: from the name
        assert schedule.execution_timezone == "UTC"
        # The schedule's next tick after midnight, as the scheduler computes it: once a day, in the window.
        ticks = schedule_execution_time_iterator(
            day.timestamp(), schedule.cron_schedule, schedule.execution_timezone
        )
        fire, following = next(ticks), next(ticks)
        assert following - fire == timedelta(days=1)
        assert day + timedelta(hours=first) <= fire < day + timedelta(hours=end)
        fires.append(fire)
    per_minute = Counter(fires)
    # 300 tables over 240 minutes: most minutes used, none crowded (a uniform spread puts at most a
    # handful in one minute; one shared cron put all 300 in one).
    assert len(per_minute) >= 150
    assert max(per_minute.values()) <= 6
    per_hour = Counter(f.hour for f in fires)
    assert set(per_hour) == set(range(first, end)) and min(per_hour.values()) >= 40
