"""Partitioned asset checks on `iceberg/<source>`: the snapshot for Delta version N is exact.

The three checks of a table are one op (`@multi_asset_check`, subsettable: `mirror_<name>` leaves the
full scan out, a checks run may ask for one check alone), in the table's pool: one op to build and
resolve per table instead of three, the same checks, names and descriptions in the UI. It evaluates the
selected checks in turn, reading the table once per kind of reader (pyiceberg for the metadata check,
Iceberg Java for the two that read with Spark, which starts only when one of those is selected).

Partitioned asset checks are a preview feature in Dagster 1.13 (a preview warning is logged). A check
records one `AssetCheckEvaluation` per version it evaluates, on that version's partition and linked to
that partition's latest materialization: an `AssetCheckResult` cannot name a partition (Dagster stamps
it with the run's single partition key, and with none in a range run), while evaluations carry their
own. A failing evaluation of a blocking check on any version fails the check step, and so the run (the
versions after it are not mirrored by a later run until it is fixed or the check passes).

Which versions each check evaluates (`versions_to_check`, `versions_to_scan`): every partition of the
run, without exception. Dagster 1.13 records a check planned in a run as PLANNED for every partition of
the run's range (`ASSET_CHECK_EVALUATION_PLANNED` with the run's partition subset) and shows a PLANNED
execution of a finished, successful run as SKIPPED, which then is the partition's latest result beside
the "Passed" of the others. So a check is evaluated on each partition it is planned for, and on no
fewer:

* the blocking checks: every version the run covers, i.e. the run's partitions plus any partition of
  `iceberg/<source>` the run materialized (versions the mirror asset mirrored first below the range, or
  its current version recorded again; those have no planned execution, they add a record);
* the full scan: the run's partitions. It is not part of `mirror_<name>` (jobs.py): the version sensor
  requests it for the mirror's newest version in a run of its own (`checks_<name>`, that check alone),
  so a backlog of 1,000 versions costs one scan and records nothing for the other 999; a checks run
  (`checks_<name>`, `dv_assets.ci_checks`) or a materialization launched with the checks scans every
  version it is asked for.
* a version of the run whose snapshot has expired (already mirrored, cleanup job): nothing is left to
  evaluate, so each check records the partition's last evaluation again, unchanged but for a note
  (`last_evaluation_again`), and records nothing when there is none.

What each check compares is the engine's (`dv_assets.mirror.exactness_checks`, shared with `dvmirror
verify`): it returns a `CheckOutcome`, which this module only turns into an evaluation whose metadata
renders in the UI (counts as integers, the DV check's problems as a list).

* `metadata_row_count_matches` (blocking, metadata only: no Spark, no data read, milliseconds a
  version): Delta's live rows from its log equal the snapshot summary's; refuses (fails) when the log or
  the summary cannot tell.
* `row_count_matches` (NOT blocking: it scans every row of both tables through Spark): a failure is
  recorded (red in the UI, and `dv_assets.ci_checks` exits non-zero) without stopping the mirror.
* `one_dv_per_data_file` (blocking): at most one DV per data file, each on a live data file, the same DVs
  and cardinalities as Delta's (the snapshot's content files read from its manifests with pyiceberg, or
  through Spark when pyiceberg cannot read the catalog, as `dvmirror verify` reads them; in the table's
  pool).
"""

import functools
from collections.abc import Callable, Iterator

import dagster as dg
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,  # links an evaluation to its materialization; not dg.*
)
from dagster._core.event_api import PartitionKeyFilter  # the check-storage query's filter; not dg.*
from dagster._core.storage.asset_check_execution_record import (
    AssetCheckExecutionRecordStatus,  # an execution's stored status; not dg.*
)
from pyspark.sql import SparkSession

