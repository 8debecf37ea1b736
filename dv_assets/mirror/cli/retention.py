"""A table's retention applied by `dvmirror sync` in CLI mode (`RetentionKeeper`, the Dagster cleanup's
expiry), and how the sync reports it: one line naming the table, what was expired and what was deleted;
in JSON, the `expiry` object."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dv_assets.mirror.status import version_ranges

if TYPE_CHECKING:
    from dv_assets.mirror.iceberg.maintenance import MaintenanceReport, Retention


def retention_text(retention: Retention) -> str:
    """`newest 10 kept, the others once older than 168 h` (how a retention reads in a line)."""
    if retention.max_snapshot_age_hours is None:
        return f"newest {retention.retain_last} kept, every other snapshot expired"
    age = retention.max_snapshot_age_hours
    return f"newest {retention.retain_last} kept, the others once older than {age:g} h"


def expiry_text(table: str, report: MaintenanceReport, retention: Retention) -> str:
    versions = version_ranges(report.expired_delta_versions) or "none"
    return (
        f"{table}: expired {len(report.expired_snapshot_ids)} snapshots past its retention "
        f"({retention_text(retention)}; Delta versions {versions}); deleted {report.files_reclaimed} of the "
        f"mirror's files, {report.bytes_reclaimed} bytes"
    )


def expiry_json(report: MaintenanceReport | None) -> dict[str, Any] | None:
    """The `expiry` object of `sync --json` (null: nothing was past retention)."""
    if report is None:
        return None
    return {
        "snapshots_expired": len(report.expired_snapshot_ids),
        "expired_snapshot_ids": report.expired_snapshot_ids,
        "expired_delta_versions": report.expired_delta_versions,
        "snapshots_retained": report.retained_snapshots,
        "deleted_files": report.deleted_files,
        "files_reclaimed": report.files_reclaimed,
        "bytes_reclaimed": report.bytes_reclaimed,
    }
