"""One table's cleanup as the Dagster cleanup job runs it: snapshot expiry past the retention and the
mirror's own files reclaimed (`expire_and_reclaim`), with the JVM started only when there is something
to do.

The cleanup is first planned without a JVM (`plan_without_jvm`, read with pyiceberg, as `dvmirror expire
--dry-run`): a dry run is that plan, and so is a cleanup with no snapshot past retention and no orphan
to reclaim (`read_with: pyiceberg`). Otherwise, or when pyiceberg has no counterpart of the catalog,
Iceberg Java does it through Spark (`spark`, called then). Plain values, no Dagster: the cleanup op
turns them into observations (`dv_assets.defs.maintenance`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import SparkSession

from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.iceberg.maintenance import (
    MaintenanceReport,
    Retention,
    expire_and_reclaim,
    plan_without_jvm,
)
from dv_assets.mirror.iceberg.mirror_table import MirrorTable
from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table
from dv_assets.mirror.settings import CatalogConfig


@dataclass(frozen=True)
class CleanupOutcome:
    """What a cleanup did (or, dry, would do), with the Delta versions it concerns: those whose snapshots
    it expired (with the snapshot ids) and those still readable (time travel), read from the snapshots
    before the expiry; and the table's metadata file after it (None: no table)."""

    report: MaintenanceReport
    expired: dict[int, int]  # Delta version -> snapshot id
    retained: list[int]
    metadata_location: str | None

    @property
    def summary(self) -> str:
        report = self.report
        return (
            f"expired {len(report.expired_snapshot_ids)} of {report.snapshots_before} snapshots, reclaimed "
            f"{report.files_reclaimed} files, {report.bytes_reclaimed} bytes"
        )


def planned_without_jvm(
    catalog: CatalogConfig, iceberg_table: str, retention: Retention, *, dry_run: bool
) -> tuple[MirrorTable | None, MaintenanceReport | None]:
    """The table (read with pyiceberg) and the cleanup's report when it is known without a JVM: a dry run,
    or nothing to expire or reclaim (the report is then the whole cleanup). (None, None) when Spark must
    do it: snapshots to expire or files to reclaim, or a catalog pyiceberg cannot read."""
    if not catalog.pyiceberg_reads():
        return None, None
    before = read_mirror_table(catalog, iceberg_table)
    plan = plan_without_jvm(catalog, iceberg_table, retention)
    if dry_run:
        return before, plan
    if plan.expired_snapshot_ids or plan.files_reclaimed:
        return None, None
    plan.dry_run = False  # nothing to do: this is what the cleanup did
    return before, plan


def expired_and_retained(
    report: MaintenanceReport, before: MirrorTable | None
) -> tuple[dict[int, int], list[int]]:
    """The expired snapshots' Delta versions (-> snapshot id) and the retained ones, from the table's
    snapshots before the expiry."""
    versions = {} if before is None else {s.snapshot_id: s.delta_version for s in before.snapshots}
    expired = {v: sid for sid in report.expired_snapshot_ids if (v := versions.get(sid)) is not None}
    retained = [v for v in versions.values() if v is not None and v not in expired]
    return expired, retained


def clean_table(
    catalog: CatalogConfig,
    iceberg_table: str,
    retention: Retention,
    spark: Callable[[], SparkSession],
    *,
    dry_run: bool = False,
) -> CleanupOutcome:
    """Expire `iceberg_table`'s snapshots past `retention` and delete only the mirror's own files nothing
    retained references (nothing when `dry_run`); `spark` is called only when Iceberg Java must do it."""
    before, report = planned_without_jvm(catalog, iceberg_table, retention, dry_run=dry_run)
    after = before  # nothing changed when the plan is the whole cleanup
    if report is None:
        iceberg = IcebergJava(spark())
        before = iceberg.load(iceberg_table)  # the expired snapshots' Delta versions
        report = expire_and_reclaim(iceberg, iceberg_table, retention, dry_run=dry_run)
        after = before if dry_run else iceberg.load(iceberg_table)
    expired, retained = expired_and_retained(report, before)
    location = None if after is None else after.metadata_location
    return CleanupOutcome(report, expired, retained, location)
