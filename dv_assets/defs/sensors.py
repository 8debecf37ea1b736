"""Sensors: new Delta commits become partitions and mirror runs; the lag is recorded while the mirror is
behind; compacted DVs trigger the cleanup.

A code location has ONE pair over all its tables that start running (`delta_version_sensor`,
`compacted_deletes_sensor`, default status running; the factory builds them, factory.py): the daemon's
cycle is two evaluations whatever the number of tables (a pair per table, 600 sensors at 300 tables,
stretched the 30-second interval to a median of 59 s: docs/dagster.md). A table with `start_running:
false` has a pair of its own (`delta_version_sensor_<name>`, `compacted_deletes_sensor_<name>`), stopped
until switched on in the UI: that is how one table is paused or followed alone. One table never stops the
others: whatever reading or acting on it raises is caught, logged as a warning, kept in its own cursor
entry (`<source>:error`, cleared when it reads again) and named in the tick's skip message when nothing
else is requested; its cursor entries stay as they were before that table's evaluation.

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
  A settled table costs one listing of its `_delta_log` (from the next version's name on) per tick: one
  whose last full reading found the mirror at Delta's latest version with nothing to request (no run,
  no scan, no mirror run in progress) is kept under `<source>:settled` (that version) and
  `<source>:settled_at`, and is read in full again only when its log has a later version, or
  `REPORT_EVERY_SECONDS` after (so the lag check's periodic report, and anything changed behind the
  log's back, are seen as before).
* `compacted_deletes_sensor` reads each mirror's last mirrored Delta version (pyiceberg, no Spark) and
  looks at the Delta commits mirrored since its cursor; commits that removed files carrying DVs or
  replaced DVs (OPTIMIZE, REORG … APPLY (PURGE), DV updates) leave mirror-owned delete files behind
  once their snapshots expire, so it requests the `cleanup_<source>` job (an extra trigger:
  `cleanup_schedule_<source>`, schedules.py, runs it on the table's cleanup cron in any case). The first
  time it sees a table's mirror (no cursor entry: a first deploy, a new table, a cursor reset) it starts
  at the mirror's current version and requests nothing: the history mirrored before is the nightly
  schedule's, and a first deploy does not request a cleanup per table whose history ever compacted. A
  table whose log has nothing after the cursor's version is not read further (the mirror cannot be
  ahead of its log). Cursor: `{"<source name>": last examined mirrored version}`.
"""

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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
from dv_assets.mirror.delta.facts import drops_dv_files
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.iceberg.pyiceberg_reader import last_mirrored_version, read_mirror_table
from dv_assets.mirror.secrets import masked
from dv_assets.mirror.settings import CatalogConfig
from dv_assets.mirror.status import MirrorStatus, mirror_status

# What a sensor's evaluation of one table yields: run requests, partitions to add, asset events to record.
TickItem = dg.RunRequest | dg.AddDynamicPartitionsRequest | dg.AssetObservation | dg.AssetCheckEvaluation
# The cursor: `{"<source>": version, "<source>:<key>": number or (`:error`) text}`.
Cursor = dict[str, int | str]
# Every cursor key of a source besides its name (restored when its evaluation fails midway).
CURSOR_KEYS = ("lag_outcome", "lag_reported_at", "settled", "settled_at", "error")
MAX_NAMED = 20  # failing tables named in a skip message


def _cursor(context: dg.SensorEvaluationContext) -> Cursor:
    if not context.cursor:
        return {}
    return {k: v if isinstance(v, str) else int(v) for k, v in json.loads(context.cursor).items()}


def _number(cursor: Cursor, key: str, default: int | None = None) -> int | None:
    value = cursor.get(key, default)
    return value if isinstance(value, int) else default


