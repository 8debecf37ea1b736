"""The freshness figures of issue 17 (`bench.py --only freshness`), measured in one run on a demo-sized
Delta table (the demo's nine versions, written by Delta Spark with deletion vectors on), each small new
version a one-row DELETE that Delta Spark writes in the bench's own process:

1. `dvmirror status` and a no-op `dvmirror sync` (the mirror already at Delta's latest version): wall
   time of the installed console script, median of 3 (target 2 s each: no JVM).
2. `dvmirror sync` of one small version against Spark start-up alone (a process that starts the session
   the CLI starts, `get_or_create_spark` with the settings its catalog flags give, and ends): median of 3
   each, alternated (target 1.2x).
3. `dvmirror sync --follow --interval 1`: the Delta commit returning here -> pyiceberg's last mirrored
   version showing it (polled every 50 ms), median over 5 DELETEs, each after a random pause of up to one
   interval so that the commits land at any phase of the follower's polling (target 3 s); printed beside
   it, the same counted from the commit file's modification time (Delta Spark returns after post-commit
   work, and readers see the version from the file on). Not measured when the installed CLI has no
   `--follow`.
4. Dagster: the table's delta-version sensor evaluated on a DagsterInstance (sqlite storage in a
   temporary folder), its tick recorded and its run request executed in process on the bench's Spark
   session: tick start -> pyiceberg shows the version (target 60 s). An operator waits up to the sensor's
   minimum interval (printed with it) before that tick; a daemon-launched run adds its run worker's
   start and a Spark start-up (figure 2) after it.
"""

from __future__ import annotations

import logging
import queue
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
from pyspark.sql import SparkSession

from benchmarks.figures import Figure, Unmeasured
from dv_assets.defs.factory import build_definitions
from dv_assets.defs.sources import VERSIONS_TAG, DeltaSource
from dv_assets.demo.sample_table import build_sample_table
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.iceberg.pyiceberg_reader import last_mirrored_version
from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from dv_assets.mirror.sync import sync_table
from tests.helpers.dagster import evaluate_sensor, record_tick
from tests.helpers.paths import DVMIRROR
from tests.helpers.processes import catalog_args, dvmirror_env, no_java_env, run, run_dvmirror

REPEAT = 3
FOLLOW_VERSIONS = 5
FOLLOW_INTERVAL_SECONDS = 1
POLL_SECONDS = 0.05
VISIBLE_TIMEOUT_SECONDS = 120
CLI_TABLE = "fresh.events"
DAGSTER_TABLE = "fresh.events_dagster"
QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}

# Spark start-up alone: the session `dvmirror sync` starts (the settings its catalog flags give, through
# the CLI's own `settings_from`), in a process that then ends, as the CLI's does.
SPARK_START = """\
import argparse, sys
from dv_assets.mirror.cli.arguments import settings_from
from dv_assets.mirror.spark import get_or_create_spark
flags = argparse.Namespace(catalog_uri=sys.argv[1], catalog_property=[], config=None, warehouse=sys.argv[2])
get_or_create_spark(settings_from(flags, sys.argv[3]))
"""


@dataclass(frozen=True)
class Commit:
    """A Delta version this process committed: when the commit returned (time.monotonic), and how long
    before that its commit file was written (Delta Spark's post-commit work; readers see the version from
    the file on, so the time to visible counted from the file is this much longer)."""

    version: int
    returned: float
    written_before: float


