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

import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from dv_assets.mirror.delta.actions import AddFile
from dv_assets.mirror.delta.checkpoint_index import CheckpointIndexes
from dv_assets.mirror.delta.data_files import (
    DataFileMissingError,
    ReadableStart,
    check_data_files_present,
    find_readable_start,
    record_count,
)
from dv_assets.mirror.delta.paths import PathPolicy
from dv_assets.mirror.delta.replay import DeltaTable, VersionChange, WholeState
from dv_assets.mirror.dv.reader import resolve_dv_location
from dv_assets.mirror.errors import InvalidDeletionVectorError, MirrorConflictError, MirrorInputError
from dv_assets.mirror.iceberg.content_file_lines import SpooledDataFiles, lines_file, write_data_files
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
from dv_assets.mirror.io import FileIO, FolderListing
from dv_assets.mirror.locations import TableLocation
from dv_assets.mirror.placement import DEFAULT_EXECUTOR_POLICY, ExecutorPolicy, Placement
from dv_assets.mirror.plan import DataFiles, MirrorState, VersionPlan, plan_version
from dv_assets.mirror.results import SyncResult, VersionResult
from dv_assets.mirror.vacuum import VACUUM_END, VacuumFollowed, follow_vacuum, vacuum_ahead, vacuum_to_follow

DEFAULT_FORMAT_VERSION = 3
# A v2 mirror writes one row per deleted position: a DV claiming more than this many is checked against
# the data file's own row count (its Parquet footer), not only against stats that may over-state it.
LARGE_DV_POSITIONS = 1 << 20

log = logging.getLogger(__name__)


