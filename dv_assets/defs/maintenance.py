"""The `cleanup_<name>` job (one per table): `dv_assets.mirror.expire_and_reclaim`
(snapshot expiry past the source's retention; only the mirror's own files are ever deleted), reported as
asset observations of `iceberg/<source>`:

* one for the table: what was expired and reclaimed, the Delta versions still retained
  (`retained_delta_versions`), i.e. those a reader can still time-travel to, and the table's metadata
  file after the cleanup rewrote it (`metadata_location`: the materializations' own location,
  `metadata_location_when_materialized`, is older now);
* one per expired version's partition (`status: expired`, `dvmirror/time_travel: expired`, the snapshot
  and the cleanup run): its snapshot, and the delete files its materialization lists, are gone.

Spark starts only when there is something to do: each table's cleanup is first planned without a JVM
(`plan_without_jvm`, read with pyiceberg, as `dvmirror expire --dry-run`), and a table with no snapshot
past retention and no orphan to reclaim is reported from that plan (`read_with: pyiceberg`); a dry run
never starts Spark. A catalog pyiceberg has no counterpart of is cleaned through Spark, as before.

Expired partitions then leave the table's partitions (`retire_expired_partitions`), so the Partitions
view shows exactly the versions a reader can still time-travel to. Dagster 1.13 shows a partition as
materialized, failed, in progress or missing, nothing else: "failed" takes a failed run that planned it
(red, for a healthy mirror), and "missing" a partition wipe, which its SQL event-log storages do not
implement (`wipe_asset_partitions` raises NotImplementedError). Deleting the dynamic partition keeps
every record: the materializations, check executions and the "expired" observation stay in the event
log under the partition's key (`fetch_materializations` with `asset_partitions=[key]` still returns
them). The version sensor never adds an expired version back (it adds the readable and the missing
ones, after the newest partition). A run that names an expired version anyway (a cleanup by `dvmirror
expire`) succeeds and records it as expired (iceberg/assets.py).
"""

import dagster as dg
from pydantic import Field

from dv_assets.defs.delta.assets import partition_key
from dv_assets.defs.signatures import evaluated
from dv_assets.defs.sources import DeltaSource
from dv_assets.defs.status_metadata import METADATA_LOCATION, RETAINED_VERSIONS, TIME_TRAVEL, version_ranges
from dv_assets.mirror import (
    CatalogConfig,
    IcebergJava,
    MaintenanceReport,
    MirrorTable,
    expire_and_reclaim,
    plan_without_jvm,
    read_mirror_table,
)
from resources.spark import IcebergSparkResource

MAX_LISTED = 50


def report_metadata(report: MaintenanceReport) -> dict[str, dg.MetadataValue]:
    listed = report.deleted_delete_files + report.deleted_orphans
    return {
        "snapshots_before": dg.MetadataValue.int(report.snapshots_before),
        "snapshots_expired": dg.MetadataValue.int(len(report.expired_snapshot_ids)),
        "snapshots_retained": dg.MetadataValue.int(report.retained_snapshots),
        "delete_files_reclaimed": dg.MetadataValue.int(len(report.deleted_delete_files)),
        "metadata_files_reclaimed": dg.MetadataValue.int(len(report.deleted_metadata_files)),
        "orphans_reclaimed": dg.MetadataValue.int(len(report.deleted_orphans)),
        "files_reclaimed": dg.MetadataValue.int(report.files_reclaimed),
        "bytes_reclaimed": dg.MetadataValue.int(report.bytes_reclaimed),
        "dry_run": dg.MetadataValue.bool(report.dry_run),
        # "pyiceberg": answered without a JVM (a dry run, or nothing to do); "iceberg-java": through Spark.
        "read_with": dg.MetadataValue.text(report.read_with),
        "mirror_files_deleted": dg.MetadataValue.md(
            "\n".join(f"- `{f.rsplit('/', 1)[-1]}`" for f in listed[:MAX_LISTED]) or "none"
        ),
    }


