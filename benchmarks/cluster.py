"""Issue 35's cluster figures (`bench.py --only cluster`; alone: `.venv/bin/python benchmarks/cluster.py
[--files 100000] [--dvs 20000] [--rows-per-file 262144] [--heap 1g] [--repeats 2]`): the first version
of a table with many DVs mirrored in local mode and on a Spark standalone cluster, the driver's JVM heap
capped at `--heap` in both.

The bench starts the cluster itself (testkit/spark_cluster.py: a master and 2 workers on 127.0.0.1 from
the pyspark package's own `spark-class`, 1 core and 1 GiB each, one executor of 512 MiB per worker) and
stops it on the way out, failure or not. The executors get the mirror's jars the way any cluster does:
through the driver's `spark.jars` (spark.py), served by the driver, nothing copied by hand; their Python
tasks run this interpreter (the same machine).

The table (`SyntheticTable` of testkit/synthetic.py, `--rows-per-file` rows a file, hard links to one
file's bytes): version 0 adds `--files` files, then DELETEs of DVS_PER_DELETE files each give `--dvs` files
a DV deleting every other row (one DV file per DELETE, as Delta writes them; at 262,144 rows a DV is
32 KiB, Roaring bitmap containers, so 20,000 DVs are 640 MiB: what a DELETE of half the rows of large
files leaves), then Delta Spark's checkpoint at the last version and the commits before it cleaned up, so
the mirror's first version is the checkpoint's: every file and every DV in one snapshot. A small table
(SMALL_FILES files of SMALL_ROWS rows, SMALL_DVS DVs) is mirrored first in each process, as a warm-up (its
DVs in Spark tasks wherever the master allows, so a cluster's Python workers are up) and checked by a
count through Iceberg Java (on the cluster, Iceberg's read tasks run in the executors).

Each run is a process of its own (a fresh JVM whose heap is capped), local mode and the cluster
alternately, `--repeats` each (times: medians; memory: the highest peak). The big table's first version
is mirrored with the engine's own settings: `DVMIRROR_EXECUTOR_DVS` (default 50,000) says from how many
DVs, `DVMIRROR_EXECUTOR_BYTES` (default 256 MiB) from how many DV bytes, a version's DV work goes to
Spark tasks on a cluster master; a local master keeps it on the driver.
Measured: the version's wall time, its DV seconds (`VersionResult.dv_seconds`, where: `dvs_converted_on`)
and commit seconds (`commit_seconds`: staging the data files into manifests, written by the driver's JVM,
the delete files into the row delta, and the catalog commit), the peak driver memory (Python peak RSS +
JVM peak heap, benchmarks/driver_memory.py). The mirror is checked after each run (the snapshot summary's
totals of files, rows and deleted rows against the builder's), and on the cluster the workers' work
folders must hold executor folders for the application.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from pyroaring import BitMap64

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: testkit, tests.helpers

from benchmarks.driver_memory import peaks, reset_peaks
from benchmarks.figures import Figure, Unmeasured, print_figures
from benchmarks.million import current_summary
from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from dv_assets.mirror.spark import get_or_create_spark
from dv_assets.mirror.sync import sync_table
from testkit.spark_cluster import StandaloneCluster, standalone_cluster
from testkit.synthetic import SyntheticTable

DVS_PER_DELETE = 10_000
ROWS_PER_FILE = 262_144  # every other row deleted: a DV of 4 Roaring bitmap containers, 32 KiB
SMALL_FILES = 100
SMALL_ROWS = 100
SMALL_DVS = 20
HEAP = "1g"
WORKERS = 2
WORKER_MEMORY = "1g"
EXECUTOR_MEMORY = "512m"
LOCAL_MASTER = "local[2]"
# Targets. The cluster's time against local mode's: on this 2-core machine the executors share the
# driver's two cores and add a job (tasks, pickled shares, Python workers), so no speed-up is to be had
# here, and a ratio above 1 is what shipping the work costs. The memory targets are the point of a
# cluster: the driver, capped, stays within its cap, and handing the DV work to executors costs it nothing.
TIME_RATIO_TARGET = 1.0
MEMORY_RATIO_TARGET = 1.0


def deleted_rows(rows: int) -> BitMap64:
    """The rows each DV deletes: every other one."""
    return BitMap64(range(0, rows, 2))


def build(root: Path, files: int, dvs: int, rows: int) -> tuple[int, int]:
    """The table described above: its first (checkpoint) version and its DV bytes."""
    assert dvs <= files
    table = SyntheticTable(root, rows_per_file=rows)
    table.create(files, real=1)  # hard links to the bytes of one: the mirror reads stats, not data
    deleted = deleted_rows(rows)  # one bitmap, encoded once a DELETE
    dv_bytes = 0
    for first in range(0, dvs, DVS_PER_DELETE):
        dv_bytes += table.delete(table.files[first : min(dvs, first + DVS_PER_DELETE)], lambda _i: deleted)[1]
    table.write_checkpoint()
    table.clean_up_log()
    return table.version, dv_bytes


def _check_mirror(spark, table: str, files: int, dvs: int, rows: int) -> None:
    """The current snapshot holds every data file, row and deleted row the builder wrote (its summary's
    totals: a count through Iceberg Java would open every file)."""
    summary = current_summary(spark, table)
    wanted = {
        "total-data-files": files,
        "total-records": files * rows,
        "total-position-deletes": dvs * len(deleted_rows(rows)),
        "total-delete-files": dvs,  # v3: one DV (a Puffin blob) per data file with deletes
    }
    got = {key: int(summary[key]) for key in wanted}
    if got != wanted:
        raise AssertionError(f"the mirror {table} holds {got}, not {wanted}")


def _measure(root: Path, master: str, files: int, dvs: int, rows: int) -> dict:
    """In a process of its own (its JVM heap capped by DVMIRROR_SPARK_DRIVER_MEMORY): the warm-up on the
    small table and its count through Iceberg Java, then the big table's first version, measured."""
    mode = "local" if master.startswith("local") else "cluster"
    catalog = Path(tempfile.mkdtemp(prefix=f"iceberg-{mode}-", dir=root))  # each run mirrors anew
    settings = MirrorSettings.resolve(catalog=CatalogConfig.under(catalog))
    overrides = {"spark.master": master}
    if mode == "cluster":
        overrides |= {"spark.executor.memory": EXECUTOR_MEMORY, "spark.cores.max": str(WORKERS)}
    spark = get_or_create_spark(settings, overrides)
    small = sync_table(spark, root / "small", "bench.small", executors=replace(settings.executors, min_dvs=1))
    counted = spark.table("dvmirror.bench.small").count()  # Iceberg Java's read (tasks on the executors)
    wanted = SMALL_FILES * SMALL_ROWS - SMALL_DVS * len(deleted_rows(SMALL_ROWS))
    if counted != wanted:
        raise AssertionError(f"Iceberg Java counts {counted} rows in the small mirror ({mode}), not {wanted}")
    reset_peaks(spark)
    began = time.monotonic()
    result = sync_table(spark, root / "big", "bench.big", executors=settings.executors)
    seconds = time.monotonic() - began
    python_peak, jvm_peak = peaks(spark)
    (first,) = result.versions
    _check_mirror(spark, "bench.big", files, dvs, rows)
    report = {
        "mode": mode,
        "master": spark.sparkContext.master,
        "app": spark.sparkContext.applicationId,
        "heap_max": int(spark._jvm.java.lang.Runtime.getRuntime().maxMemory()),
        "small_converted_on": [v.dvs_converted_on for v in small.versions if v.dvs_written],
        "small_rows": counted,
        "seconds": seconds,
        "version_seconds": first.seconds,
        "dv_seconds": first.dv_seconds,
        "commit_seconds": first.commit_seconds,
        "dvs_written": first.dvs_written,
        "data_files_added": first.data_files_added,
        "converted_on": first.dvs_converted_on,
        "placement": first.dv_placement,
        "python_peak": python_peak,
        "jvm_peak": jvm_peak,
    }
    spark.stop()
    shutil.rmtree(catalog)  # its Puffin files: the DV bytes once more
    return report


