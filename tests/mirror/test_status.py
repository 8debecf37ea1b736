"""`mirror_status`: where a mirror stands against its Delta log (no JVM), the value the Dagster overview,
the sensors' lag and `dvmirror status` report."""

from __future__ import annotations

from pathlib import Path

from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.iceberg.mirror_table import MirrorTable, Snapshot
from dv_assets.mirror.iceberg.types import Schema
from dv_assets.mirror.status import mirror_status
from tests.helpers.delta_log import add, base_commit, remove, write_log


def commit(operation: str, timestamp_ms: int, *actions: dict) -> list[dict]:
    return [{"commitInfo": {"timestamp": timestamp_ms, "operation": operation}}, *actions]


def delta_log(root: Path) -> DeltaTable:
    first = base_commit(add("a.parquet"))
    first[0] = {"commitInfo": {"timestamp": 1_000, "operation": "WRITE"}}
    write_log(
        root,
        [
            first,
            commit("WRITE", 2_000, add("b.parquet")),
            commit("DELETE", 3_000, remove("a.parquet")),
        ],
    )
    return DeltaTable(root)


def mirror_at(version: int | None) -> MirrorTable:
    snapshots = (
        ()
        if version is None
        else (
            Snapshot(
                7,
                None,
                0,
                {
                    "dvmirror.delta-version": str(version),
                    "total-records": "20",
                    "total-position-deletes": "3",
                    "total-data-files": "2",
                    "total-delete-files": "1",
                },
            ),
        )
    )
    return MirrorTable(
        name="ns.t",
        location="file:/w/ns/t",
        format_version=3,
        properties={},
        schema=Schema.from_json({"type": "struct", "schema-id": 0, "fields": []}),
        current_snapshot_id=None if version is None else 7,
        snapshots=snapshots,
        metadata_location="file:/w/ns/t/metadata/00001.metadata.json",
    )


def test_behind_counts_versions_and_the_wait_of_the_oldest_missing_commit(tmp_path: Path) -> None:
    status = mirror_status(delta_log(tmp_path), mirror_at(0), "ns.t", now_ms=10_000)
    assert (status.delta_latest_version, status.mirrored_version, status.lag_versions) == (2, 0, 2)
    assert status.first_missing_commit_ms == 2_000  # version 1, not the newest
    assert status.lag_seconds == 8.0
    assert not status.up_to_date
    assert (status.snapshot_id, status.live_rows, status.live_data_files, status.live_delete_files) == (
        7,
        17,
        2,
        1,
    )
    assert status.metadata_location == "file:/w/ns/t/metadata/00001.metadata.json"


def test_up_to_date_has_no_lag(tmp_path: Path) -> None:
    status = mirror_status(delta_log(tmp_path), mirror_at(2), "ns.t", now_ms=10_000)
    assert (status.lag_versions, status.lag_seconds, status.first_missing_commit_ms) == (0, 0.0, None)
    assert status.up_to_date


def test_no_mirror_yet_lags_by_every_version(tmp_path: Path) -> None:
    for mirror in (None, mirror_at(None)):
        status = mirror_status(delta_log(tmp_path), mirror, "ns.t", now_ms=10_000)
        assert (status.mirrored_version, status.lag_versions, status.lag_seconds) == (None, 3, 9.0)
        assert status.snapshot_id is None and status.live_rows is None