def expiry_metadata(
    report: MaintenanceReport, before: MirrorTable | None
) -> tuple[dict[str, dg.MetadataValue], dict[int, int]]:
    """The table's expired and retained Delta versions (from the snapshots before the expiry), and the
    expired versions' snapshot ids by version."""
    versions = {} if before is None else {s.snapshot_id: s.delta_version for s in before.snapshots}
    expired = {v: sid for sid in report.expired_snapshot_ids if (v := versions.get(sid)) is not None}
    retained = [v for sid, v in versions.items() if v is not None and v not in expired]
    metadata = {
        RETAINED_VERSIONS: dg.MetadataValue.text(version_ranges(retained)),
        "expired_delta_versions": dg.MetadataValue.text(version_ranges(expired)),
    }
    return metadata, expired


def expired_partition_observations(
    context: dg.OpExecutionContext, source: DeltaSource, expired: dict[int, int], retained: str
) -> list[dg.AssetObservation]:
    """One observation per expired version that Dagster holds as a materialized partition of the
    mirror: it can no longer be read (time-travelled to) in the mirror."""
    asset_key = dg.AssetKey(source.mirror_asset_key)
    materialized = context.instance.get_materialized_partitions(asset_key)
    return [
        dg.AssetObservation(
            asset_key=asset_key,
            partition=partition_key(version),
            description=f"Snapshot {snapshot_id} of Delta version {version} expired by the cleanup job: "
            "this version can no longer be read from the mirror.",
            metadata={
                "status": dg.MetadataValue.text("expired"),
                TIME_TRAVEL: dg.MetadataValue.text("expired"),
                "delta_version": dg.MetadataValue.text(str(version)),
                "snapshot_id": dg.MetadataValue.text(str(snapshot_id)),
                "expired_by_run": dg.MetadataValue.dagster_run(context.run_id),
                RETAINED_VERSIONS: dg.MetadataValue.text(retained),
            },
        )
        for version, snapshot_id in sorted(expired.items())
        if partition_key(version) in materialized
    ]


def retire_expired_partitions(
    instance: dg.DagsterInstance, source: DeltaSource, expired: list[int]
) -> list[str]:
    """Take the expired versions' partitions out of the table's partitions (see the module's docstring
    for why, and what is kept); the keys taken out."""
    existing = set(instance.get_dynamic_partitions(source.partitions_name))
    retired = [partition_key(v) for v in sorted(expired) if partition_key(v) in existing]
    for key in retired:
        instance.delete_dynamic_partition(source.partitions_name, key)
    return retired


def planned_without_jvm(
    catalog: CatalogConfig, source: DeltaSource, *, dry_run: bool
) -> tuple[MirrorTable | None, MaintenanceReport | None]:
    """The table (read with pyiceberg) and the cleanup's report when it is known without a JVM: a dry run,
    or nothing to expire or reclaim (the report is then the whole cleanup). (None, None) when Spark must
    do it: snapshots to expire or files to reclaim, or a catalog pyiceberg cannot read."""
    if not catalog.pyiceberg_reads():
        return None, None
    before = read_mirror_table(catalog, source.iceberg_table)
    plan = plan_without_jvm(catalog, source.iceberg_table, source.retention)
    if dry_run:
        return before, plan
    if plan.expired_snapshot_ids or plan.files_reclaimed:
        return None, None
    plan.dry_run = False  # nothing to do: this is what the cleanup did
    return before, plan


def cleanup_run_config(source: DeltaSource) -> dict:
    return {"ops": {source.cleanup_op_name: {"config": {"sources": [source.name]}}}}


class CleanupConfig(dg.Config):
    sources: list[str] = Field(default_factory=list, description="source names to clean; empty: all")
    dry_run: bool = Field(default=False, description="report what would be reclaimed, delete nothing")


