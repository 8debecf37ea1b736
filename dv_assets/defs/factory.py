"""The code location's factory: for each configured Delta source its partitions, assets (the mirror with
the source's freshness policy), checks, jobs, sensors and cleanup schedule; and the whole
`dg.Definitions` for a list of sources and the code location's settings.

Every definition is per source (names carry the source's name), so the definitions of several sources,
or of several `DeltaMirrorComponent`s, merge without clashes. The one shared definition is the `spark`
resource: a process holds one Spark session, so all sources of a code location share one catalog and
one resource object (`spark_resource`).

The definitions take the code location's `MirrorSettings` (resolved once, `dv_assets.definitions`): the
`spark` resource holds them, and the sensors and the Delta-log readers use the same catalog (its storage
settings).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import dagster as dg
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,  # what dg.define_asset_job returns; not exported as dg.*
)

from dv_assets.defs.delta.assets import build_delta_versions_asset
from dv_assets.defs.iceberg.assets import build_iceberg_mirror_asset
from dv_assets.defs.iceberg.checks import build_checks
from dv_assets.defs.iceberg.freshness import build_lag_checks
from dv_assets.defs.jobs import build_checks_job, build_mirror_job
from dv_assets.defs.maintenance import build_cleanup_job
from dv_assets.defs.schedules import build_cleanup_schedule
from dv_assets.defs.sensors import build_compacted_deletes_sensor, build_delta_version_sensor
from dv_assets.defs.sources import DeltaSource
from dv_assets.mirror import CatalogConfig, MirrorSettings
from resources.spark import IcebergSparkResource

SOURCE_METADATA_PREFIX = "dvmirror/table/"


@dataclass(frozen=True)
class SourceDefinitions:
    source: DeltaSource
    partitions_def: dg.DynamicPartitionsDefinition
    delta_versions: dg.AssetsDefinition
    iceberg_mirror: dg.AssetsDefinition
    checks: list[dg.AssetChecksDefinition]  # per Delta version (partitioned)
    lag_checks: list[dg.AssetChecksDefinition]  # the table now: none, or `mirror_lag_within_freshness`
    mirror_job: UnresolvedAssetJobDefinition
    checks_job: UnresolvedAssetJobDefinition

    @property
    def assets(self) -> list[dg.AssetsDefinition]:
        return [self.delta_versions, self.iceberg_mirror]


def build_source(source: DeltaSource, catalog: CatalogConfig | None = None) -> SourceDefinitions:
    if catalog is not None:
        # The Delta log is read with the catalog's storage settings (an S3 endpoint, say), as the mirror
        # writes its files.
        source = source.model_copy(update={"storage_properties": catalog.storage_properties()})
    partitions_def = dg.DynamicPartitionsDefinition(name=source.partitions_name)
    lag_checks = build_lag_checks(source)
    return SourceDefinitions(
        source=source,
        partitions_def=partitions_def,
        delta_versions=build_delta_versions_asset(source, partitions_def),
        iceberg_mirror=with_freshness(build_iceberg_mirror_asset(source, partitions_def), source),
        checks=build_checks(source, partitions_def),
        lag_checks=lag_checks,
        mirror_job=build_mirror_job(source, partitions_def, lag_checks),
        checks_job=build_checks_job(source, partitions_def),
    )


def with_freshness(asset: dg.AssetsDefinition, source: DeltaSource) -> dg.AssetsDefinition:
    """The asset with the source's freshness policy (none when the source has none)."""
    if source.freshness is None:
        return asset
    policy = source.freshness.policy()
    return asset.map_asset_specs(lambda spec: spec.replace_attributes(freshness_policy=policy))


@cache
def spark_resource(settings: MirrorSettings) -> IcebergSparkResource:
    """One resource object per settings: `dg.Definitions.merge` accepts a resource key from several
    definitions only when it is the same object."""
    return IcebergSparkResource.for_settings(settings)


def build_source_definitions(source: DeltaSource, settings: MirrorSettings) -> dg.Definitions:
    """Everything of one source: both assets, the checks, `mirror_<name>`, `checks_<name>`,
    `cleanup_<name>`, `delta_version_sensor_<name>`, `compacted_deletes_sensor_<name>`,
    `cleanup_schedule_<name>`."""
    catalog = settings.catalog
    built = build_source(source, catalog)
    source = built.source
    cleanup_job = build_cleanup_job([source], source.cleanup_job_name, source.cleanup_op_name)
    return dg.Definitions(
        assets=built.assets,
        asset_checks=[*built.checks, *built.lag_checks],
        jobs=[built.mirror_job, built.checks_job, cleanup_job],
        sensors=[
            build_delta_version_sensor(
                [source],
                {source.name: built.partitions_def},
                [built.mirror_job, built.checks_job],
                catalog,
                source.version_sensor_name,
            ),
            build_compacted_deletes_sensor([source], catalog, cleanup_job, source.compacted_sensor_name),
        ],
        schedules=[build_cleanup_schedule(source, cleanup_job)],
        resources={"spark": spark_resource(settings)},
        # How tools over the built definitions (the demo, `dv_assets.ci_checks`) find the tables.
        metadata={
            SOURCE_METADATA_PREFIX + source.name: dg.MetadataValue.json(source.model_dump(mode="json"))
        },
    )


def sources_of(defs: dg.Definitions) -> list[DeltaSource]:
    """The tables the definitions mirror (in name order)."""
    found = [
        DeltaSource.model_validate(value.value if isinstance(value, dg.MetadataValue) else value)
        for key, value in (defs.metadata or {}).items()
        if key.startswith(SOURCE_METADATA_PREFIX)
    ]
    return sorted(found, key=lambda s: s.name)


def spark_resource_of(defs: dg.Definitions) -> IcebergSparkResource:
    resource = (defs.resources or {}).get("spark")
    if not isinstance(resource, IcebergSparkResource):
        raise ValueError("the definitions have no IcebergSparkResource under the key `spark`")
    return resource


def build_definitions(sources: list[DeltaSource], settings: MirrorSettings) -> dg.Definitions:
    return (
        dg.Definitions.merge(*(build_source_definitions(s, settings) for s in sources))
        if sources
        else (dg.Definitions(resources={"spark": spark_resource(settings)}))
    )
