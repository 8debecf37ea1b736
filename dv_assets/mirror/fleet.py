"""run_fleet(): mirror a set of Delta tables in one process and one Spark session, once or continuously
(`dvmirror sync --tables FILE [--follow]`).

Each table is mirrored by the passes `sync_table` makes for one table (every check of a one-shot sync),
scheduled here:

* **isolated**: a table's refusal (MirrorInputError), lost race (MirrorConflictError) or error ends that
  table's pass only, reported through `FleetListener.failed`, and the other tables go on. Whether the
  table is tried again is `follow.py`'s one policy: a transient error is retried with the table's own
  backoff (1 s doubling to 60 s, reset by its next pass that succeeds; once, a few times), a first lost
  race at once; a refusal, a second lost race in a row or any other error ends the table. The run ends
  when every table has ended (following: or when stopped); a Spark session that is gone ends it at once
  (`FleetSessionLost`). `dvmirror sync --follow` of one table is a fleet of one.
* **fair**: of the tables due (a new commit seen, a retry whose time came), the most behind goes first:
  the one whose oldest commit not yet mirrored is the oldest (the commit file's modification time; a table
  whose position is not known yet first). A turn mirrors at most `versions_per_turn` versions, then the
  table queues again behind any that waited longer: a table with a long backlog cannot starve the others.
* **bounded**: at most `concurrency` passes in flight (threads sharing the session, each with its own
  Iceberg Java handle; 1: one after the other); per table a fixed-size record (position, backoff,
  counters), nothing that grows with rounds or versions (a pass's results are handed to the listener
  and dropped).
* **polled cheaply**: while following, the tables not due are polled every `interval` seconds with one
  poll for all of them (whether each next commit file exists, then the last mirrored one of each, `LogWatch`).
* **stoppable**: `stop` (SIGTERM/SIGINT through `follow.stop_on_signals`) is asked between versions; the
  versions in flight finish, their commit and outcome included; nothing half-written is left.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from dv_assets.mirror.errors import MirrorConflictError, MirrorInputError, worst_exit_code
from dv_assets.mirror.follow import (
    MAX_CONFLICTS_IN_A_ROW,
    ONCE_ATTEMPTS,
    Backoff,
    CommitFile,
    LogWatch,
    exit_code_of,
    is_transient,
)
from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.placement import DEFAULT_EXECUTOR_POLICY, ExecutorPolicy
from dv_assets.mirror.results import SyncResult, VersionResult
from dv_assets.mirror.sync import sync_table
from dv_assets.mirror.table_spec import FleetTable

# Versions a table mirrors in one turn before the others get theirs.
DEFAULT_VERSIONS_PER_TURN = 20
# How often the scheduler looks at the stop flag while passes are in flight.
_WAKE_SECONDS = 0.5


class FleetListener:
    """What the run reports; called from the pass's thread (`version`) or the scheduler's (the others)."""

    def version(self, table: FleetTable, result: VersionResult, lag_seconds: float | None) -> None:
        """A version committed."""

    def caught_up(self, table: FleetTable, result: SyncResult, first: bool, versions: int) -> None:
        """A pass reached Delta's latest version (`first`: the table's first time in this run; `versions`:
        how many the run mirrored of it so far)."""

    def failed(self, table: FleetTable, code: int, error: BaseException, retry_in: float | None) -> None:
        """A pass failed: `code` the exit code it stands for; `retry_in` seconds, None: not retried."""


class FleetSessionLost(RuntimeError):
    """The Spark session no longer answers: no table can be mirrored in this process."""


@dataclass
class TableState:
    """A table's fixed-size record in the run."""

    table: FleetTable
    delta_root: str
    watch: LogWatch
    backoff: Backoff
    mirrored_version: int | None = None
    last_commit: CommitFile | None = None
    due: bool = True
    done: bool = False  # once: nothing more to do for this table
    pending_since: float = -math.inf  # when its oldest commit not yet mirrored was written (epoch s)
    not_before: float = 0.0  # monotonic: no pass before (a backoff)
    last_turn: float = -math.inf  # monotonic: when its last pass began (ties go to the longest waiting)
    conflicts: int = 0  # lost races in a row
    attempts: int = 0  # failed passes in a row
    announced: bool = False
    outcome: int | None = None  # exit code of its last pass (None: none finished)
    versions_mirrored: int = 0

    @property
    def code(self) -> int:
        return self.outcome or 0


