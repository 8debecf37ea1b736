"""The code location's factory: for each configured Delta source its partitions, assets (the mirror with
the source's freshness policy), checks, jobs and cleanup schedule (`build_table`); the code location's
two sensors over all its tables that start running (`shared_sensors`; a table that starts stopped has a
pair of its own, sensors.py); and the whole `dg.Definitions` for a list of sources and the code
location's settings, built as one `dg.Definitions` from lists (`build_definitions`, O(N)).

Every per-table definition's name carries the source's name, so the definitions of several
`DeltaMirrorComponent`s merge without clashes; the shared sensors are added once by the code location
(`dv_assets.definitions.project_definitions`). The one shared resource is `spark`: a process holds one
Spark session, so all sources of a code location share one catalog and one resource object
(`spark_resource`).

The definitions take the code location's `MirrorSettings` (resolved once, `dv_assets.definitions`): the
`spark` resource holds them, and the sensors and the Delta-log readers use the same catalog (its storage
settings).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

import dagster as dg
from dagster._core.definitions.assets.graph.asset_graph import (
    AssetGraph,  # a table's own assets and checks, to resolve its jobs on; not exported as dg.*
)
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
from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
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
        iceberg_mirror=build_iceberg_mirror_asset(source, partitions_def),
        checks=build_checks(source, partitions_def),
        lag_checks=lag_checks,
        mirror_job=build_mirror_job(source, partitions_def, lag_checks),
        checks_job=build_checks_job(source, partitions_def),
    )


@cache
def spark_resource(settings: MirrorSettings) -> IcebergSparkResource:
    """One resource object per settings: `dg.Definitions.merge` accepts a resource key from several
    definitions only when it is the same object."""
    return IcebergSparkResource.for_settings(settings)


@dataclass(frozen=True)
class TableDefinitions:
    """Everything of one table but the code location's shared sensors: both assets, the checks,
    `mirror_<name>`, `checks_<name>` (resolved on the table's own assets), `cleanup_<name>`,
    `cleanup_schedule_<name>`."""

    built: SourceDefinitions
    mirror_job: dg.JobDefinition
    checks_job: dg.JobDefinition
    cleanup_job: dg.JobDefinition
    schedule: dg.ScheduleDefinition

    @property
    def source(self) -> DeltaSource:
        return self.built.source

    @property
    def jobs(self) -> list[dg.JobDefinition]:
        return [self.mirror_job, self.checks_job, self.cleanup_job]


def build_table(source: DeltaSource, settings: MirrorSettings) -> TableDefinitions:
    built = build_source(source, settings.catalog)
    source = built.source
    spark = spark_resource(settings)
    mirror_job, checks_job = resolved_jobs(built, {"spark": spark})
    cleanup_job = build_cleanup_job(source, spark)
    return TableDefinitions(
        built, mirror_job, checks_job, cleanup_job, build_cleanup_schedule(source, cleanup_job)
    )


def resolved_jobs(
    built: SourceDefinitions, resources: Mapping[str, dg.ResourceDefinition]
) -> list[dg.JobDefinition]:
    """`mirror_<name>` and `checks_<name>` resolved on the table's own assets and checks, which are all
    their selections name. Left unresolved, the code location resolves every asset job on the graph of
    all its tables (each a pass over every table's assets): O(N^2), 6.8 s of jobs at 300 tables."""
    graph = AssetGraph.from_assets([*built.assets, *built.checks, *built.lag_checks])
    return [
        job.resolve(asset_graph=graph, resource_defs=resources)
        for job in (built.mirror_job, built.checks_job)
    ]


Job = dg.JobDefinition


def sensor_pair(
    tables: list[TableDefinitions], catalog: CatalogConfig, jobs: Mapping[str, Job]
) -> list[dg.SensorDefinition]:
    """The version sensor and the compacted-deletes sensor over `tables` (named as their first table's
    `version_sensor_name`, `compacted_sensor_name` say: all of them share these names), targeting the
    tables' jobs as the code location's definitions hold them (`jobs`, by name: a sensor must target
    the very job objects of the definitions, which a component tree may have copied)."""
    sources = [t.source for t in tables]
    first = sources[0]
    return [
        build_delta_version_sensor(
            sources,
            {t.source.name: t.built.partitions_def for t in tables},
            [jobs[name] for s in sources for name in (s.mirror_job_name, s.checks_job_name)],
            catalog,
            first.version_sensor_name,
        ),
        build_compacted_deletes_sensor(
            sources, catalog, [jobs[s.cleanup_job_name] for s in sources], first.compacted_sensor_name
        ),
    ]


def shared_sensors(
    tables: list[TableDefinitions], catalog: CatalogConfig, jobs: Mapping[str, Job] | None = None
) -> list[dg.SensorDefinition]:
    """The code location's pair (`delta_version_sensor`, `compacted_deletes_sensor`) over its tables that
    start running; none without such tables. `jobs`: the definitions' jobs by name (default: the
    tables' own)."""
    running = [t for t in tables if t.source.start_running]
    if not running:
        return []
    return sensor_pair(running, catalog, jobs if jobs is not None else jobs_by_name(running))


def jobs_by_name(tables: list[TableDefinitions]) -> dict[str, Job]:
    return {j.name: j for t in tables for j in t.jobs}


def own_sensors(table: TableDefinitions, catalog: CatalogConfig) -> list[dg.SensorDefinition]:
    """A table that starts stopped has its own pair (stopped until switched on in the UI)."""
    return [] if table.source.start_running else sensor_pair([table], catalog, jobs_by_name([table]))


def tables_definitions(
    tables: list[TableDefinitions], settings: MirrorSettings, *, with_shared_sensors: bool = True
) -> dg.Definitions:
    """One `dg.Definitions` of the tables, built from lists (no merge of per-table definitions): their
    assets, checks, jobs, schedules, the own sensors of those that start stopped and (unless the caller
    adds them itself, `dv_assets.definitions.project_definitions`) the shared pair over the others."""
    catalog = settings.catalog
    sensors = [s for t in tables for s in own_sensors(t, catalog)]
    if with_shared_sensors:
        sensors += shared_sensors(tables, catalog)
    return dg.Definitions(
        assets=[a for t in tables for a in t.built.assets],
        asset_checks=[c for t in tables for c in (*t.built.checks, *t.built.lag_checks)],
        jobs=[j for t in tables for j in t.jobs],
        sensors=sensors,
        schedules=[t.schedule for t in tables],
        resources={"spark": spark_resource(settings)},
        # How tools over the built definitions (the demo, `dv_assets.ci_checks`) find the tables.
        metadata={
            SOURCE_METADATA_PREFIX + t.source.name: dg.MetadataValue.json(t.source.model_dump(mode="json"))
            for t in tables
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
    """The code location's definitions of `sources`: O(N) (one `dg.Definitions` from lists)."""
    return tables_definitions([build_table(s, settings) for s in sources], settings)
