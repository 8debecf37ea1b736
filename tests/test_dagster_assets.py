"""The partitioned assets and their blocking checks, materialized through Dagster."""

from __future__ import annotations

import dagster as dg
import pytest

from dv_assets.mirror.iceberg.java import CommitRequest, IcebergJava
from tests.helpers.dagster import (
    build_source,
    checks_passed,
    definitions,
    make_source,
    materializations,
    materialize_version,
)


def test_delta_versions_record_what_each_commit_did(copy_fixture) -> None:
    built = build_source(make_source(copy_fixture("dv-partitioned-with-checkpoint")))
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(built.partitions_def.name, ["0", "6", "9"])
        meta = {}
        for v in (0, 6, 9):
            result = dg.materialize([built.delta_versions], instance=instance, partition_key=str(v))
            meta[v] = materializations(result, built.source.delta_asset_key)[str(v)]
    assert meta[0]["operation"] == "WRITE"
    assert meta[0]["data_files_added"] == 20 and meta[0]["live_rows"] == 50
    # v6 replaces a DV (one more row deleted); v9 removes a data file that carried a DV.
    assert (meta[6]["dvs_updated"], meta[6]["rows_deleted_by_dvs"]) == (1, 1)
    assert meta[9]["data_files_removed"] == 1 and meta[9]["dvs_removed"] == 1
    assert meta[9]["live_rows"] == 41  # as Iceberg counts it: 48 records, 7 deleted by DVs
    assert "Delta version 9" in meta[9]["summary"]


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
        assert checks_passed(first) == {"row_count_matches": True, "one_dv_per_data_file": True}
        assert instance.get_materialized_partitions(dg.AssetKey(key)) == {"0", "1", "2", "3"}

        snapshots = spark.sql(f"SELECT * FROM {built.source.spark_table}.snapshots").count()
        again = materializations(materialize_version(built, catalog, instance, 3), key)["3"]
        assert again["status"].startswith("already mirrored")
        assert again["snapshot_id"] == mirrored["3"]["snapshot_id"]
        assert spark.sql(f"SELECT * FROM {built.source.spark_table}.snapshots").count() == snapshots

        # v9 removes a data file that carried a DV; 4..8 are mirrored first.
        later = materialize_version(built, catalog, instance, 9)
        assert materializations(later, key)["9"]["mirrored_versions"] == "4, 5, 6, 7, 8, 9"
        assert all(checks_passed(later).values())


@pytest.mark.spark
def test_checks_fail_on_a_damaged_mirror(spark, catalog, copy_fixture) -> None:
    source = make_source(copy_fixture("table-with-dv-small"))
    built = build_source(source)
    defs = definitions([source], catalog)
    with dg.instance_for_test() as instance:
        good = materialize_version(built, catalog, instance, 1)
        assert checks_passed(good) == {"row_count_matches": True, "one_dv_per_data_file": True}

        # Damage: a snapshot for Delta version 1 that lost the DV (its 2 deleted rows come back).
        iceberg = IcebergJava(spark)
        (dv,) = iceberg.delete_files_by_data_file(source.iceberg_table).values()
        current = iceberg.load(source.iceberg_table).current_snapshot_id
        iceberg.commit(source.iceberg_table, CommitRequest(1, {}, current, remove_delete_files=(dv,)))

        checks_job = defs.resolve_job_def(f"checks_{source.name}")
        result = checks_job.execute_in_process(
            instance=instance, tags={"dagster/partition": "1"}, raise_on_error=False
        )
        assert checks_passed(result) == {"row_count_matches": False, "one_dv_per_data_file": False}
        by_name = {e.check_name: e for e in result.get_asset_check_evaluations()}
        rows = by_name["row_count_matches"].metadata
        assert (rows["delta_rows_from_log"].value, rows["delta_rows_read"].value) == (8, 8)
        assert rows["iceberg_rows_read"].value == 10
        assert "Delta DVs missing in Iceberg" in by_name["one_dv_per_data_file"].description

        # Materializing the partition reports the (damaged) snapshot and the blocking checks fail the run.
        rerun = materialize_version(built, catalog, instance, 1, raise_on_error=False)
        assert not rerun.success
        assert checks_passed(rerun) == {"row_count_matches": False, "one_dv_per_data_file": False}