@dataclass
class FleetResult:
    tables: list[TableState]
    stopped: bool  # by `stop`
    # The one Spark session every pass ran in: its application id and its JVM's process id.
    spark_application: str
    jvm_pid: int

    @property
    def exit_code(self) -> int:
        return worst_exit_code([t.code for t in self.tables])


class _Turn:
    """One pass of one table, run in a worker thread."""

    def __init__(self, run: _Run, state: TableState) -> None:
        self.state = state
        self.count = 0
        self._run = run

    def __call__(self) -> SyncResult:
        run, state, table = self._run, self.state, self.state.table

        def committed(result: VersionResult) -> None:
            self.count += 1
            state.mirrored_version = result.delta_version
            state.versions_mirrored += 1
            committed_ms = result.delta_commit_ms
            lag = None if committed_ms is None else max(0.0, time.time() - committed_ms / 1000)
            run.listener.version(table, result, lag)

        synced = sync_table(
            run.spark,
            table.location,
            table.iceberg_table,
            format_version=table.format_version,
            until_version=table.until_version,
            allowed_roots=table.allowed_roots,
            executors=run.executors,
            on_version=committed,
            iceberg=run.iceberg(),
            io=run.io,
            stop=lambda: run.stop.is_set() or self.count >= run.versions_per_turn,
        )
        if run.after_pass is not None and _reached(table, synced) and not run.stop.is_set():
            run.after_pass(table, run.iceberg())  # its errors are the pass's
        return synced


@dataclass
class _Run:
    spark: SparkSession
    io: FileIO
    listener: FleetListener
    stop: threading.Event
    follow: bool
    interval: float
    concurrency: int
    versions_per_turn: int
    executors: ExecutorPolicy
    # Called in the pass's thread after a pass that reached Delta's latest version (the CLI applies the
    # table's retention there: `RetentionKeeper`).
    after_pass: Callable[[FleetTable, IcebergJava], None] | None = None
    # A new Iceberg Java handle (tests inject faults through it); None: `IcebergJava(spark)`.
    new_iceberg: Callable[[], IcebergJava] | None = None
    clock: Callable[[], float] = time.monotonic
    _local: threading.local = field(default_factory=threading.local)

    def iceberg(self) -> IcebergJava:
        """This thread's Iceberg Java handle (it stages a transaction's files: one per thread)."""
        handle = getattr(self._local, "iceberg", None)
        if handle is None:
            made = self.new_iceberg() if self.new_iceberg is not None else IcebergJava(self.spark)
            handle = self._local.iceberg = made
        return handle


