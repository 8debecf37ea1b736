"""sync_table(): mirror every Delta version not yet mirrored, each as one Iceberg snapshot.

First the Iceberg table is checked to be this Delta table's mirror, and the log to continue it
(`identity.py`). Then, per version: the Delta log's change (`delta/replay.py`) and the row counts it needs
from storage (read here) → its translation (`plan.py`: the new table, the DV job, the commit request) →
the delete files written (`iceberg/delete_files.py`: Puffin for v3, Parquet for v2, on the driver or in
Spark tasks) → one Iceberg transaction (`iceberg/java.py`), which lands whole or not at all.

A failing version stops the run; the versions mirrored before it stay. Its own delete files are removed
while no commit of it may have landed; once one may have, they stay (a commit that did not land leaves
them as orphans for the cleanup job, `iceberg/maintenance.py`). The next run starts after the last
version the table shows.

Words: to *sync* is the act (the CLI's `dvmirror sync`); the *mirror* is the Iceberg table it keeps.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from dv_assets.mirror.delta.actions import AddFile
from dv_assets.mirror.delta.checkpoint_index import CheckpointIndexes
from dv_assets.mirror.delta.data_files import (
    ReadableStart,
    check_data_files_present,
    first_readable_version,
    record_count,
)
from dv_assets.mirror.delta.paths import PathPolicy
from dv_assets.mirror.delta.replay import DeltaTable, VersionChange
from dv_assets.mirror.errors import InvalidDeletionVectorError, MirrorConflictError, MirrorInputError
from dv_assets.mirror.iceberg.content_files import DeleteFile
from dv_assets.mirror.iceberg.delete_files import run_delete_job
from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.iceberg.layout import MirrorLayout
from dv_assets.mirror.iceberg.mirror_table import (
    URI_LOCATIONS_PROPERTY,
    URI_LOCATIONS_SUMMARY,
    CommitOutcome,
    CommitRequest,
    MirrorTable,
)
from dv_assets.mirror.identity import check_apart, check_same_delta_table, mirror_position
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.locations import table_root_of
from dv_assets.mirror.placement import DEFAULT_EXECUTOR_POLICY, ExecutorPolicy, Placement
from dv_assets.mirror.plan import MirrorState, VersionPlan, files_to_count, plan_version
from dv_assets.mirror.results import SyncResult, VersionResult

DEFAULT_FORMAT_VERSION = 3
# A v2 mirror writes one row per deleted position: a DV claiming more than this many is checked against
# the data file's own row count (its Parquet footer), not only against stats that may over-state it.
LARGE_DV_POSITIONS = 1 << 20

log = logging.getLogger(__name__)


def sync_table(
    spark: SparkSession,
    delta_path: str | Path,
    table_name: str,
    *,
    format_version: int | None = None,
    until_version: int | None = None,
    on_version: Callable[[VersionResult], None] | None = None,
    allowed_roots: Sequence[str] = (),
    executors: ExecutorPolicy = DEFAULT_EXECUTOR_POLICY,
    iceberg: IcebergJava | None = None,
    io: FileIO | None = None,
    stop: Callable[[], bool] | None = None,
) -> SyncResult:
    """Mirror Delta versions (last mirrored, min(until_version, latest)] into Iceberg `table_name`.

    Files the log names must be inside the Delta table's root or one of `allowed_roots`. A version's DVs
    are converted in Spark tasks where `executors` says they pay (never on a local master unless it
    says so), else on the driver.
    `iceberg` and `io` are the seams to Iceberg Java and to storage (defaults: the session's catalog
    and a `FileIO` with its storage properties); tests pass their own to inject faults. `stop` is asked
    before each version: when it answers True the run ends there, between versions (`follow.py`).
    """
    iceberg = iceberg or IcebergJava(spark)
    io = io or FileIO(iceberg.storage_properties())
    delta_root = table_root_of(delta_path)
    paths = PathPolicy.of(delta_root, allowed_roots)
    table = iceberg.load(table_name)
    # The mirror's indexes of Delta checkpoints: a run after one reads a few rows of it, not all.
    indexes = None if table is None else _checkpoint_indexes(table.location, io)
    # One listing of `_delta_log` for the whole run, from the mirror's newest checkpoint on when it can.
    delta = DeltaTable(delta_root, io=io, checkpoint_indexes=indexes).listed_once(_mirrored_version(table))
    latest = delta.latest_version()
    target = latest if until_version is None else min(until_version, latest)
    state, last_mirrored, start, walked = _starting_point(
        iceberg, delta, table_name, table, format_version, latest, target, io, paths
    )
    result = SyncResult(delta_root, table_name, state.format_version, last_mirrored, latest)
    if start > target:
        return result
    if state.first_readable_version is not None:
        result.first_readable_version = start
        result.start_note = start_note(start, delta.oldest_version())
        log.info("%s: %s", table_name, result.start_note)

    _mirror_versions(
        spark,
        iceberg,
        io,
        # A new mirror's first snapshot is the whole state of its first version, wherever that is.
        delta.changes(start, target, whole_first=table is None),
        state,
        result,
        paths=paths,
        executors=executors,
        on_version=on_version,
        stop=stop,
        walked=walked,
    )
    if result.versions:
        # Once the versions are committed, and their files no longer held (a first version's may be a
        # million): the next run's checkpoint indexed, built once per checkpoint.
        last = result.versions[-1].delta_version
        delta.index_checkpoint(indexes or _checkpoint_indexes(state.location, io), last)
    return result


def _checkpoint_indexes(table_location: str, io: FileIO) -> CheckpointIndexes:
    return CheckpointIndexes(MirrorLayout(table_location).checkpoint_index_dir, io)


def _mirror_versions(
    spark: SparkSession,
    iceberg: IcebergJava,
    io: FileIO,
    changes: Iterator[VersionChange],
    state: MirrorState,
    result: SyncResult,
    *,
    paths: PathPolicy,
    executors: ExecutorPolicy,
    on_version: Callable[[VersionResult], None] | None,
    stop: Callable[[], bool] | None,
    walked: ReadableStart | None = None,
) -> None:
    """Mirror each change as one snapshot, in order, into `result`; a failing version raises. `walked`:
    the walk that chose a new mirror's first version, whose answer is that version's presence check."""
    table_name, delta_root = result.iceberg_table, result.delta_table
    for change in changes:
        if stop is not None and stop():
            break
        began = time.monotonic()
        check_same_delta_table(change, state.delta_table_id, delta_root)
        with _cleaned_up_on_failure(io, state, change.version) as attempt:
            first = walked if walked is not None and change.version == walked.version else None
            counts = _row_counts(change, state.format_version, paths, io, first)
            plan = plan_version(change, state, counts, paths)
            dv_began = time.monotonic()
            converted_on, placement = run_delete_job(spark, plan.delete_job, io, executors, attempt.written)
            dv_seconds = time.monotonic() - dv_began
            request = plan.commit_request(attempt.written)
            if plan.new_table is not None:  # created only once its first version is known to be mirrorable
                iceberg.create(table_name, plan.new_table, state.location)
            attempt.commit_attempted = True
            commit_began = time.monotonic()
            outcome = iceberg.commit(table_name, request)
            commit_seconds = time.monotonic() - commit_began
        state = state.after(change.metadata, request, outcome)
        version_result = _version_result(
            plan,
            request,
            outcome,
            converted_on,
            placement,
            executors,
            began=began,
            dv_seconds=dv_seconds,
            commit_seconds=commit_seconds,
        )
        result.versions.append(version_result)
        if on_version is not None:
            on_version(version_result)


def _version_result(
    plan: VersionPlan,
    request: CommitRequest,
    outcome: CommitOutcome,
    converted_on: str,
    placement: Placement,
    executors: ExecutorPolicy,
    *,
    began: float,
    dv_seconds: float,
    commit_seconds: float,
) -> VersionResult:
    tasks = plan.delete_job.tasks
    return VersionResult(
        delta_version=request.delta_version,
        snapshot_id=outcome.snapshot_id,
        operation=plan.change.operation,
        data_files_added=len(request.add_data_files),
        data_files_removed=len(request.remove_data_files),
        dvs_written=len(tasks),
        deletes_replaced=len(request.remove_delete_files),
        rows_deleted_by_new_dvs=sum(task.cardinality for task in tasks),
        delete_files=sorted({f.path for f in request.add_delete_files}),
        bytes_written=sum({f.path: f.file_size_in_bytes for f in request.add_delete_files}.values()),
        seconds=round(time.monotonic() - began, 3),
        dvs_converted_on=converted_on,
        dv_placement=placement.reason,
        executor_threshold=executors.describe(),
        dv_seconds=round(dv_seconds, 6),
        commit_seconds=round(commit_seconds, 6),
        delta_commit_ms=plan.change.commit_info.commit_ms,
    )


def _mirrored_version(table: MirrorTable | None) -> int | None:
    """The Delta version the mirror claims to show, only to bound the log's listing: `mirror_position`
    checks the claim, and refuses a table that is no mirror with its own message (None meanwhile)."""
    if table is None:
        return None
    try:
        return table.last_mirrored_version
    except MirrorInputError:
        return None


def _starting_point(
    iceberg: IcebergJava,
    delta: DeltaTable,
    table_name: str,
    table: MirrorTable | None,
    format_version: int | None,
    latest: int,
    target: int,
    io: FileIO,
    paths: PathPolicy,
) -> tuple[MirrorState, int | None, int, ReadableStart | None]:
    """The mirror's state before the run, the Delta version it shows (None: none yet), the first
    version to mirror, once the Iceberg table (if any) is known to be the Delta table's mirror, and the
    walk that chose it. A first sync starts at the first version Delta can read (`_first_version`)."""
    delta_root = delta.table_root
    if table is None:
        fmt = format_version or DEFAULT_FORMAT_VERSION
        location = iceberg.default_location(table_name)
        check_apart(MirrorState.new(delta_root, location, fmt).location, delta_root, table_name)
        walked = _first_version(delta, latest, target, io, paths)
        start = delta.oldest_version() if walked is None else walked.version
        assert start is not None
        state = MirrorState.new(delta_root, location, fmt, start if 0 < start <= target else None)
        return state, None, start, walked
    last_mirrored, start = mirror_position(delta, table, format_version, latest, target)
    # The current delete files are read only when there is a version to mirror, and so are the data files
    # an older mirror recorded as bare paths, unless the table says it has none and its current snapshot
    # was committed by code that knows (older code run again after the mark leaves the summary key out).
    deletes, recorded_paths = {}, None
    if start <= target:
        deletes = iceberg.delete_files_by_data_file(table_name, table.current_snapshot_id)
        current = table.current_snapshot
        if (
            table.properties.get(URI_LOCATIONS_PROPERTY) != "true"
            or current is None
            or current.summary.get(URI_LOCATIONS_SUMMARY) != "true"
        ):
            recorded_paths = iceberg.data_files_not_named_by_uri(table_name, table.current_snapshot_id)
    state = MirrorState.of(table, delta_root, deletes, recorded_paths)
    return state, last_mirrored, start, None


def _first_version(
    delta: DeltaTable, latest: int, target: int, io: FileIO, paths: PathPolicy
) -> ReadableStart | None:
    """A new mirror's first version: the first one from the oldest the log holds whose every live data
    file and DV file is still there (`first_readable_version`); None when the oldest is past `target`
    (nothing to mirror). Refuses when no version up to `target` is readable."""
    oldest = delta.oldest_version()
    if oldest > target:
        return None
    readable: ReadableStart = first_readable_version(delta, oldest, target, io, paths)
    if readable.version is not None:
        return readable
    later = f"; a version after {target} may be: sync up to a later one" if target < latest else ""
    raise MirrorInputError(
        f"no Delta version from {oldest} (the oldest the log holds) to {target} is readable: each needs a "
        f"data or DV file that no longer exists (removed by VACUUM?), version {readable.unreadable} this "
        f"one; nothing was mirrored{later}",
        table=delta.table_root,
        version=readable.unreadable,
        file=readable.missing,
    )


def start_note(first: int, oldest: int) -> str:
    """The one line of a first sync that starts at version `first` > 0, the log's oldest being `oldest`."""
    if first == 1:
        versions, their = "version 0 is", "its"
    else:
        versions, their = f"versions 0..{first - 1} are", "their"
    why = f"{their} data files were removed" if first > oldest else f"the log no longer holds {their} commits"
    return f"mirrored from Delta version {first}: {versions} no longer readable in Delta ({why})"


