"""What following a Delta table is made of, and the one policy for its failures; the loop is `fleet.run_fleet`
(`dvmirror sync --follow` of one table is a fleet of one).

The *poll* (`LogWatch`): one stat of the next commit file and of the last mirrored one (no log listing, no
JVM call), every `interval` seconds. A new commit file, or a last one gone or changed (the folder may now
hold another table), makes a pass due; so a version waits at most one interval plus its own pass. Each
pass starts afresh from the Iceberg table as the catalog shows it (`sync.sync_table`): nothing of the
mirror's state is kept between passes.

The policy for a pass that failed, per table, once or following (`fleet._settle`):

* a refusal (MirrorInputError, exit 2) ends the table: its verdict stands until a person looks;
* a lost race (MirrorConflictError) is retried at once from a fresh start; a second in a row ends the table
  (exit 4): something else keeps writing the mirror, which a mirror must not share;
* a transient error (`is_transient`: a storage that does not answer, a catalog timing out) is retried after
  a backoff of 1 s doubling to 60 s (`Backoff`), reset by the table's next pass that succeeds: while
  following, without end; once, ONCE_ATTEMPTS passes in all, then it ends the table (exit 5 for storage);
* a storage error that is a definite answer (a log file missing, access denied: exit 5), or anything else
  (exit 3), ends the table.

Stopping: `stop` (a threading.Event, set by SIGTERM/SIGINT through `stop_on_signals`) is asked between
versions only; the version in flight finishes, its commit attempt and outcome included.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from dv_assets.mirror.delta.log_files import LOG_DIR
from dv_assets.mirror.errors import (
    EXIT_BAD_INPUT,
    EXIT_CONFLICT,
    EXIT_INTERNAL_ERROR,
    EXIT_STORAGE,
    MirrorConflictError,
    MirrorInputError,
    StorageError,
    StorageUnavailableError,
)
from dv_assets.mirror.io import FileInfo, FileIO, NotARegularFileError

FIRST_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 60.0
# Lost races in a row that end a table: the first is retried from a fresh start (which sees the other
# writer's snapshots); a second means another writer keeps committing to the mirror.
MAX_CONFLICTS_IN_A_ROW = 2
# Passes of a table, in a run-once sync, while they fail with a transient error (then its error stands).
ONCE_ATTEMPTS = 3

# OSErrors that are a definite answer of the storage, not a failure to get one: retrying changes nothing.
# A broken pipe is the reader of our own output gone.
_DEFINITE_OS_ERRORS = (
    BrokenPipeError,
    FileNotFoundError,
    PermissionError,
    IsADirectoryError,
    NotADirectoryError,
    FileExistsError,
    NotARegularFileError,
    StorageError,  # not found or permission denied (an unavailable one is asked first)
)
_Result = TypeVar("_Result")


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
    """Whether trying again later may succeed where `err` failed: a storage that did not answer
    (`StorageUnavailableError`, raised where the I/O happens; or a plain OSError that is not a definite
    answer, as pyarrow raises for S3 network errors past `FileIO`), or a Java exception of the catalog or
    storage not answering (`iceberg/java.is_transient_java_error`). A refusal never is."""
    if isinstance(err, StorageUnavailableError):
        return True
    if isinstance(err, OSError) and not isinstance(err, _DEFINITE_OS_ERRORS):
        return True
    if not type(err).__module__.startswith("py4j"):
        return False  # not a Java exception: Spark's modules need not be loaded to ask (a run without a JVM)
    from dv_assets.mirror.iceberg.java import is_transient_java_error

    return is_transient_java_error(err)


def exit_code_of(err: BaseException) -> int:
    """The exit code a pass's error stands for (`errors.py` defines them)."""
    if isinstance(err, MirrorConflictError):
        return EXIT_CONFLICT
    if isinstance(err, MirrorInputError):
        return EXIT_BAD_INPUT
    if isinstance(err, StorageError) or (isinstance(err, OSError) and is_transient(err)):
        return EXIT_STORAGE
    return EXIT_INTERNAL_ERROR


def retrying_transient(
    attempt: Callable[[], _Result],
    *,
    on_retry: Callable[[BaseException, float], None] | None = None,
    backoff: Backoff | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> _Result:
    """`attempt()`, tried again after a backoff while it fails with a transient error, ONCE_ATTEMPTS times
    in all: the policy of a pass, for work outside the fleet's passes (a run-once sync's answer without
    a JVM, `cli/sync._up_to_date`; `fleet._settle` applies the same policy to the passes)."""
    backoff = backoff or Backoff()
    for _ in range(ONCE_ATTEMPTS - 1):
        try:
            return attempt()
        except Exception as err:
            if not is_transient(err):
                raise
            delay = backoff.next_delay()
            if on_retry is not None:
                on_retry(err, delay)
            sleep(delay)
    return attempt()


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
