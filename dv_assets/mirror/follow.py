"""follow_table(): keep a mirror up to date in one long-lived Spark session (`dvmirror sync --follow`).

A *pass* is `sync_table`: every check of a one-shot sync (the Iceberg table is this Delta table's mirror,
the log still continues it, each version's files), then each new version as one snapshot. Between passes
the loop *polls*: one stat of the next commit file and of the last mirrored one (no log listing, no JVM
call), every `interval` seconds. A new commit file, or a last one gone or changed (the folder may now hold
another table), starts the next pass; so a version waits at most one interval plus its own pass.

Each pass starts afresh from the Iceberg table as the catalog shows it: nothing of the mirror's state is
kept between passes, so another writer, a rollback or an expiry in between is seen (and refused or
continued exactly as a one-shot sync would), never built upon blindly.

Stopping: `stop` (a threading.Event, set by SIGTERM/SIGINT through `stop_on_signals`) is asked between
versions only; the version in flight finishes, its commit attempt and outcome included.

Errors: a refusal (MirrorInputError) ends the loop. A lost race (MirrorConflictError: another writer
committed first; nothing of the version landed) is retried at once from a fresh start; a second one in a
row ends the loop. A transient error (`is_transient`) is retried after a backoff of 1 s doubling to 60 s,
reset by the next pass that succeeds; anything else ends the loop.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from dv_assets.mirror.delta.log_files import LOG_DIR
from dv_assets.mirror.errors import MirrorConflictError
from dv_assets.mirror.iceberg.java import IcebergJava, is_transient_java_error
from dv_assets.mirror.io import FileInfo, FileIO, NotARegularFileError
from dv_assets.mirror.locations import table_root_of
from dv_assets.mirror.placement import DEFAULT_EXECUTOR_POLICY, ExecutorPolicy
from dv_assets.mirror.results import VersionResult
from dv_assets.mirror.sync import sync_table

FIRST_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 60.0
# Lost races in a row before giving up: the first is retried from a fresh start (which sees the other
# writer's snapshots); a second means another writer keeps committing to the mirror, which a mirror must
# not share, so it ends the loop (exit 4) instead of racing it forever.
MAX_CONFLICTS_IN_A_ROW = 2

# OSErrors that are a definite answer of the storage, not a failure to get one: retrying changes nothing.
# A broken pipe is the reader of our own output gone (pyarrow reports a storage connection lost as a
# plain OSError, never as BrokenPipeError).
_DEFINITE_OS_ERRORS = (
    BrokenPipeError,
    FileNotFoundError,
    PermissionError,
    IsADirectoryError,
    NotADirectoryError,
    FileExistsError,
    NotARegularFileError,
)


@dataclass
class FollowResult:
    delta_table: str
    iceberg_table: str
    mirrored_version: int | None  # the last Delta version the mirror shows when the loop stopped
    mirrored_versions: list[int] = field(default_factory=list)  # committed by this loop, in order
    retries: int = 0  # transient errors and lost races retried
    # The first pass's line when it made the mirror from a version after 0 (`SyncResult.start_note`).
    start_note: str | None = None


@dataclass
class Backoff:
    """1 s, 2 s, 4 s … up to `cap`; `reset` after a success."""

    first: float = FIRST_BACKOFF_SECONDS
    cap: float = MAX_BACKOFF_SECONDS
    failures: int = 0

    def next_delay(self) -> float:
        delay = min(self.cap, self.first * 2**self.failures)
        self.failures += 1
        return delay

    def reset(self) -> None:
        self.failures = 0


def is_transient(err: BaseException) -> bool:
    """Whether trying again later may succeed where `err` failed: a storage I/O error that is not a
    definite answer (pyarrow raises plain OSError for S3 network and throttling errors), also when the
    log reader turned it into a refusal naming the file (right for a one-shot sync, not for a loop that
    can try again), or a Java exception of the catalog or storage not answering
    (`iceberg/java.is_transient_java_error`)."""
    for cause in _chain(err):
        if isinstance(cause, OSError) and not isinstance(cause, _DEFINITE_OS_ERRORS):
            return True
        if is_transient_java_error(cause):
            return True
    return False


def _chain(err: BaseException) -> Iterator[BaseException]:
    """`err` and its causes (explicit or implicit), each once."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


@dataclass(frozen=True)
class CommitFile:
    """What a poll compares of a commit file: whether it exists, its size and modification time."""

    exists: bool
    size: int | None
    mtime_s: float | None

    @classmethod
    def of(cls, info: FileInfo) -> CommitFile:
        return cls(info.exists, info.size, info.mtime_s)


