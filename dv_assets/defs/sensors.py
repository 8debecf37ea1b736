"""Sensors: new Delta commits become partitions and mirror runs; the lag is recorded while the mirror is
behind; compacted DVs trigger the cleanup.

Each table has its own pair (`delta_version_sensor_<name>`, `compacted_deletes_sensor_<name>`, built by
the factory per source): a table's sensors are switched on and off, and fail, on their own. They start
running unless the table's component says `start_running: false` (Dagster's default status; the instance
remembers a switch in the UI).

* `delta_version_sensor` lists each source's `_delta_log` (pure Python) and reads where the mirror
  stands (pyiceberg, no JVM). It starts after the newest Delta version the mirror holds, so switching it
  on after a CLI sync, after the demo or after a cursor reset asks for only what is missing (nothing
  when the mirror is current); its cursor is only an optimisation (`missing_versions`). It adds the
  missing versions, and the versions the mirror still holds readable, as partitions of that source's
  `delta_versions__<name>` definition in ascending order (`partitions_to_add`), and requests ONE
  `mirror_<name>` run per source and tick for all of them: a partition-range run (first..last new
  version; the assets' `BackfillPolicy.single_run()`), so a backlog of 1,000 versions is one run and
  one Spark start-up, and each version is still recorded and checked as its own partition. Run key
  `<source>:v<first>-<last>` (`<source>:v<N>` for one version). Cursor: `{"<source name>": last seen
  version}` as JSON. Every tick that finds the mirror behind Delta's latest version (new versions or
  not: a run may be queued, running or failed) records an `AssetObservation` of `iceberg/<source>` with
  the lag (`dvmirror/lag_versions`, `dvmirror/lag_seconds`; `lag_metadata`), read without a JVM (the
  Delta log and pyiceberg). Once the mirror is current and a Dagster run materialized its newest
  version, it requests the full scan (`row_count_matches`) of that version once, as a `checks_<name>`
  run of that check alone (`scan_request`; the mirror job leaves it out, jobs.py). An up-to-date mirror
  records nothing: a tick every 30 seconds would fill the
  event log with zeros, and the materialization that catches the mirror up records its lag (0).
  From the same reading it evaluates `mirror_lag_within_freshness` (iceberg/freshness.py) and reports
  the evaluation only when its outcome (PASS, WARN, FAIL) differs from the last one reported, or
  `REPORT_EVERY_SECONDS` after it; the cursor keeps that report under `<source>:lag_outcome` and
  `<source>:lag_reported_at` (epoch seconds), beside the version keys (a cursor without them still loads:
  the next tick reports).
* `compacted_deletes_sensor` reads each mirror's last mirrored Delta version (pyiceberg, no Spark) and
  looks at the Delta commits mirrored since its cursor; commits that removed files carrying DVs or
  replaced DVs (OPTIMIZE, REORG … APPLY (PURGE), DV updates) leave mirror-owned delete files behind
  once their snapshots expire, so it requests the `cleanup` job for that source (an extra trigger:
  `cleanup_schedule_<source>`, schedules.py, runs it on the table's `cleanup_cron` in any case).
  Cursor: `{"<source name>": last examined mirrored version}`.
"""

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import dagster as dg
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,  # what dg.define_asset_job returns; not exported as dg.*
)
from dagster._core.event_api import PartitionKeyFilter  # the check-storage query's filter; not dg.*
from dagster._core.storage.dagster_run import IN_PROGRESS_RUN_STATUSES  # queued..started; not dg.*
from dagster._core.storage.tags import (  # the tags of a partition-range run; not exported as dg.*
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
)

from dv_assets.defs.delta.assets import partition_key, version_of
from dv_assets.defs.iceberg.freshness import REPORT_EVERY_SECONDS, lag_check_evaluation, lag_check_result
from dv_assets.defs.jobs import scan_check_key
from dv_assets.defs.maintenance import cleanup_run_config
from dv_assets.defs.sources import VERSIONS_TAG, DeltaSource
from dv_assets.defs.status_metadata import lag_metadata
from dv_assets.mirror import (
    CatalogConfig,
    MirrorInputError,
    MirrorStatus,
    drops_dv_files,
    last_mirrored_version,
    mirror_status,
    read_mirror_table,
)

