"""The Dagster tests' harness: sources on copied fixtures (and files of component documents naming
them), definitions bound to the session's test catalog, materializing one partition with its checks,
evaluating a sensor and executing its run requests in-process as the sensor daemon would launch them."""

from __future__ import annotations

import hashlib
import itertools
import json
from datetime import datetime
from pathlib import Path

import dagster as dg
from dagster._core.event_api import PartitionKeyFilter  # the check-storage query's filter; not dg.*

from dv_assets.defs.factory import SourceDefinitions, build_definitions, build_source
from dv_assets.defs.sources import DeltaSource
from dv_assets.mirror.iceberg.maintenance import Retention
from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from resources.spark import IcebergSparkResource

_counter = itertools.count()
COMPONENT_TYPE = "type: dv_assets.components.DeltaMirrorComponent"


def make_source(delta_path: Path, *, format_version: int = 3, retain_last: int = 10) -> DeltaSource:
    """A source with a unique name and Iceberg table (tests share one catalog)."""
    n = next(_counter)
    stem = "".join(c if c.isalnum() else "_" for c in delta_path.name.lower())
    name = f"t{n}_{stem}"[:40]
    return DeltaSource(
        name=name,
        delta_path=str(delta_path),
        iceberg_table=f"dagster_tests.{name}_{hashlib.sha1(str(delta_path).encode()).hexdigest()[:8]}",
        format_version=format_version,
        retention=Retention(retain_last=retain_last, orphan_min_age_hours=1),
    )


def tables_file(path: Path, *attributes: str) -> Path:
    """A file of `DeltaMirrorComponent` documents (what DVMIRROR_SOURCES names), one per `attributes`
    (each a YAML flow map)."""
    path.write_text("\n---\n".join(f"{COMPONENT_TYPE}\nattributes: {a}" for a in attributes) + "\n")
    return path


def source_attributes(source: DeltaSource, catalog: CatalogConfig | None = None) -> str:
    """A source as component attributes (a YAML flow map), with the catalog's properties when given."""
    where = (
        f", catalog: {json.dumps(dict(catalog.properties))}" if catalog is not None else ""
    )  # JSON is YAML
    return (
        f"{{name: {source.name}, delta_path: '{source.delta_path}', iceberg_table: {source.iceberg_table}"
        f"{where}}}"
    )


def sources_file(path: Path, catalog: CatalogConfig, *sources: DeltaSource) -> str:
    """`tables_file` of `sources`, each naming `catalog`; the file's path."""
    return str(tables_file(path, *(source_attributes(s, catalog) for s in sources)))


def resources(catalog: CatalogConfig) -> dict:
    return {"spark": IcebergSparkResource.for_settings(settings_of(catalog))}


def settings_of(catalog: CatalogConfig) -> MirrorSettings:
    """The code location's settings for a test's catalog (the rest from the environment, as a code location
    resolves them)."""
    return MirrorSettings.resolve(catalog=catalog)


def definitions(sources: list[DeltaSource], catalog: CatalogConfig) -> dg.Definitions:
    return build_definitions(sources, settings_of(catalog))


def add_partitions(instance: dg.DagsterInstance, built: SourceDefinitions, versions: list[int]) -> None:
    name = built.partitions_def.name
    assert name is not None
    existing = set(instance.get_dynamic_partitions(name))
    missing = [str(v) for v in versions if str(v) not in existing]
    if missing:
        instance.add_dynamic_partitions(name, missing)


def materialize_version(
    built: SourceDefinitions,
    catalog: CatalogConfig,
    instance: dg.DagsterInstance,
    version: int,
    *,
    raise_on_error: bool = True,
) -> dg.ExecuteInProcessResult:
    add_partitions(instance, built, [version])
    return dg.materialize(
        [*built.assets, *built.checks],
        instance=instance,
        partition_key=str(version),
        resources=resources(catalog),
        raise_on_error=raise_on_error,
    )


def evaluate_sensor(
    defs: dg.Definitions, name: str, instance: dg.DagsterInstance, cursor: str | None
) -> dg.SensorResult:
    sensor = defs.resolve_sensor_def(name)
    result = sensor(dg.build_sensor_context(instance=instance, cursor=cursor, definitions=defs))
    assert isinstance(result, dg.SensorResult)
    return result


def record_tick(instance: dg.DagsterInstance, tick: dg.SensorResult) -> None:
    """What the sensor daemon records of a tick before it launches the runs: the asset events (as
    runless events) and the requested partitions."""
    for event in tick.asset_events or []:
        instance.report_runless_asset_event(event)
    for request in tick.dynamic_partitions_requests or []:
        assert isinstance(request, dg.AddDynamicPartitionsRequest)
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))


def execute_run_request(
    defs: dg.Definitions, instance: dg.DagsterInstance, run: dg.RunRequest
) -> dg.ExecuteInProcessResult:
    """A requested run, with the request's job, run config, tags, partition and check selection (as the
    daemon launches it: only the checks a request names), in-process against `instance`."""
    assert run.job_name is not None
    job = defs.resolve_job_def(run.job_name)
    if run.asset_check_keys is not None:
        job = job.get_subset(asset_selection=set(), asset_check_selection=set(run.asset_check_keys))
    tags = dict(run.tags)
    if run.partition_key is not None:
        tags["dagster/partition"] = run.partition_key
    return job.execute_in_process(
        instance=instance, run_config=dict(run.run_config), tags=tags, raise_on_error=False
    )