def run_fleet(
    spark: SparkSession,
    tables: Sequence[FleetTable],
    *,
    stop: threading.Event,
    listener: FleetListener,
    follow: bool = False,
    interval: float = 5.0,
    concurrency: int = 1,
    versions_per_turn: int = DEFAULT_VERSIONS_PER_TURN,
    executors: ExecutorPolicy = DEFAULT_EXECUTOR_POLICY,
    io: FileIO | None = None,
    after_pass: Callable[[FleetTable, IcebergJava], None] | None = None,
    iceberg: Callable[[], IcebergJava] | None = None,
    backoff: Callable[[], Backoff] = Backoff,
) -> FleetResult:
    """Mirror every table of `tables` up to its latest Delta version (once), or keep doing it until `stop`
    is set (`follow`); the run ends sooner when every table has ended (see the module docstring). Raises
    FleetSessionLost when the Spark session is gone; every other failure is the table's own.
    `iceberg` makes each pass thread's Iceberg Java handle, `backoff` each table's (tests)."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if len(tables) == 1:
        versions_per_turn = sys.maxsize  # turns are for the others' sake: a lone table's pass goes on
    io = io or FileIO(IcebergJava(spark).storage_properties())
    run = _Run(
        spark,
        io,
        listener,
        stop,
        follow,
        interval,
        concurrency,
        versions_per_turn,
        executors,
        after_pass,
        new_iceberg=iceberg,
    )
    states = []
    for table in tables:
        root = table.location.uri
        watch = LogWatch(root, io)
        states.append(TableState(table, root, watch, backoff(), mirrored_version=table.mirrored_hint))
    _queue_times(states, io)
    application = str(spark.sparkContext.applicationId)
    jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
    in_flight: dict[Future[SyncResult], _Turn] = {}
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="dvmirror-table") as pool:
        try:
            _schedule(run, states, pool, in_flight)
            stopped = stop.is_set()
        finally:
            _drain(run, in_flight)
    return FleetResult(states, stopped=stopped, spark_application=application, jvm_pid=jvm_pid)


def _schedule(
    run: _Run, states: list[TableState], pool: ThreadPoolExecutor, in_flight: dict[Future[SyncResult], _Turn]
) -> None:
    """The run's loop: poll, start the turns due (most behind first), settle those that end; until every
    table has ended or `stop` is set."""
    next_poll = run.clock() + run.interval
    while not run.stop.is_set():
        now = run.clock()
        busy = {id(t.state) for t in in_flight.values()}
        if run.follow and now >= next_poll:
            _poll(run, [s for s in states if not s.due and not s.done and id(s) not in busy])
            next_poll = now + run.interval
        ready = [s for s in states if s.due and not s.done and id(s) not in busy and s.not_before <= now]
        ready.sort(key=lambda s: (s.pending_since, s.last_turn))
        for state in ready[: run.concurrency - len(in_flight)]:
            state.last_turn = now
            turn = _Turn(run, state)
            in_flight[pool.submit(turn)] = turn
        if not in_flight and all(s.done for s in states):
            return
        # Woken by a pass ending, the stop flag, the next retry or poll due, whichever comes first.
        waits = [s.not_before - now for s in states if s.due and not s.done and s.not_before > now]
        if run.follow:
            waits.append(next_poll - now)
        timeout = max(0.0, min([*waits, _WAKE_SECONDS]))
        if in_flight:
            finished, _ = wait(list(in_flight), timeout=timeout, return_when=FIRST_COMPLETED)
        else:
            run.stop.wait(timeout)
            finished = set()
        for future in finished:
            _settle(run, in_flight.pop(future), future)


def _drain(run: _Run, in_flight: dict[Future[SyncResult], _Turn]) -> None:
    """The passes still in flight when the run ends: each ends after its current version, and is settled."""
    run.stop.set()
    for future in list(in_flight):
        future.exception()  # waits
    try:
        for future, turn in in_flight.items():
            _settle(run, turn, future)
    except FleetSessionLost:
        pass  # already ending


def _queue_times(states: Sequence[TableState], io: FileIO) -> None:
    """Each table's place in the first round: when its oldest commit not yet mirrored was written, from
    one stat call for all tables whose mirrored version is known (the others go first)."""
    known = [s for s in states if s.mirrored_version is not None]
    paths = [s.watch.commit_file(s.mirrored_version + 1) for s in known]  # type: ignore[operator]
    try:
        infos = io.stat_many(paths)
    except OSError:  # the storage did not answer: the order is only an order (passes will ask again)
        return
    for state, info in zip(known, infos, strict=True):
        state.pending_since = info.mtime_s if info.exists and info.mtime_s is not None else -math.inf


def _poll(run: _Run, idle: Sequence[TableState]) -> None:
    """Whether each idle table's next commit file exists (all asked at once), then one stat call for the
    last mirrored commit of those without one and for the new commits found (when they were written);
    those that changed become due, queued by when their next commit was written."""
    io = run.io
    watched = [s for s in idle if s.mirrored_version is not None]
    for state in idle:
        if state.mirrored_version is None:
            state.due = True
    if not watched:
        return
    next_paths = [s.watch.commit_file(s.mirrored_version + 1) for s in watched]  # type: ignore[operator]
    try:
        exists = io.exists_many(next_paths)
        # For a table with a new commit: the commit's stat (its time); else: the last mirrored commit's.
        asked = [
            next_paths[i] if found else s.watch.commit_file(s.mirrored_version)  # type: ignore[arg-type]
            for i, (s, found) in enumerate(zip(watched, exists, strict=True))
        ]
        infos = io.stat_many(asked)
    except OSError as err:  # the storage did not answer the poll: the polled tables' failure
        for state in watched:
            _failed(run, state, err)
        return
    for state, found, info in zip(watched, exists, infos, strict=True):
        if LogWatch.changed_from(found, None if found else info, state.last_commit):
            state.due = True
            written = info.mtime_s if found and info.exists else None
            state.pending_since = -math.inf if written is None else written


def _settle(run: _Run, turn: _Turn, future: Future[SyncResult]) -> None:
    """The outcome of a finished pass, in the scheduler's thread: the table's record and its report."""
    state, table = turn.state, turn.state.table
    err = future.exception()
    if err is None:
        synced = future.result()
        last, target = _last_mirrored(synced), _target(table, synced)
        if not _reached(table, synced) and (run.stop.is_set() or turn.count >= run.versions_per_turn):
            # Ended between two versions: stopped (the mirror is where the pass ended), or its turn is up,
            # not its backlog (queued again by its oldest commit not yet mirrored).
            state.mirrored_version = last
            if not run.stop.is_set():
                _succeeded(state)
                _queue_times([state], run.io)
            return
        _succeeded(state)
        state.mirrored_version = target
        try:
            state.last_commit = state.watch.last_commit(state.mirrored_version)
        except OSError:  # not known: the next poll finds it changed, and a pass asks the storage again
            state.last_commit = None
        state.due = False
        state.done = not run.follow
        first, state.announced = not state.announced, True
        run.listener.caught_up(table, synced, first, state.versions_mirrored)
        return
    _failed(run, state, err)


def _last_mirrored(synced: SyncResult) -> int | None:
    return synced.versions[-1].delta_version if synced.versions else synced.previously_mirrored


def _target(table: FleetTable, synced: SyncResult) -> int:
    """The version a pass of `table` is done at: Delta's latest, or the run's `until_version`."""
    latest = synced.latest_delta_version
    return latest if table.until_version is None else min(table.until_version, latest)


def _reached(table: FleetTable, synced: SyncResult) -> bool:
    """Whether the pass left the mirror at its target or past it (an `until_version` below the mirror's)."""
    last = _last_mirrored(synced)
    return last is not None and last >= _target(table, synced)


def _failed(run: _Run, state: TableState, err: BaseException) -> None:
    """A table's pass (or poll) failed with `err`: its record, whether and when it is tried again
    (`follow.py`'s policy, `_retry_in`), its report."""
    table = state.table
    if run.stop.is_set() and not isinstance(err, MirrorInputError | MirrorConflictError):
        return  # an error while stopping (e.g. the session shutting down) is no verdict on the table
    code = exit_code_of(err)
    state.outcome = code
    of_the_table = isinstance(err, MirrorInputError | MirrorConflictError) or is_transient(err)
    if not of_the_table and not _session_alive(run.spark):
        run.listener.failed(table, code, err, None)
        raise FleetSessionLost(f"the Spark session is gone: {type(err).__name__}: {err}") from err
    retry = _retry_in(run, state, err)
    if retry is None:
        state.done = True
    else:
        state.due = True
        state.not_before = run.clock() + retry
    run.listener.failed(table, code, err, retry)


def _retry_in(run: _Run, state: TableState, err: BaseException) -> float | None:
    """Seconds until the table's next pass after `err`; None: the table has ended (`follow.py`'s policy)."""
    if isinstance(err, MirrorConflictError):
        state.conflicts += 1
        return 0.0 if state.conflicts < MAX_CONFLICTS_IN_A_ROW else None
    if is_transient(err):
        state.attempts += 1
        return state.backoff.next_delay() if run.follow or state.attempts < ONCE_ATTEMPTS else None
    return None  # a refusal, a storage's definite answer, a bug: its verdict stands


def _succeeded(state: TableState) -> None:
    state.conflicts = state.attempts = 0
    state.backoff.reset()
    state.outcome = 0
    state.not_before = 0.0


def _session_alive(spark: SparkSession) -> bool:
    """Whether the session's JVM still answers and its context is not stopped."""
    try:
        return not spark.sparkContext._jsc.sc().isStopped()
    except Exception:
        return False
