"""`cleanup_schedule_<name>`: the table's `cleanup_<name>` job on its `cleanup_cron` (UTC; without one, daily
at a minute of 01:00-05:00 UTC derived from its name, `spread_cleanup_cron`, so that a fleet's cleanups do
not start together), whether or not anything was compacted, so that every mirror's snapshots are expired
to its retention, an append-only or delete-only table's too (the compacted-deletes sensor stays an extra
trigger after compactions).
Iceberg's own `expire_snapshots` refuses the mirror (`gc.enabled=false`): this job is how its snapshots
go. It starts running or stopped as the table's sensors do (`start_running`)."""

import dagster as dg

from dv_assets.defs.maintenance import cleanup_run_config
from dv_assets.defs.sources import DeltaSource

TRIGGER_TAG = "dvmirror/trigger"


def build_cleanup_schedule(source: DeltaSource, cleanup_job: dg.JobDefinition) -> dg.ScheduleDefinition:
    return dg.ScheduleDefinition(
        name=source.cleanup_schedule_name,
        cron_schedule=source.cleanup_schedule_cron,
        execution_timezone="UTC",
        job=cleanup_job,
        run_config=cleanup_run_config(source),
        tags={**source.tags, TRIGGER_TAG: "schedule"},
        default_status=source.schedule_status,
        description=f"Expires {source.iceberg_table}'s snapshots past its retention (retain_last "
        f"{source.retention.retain_last}, max_snapshot_age_hours {source.retention.max_snapshot_age_hours}) "
        "and reclaims only the mirror's own files, on a schedule.",
    )
