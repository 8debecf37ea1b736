"""Sensors: new Delta commits become ordered partitions and runs; compacted DVs request the cleanup."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from dv_assets.defs.maintenance import CLEANUP_JOB_NAME
from dv_assets.mirror.sync import sync_table
from tests.helpers.dagster import definitions, make_source


def _evaluate(defs: dg.Definitions, name: str, instance: dg.DagsterInstance, cursor: str | None):
    sensor = defs.resolve_sensor_def(name)
    context = dg.build_sensor_context(instance=instance, cursor=cursor, definitions=defs)
    return sensor(context)


def test_delta_version_sensor_adds_partitions_and_runs_in_order(copy_fixture, catalog) -> None:
    table = copy_fixture("dv-partitioned-with-checkpoint")
    source = make_source(table)
    defs = definitions([source], catalog)
    with dg.instance_for_test() as instance:
        result = _evaluate(defs, "delta_version_sensor", instance, None)
        (add,) = result.dynamic_partitions_requests
        assert add.partitions_def_name == source.partitions_name
        assert list(add.partition_keys) == [str(v) for v in range(16)]
        assert [r.partition_key for r in result.run_requests] == [str(v) for v in range(16)]
        assert {r.job_name for r in result.run_requests} == {f"mirror_{source.name}"}
        assert json.loads(result.cursor) == {source.name: 15}

        assert _evaluate(defs, "delta_version_sensor", instance, result.cursor).run_requests == []

        # A new commit (a blind append of nothing but commitInfo) is found on the next tick.
        (table / "_delta_log" / f"{16:020d}.json").write_text(
            json.dumps({"commitInfo": {"timestamp": 1, "operation": "WRITE"}}) + "\n"
        )
        instance.add_dynamic_partitions(source.partitions_name, [str(v) for v in range(16)])
        later = _evaluate(defs, "delta_version_sensor", instance, result.cursor)
        assert [r.partition_key for r in later.run_requests] == ["16"]
        assert list(later.dynamic_partitions_requests[0].partition_keys) == ["16"]
        assert json.loads(later.cursor) == {source.name: 16}


def test_delta_version_sensor_skips_a_missing_table(tmp_path, catalog) -> None:
    source = make_source(tmp_path / "nothing-here")
    with dg.instance_for_test() as instance:
        result = _evaluate(definitions([source], catalog), "delta_version_sensor", instance, None)
    assert result.run_requests == [] and json.loads(result.cursor) == {}


@pytest.mark.spark
def test_compacted_deletes_sensor_requests_cleanup(spark, catalog, copy_fixture) -> None:
    table = copy_fixture("dv-partitioned-with-checkpoint")
    source = make_source(table)
    defs = definitions([source], catalog)
    with dg.instance_for_test() as instance:
        assert _evaluate(defs, "compacted_deletes_sensor", instance, None).run_requests == []  # no mirror

        sync_table(spark, table, source.iceberg_table, until_version=5)
        quiet = _evaluate(defs, "compacted_deletes_sensor", instance, None)
        assert quiet.run_requests == [] and json.loads(quiet.cursor) == {source.name: 5}

        # v6-v8 replace DVs, v9-v13 remove data files that carried DVs.
        sync_table(spark, table, source.iceberg_table)
        result = _evaluate(defs, "compacted_deletes_sensor", instance, quiet.cursor)
        (request,) = result.run_requests
        assert request.job_name == CLEANUP_JOB_NAME
        assert request.tags["dvmirror/compacted-versions"] == "6,7,8,9,10,11,12,13"
        assert request.run_config["ops"]["expire_and_clean"]["config"]["sources"] == [source.name]
        assert json.loads(result.cursor) == {source.name: 15}
        assert _evaluate(defs, "compacted_deletes_sensor", instance, result.cursor).run_requests == []


@pytest.mark.spark
def test_one_unreadable_source_does_not_stop_the_others_cleanup(spark, catalog, copy_fixture) -> None:
    good = make_source(copy_fixture("dv-partitioned-with-checkpoint"))
    broken_table = copy_fixture("table-with-dv-small")
    broken = make_source(broken_table)
    sync_table(spark, good.delta_path, good.iceberg_table)
    sync_table(spark, broken_table, broken.iceberg_table)
    for commit in (broken_table / "_delta_log").iterdir():
        commit.write_text("not json\n")
    defs = definitions([broken, good], catalog)
    with dg.instance_for_test() as instance:
        result = _evaluate(defs, "compacted_deletes_sensor", instance, None)
    (request,) = result.run_requests
    assert request.run_config["ops"]["expire_and_clean"]["config"]["sources"] == [good.name]