T = TypeVar("T")
# What a per-source sensor's tick yields: run requests, partitions to add, asset events to record.
TickItem = dg.RunRequest | dg.AddDynamicPartitionsRequest | dg.AssetObservation | dg.AssetCheckEvaluation


def _cursor(context: dg.SensorEvaluationContext) -> dict[str, int]:
    return {k: int(v) for k, v in json.loads(context.cursor).items()} if context.cursor else {}


def _per_source_sensor(
    *,
    name: str,
    jobs: Sequence[dg.JobDefinition | UnresolvedAssetJobDefinition],
    minimum_interval_seconds: int,
    description: str,
    sources: list[DeltaSource],
    read: Callable[[DeltaSource, dict[str, int]], T],
    unreadable: Callable[[DeltaSource], str],
    act: Callable[[dg.SensorEvaluationContext, DeltaSource, T, dict[str, int]], list[TickItem]],
) -> dg.SensorDefinition:
    """A sensor whose cursor is `{"<source name>": version}`: for each source it `read`s (a source that
    cannot be read, its log or its mirror, is logged as `unreadable` and skipped, so that one does not
    stop the others) and `act`s on what it read; both may advance the source's cursor. The sensor starts
    running or stopped as its sources say (`start_running`; one source per sensor in the factory)."""
    running = all(s.start_running for s in sources)

    @dg.sensor(
        name=name,
        jobs=jobs,
        minimum_interval_seconds=minimum_interval_seconds,
        description=description,
        default_status=dg.DefaultSensorStatus.RUNNING if running else dg.DefaultSensorStatus.STOPPED,
    )
    def per_source(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        cursor = _cursor(context)
        items: list[TickItem] = []
        for source in sources:
            try:
                found = read(source, cursor)
            except (OSError, ValueError, MirrorInputError) as err:
                context.log.warning(f"{source.name}: {unreadable(source)}: {err}")
                continue
            items += act(context, source, found, cursor)
        return dg.SensorResult(
            run_requests=[i for i in items if isinstance(i, dg.RunRequest)],
            dynamic_partitions_requests=[i for i in items if isinstance(i, dg.AddDynamicPartitionsRequest)],
            asset_events=[i for i in items if isinstance(i, dg.AssetObservation | dg.AssetCheckEvaluation)],
            cursor=json.dumps(cursor, sort_keys=True),
        )

    return per_source


def mirror_range_request(source: DeltaSource, first: int, last: int) -> dg.RunRequest:
    """One `mirror_<source>` run for Delta versions first..last: a partition-range run, which the
    single-run backfill policy of the assets executes as one run (one step per asset and check)."""
    versions = str(first) if first == last else f"{first}-{last}"
    return dg.RunRequest(
        run_key=f"{source.name}:v{versions}",
        job_name=source.mirror_job_name,
        tags={
            **source.tags,
            VERSIONS_TAG: versions,
            ASSET_PARTITION_RANGE_START_TAG: partition_key(first),
            ASSET_PARTITION_RANGE_END_TAG: partition_key(last),
        },
    )


@dataclass(frozen=True)
class DeltaListing:
    """What a `delta_version_sensor` tick read of one source: the Delta log's latest and oldest
    (reconstructable) versions, and where the mirror stands (None, with `status_error`, when the mirror
    could not be read: the lag is informative, the run requests go out regardless)."""

    latest: int
    oldest: int
    status: MirrorStatus | None
    status_error: str | None = None


def lag_observation(source: DeltaSource, status: MirrorStatus) -> dg.AssetObservation:
    """The mirror's lag as an observation of `iceberg/<source>` (the UI plots the numbers over time)."""
    mirrored = "nothing" if status.mirrored_version is None else f"Delta version {status.mirrored_version}"
    return dg.AssetObservation(
        asset_key=dg.AssetKey(source.mirror_asset_key),
        description=f"{source.version_sensor_name}: the mirror shows {mirrored}, "
        f"{status.lag_versions} version(s) behind Delta's latest ({status.delta_latest_version})",
        metadata=lag_metadata(status),
        tags=source.tags,
    )


def lag_check_report(
    context: dg.SensorEvaluationContext, source: DeltaSource, status: MirrorStatus, cursor: dict[str, int]
) -> list[TickItem]:
    """The lag check's evaluation when its outcome changed since the last one reported (the cursor's),
    or that report is `REPORT_EVERY_SECONDS` old; nothing otherwise (a tick every 30 seconds)."""
    if source.freshness is None:
        return []
    now = time.time()
    outcome, result = lag_check_result(status, source.freshness, now)
    outcome_key, reported_key = f"{source.name}:lag_outcome", f"{source.name}:lag_reported_at"
    if cursor.get(outcome_key) == outcome and now - cursor.get(reported_key, 0) < REPORT_EVERY_SECONDS:
        return []
    cursor[outcome_key], cursor[reported_key] = int(outcome), int(now)
    return [lag_check_evaluation(source, result, context.instance)]


def build_delta_version_sensor(
    sources: list[DeltaSource],
    partitions: dict[str, dg.DynamicPartitionsDefinition],
    jobs: list[UnresolvedAssetJobDefinition],
    catalog: CatalogConfig,
    name: str = "delta_version_sensor",
) -> dg.SensorDefinition:
    def new_versions(
        context: dg.SensorEvaluationContext,
        source: DeltaSource,
        listed: DeltaListing,
        cursor: dict[str, int],
    ) -> list[TickItem]:
        items: list[TickItem] = []
        if listed.status is None:
            context.log.warning(
                f"{source.name}: no lag recorded, the mirror could not be read: {listed.status_error}"
            )
        else:
            if not listed.status.up_to_date:
                items.append(lag_observation(source, listed.status))
            items += lag_check_report(context, source, listed.status, cursor)
        versions = missing_versions(listed, cursor.get(source.name))
        readable = () if listed.status is None else listed.status.readable_versions
        partitions_def = partitions[source.name]
        assert partitions_def.name is not None
        existing = context.instance.get_dynamic_partitions(partitions_def.name)
        to_add = partitions_to_add(existing, [*readable, *versions], listed.latest)
        if to_add:
            items.append(partitions_def.build_add_request(to_add))
        cursor[source.name] = max(listed.latest, cursor.get(source.name, -1))
        if not versions:
            scan = scan_request(context, source, listed.status)
            return items if scan is None else [*items, scan]
        context.log.info(f"{source.name}: Delta versions {versions[0]}..{versions[-1]} to mirror")
        return [*items, mirror_range_request(source, versions[0], listed.latest)]

    return _per_source_sensor(
        name=name,
        jobs=jobs,
        minimum_interval_seconds=30,
        description="Finds the Delta commits the mirror does not hold yet (after its newest version, read "
        "from the mirror); adds them as partitions (ascending) and requests one mirror run per source for "
        "all of them (a partition range), and the full row-count scan of the newest version once it is "
        "mirrored; records the mirror's "
        "lag (dvmirror/lag_versions, dvmirror/lag_seconds) on iceberg/<source> while it is behind, and "
        "the mirror_lag_within_freshness check when its outcome changes (or every 10 minutes).",
        sources=sources,
        read=lambda source, _: _listing(source, catalog),
        unreadable=lambda source: f"cannot list {source.delta_path}",
        act=new_versions,
    )


def missing_versions(listed: DeltaListing, seen: int | None) -> list[int]:
    """The Delta versions to request a mirror run for: those after the newest one the mirror holds
    (read from the mirror itself, so a mirror synced by the CLI, by the demo, or before the cursor was
    reset is not asked for again), from the oldest the log can reconstruct. The cursor (the newest
    version already requested) is only an optimisation: it keeps a tick from requesting again what a
    queued, running or failed run covers. When the mirror cannot be read, the cursor alone decides."""
    held = None if listed.status is None else listed.status.mirrored_version
    first = max(
        listed.oldest,
        -1 if seen is None else seen + 1,
        -1 if held is None else held + 1,
    )
    return list(range(first, listed.latest + 1))


def partitions_to_add(existing: Sequence[str], versions: Sequence[int], latest: int) -> list[str]:
    """The partitions to add for `versions` (the mirror's readable versions and the missing ones), in
    ascending order and after the newest partition there is: a dynamic partitions definition orders its
    keys as they were added, so a version older than an existing key is not added out of order (an
    expired version is not among them: the cleanup job took its partition out, maintenance.py)."""
    newest = max((version_of(k) for k in existing), default=-1)
    keys = sorted({v for v in versions if newest < v <= latest})
    return [partition_key(v) for v in keys]


def scan_request(
    context: dg.SensorEvaluationContext, source: DeltaSource, status: MirrorStatus | None
) -> dg.RunRequest | None:
    """The full scan (`row_count_matches`, not part of `mirror_<name>`: jobs.py) of the mirror's newest
    version, as a `checks_<name>` run of that check alone, once: when the mirror is up to date, a Dagster
    run materialized that version, no execution of the scan on it is recorded (of any status: a queued
    one counts), and no mirror run of the table is queued or running. A mirror written outside Dagster
    (the CLI) asks for no run."""
    if status is None or status.mirrored_version is None or not status.up_to_date:
        return None
    version = status.mirrored_version
    key = partition_key(version)
    instance = context.instance
    materialized = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(source.mirror_asset_key), asset_partitions=[key]),
        limit=1,
    ).records
    if not materialized or not materialized[0].run_id:
        return None
    scan = scan_check_key(source)
    if instance.event_log_storage.get_asset_check_execution_history(
        scan, limit=1, partition_filter=PartitionKeyFilter(key=key)
    ):
        return None
    active = instance.get_runs(
        filters=dg.RunsFilter(job_name=source.mirror_job_name, statuses=list(IN_PROGRESS_RUN_STATUSES)),
        limit=1,
    )
    if active:
        return None
    context.log.info(f"{source.name}: full scan of Delta version {version} (the mirror's newest)")
    return dg.RunRequest(
        run_key=f"{source.name}:scan:v{version}",
        job_name=source.checks_job_name,
        asset_check_keys=[scan],
        partition_key=key,
        tags={**source.tags, VERSIONS_TAG: key},
    )