from dv_assets.defs.delta.assets import partition_key, version_of
from dv_assets.defs.signatures import evaluated
from dv_assets.defs.sources import DeltaSource
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.dv_findings import snapshot_files_with_spark
from dv_assets.mirror.exactness_checks import (
    CHECK_NAMES,
    METADATA_ROW_COUNT,
    ONE_DV,
    ROW_COUNT_SCAN,
    CheckOutcome,
    check_metadata_row_count,
    check_one_dv_per_data_file,
    check_row_count_scan,
)
from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.iceberg.mirror_table import MirrorTable, Snapshot, SnapshotFiles
from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table, read_snapshot_files
from dv_assets.mirror.settings import CatalogConfig
from dv_assets.mirror.status import expired_versions
from resources.spark import IcebergSparkResource

# The check names are the engine's; dv_assets.ci_checks and the benchmarks import them from here.
__all__ = ["CHECK_NAMES", "METADATA_ROW_COUNT", "ONE_DV", "ROW_COUNT_SCAN", "build_checks"]

MAX_LISTED = 10  # items shown per kind of DV problem


def check_result(outcome: CheckOutcome) -> dg.AssetCheckResult:
    """The engine's outcome as Dagster's result: its summary as the description, what it compared as
    metadata (counts as integers; the DV problems as a list of kinds, each with its first items)."""
    metadata: dict[str, dg.MetadataValue] = {}
    for key, value in outcome.details.items():
        if isinstance(value, int):
            metadata[key] = dg.MetadataValue.int(value)
        else:
            lines = [
                f"- **{kind}** ({len(items)}): " + ", ".join(f"`{i}`" for i in items[:MAX_LISTED])
                for kind, items in value.items()
            ]
            metadata[key] = dg.MetadataValue.md("\n".join(lines) if lines else "none")
    return dg.AssetCheckResult(passed=outcome.passed, description=outcome.summary, metadata=metadata)


SparkCheck = Callable[
    [SparkSession, CatalogConfig, DeltaSource, int, MirrorTable | None], dg.AssetCheckResult
]


def _on_the_snapshot(
    check: Callable[[SparkSession, CatalogConfig, DeltaSource, int, Snapshot | None], CheckOutcome],
) -> SparkCheck:
    """`check` on the snapshot for the version (None: the table has none), from `mirror` (the table
    loaded once for a run's many versions; each load reads every snapshot through the JVM) or from a
    fresh load."""

    @functools.wraps(check)
    def on_version(
        spark: SparkSession,
        catalog: CatalogConfig,
        source: DeltaSource,
        version: int,
        mirror: MirrorTable | None = None,
    ) -> dg.AssetCheckResult:
        if mirror is None:
            mirror = IcebergJava(spark).load(source.iceberg_table)
        snapshot = None if mirror is None else mirror.snapshot_for_version(version)
        return check_result(check(spark, catalog, source, version, snapshot))

    return on_version


def metadata_row_count_result(
    delta: DeltaTable, source: DeltaSource, version: int, mirror: MirrorTable | None
) -> dg.AssetCheckResult:
    """Delta's rows from its log vs. Iceberg's from the snapshot summary; both metadata, no data read."""
    snapshot = None if mirror is None else mirror.snapshot_for_version(version)
    return check_result(check_metadata_row_count(delta, version, source.iceberg_table, snapshot))


@_on_the_snapshot
def row_count_result(
    spark: SparkSession, catalog: CatalogConfig, source: DeltaSource, version: int, snapshot: Snapshot | None
) -> CheckOutcome:
    return check_row_count_scan(
        spark, source.delta_table(), source.delta_path, version, source.iceberg_table, snapshot
    )


@_on_the_snapshot
def one_dv_result(
    spark: SparkSession, catalog: CatalogConfig, source: DeltaSource, version: int, snapshot: Snapshot | None
) -> CheckOutcome:
    return check_one_dv_per_data_file(
        source.delta_table(),
        version,
        source.iceberg_table,
        snapshot,
        snapshot_files_reader(spark, catalog, source),
    )