def _row_counts(
    change: VersionChange, fmt: int, paths: PathPolicy, io: FileIO, walked: ReadableStart | None = None
) -> dict[str, int]:
    """What the version's translation needs from storage, checked before anything is read: every data file
    it adds is inside the allowed roots and present at the size the log says (`walked`: as the walk that
    chose this first version found them); then the row count of each file `files_to_count` names."""
    for add in change.added:
        paths.check(add.location, what="data file")
    check_data_files_present(change.added, io, walked=walked)
    return {add.location: _rows(add, fmt, io) for add in files_to_count(change)}


def _rows(add: AddFile, fmt: int, io: FileIO) -> int:
    """The data file's row count (its stats' numRecords, else its Parquet footer): the bound every DV
    position is checked against."""
    rows = record_count(add, io)
    dv = add.deletion_vector
    if fmt < 3 and dv is not None and dv.cardinality > LARGE_DV_POSITIONS:
        in_file = io.parquet_row_count(add.location)
        if in_file != rows:
            raise InvalidDeletionVectorError(
                f"the data file has {in_file} rows but its stats say {rows}; its DV of {dv.cardinality} "
                "positions cannot be checked",
                file=add.location,
            )
    return rows


@dataclass
class _Attempt:
    """One version's attempt: the delete files it wrote so far, and whether its commit was attempted."""

    written: list[DeleteFile] = field(default_factory=list)
    commit_attempted: bool = False


@contextmanager
def _cleaned_up_on_failure(io: FileIO, state: MirrorState, version: int) -> Iterator[_Attempt]:
    """The one cleanup of a failing version. Its own delete files (mirror-owned ones only) are removed
    while no commit of it may have landed: before the commit is attempted, or when it failed with
    MirrorConflictError, which commits nothing. Otherwise they stay: a commit that landed references
    them. A MirrorInputError is re-raised naming the Delta table and the version."""
    attempt = _Attempt()
    layout = MirrorLayout(state.location)
    try:
        yield attempt
    except BaseException as err:
        if not attempt.commit_attempted or isinstance(err, MirrorConflictError):
            io.delete_quietly(f.path for f in attempt.written if layout.is_owned(f.path))
        if isinstance(err, MirrorInputError):
            raise err.at(table=state.delta_root, version=version) from None
        raise