class FreshTable:
    """The demo-sized Delta table, mirrored by the CLI into `CLI_TABLE` of the bench's catalog; small new
    versions are one-row DELETEs that Delta Spark writes in this process."""

    def __init__(self, spark: SparkSession, catalog: CatalogConfig, path: Path) -> None:
        self.spark, self.catalog, self.path = spark, catalog, path
        build_sample_table(spark, path, progress=lambda _: None)
        sync_table(spark, path, CLI_TABLE)  # the mirror starts at Delta's latest version
        # Rows the demo's history keeps (ids below MERGE's, none of its DELETEs' multiples).
        self._ids: Iterator[int] = (i for i in range(1, 850) if i % 7 and i % 10 and i % 11)

    @property
    def flags(self) -> list[str]:
        """The CLI's catalog flags for the bench's catalog."""
        return catalog_args(self.catalog)

    @property
    def sync_command(self) -> list[str]:
        """`dvmirror sync` of the table into `CLI_TABLE`."""
        return [str(DVMIRROR), "sync", str(self.path), "--table", CLI_TABLE, *self.flags]

    def delete_one_row(self) -> Commit:
        """A one-row DELETE (one new DV) committed by Delta Spark."""
        self.spark.sql(f"DELETE FROM delta.`{self.path}` WHERE id = {next(self._ids)}")
        returned, now = time.monotonic(), time.time()
        version = DeltaTable(self.path, enforce_protocol=False).latest_version()
        written = (self.path / "_delta_log" / f"{version:020d}.json").stat().st_mtime
        return Commit(version, returned, max(0.0, now - written))

    def visible_after(
        self, table: str, version: int, since: float, follower: subprocess.Popen | None = None
    ) -> float:
        """Seconds from `since` until pyiceberg shows `table` at `version` or later (polled every
        POLL_SECONDS); fails when `follower` ends first or after VISIBLE_TIMEOUT_SECONDS."""
        while True:
            shown = last_mirrored_version(self.catalog, table)
            if shown is not None and shown >= version:
                return time.monotonic() - since
            if follower is not None and follower.poll() is not None:
                raise RuntimeError(f"the follower exited {follower.returncode} before version {version}")
            if time.monotonic() - since > VISIBLE_TIMEOUT_SECONDS:
                raise TimeoutError(f"{table} does not show v{version} after {VISIBLE_TIMEOUT_SECONDS} s")
            time.sleep(POLL_SECONDS)


def _timed(command: list[str], cwd: Path) -> tuple[float, str]:
    """Wall seconds of a command that must succeed (in `dvmirror_env()`), and its stdout."""
    began = time.monotonic()
    done = run(command, cwd=cwd, timeout=600)
    seconds = time.monotonic() - began
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return seconds, done.stdout


def cli_without_jvm(table: FreshTable, tmp: Path) -> list[Figure]:
    """`dvmirror status` and a no-op `dvmirror sync` on the table, median of REPEAT runs each; and
    whether the no-op answers with no Java on the PATH at all (then it started no JVM)."""
    status_times, noop_times = [], []
    for _ in range(REPEAT):
        seconds, _ = _timed([str(DVMIRROR), "status", CLI_TABLE, *table.flags], tmp)
        status_times.append(seconds)
        seconds, out = _timed(table.sync_command, tmp)
        assert "is up to date" in out, out
        noop_times.append(seconds)
    no_java = run(table.sync_command, cwd=tmp, env=no_java_env(), timeout=600)
    kept_log = re.search(r" \(Spark's log: (\S+)\)", no_java.stderr)
    if kept_log:  # the CLI keeps its Spark log after a failure; this one is the bench's doing
        Path(kept_log[1]).unlink(missing_ok=True)
    error = no_java.stderr.replace(kept_log[0], "") if kept_log else no_java.stderr
    said = "answered without a JVM" if no_java.returncode == 0 else error.strip()[:200]
    print(
        f"  status {', '.join(f'{s:.2f}' for s in status_times)} s; no-op sync "
        f"{', '.join(f'{s:.2f}' for s in noop_times)} s; no-op sync with no Java on the PATH: exit "
        f"{no_java.returncode} ({said})"
    )
    status, noop = statistics.median(status_times), statistics.median(noop_times)
    return [
        Figure("`dvmirror status`, demo-sized table, median", status, "s", 2.0, True),
        Figure("no-op `dvmirror sync`, demo-sized table, median", noop, "s", 2.0, True),
    ]


