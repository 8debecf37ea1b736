"""The cleanup job expires snapshots and deletes only files the mirror wrote; Delta stays byte-identical."""

from __future__ import annotations

import os
import time
from pathlib import Path

import dagster as dg
import pytest

from dv_assets.defs.iceberg.checks import one_dv_result, row_count_result
from dv_assets.defs.sensors import mirror_range_request
from dv_assets.mirror.cli.status import status_text, table_status
from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.iceberg.layout import MirrorLayout
from dv_assets.mirror.iceberg.maintenance import expire_and_reclaim
from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table
from dv_assets.mirror.sync import sync_table
from testkit.launched_run import code_server
from tests.helpers.dagster import (
    add_partitions,
    build_source,
    check_executions,
    definitions,
    evaluate_sensor,
    execute_run_request,
    hash_tree,
    latest_materialization,
    make_source,
    materializations,
    recorded_materializations,
    sources_file,
)
from tests.helpers.paths import expected_versions
from tests.helpers.processes import no_java_env


@pytest.mark.spark
@pytest.mark.parametrize("format_version", [3, 2])
def test_cleanup_reclaims_only_mirror_owned_files(spark, catalog, copy_fixture, format_version) -> None:
    table = copy_fixture("dv-partitioned-with-checkpoint")
    source = make_source(table, format_version=format_version, retain_last=2)
    sync_table(spark, table, source.iceberg_table, format_version=format_version)
    iceberg = IcebergJava(spark)
    mirror = iceberg.load(source.iceberg_table)
    assert mirror is not None
    layout = MirrorLayout(mirror.location)
    data_dir = layout.delete_dir.removeprefix("file:")

    # A crashed run's leftover (old), an in-flight commit's file (fresh), and a file that is not ours.
    old_orphan = f"{data_dir}/dvmirror-v00000000000000000099-crashed.puffin"
    fresh_orphan = f"{data_dir}/dvmirror-v00000000000000000100-inflight.puffin"
    not_ours = f"{data_dir}/someone-elses.parquet"
    for path in (old_orphan, fresh_orphan, not_ours):
        with open(path, "wb") as out:
            out.write(b"x" * 100)
    two_days_ago = time.time() - 2 * 86400
    os.utime(old_orphan, (two_days_ago, two_days_ago))
    os.utime(not_ours, (two_days_ago, two_days_ago))

    delta_before = hash_tree(table)
    owned_before = {p for p in os.listdir(data_dir) if p.startswith("dvmirror-")}
    current = iceberg.delete_files_by_data_file(source.iceberg_table)
    live_delete_files = {f.path.rsplit("/", 1)[-1] for f in current.values()}

    defs = definitions([source], catalog)
    with dg.instance_for_test() as instance:
        result = defs.resolve_job_def(source.cleanup_job_name).execute_in_process(instance=instance)
    assert result.success
    output = result.output_for_node(source.cleanup_op_name)
    (observation,) = [
        e.event_specific_data.asset_observation
        for e in result.all_events
        if e.event_type_value == "ASSET_OBSERVATION"
    ]
    meta = {k: v.value for k, v in observation.metadata.items()}

    assert hash_tree(table) == delta_before  # not one Delta byte touched (data, DVs, _delta_log)
    assert (meta["snapshots_before"], meta["snapshots_expired"], meta["snapshots_retained"]) == (16, 14, 2)
    assert spark.sql(f"SELECT * FROM {source.spark_table}.snapshots").count() == 2
    owned_after = {p for p in os.listdir(data_dir) if p.startswith("dvmirror-")}
    assert live_delete_files <= owned_after  # everything a retained snapshot needs is still there
    assert "dvmirror-v00000000000000000100-inflight.puffin" in owned_after
    assert "dvmirror-v00000000000000000099-crashed.puffin" not in owned_after
    assert os.path.exists(not_ours)
    reclaimed = owned_before - owned_after
    assert meta["delete_files_reclaimed"] + meta["orphans_reclaimed"] == len(reclaimed) > 1
    assert meta["metadata_files_reclaimed"] > 0
    assert output["bytes_reclaimed"] == meta["bytes_reclaimed"] > 0

    # The retained snapshots still read correctly.
    assert row_count_result(spark, catalog, source, 15).passed
    assert one_dv_result(spark, catalog, source, 15).passed


