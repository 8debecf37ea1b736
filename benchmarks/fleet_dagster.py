"""The Dagster fleet figures of issue 29 (`bench.py --only fleet`, or `python -m benchmarks.fleet_dagster
[N ...]`): N copies of the fixture `table-with-dv-small` (benchmarks/fleet.py's `build`), their tables
file loaded as the code location loads `$DVMIRROR_SOURCES`, no JVM anywhere:

1. the definitions build as a code server loads them (`load_definitions`: the tables file read, every
   table's definitions built and combined; then the repository with every job resolved,
   `load_all_definitions`), median of 3: at 300 tables (target <= 3 s, issue 35), and per table at the
   largest N against the smallest (target <= 1.2x);
2. one sensor cycle: every sensor of the code location evaluated once, as the daemon does, on a fresh
   instance (the first tick: every table's partitions and mirror run), then again with the cursors it
   left (a steady tick: nothing new), per table, largest N against smallest (target <= 1.2x); with the
   sensors' count (the daemon's cycle is one evaluation per sensor, each in a process call of its own).

3. with `--daemon-seconds S`: a real `dagster-daemon run` (workspace.yaml) over the largest N for S
   seconds, runs queued but never launched: the median interval between two ticks of the version sensor
   against its nominal 30 s (target <= 1.2x).

With `--mirrored` every table is mirrored first (one `dvmirror sync --tables` process; ~2 minutes at
300): a mirrored, up-to-date table is the steady state of a fleet, and the first cycle is then a deploy
over mirrored tables; without it every table is behind (never mirrored): the first cycle is a first
deploy's (a run per table), and every tick reads every table in full (its lag is recorded each time).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg

from benchmarks.figures import Figure, Unmeasured, print_figures
from benchmarks.fleet import build, sync_tables
from dv_assets.definitions import load_definitions
from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from tests.helpers.paths import REPO_ROOT
from tests.helpers.processes import dvmirror_env

TARGET_RATIO = 1.2
TARGET_TABLES = 300
TARGET_DEFINITIONS_SECONDS = 3.0  # issue 35: a 300-table code location loaded as a code server loads it
NOMINAL_SECONDS = 30  # delta_version_sensor's minimum_interval_seconds


def definitions_seconds(settings: MirrorSettings, repeats: int = 3) -> tuple[float, dg.Definitions]:
    """The median of `repeats` builds of the code location's definitions, each as a code server loads
    them (`dagster api grpc`: the repository built, then `load_all_definitions`: every job resolved,
    every schedule and sensor), and the last definitions."""
    times, defs = [], None
    for _ in range(repeats):
        began = time.perf_counter()
        defs = load_definitions(settings)
        defs.get_repository_def().load_all_definitions()
        times.append(time.perf_counter() - began)
    assert defs is not None
    return statistics.median(times), defs


def sensor_cycle(defs: dg.Definitions, instance: dg.DagsterInstance, cursors: dict[str, str | None]) -> float:
    """Every sensor evaluated once (the daemon's cycle, without its process calls), the tick recorded
    as the daemon records it (partitions added, asset events stored); the cursors updated in place."""
    began = time.perf_counter()
    for sensor in defs.get_repository_def().sensor_defs:
        context = dg.build_sensor_context(
            instance=instance, cursor=cursors.get(sensor.name), definitions=defs
        )
        result = sensor(context)
        assert isinstance(result, dg.SensorResult)
        for request in result.dynamic_partitions_requests or []:
            assert isinstance(request, dg.AddDynamicPartitionsRequest)
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        for event in result.asset_events or []:
            instance.report_runless_asset_event(event)
        cursors[sensor.name] = result.cursor
    return time.perf_counter() - began


def measure(folder: Path, n: int, *, mirrored: bool) -> dict[str, float]:
    """The figures at N tables (all mirrored first by one `dvmirror sync --tables` when `mirrored`)."""
    tables = build(folder, n)
    catalog = CatalogConfig.under(folder / "iceberg")
    if mirrored:
        seconds, _ = sync_tables(folder, tables, catalog)
        print(
            f"  dagster fleet N={n}: mirrored by one `dvmirror sync --tables` in {seconds:.0f} s", flush=True
        )
    settings = MirrorSettings.resolve(catalog=catalog, cwd=folder, sources_file=tables)
    build_s, defs = definitions_seconds(settings)
    sensors = len(defs.get_repository_def().sensor_defs)
    cursors: dict[str, str | None] = {}
    with dg.instance_for_test() as instance:
        first = sensor_cycle(defs, instance, cursors)
        steady = min(sensor_cycle(defs, instance, cursors) for _ in range(2))
    out = {"build": build_s, "first": first, "steady": steady, "sensors": sensors}
    print(f"  dagster fleet N={n}: {json.dumps({k: round(v, 3) for k, v in out.items()})}", flush=True)
    return out


DAEMON_YAML = """\
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config: {max_concurrent_runs: 0}
"""


def daemon_interval(folder: Path, seconds: float) -> tuple[float, float, int]:
    """A real `dagster-daemon run` over the code location of `folder`'s tables (workspace.yaml) for
    `seconds`: the median and max seconds between two ticks of `delta_version_sensor`, and the ticks
    counted. Runs are queued and never launched (`max_concurrent_runs: 0`): the figure is the daemon's
    cycle, not the runs'."""
    home = folder / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(DAEMON_YAML)
    env = dvmirror_env(
        DAGSTER_HOME=str(home),
        DVMIRROR_SOURCES=str(folder / "tables.yaml"),
        DVMIRROR_CATALOG_URI=f"sqlite:///{folder / 'iceberg' / 'catalog.db'}",
        DVMIRROR_WAREHOUSE=str(folder / "iceberg" / "warehouse"),
        PYTHONWARNINGS="ignore",
    )
    # The code location loads from where this process's packages come from.
    env["PYTHONPATH"] = os.environ.get("PYTHONPATH", env["PYTHONPATH"])
    log = (folder / "daemon.log").open("w")
    daemon = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster-daemon"), "run", "-w", str(REPO_ROOT / "workspace.yaml")],
        cwd=REPO_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its code server with it, ended by the group's id below
    )
    try:
        time.sleep(seconds)
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        try:
            daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(daemon.pid, signal.SIGKILL)
            daemon.wait()
        log.close()
    gaps: list[float] = []
    count = sensors = 0
    with dg.DagsterInstance.from_config(str(home)) as instance:
        # The code location's version sensor (or, on a code location with a pair per table, every
        # table's: their gaps pooled).
        for state in instance.all_instigator_state():
            if state.name.startswith("delta_version_sensor"):
                ticks = instance.get_ticks(state.instigator_origin_id, state.selector_id, limit=10_000)
                times = sorted(t.timestamp for t in ticks)
                gaps += [b - a for a, b in itertools.pairwise(times)]
                count += len(times)
                sensors += 1
    if sensors > 1:  # a pair per table: how far the daemon got (a first pass may not even end)
        print(f"  {sensors} version sensors ticked {count} times in {seconds:.0f} s", flush=True)
    if not gaps:
        raise RuntimeError(
            f"fewer than two ticks of delta_version_sensor in {seconds} s: see {folder}/daemon.log"
        )
    return statistics.median(gaps), max(gaps), count


