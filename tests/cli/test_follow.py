"""`dvmirror sync --follow` through the installed console script, with Delta Spark committing while it runs:
several versions (INSERT, DELETE writing DVs, UPDATE), a SIGTERM in the middle, a restart that converges,
rows per version by Iceberg Java and pyiceberg against Delta Spark's, and a refusal while following."""

from __future__ import annotations

import json
import re
import shutil
import signal
import time
from pathlib import Path

import pytest
from pyiceberg.exceptions import NoSuchTableError

from dv_assets.mirror.errors import EXIT_BAD_INPUT
from dv_assets.mirror.settings import CatalogConfig
from tests.helpers.delta_histories import (
    delta_ref,
    delta_table_with_dvs,
    delta_versions,
    fast_spark,
    iceberg_versions,
    latest_version,
)
from tests.helpers.delta_log import SyntheticTable
from tests.helpers.paths import DELTA_FIXTURES
from tests.helpers.processes import (
    catalog_args,
    dvmirror_env,
    no_java_env,
    one_error_line,
    run_dvmirror,
    spawn_dvmirror,
)
from tests.helpers.readers import pyiceberg_rows, pyiceberg_state, snapshots_by_delta_version
from tests.helpers.rows import sorted_rows

pytestmark = pytest.mark.spark
TABLE = "follow_cli.events"
MIRRORED_LINE = re.compile(r"^mirrored Delta version (\d+) \(.+ in \d+\.\d\d s, lag (\d+\.\d) s$")


class Follower:
    """One `dvmirror sync DELTA --table TABLE --follow --interval 1` process, its output in files."""

    def __init__(self, tmp: Path, delta: Path, catalog: CatalogConfig, name: str, *extra: str) -> None:
        self.out, self.err = tmp / f"{name}.out", tmp / f"{name}.err"
        self.spark_logs = tmp / f"{name}-tmp"  # TMPDIR: where its Spark log goes
        self.spark_logs.mkdir()
        flags = catalog_args(catalog)
        self.process = spawn_dvmirror(
            *("sync", str(delta), "--table", TABLE, *flags, "--follow", "--interval", "1", *extra),
            cwd=tmp,
            stdout=self.out,
            stderr=self.err,
            env=dvmirror_env(TMPDIR=str(self.spark_logs)),
        )

    def lines(self) -> list[str]:
        return self.out.read_text().splitlines()

    def alive(self) -> None:
        assert self.process.poll() is None, f"exited {self.process.returncode}: {self.report()}"

    def report(self) -> str:
        return f"stdout:\n{self.out.read_text()[-3000:]}\nstderr:\n{self.err.read_text()[-3000:]}"

    def wait_for_line(self, prefix: str, seconds: float = 180) -> str:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            found = [line for line in self.lines() if line.startswith(prefix)]
            if found:
                return found[0]
            self.alive()
            time.sleep(0.2)
        raise AssertionError(f"no line {prefix!r} after {seconds} s: {self.report()}")

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=120)


def wait_until_mirrored(
    catalog: CatalogConfig, version: int, follower: Follower, seconds: float = 120
) -> float:
    """Until pyiceberg sees a snapshot of Delta `version` (the follower running all along); how long."""
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        try:
            if version in snapshots_by_delta_version(catalog, TABLE):
                return time.monotonic() - began
        except NoSuchTableError:
            pass
        follower.alive()
        time.sleep(0.2)
    raise AssertionError(f"Delta version {version} not mirrored after {seconds} s: {follower.report()}")


def mirrored_versions(lines: list[str]) -> list[int]:
    """The versions of the text output's `mirrored Delta version N (…), lag X s` lines, in order."""
    found = []
    for line in lines:
        if line.startswith("mirrored "):
            match = MIRRORED_LINE.match(line)
            assert match is not None, line
            found.append(int(match[1]))
    return found


def assert_rows_match(spark, catalog: CatalogConfig, delta: Path) -> int:
    """Every Delta version's rows, as Delta Spark reads them, are the rows Iceberg Java and pyiceberg read
    from its snapshot; the number of versions compared."""
    snapshots = snapshots_by_delta_version(catalog, TABLE)
    versions = sorted(snapshots)
    assert versions == list(range(latest_version(delta) + 1))
    expected = delta_versions(spark, delta, versions)
    iceberg_java = iceberg_versions(spark, TABLE, snapshots)
    assert iceberg_java.union_columns == expected.union_columns == ["id", "p"]
    for version in versions:
        assert iceberg_java.rows[version] == expected.rows[version], f"Iceberg Java, version {version}"
        as_dicts = [dict(zip(expected.union_columns, row, strict=True)) for row in expected.rows[version]]
        pyiceberg = pyiceberg_rows(catalog, TABLE, snapshots[version])
        assert pyiceberg == sorted_rows(as_dicts), f"pyiceberg, version {version}"
    return len(versions)


