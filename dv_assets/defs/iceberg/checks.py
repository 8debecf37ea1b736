"""Blocking, partitioned asset checks on `iceberg/<source>`: the snapshot for Delta version N is exact.

Partitioned asset checks are a preview feature in Dagster 1.13 (a preview warning is logged). Each
check evaluates every Delta version its run covers: the run's partitions (one, or the range of the
sensor's backlog) plus any partition of `iceberg/<source>` the run materialized below them (versions the
mirror asset mirrored first). It records one `AssetCheckEvaluation` per version, on that version's
partition: an `AssetCheckResult` cannot name a partition (Dagster stamps it with the run's single
partition key, and with none in a range run), while evaluations carry their own. A failing evaluation
on any version fails the check step, since the checks are blocking, and so the run.

* `row_count_matches`: Delta's live rows at N from the log (Σ numRecords - Σ DV cardinality) and from
  a real Delta read (Spark, `versionAsOf` N) both equal the rows Iceberg Java reads from the snapshot
  (Spark, `versionAsOf` snapshot id).
* `one_dv_per_data_file`: in the snapshot every data file has at most one delete file (DV), every
  delete file references a live data file of the snapshot, every Delta DV has its Iceberg counterpart,
  and each one's cardinality equals the Delta DV's (read from Iceberg's `data_files` /
  `delete_files` metadata tables at the snapshot).
"""

from collections import Counter
from collections.abc import Callable, Iterator

import dagster as dg
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,  # links an evaluation to its materialization; not dg.*
)
from pyspark.sql import SparkSession

from dv_assets.defs.delta.assets import partition_key, version_of
from dv_assets.defs.sources import DeltaSource
from dv_assets.mirror.delta.facts import dv_cardinalities, live_rows
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.iceberg.java import IcebergJava, MirrorTable, Snapshot
from resources.spark import IcebergSparkResource

MAX_LISTED = 10


def _no_snapshot(source: DeltaSource, version: int) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=False,
        description=f"{source.iceberg_table} has no snapshot for Delta version {version}",
        metadata={"delta_version": dg.MetadataValue.int(version)},
    )


def _snapshot(
    spark: SparkSession, source: DeltaSource, version: int, mirror: MirrorTable | None
) -> Snapshot | None:
    """The snapshot for `version`, from `mirror` (the table loaded once for a run's many versions; each
    load reads every snapshot through the JVM) or from a fresh load."""
    if mirror is None:
        mirror = IcebergJava(spark).load(source.iceberg_table)
    return None if mirror is None else mirror.snapshot_for_version(version)


def row_count_result(
    spark: SparkSession, source: DeltaSource, version: int, mirror: MirrorTable | None = None
) -> dg.AssetCheckResult:
    snapshot = _snapshot(spark, source, version, mirror)
    if snapshot is None:
        return _no_snapshot(source, version)
    from_log = live_rows(DeltaTable(source.delta_path).state(version, with_stats=False))
    from_delta_read = (
        spark.read.format("delta").option("versionAsOf", version).load(source.delta_path).count()
    )
    from_iceberg = spark.read.option("versionAsOf", snapshot.snapshot_id).table(source.spark_table).count()
    passed = from_log == from_delta_read == from_iceberg
    return dg.AssetCheckResult(
        passed=passed,
        description=None
        if passed
        else f"Delta v{version}: {from_log} rows (log), {from_delta_read} (Delta read); Iceberg snapshot "
        f"{snapshot.snapshot_id}: {from_iceberg}",
        metadata={
            "delta_version": dg.MetadataValue.int(version),
            "snapshot_id": dg.MetadataValue.int(snapshot.snapshot_id),
            "delta_rows_from_log": dg.MetadataValue.int(from_log),
            "delta_rows_read": dg.MetadataValue.int(from_delta_read),
            "iceberg_rows_read": dg.MetadataValue.int(from_iceberg),
        },
    )


def dv_problems(
    spark: SparkSession, source: DeltaSource, version: int, snapshot_id: int
) -> tuple[dict[str, list[str]], int, int, int]:
    """Everything wrong with the snapshot's delete files, by kind (empty lists: all good), and the
    numbers of Iceberg delete files, Delta DVs and Iceberg data files."""
    table = source.spark_table
    data_files = {
        row.file_path
        for row in spark.sql(
            f"SELECT file_path FROM {table}.data_files VERSION AS OF {snapshot_id}"
        ).collect()
    }
    deletes = spark.sql(
        f"SELECT file_path, referenced_data_file, record_count "
        f"FROM {table}.delete_files VERSION AS OF {snapshot_id}"
    ).collect()
    delta_dvs = dv_cardinalities(DeltaTable(source.delta_path).state(version, with_stats=False))
    per_file = Counter(row.referenced_data_file for row in deletes)
    iceberg_cardinality: dict[str, int] = {}
    for row in deletes:
        if row.referenced_data_file is not None:
            iceberg_cardinality[row.referenced_data_file] = (
                iceberg_cardinality.get(row.referenced_data_file, 0) + row.record_count
            )
    return (
        {
            "data files with more than one DV": sorted(
                f"{f} ({n})" for f, n in per_file.items() if f is not None and n > 1
            ),
            "delete files without a referenced data file": sorted(
                row.file_path for row in deletes if row.referenced_data_file is None
            ),
            "DVs of data files not live in the snapshot": sorted(
                f for f in per_file if f is not None and f not in data_files
            ),
            "Delta DVs missing in Iceberg": sorted(f for f in delta_dvs if f not in iceberg_cardinality),
            "Iceberg DVs Delta does not have": sorted(f for f in iceberg_cardinality if f not in delta_dvs),
            "cardinality differs from Delta's": sorted(
                f"{f}: Iceberg {n}, Delta {delta_dvs[f]}"
                for f, n in iceberg_cardinality.items()
                if f in delta_dvs and delta_dvs[f] != n
            ),
        },
        len(deletes),
        len(delta_dvs),
        len(data_files),
    )


