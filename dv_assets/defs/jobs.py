"""Jobs: per source, `mirror_<name>` (both assets and their blocking checks, for one partition or a
partition range in one run: the assets' backfill policy is `single_run`, and the sensor requests its
backlog as one range) and `checks_<name>` (the asset checks only, for CI: run with the
`dagster/partition` tag set to a Delta version, or the `dagster/asset_partition_range_start` / `_end`
tags set to a range); and `cleanup` (snapshot expiry and reclaiming the mirror's own files, see
maintenance.py).

Which versions the checks evaluate (iceberg/checks.py): in `mirror_<name>` the blocking checks run on
every version the run covers; the full scan (`row_count_matches`) is not in it: a check planned in a
partition-range run is recorded for every partition of the range (SKIPPED where not evaluated), so the
version sensor requests the scan of the mirror's newest version as a `checks_<name>` run of that check
alone (a backlog costs one scan). `checks_<name>` evaluates every check on every version it is asked for.
The lag check (`mirror_lag_within_freshness`, iceberg/freshness.py) is not partitioned: `checks_<name>`
evaluates it once per run, on the table as it is then; `mirror_<name>` leaves it out (the version sensor
reports it as the mirror catches up).

A job spans one partitions definition, and each source has its own (its Delta versions), so the
mirror and checks jobs are per source.

Every job runs its steps in the run's one process (`dg.in_process_executor`, docs/dagster.md): the code
location is built once per run, the `spark` resource once, and the checks that read with Spark use the
mirror step's session, one JVM per run. Dagster's default executor would start a process per step, each
rebuilding the code location and starting a JVM of its own.
"""

from __future__ import annotations

import dagster as dg
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,  # what dg.define_asset_job returns; not exported as dg.*
)

from dv_assets.defs.sources import DeltaSource
from dv_assets.mirror.exactness_checks import ROW_COUNT_SCAN


def scan_check_key(source: DeltaSource) -> dg.AssetCheckKey:
    """The full scan (`row_count_matches`), which `mirror_<name>` leaves out."""
    return dg.AssetCheckKey(dg.AssetKey(source.mirror_asset_key), ROW_COUNT_SCAN)


def build_mirror_job(
    source: DeltaSource,
    partitions_def: dg.DynamicPartitionsDefinition,
    lag_checks: list[dg.AssetChecksDefinition],
) -> UnresolvedAssetJobDefinition:
    return dg.define_asset_job(
        name=source.mirror_job_name,
        selection=dg.AssetSelection.assets(
            dg.AssetKey(source.delta_asset_key), dg.AssetKey(source.mirror_asset_key)
        )
        - dg.AssetSelection.checks(*lag_checks)
        - dg.AssetSelection.checks(scan_check_key(source)),
        partitions_def=partitions_def,
        description=f"Record Delta versions of {source.name} (one partition or a range, in one run) and "
        f"mirror them into {source.iceberg_table}, one snapshot each, then run the blocking checks on "
        "every version's snapshot (the version sensor then requests the full row-count scan of the "
        "newest version, in a checks run of its own).",
        tags=source.tags,
        executor_def=dg.in_process_executor,
    )


def build_checks_job(
    source: DeltaSource, partitions_def: dg.DynamicPartitionsDefinition
) -> UnresolvedAssetJobDefinition:
    return dg.define_asset_job(
        name=source.checks_job_name,
        selection=dg.AssetSelection.checks_for_assets(dg.AssetKey(source.mirror_asset_key)),
        partitions_def=partitions_def,
        description=f"Only the asset checks of {source.iceberg_table} (for CI), for one Delta version "
        "or a range of them: every check, the full scan included, on every version asked for.",
        tags=source.tags,
        executor_def=dg.in_process_executor,
    )