def dagster_fleet_figures(
    tmp: Path, sizes: tuple[int, ...] = (20, 100, 300), *, mirrored: bool = False, daemon_seconds: float = 0
) -> list[Figure | Unmeasured]:
    measured = {n: measure(tmp / f"dagster{n}", n, mirrored=mirrored) for n in sizes}
    small, large = min(sizes), max(sizes)
    state = "mirrored" if mirrored else "never mirrored"

    def ratio(key: str) -> float:
        return (measured[large][key] / large) / (measured[small][key] / small)

    figures: list[Figure | Unmeasured] = [
        Figure(
            f"fleet dagster: definitions built, all jobs resolved, N={large}",
            measured[large]["build"],
            "s",
            TARGET_DEFINITIONS_SECONDS,
            at_most=True,
        )
        if large >= TARGET_TABLES
        else Unmeasured(
            f"fleet dagster: definitions built, all jobs resolved, N={TARGET_TABLES}",
            f"largest N is {large}; the target is measured at {TARGET_TABLES}",
        ),
        Figure(
            f"fleet dagster: definitions build s/table, N={large} vs N={small}",
            ratio("build"),
            "x",
            TARGET_RATIO,
            at_most=True,
        ),
        Figure(
            f"fleet dagster: first sensor cycle s/table, N={large} vs {small}, {state}",
            ratio("first"),
            "x",
            TARGET_RATIO,
            at_most=True,
        ),
        Figure(
            f"fleet dagster: steady sensor cycle s/table, N={large} vs {small}, {state}",
            ratio("steady"),
            "x",
            TARGET_RATIO,
            at_most=True,
        ),
    ]
    if daemon_seconds <= 0:
        figures.append(Unmeasured("fleet dagster: version sensor interval vs nominal", "no --daemon-seconds"))
        return figures
    median, longest, count = daemon_interval(tmp / f"dagster{large}", daemon_seconds)
    print(
        f"  dagster fleet N={large}: dagster-daemon {daemon_seconds:.0f} s, {count} ticks of "
        f"delta_version_sensor, interval median {median:.1f} s, max {longest:.1f} s "
        f"(nominal {NOMINAL_SECONDS} s)",
        flush=True,
    )
    figures.append(
        Figure(
            f"fleet dagster: version sensor interval / nominal, N={large}",
            median / NOMINAL_SECONDS,
            "x",
            TARGET_RATIO,
            at_most=True,
        )
    )
    return figures


if __name__ == "__main__":
    import argparse
    import tempfile

    parser = argparse.ArgumentParser()
    parser.add_argument("sizes", nargs="*", type=int, default=[20, 100, 300])
    parser.add_argument("--mirrored", action="store_true", help="mirror every table first (minutes at 300)")
    parser.add_argument("--daemon-seconds", type=float, default=0, help="run a real dagster-daemon this long")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dvmirror-fleet-dagster-") as name:
        found = dagster_fleet_figures(
            Path(name), tuple(args.sizes), mirrored=args.mirrored, daemon_seconds=args.daemon_seconds
        )
        print_figures(found, blank_line=False)
