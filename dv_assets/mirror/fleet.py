"""run_fleet(): mirror a set of Delta tables in one process and one Spark session, once or continuously
(`dvmirror sync --tables FILE [--follow]`).

Each table is mirrored by the passes `sync_table` makes for one table (every check of a one-shot sync),
scheduled here:

* **isolated**: a table's refusal (MirrorInputError), lost race (MirrorConflictError) or error ends that
  table's pass only, reported through `FleetListener.failed`; once, a refused table is done (its
  verdict stands), a transient error is retried a few times; while following, every failure is retried
  with the table's own backoff (1 s doubling to 60 s, reset by its next pass that succeeds), and the
  other tables go on. Only a Spark session that is gone ends the run (`FleetSessionLost`).
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
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from dv_assets.mirror.errors import (
    EXIT_BAD_INPUT,
    EXIT_CONFLICT,
    EXIT_INTERNAL_ERROR,
    MirrorConflictError,
    MirrorInputError,
    worst_exit_code,
)
from dv_assets.mirror.follow import MAX_CONFLICTS_IN_A_ROW, Backoff, CommitFile, LogWatch, is_transient
from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.placement import DEFAULT_EXECUTOR_POLICY, ExecutorPolicy
from dv_assets.mirror.results import SyncResult, VersionResult
from dv_assets.mirror.sync import sync_table
from dv_assets.mirror.table_spec import FleetTable

# Versions a table mirrors in one turn before the others get theirs.
DEFAULT_VERSIONS_PER_TURN = 20
# Attempts of a table whose pass fails with a transient error, in a once run.
ONCE_ATTEMPTS = 3
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
    backoff: Backoff = field(default_factory=Backoff)
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
            allowed_roots=table.allowed_roots,
            executors=run.executors,
            on_version=committed,
            iceberg=run.iceberg(),
            io=run.io,
            stop=lambda: run.stop.is_set() or self.count >= run.versions_per_turn,
        )
        last = synced.versions[-1].delta_version if synced.versions else synced.previously_mirrored
        if run.after_pass is not None and last == synced.latest_delta_version and not run.stop.is_set():
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
    clock: Callable[[], float] = time.monotonic
    _local: threading.local = field(default_factory=threading.local)

    def iceberg(self) -> IcebergJava:
        """This thread's Iceberg Java handle (it stages a transaction's files: one per thread)."""
        handle = getattr(self._local, "iceberg", None)
        if handle is None:
            handle = self._local.iceberg = IcebergJava(self.spark)
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
) -> FleetResult:
    """Mirror every table of `tables` up to its latest Delta version (once), or keep doing it until `stop`
    is set (`follow`). Raises FleetSessionLost when the Spark session is gone; every other failure is the
    table's own (see the module docstring)."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    io = io or FileIO(IcebergJava(spark).storage_properties())
    run = _Run(
        spark, io, listener, stop, follow, interval, concurrency, versions_per_turn, executors, after_pass
    )
    states = []
    for table in tables:
        root = table.location.uri
        state = TableState(table, root, LogWatch(root, io), mirrored_version=table.mirrored_hint)
        states.append(state)
    _queue_times(states, io)
    application = str(spark.sparkContext.applicationId)
    jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
    stopped = False
    in_flight: dict[Future[SyncResult], _Turn] = {}
    next_poll = run.clock() + interval
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="dvmirror-table") as pool:
        try:
            while not stop.is_set():
                now = run.clock()
                busy = {id(t.state) for t in in_flight.values()}
                if follow and now >= next_poll:
                    _poll([s for s in states if not s.due and id(s) not in busy], io)
                    next_poll = now + interval
                ready = [
                    s for s in states if s.due and not s.done and id(s) not in busy and s.not_before <= now
                ]
                ready.sort(key=lambda s: (s.pending_since, s.last_turn))
                for state in ready[: concurrency - len(in_flight)]:
                    state.last_turn = now
                    turn = _Turn(run, state)
                    in_flight[pool.submit(turn)] = turn
                if not follow and not in_flight and all(s.done for s in states):
                    break
                # Woken by a pass ending, the stop flag, the next retry or poll due, whichever comes first.
                waits = [s.not_before - now for s in states if s.due and not s.done and s.not_before > now]
                if follow:
                    waits.append(next_poll - now)
                timeout = max(0.0, min([*waits, _WAKE_SECONDS]))
                if in_flight:
                    finished, _ = wait(list(in_flight), timeout=timeout, return_when=FIRST_COMPLETED)
                else:
                    stop.wait(timeout)
                    finished = set()
                for future in finished:
                    _settle(run, in_flight.pop(future), future)
            stopped = stop.is_set()
        finally:
            stop.set()  # a pass in flight ends after its current version
            for future in list(in_flight):
                future.exception()  # waits
            try:
                for future, turn in in_flight.items():
                    _settle(run, turn, future)
            except FleetSessionLost:
                pass  # already ending
    return FleetResult(states, stopped=stopped, spark_application=application, jvm_pid=jvm_pid)


