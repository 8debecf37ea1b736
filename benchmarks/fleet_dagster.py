"""The Dagster fleet figures of issue 29 (`bench.py --only fleet`, or `python -m benchmarks.fleet_dagster
[N ...]`): N copies of the fixture `table-with-dv-small` (benchmarks/fleet.py's `build`), their tables
file loaded as the code location loads `$DVMIRROR_SOURCES`, no JVM anywhere:

1. the definitions build (`load_definitions`: the tables file read, every table's definitions built
   and combined), best of 3, per table, at the largest N against the smallest (target <= 1.2x);
2. one sensor cycle: every sensor of the code location evaluated once, as the daemon does, on a fresh
   instance (the first tick: every table's partitions and mirror run), then again with the cursors it
   left (a steady tick: nothing new), per table, largest N against smallest (target <= 1.2x); with the
   sensors' count (the daemon's cycle is one evaluation per sensor, each in a process call of its own).

Half the tables are mirrored first when `--mirrored` is given (one `dvmirror sync --tables` process;
minutes at 300): a mirrored, up-to-date table is the steady state of a fleet; without it every table is
behind (never mirrored), which every tick reads in full (its lag is recorded on every tick).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import dagster as dg

from benchmarks.figures import Figure
from benchmarks.fleet import build
from dv_assets.definitions import load_definitions
from dv_assets.mirror.settings import CatalogConfig, MirrorSettings

TARGET_RATIO = 1.2


def definitions_seconds(settings: MirrorSettings, repeats: int = 3) -> tuple[float, dg.Definitions]:
    """The best of `repeats` builds of the code location's definitions, and the last definitions."""
    best, defs = float("inf"), None
    for _ in range(repeats):
        began = time.perf_counter()
        defs = load_definitions(settings)
        defs.get_repository_def()  # what a code server does with them: resolved and validated
        best = min(best, time.perf_counter() - began)
    assert defs is not None
    return best, defs


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


def measure(folder: Path, n: int) -> dict[str, float]:
    tables = build(folder, n)
    catalog = CatalogConfig.under(folder / "iceberg")
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


def dagster_fleet_figures(tmp: Path, sizes: tuple[int, ...] = (20, 100, 300)) -> list[Figure]:
    measured = {n: measure(tmp / f"dagster{n}", n) for n in sizes}
    small, large = min(sizes), max(sizes)

    def ratio(key: str) -> float:
        return (measured[large][key] / large) / (measured[small][key] / small)

    return [
        Figure(
            f"fleet dagster: definitions build s/table, N={large} vs N={small}",
            ratio("build"),
            "x",
            TARGET_RATIO,
            at_most=True,
        ),
        Figure(
            f"fleet dagster: first sensor cycle s/table, N={large} vs N={small}",
            ratio("first"),
            "x",
            TARGET_RATIO,
            at_most=True,
        ),
        Figure(
            f"fleet dagster: steady sensor cycle s/table, N={large} vs N={small}",
            ratio("steady"),
            "x",
            TARGET_RATIO,
            at_most=True,
        ),
    ]


if __name__ == "__main__":
    import tempfile

    sizes = tuple(int(a) for a in sys.argv[1:]) or (20, 100, 300)
    with tempfile.TemporaryDirectory(prefix="dvmirror-fleet-dagster-") as name:
        for figure in dagster_fleet_figures(Path(name), sizes):
            print(figure.line())