def one_dv_result(
    spark: SparkSession, source: DeltaSource, version: int, mirror: MirrorTable | None = None
) -> dg.AssetCheckResult:
    snapshot = _snapshot(spark, source, version, mirror)
    if snapshot is None:
        return _no_snapshot(source, version)
    problems, n_deletes, n_delta_dvs, n_data_files = dv_problems(spark, source, version, snapshot.snapshot_id)
    found = {kind: items for kind, items in problems.items() if items}
    lines = [
        f"- **{kind}** ({len(items)}): " + ", ".join(f"`{i}`" for i in items[:MAX_LISTED])
        for kind, items in found.items()
    ]
    return dg.AssetCheckResult(
        passed=not found,
        description=None if not found else "; ".join(f"{k}: {len(v)}" for k, v in found.items()),
        metadata={
            "delta_version": dg.MetadataValue.int(version),
            "snapshot_id": dg.MetadataValue.int(snapshot.snapshot_id),
            "iceberg_delete_files": dg.MetadataValue.int(n_deletes),
            "delta_dvs": dg.MetadataValue.int(n_delta_dvs),
            "iceberg_data_files": dg.MetadataValue.int(n_data_files),
            "problems": dg.MetadataValue.md("\n".join(lines) if lines else "none"),
        },
    )


CheckFunction = Callable[[SparkSession, DeltaSource, int, MirrorTable | None], dg.AssetCheckResult]


def versions_to_check(context: dg.AssetCheckExecutionContext, asset_key: dg.AssetKey) -> list[int]:
    """The run's partitions, and every partition of the asset the run materialized (the versions below
    the run's range that the mirror asset mirrored first), as Delta versions in ascending order."""
    materialized = context.instance.get_asset_partitions_for_run(
        context.run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
    ).get(asset_key, set())
    keys = {*context.partition_keys, *(k for k in materialized if k is not None)}
    return sorted(version_of(k) for k in keys)


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


def evaluate_versions(
    context: dg.AssetCheckExecutionContext, spark: SparkSession, source: DeltaSource, check: CheckFunction
) -> Iterator[dg.AssetCheckEvaluation | dg.Output]:
    """`check` on every version the run covers, one evaluation per version's partition."""
    (spec,) = context.check_specs
    mirror = IcebergJava(spark).load(source.iceberg_table)  # once: the asset step has finished writing
    for version in versions_to_check(context, spec.asset_key):
        key = partition_key(version)
        result = check(spark, source, version, mirror)
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
    # logs that the output is missing and emits it implicitly.
    yield dg.Output(None, output_name=context.op_def.output_defs[0].name)


def build_checks(
    source: DeltaSource, partitions_def: dg.DynamicPartitionsDefinition
) -> list[dg.AssetChecksDefinition]:
    asset = dg.AssetKey(source.mirror_asset_key)

    @dg.asset_check(
        asset=asset,
        name="row_count_matches",
        blocking=True,
        partitions_def=partitions_def,
        pool=source.pool,
        description="Delta's live rows at version N (log and Delta read) equal the Iceberg snapshot's rows.",
    )
    def row_count_matches(
        context: dg.AssetCheckExecutionContext, spark: IcebergSparkResource
    ) -> Iterator[dg.AssetCheckEvaluation | dg.Output]:
        yield from evaluate_versions(context, spark.spark_session, source, row_count_result)

    @dg.asset_check(
        asset=asset,
        name="one_dv_per_data_file",
        blocking=True,
        partitions_def=partitions_def,
        pool=source.pool,
        description="At most one DV per data file, each on a live data file, cardinalities equal Delta's.",
    )
    def one_dv_per_data_file(
        context: dg.AssetCheckExecutionContext, spark: IcebergSparkResource
    ) -> Iterator[dg.AssetCheckEvaluation | dg.Output]:
        yield from evaluate_versions(context, spark.spark_session, source, one_dv_result)

    return [row_count_matches, one_dv_per_data_file]
