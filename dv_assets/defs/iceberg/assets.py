"""`iceberg/<source>`: partition N is Delta version N mirrored as one Iceberg snapshot.

A run materializes a range of partitions (`BackfillPolicy.single_run()`: the sensor's backlog, or a
backfill launched in the UI, is one run and one Spark session). It calls `sync_table(...,
until_version=<the range's last version>)`, which mirrors every version not yet mirrored up to there, in
order, each as its own snapshot; every version is recorded as a materialization of its own partition
with its own metadata (`version_metadata`, its snapshot's dagster/* table metadata) and the mirror's lag
(`dvmirror/lag_versions`, `dvmirror/lag_seconds`), identifiers as text, quantities as numbers, the rest
in one `details` value (status_metadata.py). They are logged in ascending version order, so the
newest is the asset's latest materialization (partition_events.py), and that one also carries the
run's figures and the mirror's current state (status_metadata.py: mirrored version, rows, live DVs,
current snapshot, metadata location): what the asset's overview shows.

* A run is idempotent: a version already mirrored reports its existing snapshot (`existing_metadata`,
  status "already mirrored"); one whose snapshot has expired (cleanup job) is recorded as an observation
  of its partition (status "expired"; `expired_observations` says why not a materialization). Nothing is
  committed for either, the run succeeds, and only the versions after the mirror's are mirrored.
* Versions below the range not yet mirrored (a single partition materialized past a gap, or an earlier
  run that failed) are mirrored first and recorded as materializations of their own partitions; the
  checks evaluate them too (checks.py).
* When a version fails, the versions committed before it are recorded before the run fails.
* A run of versions all older than the mirror's current one records the current one again, last.
"""

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

import dagster as dg
from dagster._core.definitions.metadata import TableMetadataSet  # the dagster/* table keys; not dg.* in 1.13

from dv_assets.defs.delta.assets import partition_key, version_of
from dv_assets.defs.maintenance import retire_expired_partitions
from dv_assets.defs.partition_events import (
    RECORDED_AGAIN,
    add_missing_partitions,
    in_version_order,
    no_derived_materializations,
)
from dv_assets.defs.signatures import evaluated
from dv_assets.defs.sources import DeltaSource
from dv_assets.defs.status_metadata import (
    READABLE_VERSIONS,
    TIME_TRAVEL,
    current_state_metadata,
    details,
    lag_metadata,
    merge_metadata,
)
from dv_assets.defs.table_metadata import iceberg_snapshot_metadata
from dv_assets.mirror.errors import MirrorConflictError, MirrorInputError
from dv_assets.mirror.iceberg.mirror_table import MirrorTable, Snapshot
from dv_assets.mirror.range_sync import RangeSync, current_after, read_back, sync_range, versions_text
from dv_assets.mirror.results import VersionResult
from dv_assets.mirror.secrets import masked
from dv_assets.mirror.status import MirrorStatus, readable_versions, version_ranges
from resources.spark import IcebergSparkResource

Event = dg.AssetMaterialization | dg.AssetObservation | dg.MaterializeResult


def version_metadata(result: VersionResult, table: str) -> dict[str, Any]:
    """One mirrored version: identifiers as text, quantities as numbers, the rest as details."""
    puffins = [p for p in result.delete_files if p.endswith(".puffin")]
    parquets = [p for p in result.delete_files if p.endswith(".parquet")]
    return {
        "status": dg.MetadataValue.text("mirrored"),
        "delta_version": dg.MetadataValue.text(str(result.delta_version)),
        "snapshot_id": dg.MetadataValue.text(str(result.snapshot_id)),
        "operation": dg.MetadataValue.text(result.operation or "UNKNOWN"),
        "dvs_copied": dg.MetadataValue.int(result.dvs_written),
        "bytes_written": dg.MetadataValue.int(result.bytes_written),
        "duration_seconds": dg.MetadataValue.float(result.seconds),
        **details(
            {
                "iceberg_table": table,
                "data_files_added": result.data_files_added,
                "data_files_removed": result.data_files_removed,
                "deletes_replaced": result.deletes_replaced,
                "dvs_converted_on": result.dvs_converted_on,
                "dv_placement": result.dv_placement,
                "executor_threshold": result.executor_threshold,
                "dv_seconds": result.dv_seconds,
                "puffin_files": len(puffins),
                "parquet_delete_files": len(parquets),
                "delete_files": list(result.delete_files),
            }
        ),
    }


