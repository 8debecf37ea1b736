"""`fleet.run_fleet` following one table (what `dvmirror sync --follow` runs: a fleet of one) in this process
(the session's Spark), on Delta tables written without Spark while it runs: stopping between versions,
transient storage errors retried with a growing delay, a lost race retried once and lost races in a row
ending the table, a refusal ending it, a storage error that persists ending a run-once sync with its own
exit code and nothing committed; and which errors are transient."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.errors import (
    EXIT_BAD_INPUT,
    EXIT_CONFLICT,
    EXIT_STORAGE,
    InvalidDeletionVectorError,
    MirrorConflictError,
    MirrorInputError,
    StorageNotFoundError,
    StorageUnavailableError,
)
from dv_assets.mirror.fleet import FleetListener, FleetResult, run_fleet
from dv_assets.mirror.follow import Backoff, exit_code_of, is_transient
from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.sync import sync_table
from dv_assets.mirror.table_spec import FleetTable
from tests.helpers.delta_log import SyntheticTable
from tests.helpers.faults import RaceAt, RaceEveryCommit, UnreachableStatsStorage
from tests.helpers.readers import pyiceberg_rows, pyiceberg_state, snapshots_by_delta_version

ROWS = 20


class Recorder(FleetListener):
    """What the run reports of its one table."""

    def __init__(self) -> None:
        self.versions: list[int] = []
        self.retries: list[tuple[BaseException, float]] = []
        self.ended: list[tuple[int, BaseException]] = []  # a failure not retried: its exit code, its error
        self.following: list[int | None] = []
        self.on_version: Callable[[int], None] = lambda version: None

    def version(self, table: FleetTable, result, lag_seconds: float | None) -> None:
        assert lag_seconds is not None and lag_seconds >= 0
        self.versions.append(result.delta_version)
        self.on_version(result.delta_version)

    def caught_up(self, table: FleetTable, result, first: bool, versions: int) -> None:
        if first:
            self.following.append(result.latest_delta_version)

    def failed(self, table: FleetTable, code: int, error: BaseException, retry_in: float | None) -> None:
        if retry_in is None:
            self.ended.append((code, error))
        else:
            self.retries.append((error, retry_in))


class Loop(Recorder):
    """run_fleet of one table on a thread of its own (interval 0.05 s), recording what it reports."""

    def __init__(self, spark, root: Path, table: str, *, follow: bool = True, **options) -> None:
        super().__init__()
        self.stop = threading.Event()
        self.result: FleetResult | None = None
        self.error: BaseException | None = None
        backoff = options.pop("backoff", None) or Backoff(first=0.01, cap=0.04)
        # Made here: the session's catalogs resolve in a thread where the session is active (this one).
        iceberg = options.pop("iceberg", None) or IcebergJava(spark)
        options["iceberg"] = lambda: iceberg
        options.setdefault("io", FileIO(iceberg.storage_properties()))

        def run() -> None:
            try:
                self.result = run_fleet(
                    spark,
                    [FleetTable.one(str(root), table)],
                    stop=self.stop,
                    listener=self,
                    follow=follow,
                    interval=0.05,
                    backoff=lambda: backoff,
                    **options,
                )
            except BaseException as err:  # handed to the test's thread
                self.error = err

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def wait_for(self, done: Callable[[], bool], seconds: float = 120) -> None:
        deadline = time.monotonic() + seconds
        while not done():
            assert self.thread.is_alive(), f"the loop ended: {self.error!r}, {self.ended}"
            assert time.monotonic() < deadline, f"not done after {seconds} s: {self.versions}, {self.retries}"
            time.sleep(0.05)

    def finish(self, seconds: float = 120, *, stop: bool = True) -> FleetResult:
        """The run's result once it returned (after setting `stop` unless told not to)."""
        if stop:
            self.stop.set()
        self.thread.join(seconds)
        assert not self.thread.is_alive()
        assert self.error is None, repr(self.error)
        assert self.result is not None
        return self.result


def synthetic(root: Path, versions: int) -> SyntheticTable:
    """A table of 2 files (version 0), then DELETEs giving file 0 a DV (versions 1 … versions - 1)."""
    table = SyntheticTable(root, ROWS)
    table.create(2)
    for version in range(1, versions):
        table.delete([table.files[0]], lambda _, v=version: range(v))  # the first v rows of file 0
    return table