@pytest.mark.spark
def test_expired_versions_are_observed_as_expired_and_leave_the_partitions(
    spark, catalog, copy_fixture
) -> None:
    source = make_source(copy_fixture("dv-partitioned-with-checkpoint"), retain_last=3)
    built = build_source(source)
    defs = definitions([source], catalog)
    key = dg.AssetKey(source.mirror_asset_key)
    with dg.instance_for_test() as instance:
        add_partitions(instance, built, list(range(6)))
        mirrored = execute_run_request(defs, instance, mirror_range_request(source, 0, 5))
        assert mirrored.success
        cleanup = defs.resolve_job_def(source.cleanup_job_name).execute_in_process(instance=instance)
        assert cleanup.success
        observations = [
            e.event_specific_data.asset_observation
            for e in cleanup.all_events
            if e.event_type_value == "ASSET_OBSERVATION"
        ]
        (table,) = [o for o in observations if o.partition is None]
        assert table.metadata["retained_delta_versions"].value == "3..5"
        assert table.metadata["expired_delta_versions"].value == "0..2"
        # The metadata file after the cleanup rewrote it: the current one, not the materialization's.
        current = read_mirror_table(catalog, source.iceberg_table)
        assert current is not None
        assert table.metadata["metadata_location"].value == current.metadata_location
        at_run = recorded_materializations(instance, source.mirror_asset_key, ["5"])["5"]
        assert at_run["metadata_location_when_materialized"] != current.metadata_location
        expired = {o.partition: o.metadata for o in observations if o.partition is not None}
        assert sorted(expired) == ["0", "1", "2"]
        materialized = recorded_materializations(instance, source.mirror_asset_key, ["0", "1", "2"])
        for partition, metadata in expired.items():
            assert metadata["status"].value == metadata["dvmirror/time_travel"].value == "expired"
            assert metadata["snapshot_id"].value == materialized[partition]["snapshot_id"]
            assert metadata["expired_by_run"].value == cleanup.run_id
        # The Partitions view shows the versions still readable; every record of the others is kept.
        assert instance.get_dynamic_partitions(source.partitions_name) == ["3", "4", "5"]
        recorded = instance.fetch_observations(
            dg.AssetRecordsFilter(asset_key=key, asset_partitions=["1"]), limit=1
        ).records
        assert recorded[0].asset_observation.metadata["status"].value == "expired"
        history = check_executions(instance, source.mirror_asset_key, ["metadata_row_count_matches"])
        assert {(p, status) for _, p, status, _ in history} >= {("1", "SUCCEEDED")}
        # The version sensor (no cursor) does not add them back, and asks for the versions after the
        # mirror's newest only.
        tick = evaluate_sensor(defs, source.version_sensor_name, instance, None)
        (add,) = tick.dynamic_partitions_requests
        assert list(add.partition_keys) == [str(v) for v in range(6, 16)]
        (run,) = tick.run_requests
        assert run.run_key == f"{source.name}:v6-15"


