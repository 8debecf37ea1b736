"""`mirror_lag_within_freshness`: whether the mirror is actually behind Delta, judged against the table's
freshness settings (not partitioned: it is about the table now, not a Delta version).

Dagster's freshness policy on `iceberg/<name>` measures the time since the last materialization, so a
quiet Delta table shows FAIL although its mirror is current. This check measures the mirror's lag
instead (`mirror_status`: the Delta log and pyiceberg, no Spark):

* time window (`fail_window_hours`, `warn_window_hours`): PASS when the mirror is up to date or the oldest
  Delta commit it lacks has waited less than the warn (else fail) window; WARN severity past the warn
  window; FAIL past the fail window (the same `>=` Dagster's own evaluation uses);
* cron deadline (`deadline_cron`, `lower_bound_hours`): Dagster wants a materialization within
  [deadline - lower bound, deadline] of the last completed deadline; the mirror's counterpart is that
  every commit made before that window's start is mirrored by the deadline. FAIL when the oldest missing
  commit is older than the last completed deadline minus the lower bound, else PASS (no WARN);
* `freshness: null`: no check (nothing to judge the lag against).

A missing commit whose time the log does not record (no commitInfo timestamp) cannot be shown to be
within the window: FAIL, saying so. It is evaluated by `delta_version_sensor_<name>` (sensors.py: only when
the outcome changes or every `REPORT_EVERY_SECONDS`) and executed like any check (`checks_<name>`,
`dv_assets.ci_checks`); `mirror_<name>` leaves it out (its evaluations are per Delta version).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from enum import IntEnum

import dagster as dg
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,  # links an evaluation to its materialization; not dg.*
)
from dagster._utils.schedules import get_latest_completed_cron_tick  # what Dagster's cron freshness uses

from dv_assets.defs.signatures import evaluated
from dv_assets.defs.sources import DeltaSource, Freshness
from dv_assets.defs.status_metadata import lag_metadata
from dv_assets.mirror.errors import MirrorInputError, StorageError
from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table
from dv_assets.mirror.status import MirrorStatus, mirror_status
from resources.spark import IcebergSparkResource

MIRROR_LAG_CHECK = "mirror_lag_within_freshness"
# The sensor re-reports an unchanged outcome this often (its figures stay current in the UI).
REPORT_EVERY_SECONDS = 600


class LagOutcome(IntEnum):
    """The check's outcome; an int so that the sensor's cursor (`{key: int}`) can hold it."""

    PASS = 0
    WARN = 1
    FAIL = 2


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


def lag_outcome(status: MirrorStatus, freshness: Freshness, now: float) -> tuple[LagOutcome, str]:
    """The outcome of the mirror's lag against the freshness settings at `now` (epoch seconds), and a
    one-line description naming the versions and seconds behind."""
    if status.up_to_date:
        return LagOutcome.PASS, f"up to date: Delta version {status.delta_latest_version} is mirrored"
    first_missing = status.delta_latest_version - status.lag_versions + 1
    behind = (
        f"{status.lag_versions} version(s) behind (Delta {first_missing}..{status.delta_latest_version} "
        f"not mirrored)"
    )
    if status.lag_seconds is None or status.first_missing_commit_ms is None:
        return LagOutcome.FAIL, (
            f"{behind}; Delta version {first_missing} records no commit time, so the wait cannot be "
            "shown to be within the freshness window"
        )
    waited = f"the oldest missing commit (v{first_missing}) has waited {status.lag_seconds:.0f} s"
    if freshness.deadline_cron is not None:
        assert freshness.lower_bound_hours is not None
        deadline = get_latest_completed_cron_tick(
            freshness.deadline_cron, datetime.fromtimestamp(now, UTC), freshness.timezone
        )
        window_start = deadline.timestamp() - freshness.lower_bound_hours * 3600
        late = status.first_missing_commit_ms / 1000 < window_start
        covered = (
            f"the deadline {deadline.isoformat()} covers commits before "
            f"{datetime.fromtimestamp(window_start, UTC):%Y-%m-%d %H:%M} UTC"
        )
        if late:
            return LagOutcome.FAIL, f"{behind}; {waited}; it was due: {covered}"
        return LagOutcome.PASS, f"{behind}; {waited}; not due yet: {covered}"
    assert freshness.fail_window_hours is not None
    fail, warn = freshness.fail_window_hours * 3600, freshness.warn_window_hours
    if status.lag_seconds >= fail:
        return LagOutcome.FAIL, f"{behind}; {waited}, past the {_hours(fail)} fail window"
    if warn is not None and status.lag_seconds >= warn * 3600:
        return LagOutcome.WARN, f"{behind}; {waited}, past the {_hours(warn * 3600)} warn window"
    return LagOutcome.PASS, f"{behind}; {waited}, within the {_hours(fail)} fail window"


def lag_check_result(
    status: MirrorStatus, freshness: Freshness, now: float
) -> tuple[LagOutcome, dg.AssetCheckResult]:
    """The outcome, and the check's result: the description and the lag figures (`lag_metadata`)."""
    outcome, description = lag_outcome(status, freshness, now)
    return outcome, dg.AssetCheckResult(
        check_name=MIRROR_LAG_CHECK,
        passed=outcome is LagOutcome.PASS,
        severity=dg.AssetCheckSeverity.WARN if outcome is LagOutcome.WARN else dg.AssetCheckSeverity.ERROR,
        description=description,
        metadata=lag_metadata(status),
    )