def live_rows(version: int) -> int:
    return 2 * ROWS - version  # version v deleted v rows of file 0


def assert_mirrored(catalog, table: str, versions: range, rows: Callable[[int], int] = live_rows) -> None:
    snapshots = snapshots_by_delta_version(catalog, table)  # asserts one snapshot per Delta version
    assert sorted(snapshots) == list(versions)
    for version, snapshot_id in snapshots.items():
        assert len(pyiceberg_rows(catalog, table, snapshot_id)) == rows(version)


def test_stop_ends_the_loop_between_versions(spark, catalog, tmp_path) -> None:
    synthetic(tmp_path / "d", 4)
    loop = Loop(spark, tmp_path / "d", "follow_loop.stop")
    loop.on_version = lambda version: loop.stop.set()  # the signal arrives while version 0 is committed
    result = loop.finish(stop=False)
    (state,) = result.tables
    assert result.stopped and loop.versions == [0] and state.mirrored_version == 0
    assert loop.following == []  # stopped during the catch-up
    assert pyiceberg_state(catalog, "follow_loop.stop")[1] == "0"


def test_new_versions_are_mirrored_and_transient_storage_errors_retried(spark, catalog, tmp_path) -> None:
    table = synthetic(tmp_path / "d", 1)
    storage = UnreachableStatsStorage(failures=4)  # the poll's, then the passes'

    backoff = Backoff(first=0.01, cap=0.04)
    loop = Loop(spark, tmp_path / "d", "follow_loop.flaky", io=storage, backoff=backoff)
    loop.wait_for(lambda: loop.following == [0])
    storage.armed = True
    # Version 1, while the store is unreachable: it adds a data file, which the sync stats (a version
    # adding none stats nothing).
    table.append()
    loop.wait_for(lambda: loop.versions == [0, 1])
    assert [delay for _, delay in loop.retries] == [0.01, 0.02, 0.04, 0.04]  # doubling, capped
    assert all(isinstance(err, OSError) and "injected" in str(err) for err, _ in loop.retries)
    # Reset by the pass that mirrored version 1, once it returns (its version is reported before: wait).
    loop.wait_for(lambda: backoff.failures == 0, seconds=30)
    table.delete([table.files[0]], lambda _: range(2))  # version 2: no error, no retry
    loop.wait_for(lambda: loop.versions == [0, 1, 2])
    result = loop.finish()
    assert result.tables[0].mirrored_version == 2 and len(loop.retries) == 4 and loop.ended == []
    assert result.exit_code == 0
    # Version 1 appended a file of ROWS rows; version 2 deleted 2 rows of file 0.
    assert_mirrored(catalog, "follow_loop.flaky", range(3), [2 * ROWS, 3 * ROWS, 3 * ROWS - 2].__getitem__)


def test_a_lost_race_is_retried_from_a_fresh_start(spark, catalog, tmp_path) -> None:
    root = tmp_path / "d"
    synthetic(root, 3)
    # Another sync commits version 1 just before this loop commits it: this loop's commit conflicts.
    loop = Loop(spark, root, "follow_loop.race", iceberg=RaceAt(spark, root, version=1, until=1))
    loop.wait_for(lambda: loop.following == [2])
    result = loop.finish()
    assert [(type(err), delay) for err, delay in loop.retries] == [(MirrorConflictError, 0.0)]
    assert loop.versions == [0, 2] and result.exit_code == 0  # version 1 is the other sync's snapshot
    assert_mirrored(catalog, "follow_loop.race", range(3))


def test_lost_races_in_a_row_end_the_table(spark, catalog, tmp_path) -> None:
    root = tmp_path / "d"
    synthetic(root, 3)
    loop = Loop(spark, root, "follow_loop.races", iceberg=RaceEveryCommit(spark, root))
    result = loop.finish(stop=False)  # its one table ended: the run too
    assert not result.stopped and result.exit_code == EXIT_CONFLICT
    assert [(code, type(err)) for code, err in loop.ended] == [(EXIT_CONFLICT, MirrorConflictError)]
    assert len(loop.retries) == 1 and loop.versions == []
    assert_mirrored(catalog, "follow_loop.races", range(2))  # the other writer's versions 0 and 1


