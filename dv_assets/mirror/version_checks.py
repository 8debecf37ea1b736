"""The checks that a mirrored Delta version is exact, as plain values (`CheckOutcome`): the Dagster asset
checks (`dv_assets/defs/iceberg/checks.py`) and `dvmirror verify` report these same outcomes.

* `metadata_row_count_matches` (metadata only, no data read): Delta's live rows at N from its log
  (Σ numRecords - Σ DV cardinality) equal the snapshot summary's `total-records` -
  `total-position-deletes` (Iceberg counts v3 DVs there too). It refuses, and so fails, when a live Delta
  file has no numRecords statistic or the summary lacks its totals: it never guesses, never reads a footer.
* `one_dv_per_data_file`: in the snapshot every data file has at most one delete file (DV), every delete
  file references a live data file of the snapshot, every Delta DV has its Iceberg counterpart, and each
  one's cardinality equals the Delta DV's (`verify.compare_dvs`, on the snapshot's content files read by
  Spark or by pyiceberg: the same rows).
* `row_count_matches` (a full scan through Spark): Delta's live rows at N from the log and from a real Delta
  read (`versionAsOf` N) both equal the rows Iceberg Java reads from the snapshot. It catches what
  metadata cannot: statistics that lie about the data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dv_assets.mirror.delta.facts import live_rows, live_rows_from_stats
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.iceberg.mirror_table import Snapshot, SnapshotFiles
from dv_assets.mirror.settings import ICEBERG_CATALOG_NAME
from dv_assets.mirror.verify import findings_against_delta

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

METADATA_ROW_COUNT = "metadata_row_count_matches"
ONE_DV = "one_dv_per_data_file"
ROW_COUNT_SCAN = "row_count_matches"
CHECK_NAMES = (METADATA_ROW_COUNT, ONE_DV, ROW_COUNT_SCAN)

# What a check compared: counts and ids, or (the DV check's problems) the items of each kind of problem.
Detail = int | Mapping[str, tuple[str, ...]]


@dataclass(frozen=True)
class CheckOutcome:
    """One check of one Delta version: passed or not, a one-line summary (why it failed, or what agreed),
    and what was compared, by name (every count it had; none it could not tell)."""

    name: str
    passed: bool
    summary: str
    details: Mapping[str, Detail]


def no_snapshot(name: str, iceberg_table: str, version: int) -> CheckOutcome:
    """A check of a version the mirror has no snapshot for: failed."""
    return CheckOutcome(
        name,
        False,
        f"{iceberg_table} has no snapshot for Delta version {version}",
        {"delta_version": version},
    )


def _ids(version: int, snapshot: Snapshot) -> dict[str, Detail]:
    return {"delta_version": version, "snapshot_id": snapshot.snapshot_id}


def check_metadata_row_count(
    delta: DeltaTable, version: int, iceberg_table: str, snapshot: Snapshot | None
) -> CheckOutcome:
    """Delta's rows from its log vs. Iceberg's from the snapshot summary; both metadata, no data read."""
    if snapshot is None:
        return no_snapshot(METADATA_ROW_COUNT, iceberg_table, version)
    from_log = live_rows_from_stats(delta.state(version, with_stats=False))
    from_summary = snapshot.totals
    counts = {
        "delta_num_records": from_log.records,
        "delta_rows_deleted_by_dvs": from_log.deleted_by_dvs,
        "delta_files_without_num_records": len(from_log.files_without_stats),
        "delta_rows_from_log": from_log.rows,
        "iceberg_total_records": from_summary.records,
        "iceberg_total_position_deletes": from_summary.position_deletes,
        "iceberg_rows_from_summary": from_summary.live_rows,
    }
    details = {**_ids(version, snapshot), **{k: v for k, v in counts.items() if v is not None}}

    def outcome(passed: bool, summary: str) -> CheckOutcome:
        return CheckOutcome(METADATA_ROW_COUNT, passed, summary, details)

    if from_log.rows is None:
        missing = from_log.files_without_stats
        listed = ", ".join(missing[:3]) + (", …" if len(missing) > 3 else "")
        return outcome(
            False,
            f"refused: {len(missing)} of {from_log.files} live data files of Delta v{version} have no "
            f"numRecords statistic ({listed}); the metadata check does not guess or read data "
            f"(`{ROW_COUNT_SCAN}` scans it)",
        )
    if from_summary.live_rows is None:
        return outcome(
            False,
            f"refused: Iceberg snapshot {snapshot.snapshot_id}: {from_summary.live_rows_problem} "
            f"(`{ROW_COUNT_SCAN}` scans the data)",
        )
    counted = (
        f"Delta v{version}: {from_log.rows} rows from the log ({from_log.records} numRecords - "
        f"{from_log.deleted_by_dvs} deleted by DVs); Iceberg snapshot {snapshot.snapshot_id}: "
        f"{from_summary.live_rows} from its summary ({from_summary.records} total-records - "
        f"{from_summary.position_deletes} total-position-deletes)"
    )
    return outcome(from_log.rows == from_summary.live_rows, counted)


def check_one_dv_per_data_file(
    delta: DeltaTable,
    version: int,
    iceberg_table: str,
    snapshot: Snapshot | None,
    files_of: Callable[[int], SnapshotFiles],
) -> CheckOutcome:
    """The snapshot's delete files against Delta `version`'s DVs; `files_of` reads a snapshot's content
    files (by snapshot id) through Spark or pyiceberg."""
    if snapshot is None:
        return no_snapshot(ONE_DV, iceberg_table, version)
    findings = findings_against_delta(delta, version, files_of(snapshot.snapshot_id))
    found = findings.found
    details: dict[str, Detail] = {
        **_ids(version, snapshot),
        "iceberg_delete_files": findings.iceberg_delete_files,
        "delta_dvs": findings.delta_dvs,
        "iceberg_data_files": findings.iceberg_data_files,
        "problems": found,
    }
    if found:
        summary = "; ".join(f"{kind}: {len(items)}" for kind, items in found.items())
    else:
        summary = (
            f"Delta v{version}: {findings.delta_dvs} DVs; Iceberg snapshot {snapshot.snapshot_id}: "
            f"{findings.iceberg_delete_files} delete files on {findings.iceberg_data_files} data files, "
            "at most one per data file, each matching Delta's DV and its cardinality"
        )
    return CheckOutcome(ONE_DV, not found, summary, details)


def check_row_count_scan(
    spark: SparkSession,
    delta: DeltaTable,
    delta_location: str,
    version: int,
    iceberg_table: str,
    snapshot: Snapshot | None,
) -> CheckOutcome:
    """Delta's rows at `version` (its log, and a Delta read of `delta_location`) vs. the rows Iceberg Java
    reads from the snapshot: every row of both tables is scanned."""
    if snapshot is None:
        return no_snapshot(ROW_COUNT_SCAN, iceberg_table, version)
    from_log = live_rows(delta.state(version, with_stats=False))
    from_delta_read = spark.read.format("delta").option("versionAsOf", version).load(delta_location).count()
    from_iceberg = (
        spark.read.option("versionAsOf", snapshot.snapshot_id)
        .table(f"{ICEBERG_CATALOG_NAME}.{iceberg_table}")
        .count()
    )
    return CheckOutcome(
        ROW_COUNT_SCAN,
        from_log == from_delta_read == from_iceberg,
        f"Delta v{version}: {from_log} rows (log), {from_delta_read} (Delta read); Iceberg snapshot "
        f"{snapshot.snapshot_id}: {from_iceberg}",
        {
            **_ids(version, snapshot),
            "delta_rows_from_log": from_log,
            "delta_rows_read": from_delta_read,
            "iceberg_rows_read": from_iceberg,
        },
    )
