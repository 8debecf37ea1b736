"""The `cleanup_<name>` job (one per table): `dv_assets.mirror.clean_table` (snapshot expiry past the
source's retention; only the mirror's own files are ever deleted), reported as asset observations of
`iceberg/<source>`:

* one for the table: what was expired and reclaimed, the Delta versions still retained
  (`retained_delta_versions`), i.e. those a reader can still time-travel to, and the table's metadata
  file after the cleanup rewrote it (`metadata_location`: the materializations' own location,
  `metadata_location_when_materialized`, is older now);
* one per expired version's partition (`status: expired`, `dvmirror/time_travel: expired`, the snapshot
  and the cleanup run): its snapshot, and the delete files its materialization lists, are gone.

Spark starts only when there is something to do (`clean_table` plans the cleanup with pyiceberg first:
a table with no snapshot past retention and no orphan to reclaim is reported from that plan, `read_with:
pyiceberg`; a dry run never starts Spark).

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
from dv_assets.mirror.cleanup import CleanupOutcome, clean_table
from dv_assets.mirror.iceberg.maintenance import MaintenanceReport
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


def table_observation(source: DeltaSource, outcome: CleanupOutcome) -> dg.AssetObservation:
    """The cleanup of the table: the report, the expired and retained Delta versions, and the table's
    metadata file after the cleanup rewrote it."""
    versions = {
        RETAINED_VERSIONS: dg.MetadataValue.text(version_ranges(outcome.retained)),
        "expired_delta_versions": dg.MetadataValue.text(version_ranges(outcome.expired)),
    }
    if outcome.metadata_location is not None:
        versions[METADATA_LOCATION] = dg.MetadataValue.path(outcome.metadata_location)
    return dg.AssetObservation(
        asset_key=dg.AssetKey(source.mirror_asset_key), metadata=report_metadata(outcome.report) | versions
    )


def expired_partition_observations(
    context: dg.OpExecutionContext, source: DeltaSource, outcome: CleanupOutcome
) -> list[dg.AssetObservation]:
    """One observation per expired version that Dagster holds as a materialized partition of the
    mirror: it can no longer be read (time-travelled to) in the mirror."""
    asset_key = dg.AssetKey(source.mirror_asset_key)
    materialized = context.instance.get_materialized_partitions(asset_key)
    retained = version_ranges(outcome.retained)
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
        for version, snapshot_id in sorted(outcome.expired.items())
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


def cleanup_run_config(source: DeltaSource) -> dict:
    return {"ops": {source.cleanup_op_name: {"config": {"sources": [source.name]}}}}


class CleanupConfig(dg.Config):
    sources: list[str] = Field(default_factory=list, description="source names to clean; empty: all")
    dry_run: bool = Field(default=False, description="report what would be reclaimed, delete nothing")


def cleanup_output(source: DeltaSource, report: MaintenanceReport) -> dg.Output[dict]:
    """The op's output: the cleanup's totals, and its row of the `by_source` table."""
    totals = {
        "files_reclaimed": report.files_reclaimed,
        "bytes_reclaimed": report.bytes_reclaimed,
        "snapshots_expired": len(report.expired_snapshot_ids),
    }
    table = "\n".join(
        [
            "| source | snapshots expired | retained | files reclaimed | bytes reclaimed |",
            "|---|--:|--:|--:|--:|",
            f"| {source.name} | {len(report.expired_snapshot_ids)} | {report.retained_snapshots} | "
            f"{report.files_reclaimed} | {report.bytes_reclaimed} |",
        ]
    )
    metadata = {key: dg.MetadataValue.int(value) for key, value in totals.items()}
    return dg.Output(totals, metadata={**metadata, "by_source": dg.MetadataValue.md(table)})


def build_cleanup_job(source: DeltaSource, spark: IcebergSparkResource) -> dg.JobDefinition:
    """`cleanup_<name>`: its op is `expire_and_clean_<name>` (op names are unique across a code
    location, so each table's job has its own op). The job holds the code location's `spark` resource
    itself: a job missing a resource is rebuilt with it when the definitions are (one more job build)."""

    @dg.op(
        name=source.cleanup_op_name,
        description="Expire snapshots past retention (Iceberg's file cleanup off) and delete only the "
        "mirror's own files nothing retained references; Spark starts only when there is something to "
        "expire or reclaim (read with pyiceberg first).",
    )
    @evaluated
    def expire_and_clean(
        context: dg.OpExecutionContext, config: CleanupConfig, spark: IcebergSparkResource
    ) -> dg.Output[dict]:
        unknown = [name for name in config.sources if name != source.name]
        if unknown:
            raise dg.Failure(description=f"unknown sources {unknown}; configured: {[source.name]}")
        outcome = clean_table(
            spark.settings.catalog,
            source.iceberg_table,
            source.retention,
            lambda: spark.spark_session,
            dry_run=config.dry_run,
        )
        context.log.info(f"{source.name}: {outcome.summary}")
        context.log_event(table_observation(source, outcome))
        if not config.dry_run:
            for observation in expired_partition_observations(context, source, outcome):
                context.log_event(observation)
            retired = retire_expired_partitions(context.instance, source, list(outcome.expired))
            if retired:
                context.log.info(
                    f"{source.name}: partitions {', '.join(retired)} retired (snapshots expired)"
                )
        return cleanup_output(source, outcome.report)

    @dg.job(
        name=source.cleanup_job_name,
        description="Expire Iceberg snapshots past each source's retention; reclaim only mirror-owned files.",
        tags={"dvmirror/kind": "cleanup", **source.tags},
        executor_def=dg.in_process_executor,  # one op: no process of its own (docs/dagster.md)
        resource_defs={"spark": spark},
    )
    @evaluated
    def cleanup() -> None:
        expire_and_clean()

    return cleanup