ALREADY_MIRRORED = "already mirrored: nothing committed"
EXPIRED = "already mirrored: its snapshot has expired (cleanup job), nothing committed"
VACUUMED = "expired: Delta's VACUUM deleted data files its snapshot named (no reader can read it)"


def existing_metadata(snapshot: Snapshot, table: str) -> dict[str, Any]:
    totals = snapshot.totals
    return {
        "status": dg.MetadataValue.text(ALREADY_MIRRORED),
        "delta_version": dg.MetadataValue.text(str(snapshot.delta_version)),
        "snapshot_id": dg.MetadataValue.text(str(snapshot.snapshot_id)),
        "operation": dg.MetadataValue.text(snapshot.delta_operation),
        "dvs_copied": dg.MetadataValue.int(snapshot.dvs_added),
        "bytes_written": dg.MetadataValue.int(0),
        **details(
            {
                "iceberg_table": table,
                "total_records": totals.records,
                "total_delete_files": totals.delete_files,
            }
        ),
    }


def refusal_metadata(err: MirrorInputError) -> dict[str, dg.MetadataValue]:
    """Where and why the mirror refused to go on: the parts of `err` it knows (secrets masked)."""
    metadata: dict[str, dg.MetadataValue] = {"refusal_reason": dg.MetadataValue.text(masked(err.reason))}
    if err.table is not None:
        metadata["refused_delta_table"] = dg.MetadataValue.path(masked(err.table))
    if err.version is not None:
        metadata["refused_delta_version"] = dg.MetadataValue.int(err.version)
    if err.file is not None:
        metadata["refused_file"] = dg.MetadataValue.path(masked(err.file))
    return metadata


@dataclass(frozen=True)
class Recorded:
    """One version's materialization, before the run's figures are added."""

    version: int
    snapshot_id: int
    metadata: dict[str, Any]
    description: str | None = None


def mirror_run(
    source: DeltaSource, context: dg.AssetExecutionContext, spark: IcebergSparkResource
) -> Iterator[Event]:
    """One run of `iceberg/<source>` over its partitions: the engine mirrors what is missing up to the
    newest (`sync_range`); each version is then recorded (in version order: `materializations`), the
    expired ones observed, and a failure raised after the versions committed before it are recorded."""
    began = time.monotonic()
    run = sync_range(
        spark.spark_session,
        sorted(version_of(k) for k in context.partition_keys),
        delta_path=source.delta_path,
        iceberg_table=source.iceberg_table,
        format_version=source.format_version,
        allowed_roots=source.allowed_roots,
        executors=spark.settings.executors,
        log=context.log.info,
    )
    if run.error is not None or run.absent:
        yield from recorded_before_failure(source, context, spark, run)
        raise_failure(source, run)
    mirror, status = read_back(spark.settings.catalog, source.delta_table(), source.iceberg_table)
    key = context.asset_key
    yield from expired_observations(key, run.expired, mirror, EXPIRED, _expired_description)
    if run.vacuumed:
        held = context.instance.get_materialized_partitions(key)
        vacuumed = [v for v in run.vacuumed if partition_key(v) in held or v in run.versions]
        yield from expired_observations(key, vacuumed, mirror, VACUUMED, _vacuumed_description)
        retired = retire_expired_partitions(context.instance, source, run.vacuumed)
        if retired:
            context.log.info(
                f"{source.iceberg_table}: partitions {', '.join(retired)} retired (Delta's VACUUM deleted "
                "data files their snapshots named; the snapshots are expired)"
            )
    figures = run_figures(run, began)
    yield from materializations(source, context, recorded(run, mirror), figures, mirror, status)
    yield no_derived_materializations()


