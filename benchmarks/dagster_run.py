"""The Dagster fleet figure of issue 29 (`bench.py --only fleet`, or `python -m benchmarks.dagster_run`): a
mirror run of one small version, launched as a deployment launches it (a code server, the instance's
`DefaultRunLauncher`: testkit/launched_run.py), wall time from launch to success, next to its target
(<= 15 s, issue 35; issue 29's was 20 s); the JVMs and Python processes the run started and the peak
RSS of its process tree.

The peak RSS target (1 GiB) is this bench's, not the issue's: one process with one JVM, as a
`dvmirror sync` of a small table (0.5-0.9 GB); the multiprocess executor's runs took 1.4-1.85 GB.

The table is a copy of the fixture `table-with-dv-small` (2 versions, a DV at version 1): a first run
mirrors version 0 (the first snapshot, the table created), the measured one version 1.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from benchmarks.figures import Figure, Unmeasured, print_figures
from dv_assets.defs.delta.assets import partition_key
from dv_assets.defs.sensors import mirror_range_request
from dv_assets.defs.sources import DeltaSource
from dv_assets.mirror.settings import CatalogConfig
from testkit.launched_run import LaunchedRun, code_server
from tests.helpers.dagster import sources_file
from tests.helpers.paths import DELTA_FIXTURES

FIXTURE = "table-with-dv-small"
TARGET_SECONDS = 15.0


def launched_mirror_runs(tmp: Path) -> list[LaunchedRun]:
    """A code server over one copy of the fixture; `mirror_<name>` of version 0, then of version 1."""
    delta = tmp / "delta" / FIXTURE
    shutil.copytree(DELTA_FIXTURES / FIXTURE, delta)
    source = DeltaSource(name="small", delta_path=str(delta), iceberg_table="fleet.small")
    tables = Path(sources_file(tmp / "tables.yaml", CatalogConfig.under(tmp / "iceberg"), source))
    runs = []
    with code_server(tmp, tables) as server:
        with server.instance() as instance:
            instance.add_dynamic_partitions(source.partitions_name, [partition_key(0), partition_key(1)])
        for version in (0, 1):
            runs.append(
                server.launch(source.mirror_job_name, mirror_range_request(source, version, version).tags)
            )
    return runs


def describe(run: LaunchedRun) -> str:
    return (
        f"{run.status.value} in {run.seconds:.1f} s, {run.tree.pythons} Python processes, "
        f"{run.tree.jvms} JVMs, peak RSS {run.tree.peak_rss / 2**30:.2f} GiB\n    processes: "
        + ", ".join(f"{kind} x{n}" for kind, n in sorted(run.tree.kinds().items()))
    )


def dagster_run_figures(tmp: Path) -> list[Figure | Unmeasured]:
    if not sys.platform.startswith("linux"):
        return [Unmeasured("fleet: Dagster mirror run of one small version", "reads /proc (Linux only)")]
    first, run = launched_mirror_runs(tmp / "dagster_run")
    print(f"  Dagster mirror run, version 0 (table created): {describe(first)}", flush=True)
    print(f"  Dagster mirror run, version 1: {describe(run)}", flush=True)
    assert run.status.value == "SUCCESS", run.run_id
    return [
        Figure(
            "fleet: Dagster mirror run of one small version, from launch",
            run.seconds,
            "s",
            TARGET_SECONDS,
            True,
        ),
        Figure("fleet: JVMs started by that run", run.tree.jvms, "", 1, at_most=True),
        Figure(
            "fleet: that run's peak RSS, process tree", run.tree.peak_rss / 2**30, "GiB", 1.0, at_most=True
        ),
    ]


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory(prefix="dvmirror-dagster-run-") as name:
        print_figures(dagster_run_figures(Path(name)), blank_line=False)