@pytest.mark.spark
def test_a_run_of_expired_versions_records_them_and_keeps_their_checks(spark, catalog, copy_fixture) -> None:
    """Snapshots expired outside Dagster (`dvmirror expire`): a run asked for those versions again
    succeeds, records them as expired (observations) and the retained ones as already mirrored, and the
    checks of the expired ones keep their last result (no SKIPPED execution). `dvmirror status` lists
    the versions still readable."""
    source = make_source(copy_fixture("dv-partitioned-with-checkpoint"), retain_last=3)
    built = build_source(source)
    defs = definitions([source], catalog)
    key = source.mirror_asset_key
    with dg.instance_for_test() as instance:
        add_partitions(instance, built, list(range(6)))
        assert execute_run_request(defs, instance, mirror_range_request(source, 0, 5)).success
        expire_and_reclaim(IcebergJava(spark), source.iceberg_table, source.retention)

        again = execute_run_request(defs, instance, mirror_range_request(source, 0, 5))
        assert again.success
        in_run = materializations(again, key)
        assert sorted(in_run, key=int) == ["3", "4", "5"]
        assert {m["status"] for m in in_run.values()} == {"already mirrored: nothing committed"}
        assert in_run["5"]["mirrored_versions"] == "none: all already mirrored"
        expired = {
            e.event_specific_data.asset_observation.partition: e.event_specific_data.asset_observation
            for e in again.all_events
            if e.event_type_value == "ASSET_OBSERVATION"
        }
        assert sorted(expired) == ["0", "1", "2"]
        assert all(
            o.metadata["status"].value.startswith("already mirrored: its snapshot has expired")
            for o in expired.values()
        )
        assert latest_materialization(instance, key) == ("5", 5)
        # Every check planned on the range has a result: the expired versions' last one, kept.
        evaluations = {(e.check_name, e.partition): e for e in again.get_asset_check_evaluations()}
        assert {p for _, p in evaluations} == {str(v) for v in range(6)}
        assert all(e.passed for e in evaluations.values())
        assert "snapshot has since expired" in (
            evaluations["metadata_row_count_matches", "1"].description or ""
        )
        executions = check_executions(instance, key, ["metadata_row_count_matches", "one_dv_per_data_file"])
        assert [e for e in executions if e[2] == "PLANNED"] == []

    status = table_status(catalog, source.iceberg_table, None)
    assert status.readable_versions == (3, 4, 5)
    (line,) = [line for line in status_text(status).splitlines() if "readable versions:" in line]
    assert line.split(":", 1)[1].strip() == "3..5"


@pytest.mark.spark
def test_a_cleanup_with_nothing_to_do_starts_no_jvm(spark, catalog, copy_fixture, tmp_path: Path) -> None:
    """Nothing past retention and no orphan: the cleanup's plan, read with pyiceberg, says so, and the run
    (launched as a deployment launches it, where no `java` is on the PATH) succeeds without Spark."""
    source = make_source(copy_fixture("table-with-dv-small"))  # 2 snapshots, 10 retained
    sync_table(spark, source.delta_path, source.iceberg_table)
    tables = Path(sources_file(tmp_path / "tables.yaml", catalog, source))
    with code_server(tmp_path / "dagster", tables, env=no_java_env()) as server:
        run = server.launch(source.cleanup_job_name, source.tags)
        with server.instance() as instance:
            (record,) = instance.fetch_observations(dg.AssetKey(source.mirror_asset_key), limit=10).records
    print(f"cleanup with nothing to do: {run.seconds:.1f} s, {run.tree.pythons} Python processes")
    assert run.status == dg.DagsterRunStatus.SUCCESS, (tmp_path / "dagster" / "code_server.log").read_text()[
        -3000:
    ]
    assert run.tree.jvms == 0
    observation = record.asset_observation
    assert observation is not None
    meta = {k: v.value for k, v in observation.metadata.items()}
    assert meta["read_with"] == "pyiceberg" and meta["dry_run"] is False
    versions = expected_versions("table-with-dv-small")  # one snapshot each, all within retention
    snapshots = len(versions)
    assert (meta["snapshots_before"], meta["snapshots_expired"], meta["snapshots_retained"]) == (
        snapshots,
        0,
        snapshots,
    )
    assert (meta["files_reclaimed"], meta["retained_delta_versions"]) == (0, f"{versions[0]}..{versions[-1]}")
