"""The Dagster tests' harness: sources on copied fixtures, definitions bound to the session's test
catalog, materializing one partition with its checks."""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

import dagster as dg

from dv_assets.defs.factory import SourceDefinitions, build_definitions, build_source
from dv_assets.defs.sources import DeltaSource
from dv_assets.mirror.iceberg.maintenance import Retention
from dv_assets.mirror.settings import CatalogLocation
from resources.spark import IcebergSparkResource

_counter = itertools.count()


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


def resources(catalog: CatalogLocation) -> dict:
    return {"spark": IcebergSparkResource.for_catalog(catalog)}


def definitions(sources: list[DeltaSource], catalog: CatalogLocation) -> dg.Definitions:
    return build_definitions(sources, catalog)


def add_partitions(instance: dg.DagsterInstance, built: SourceDefinitions, versions: list[int]) -> None:
    name = built.partitions_def.name
    assert name is not None
    existing = set(instance.get_dynamic_partitions(name))
    missing = [str(v) for v in versions if str(v) not in existing]
    if missing:
        instance.add_dynamic_partitions(name, missing)


def materialize_version(
    built: SourceDefinitions,
    catalog: CatalogLocation,
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


def checks_passed(result: dg.ExecuteInProcessResult) -> dict[str, bool]:
    return {e.check_name: e.passed for e in result.get_asset_check_evaluations()}


def materializations(result: dg.ExecuteInProcessResult, key: list[str]) -> dict[str, dict]:
    """Partition → metadata (raw values) of the run's materializations of `key`."""
    out = {}
    for event in result.get_asset_materialization_events():
        mat = event.materialization
        if mat.asset_key == dg.AssetKey(key):
            out[mat.partition] = {k: v.value for k, v in mat.metadata.items()}
    return out


def hash_tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


__all__ = ["build_source"]