def recorded(run: RangeSync, mirror: MirrorTable) -> list[Recorded]:
    """Every version the run records: those it mirrored (below its range too), those already there,
    and the mirror's current version again when the run's are all older."""
    table, below = run.iceberg_table, f"mirrored first, in the run for Delta version(s) {run.span}"
    found = [
        Recorded(
            r.delta_version,
            r.snapshot_id,
            version_metadata(r, table),
            None if r.delta_version in run.versions else below,
        )
        for r in run.mirrored
    ]
    found += [
        Recorded(v, snap.snapshot_id, existing_metadata(snap, table)) for v, snap in run.existing.items()
    ]
    current = current_after(mirror, run.newest)
    if current is not None and current.delta_version is not None:
        # Older versions materialized again: the mirror's current version stays the latest.
        found.append(
            Recorded(
                current.delta_version, current.snapshot_id, existing_metadata(current, table), RECORDED_AGAIN
            )
        )
    return found


def run_figures(run: RangeSync, began: float) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "run_versions": dg.MetadataValue.text(run.span),
        "run_duration_seconds": dg.MetadataValue.float(round(time.monotonic() - began, 3)),
        "mirrored_versions": dg.MetadataValue.text(
            versions_text([r.delta_version for r in run.mirrored]) or "none: all already mirrored"
        ),
    }
    if run.mirrored:
        figures |= {
            "dvs_copied_in_run": dg.MetadataValue.int(sum(r.dvs_written for r in run.mirrored)),
            "bytes_written_in_run": dg.MetadataValue.int(sum(r.bytes_written for r in run.mirrored)),
            **details({"gap_versions_mirrored_first": len(run.mirrored_below)}),
        }
    return figures


def materializations(
    source: DeltaSource,
    context: dg.AssetExecutionContext,
    recorded: list[Recorded],
    run_figures: dict[str, dg.MetadataValue],
    mirror: MirrorTable | None,
    status: MirrorStatus | None,
) -> list[dg.AssetMaterialization]:
    """One materialization per version, in ascending version order (partition_events.py): each with
    its version's metadata, its snapshot's dagster/* table metadata and the mirror's lag; the newest
    also with the run's figures and the mirror's current state (what the asset's overview shows)."""
    if not recorded:
        return []
    ordered = sorted(recorded, key=lambda r: r.version)
    add_missing_partitions(
        context.instance, source.partitions_name, [partition_key(r.version) for r in ordered]
    )
    # Dagster's table metadata (dagster/row_count, dagster/column_schema, dagster/table_name) by snapshot.
    standard = (
        {}
        if mirror is None
        else {
            r.snapshot_id: iceberg_snapshot_metadata(mirror, r.snapshot_id, source.spark_table)
            for r in ordered
        }
    )
    lag = {} if status is None else lag_metadata(status)
    events = []
    for r in ordered:
        metadata = merge_metadata(r.metadata, standard.get(r.snapshot_id, {}), lag)
        if r is ordered[-1]:
            metadata = merge_metadata(
                metadata, run_figures, {} if status is None else current_state_metadata(status)
            )
        events.append(
            dg.AssetMaterialization(
                asset_key=context.asset_key,
                partition=partition_key(r.version),
                description=r.description,
                metadata=metadata,
            )
        )
    return in_version_order(events)


def recorded_before_failure(
    source: DeltaSource, context: dg.AssetExecutionContext, spark: IcebergSparkResource, run: RangeSync
) -> list[dg.AssetMaterialization]:
    """The versions committed before the run failed: they are in the table, so they are recorded.
    The table metadata and the status are informative only here, so reading them must not replace
    the run's real error with its own."""
    if not run.mirrored:
        return []
    mirror, status = None, None
    try:
        mirror, status = read_back(spark.settings.catalog, source.delta_table(), source.iceberg_table)
    except Exception as err:
        context.log.warning(f"no table metadata or lag for the versions mirrored before it: {err}")
    failed = "mirrored before the run failed"
    found = [
        Recorded(r.delta_version, r.snapshot_id, version_metadata(r, run.iceberg_table), failed)
        for r in run.mirrored
    ]
    return materializations(source, context, found, {}, mirror, status)


