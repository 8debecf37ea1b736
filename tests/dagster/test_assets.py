"""The partitioned assets and their blocking checks, materialized through Dagster: one partition, or a
partition range in one run (the sensor's backlog), every version recorded and checked on its own."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from dv_assets.defs.iceberg.freshness import MIRROR_LAG_CHECK
from dv_assets.defs.partition_events import RECORDED_AGAIN
from dv_assets.defs.sensors import mirror_range_request
from dv_assets.defs.status_metadata import (
    LAG_SECONDS,
    LAG_VERSIONS,
    METADATA_WHEN_MATERIALIZED,
    READABLE_VERSIONS,
)
from dv_assets.defs.table_metadata import delta_column_schema, iceberg_column_schema
from dv_assets.mirror.delta.schema import StructType
from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.iceberg.mirror_table import CommitRequest
from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table
from dv_assets.mirror.iceberg.types import Schema
from dv_assets.mirror.placement import ExecutorPolicy
from dv_assets.mirror.sync import sync_table
from testkit.launched_run import code_server
from tests.helpers.dagster import (
    add_partitions,
    build_source,
    check_executions,
    checks_by_partition,
    checks_passed,
    definitions,
    evaluate_sensor,
    latest_materialization,
    launch_requested_runs,
    make_source,
    materializations,
    materialize_version,
    materialized_order,
    recorded_check_status,
    recorded_materializations,
    resources,
    run_materializations,
    sources_file,
)
from tests.helpers.delta_histories import delta_ref, fast_spark, latest_version, tblproperties
from tests.helpers.readers import (
    delta_spark_rows,
    iceberg_java_rows,
    pyiceberg_rows,
    snapshots_by_delta_version,
)

CHECKS = ["metadata_row_count_matches", "one_dv_per_data_file", "row_count_matches"]
ALL_PASS = dict.fromkeys(CHECKS, True)
# A mirror run scans (row_count_matches) the newest version of its range only.
BLOCKING_PASS = {"metadata_row_count_matches": True, "one_dv_per_data_file": True}


def checked_in_run(versions: range, newest: int) -> dict[str, dict[str, bool]]:
    return {str(v): ALL_PASS if v == newest else BLOCKING_PASS for v in versions}


def test_delta_versions_record_what_each_commit_did(copy_fixture) -> None:
    built = build_source(make_source(copy_fixture("dv-partitioned-with-checkpoint")))
    key = built.source.delta_asset_key
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(built.partitions_def.name, [str(v) for v in range(10)])
        # One run over the range 0..9 (as the sensor requests it) records each version on its own.
        result = dg.materialize(
            [built.delta_versions], instance=instance, tags=mirror_range_request(built.source, 0, 9).tags
        )
        in_run = materializations(result, key)
        assert in_run == recorded_materializations(instance, key, [str(v) for v in range(10)])
        # Recorded in version order, once each: the newest is the asset's latest materialization.
        assert materialized_order(instance, key) == [str(v) for v in range(10)]
        assert latest_materialization(instance, key) == ("9", 9)

        # Partition 3 again: recorded, then 9 again, so that 9 stays the latest.
        again = dg.materialize([built.delta_versions], instance=instance, partition_key="3")
        assert [m.partition for m in run_materializations(again, key)] == ["3", "9"]
        assert run_materializations(again, key)[-1].description == RECORDED_AGAIN
        assert latest_materialization(instance, key) == ("9", 9)
        # A range above: its newest is the latest.
        instance.add_dynamic_partitions(built.partitions_def.name, [str(v) for v in range(10, 16)])
        above = dg.materialize(
            [built.delta_versions], instance=instance, tags=mirror_range_request(built.source, 12, 15).tags
        )
        assert [m.partition for m in run_materializations(above, key)] == ["12", "13", "14", "15"]
        assert latest_materialization(instance, key) == ("15", 15)
    meta = {int(p): m for p, m in in_run.items()}
    assert sorted(meta) == list(range(10))
    assert all(meta[v]["delta_version"] == v for v in meta)
    assert meta[0]["operation"] == "WRITE"
    assert meta[0]["data_files_added"] == 20 and meta[0]["live_rows"] == 50
    # v6 replaces a DV (one more row deleted); v9 removes a data file that carried a DV.
    assert (meta[6]["dvs_updated"], meta[6]["rows_deleted_by_dvs"]) == (1, 1)
    assert meta[9]["data_files_removed"] == 1 and meta[9]["dvs_removed"] == 1
    assert meta[9]["live_rows"] == 41  # as Iceberg counts it: 48 records, 7 deleted by DVs
    assert "Delta version 9" in meta[9]["summary"]
    # Dagster's standard keys: the table's rows at the version and its columns, from the log.
    assert [meta[v]["dagster/row_count"] for v in (0, 6, 9)] == [50, 44, 41]
    assert [(c.name, c.type) for c in meta[9]["dagster/column_schema"].columns] == [
        ("part", "integer"),
        ("col1", "integer"),
        ("col2", "string"),
    ]


def test_nested_types_render_as_one_type_string() -> None:
    iceberg = {
        "type": "struct",
        "fields": [
            {"id": 1, "name": "id", "required": True, "type": "long", "doc": "the key"},
            {
                "id": 2,
                "name": "tags",
                "required": False,
                "type": {
                    "type": "map",
                    "key-id": 3,
                    "key": "string",
                    "value-id": 4,
                    "value": {"type": "list", "element-id": 5, "element": "decimal(10, 2)"},
                    "value-required": False,
                },
            },
            {
                "id": 6,
                "name": "point",
                "required": False,
                "type": {"type": "struct", "fields": [{"id": 7, "name": "x", "type": "double"}]},
            },
        ],
    }
    columns = iceberg_column_schema(Schema.from_json(iceberg)).columns
    assert [(c.name, c.type, c.constraints.nullable) for c in columns] == [
        ("id", "long", False),
        ("tags", "map<string, list<decimal(10, 2)>>", True),
        ("point", "struct<x: double>", True),
    ]
    assert columns[0].description == "the key"
    delta = {
        "type": "struct",
        "fields": [
            {"name": "a", "type": {"type": "array", "elementType": "integer"}, "nullable": True},
            {
                "name": "m",
                "type": {"type": "map", "keyType": "string", "valueType": "long"},
                "nullable": False,
            },
        ],
    }
    delta_schema = StructType.from_json(delta)
    assert [c.type for c in delta_column_schema(delta_schema).columns] == [
        "array<integer>",
        "map<string, long>",
    ]


@pytest.mark.spark
def test_mirror_in_order_reports_gaps_and_existing_snapshots(spark, catalog, copy_fixture) -> None:
    built = build_source(make_source(copy_fixture("dv-partitioned-with-checkpoint")))
    key = built.source.mirror_asset_key
    with dg.instance_for_test() as instance:
        first = materialize_version(built, catalog, instance, 3)
        mirrored = materializations(first, key)
        assert set(mirrored) == {"0", "1", "2", "3"}  # the gap, each its own snapshot, then 3
        assert mirrored["3"]["mirrored_versions"] == "0, 1, 2, 3"
        assert len({m["snapshot_id"] for m in mirrored.values()}) == 4
        assert checks_passed(first) == ALL_PASS
        # The gap's versions are checked too, each on its own partition (the full scan on 3 only).
        assert checks_by_partition(first) == checked_in_run(range(4), 3)
        assert instance.get_materialized_partitions(dg.AssetKey(key)) == {"0", "1", "2", "3"}
        # In version order, the gap first: 3 is the latest, with the mirror's current state.
        assert [m.partition for m in run_materializations(first, key)] == ["0", "1", "2", "3"]
        assert latest_materialization(instance, key) == ("3", 3)
        current = mirrored["3"]
        assert (current["mirrored_delta_version"], current["live_rows"]) == (
            "3",
            current["dagster/row_count"],
        )
        assert current["current_snapshot_id"] == current["snapshot_id"]
        assert current[METADATA_WHEN_MATERIALIZED].endswith(".metadata.json")
        assert current["dagster/uri"] == read_mirror_table(catalog, built.source.iceberg_table).location
        assert "Delta version **3**" in current["overview"]
        assert "mirrored_delta_version" not in mirrored["2"]
        # The lag on every materialization: Delta is at 15, the mirror at 3.
        assert {(m[LAG_VERSIONS], m["delta_latest_version"]) for m in mirrored.values()} == {(12, "15")}
        assert all(m[LAG_SECONDS] > 0 for m in mirrored.values())

        snapshots = spark.sql(f"SELECT * FROM {built.source.spark_table}.snapshots").count()
        again = materializations(materialize_version(built, catalog, instance, 3), key)["3"]
        assert again["status"].startswith("already mirrored")
        assert again["snapshot_id"] == mirrored["3"]["snapshot_id"]
        # An existing snapshot reports the same standard table metadata as when it was mirrored.
        assert {k: v for k, v in again.items() if k.startswith("dagster/")} == {
            k: v for k, v in mirrored["3"].items() if k.startswith("dagster/")
        }
        assert again["dagster/row_count"] == 47
        assert spark.sql(f"SELECT * FROM {built.source.spark_table}.snapshots").count() == snapshots

        # v9 removes a data file that carried a DV; 4..8 are mirrored first.
        later = materialize_version(built, catalog, instance, 9)
        assert materializations(later, key)["9"]["mirrored_versions"] == "4, 5, 6, 7, 8, 9"
        assert all(checks_passed(later).values())
        assert checks_by_partition(later) == checked_in_run(range(4, 10), 9)
        assert latest_materialization(instance, key) == ("9", 9)

        # Partition 3 again, below the mirror's version: 9 is recorded again, last, and stays the latest.
        below = materialize_version(built, catalog, instance, 3)
        assert [m.partition for m in run_materializations(below, key)] == ["3", "9"]
        nine = run_materializations(below, key)[-1]
        assert nine.description == RECORDED_AGAIN
        assert nine.metadata["mirrored_delta_version"].value == "9"
        assert latest_materialization(instance, key) == ("9", 9)
        assert set(checks_by_partition(below)) == {"3", "9"}

        # The failure path: versions 10..15 exist, 16 and 17 do not. 10..13 are mirrored first, then 14
        # and 15; they are recorded, in order, before the run fails.
        add_partitions(instance, built, list(range(10, 18)))
        failed = dg.materialize(
            [built.iceberg_mirror],
            instance=instance,
            resources=resources(catalog),
            tags=mirror_range_request(built.source, 14, 17).tags,
            raise_on_error=False,
        )
        assert not failed.success
        recorded = run_materializations(failed, key)
        assert [m.partition for m in recorded] == [str(v) for v in range(10, 16)]
        assert {m.description for m in recorded} == {"mirrored before the run failed"}
        assert latest_materialization(instance, key) == ("15", 15)
        assert recorded[-1].metadata["mirrored_delta_version"].value == "15"
        assert recorded[-1].metadata[LAG_VERSIONS].value == 0
        assert materialized_order(instance, key) == [
            *("0", "1", "2", "3"),
            "3",
            *(str(v) for v in range(4, 10)),
            *("3", "9"),
            *(str(v) for v in range(10, 16)),
        ]


@pytest.mark.spark
def test_a_backlog_is_one_run_with_every_version_recorded_and_checked(spark, catalog, copy_fixture) -> None:
    source = make_source(copy_fixture("dv-partitioned-with-checkpoint"))
    defs = definitions([source], catalog)
    versions = [str(v) for v in range(16)]
    with dg.instance_for_test() as instance:
        tick = evaluate_sensor(defs, source.version_sensor_name, instance, None)
        (run,) = launch_requested_runs(defs, instance, tick)
        assert run.success
        assert instance.get_runs_count() == 1  # 16 versions, one run (one Spark session)

        # Each version is a materialization of its own partition, with its own metadata, of both assets.
        delta = materializations(run, source.delta_asset_key)
        mirror = materializations(run, source.mirror_asset_key)
        assert sorted(delta, key=int) == sorted(mirror, key=int) == versions
        assert all(delta[p]["delta_version"] == int(mirror[p]["delta_version"]) == int(p) for p in versions)
        assert len({m["snapshot_id"] for m in mirror.values()}) == 16
        v6 = mirror["6"]  # replaces a DV: its own figures, not the run's
        assert (v6["operation"], v6["dvs_copied"], v6["details"]["deletes_replaced"]) == ("DELETE", 1, 1)
        # Where its DV work ran and why: the driver, on the tests' local master, with the threshold in force.
        master = spark.sparkContext.master
        placement = (v6["details"]["dvs_converted_on"], v6["details"]["dv_placement"])
        assert placement == ("driver", f"driver: local master {master}")
        assert v6["details"]["executor_threshold"] == ExecutorPolicy().describe()
        # Numbers only for quantities: identifiers are text, so the UI plots no snapshot id.
        numeric = {
            k
            for k, v in run_materializations(run, source.mirror_asset_key)[-1].metadata.items()
            if isinstance(v, dg.IntMetadataValue | dg.FloatMetadataValue)
        }
        assert numeric == {
            "dagster/row_count",
            "dvs_copied",
            "bytes_written",
            "duration_seconds",
            LAG_VERSIONS,
            LAG_SECONDS,
            "run_duration_seconds",
            "dvs_copied_in_run",
            "bytes_written_in_run",
            "live_rows",
            "live_dvs",
        }
        assert mirror["15"]["mirrored_versions"] == ", ".join(versions)
        assert "mirrored_versions" not in mirror["14"]  # the run's totals go on its newest version only
        assert recorded_materializations(instance, source.mirror_asset_key, versions) == mirror
        # Dagster's standard table metadata, from the Iceberg snapshot (summary and schema): the mirror's
        # rows at each version are Delta's.
        assert all(mirror[p]["dagster/row_count"] == delta[p]["dagster/row_count"] for p in versions)
        assert [mirror[p]["dagster/row_count"] for p in ("0", "9", "15")] == [50, 41, 35]
        assert {mirror[p]["dagster/table_name"] for p in versions} == {f"dvmirror.{source.iceberg_table}"}
        assert [(c.name, c.type) for c in mirror["15"]["dagster/column_schema"].columns] == [
            ("part", "int"),
            ("col1", "int"),
            ("col2", "string"),
        ]
        assert instance.get_materialized_partitions(dg.AssetKey(source.mirror_asset_key)) == set(versions)

        # Both assets in version order: the newest version is each one's latest materialization, and the
        # mirror's carries its current state (what the asset's overview shows).
        for key in (source.delta_asset_key, source.mirror_asset_key):
            assert materialized_order(instance, key) == versions
            assert latest_materialization(instance, key) == ("15", 15)
        newest = mirror["15"]
        assert (newest["mirrored_delta_version"], newest["dagster/row_count"], newest["live_rows"]) == (
            "15",
            35,
            35,
        )
        assert newest["current_snapshot_id"] == newest["snapshot_id"]
        live_dvs = spark.sql(f"SELECT * FROM {source.spark_table}.delete_files").count()
        assert (newest["live_dvs"], newest[LAG_VERSIONS], newest[LAG_SECONDS]) == (live_dvs, 0, 0.0)
        assert newest["details"]["live_data_files"] == delta["15"]["live_data_files"]
        assert newest[READABLE_VERSIONS] == "0..15"
        assert all(mirror[p][LAG_VERSIONS] == 0 for p in versions)  # recorded after the whole backlog

        # ... and is checked, each result on its own partition, in the run and the instance: the blocking
        # checks on every version; the full scan is not in the mirror run.
        assert checks_by_partition(run) == dict.fromkeys(versions, BLOCKING_PASS)
        for e in run.get_asset_check_evaluations():  # each linked to its version's materialization
            assert e.target_materialization_data is not None
        # The next tick requests the full scan of the newest version, a checks run of that check alone.
        scan_tick = evaluate_sensor(defs, source.version_sensor_name, instance, tick.cursor)
        (scan,) = launch_requested_runs(defs, instance, scan_tick)
        assert scan.success and scan_tick.run_requests[0].run_key == f"{source.name}:scan:v15"
        (scanned,) = scan.get_asset_check_evaluations()
        assert (scanned.check_name, scanned.partition, scanned.passed) == ("row_count_matches", "15", True)
        assert scanned.metadata["delta_version"].value == 15
        statuses = recorded_check_status(instance, source.mirror_asset_key, CHECKS, versions)
        assert statuses == {
            p: {"metadata_row_count_matches": "SUCCEEDED", "one_dv_per_data_file": "SUCCEEDED"}
            | ({"row_count_matches": "SUCCEEDED"} if p == "15" else {})
            for p in versions
        }
        # No execution stays PLANNED after its run finished (the UI's SKIPPED beside the passed ones).
        executions = check_executions(instance, source.mirror_asset_key, CHECKS)
        assert len(executions) == 16 * 2 + 1
        assert [e for e in executions if e[2] == "PLANNED"] == []
        assert (
            evaluate_sensor(defs, source.version_sensor_name, instance, scan_tick.cursor).run_requests == []
        )


@pytest.mark.spark
def test_a_check_failing_on_an_earlier_version_of_the_run_fails_the_run(spark, catalog, copy_fixture) -> None:
    table = copy_fixture("dv-partitioned-with-checkpoint")
    source = make_source(table)
    sync_table(spark, table, source.iceberg_table, until_version=7)
    # Version 8's writer recorded one row too many for the file whose DV it replaced. The sync trusts
    # the statistics; the row-count check reads the data. Versions 8 and 9 replay commit 8 (the
    # checkpoint at 10 has the true count), so only they are wrong.
    commit = table / "_delta_log" / f"{8:020d}.json"
    actions = [json.loads(line) for line in commit.read_text().splitlines()]
    (add,) = [a["add"] for a in actions if "add" in a]
    stats = json.loads(add["stats"])
    stats["numRecords"] += 1
    add["stats"] = json.dumps(stats)
    commit.write_text("".join(json.dumps(a) + "\n" for a in actions))
    (commit.parent / f".{commit.name}.crc").unlink()  # Hadoop's checksum of the old bytes

    defs = definitions([source], catalog)
    versions = [str(v) for v in range(8, 16)]
    with dg.instance_for_test() as instance:
        tick = evaluate_sensor(defs, source.version_sensor_name, instance, json.dumps({source.name: 7}))
        (run,) = launch_requested_runs(defs, instance, tick)
        assert not run.success  # blocking checks: a failure on any version fails the run

        # Every version of the run is still recorded, and checked on its own partition.
        assert sorted(materializations(run, source.mirror_asset_key), key=int) == versions
        # The mirror kept the file's true count (its DV changed, the file was not re-added): both the
        # metadata check (Delta's log vs. Iceberg's summary) and the full scan see the lie.
        wrong = {"metadata_row_count_matches": False, "one_dv_per_data_file": True}
        expected = {str(v): BLOCKING_PASS for v in range(8, 16)}
        assert checks_by_partition(run) == expected | {"8": wrong, "9": wrong}
        failed = {(e.check_name, e.partition): e for e in run.get_asset_check_evaluations() if not e.passed}
        fast = failed["metadata_row_count_matches", "8"]
        assert (
            fast.metadata["delta_rows_from_log"].value == fast.metadata["iceberg_rows_from_summary"].value + 1
        )
        assert "total-position-deletes" in (fast.description or "")
        recorded = recorded_check_status(
            instance, source.mirror_asset_key, ["metadata_row_count_matches"], versions
        )
        assert {p for p, s in recorded.items() if s["metadata_row_count_matches"] == "FAILED"} == {"8", "9"}
        # Only the blocking metadata check fails the checks' one step (and so the run); the full scan is not
        # blocking, and the DV check passed.
        (failure,) = [e for e in run.all_events if e.event_type_value == "STEP_FAILURE"]
        error = failure.step_failure_data.error
        assert error is not None and error.cls_name == "DagsterAssetCheckFailedError"
        failing = error.message.split(":", 1)[1]
        assert "metadata_row_count_matches" in failing and "one_dv_per_data_file" not in failing

        # The full scan on request: the checks job for the range 8..9 scans both versions and sees the lie.
        checks_job = defs.resolve_job_def(source.checks_job_name)
        scan = checks_job.execute_in_process(
            instance=instance, tags=mirror_range_request(source, 8, 9).tags, raise_on_error=False
        )
        by_key = {(e.check_name, e.partition): e for e in scan.get_asset_check_evaluations()}
        assert {k: e.passed for k, e in by_key.items() if k[0] == "row_count_matches"} == {
            ("row_count_matches", "8"): False,
            ("row_count_matches", "9"): False,
        }
        rows = by_key["row_count_matches", "8"].metadata
        assert rows["delta_rows_from_log"].value == rows["iceberg_rows_read"].value + 1
        assert fast.metadata["iceberg_rows_from_summary"].value == rows["iceberg_rows_read"].value
        recorded = recorded_check_status(instance, source.mirror_asset_key, ["row_count_matches"], versions)
        assert {p for p, s in recorded.items() if s.get("row_count_matches") == "FAILED"} == {"8", "9"}
        assert recorded["15"] == {}  # never scanned: no execution, so no SKIPPED one


@pytest.mark.spark
def test_checks_fail_on_a_damaged_mirror(spark, catalog, copy_fixture) -> None:
    source = make_source(copy_fixture("table-with-dv-small"))
    built = build_source(source)
    defs = definitions([source], catalog)
    with dg.instance_for_test() as instance:
        good = materialize_version(built, catalog, instance, 1)
        assert checks_passed(good) == ALL_PASS

        # Damage: a snapshot for Delta version 1 that lost the DV (its 2 deleted rows come back).
        iceberg = IcebergJava(spark)
        (dv,) = iceberg.delete_files_by_data_file(source.iceberg_table).values()
        current = iceberg.load(source.iceberg_table).current_snapshot_id
        iceberg.commit(source.iceberg_table, CommitRequest(1, {}, current, remove_delete_files=(dv,)))

        checks_job = defs.resolve_job_def(f"checks_{source.name}")
        result = checks_job.execute_in_process(
            instance=instance, tags={"dagster/partition": "1"}, raise_on_error=False
        )
        # Every version check fails; the mirror is not behind Delta, so the lag check passes.
        assert checks_passed(result) == {**dict.fromkeys(CHECKS, False), "mirror_lag_within_freshness": True}
        by_name = {e.check_name: e for e in result.get_asset_check_evaluations()}
        rows = by_name["row_count_matches"].metadata
        assert (rows["delta_rows_from_log"].value, rows["delta_rows_read"].value) == (8, 8)
        assert rows["iceberg_rows_read"].value == 10
        # The summary counts the lost DV too: 10 records, no position deletes left.
        fast = by_name["metadata_row_count_matches"].metadata
        assert (fast["delta_rows_from_log"].value, fast["iceberg_rows_from_summary"].value) == (8, 10)
        assert fast["iceberg_total_position_deletes"].value == 0
        assert "Delta DVs missing in Iceberg" in by_name["one_dv_per_data_file"].description

        # Materializing the partition reports the (damaged) snapshot and the blocking checks fail the run.
        rerun = materialize_version(built, catalog, instance, 1, raise_on_error=False)
        assert not rerun.success
        assert checks_passed(rerun) == dict.fromkeys(CHECKS, False)
        assert set(checks_by_partition(rerun)) == {"1"}  # nothing mirrored: only the run's partition


@pytest.mark.spark
def test_the_metadata_row_count_check_refuses_files_without_num_records(spark, catalog, copy_fixture) -> None:
    table = copy_fixture("table-with-dv-small")
    # A writer that collected no statistics: the mirror counts such files from their Parquet footers, the
    # metadata check must not (it would read data, or guess) and refuses instead.
    for commit in sorted((table / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in commit.read_text().splitlines()]
        for action in actions:
            action.get("add", {}).pop("stats", None)
            action.get("remove", {}).pop("stats", None)
        commit.write_text("".join(json.dumps(a) + "\n" for a in actions))
        (commit.parent / f".{commit.name}.crc").unlink(missing_ok=True)
    built = build_source(make_source(table))
    with dg.instance_for_test() as instance:
        run = materialize_version(built, catalog, instance, 1, raise_on_error=False)
    assert not run.success  # blocking: a refusal stops the run like a failure
    blocked = {"metadata_row_count_matches": False, "one_dv_per_data_file": True}
    assert checks_by_partition(run) == {"0": blocked, "1": blocked | {"row_count_matches": True}}
    refused = {e.partition: e for e in run.get_asset_check_evaluations() if not e.passed}
    assert "refused: 1 of 1 live data files of Delta v1 have no numRecords" in (
        refused["1"].description or ""
    )
    assert "delta_rows_from_log" not in refused["1"].metadata
    assert refused["1"].metadata["iceberg_rows_from_summary"].value == 8


@pytest.mark.spark
def test_a_widened_table_mirrors_and_a_refused_widening_fails_the_run(spark, catalog, tmp_path: Path) -> None:
    """Type widening through the asset (issue 19): a Delta Spark table whose v3 widens `i` int → long, with
    DVs before and after, is mirrored in one run, its checks passing, each version's recorded schema its
    own. A float → double widening (v5, refused: pyiceberg and DuckDB filter the old floats wrongly) fails
    the next run with the table, version, column and reason as the failure's description and metadata;
    nothing is committed, v4 stays the asset's latest materialization, and the lag check says the mirror
    is one version behind."""
    root = tmp_path / "widened"
    ref = delta_ref(root)
    with fast_spark(spark):
        spark.sql(
            f"CREATE TABLE {ref} (id INT, i INT, f FLOAT) USING delta "
            f"TBLPROPERTIES ({tblproperties(**{'delta.enableTypeWidening': 'true'})})"
        )
        spark.sql(
            f"INSERT INTO {ref} SELECT /*+ REPARTITION(1) */ CAST(id AS INT), CAST(id AS INT), "
            "CAST(id AS FLOAT) / 4 FROM range(0, 30) t(id)"
        )
        spark.sql(f"DELETE FROM {ref} WHERE id % 7 = 0")
        spark.sql(f"ALTER TABLE {ref} CHANGE COLUMN i TYPE BIGINT")
        spark.sql(f"UPDATE {ref} SET i = i + 3000000000 WHERE id % 5 = 1")  # a DV on the narrow file
    assert latest_version(root) == 4
    source = make_source(root)
    built = build_source(source)
    key = source.mirror_asset_key
    with dg.instance_for_test() as instance:
        run = materialize_version(built, catalog, instance, 4)
        assert checks_by_partition(run) == checked_in_run(range(5), 4)
        mirrored = materializations(run, key)
        column_types = {
            v: {c.name: c.type for c in mirrored[str(v)]["dagster/column_schema"].columns} for v in (2, 4)
        }
        assert column_types == {
            2: {"id": "int", "i": "int", "f": "float"},
            4: {"id": "int", "i": "long", "f": "float"},
        }
        # The rows of the last version (every version through every reader:
        # tests/delta/test_protocol_features.py).
        snapshot_id = snapshots_by_delta_version(catalog, source.iceberg_table)[4]
        delta = delta_spark_rows(spark, str(root), 4)
        assert max(r["i"] for r in delta) == 3000000026  # a widened value beside the old files' ints
        assert iceberg_java_rows(spark, source.iceberg_table, snapshot_id) == delta
        assert pyiceberg_rows(catalog, source.iceberg_table, snapshot_id) == delta

        with fast_spark(spark):
            spark.sql(f"ALTER TABLE {ref} CHANGE COLUMN f TYPE DOUBLE")
        failed = materialize_version(built, catalog, instance, 5, raise_on_error=False)
        assert not failed.success
        (failure,) = failed.get_step_failure_events()
        refusal = failure.step_failure_data.user_failure_data
        assert refusal is not None, failure.step_failure_data.error
        description = refusal.description or ""
        assert description.startswith(f"table {root}, version 5: column 'f' was widened from float to double")
        assert "pyiceberg 0.12 and DuckDB 1.5.5 filter the old files' floats" in description
        assert {k: v.value for k, v in refusal.metadata.items() if k != "refusal_reason"} == {
            "refused_delta_table": str(root),
            "refused_delta_version": 5,
        }
        assert description.endswith(refusal.metadata["refusal_reason"].value)
        assert run_materializations(failed, key) == []
        assert max(snapshots_by_delta_version(catalog, source.iceberg_table)) == 4
        assert latest_materialization(instance, key) == ("4", 4)
        # Its checks did not run (the UI shows them skipped).
        skipped = dict.fromkeys(CHECKS, "PLANNED")
        assert recorded_check_status(instance, key, CHECKS, ["5"]) == {"5": skipped}

        # The version sensor's next tick (no JVM) records the lag and reports the lag check.
        tick = evaluate_sensor(definitions([source], catalog), source.version_sensor_name, instance, None)
        (lag,) = [e for e in tick.asset_events if isinstance(e, dg.AssetObservation)]
        assert lag.metadata[LAG_VERSIONS].value == 1
        (check,) = [e for e in tick.asset_events if isinstance(e, dg.AssetCheckEvaluation)]
        assert check.check_name == MIRROR_LAG_CHECK
        assert (check.description or "").startswith("1 version(s) behind (Delta 5..5 not mirrored)")
        assert check.metadata[LAG_VERSIONS].value == 1


@pytest.mark.spark
def test_a_launched_mirror_run_is_one_process_with_one_jvm(catalog, copy_fixture, tmp_path: Path) -> None:
    """A run launched as a deployment launches it (a code server; the instance's DefaultRunLauncher starts
    the run in a process of its own): the in-process executor runs every step in that one process, which
    builds the code location once, and the mirror step and its blocking checks share one Spark session,
    one JVM. (With Dagster's default executor, each step was a process of its own, rebuilding the code
    location, and the mirror step and each Spark check started a JVM.)"""
    source = make_source(copy_fixture("table-with-dv-small"))
    tables = Path(sources_file(tmp_path / "tables.yaml", catalog, source))
    with code_server(tmp_path / "dagster", tables) as server:
        with server.instance() as instance:
            instance.add_dynamic_partitions(source.partitions_name, ["0", "1"])
        run = server.launch(source.mirror_job_name, mirror_range_request(source, 0, 1).tags)
        with server.instance() as instance:
            key = source.mirror_asset_key
            recorded = recorded_materializations(instance, key, ["0", "1"])
            checked = recorded_check_status(instance, key, CHECKS, ["0", "1"])
    print(
        f"launched mirror run of versions 0..1: {run.seconds:.1f} s, {run.tree.pythons} Python processes, "
        f"{run.tree.jvms} JVM, peak RSS {run.tree.peak_rss / 2**30:.2f} GiB"
    )
    assert run.status == dg.DagsterRunStatus.SUCCESS
    assert run.tree.pythons == 1, run.tree.kinds()  # the run's process; no step process
    assert run.tree.jvms == 1, run.tree.kinds()
    assert [recorded[v]["delta_version"] for v in ("0", "1")] == ["0", "1"]
    # The blocking checks, each on every version (the full scan is a checks run of its own).
    assert checked == {v: dict.fromkeys(BLOCKING_PASS, "SUCCEEDED") for v in ("0", "1")}
    assert snapshots_by_delta_version(catalog, source.iceberg_table).keys() == {0, 1}
