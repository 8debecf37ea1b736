"""A run's materializations of a partitioned asset, recorded in Delta-version order.

Dagster 1.13 derives a partition-range run's materializations from the asset's one output: one per
partition of the range, in the iteration order of a Python `set` of the keys (`DefaultPartitionsSubset`),
i.e. hash order (a run of versions 0..8 was recorded 2,4,0,5,3,7,8,1,6), so the asset's latest
materialization, which the UI's overview shows, was an arbitrary version's. `MaterializeResult` takes no
partition in 1.13, so both assets of a table log one `AssetMaterialization` per version themselves, in
ascending order (`in_version_order`), and end with `no_derived_materializations()`: their output, marked
so that Dagster derives no event from it (the marker Dagster's own observable source assets use for the
events they log themselves), while the steps downstream still get the output.
tests/dagster/test_assets.py holds Dagster to this (the order in the instance, and the latest).

A run that only re-records versions older than the asset's newest (a partition materialized again)
records that newest version again last (`RECORDED_AGAIN`), so the latest materialization stays the
newest version's.
"""

from __future__ import annotations

from collections.abc import Iterable

import dagster as dg
from dagster._core.definitions.source_asset import (
    SYSTEM_METADATA_KEY_SOURCE_ASSET_OBSERVATION,  # "derive no asset event from this output"; not dg.*
)


def in_version_order(events: Iterable[dg.AssetMaterialization]) -> list[dg.AssetMaterialization]:
    """The events sorted by their partition as a Delta version (keys are decimal versions)."""
    return sorted(events, key=lambda event: int(event.partition or -1))


def add_missing_partitions(instance: dg.DagsterInstance, partitions_name: str, keys: Iterable[str]) -> None:
    """Dynamic partitions must exist before an event names them (a version mirrored below a run's range,
    or outside Dagster, may not have been added yet)."""
    known = set(instance.get_dynamic_partitions(partitions_name))
    missing = [k for k in dict.fromkeys(keys) if k not in known]
    if missing:
        instance.add_dynamic_partitions(partitions_name, missing)


RECORDED_AGAIN = "the newest version, recorded again after older ones so that it stays the asset's latest"


def newest_materialized_version(instance: dg.DagsterInstance, asset_key: dg.AssetKey) -> int | None:
    return max((int(k) for k in instance.get_materialized_partitions(asset_key)), default=None)


def no_derived_materializations() -> dg.MaterializeResult:
    """The asset's output, from which Dagster derives no materialization (the asset logged its own)."""
    return dg.MaterializeResult(metadata={SYSTEM_METADATA_KEY_SOURCE_ASSET_OBSERVATION: True})