def snapshot_files_reader(
    spark: SparkSession, catalog: CatalogConfig, source: DeltaSource
) -> Callable[[int], SnapshotFiles]:
    """A snapshot's live content files, as `dvmirror verify` reads them: from its manifests with pyiceberg
    when pyiceberg reads the catalog, else Spark's `files` metadata table (the same rows). Spark's is a
    Spark job, the whole check's cost on a small table (8-9 s of a 40 s run at a load of 8)."""
    if catalog.pyiceberg_reads():
        return lambda snapshot_id: read_snapshot_files(catalog, source.iceberg_table, snapshot_id)
    return lambda snapshot_id: snapshot_files_with_spark(spark, source.iceberg_table, snapshot_id)


def _materialized_in_run(context: dg.AssetCheckExecutionContext, asset_key: dg.AssetKey) -> set[str]:
    materialized = context.instance.get_asset_partitions_for_run(
        context.run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
    ).get(asset_key, set())
    return {k for k in materialized if k is not None}


def versions_to_check(context: dg.AssetCheckExecutionContext, asset_key: dg.AssetKey) -> list[int]:
    """The run's partitions, and every partition of the asset the run materialized (the versions below
    the run's range that the mirror asset mirrored first), as Delta versions in ascending order."""
    keys = {*context.partition_keys, *_materialized_in_run(context, asset_key)}
    return sorted(version_of(k) for k in keys)


def versions_to_scan(context: dg.AssetCheckExecutionContext, asset_key: dg.AssetKey) -> list[int]:
    """The full scan's versions: every partition of the run (each has a planned execution)."""
    return sorted(version_of(k) for k in context.partition_keys)


def last_evaluation_again(
    instance: dg.DagsterInstance, check_key: dg.AssetCheckKey, key: str, note: str
) -> dg.AssetCheckEvaluation | None:
    """The partition's last completed evaluation of the check, recorded again with `note` before its
    description (None: it has none). For a version that can no longer be evaluated (its snapshot has
    expired): its last result stays its latest, instead of the run's planned execution turning SKIPPED."""
    records = instance.event_log_storage.get_asset_check_execution_history(
        check_key,
        limit=1,
        status={AssetCheckExecutionRecordStatus.SUCCEEDED, AssetCheckExecutionRecordStatus.FAILED},
        partition_filter=PartitionKeyFilter(key=key),
    )
    last = records[0].evaluation if records else None
    if last is None:
        return None
    record = records[0]
    return dg.AssetCheckEvaluation(
        asset_key=last.asset_key,
        check_name=last.check_name,
        passed=last.passed,
        metadata=last.metadata,
        target_materialization_data=last.target_materialization_data,
        severity=last.severity,
        description=f"{note} Last evaluation (run {record.run_id[:8]}): {last.description or ''}",
        blocking=last.blocking,
        partition=key,
    )