def _expired_description(version: int, readable: str) -> str:
    return f"Delta version {version} was mirrored; its snapshot has expired (readable: {readable})"


def _vacuumed_description(version: int, readable: str) -> str:
    return (
        f"Delta's VACUUM deleted data files the snapshot of Delta version {version} named: no reader can "
        f"read it, its snapshot is expired (readable: {readable})"
    )


def expired_observations(
    key: dg.AssetKey,
    versions: list[int],
    mirror: MirrorTable,
    status: str,
    describe: Callable[[int, str], str],
) -> list[dg.AssetObservation]:
    """One observation per version of the run whose snapshot the mirror no longer holds, not a
    materialization: expired by the cleanup job (`EXPIRED`), or by the sync after Delta's VACUUM deleted
    a data file it named (`VACUUMED`, on partitions Dagster holds; those are then retired as the cleanup
    job retires expired ones). A materialization would show the partition as healthy again in the
    Partitions view, where the cleanup took it out (maintenance.py); the record that the version was
    mirrored is its earlier materialization. The run succeeds: the version is mirrored, only no longer
    readable by time travel."""
    readable = version_ranges(readable_versions(mirror))
    return [
        dg.AssetObservation(
            asset_key=key,
            partition=partition_key(v),
            description=describe(v, readable),
            metadata={
                "status": dg.MetadataValue.text(status),
                "delta_version": dg.MetadataValue.text(str(v)),
                TIME_TRAVEL: dg.MetadataValue.text("expired"),
                READABLE_VERSIONS: dg.MetadataValue.text(readable),
            },
        )
        for v in versions
    ]


def raise_failure(source: DeltaSource, run: RangeSync) -> NoReturn:
    """How a failed run ends: versions Delta does not have (never retried); or the sync's error, as
    `_run_failure` says (the error itself when it says nothing)."""
    if run.error is None:
        raise dg.Failure(description=run.absent_text(source.delta_path), allow_retries=False)
    failure = _run_failure(run.error)
    if failure is None:
        raise run.error
    raise failure from None


def _run_failure(err: Exception) -> dg.Failure | None:
    """How a failed sync ends the run: a conflict may be retried (another run wrote the table meanwhile;
    runs of one table share the pool `source.pool`); a refusal is the same on every retry, its table,
    version, file and reason as metadata the run page shows; None: anything else, raised as it is, unless
    its message holds a secret (a catalog's URI quoted by a driver): then a Failure with it masked."""
    if isinstance(err, MirrorConflictError):
        return dg.Failure(description=masked(err.one_line()), allow_retries=True)
    if isinstance(err, MirrorInputError):
        return dg.Failure(
            description=masked(err.one_line()), metadata=refusal_metadata(err), allow_retries=False
        )
    message = f"{type(err).__name__}: {err}"
    if masked(message) != message:
        return dg.Failure(description=masked(message), allow_retries=True)
    return None


def build_iceberg_mirror_asset(
    source: DeltaSource, partitions_def: dg.DynamicPartitionsDefinition
) -> dg.AssetsDefinition:
    table = source.iceberg_table

    @dg.asset(
        key=source.mirror_asset_key,
        deps=[dg.AssetKey(source.delta_asset_key)],
        partitions_def=partitions_def,
        group_name="iceberg",
        kinds={"iceberg", "spark"},
        description=f"Iceberg table {table} (format v{source.format_version}) mirroring "
        f"{source.delta_path}: partition N is the snapshot for Delta version N.",
        metadata={
            "iceberg_table": dg.MetadataValue.text(table),
            "format_version": dg.MetadataValue.int(source.format_version),
            **TableMetadataSet(table_name=source.spark_table),
        },
        tags=source.tags,
        pool=source.pool,
        backfill_policy=dg.BackfillPolicy.single_run(),
        # The source's freshness policy (none when it has none); the lag check judges the mirror's lag.
        freshness_policy=None if source.freshness is None else source.freshness.policy(),
    )
    @evaluated
    def iceberg_mirror(context: dg.AssetExecutionContext, spark: IcebergSparkResource) -> Iterator[Event]:
        yield from mirror_run(source, context, spark)

    return iceberg_mirror