def build_cleanup_job(sources: list[DeltaSource], job_name: str, op_name: str) -> dg.JobDefinition:
    """The cleanup job over `sources`; job and op names are the caller's (op names are unique across a
    code location, so each table's job has its own op)."""
    by_name = {s.name: s for s in sources}

    @dg.op(
        name=op_name,
        description="Expire snapshots past retention (Iceberg's file cleanup off) and delete only the "
        "mirror's own files nothing retained references; Spark starts only when there is something to "
        "expire or reclaim (read with pyiceberg first).",
    )
    @evaluated
    def expire_and_clean(
        context: dg.OpExecutionContext, config: CleanupConfig, spark: IcebergSparkResource
    ) -> dg.Output[dict]:
        unknown = [n for n in config.sources if n not in by_name]
        if unknown:
            raise dg.Failure(description=f"unknown sources {unknown}; configured: {sorted(by_name)}")
        totals = {"files_reclaimed": 0, "bytes_reclaimed": 0, "snapshots_expired": 0}
        rows = []
        iceberg: IcebergJava | None = (
            None  # Spark and Iceberg Java, started on the first table that needs them
        )
        for name in config.sources or list(by_name):
            source = by_name[name]
            before, report = planned_without_jvm(spark.settings.catalog, source, dry_run=config.dry_run)
            if report is None:  # something to expire or reclaim (or no pyiceberg reader): Spark does it
                iceberg = iceberg or IcebergJava(spark.spark_session)
                before = iceberg.load(source.iceberg_table)  # the expired snapshots' Delta versions
                report = expire_and_reclaim(
                    iceberg, source.iceberg_table, source.retention, dry_run=config.dry_run
                )
                after = before if config.dry_run else iceberg.load(source.iceberg_table)
            else:
                after = before  # nothing was changed
            versions, expired = expiry_metadata(report, before)
            if after is not None and after.metadata_location is not None:
                versions[METADATA_LOCATION] = dg.MetadataValue.path(after.metadata_location)
            context.log.info(
                f"{name}: expired {len(report.expired_snapshot_ids)} of {report.snapshots_before} "
                f"snapshots, reclaimed {report.files_reclaimed} files, {report.bytes_reclaimed} bytes"
            )
            context.log_event(
                dg.AssetObservation(
                    asset_key=dg.AssetKey(source.mirror_asset_key),
                    metadata=report_metadata(report) | versions,
                )
            )
            if not config.dry_run:
                retained = versions[RETAINED_VERSIONS].value
                for observation in expired_partition_observations(context, source, expired, str(retained)):
                    context.log_event(observation)
                retired = retire_expired_partitions(context.instance, source, list(expired))
                if retired:
                    context.log.info(f"{name}: partitions {', '.join(retired)} retired (snapshots expired)")
            totals["files_reclaimed"] += report.files_reclaimed
            totals["bytes_reclaimed"] += report.bytes_reclaimed
            totals["snapshots_expired"] += len(report.expired_snapshot_ids)
            rows.append(
                f"| {name} | {len(report.expired_snapshot_ids)} | {report.retained_snapshots} | "
                f"{report.files_reclaimed} | {report.bytes_reclaimed} |"
            )
        table = "\n".join(
            [
                "| source | snapshots expired | retained | files reclaimed | bytes reclaimed |",
                "|---|--:|--:|--:|--:|",
                *rows,
            ]
        )
        return dg.Output(
            totals,
            metadata={
                "files_reclaimed": dg.MetadataValue.int(totals["files_reclaimed"]),
                "bytes_reclaimed": dg.MetadataValue.int(totals["bytes_reclaimed"]),
                "snapshots_expired": dg.MetadataValue.int(totals["snapshots_expired"]),
                "by_source": dg.MetadataValue.md(table),
            },
        )

    @dg.job(
        name=job_name,
        description="Expire Iceberg snapshots past each source's retention; reclaim only mirror-owned files.",
        tags={"dvmirror/kind": "cleanup", **(sources[0].tags if len(sources) == 1 else {})},
        executor_def=dg.in_process_executor,  # one op: no process of its own (docs/dagster.md)
    )
    @evaluated
    def cleanup() -> None:
        expire_and_clean()

    return cleanup