def sync_vs_spark_start(table: FreshTable, tmp: Path) -> Figure:
    """`dvmirror sync` of one small new version against Spark start-up alone, alternated, REPEAT each."""
    catalog_uri, warehouse = table.flags[1], table.flags[3]
    starts, syncs = [], []
    for _ in range(REPEAT):
        seconds, _ = _timed([sys.executable, "-c", SPARK_START, catalog_uri, warehouse, str(table.path)], tmp)
        starts.append(seconds)
        version = table.delete_one_row().version
        seconds, out = _timed(table.sync_command, tmp)
        assert f"mirrored Delta version {version} " in out and out.count("mirrored Delta version") == 1, out
        syncs.append(seconds)
    start, sync = statistics.median(starts), statistics.median(syncs)
    print(
        f"  Spark start-up alone {', '.join(f'{s:.2f}' for s in starts)} s; `dvmirror sync` of one "
        f"one-row DELETE {', '.join(f'{s:.2f}' for s in syncs)} s (medians {start:.2f} / {sync:.2f} s)"
    )
    return Figure("`dvmirror sync` of one small version vs Spark start-up", sync / start, "x", 1.2, True)


def follow_mode(table: FreshTable, tmp: Path) -> Figure | Unmeasured:
    """`dvmirror sync --follow` on the table while Delta Spark commits FOLLOW_VERSIONS DELETEs; each
    commit's time to visible, median; then SIGTERM (reported with the exit code)."""
    name = f"follow: Delta commit -> snapshot visible ({FOLLOW_INTERVAL_SECONDS} s interval), median"
    if "--follow" not in run_dvmirror("sync", "--help", cwd=tmp).stdout:
        return Unmeasured(name, "follow mode not available (the installed `dvmirror sync` has no --follow)")
    command = [*table.sync_command, "--follow", "--interval", str(FOLLOW_INTERVAL_SECONDS)]
    stderr = tmp / "follow.stderr"
    with stderr.open("w") as err:
        follower = subprocess.Popen(
            command, cwd=tmp, env=dvmirror_env(), stdout=subprocess.PIPE, stderr=err, text=True
        )
    lines: queue.Queue[str | None] = queue.Queue()
    printed: list[str] = []

    def read() -> None:
        assert follower.stdout is not None
        for line in follower.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    began = time.monotonic()
    latencies: list[float] = []
    from_file: list[float] = []  # the same, counted from the commit file's modification time
    try:
        while True:
            line = lines.get(timeout=VISIBLE_TIMEOUT_SECONDS)
            if line is None:
                tail = stderr.read_text(errors="replace").strip().splitlines()[-3:]
                return Unmeasured(name, f"the follower exited {follower.wait()} first: {' | '.join(tail)}")
            if line.startswith("following "):
                break
        up = time.monotonic() - began
        rng = random.Random(17)
        for _ in range(FOLLOW_VERSIONS):
            time.sleep(rng.uniform(0, FOLLOW_INTERVAL_SECONDS))
            commit = table.delete_one_row()
            latencies.append(table.visible_after(CLI_TABLE, commit.version, commit.returned, follower))
            from_file.append(latencies[-1] + commit.written_before)
    finally:
        follower.send_signal(signal.SIGTERM)
        try:
            code: int | str = follower.wait(timeout=120)
        except subprocess.TimeoutExpired:
            follower.kill()
            code = f"none in 120 s (killed, exit {follower.wait()})"
        while (line := lines.get(timeout=10)) is not None:
            printed.append(line)
    print(
        f"  follow: up and caught up in {up:.1f} s; commit -> visible "
        f"{', '.join(f'{s:.2f}' for s in latencies)} s (from the commit file's mtime "
        f"{', '.join(f'{s:.2f}' for s in from_file)} s); {len(printed)} more lines printed (last: "
        f"{printed[-1] if printed else '-'}); SIGTERM -> exit {code}"
    )
    return Figure(name, statistics.median(latencies), "s", 3.0, True)


