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
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

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
from dv_assets.mirror import (
    IcebergJava,
    MirrorConflictError,
    MirrorInputError,
    MirrorStatus,
    MirrorTable,
    Snapshot,
    SyncResult,
    VersionResult,
    expired_versions,
    masked,
    mirror_status,
    read_mirror_table,
    readable_versions,
    recorded_first_readable_version,
    sync_table,
    version_ranges,
)
from resources.spark import IcebergSparkResource


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


def standard_metadata(mirror: MirrorTable, source: DeltaSource, snapshot_ids: list[int]) -> dict[int, dict]:
    """Snapshot id → Dagster's table metadata (dagster/row_count, dagster/column_schema,
    dagster/table_name) from the Iceberg metadata."""
    return {i: iceberg_snapshot_metadata(mirror, i, source.spark_table) for i in snapshot_ids}


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


def _versions_text(versions: list[int]) -> str:
    return ", ".join(str(v) for v in versions)


@dataclass(frozen=True)
class Recorded:
    """One version's materialization, before the run's figures are added."""

    version: int
    snapshot_id: int
    metadata: dict[str, Any]
    description: str | None = None


class MirrorRun:
    """One run of `iceberg/<source>`: which of its versions the mirror holds, the sync of the rest, and
    the events that record each version (in that order: `events`)."""

    def __init__(
        self, source: DeltaSource, context: dg.AssetExecutionContext, spark: IcebergSparkResource
    ) -> None:
        self.source = source
        self.table = source.iceberg_table
        self.context = context
        self.spark = spark
        self.versions = sorted(version_of(k) for k in context.partition_keys)
        self.newest = self.versions[-1]
        self.mirrored: list[VersionResult] = []  # in commit order, as sync_table reports them

    def events(self) -> Iterator[dg.AssetMaterialization | dg.AssetObservation | dg.MaterializeResult]:
        iceberg = IcebergJava(self.spark.spark_session)
        mirror = iceberg.load(self.table)
        last = None if mirror is None else mirror.last_mirrored_version
        # The mirror starts at its first readable version: the ones before are not readable in Delta.
        first_readable = None if mirror is None else recorded_first_readable_version(mirror)
        existing = self._existing(mirror)
        expired = expired_versions(mirror, self.versions)
        began = time.monotonic()
        latest = None
        vacuumed: list[int] = []
        if last is None or self.newest > last:
            try:
                synced = self._sync(iceberg)
            except Exception as err:
                yield from self._recorded_before_failure()
                failure = _run_failure(err)
                if failure is None:
                    raise
                raise failure from None
            latest = synced.latest_delta_version
            vacuumed = [] if synced.vacuum is None else synced.vacuum.expired_versions
            # Versions this run mirrored whose snapshots the VACUUM it followed expired: recorded as such.
            self.mirrored = [r for r in self.mirrored if r.delta_version not in vacuumed]
            if synced.start_note is not None:
                self.context.log.info(f"{self.table}: {synced.start_note}")
                first_readable = synced.first_readable_version
        unreadable = [v for v in self.versions if first_readable is not None and v < first_readable]
        if unreadable:
            self.context.log.info(
                f"Delta version(s) {_versions_text(unreadable)} not mirrored: {self.table} starts at Delta "
                f"version {first_readable}, the versions before it are no longer readable in Delta"
            )
        done = {r.delta_version for r in self.mirrored} | set(existing) | set(unreadable) | set(expired)
        done |= set(vacuumed)
        absent = [v for v in self.versions if v not in done]
        if absent:
            yield from self._recorded_before_failure()
            raise dg.Failure(
                description=f"Delta version(s) {_versions_text(absent)} do not exist in "
                f"{self.source.delta_path} (latest is {latest})",
                allow_retries=False,
            )
        mirror, status = self._read_back()
        existing = {v: snap for v, snap in existing.items() if v not in vacuumed}
        yield from self._expired_observations(expired, mirror)
        if vacuumed:
            yield from self._vacuumed_observations(vacuumed, mirror)
            retired = retire_expired_partitions(self.context.instance, self.source, vacuumed)
            if retired:
                self.context.log.info(
                    f"{self.table}: partitions {', '.join(retired)} retired (Delta's VACUUM deleted data "
                    "files their snapshots named; the snapshots are expired)"
                )
        yield from self._materializations(
            self._recorded(existing, mirror), self._run_figures(began), mirror, status
        )
        yield no_derived_materializations()

    def _existing(self, mirror: MirrorTable | None) -> dict[int, Snapshot]:
        """The run's versions the mirror already holds a snapshot of (logged, with the expired ones)."""
        existing: dict[int, Snapshot] = {}
        if mirror is not None:
            existing = {v: s for v in self.versions if (s := mirror.snapshot_for_version(v)) is not None}
        expired = expired_versions(mirror, self.versions)
        if expired:
            self.context.log.info(
                f"Delta version(s) {_versions_text(expired)} already mirrored; their snapshots have expired "
                "(cleanup job): nothing to commit, recorded as expired"
            )
        if existing:
            self.context.log.info(f"Delta version(s) {_versions_text(sorted(existing))} already mirrored")
        return existing

    def _sync(self, iceberg: IcebergJava) -> SyncResult:
        def on_version(result: VersionResult) -> None:
            self.mirrored.append(result)
            self.context.log.info(
                f"mirrored Delta version {result.delta_version} ({result.operation}) as snapshot "
                f"{result.snapshot_id}: {result.dvs_written} DVs, {result.bytes_written} bytes"
            )

        return sync_table(
            self.spark.spark_session,
            self.source.delta_path,
            self.table,
            format_version=self.source.format_version,
            until_version=self.newest,
            allowed_roots=self.source.allowed_roots,
            executors=self.spark.settings.executors,
            iceberg=iceberg,
            on_version=on_version,
        )

    def _read_back(self) -> tuple[MirrorTable, MirrorStatus]:
        """The table as the catalog has it after the run (pyiceberg), and where it stands against the
        Delta log."""
        mirror = read_mirror_table(self.spark.settings.catalog, self.table)
        if mirror is None:
            raise ValueError(f"{self.table} is not in the catalog {self.spark.settings.catalog.describe()}")
        return mirror, mirror_status(self.source.delta_table(), mirror, self.table)

    @property
    def _run_span(self) -> str:
        return str(self.newest) if len(self.versions) == 1 else f"{self.versions[0]}..{self.newest}"

    def _recorded(self, existing: dict[int, Snapshot], mirror: MirrorTable) -> list[Recorded]:
        """Every version the run records: those it mirrored (below its range too), those already there,
        and the mirror's current version again when the run's are all older."""
        recorded = [
            Recorded(
                r.delta_version,
                r.snapshot_id,
                version_metadata(r, self.table),
                None
                if r.delta_version in self.versions
                else f"mirrored first, in the run for Delta version(s) {self._run_span}",
            )
            for r in self.mirrored
        ] + [
            Recorded(v, snap.snapshot_id, existing_metadata(snap, self.table)) for v, snap in existing.items()
        ]
        current = mirror.mirrored_base
        if current is not None and current.delta_version is not None and current.delta_version > self.newest:
            # Older versions materialized again: the mirror's current version stays the latest.
            recorded.append(
                Recorded(
                    current.delta_version,
                    current.snapshot_id,
                    existing_metadata(current, self.table),
                    RECORDED_AGAIN,
                )
            )
        return recorded

    def _run_figures(self, began: float) -> dict[str, Any]:
        figures: dict[str, Any] = {
            "run_versions": dg.MetadataValue.text(self._run_span),
            "run_duration_seconds": dg.MetadataValue.float(round(time.monotonic() - began, 3)),
            "mirrored_versions": dg.MetadataValue.text(
                _versions_text([r.delta_version for r in self.mirrored]) or "none: all already mirrored"
            ),
        }
        if self.mirrored:
            below = [r for r in self.mirrored if r.delta_version not in self.versions]
            figures |= {
                "dvs_copied_in_run": dg.MetadataValue.int(sum(r.dvs_written for r in self.mirrored)),
                "bytes_written_in_run": dg.MetadataValue.int(sum(r.bytes_written for r in self.mirrored)),
                **details({"gap_versions_mirrored_first": len(below)}),
            }
        return figures

    def _materializations(
        self,
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
            self.context.instance, self.source.partitions_name, [partition_key(r.version) for r in ordered]
        )
        standard = (
            {} if mirror is None else standard_metadata(mirror, self.source, [r.snapshot_id for r in ordered])
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
                    asset_key=self.context.asset_key,
                    partition=partition_key(r.version),
                    description=r.description,
                    metadata=metadata,
                )
            )
        return in_version_order(events)

    def _recorded_before_failure(self) -> list[dg.AssetMaterialization]:
        """The versions committed before the run failed: they are in the table, so they are recorded.
        The table metadata and the status are informative only here, so reading them must not replace
        the run's real error with its own."""
        if not self.mirrored:
            return []
        mirror, status = None, None
        try:
            mirror, status = self._read_back()
        except Exception as err:
            self.context.log.warning(f"no table metadata or lag for the versions mirrored before it: {err}")
        recorded = [
            Recorded(
                r.delta_version,
                r.snapshot_id,
                version_metadata(r, self.table),
                "mirrored before the run failed",
            )
            for r in self.mirrored
        ]
        return self._materializations(recorded, {}, mirror, status)

    def _expired_observations(self, expired: list[int], mirror: MirrorTable) -> list[dg.AssetObservation]:
        """The run's versions the mirror holds no snapshot of any more (expired by the cleanup job): an
        observation of each partition, not a materialization. A materialization would show the partition
        as healthy again in the Partitions view, where the cleanup job took it out (maintenance.py); the
        record that the version was mirrored is its earlier materialization and the cleanup's observation.
        The run succeeds: the version is mirrored, only no longer readable by time travel."""
        readable = version_ranges(readable_versions(mirror))
        return [
            dg.AssetObservation(
                asset_key=self.context.asset_key,
                partition=partition_key(v),
                description=f"Delta version {v} was mirrored; its snapshot has expired "
                f"(readable: {readable})",
                metadata={
                    "status": dg.MetadataValue.text(EXPIRED),
                    "delta_version": dg.MetadataValue.text(str(v)),
                    TIME_TRAVEL: dg.MetadataValue.text("expired"),
                    READABLE_VERSIONS: dg.MetadataValue.text(readable),
                },
            )
            for v in expired
        ]

    def _vacuumed_observations(self, versions: list[int], mirror: MirrorTable) -> list[dg.AssetObservation]:
        """One observation per version whose snapshot the sync expired after Delta's VACUUM deleted a data
        file it named (`dv_assets.mirror.vacuum`), on its partition when Dagster holds it (materialized
        or in this run); the partitions are then retired as the cleanup job retires expired ones."""
        readable = version_ranges(readable_versions(mirror))
        held = self.context.instance.get_materialized_partitions(self.context.asset_key)
        return [
            dg.AssetObservation(
                asset_key=self.context.asset_key,
                partition=partition_key(v),
                description=f"Delta's VACUUM deleted data files the snapshot of Delta version {v} named: "
                f"no reader can read it, its snapshot is expired (readable: {readable})",
                metadata={
                    "status": dg.MetadataValue.text(VACUUMED),
                    "delta_version": dg.MetadataValue.text(str(v)),
                    TIME_TRAVEL: dg.MetadataValue.text("expired"),
                    READABLE_VERSIONS: dg.MetadataValue.text(readable),
                },
            )
            for v in versions
            if partition_key(v) in held or v in self.versions
        ]


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
    )
    @evaluated
    def iceberg_mirror(
        context: dg.AssetExecutionContext, spark: IcebergSparkResource
    ) -> Iterator[dg.AssetMaterialization | dg.AssetObservation | dg.MaterializeResult]:
        yield from MirrorRun(source, context, spark).events()

    return iceberg_mirror