def _checked_materialization(
    instance: dg.DagsterInstance, asset_key: dg.AssetKey, key: str
) -> AssetCheckEvaluationTargetMaterializationData | None:
    """The partition's latest materialization, which the evaluation is about (as Dagster links a check
    result of a single-partition run)."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset_key, asset_partitions=[key]), limit=1
    ).records
    if not records:
        return None
    record = records[0]
    return AssetCheckEvaluationTargetMaterializationData(
        storage_id=record.storage_id, run_id=record.run_id, timestamp=record.timestamp
    )


VersionsOf = Callable[[dg.AssetCheckExecutionContext, dg.AssetKey], list[int]]


def evaluate_versions(
    context: dg.AssetCheckExecutionContext,
    spec: dg.AssetCheckSpec,
    check: Callable[[int], dg.AssetCheckResult],
    mirror: MirrorTable | None,
    versions_of: VersionsOf = versions_to_check,
) -> Iterator[dg.AssetCheckEvaluation | dg.Output]:
    """`check` on each of the run's versions `versions_of` chooses, one evaluation per version's
    partition; a version whose snapshot has expired keeps its last evaluation (`last_evaluation_again`)."""
    versions = versions_of(context, spec.asset_key)
    expired = set(expired_versions(mirror, versions))
    for version in versions:
        key = partition_key(version)
        if version in expired:
            again = last_evaluation_again(
                context.instance,
                spec.key,
                key,
                f"Delta version {version} was mirrored and its snapshot has since expired (cleanup job): "
                "nothing left to evaluate.",
            )
            if again is not None:
                yield again
            continue
        result = check(version)
        yield dg.AssetCheckEvaluation(
            asset_key=spec.asset_key,
            check_name=spec.name,
            passed=result.passed,
            metadata=result.metadata,
            target_materialization_data=_checked_materialization(context.instance, spec.asset_key, key),
            severity=result.severity,
            description=result.description,
            blocking=spec.blocking,
            partition=key,
        )
    # The check's own (Nothing) output, which an AssetCheckResult would have emitted; without it Dagster
    # logs that the output is missing.
    yield dg.Output(None, output_name=spec.get_python_identifier())


def check_specs(
    source: DeltaSource, partitions_def: dg.DynamicPartitionsDefinition
) -> list[dg.AssetCheckSpec]:
    """The table's three checks, partitioned by Delta version."""
    asset = dg.AssetKey(source.mirror_asset_key)
    described = {
        METADATA_ROW_COUNT: (
            True,
            "Delta's live rows at version N from its log (Σ numRecords - Σ DV cardinality) equal the Iceberg "
            "snapshot summary's total-records - total-position-deletes. Metadata only (no Spark); refuses "
            "when a Delta file has no numRecords statistic.",
        ),
        ROW_COUNT_SCAN: (
            False,
            "Full scan (not blocking): Delta's live rows at version N (log and Delta read) equal the rows "
            "Iceberg reads from the snapshot. The version sensor requests it for the mirror's newest version "
            "in a run of its own; the checks job scans every version it is asked for.",
        ),
        ONE_DV: (
            True,
            "At most one DV per data file, each on a live data file, cardinalities equal Delta's.",
        ),
    }
    return [
        dg.AssetCheckSpec(
            name, asset=asset, blocking=blocking, description=text, partitions_def=partitions_def
        )
        for name, (blocking, text) in described.items()
    ]


def evaluate_checks(
    context: dg.AssetCheckExecutionContext, source: DeltaSource, spark: IcebergSparkResource
) -> Iterator[dg.AssetCheckEvaluation | dg.Output]:
    """The selected checks in turn: the metadata check on the table read with pyiceberg (no Spark), the
    Spark ones on the table loaded once through Iceberg Java (the asset step has finished)."""
    selected = {key.name: key for key in context.selected_asset_check_keys}
    specs = {spec.name: spec for spec in context.check_specs if spec.name in selected}
    catalog = spark.settings.catalog
    if METADATA_ROW_COUNT in specs:
        mirror = read_mirror_table(catalog, source.iceberg_table)
        delta = source.delta_table()
        yield from evaluate_versions(
            context,
            specs[METADATA_ROW_COUNT],
            lambda version: metadata_row_count_result(delta, source, version, mirror),
            mirror,
        )
    with_spark = [
        (ONE_DV, one_dv_result, versions_to_check),
        (ROW_COUNT_SCAN, row_count_result, versions_to_scan),
    ]
    if not any(name in specs for name, _, _ in with_spark):
        return
    session = spark.spark_session
    loaded = IcebergJava(session).load(source.iceberg_table)
    for name, check, versions_of in with_spark:
        if name in specs:
            on_version = functools.partial(check, session, catalog, source, mirror=loaded)
            yield from evaluate_versions(context, specs[name], on_version, loaded, versions_of)


def build_checks(
    source: DeltaSource, partitions_def: dg.DynamicPartitionsDefinition
) -> list[dg.AssetChecksDefinition]:
    @dg.multi_asset_check(
        name=f"{source.name}_version_checks",
        specs=check_specs(source, partitions_def),
        can_subset=True,
        pool=source.pool,  # the Spark checks wait for the mirror's writes
        description=f"The asset checks of {source.iceberg_table} on each Delta version's snapshot.",
    )
    @evaluated
    def version_checks(
        context: dg.AssetCheckExecutionContext, spark: IcebergSparkResource
    ) -> Iterator[dg.AssetCheckEvaluation | dg.Output]:
        yield from evaluate_checks(context, source, spark)

    return [version_checks]