def _launch(defs: dg.Definitions, instance: dg.DagsterInstance, tick: dg.SensorResult) -> None:
    """What the sensor daemon does with a tick, the runs executed in process (console logs quiet)."""
    record_tick(instance, tick)
    for request in tick.run_requests or []:
        assert request.job_name is not None
        result = defs.resolve_job_def(request.job_name).execute_in_process(
            instance=instance, run_config={**request.run_config, **QUIET}, tags=dict(request.tags)
        )
        assert result.success


def dagster_sensor_path(table: FreshTable, settings: MirrorSettings, tmp: Path) -> Figure:
    """A source of its own on the table (Iceberg `DAGSTER_TABLE`): a first tick's run catches it up
    (untimed); then one DELETE, and the next tick start -> pyiceberg shows that version."""
    warnings.filterwarnings("ignore", category=dg.PreviewWarning)  # partitioned asset checks
    warnings.filterwarnings("ignore", category=dg.BetaWarning)
    source = DeltaSource(name="fresh_events", delta_path=str(table.path), iceberg_table=DAGSTER_TABLE)
    defs = build_definitions([source], settings)
    sensor = source.version_sensor_name
    interval = defs.resolve_sensor_def(sensor).minimum_interval_seconds
    (tmp / "dagster").mkdir()
    with dg.DagsterInstance.local_temp(tempdir=str(tmp / "dagster")) as instance:
        catch_up = evaluate_sensor(defs, sensor, instance, None)
        _launch(defs, instance, catch_up)
        version = table.delete_one_row().version
        with ThreadPoolExecutor(1) as pool:
            began = time.monotonic()
            visible = pool.submit(table.visible_after, DAGSTER_TABLE, version, began)
            tick = evaluate_sensor(defs, sensor, instance, catch_up.cursor)
            evaluated = time.monotonic() - began
            assert [r.tags[VERSIONS_TAG] for r in tick.run_requests or []] == [str(version)], tick
            _launch(defs, instance, tick)
            ran = time.monotonic() - began
            seconds = visible.result()
    print(
        f"  Dagster: {sensor} (minimum interval {interval} s): tick evaluated in {evaluated:.2f} s, "
        f"snapshot of v{version} visible at {seconds:.2f} s, run (with its checks) done at {ran:.2f} s; "
        f"in process on a running Spark session"
    )
    name = f"Dagster: sensor tick -> snapshot visible (sensor interval {interval} s)"
    return Figure(name, seconds, "s", 60.0, True)


def freshness_figures(spark: SparkSession, settings: MirrorSettings, tmp: Path) -> list[Figure | Unmeasured]:
    """The four freshness figures, on one demo-sized table of the bench's catalog."""
    # pyiceberg warns at each load of an older sqlite catalog schema: the polls would repeat it.
    logging.getLogger("pyiceberg").setLevel(logging.ERROR)
    began = time.monotonic()
    table = FreshTable(spark, settings.catalog, tmp / "fresh_events")
    written = time.monotonic() - began
    polls = []
    for _ in range(4):  # the first loads pyiceberg and the catalog's driver: not counted
        polled = time.monotonic()
        last_mirrored_version(settings.catalog, CLI_TABLE)
        polls.append(time.monotonic() - polled)
    print(
        f"  demo-sized table written and mirrored in {written:.1f} s; a pyiceberg poll of the mirrored "
        f"version takes {1000 * statistics.median(polls[1:]):.0f} ms"
    )
    figures: list[Figure | Unmeasured] = cli_without_jvm(table, tmp)
    figures.append(sync_vs_spark_start(table, tmp))
    figures.append(follow_mode(table, tmp))
    figures.append(dagster_sensor_path(table, settings, tmp))
    print(f"  freshness section: {time.monotonic() - began:.0f} s")
    return figures