def sync_table(
    spark: SparkSession,
    delta_path: str | Path | TableLocation,
    table_name: str,
    *,
    format_version: int | None = None,
    until_version: int | None = None,
    on_version: Callable[[VersionResult], None] | None = None,
    allowed_roots: Sequence[str | TableLocation] = (),
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
    location = TableLocation.of(delta_path)  # the edge's TableLocation as it is; a string typed here
    delta_root = location.uri
    paths = PathPolicy.of(location, allowed_roots)
    table = iceberg.load(table_name)
    # The mirror's indexes of Delta checkpoints: a run after one reads a few rows of it, not all.
    indexes = None if table is None else _checkpoint_indexes(table.location, io)
    # One listing of `_delta_log` for the whole run, from the mirror's newest checkpoint on when it can.
    delta = DeltaTable(location, io=io, checkpoint_indexes=indexes).listed_once(_mirrored_version(table))
    latest = delta.latest_version()
    target = latest if until_version is None else min(until_version, latest)
    state, last_mirrored, start = _starting_point(iceberg, delta, table_name, table, format_version, target)
    result = SyncResult(delta_root, table_name, state.format_version, last_mirrored, latest)
    if start > target:
        result.vacuum = _follow_vacuum(iceberg, delta, result, io, target, table)
        return result
    mirror = functools.partial(
        _mirror_versions,
        spark,
        iceberg,
        io,
        paths=paths,
        executors=executors,
        on_version=on_version,
        stop=stop,
    )
    try:
        mirror(_changes(delta, start, target, new_mirror=table is None), state, result)
    except _StartUnreadable:
        start = _mirror_from_first_readable(mirror, delta, state, result, latest, target, io, paths)
    if table is None and start > 0:
        _note_first_readable(result, start, delta.oldest_version())
    if result.versions:
        _index_checkpoint_of(delta, result, indexes or _checkpoint_indexes(state.location, io))
    result.vacuum = _follow_vacuum(iceberg, delta, result, io, target, table)
    return result


def _mirror_from_first_readable(
    mirror: Callable[..., None],
    delta: DeltaTable,
    state: MirrorState,
    result: SyncResult,
    latest: int,
    target: int,
    io: FileIO,
    paths: PathPolicy,
) -> int:
    """A new mirror whose oldest version's files are not all there (VACUUM removed some), mirrored from
    the first version whose files all are, found by walking the log, whose answer stands for that
    version's presence check; that version."""
    walked = _first_version(delta, latest, target, io, paths)
    start = walked.version
    assert start is not None  # `_first_version` refuses when no version is readable
    state = MirrorState.new(delta.table_root, state.location, state.format_version, start or None)
    mirror(_changes(delta, start, target, new_mirror=True), state, result, walked=walked)
    return start


def _index_checkpoint_of(delta: DeltaTable, result: SyncResult, indexes: CheckpointIndexes) -> None:
    """The next run's checkpoint indexed (built once per checkpoint): once the run's versions are
    committed, and their files no longer held (a first version's may be a million)."""
    delta.index_checkpoint(indexes, result.versions[-1].delta_version)


def _note_first_readable(result: SyncResult, start: int, oldest: int) -> None:
    """A new mirror started after the log's first version: the result says where, and why."""
    result.first_readable_version = start
    result.start_note = start_note(start, oldest)
    log.info("%s: %s", result.iceberg_table, result.start_note)


def _follow_vacuum(
    iceberg: IcebergJava,
    delta: DeltaTable,
    result: SyncResult,
    io: FileIO,
    target: int,
    table: MirrorTable | None,
) -> VacuumFollowed | None:
    """Delta's VACUUM followed (`vacuum.py`) when there is one to follow: a `VACUUM END` this run mirrored,
    one the mirror held (as read before the run) and had not followed, or one after the run's target (the
    commitInfo of each commit after it). Otherwise nothing is read: no table load in a follow pass."""
    ahead = None
    if target < result.latest_delta_version:
        ahead = vacuum_ahead(delta, target, result.latest_delta_version)
    if (
        ahead is None
        and (table is None or vacuum_to_follow(table) is None)
        and not any(v.operation == VACUUM_END for v in result.versions)
    ):
        return None
    return follow_vacuum(iceberg, result.iceberg_table, delta.table_root, io, vacuum_version=ahead)


def _checkpoint_indexes(table_location: str, io: FileIO) -> CheckpointIndexes:
    return CheckpointIndexes(MirrorLayout(table_location).checkpoint_index_dir, io)


def _changes(
    delta: DeltaTable, start: int, end: int, *, new_mirror: bool
) -> Iterator[VersionChange | WholeState]:
    """The versions start..end to mirror; a new mirror's first one is its whole state, streamed."""
    if not new_mirror:
        yield from delta.changes(start, end)
        return
    yield delta.whole_state(start)
    if start < end:
        yield from delta.changes(start + 1, end)


class _StartUnreadable(Exception):
    """A new mirror's first version has a data or DV file that is gone, and no walk vouched for it."""


def _mirror_versions(
    spark: SparkSession,
    iceberg: IcebergJava,
    io: FileIO,
    changes: Iterator[VersionChange | WholeState],
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
    the walk that chose a new mirror's first version, whose answer is that version's presence check
    (without it, a file of that version found gone raises _StartUnreadable)."""
    table_name, delta_root = result.iceberg_table, result.delta_table
    for change in changes:
        if stop is not None and stop():
            break
        began = time.monotonic()
        version_change = change.change if isinstance(change, WholeState) else change
        check_same_delta_table(version_change, state.delta_table_id, delta_root)
        with ExitStack() as stack:
            attempt = stack.enter_context(_cleaned_up_on_failure(io, state, version_change.version))
            if isinstance(change, WholeState):
                plan = _whole_state_plan(change, state, paths, io, walked, stack.enter_context(lines_file()))
            else:
                plan = plan_version(
                    change, state, _row_counts(change, state.format_version, paths, io), paths
                )
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
        state = state.after(version_change.metadata, request, outcome)
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


def _whole_state_plan(
    whole: WholeState,
    state: MirrorState,
    paths: PathPolicy,
    io: FileIO,
    walked: ReadableStart | None,
    spool: Path,
) -> VersionPlan:
    """A new mirror's first version in one pass over its files, a batch at a time: each file checked as
    `_row_counts` checks a version's (allowed root, present at its size, its row count) and its Iceberg
    entry written to `spool` as a line (`DataFiles`: its partition values checked); of the files, only
    those with a DV are kept, for the DV job. Ten million files are never held at once. Without `walked`,
    a file of the version found gone (its data file, or its DV's file) raises _StartUnreadable."""
    change = whole.change
    schema = plan_version(change, state, {}, paths).schema  # the new table's: what the entries are made of
    listing = None if walked is not None else io.listing(state.delta_root)
    with_dvs, dv_rows, count = [], {}, 0
    with spool.open("w", encoding="utf-8", buffering=1 << 20) as out:
        for batch in whole.batches():
            try:
                rows = _checked_row_counts(batch, state.format_version, paths, io, walked, listing)
            except DataFileMissingError:
                if walked is None:
                    raise _StartUnreadable from None
                raise
            count += write_data_files(out, DataFiles.of(batch, state, change.metadata, schema, rows))
            for add in batch:
                if add.deletion_vector is not None:
                    with_dvs.append(add.without_stats())
                    dv_rows[add.location] = rows[add.location]
    if walked is None and _dv_files_gone(with_dvs, state.delta_root, paths, io, listing):
        raise _StartUnreadable
    plan = plan_version(dataclasses.replace(change, added=with_dvs), state, dv_rows, paths)
    return dataclasses.replace(plan, data_files=SpooledDataFiles(spool, count))


def _dv_files_gone(
    with_dvs: list[AddFile], delta_root: str, paths: PathPolicy, io: FileIO, listing: FolderListing | None
) -> bool:
    """Whether a DV file of these data files is gone (checked against `paths` first)."""
    dv_files: set[str] = set()
    for add in with_dvs:
        dv = add.deletion_vector
        assert dv is not None
        location = resolve_dv_location(delta_root, dv.storage_type, dv.path_or_inline_dv)
        if location is not None:
            dv_files.add(location)
    for location in dv_files:
        paths.check(location, what="deletion vector file")
    return None in io.file_sizes(sorted(dv_files), listing=listing)


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
    target: int,
) -> tuple[MirrorState, int | None, int]:
    """The mirror's state before the run, the Delta version it shows (None: none yet), and the first
    version to mirror, once the Iceberg table (if any) is known to be the Delta table's mirror. A new
    mirror starts at the oldest version the log holds; when that one's files are not all there, the sync
    walks on to the first readable one (`_first_version`)."""
    delta_root = delta.table_root
    if table is None:
        fmt = format_version or DEFAULT_FORMAT_VERSION
        location = iceberg.default_location(table_name)
        check_apart(MirrorState.new(delta_root, location, fmt).location, delta_root, table_name)
        start = delta.oldest_version()
        return MirrorState.new(delta_root, location, fmt, start if 0 < start <= target else None), None, start
    last_mirrored, start = mirror_position(delta, table, format_version, delta.latest_version(), target)
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
    return state, last_mirrored, start


def _first_version(
    delta: DeltaTable, latest: int, target: int, io: FileIO, paths: PathPolicy
) -> ReadableStart:
    """A new mirror's first version when the oldest one the log holds is not readable: the first one
    from there whose every live data file and DV file is still there (`find_readable_start`).
    Refuses when no version up to `target` is readable."""
    oldest = delta.oldest_version()
    readable: ReadableStart = find_readable_start(delta, oldest, target, io, paths)
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


def _row_counts(change: VersionChange, fmt: int, paths: PathPolicy, io: FileIO) -> dict[str, int]:
    """What the version's translation needs from storage (`_checked_row_counts` of the files it adds),
    and the row count of each file it gives a new DV (the bound its positions are checked against)."""
    counts = _checked_row_counts(change.added, fmt, paths, io)
    for _before, after in change.dv_changed:
        if after.deletion_vector is not None:
            counts[after.location] = _rows(after, fmt, io)
    return counts


def _checked_row_counts(
    adds: Sequence[AddFile],
    fmt: int,
    paths: PathPolicy,
    io: FileIO,
    walked: ReadableStart | None = None,
    listing: FolderListing | None = None,
) -> dict[str, int]:
    """Every file of `adds` checked before anything is read: inside the allowed roots and present at the
    size the log says (`walked`: as the walk that chose this first version found them; `listing`: as it
    lists them); then the row count of each, its Iceberg entry's."""
    for add in adds:
        paths.check(add.location, what="data file")
    check_data_files_present(adds, io, walked=walked, listing=listing)
    return {add.location: _rows(add, fmt, io) for add in adds}


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