def _tables_sensor(
    *,
    name: str,
    jobs: Sequence[dg.JobDefinition | UnresolvedAssetJobDefinition],
    minimum_interval_seconds: int,
    description: str,
    sources: list[DeltaSource],
    evaluate: Callable[[dg.SensorEvaluationContext, DeltaSource, Cursor], list[TickItem]],
) -> dg.SensorDefinition:
    """A sensor over `sources` whose cursor is `{"<source name>": version, ...}`: it `evaluate`s each
    source in turn, isolated (see the module's docstring). Running by default when its sources start
    running (the code location's pair), stopped otherwise (a table's own pair)."""
    running = all(s.start_running for s in sources)

    @dg.sensor(
        name=name,
        jobs=jobs,
        minimum_interval_seconds=minimum_interval_seconds,
        description=description,
        default_status=dg.DefaultSensorStatus.RUNNING if running else dg.DefaultSensorStatus.STOPPED,
    )
    def over_tables(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        cursor = _cursor(context)
        items: list[TickItem] = []
        failed: list[str] = []
        for source in sources:
            keys = (source.name, *(f"{source.name}:{k}" for k in CURSOR_KEYS))
            before = {k: cursor[k] for k in keys if k in cursor}
            try:
                found = evaluate(context, source, cursor)
            except Exception as err:  # one table's failure is reported, never the others'
                for key in keys:
                    cursor.pop(key, None)
                message = masked(f"{type(err).__name__}: {err}")
                cursor.update(before, **{f"{source.name}:error": message[:500]})
                context.log.warning(f"{source.name}: skipped: {message}")
                failed.append(source.name)
                continue
            cursor.pop(f"{source.name}:error", None)
            items += found
        run_requests = [i for i in items if isinstance(i, dg.RunRequest)]
        skip = None
        if failed and not run_requests:
            named = ", ".join(failed[:MAX_NAMED]) + (", ..." if len(failed) > MAX_NAMED else "")
            skip = (
                f"{len(failed)} of {len(sources)} table(s) could not be read (cursor: <name>:error): {named}"
            )
        return dg.SensorResult(
            run_requests=run_requests,
            dynamic_partitions_requests=[i for i in items if isinstance(i, dg.AddDynamicPartitionsRequest)],
            asset_events=[i for i in items if isinstance(i, dg.AssetObservation | dg.AssetCheckEvaluation)],
            cursor=json.dumps(cursor, sort_keys=True),
            skip_reason=skip,
        )

    return over_tables


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
    context: dg.SensorEvaluationContext, source: DeltaSource, status: MirrorStatus, cursor: Cursor
) -> list[TickItem]:
    """The lag check's evaluation when its outcome changed since the last one reported (the cursor's),
    or that report is `REPORT_EVERY_SECONDS` old; nothing otherwise (a tick every 30 seconds)."""
    if source.freshness is None:
        return []
    now = time.time()
    outcome, result = lag_check_result(status, source.freshness, now)
    outcome_key, reported_key = f"{source.name}:lag_outcome", f"{source.name}:lag_reported_at"
    if (
        cursor.get(outcome_key) == outcome
        and now - (_number(cursor, reported_key) or 0) < REPORT_EVERY_SECONDS
    ):
        return []
    cursor[outcome_key], cursor[reported_key] = int(outcome), int(now)
    return [lag_check_evaluation(source, result, context.instance)]


def new_versions(
    context: dg.SensorEvaluationContext,
    source: DeltaSource,
    cursor: Cursor,
    catalog: CatalogConfig,
    partitions_def: dg.DynamicPartitionsDefinition,
) -> list[TickItem]:
    """One table's evaluation by the version sensor (the module's docstring): its lag, the partitions to
    add, and a mirror run or the full scan to request; nothing when it is settled."""
    delta = source.delta_table(enforce_protocol=False)
    now = time.time()
    if settled(source, cursor, delta, now):
        return []
    listed = _listing(delta, source, catalog)
    items: list[TickItem] = []
    if listed.status is None:
        context.log.warning(
            f"{source.name}: no lag recorded, the mirror could not be read: {listed.status_error}"
        )
    else:
        if not listed.status.up_to_date:
            items.append(lag_observation(source, listed.status))
        items += lag_check_report(context, source, listed.status, cursor)
    seen = _number(cursor, source.name)
    versions = missing_versions(listed, seen)
    readable = () if listed.status is None else listed.status.readable_versions
    assert partitions_def.name is not None
    existing = context.instance.get_dynamic_partitions(partitions_def.name)
    to_add = partitions_to_add(existing, [*readable, *versions], listed.latest)
    if to_add:
        items.append(partitions_def.build_add_request(to_add))
    cursor[source.name] = max(listed.latest, -1 if seen is None else seen)
    cursor.pop(f"{source.name}:settled", None)
    cursor.pop(f"{source.name}:settled_at", None)
    if versions:
        context.log.info(f"{source.name}: Delta versions {versions[0]}..{versions[-1]} to mirror")
        return [*items, mirror_range_request(source, versions[0], listed.latest)]
    scan = scan_request(context, source, listed.status)
    if scan is not None:
        return [*items, scan]
    if (
        listed.status is not None
        and listed.status.up_to_date
        and listed.status.mirrored_version == listed.latest
        and not mirror_run_active(context.instance, source)
    ):
        cursor[f"{source.name}:settled"], cursor[f"{source.name}:settled_at"] = listed.latest, int(now)
    return items


def build_delta_version_sensor(
    sources: list[DeltaSource],
    partitions: dict[str, dg.DynamicPartitionsDefinition],
    jobs: list[UnresolvedAssetJobDefinition],
    catalog: CatalogConfig,
    name: str = "delta_version_sensor",
) -> dg.SensorDefinition:
    def evaluate(context: dg.SensorEvaluationContext, source: DeltaSource, cursor: Cursor) -> list[TickItem]:
        return new_versions(context, source, cursor, catalog, partitions[source.name])

    return _tables_sensor(
        name=name,
        jobs=jobs,
        minimum_interval_seconds=30,
        description="Finds the Delta commits the mirror does not hold yet (after its newest version, read "
        "from the mirror); adds them as partitions (ascending) and requests one mirror run per source for "
        "all of them (a partition range), and the full row-count scan of the newest version once it is "
        "mirrored; records the mirror's "
        "lag (dvmirror/lag_versions, dvmirror/lag_seconds) on iceberg/<source> while it is behind, and "
        "the mirror_lag_within_freshness check when its outcome changes (or every 10 minutes). Tables: "
        + ", ".join(s.name for s in sources[:MAX_NAMED])
        + (f" and {len(sources) - MAX_NAMED} more" if len(sources) > MAX_NAMED else "")
        + ".",
        sources=sources,
        evaluate=evaluate,
    )


