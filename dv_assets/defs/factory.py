"""The code location's factory: for each configured Delta source its partitions, assets, checks and jobs;
and the whole `dg.Definitions` for a list of sources and a catalog."""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,  # what dg.define_asset_job returns; not exported as dg.*
)

from dv_assets.defs.delta.assets import build_delta_versions_asset
from dv_assets.defs.iceberg.assets import build_iceberg_mirror_asset
from dv_assets.defs.iceberg.checks import build_checks
from dv_assets.defs.jobs import build_checks_job, build_mirror_job
from dv_assets.defs.maintenance import build_cleanup_job
from dv_assets.defs.sensors import build_compacted_deletes_sensor, build_delta_version_sensor
from dv_assets.defs.sources import DeltaSource
from dv_assets.mirror.settings import CatalogConfig
from resources.spark import IcebergSparkResource


@dataclass(frozen=True)
class SourceDefinitions:
    source: DeltaSource
    partitions_def: dg.DynamicPartitionsDefinition
    delta_versions: dg.AssetsDefinition
    iceberg_mirror: dg.AssetsDefinition
    checks: list[dg.AssetChecksDefinition]
    mirror_job: UnresolvedAssetJobDefinition
    checks_job: UnresolvedAssetJobDefinition

    @property
    def assets(self) -> list[dg.AssetsDefinition]:
        return [self.delta_versions, self.iceberg_mirror]


def build_source(source: DeltaSource) -> SourceDefinitions:
    partitions_def = dg.DynamicPartitionsDefinition(name=source.partitions_name)
    return SourceDefinitions(
        source=source,
        partitions_def=partitions_def,
        delta_versions=build_delta_versions_asset(source, partitions_def),
        iceberg_mirror=build_iceberg_mirror_asset(source, partitions_def),
        checks=build_checks(source, partitions_def),
        mirror_job=build_mirror_job(source, partitions_def),
        checks_job=build_checks_job(source, partitions_def),
    )


def build_definitions(sources: list[DeltaSource], catalog: CatalogConfig) -> dg.Definitions:
    built = [build_source(s) for s in sources]
    cleanup_job = build_cleanup_job(sources)
    mirror_jobs = [b.mirror_job for b in built]
    return dg.Definitions(
        assets=[a for b in built for a in b.assets],
        asset_checks=[c for b in built for c in b.checks],
        jobs=[*mirror_jobs, *(b.checks_job for b in built), cleanup_job],
        sensors=[
            build_delta_version_sensor(
                sources, {b.source.name: b.partitions_def for b in built}, mirror_jobs
            ),
            build_compacted_deletes_sensor(sources, catalog, cleanup_job),
        ],
        resources={"spark": IcebergSparkResource.for_catalog(catalog)},
    )