def lag_check_evaluation(
    source: DeltaSource, result: dg.AssetCheckResult, instance: dg.DagsterInstance
) -> dg.AssetCheckEvaluation:
    """The result as a runless evaluation (what a sensor reports), about the asset's latest
    materialization (so the UI does not show it as about an older one)."""
    asset_key = dg.AssetKey(source.mirror_asset_key)
    records = instance.fetch_materializations(asset_key, limit=1).records
    target = (
        None
        if not records
        else AssetCheckEvaluationTargetMaterializationData(
            storage_id=records[0].storage_id, run_id=records[0].run_id, timestamp=records[0].timestamp
        )
    )
    return dg.AssetCheckEvaluation(
        asset_key=asset_key,
        check_name=MIRROR_LAG_CHECK,
        passed=result.passed,
        metadata=result.metadata,
        target_materialization_data=target,
        severity=result.severity,
        description=result.description,
        blocking=False,
    )


def build_lag_checks(source: DeltaSource) -> list[dg.AssetChecksDefinition]:
    """The lag check of `iceberg/<source>`; none when the source has no freshness settings."""
    freshness = source.freshness
    if freshness is None:
        return []

    @dg.asset_check(
        asset=dg.AssetKey(source.mirror_asset_key),
        name=MIRROR_LAG_CHECK,
        blocking=False,
        description="Whether the mirror is actually behind Delta: PASS when it is up to date or the "
        "oldest Delta commit it lacks is still within the table's freshness window (WARN past the warn "
        "window, FAIL past the fail window or a missed cron deadline). Not partitioned: the table now. "
        "Delta log and pyiceberg, no Spark.",
    )
    @evaluated
    def mirror_lag_within_freshness(spark: IcebergSparkResource) -> dg.AssetCheckResult:
        # The resource only names the catalog (read with pyiceberg): no Spark session starts.
        delta = source.delta_table(enforce_protocol=False)
        try:
            mirror = read_mirror_table(spark.settings.catalog, source.iceberg_table)
            status = mirror_status(delta, mirror, source.iceberg_table)
        # A foreign commit, or a Delta log that could not be read: where the mirror stands is unknown.
        except (MirrorInputError, StorageError) as err:
            return dg.AssetCheckResult(passed=False, description=f"cannot tell the lag: {err}")
        return lag_check_result(status, freshness, time.time())[1]

    return [mirror_lag_within_freshness]