def settled(source: DeltaSource, cursor: Cursor, delta: DeltaTable, now: float) -> bool:
    """Whether a tick can leave the table alone: its last full reading found it settled (the mirror at
    Delta's latest version, nothing to request) less than `REPORT_EVERY_SECONDS` ago, its lag check's
    report is not due, and its log has no version after that one (one listing)."""
    version = _number(cursor, f"{source.name}:settled")
    if version is None or version != _number(cursor, source.name):
        return False
    if now - (_number(cursor, f"{source.name}:settled_at") or 0) >= REPORT_EVERY_SECONDS:
        return False
    reported = _number(cursor, f"{source.name}:lag_reported_at") or 0
    if source.freshness is not None and now - reported >= REPORT_EVERY_SECONDS:
        return False
    return not delta.has_version_after(version)


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


def mirror_run_active(instance: dg.DagsterInstance, source: DeltaSource) -> bool:
    """Whether a `mirror_<name>` run is queued or running."""
    return bool(
        instance.get_runs(
            filters=dg.RunsFilter(job_name=source.mirror_job_name, statuses=list(IN_PROGRESS_RUN_STATUSES)),
            limit=1,
        )
    )


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
    if mirror_run_active(instance, source):
        return None
    context.log.info(f"{source.name}: full scan of Delta version {version} (the mirror's newest)")
    return dg.RunRequest(
        run_key=f"{source.name}:scan:v{version}",
        job_name=source.checks_job_name,
        asset_check_keys=[scan],
        partition_key=key,
        tags={**source.tags, VERSIONS_TAG: key},
    )


def _listing(delta: DeltaTable, source: DeltaSource, catalog: CatalogConfig) -> DeltaListing:
    """The source's Delta log listed once, and the mirror's status against it (no JVM: pyiceberg)."""
    latest, oldest = delta.latest_version(), delta.oldest_version()
    try:
        mirror = read_mirror_table(catalog, source.iceberg_table)
        status = mirror_status(delta, mirror, source.iceberg_table, latest_version=latest)
    except Exception as err:
        # Informative only (a catalog outage, a foreign commit the mirror run will refuse by name): it
        # must not stop the run requests.
        return DeltaListing(latest, oldest, None, masked(f"{type(err).__name__}: {err}"))
    return DeltaListing(latest, oldest, status)


def build_compacted_deletes_sensor(
    sources: list[DeltaSource],
    catalog: CatalogConfig,
    cleanup_jobs: list[dg.JobDefinition],
    name: str = "compacted_deletes_sensor",
) -> dg.SensorDefinition:
    def cleanup(context: dg.SensorEvaluationContext, source: DeltaSource, cursor: Cursor) -> list[TickItem]:
        request = cleanup_request(source, cursor, catalog)
        if request is None:
            return []
        context.log.info(f"{source.name}: {request.tags['dvmirror/compacted-versions']} dropped DVs")
        return [request]

    return _tables_sensor(
        name=name,
        jobs=cleanup_jobs,
        minimum_interval_seconds=300,
        description="Requests a table's cleanup job when Delta versions mirrored since the sensor first saw "
        "the mirror removed files carrying DVs (OPTIMIZE, REORG PURGE, DV replacement); "
        "cleanup_schedule_<source> also runs it nightly.",
        sources=sources,
        evaluate=cleanup,
    )


def cleanup_request(source: DeltaSource, cursor: Cursor, catalog: CatalogConfig) -> dg.RunRequest | None:
    """A `cleanup_<source>` run when the versions mirrored since the cursor dropped DVs the mirror copied
    (their delete files become garbage once the snapshots referencing them expire). No cursor entry: the
    cursor starts at the mirror's current version (nothing requested)."""
    seen = _number(cursor, source.name)
    delta = source.delta_table(enforce_protocol=False)
    if seen is not None and not delta.has_version_after(seen):
        return None  # the mirror holds no version the log does not
    last = last_mirrored_version(catalog, source.iceberg_table)
    if last is None:
        return None
    if seen is None:
        cursor[source.name] = last
        return None
    start = max(seen + 1, delta.oldest_version())
    if start > last:
        return None
    compacted = [c.version for c in delta.changes(start, last) if drops_dv_files(c)]
    cursor[source.name] = last
    if not compacted:
        return None
    return dg.RunRequest(
        run_key=f"cleanup:{source.name}:v{last}",
        job_name=source.cleanup_job_name,
        run_config=cleanup_run_config(source),
        tags={**source.tags, "dvmirror/compacted-versions": ",".join(str(v) for v in compacted)[:200]},
    )