def _run_child(root: Path, master: str, files: int, dvs: int, rows: int, heap: str) -> dict | str:
    """A measuring process: its JSON line, or why it failed (printed with its output's tail)."""
    command = [sys.executable, __file__, "--child", str(root), "--master", master]
    env = {**os.environ, "DVMIRROR_SPARK_DRIVER_MEMORY": heap}
    began = time.monotonic()
    child = subprocess.run(
        [*command, "--files", str(files), "--dvs", str(dvs), "--rows-per-file", str(rows)],
        env=env,
        capture_output=True,
        text=True,
    )
    if child.returncode == 0:
        return json.loads(child.stdout.strip().splitlines()[-1])
    tail = (child.stderr or child.stdout).strip().splitlines()[-30:]
    print(f"  the {master} process failed (exit {child.returncode}) after {time.monotonic() - began:.0f} s:")
    print("\n".join(tail))
    return f"the sync failed: {(tail or ['no output'])[-1]}"


def _describe(run: dict) -> str:
    return (
        f"{run['seconds']:.1f} s (version {run['version_seconds']:.1f} s: DVs {run['dv_seconds']:.2f} s on "
        f"{run['converted_on']}, commit with manifests {run['commit_seconds']:.2f} s); driver peak: "
        f"Python {run['python_peak'] / 2**20:.0f} MiB + JVM heap {run['jvm_peak'] / 2**20:.0f} MiB "
        f"(heap max {run['heap_max'] / 2**20:.0f} MiB)"
    )


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def cluster_figures(
    tmp: Path, files: int, dvs: int, rows: int = ROWS_PER_FILE, heap: str = HEAP, repeats: int = 2
) -> list[Figure | Unmeasured]:
    """Build both tables, start the cluster, then measure local mode and the cluster alternately
    (`repeats` each, A B A B: the machine's load changes under both alike); times are medians, memory
    peaks the highest."""
    root = tmp / "cluster"
    root.mkdir()
    began = time.monotonic()
    build(root / "small", SMALL_FILES, SMALL_DVS, SMALL_ROWS)
    version, dv_bytes = build(root / "big", files, dvs, rows)
    print(
        f"  built a {files:,}-file table of {rows:,} rows a file with {dvs:,} DVs of {dv_bytes / 2**20:,.0f} "
        f"MiB (first version {version}, a checkpoint) and a {SMALL_FILES}-file one in "
        f"{time.monotonic() - began:.1f} s; load average {_load()}"
    )
    name = f"cluster, {files:,} files/{dvs:,} DVs"  # a first version of that many
    runs: dict[str, list[dict]] = {"local": [], "cluster": []}
    began = time.monotonic()
    with (
        _sigterm_as_exit(),
        standalone_cluster(root / "spark", workers=WORKERS, cores=1, memory=WORKER_MEMORY) as cluster,
    ):
        print(
            f"  cluster {cluster.master_url}: {WORKERS} workers of 1 core and {WORKER_MEMORY} started in "
            f"{time.monotonic() - began:.1f} s (idle while local mode runs); load average {_load()}"
        )
        for _ in range(repeats):
            for mode, master in (("local", LOCAL_MASTER), ("cluster", cluster.master_url)):
                run = _run_child(root, master, files, dvs, rows, heap)
                if isinstance(run, str):
                    return [Unmeasured(f"{name}: time vs local", f"{mode}: {run}")]
                if mode == "cluster":
                    run["executors"] = _executors(cluster, run["app"])
                    if not run["executors"]:
                        raise AssertionError(f"no worker ran an executor for {run['app']}")
                runs[mode].append(run)
                print(f"  {mode} ({master}, heap {heap}): {_describe(run)}; load average {_load()}")
    last = runs["cluster"][-1]
    print(
        f"  on the cluster: DV placement {last['placement']!r}; the warm-up's DVs on "
        f"{last['small_converted_on']}; the workers ran executors {', '.join(last['executors'])} for "
        f"{last['app']}; Iceberg Java counted {last['small_rows']} rows of the small mirror (both modes)"
    )
    seconds = {mode: _median(mode_runs, "seconds") for mode, mode_runs in runs.items()}
    dv_seconds = {mode: _median(mode_runs, "dv_seconds") for mode, mode_runs in runs.items()}
    commit = {mode: _median(mode_runs, "commit_seconds") for mode, mode_runs in runs.items()}
    peak = {
        mode: max(r["python_peak"] + r["jvm_peak"] for r in mode_runs) for mode, mode_runs in runs.items()
    }
    jvm_peak = max(r["jvm_peak"] for r in runs["cluster"])
    print(
        f"  medians of {repeats}, local / cluster: first version {seconds['local']:.1f} s / "
        f"{seconds['cluster']:.1f} s; DVs {dv_seconds['local']:.2f} s / {dv_seconds['cluster']:.2f} s; "
        f"commit with manifests {commit['local']:.2f} s / {commit['cluster']:.2f} s; highest driver peak "
        f"{peak['local'] / 2**30:.2f} GiB / {peak['cluster'] / 2**30:.2f} GiB"
    )
    figures: list[Figure | Unmeasured] = [
        Figure(f"{name}: time vs local", seconds["cluster"] / seconds["local"], "x", TIME_RATIO_TARGET, True),
        Figure(
            f"{name}: DV seconds vs local driver",
            dv_seconds["cluster"] / max(dv_seconds["local"], 1e-6),
            "x",
            TIME_RATIO_TARGET,
            True,
        ),
        Figure(f"{name}: driver JVM heap peak", jvm_peak / 2**30, "GiB", last["heap_max"] / 2**30, True),
        Figure(
            f"{name}: driver peak vs local", peak["cluster"] / peak["local"], "x", MEMORY_RATIO_TARGET, True
        ),
    ]
    if not last["converted_on"].startswith("spark"):
        figures.append(
            Unmeasured(
                f"{name}: DVs in executors",
                f"converted on {last['converted_on']} ({last['placement']}): below "
                "DVMIRROR_EXECUTOR_DVS and DVMIRROR_EXECUTOR_BYTES",
            )
        )
    return figures


def _executors(cluster: StandaloneCluster, app: str) -> list[str]:
    return [f"{folder.parent.parent.name}/{folder.name}" for folder in cluster.executor_folders(app)]


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


@contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """SIGTERM ends the bench as an exception would, so that the cluster is stopped on the way out (the
    default action would leave its daemons running); the handler before restored after."""
    before = signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(128 + signal.SIGTERM))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=100_000, help="files of the big table")
    parser.add_argument("--dvs", type=int, default=20_000, help="DVs of its first version")
    parser.add_argument("--rows-per-file", type=int, default=ROWS_PER_FILE, help="rows of a file (DV size)")
    parser.add_argument("--heap", default=HEAP, help="the driver's JVM heap (spark.driver.memory)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each mode, alternating (median)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--master", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(_measure(args.child, args.master, args.files, args.dvs, args.rows_per_file)))
        return
    with tempfile.TemporaryDirectory(prefix="dvmirror-cluster-") as name:
        figures = cluster_figures(
            Path(name), args.files, args.dvs, args.rows_per_file, args.heap, args.repeats
        )
        print_figures(figures)


if __name__ == "__main__":
    main()
