"""`iceberg/<source>`: partition N is Delta version N mirrored as one Iceberg snapshot.

Materializing N mirrors in order through `sync_table(..., until_version=N)`: versions not yet mirrored
below N are mirrored first, each as its own snapshot (and recorded as a materialization of its own
partition); when N is already mirrored, the existing snapshot is reported and nothing is committed.
A mirror never goes out of order: a version below the last mirrored one whose snapshot has expired
cannot be mirrored again and fails with that reason.
"""

import time
from collections.abc import Iterator

import dagster as dg

from dv_assets.defs.delta.assets import partition_key, version_of
from dv_assets.defs.sources import DeltaSource
from dv_assets.mirror.errors import MirrorConflictError
from dv_assets.mirror.iceberg.java import IcebergJava, Snapshot
from dv_assets.mirror.sync import VersionResult, sync_table
from resources.spark import IcebergSparkResource


def _files_md(paths: list[str]) -> str:
    if not paths:
        return "_no delete files written_"
    return "\n".join(f"- `{p}`" for p in paths)


def version_metadata(result: VersionResult, table: str) -> dict[str, dg.MetadataValue]:
    puffins = [p for p in result.delete_files if p.endswith(".puffin")]
    parquets = [p for p in result.delete_files if p.endswith(".parquet")]
    return {
        "status": dg.MetadataValue.text("mirrored"),
        "iceberg_table": dg.MetadataValue.text(table),
        "delta_version": dg.MetadataValue.int(result.delta_version),
        "snapshot_id": dg.MetadataValue.int(result.snapshot_id),
        "operation": dg.MetadataValue.text(result.operation or "UNKNOWN"),
        "data_files_added": dg.MetadataValue.int(result.data_files_added),
        "data_files_removed": dg.MetadataValue.int(result.data_files_removed),
        "dvs_copied": dg.MetadataValue.int(result.dvs_written),
        "deletes_replaced": dg.MetadataValue.int(result.deletes_replaced),
        "bytes_written": dg.MetadataValue.int(result.bytes_written),
        "dvs_converted_on": dg.MetadataValue.text(result.dvs_converted_on),
        "puffin_files": dg.MetadataValue.int(len(puffins)),
        "parquet_delete_files": dg.MetadataValue.int(len(parquets)),
        "delete_files": dg.MetadataValue.md(_files_md(result.delete_files)),
        "duration_seconds": dg.MetadataValue.float(result.seconds),
    }


def existing_metadata(snapshot: Snapshot, table: str) -> dict[str, dg.MetadataValue]:
    summary = snapshot.summary
    return {
        "status": dg.MetadataValue.text("already mirrored: nothing committed"),
        "iceberg_table": dg.MetadataValue.text(table),
        "delta_version": dg.MetadataValue.int(snapshot.delta_version or 0),
        "snapshot_id": dg.MetadataValue.int(snapshot.snapshot_id),
        "operation": dg.MetadataValue.text(summary.get("dvmirror.delta-operation", "")),
        "dvs_copied": dg.MetadataValue.int(
            int(summary.get("added-dvs", summary.get("added-delete-files", 0)))
        ),
        "bytes_written": dg.MetadataValue.int(0),
        "total_records": dg.MetadataValue.int(int(summary.get("total-records", 0))),
        "total_delete_files": dg.MetadataValue.int(int(summary.get("total-delete-files", 0))),
    }


def build_iceberg_mirror_asset(
    source: DeltaSource, partitions_def: dg.DynamicPartitionsDefinition
) -> dg.AssetsDefinition:
    @dg.asset(
        key=source.mirror_asset_key,
        deps=[dg.AssetKey(source.delta_asset_key)],
        partitions_def=partitions_def,
        group_name="iceberg",
        kinds={"iceberg", "spark"},
        description=f"Iceberg table {source.iceberg_table} (format v{source.format_version}) mirroring "
        f"{source.delta_path}: partition N is the snapshot for Delta version N.",
        metadata={
            "iceberg_table": dg.MetadataValue.text(source.iceberg_table),
            "format_version": dg.MetadataValue.int(source.format_version),
        },
        tags=source.tags,
        pool=source.pool,
    )
    def iceberg_mirror(
        context: dg.AssetExecutionContext, spark: IcebergSparkResource
    ) -> Iterator[dg.AssetMaterialization | dg.MaterializeResult]:
        version = version_of(context.partition_key)
        session = spark.spark_session
        table = source.iceberg_table
        iceberg = IcebergJava(session)
        mirror = iceberg.load(table)
        existing = None if mirror is None else mirror.snapshot_for_version(version)
        if existing is not None:
            context.log.info(f"Delta version {version} is already snapshot {existing.snapshot_id}")
            yield dg.MaterializeResult(metadata=existing_metadata(existing, table))
            return
        last = None if mirror is None else mirror.last_mirrored_version
        if last is not None and last >= version:
            raise dg.Failure(
                description=f"{table} is at Delta version {last}; version {version} was mirrored but its "
                "snapshot is no longer retained (expired by the cleanup job). Mirrors never go back.",
                allow_retries=False,
            )
        began = time.monotonic()
        try:
            result = sync_table(
                session,
                source.delta_path,
                table,
                format_version=source.format_version,
                until_version=version,
                allowed_roots=source.allowed_roots,
                executor_threshold=spark.settings.executor_threshold,
                iceberg=iceberg,
                on_version=lambda r: context.log.info(
                    f"mirrored Delta version {r.delta_version} ({r.operation}) as snapshot {r.snapshot_id}: "
                    f"{r.dvs_written} DVs, {r.bytes_written} bytes"
                ),
            )
        except MirrorConflictError as err:
            # Another run wrote the table meanwhile (runs of one table share the pool `source.pool`).
            raise dg.Failure(description=err.one_line(), allow_retries=True) from None
        by_version = {r.delta_version: r for r in result.versions}
        if version not in by_version:
            raise dg.Failure(
                description=f"Delta version {version} does not exist in {source.delta_path} "
                f"(latest is {result.latest_delta_version})",
                allow_retries=False,
            )
        gap = [v for v in result.mirrored_versions if v != version]
        if gap:
            # The versions below N are partitions too; record each as materialized by this run.
            name = partitions_def.name
            assert name is not None
            known = set(context.instance.get_dynamic_partitions(name))
            missing = [partition_key(v) for v in gap if partition_key(v) not in known]
            if missing:
                context.instance.add_dynamic_partitions(name, missing)
            for v in gap:
                yield dg.AssetMaterialization(
                    asset_key=context.asset_key,
                    partition=partition_key(v),
                    description=f"mirrored as part of the run for Delta version {version}",
                    metadata=version_metadata(by_version[v], table),
                )
        metadata = version_metadata(by_version[version], table)
        metadata["mirrored_versions"] = dg.MetadataValue.text(
            ", ".join(str(v) for v in result.mirrored_versions)
        )
        metadata["gap_versions_mirrored_first"] = dg.MetadataValue.int(len(gap))
        metadata["run_duration_seconds"] = dg.MetadataValue.float(round(time.monotonic() - began, 3))
        metadata["dvs_copied_in_run"] = dg.MetadataValue.int(sum(r.dvs_written for r in result.versions))
        metadata["bytes_written_in_run"] = dg.MetadataValue.int(sum(r.bytes_written for r in result.versions))
        yield dg.MaterializeResult(metadata=metadata)

    return iceberg_mirror