def test_a_refusal_while_following_ends_the_table(spark, catalog, tmp_path) -> None:
    root = tmp_path / "d"
    table = synthetic(root, 2)
    loop = Loop(spark, root, "follow_loop.refusal")
    loop.wait_for(lambda: loop.following == [1])
    # A DELETE whose DV file is gone (written aside, its commit then put in place): a definite refusal.
    aside = tmp_path / "aside"
    staged = SyntheticTable(aside, ROWS)
    staged.files, staged.dvs, staged.version = table.files, table.dvs, table.version
    staged.content = table.content
    staged.delete([table.files[0]], lambda _: range(5))
    (aside / "_delta_log" / "00000000000000000002.json").replace(
        root / "_delta_log" / "00000000000000000002.json"
    )
    result = loop.finish(stop=False)
    ((code, error),) = loop.ended
    assert code == EXIT_BAD_INPUT == result.exit_code
    assert isinstance(error, InvalidDeletionVectorError) and error.version == 2, error
    assert loop.retries == [] and loop.versions == [0, 1]  # the catch-up, nothing after
    assert pyiceberg_state(catalog, "follow_loop.refusal")[1] == "1"


def test_a_storage_error_that_persists_ends_a_run_once_sync_with_its_own_code(
    spark, catalog, tmp_path
) -> None:
    """A real read error, not an injected one: the commit file of version 2 is a symlink to
    /proc/self/mem, which the kernel answers with EIO (and so would a failing disk). Retried with a
    backoff, then the table ends with exit 5, not as a refusal; nothing of version 2 is committed."""
    root = tmp_path / "d"
    synthetic(root, 3)
    sync_table(spark, root, "follow_loop.eio", until_version=1)
    commit = root / "_delta_log" / "00000000000000000002.json"
    commit.unlink()
    commit.symlink_to("/proc/self/mem")
    loop = Loop(spark, root, "follow_loop.eio", follow=False)
    result = loop.finish(stop=False)
    ((code, error),) = loop.ended
    assert code == EXIT_STORAGE == result.exit_code, error
    assert isinstance(error, StorageUnavailableError) and not isinstance(error, MirrorInputError)
    assert str(commit) in str(error) and "Input/output error" in str(error)
    assert [delay for _, delay in loop.retries] == [0.01, 0.02]  # ONCE_ATTEMPTS passes in all
    assert loop.versions == []
    assert pyiceberg_state(catalog, "follow_loop.eio")[1] == "1"


def test_which_errors_are_transient(tmp_path) -> None:
    missing = tmp_path / "no-such-table"
    with pytest.raises(MirrorInputError) as not_a_table:
        DeltaTable(missing).latest_version()
    assert not is_transient(not_a_table.value)  # a definite answer: no log there
    assert exit_code_of(not_a_table.value) == EXIT_BAD_INPUT
    log = tmp_path / "fifo" / "_delta_log"
    log.mkdir(parents=True)
    os.mkfifo(log / "00000000000000000000.json")
    with pytest.raises(MirrorInputError, match="not a regular file") as fifo:
        DeltaTable(tmp_path / "fifo").state(0)
    assert not is_transient(fifo.value)
    # An object store that does not answer: a storage error of its own (exit 5), raised where the log is
    # listed, transient; never a refusal.
    unreachable = FileIO(
        {"s3.endpoint": "http://127.0.0.1:9", "s3.access-key-id": "a", "s3.secret-access-key": "b"}
    )
    with pytest.raises(StorageUnavailableError, match="cannot list the Delta log") as offline:
        DeltaTable("s3://bucket/table", io=unreachable).latest_version()
    assert is_transient(offline.value) and exit_code_of(offline.value) == EXIT_STORAGE
    assert not isinstance(offline.value, MirrorInputError)
    gone = StorageNotFoundError("cannot read log file", location="/t/_delta_log/0.json")
    assert not is_transient(gone) and exit_code_of(gone) == EXIT_STORAGE
    assert is_transient(ConnectionResetError()) and is_transient(TimeoutError())
    assert not is_transient(PermissionError()) and not is_transient(ValueError("bug"))
    assert not is_transient(BrokenPipeError())  # stdout's reader gone