def test_follow_mirrors_while_delta_commits_stops_on_sigterm_and_restarts(spark, catalog, tmp_path) -> None:
    delta = tmp_path / "events"
    ref = delta_ref(delta)
    with fast_spark(spark):
        delta_table_with_dvs(spark, delta)  # versions 0 (create), 1 (insert), 2 (delete: DVs)
        first = Follower(tmp_path, delta, catalog, "first")
        following = first.wait_for_line("following ")
        assert following == f"following {delta} into {TABLE} every 1.0 s (mirrored up to version 2)"
        assert mirrored_versions(first.lines()) == [0, 1, 2]  # the catch-up, one line each

        spark.sql(f"INSERT INTO {ref} SELECT id, CAST(id % 3 AS STRING) FROM range(300, 330)")  # 3
        wait_until_mirrored(catalog, 3, first)
        spark.sql(f"DELETE FROM {ref} WHERE id % 5 = 0")  # 4: DVs on files that had some already
        wait_until_mirrored(catalog, 4, first)
        spark.sql(f"UPDATE {ref} SET p = 'u' WHERE id % 11 = 0")  # 5
        # In the middle: version 5 may not have been seen, be in flight or be committed; whichever, the
        # follower ends between versions, with what it printed being what the mirror shows.
        assert first.stop() == 0, first.report()
    lines = first.lines()
    printed = mirrored_versions(lines)
    assert printed[:5] == [0, 1, 2, 3, 4] and printed in ([0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5]), lines
    _, current_version, _ = pyiceberg_state(catalog, TABLE)
    assert current_version == str(printed[-1])
    assert lines[-1] == f"stopped following {delta} into {TABLE} at version {printed[-1]}"
    assert first.err.read_text() == "", first.report()
    assert not list(first.spark_logs.glob("dvmirror-spark-*.log"))  # removed after a clean stop

    with fast_spark(spark):
        spark.sql(f"DELETE FROM {ref} WHERE p = '1' AND id % 4 = 0")  # 6
        spark.sql(f"INSERT INTO {ref} SELECT id, 'n' FROM range(400, 410)")  # 7
        second = Follower(tmp_path, delta, catalog, "second", "--json")
        second.wait_for_line('{"event": "following"')
        events = [json.loads(line) for line in second.lines()]
        caught_up = [e["delta_version"] for e in events if e["event"] == "version"]
        assert caught_up == list(range(printed[-1] + 1, 8)), events
        assert events[-1] == {
            "event": "following",
            "delta_table": str(delta),
            "iceberg_table": TABLE,
            "interval_seconds": 1.0,
            "mirrored_version": 7,
        }
        spark.sql(f"UPDATE {ref} SET id = id + 1000 WHERE id % 13 = 0")  # 8, while it follows
        wait_until_mirrored(catalog, 8, second)
    latest = json.loads(second.wait_for_line('{"event": "version", "delta_version": 8'))
    assert latest["operation"] == "UPDATE" and latest["lag_seconds"] >= 0
    assert latest["delta_commit_ms"] is not None

    assert assert_rows_match(spark, catalog, delta) == 9

    # A refusal while following: the folder now holds another Delta table (fewer versions, another id).
    replacement = tmp_path / "replacement"
    SyntheticTable(replacement, rows_per_file=10).create(1)
    shutil.move(delta, tmp_path / "events-before")
    shutil.move(replacement, delta)
    assert second.process.wait(timeout=120) == EXIT_BAD_INPUT, second.report()
    failure = json.loads(second.lines()[-1])
    assert failure["ok"] is False and failure["exit_code"] == EXIT_BAD_INPUT
    assert failure["mirrored_versions"] == [*caught_up, 8]
    assert second.err.read_text().splitlines() == [f"dvmirror: {failure['error']}"], second.report()
    assert failure["error"].startswith(f"table {delta}: "), failure
    assert Path(failure["spark_log"]).parent == second.spark_logs and Path(failure["spark_log"]).is_file()
    _, current_version, _ = pyiceberg_state(catalog, TABLE)
    assert current_version == "8"  # nothing of the other table was mirrored


def test_follow_refuses_until_version_and_a_non_positive_interval_without_a_jvm(tmp_path) -> None:
    delta = str(DELTA_FIXTURES / "table-with-dv-small")
    both = run_dvmirror(
        "sync", delta, "--table", "ns.t", "--follow", "--until-version", "1", cwd=tmp_path, env=no_java_env()
    )
    assert both.returncode == EXIT_BAD_INPUT
    assert "--until-version" in one_error_line(both)
    for interval in ("0", "-1", "nan", "soon"):
        bad = run_dvmirror(
            "sync",
            delta,
            "--table",
            "ns.t",
            "--follow",
            "--interval",
            interval,
            cwd=tmp_path,
            env=no_java_env(),
        )
        assert bad.returncode == EXIT_BAD_INPUT, bad.stderr
        assert "--interval" in bad.stderr and "Traceback" not in bad.stderr
    alone = run_dvmirror("sync", delta, "--table", "ns.t", "--interval", "1", cwd=tmp_path, env=no_java_env())
    assert alone.returncode == EXIT_BAD_INPUT and "--follow" in one_error_line(alone)
    assert not (tmp_path / ".dvmirror").exists()  # nothing created
