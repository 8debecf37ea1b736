"""follow_table() in this process (the session's Spark), on Delta tables written without Spark while it
runs: stopping between versions, transient storage errors retried with a growing delay, a lost race
retried once and lost races in a row ending it, a refusal ending it; and which errors are transient."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.errors import InvalidDeletionVectorError, MirrorConflictError, MirrorInputError
from dv_assets.mirror.follow import Backoff, FollowResult, follow_table, is_transient
from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.io import FileIO
from tests.helpers.delta_log import SyntheticTable
from tests.helpers.faults import RaceAt, RaceEveryCommit, UnreachableStatsStorage
from tests.helpers.readers import pyiceberg_rows, pyiceberg_state, snapshots_by_delta_version

ROWS = 20


class Loop:
    """follow_table on a thread of its own (interval 0.05 s), recording what it reports."""

    def __init__(self, spark, root: Path, table: str, **options) -> None:
        self.stop = threading.Event()
        self.versions: list[int] = []
        self.retries: list[tuple[BaseException, float]] = []
        self.following: list[int | None] = []
        self.result: FollowResult | None = None
        self.error: BaseException | None = None
        self.on_version: Callable[[int], None] = lambda version: None
        options.setdefault("backoff", Backoff(first=0.01, cap=0.04))
        # Made here: the session's catalogs resolve in a thread where the session is active (this one).
        options.setdefault("iceberg", IcebergJava(spark))

        def run() -> None:
            try:
                self.result = follow_table(
                    spark,
                    root,
                    table,
                    interval=0.05,
                    stop=self.stop,
                    on_following=self.following.append,
                    on_version=lambda result, lag: self._committed(result.delta_version, lag),
                    on_retry=lambda err, delay: self.retries.append((err, delay)),
                    **options,
                )
            except BaseException as err:  # handed to the test's thread
                self.error = err

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def _committed(self, version: int, lag: float | None) -> None:
        assert lag is not None and lag >= 0
        self.versions.append(version)
        self.on_version(version)

    def wait_for(self, done: Callable[[], bool], seconds: float = 120) -> None:
        deadline = time.monotonic() + seconds
        while not done():
            assert self.thread.is_alive(), f"the loop ended: {self.error!r}"
            assert time.monotonic() < deadline, f"not done after {seconds} s: {self.versions}, {self.retries}"
            time.sleep(0.05)

    def finish(self, seconds: float = 120, *, stop: bool = True) -> FollowResult:
        """The loop's result once it returned (after setting `stop` unless told not to)."""
        if stop:
            self.stop.set()
        self.thread.join(seconds)
        assert not self.thread.is_alive()
        assert self.error is None, repr(self.error)
        assert self.result is not None
        return self.result

    def failure(self, seconds: float = 120) -> BaseException:
        self.thread.join(seconds)
        assert not self.thread.is_alive() and self.error is not None, self.result
        return self.error


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
    assert result.mirrored_versions == [0] == loop.versions and result.mirrored_version == 0
    assert loop.following == []  # stopped during the catch-up
    assert pyiceberg_state(catalog, "follow_loop.stop")[1] == "0"


def test_new_versions_are_mirrored_and_transient_storage_errors_retried(spark, catalog, tmp_path) -> None:
    table = synthetic(tmp_path / "d", 1)
    storage = UnreachableStatsStorage(failures=4)
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
    assert result.mirrored_version == 2 and result.retries == 4
    # Version 1 appended a file of ROWS rows; version 2 deleted 2 rows of file 0.
    assert_mirrored(catalog, "follow_loop.flaky", range(3), [2 * ROWS, 3 * ROWS, 3 * ROWS - 2].__getitem__)


def test_a_lost_race_is_retried_from_a_fresh_start(spark, catalog, tmp_path) -> None:
    root = tmp_path / "d"
    synthetic(root, 3)
    # Another sync commits version 1 just before this loop commits it: this loop's commit conflicts.
    loop = Loop(spark, root, "follow_loop.race", iceberg=RaceAt(spark, root, version=1, until=1))
    loop.wait_for(lambda: loop.following == [2])
    result = loop.finish()
    assert [type(err) for err, _ in loop.retries] == [MirrorConflictError] and result.retries == 1
    assert result.mirrored_versions == [0, 2]  # version 1 is the other sync's snapshot
    assert_mirrored(catalog, "follow_loop.race", range(3))


def test_lost_races_in_a_row_end_the_loop(spark, catalog, tmp_path) -> None:
    root = tmp_path / "d"
    synthetic(root, 3)
    loop = Loop(spark, root, "follow_loop.races", iceberg=RaceEveryCommit(spark, root))
    assert isinstance(loop.failure(), MirrorConflictError)
    assert len(loop.retries) == 1 and loop.versions == []
    assert_mirrored(catalog, "follow_loop.races", range(2))  # the other writer's versions 0 and 1


def test_a_refusal_while_following_ends_the_loop(spark, catalog, tmp_path) -> None:
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
    error = loop.failure()
    assert isinstance(error, InvalidDeletionVectorError) and error.version == 2, error
    assert loop.retries == [] and loop.versions == [0, 1]  # the catch-up, nothing after
    assert pyiceberg_state(catalog, "follow_loop.refusal")[1] == "1"


def test_which_errors_are_transient(tmp_path) -> None:
    missing = tmp_path / "no-such-table"
    with pytest.raises(MirrorInputError) as not_a_table:
        DeltaTable(missing).latest_version()
    assert not is_transient(not_a_table.value)  # a definite answer: no log there
    log = tmp_path / "fifo" / "_delta_log"
    log.mkdir(parents=True)
    os.mkfifo(log / "00000000000000000000.json")
    with pytest.raises(MirrorInputError, match="not a regular file") as fifo:
        DeltaTable(tmp_path / "fifo").state(0)
    assert not is_transient(fifo.value)
    # An object store that does not answer: the log reader's refusal carries the OSError (transient).
    unreachable = FileIO(
        {"s3.endpoint": "http://127.0.0.1:9", "s3.access-key-id": "a", "s3.secret-access-key": "b"}
    )
    with pytest.raises(MirrorInputError, match="cannot list the Delta log") as offline:
        DeltaTable("s3://bucket/table", io=unreachable).latest_version()
    assert is_transient(offline.value)
    assert is_transient(ConnectionResetError()) and is_transient(TimeoutError())
    assert not is_transient(PermissionError()) and not is_transient(ValueError("bug"))
    assert not is_transient(BrokenPipeError())  # stdout's reader gone