class LogWatch:
    """The cheap poll: is the next commit file there (one request on an object store), else is the last
    mirrored one as it was (one more). `changed_from` lets a caller watching many tables ask them all at
    once (`fleet.py`)."""

    def __init__(self, delta_root: str, io: FileIO) -> None:
        self._log_dir = f"{delta_root.rstrip('/')}/{LOG_DIR}"
        self._io = io

    def commit_file(self, version: int) -> str:
        return f"{self._log_dir}/{version:020d}.json"

    def last_commit(self, version: int | None) -> CommitFile | None:
        if version is None:
            return None
        return CommitFile.of(self._io.stat(self.commit_file(version)))

    @staticmethod
    def changed_from(next_exists: bool, last_info: FileInfo | None, last: CommitFile | None) -> bool:
        """`changed` from whether the next commit exists and, when it does not, the last one's stat."""
        return next_exists or last_info is None or CommitFile.of(last_info) != last

    def changed(self, version: int | None, last: CommitFile | None) -> bool:
        """Whether a pass is due: a commit after `version`, or `version`'s commit file not as it was."""
        if version is None:
            return True
        if self._io.exists_many([self.commit_file(version + 1)])[0]:
            return True
        return self.changed_from(False, self._io.stat(self.commit_file(version)), last)


def follow_table(
    spark: SparkSession,
    delta_path: str | Path,
    table_name: str,
    *,
    interval: float,
    stop: threading.Event,
    format_version: int | None = None,
    allowed_roots: Sequence[str] = (),
    executors: ExecutorPolicy = DEFAULT_EXECUTOR_POLICY,
    on_following: Callable[[int | None], None] | None = None,
    on_version: Callable[[VersionResult, float | None], None] | None = None,
    on_retry: Callable[[BaseException, float], None] | None = None,
    after_pass: Callable[[IcebergJava], None] | None = None,
    iceberg: IcebergJava | None = None,
    io: FileIO | None = None,
    backoff: Backoff | None = None,
) -> FollowResult:
    """Mirror every Delta version not yet mirrored, then each new one as it appears, until `stop` is set.

    `on_following(version)` is called once, when the first pass (the catch-up) is done; `on_version(result,
    lag_seconds)` after each version committed (lag: now minus the Delta commit's timestamp; None when the
    commit has none); `on_retry(error, delay)` before each retry; `after_pass(iceberg)` after each pass
    that reached Delta's latest version (the CLI applies the table's retention there: `RetentionKeeper`;
    its errors are the pass's). Raises MirrorInputError (a refusal),
    MirrorConflictError (lost races in a row) or any error that is not transient; returns when stopped.
    """
    iceberg = iceberg or IcebergJava(spark)
    io = io or FileIO(iceberg.storage_properties())
    delta_root = table_root_of(delta_path)
    watch = LogWatch(delta_root, io)
    backoff = backoff or Backoff()
    result = FollowResult(delta_root, table_name, None)
    conflicts = 0
    announced = False
    pass_due = True
    last_commit: CommitFile | None = None

    def committed(version_result: VersionResult) -> None:
        result.mirrored_versions.append(version_result.delta_version)
        result.mirrored_version = version_result.delta_version
        if on_version is not None:
            committed_ms = version_result.delta_commit_ms
            lag = None if committed_ms is None else max(0.0, time.time() - committed_ms / 1000)
            on_version(version_result, lag)

    while not stop.is_set():
        try:
            if pass_due:
                synced = sync_table(
                    spark,
                    delta_root,
                    table_name,
                    format_version=format_version,
                    allowed_roots=allowed_roots,
                    executors=executors,
                    on_version=committed,
                    iceberg=iceberg,
                    io=io,
                    stop=stop.is_set,
                )
                if stop.is_set():  # maybe between two versions of the pass: the mirror is where it ended
                    if not synced.versions:
                        result.mirrored_version = synced.previously_mirrored
                    break
                result.start_note = result.start_note or synced.start_note
                # Not stopped: the pass went up to the latest version its listing showed.
                result.mirrored_version = synced.latest_delta_version
                last_commit = watch.last_commit(result.mirrored_version)
                if after_pass is not None:
                    after_pass(iceberg)
                pass_due, conflicts = False, 0
                backoff.reset()
                if not announced:
                    announced = True
                    if on_following is not None:
                        on_following(result.mirrored_version)
            elif stop.wait(interval):
                break
            else:
                pass_due = watch.changed(result.mirrored_version, last_commit)
        except MirrorConflictError as err:
            conflicts += 1
            if conflicts >= MAX_CONFLICTS_IN_A_ROW:
                raise
            result.retries += 1
            pass_due = True  # a fresh start: the next pass reads the table as the other writer left it
            if on_retry is not None:
                on_retry(err, 0.0)
        except Exception as err:
            if not is_transient(err):  # a refusal (MirrorInputError), a bug, a JVM that is gone
                raise
            result.retries += 1
            pass_due = True
            delay = backoff.next_delay()
            if on_retry is not None:
                on_retry(err, delay)
            if stop.wait(delay):
                break
    return result


@contextmanager
def stop_on_signals(*signals: signal.Signals) -> Iterator[threading.Event]:
    """An Event that SIGTERM and SIGINT (or `signals`) set instead of ending the process; the previous
    handlers are restored on exit. Must be entered in the main thread (Python runs handlers there)."""
    stop = threading.Event()
    chosen = signals or (signal.SIGTERM, signal.SIGINT)
    previous = {sig: signal.getsignal(sig) for sig in chosen}

    def handler(signum: int, frame: object) -> None:
        stop.set()

    for sig in chosen:
        signal.signal(sig, handler)
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