def launch_requested_runs(
    defs: dg.Definitions, instance: dg.DagsterInstance, tick: dg.SensorResult
) -> list[dg.ExecuteInProcessResult]:
    """What the sensor daemon does with a tick: record its events and partitions, then run each requested
    job (here in-process, against `instance`)."""
    record_tick(instance, tick)
    return [execute_run_request(defs, instance, run) for run in tick.run_requests or []]


def evaluate_schedule(
    defs: dg.Definitions, name: str, instance: dg.DagsterInstance, when: datetime
) -> list[dg.RunRequest]:
    """The run requests of the schedule's tick at `when`, as the scheduler daemon evaluates it (which runs
    them on the schedule's job: a schedule's requests name none)."""
    schedule = defs.resolve_schedule_def(name)
    data = schedule.evaluate_tick(dg.build_schedule_context(instance=instance, scheduled_execution_time=when))
    return [r.with_replaced_attrs(job_name=r.job_name or schedule.job_name) for r in data.run_requests or []]


def checks_passed(result: dg.ExecuteInProcessResult) -> dict[str, bool]:
    """Check name → whether it passed on every partition (Delta version) the run evaluated it on."""
    passed: dict[str, bool] = {}
    for e in result.get_asset_check_evaluations():
        passed[e.check_name] = passed.get(e.check_name, True) and e.passed
    return passed


def checks_by_partition(result: dg.ExecuteInProcessResult) -> dict[str, dict[str, bool]]:
    """Partition → check name → passed, for every check evaluation of the run."""
    out: dict[str, dict[str, bool]] = {}
    for e in result.get_asset_check_evaluations():
        assert e.partition is not None, f"{e.check_name} evaluated without a partition"
        assert e.check_name not in out.get(e.partition, {}), f"{e.check_name} twice on {e.partition}"
        out.setdefault(e.partition, {})[e.check_name] = e.passed
    return out


def materializations(result: dg.ExecuteInProcessResult, key: list[str]) -> dict[str, dict]:
    """Partition → metadata (raw values) of the run's materializations of `key`."""
    out = {}
    for event in result.get_asset_materialization_events():
        mat = event.materialization
        if mat.asset_key == dg.AssetKey(key):
            out[mat.partition] = {k: v.value for k, v in mat.metadata.items()}
    return out


def run_materializations(result: dg.ExecuteInProcessResult, key: list[str]) -> list[dg.AssetMaterialization]:
    """The run's materializations of `key`, in the order the run logged them."""
    events = result.get_asset_materialization_events()
    return [e.materialization for e in events if e.materialization.asset_key == dg.AssetKey(key)]


def materialized_order(instance: dg.DagsterInstance, key: list[str]) -> list[str]:
    """The partitions of every materialization of `key` the instance holds, in the order they were
    stored (their storage ids)."""
    records = instance.fetch_materializations(dg.AssetKey(key), limit=10_000, ascending=True).records
    return [r.partition_key or "" for r in records]


def latest_materialization(instance: dg.DagsterInstance, key: list[str]) -> tuple[str, int]:
    """Dagster's latest materialization of `key` (what the asset's overview shows): its partition and
    the Delta version its metadata names."""
    event = instance.get_latest_materialization_event(dg.AssetKey(key))
    assert event is not None and event.asset_materialization is not None
    materialization = event.asset_materialization
    return materialization.partition or "", int(materialization.metadata["delta_version"].value)


def recorded_materializations(
    instance: dg.DagsterInstance, key: list[str], partitions: list[str]
) -> dict[str, dict]:
    """Partition → metadata (raw values) of its latest materialization of `key`, from the instance's
    event log (not from a run's in-memory result)."""
    out = {}
    for partition in partitions:
        (record,) = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey(key), asset_partitions=[partition]), limit=1
        ).records
        materialization = record.asset_materialization
        assert materialization is not None
        out[partition] = {k: v.value for k, v in materialization.metadata.items()}
    return out


def check_executions(instance: dg.DagsterInstance, key: list[str], check_names: list[str]) -> list[tuple]:
    """Every execution of the checks the instance's check storage holds: (check, partition, status,
    run finished), newest first per check. A PLANNED execution of a finished run is what the UI shows
    as SKIPPED (or EXECUTION_FAILED when the run failed)."""
    out = []
    for name in check_names:
        check_key = dg.AssetCheckKey(dg.AssetKey(key), name)
        for record in instance.event_log_storage.get_asset_check_execution_history(check_key, limit=1000):
            run = instance.get_run_by_id(record.run_id) if record.run_id else None
            out.append((name, record.partition, record.status.value, run is None or run.is_finished))
    return out


def recorded_check_status(
    instance: dg.DagsterInstance, key: list[str], check_names: list[str], partitions: list[str]
) -> dict[str, dict[str, str]]:
    """Partition → check name → status of its latest execution (SUCCEEDED, FAILED, PLANNED, ...), as the
    instance's asset-check storage (what the UI shows per partition) holds it."""
    check_keys = [dg.AssetCheckKey(dg.AssetKey(key), name) for name in check_names]
    out: dict[str, dict[str, str]] = {}
    for partition in partitions:
        latest = instance.event_log_storage.get_latest_asset_check_execution_by_key(
            check_keys, partition_filter=PartitionKeyFilter(key=partition)
        )
        out[partition] = {k.name: record.status.value for k, record in latest.items()}
    return out


def hash_tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


__all__ = ["build_source"]
