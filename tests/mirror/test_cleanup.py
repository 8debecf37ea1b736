"""`dv_assets.mirror.cleanup.clean_table` without Dagster, on a real mirror of a real Delta table: Spark
is asked for only when there is something to expire or reclaim, and the outcome names the expired and
retained Delta versions and the metadata file after the cleanup."""

from __future__ import annotations

import uuid

import pytest
from pyspark.sql import SparkSession

from dv_assets.mirror.cleanup import clean_table
from dv_assets.mirror.iceberg.maintenance import Retention
from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table
from dv_assets.mirror.sync import sync_table

pytestmark = pytest.mark.spark


def test_a_cleanup_expires_past_retention_and_names_the_versions(spark, catalog, copy_fixture) -> None:
    delta = copy_fixture("dv-partitioned-with-checkpoint")
    table = f"cleanup_engine.t{uuid.uuid4().hex[:10]}"
    sync_table(spark, delta, table)
    asked: list[str] = []

    def started() -> SparkSession:
        asked.append("spark")
        return spark

    retention = Retention(retain_last=3, orphan_min_age_hours=1)
    dry = clean_table(catalog, table, retention, started, dry_run=True)
    assert asked == []  # a dry run is planned with pyiceberg
    assert dry.report.dry_run and dry.report.read_with == "pyiceberg"
    assert sorted(dry.expired) == list(range(13)) and dry.retained == [13, 14, 15]

    done = clean_table(catalog, table, retention, started)
    assert asked == ["spark"]  # snapshots to expire: Iceberg Java does it
    assert not done.report.dry_run and done.report.read_with == "iceberg-java"
    assert done.expired == dry.expired and sorted(done.retained) == [13, 14, 15]
    assert len(done.report.expired_snapshot_ids) == 13
    after = read_mirror_table(catalog, table)
    assert after is not None and done.metadata_location == after.metadata_location
    assert "expired 13 of 16 snapshots" in done.summary

    # Nothing left past retention: answered from the plan, without Spark.
    again = clean_table(catalog, table, retention, started)
    assert asked == ["spark"]
    assert again.report.read_with == "pyiceberg" and not again.report.dry_run
    assert (again.expired, sorted(again.retained)) == ({}, [13, 14, 15])
    assert again.metadata_location == after.metadata_location