def _listing(source: DeltaSource, catalog: CatalogConfig) -> DeltaListing:
    """The source's Delta log listed once, and the mirror's status against it (no JVM: pyiceberg)."""
    delta = source.delta_table(enforce_protocol=False)
    latest, oldest = delta.latest_version(), delta.oldest_version()
    try:
        mirror = read_mirror_table(catalog, source.iceberg_table)
        status = mirror_status(delta, mirror, source.iceberg_table, latest_version=latest)
    except Exception as err:
        # Informative only (a catalog outage, a foreign commit the mirror run will refuse by name): it
        # must not stop the run requests.
        return DeltaListing(latest, oldest, None, f"{type(err).__name__}: {err}")
    return DeltaListing(latest, oldest, status)


def build_compacted_deletes_sensor(
    sources: list[DeltaSource],
    catalog: CatalogConfig,
    cleanup_job: dg.JobDefinition,
    name: str = "compacted_deletes_sensor",
) -> dg.SensorDefinition:
    def cleanup(
        context: dg.SensorEvaluationContext, source: DeltaSource, request: dg.RunRequest | None, _: dict
    ) -> list[TickItem]:
        if request is None:
            return []
        context.log.info(f"{source.name}: {request.tags['dvmirror/compacted-versions']} dropped DVs")
        return [request]

    return _per_source_sensor(
        name=name,
        jobs=[cleanup_job],
        minimum_interval_seconds=300,
        description="Requests the cleanup job when mirrored Delta versions removed files carrying DVs "
        "(OPTIMIZE, REORG PURGE, DV replacement); cleanup_schedule_<source> also runs it on a schedule.",
        sources=sources,
        read=lambda source, cursor: _cleanup_request(source, cursor, catalog, cleanup_job.name),
        unreadable=lambda _: "skipped",
        act=cleanup,
    )


def _cleanup_request(
    source: DeltaSource, cursor: dict[str, int], catalog: CatalogConfig, job_name: str
) -> dg.RunRequest | None:
    """A cleanup run for the source when the versions mirrored since the cursor dropped DVs the mirror
    copied (their delete files become garbage once the snapshots referencing them expire)."""
    last = last_mirrored_version(catalog, source.iceberg_table)
    if last is None:
        return None
    delta = source.delta_table(enforce_protocol=False)
    seen = cursor.get(source.name)
    start = delta.oldest_version() if seen is None else max(seen + 1, delta.oldest_version())
    if start > last:
        return None
    compacted = [c.version for c in delta.changes(start, last) if drops_dv_files(c)]
    cursor[source.name] = last
    if not compacted:
        return None
    return dg.RunRequest(
        run_key=f"cleanup:{source.name}:v{last}",
        job_name=job_name,
        run_config=cleanup_run_config(source),
        tags={**source.tags, "dvmirror/compacted-versions": ",".join(str(v) for v in compacted)[:200]},
    )