def _queue_times(states: Sequence[TableState], io: FileIO) -> None:
    """Each table's place in the first round: when its oldest commit not yet mirrored was written, from
    one stat call for all tables whose mirrored version is known (the others go first)."""
    known = [s for s in states if s.mirrored_version is not None]
    paths = [s.watch.commit_file(s.mirrored_version + 1) for s in known]  # type: ignore[operator]
    for state, info in zip(known, io.stat_many(paths), strict=True):
        state.pending_since = info.mtime_s if info.exists and info.mtime_s is not None else -math.inf


def _poll(idle: Sequence[TableState], io: FileIO) -> None:
    """Whether each idle table's next commit file exists (all asked at once), then one stat call for the
    last mirrored commit of those without one and for the new commits found (when they were written);
    those that changed become due, queued by when their next commit was written."""
    watched = [s for s in idle if s.mirrored_version is not None]
    for state in idle:
        if state.mirrored_version is None:
            state.due = True
    next_paths = [s.watch.commit_file(s.mirrored_version + 1) for s in watched]  # type: ignore[operator]
    exists = io.exists_many(next_paths)
    # For a table with a new commit: the commit's stat (its time); else: the last mirrored commit's.
    asked = [
        next_paths[i] if found else s.watch.commit_file(s.mirrored_version)  # type: ignore[arg-type]
        for i, (s, found) in enumerate(zip(watched, exists, strict=True))
    ]
    infos = io.stat_many(asked)
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
        last = synced.versions[-1].delta_version if synced.versions else synced.previously_mirrored
        reached = last == synced.latest_delta_version
        if not reached and (run.stop.is_set() or turn.count >= run.versions_per_turn):
            # Ended between two versions: stopped (the mirror is where the pass ended), or its turn is up,
            # not its backlog (queued again by its oldest commit not yet mirrored).
            state.mirrored_version = last
            if not run.stop.is_set():
                _succeeded(state)
                _queue_times([state], run.io)
            return
        _succeeded(state)
        state.mirrored_version = synced.latest_delta_version
        state.last_commit = state.watch.last_commit(state.mirrored_version)
        state.due = False
        state.done = not run.follow
        first, state.announced = not state.announced, True
        run.listener.caught_up(table, synced, first, state.versions_mirrored)
        return
    if run.stop.is_set() and not isinstance(err, MirrorInputError | MirrorConflictError):
        return  # an error while stopping (e.g. the session shutting down) is no verdict on the table
    code = _code(err)
    state.outcome = code
    state.due = True
    retry: float | None
    if isinstance(err, MirrorConflictError):
        state.conflicts += 1
        retry = 0.0 if state.conflicts < MAX_CONFLICTS_IN_A_ROW else state.backoff.next_delay()
    elif is_transient(err):
        state.attempts += 1
        retry = state.backoff.next_delay() if run.follow or state.attempts < ONCE_ATTEMPTS else None
    elif isinstance(err, MirrorInputError):
        retry = state.backoff.next_delay() if run.follow else None
    else:
        if not _session_alive(run.spark):
            run.listener.failed(table, code, err, None)
            raise FleetSessionLost(f"the Spark session is gone: {type(err).__name__}: {err}") from err
        retry = state.backoff.next_delay() if run.follow else None
    if retry is None:
        state.done = True
    else:
        state.not_before = run.clock() + retry
    run.listener.failed(table, code, err, retry)


def _succeeded(state: TableState) -> None:
    state.conflicts = state.attempts = 0
    state.backoff.reset()
    state.outcome = 0
    state.not_before = 0.0


def _code(err: BaseException) -> int:
    if isinstance(err, MirrorConflictError):
        return EXIT_CONFLICT
    if isinstance(err, MirrorInputError) and not is_transient(err):
        return EXIT_BAD_INPUT
    return EXIT_INTERNAL_ERROR


def _session_alive(spark: SparkSession) -> bool:
    """Whether the session's JVM still answers and its context is not stopped."""
    try:
        return not spark.sparkContext._jsc.sc().isStopped()
    except Exception:
        return False
