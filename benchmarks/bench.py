"""`make bench`: the scale figures of issue 9, each measured in one run and printed next to its target as
a ratio (never part of `make test`).

The Delta tables are synthetic and written directly (Parquet data files, JSON commits and DV files laid
out as Delta's PROTOCOL.md says: `SyntheticTable` of testkit/synthetic.py), except the last
figure's, which Delta Spark writes and rewrites:

    .venv/bin/python benchmarks/bench.py [--files 100000] [--dvs 10000] [--memory-dvs 100000]
        [--backlog 200]
        [--only backlog|freshness|iceberg|install|million|ten-million|fleet|object-store|cluster|soak]
        [--million] [--million-files 1000000] [--cluster-files 100000] [--cluster-dvs 20000] [--repeats 3]

Spark start-up is excluded from every time. Figures: per-version cost at 100,000 files vs 100 files;
the first version of a 100,000-file table; the v3 DV work of a 10,000-DV version on the default settings
(issue 18: <= 0.2 s on a local master), and its DV bytes per second against `cp`; v2 positions per second
per core; peak driver memory (Python peak RSS + JVM peak heap, in a process of its own whose heap is
capped) during a version of 100,000 DVs, and that version's seconds (issue 18: <= 4 s); a 1%
DELETE mirrored vs `REORG … APPLY (PURGE)` on a copy (bytes written and time); a backlog of 200 versions
mirrored by Dagster as ONE range run of `mirror_<name>` (both assets and their checks), from the run's
step stats: the checks' time against the mirroring's. Then the freshness figures of issue 17
(benchmarks/freshness.py, `--only freshness`; a few minutes): `dvmirror status` and a no-op `dvmirror
sync` (wall time, no JVM), `dvmirror sync` of one small version against Spark start-up alone, the follow
mode's and the Dagster sensor's Delta commit -> Iceberg snapshot visible (Spark start-up included where
the path pays it). Then the CLI fleet figures of issue 29 (benchmarks/fleet.py, `--only fleet`; about
15 minutes on a loaded 2-core machine): `dvmirror sync --tables` of 20 and 300 copies of a small fixture
table, per table (300 vs 20: target 1.2x) and against a table's own `dvmirror sync` process; a follower
over the 300 with one new commit on each (measured at 300 tables: target 60 s) and its process tree's
peak RSS (target 3 GiB); and the Dagster fleet figures (benchmarks/fleet_dagster.py; 20, 100 and 300 tables
mirrored first, about 30 minutes): the definitions build and one sensor cycle per table (300 vs 20:
target 1.2x), and `delta_version_sensor`'s real interval under a `dagster-daemon` over 300 tables for
5 minutes (target 1.2x its nominal 30 s); and a Dagster mirror run of one small version launched as a
deployment launches it (benchmarks/dagster_run.py: target 15 s from launch, one JVM), its peak RSS.
Then issue 28's (benchmarks/install.py, `--only install`): Spark start-up of an installed package without
a jars folder (the packaged helper, Maven coordinates through Ivy) over a jars folder's, on its second
run (target <= 1 s), with Ivy resolving on a warm cache, and on the first run. Then issue 35's cluster
figures (benchmarks/cluster.py, `--only cluster`; about 6 minutes): the first version of a 100,000-file
table with 20,000 DVs (626 MiB of them) in local mode and on a Spark standalone cluster the bench starts
(a master and 2 workers on loopback), the driver's heap capped at 1 GiB in both: time and DV seconds
against local mode, the driver's peak memory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: testkit, tests.helpers

import dagster as dg
from pyspark.sql import SparkSession

from benchmarks.cluster import cluster_figures
from benchmarks.dagster_run import dagster_run_figures
from benchmarks.driver_memory import peaks, reset_peaks
from benchmarks.figures import Figure, Unmeasured, print_figures
from benchmarks.fleet import fleet_figures
from benchmarks.fleet_dagster import dagster_fleet_figures
from benchmarks.freshness import freshness_figures
from benchmarks.iceberg_side_by_side import iceberg_side_by_side_figures
from benchmarks.install import install_figures
from benchmarks.million import TEN_MILLION, million_figures
from benchmarks.object_store import object_store_figures
from benchmarks.soak import soak_figures
from dv_assets.defs.delta.assets import partition_key
from dv_assets.defs.factory import build_definitions
from dv_assets.defs.iceberg.checks import CHECK_NAMES, ONE_DV
from dv_assets.defs.sensors import mirror_range_request
from dv_assets.defs.sources import DeltaSource
from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from dv_assets.mirror.spark import get_or_create_spark
from dv_assets.mirror.sync import sync_table
from testkit.synthetic import SyntheticTable


def _timed_sync(spark: SparkSession, root: Path, table: str, until: int, **kwargs) -> float:
    began = time.monotonic()
    result = sync_table(spark, root, table, until_version=until, **kwargs)
    assert result.mirrored_versions and result.mirrored_versions[-1] == until, result.mirrored_versions
    return time.monotonic() - began


def per_version_and_first_version(spark: SparkSession, tmp: Path, files: int) -> list[Figure]:
    """The per-version cost of small versions, at 100 files and at `files`: five versions of 10 DVs
    each, mirrored in one run, timed per version (the sync's own per-version seconds, as `--json` gives
    them), and, for contrast, one more such version in a run of its own (which replays the log first)."""
    times: dict[int, float] = {}
    first = 0.0
    for size in (100, files):
        table = SyntheticTable(tmp / f"flat_{size}", rows_per_file=100)
        v0 = table.create(size)
        seconds = _timed_sync(spark, table.root, f"bench.flat_{size}", v0)
        if size == files:
            first = seconds
        for round_ in range(5):
            touched = table.files[round_ * 10 : round_ * 10 + 10]
            table.delete(touched, lambda _i, r=round_: range(r, 100, 7))
        result = sync_table(spark, table.root, f"bench.flat_{size}")
        times[size] = statistics.median(v.seconds for v in result.versions)
        version, _ = table.delete(table.files[50:60], lambda _i: range(5, 100, 9))
        alone = _timed_sync(spark, table.root, f"bench.flat_{size}", version)
        print(
            f"  {size:>7} files: first version {seconds:.1f} s; a 10-DV version {times[size] * 1000:.0f} ms "
            f"in a run of several, {alone * 1000:.0f} ms in a run of its own"
        )
    return [
        Figure(
            f"a 10-file version at {files:,} files vs at 100 files", times[files] / times[100], "x", 1.2, True
        ),
        Figure(f"first version of a {files:,}-file table", first, "s", 30.0, True),
        Figure(
            f"first version of a {files:,}-file table, files per second",
            files / first,
            "files/s",
            3000,
            False,
        ),
    ]


def _cores_used(spark: SparkSession, converted_on: str) -> int:
    """Cores that did a version's DV work: one on the driver, else the Spark tasks' parallelism."""
    if not converted_on.startswith("spark"):
        return 1
    tasks = int(converted_on.split("(")[1].split()[0])
    return max(1, min(tasks, spark.sparkContext.defaultParallelism))


# Versions of the DV figures, each giving every file a new DV: the figures take their median.
DV_VERSIONS = 3
DV_WORK_TARGET_SECONDS = 0.2  # issue 18: v3 DV work of a 10,000-DV version, default settings, local master


def dv_bytes_against_cp(spark: SparkSession, tmp: Path, dvs: int) -> list[Figure]:
    """The DV work of a version of `dvs` DVs (read each DV file once, verify, frame, write the Puffin
    file: the version's `dv_seconds`) on the default settings (on a local master: the driver), against
    issue 18's target (0.2 s for 10,000 DVs, 20 µs a DV, scaled to `dvs`); and in bytes per second against
    `cp` of the same DV file (the command, as the issue measured it; an in-process copy is printed for
    contrast), and the whole version's rate (plan, DV work and the Iceberg commit). Medians of
    DV_VERSIONS such versions mirrored in one run, each giving `dvs` other files their first DV."""
    table = SyntheticTable(tmp / "v3_dvs", rows_per_file=1000)
    v0 = table.create(dvs * DV_VERSIONS)
    _timed_sync(spark, table.root, "bench.v3_dvs", v0)
    dv_bytes = 0
    for round_ in range(DV_VERSIONS):
        touched = table.files[round_ * dvs : (round_ + 1) * dvs]
        version, dv_bytes = table.delete(touched, lambda i: range(i % 50, 1000, 3))
    result = sync_table(spark, table.root, "bench.v3_dvs", until_version=version)
    assert len(result.versions) == DV_VERSIONS and all(v.dvs_written == dvs for v in result.versions)
    dv_seconds = statistics.median(v.dv_seconds for v in result.versions)
    seconds = statistics.median(v.seconds for v in result.versions)
    commit_seconds = statistics.median(v.commit_seconds for v in result.versions)
    dv_file = max(table.root.glob("deletion_vector_*.bin"), key=lambda p: p.stat().st_mtime)
    copies = []
    for attempt in range(5):
        began = time.monotonic()
        subprocess.run(["cp", str(dv_file), str(tmp / f"copy{attempt}.bin")], check=True)
        copies.append(time.monotonic() - began)
    cp_seconds = statistics.median(copies)
    began = time.monotonic()
    shutil.copyfile(dv_file, tmp / "copy.bin")
    copyfile_seconds = max(time.monotonic() - began, 1e-6)
    cp_rate = dv_file.stat().st_size / cp_seconds
    dv_rate = dv_bytes / dv_seconds
    copyfile_rate = dv_file.stat().st_size / copyfile_seconds
    last = result.versions[-1]
    print(
        f"  v3: {dvs:,} DVs, {dv_bytes:,} bytes; DV work {dv_seconds:.3f} s "
        f"({1e6 * dv_seconds / dvs:.1f} µs a DV; each version: "
        f"{', '.join(f'{v.dv_seconds:.3f}' for v in result.versions)} s; {last.dvs_converted_on}: "
        f"{last.dv_placement}; threshold {last.executor_threshold}), whole version {seconds:.2f} s "
        f"(commit {commit_seconds:.2f} s); `cp` {cp_seconds * 1000:.1f} ms, in-process copy "
        f"{copyfile_seconds * 1000:.1f} ms (the DV work reaches {dv_rate / copyfile_rate:.3f} of it)"
    )
    return [
        Figure(
            f"v3: DV work of a {dvs:,}-DV version, default settings, {spark.sparkContext.master}",
            dv_seconds,
            "s",
            DV_WORK_TARGET_SECONDS * dvs / 10_000,
            True,
        ),
        Figure(
            f"v3: DV bytes/s of the DV work, {dvs:,} DVs, against `cp`",
            dv_rate / cp_rate,
            "of cp",
            0.5,
            False,
        ),
        Figure(
            f"v3: DV bytes/s of the whole version, {dvs:,} DVs, against `cp`",
            (dv_bytes / seconds) / cp_rate,
            "of cp",
            0.5,
            False,
        ),
    ]


def positions_per_core(spark: SparkSession, tmp: Path) -> list[Figure]:
    """A v2 version deleting every other row of ten 1,000,000-row files: positions written per second
    of the DV work per core that did it, and of the whole version (all cores counted)."""
    rows, files = 1_000_000, 10
    table = SyntheticTable(tmp / "v2_positions", rows_per_file=rows)
    v0 = table.create(files)
    _timed_sync(spark, table.root, "bench.v2_positions", v0, format_version=2)
    version, _ = table.delete(table.files, lambda i: range(i % 2, rows, 2))
    result = sync_table(spark, table.root, "bench.v2_positions", until_version=version)
    (mirrored,) = result.versions
    positions = files * rows // 2
    cores = _cores_used(spark, mirrored.dvs_converted_on)
    all_cores = max(1, spark.sparkContext.defaultParallelism)
    print(
        f"  v2: {positions:,} positions; DV work {mirrored.dv_seconds:.2f} s on {cores} core(s) "
        f"({mirrored.dvs_converted_on}); whole version {mirrored.seconds:.2f} s"
    )
    return [
        Figure(
            "v2: positions written per second per core (DV work)",
            positions / mirrored.dv_seconds / cores,
            "pos/s",
            20e6,
            False,
        ),
        Figure(
            f"v2: positions per second per core (whole version, {all_cores} cores)",
            positions / mirrored.seconds / all_cores,
            "pos/s",
            20e6,
            False,
        ),
    ]


# The memory version runs in a process of its own whose JVM heap is capped: a JVM with room to spare
# lets garbage pile up to its limit, so the cap, not the work, would set the peak. The version must
# complete within it; the figure is what was really used under it.
MEMORY_RUN_HEAP = "640m"
WHOLE_VERSION_TARGET_SECONDS = 4.0  # issue 18: a 100,000-DV version, whole version


def peak_memory(tmp: Path, dvs: int) -> list[Figure]:
    """Peaks while one version gives `dvs` files a DV, measured in a child process (a Spark driver with a
    heap of MEMORY_RUN_HEAP): its Python resident set (VmHWM, reset just before the version) plus the
    JVM heap pools' peak use (reset just before); and that version's seconds, against issue 18's target
    (4 s for 100,000 DVs, scaled to `dvs`)."""
    env = {**os.environ, "DVMIRROR_SPARK_DRIVER_MEMORY": MEMORY_RUN_HEAP}
    child = subprocess.run(
        [sys.executable, __file__, "--memory-child", str(tmp / "memory"), "--memory-dvs", str(dvs)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    measured = json.loads(child.stdout.strip().splitlines()[-1])
    python_peak, jvm_peak = measured["python_peak"], measured["jvm_peak"]
    print(
        f"  {dvs:,} DVs in one version: {measured['seconds']:.1f} s ({measured['converted_on']}: "
        f"{measured['placement']}; DV work {measured['dv_seconds']:.2f} s, commit "
        f"{measured['commit_seconds']:.2f} s); "
        f"Python peak RSS {python_peak / 2**20:.0f} MiB, JVM peak heap {jvm_peak / 2**20:.0f} MiB "
        f"(heap capped at {MEMORY_RUN_HEAP})"
    )
    return [
        Figure(
            f"peak driver memory (Python RSS + JVM heap), a version of {dvs:,} DVs",
            (python_peak + jvm_peak) / 2**30,
            "GiB",
            1.0,
            True,
        ),
        Figure(
            f"a {dvs:,}-DV version, whole version (default settings)",
            measured["seconds"],
            "s",
            WHOLE_VERSION_TARGET_SECONDS * dvs / 100_000,
            True,
        ),
    ]


def _memory_child(root: Path, dvs: int) -> None:
    settings = MirrorSettings.resolve(catalog=CatalogConfig.under(root / "iceberg"))
    spark = get_or_create_spark(settings)
    table = SyntheticTable(root / "delta", rows_per_file=100)
    v0 = table.create(dvs)
    _timed_sync(spark, table.root, "bench.memory", v0)
    version, _ = table.delete(table.files, lambda i: range(i % 7, 100, 11))
    reset_peaks(spark)
    result = sync_table(spark, table.root, "bench.memory", until_version=version)
    python_peak, jvm_peak = peaks(spark)
    (mirrored,) = result.versions
    print(
        json.dumps(
            {
                "python_peak": python_peak,
                "jvm_peak": jvm_peak,
                "seconds": mirrored.seconds,
                "converted_on": mirrored.dvs_converted_on,
                "placement": mirrored.dv_placement,
                "dv_seconds": mirrored.dv_seconds,
                "commit_seconds": mirrored.commit_seconds,
            }
        )
    )
    spark.stop()


def delete_vs_rewrite(spark: SparkSession, tmp: Path) -> list[Figure]:
    root = tmp / "rewrite"
    ref = f"delta.`{root}`"
    spark.sql(
        f"CREATE TABLE {ref} (id BIGINT, payload STRING) USING delta "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    spark.range(0, 2_000_000).selectExpr("id", "sha2(CAST(id AS STRING), 256) AS payload").repartition(
        8
    ).write.format("delta").mode("append").save(str(root))
    sync_table(spark, root, "bench.rewrite")
    spark.sql(f"DELETE FROM {ref} WHERE id % 100 = 0")
    began = time.monotonic()
    result = sync_table(spark, root, "bench.rewrite")
    mirror_seconds = time.monotonic() - began
    mirror_bytes = sum(v.bytes_written for v in result.versions)
    copy = tmp / "rewrite_copy"
    shutil.copytree(root, copy)
    before = {p for p in copy.rglob("*.parquet")}
    began = time.monotonic()
    spark.sql(f"REORG TABLE delta.`{copy}` APPLY (PURGE)")
    rewrite_seconds = time.monotonic() - began
    rewrite_bytes = sum(p.stat().st_size for p in copy.rglob("*.parquet") if p not in before)
    print(
        f"  1% DELETE of 2,000,000 rows: mirrored {mirror_bytes:,} bytes in {mirror_seconds:.2f} s; "
        f"REORG PURGE rewrote {rewrite_bytes:,} bytes in {rewrite_seconds:.2f} s"
    )
    return [
        Figure(
            "1% DELETE mirrored vs REORG PURGE: bytes",
            mirror_bytes / rewrite_bytes,
            "of rewrite",
            1 / 1000,
            True,
        ),
        Figure(
            "1% DELETE mirrored vs REORG PURGE: time",
            mirror_seconds / rewrite_seconds,
            "of rewrite",
            1 / 20,
            True,
        ),
    ]


def backlog_in_one_run(settings: MirrorSettings, tmp: Path, versions: int) -> list[Figure]:
    """A Delta table of 100 files and `versions` DELETE versions after version 0 (each gives 5 files a
    new DV), mirrored by the `mirror_<name>` job as one partition-range run over every version, on the
    bench's Spark session (start-up excluded): the run's wall time, and each step's from the run's step
    stats. The blocking checks evaluate every version, the full scan the newest only. Targets (issue 16:
    checks that scale with a backlog): the checks cost no more than the mirroring itself; a backlog
    version costs at most 0.5 s all told; the per-version DV check (one Spark metadata-table query and
    a log replay per version) at most 0.1 s. The synthetic log has no checkpoint (Delta writers add one
    every 10 or 100 commits), so each version's log replay, and the full scan's first Delta read of the
    newest version, replay every commit before it."""
    table = SyntheticTable(tmp / "backlog", rows_per_file=1000)
    table.create(100)
    for version in range(1, versions + 1):
        touched = [table.files[(version * 5 + i) % 100] for i in range(5)]
        table.delete(touched, lambda i, v=version: range((v + i) % 7, 1000, 50 + v % 13))
    source = DeltaSource(name="backlog", delta_path=str(table.root), iceberg_table="bench.backlog")
    defs = build_definitions([source], settings)
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(
            source.partitions_name, [partition_key(v) for v in range(versions + 1)]
        )
        began = time.monotonic()
        result = defs.resolve_job_def(source.mirror_job_name).execute_in_process(
            instance=instance,
            tags=dict(mirror_range_request(source, 0, versions).tags),
            run_config={"loggers": {"console": {"config": {"log_level": "ERROR"}}}},
        )
        seconds = time.monotonic() - began
        assert result.success
        steps = {
            s.step_key: (s.end_time or 0) - (s.start_time or 0)
            for s in instance.get_run_step_stats(result.run_id)
        }
        evaluations = result.get_asset_check_evaluations()
    assert all(e.passed for e in evaluations)
    by_check = {name: sum(t for k, t in steps.items() if k.endswith(name)) for name in CHECK_NAMES}
    mirroring = sum(t for k, t in steps.items() if k.endswith(f"iceberg__{source.name}"))
    recording = sum(t for k, t in steps.items() if k.endswith(f"delta__{source.name}"))
    checks = sum(by_check.values())
    count = versions + 1
    print(
        f"  {count} versions in one run: {seconds:.1f} s ({1000 * seconds / count:.0f} ms/version); steps: "
        f"delta {recording:.1f} s, iceberg (mirroring) {mirroring:.1f} s, "
        + ", ".join(f"{name} {t:.1f} s" for name, t in by_check.items())
        + f"; {len(evaluations)} check evaluations"
    )
    return [
        Figure(f"a {count}-version backlog in one Dagster run, per version", seconds / count, "s", 0.5, True),
        Figure(
            f"a {count}-version backlog: the checks' time against the mirroring's",
            checks / mirroring,
            "of mirror",
            1.0,
            True,
        ),
        Figure(
            f"a {count}-version backlog: {ONE_DV} per version",
            by_check[ONE_DV] / count,
            "s",
            0.1,
            True,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=100_000, help="files of the big table")
    parser.add_argument("--dvs", type=int, default=10_000, help="DVs of the v3 bytes-per-second version")
    parser.add_argument("--memory-dvs", type=int, default=100_000, help="DVs of the memory version")
    parser.add_argument("--backlog", type=int, default=200, help="versions of the Dagster backlog run")
    parser.add_argument(
        "--only",
        choices=[
            "backlog",
            "freshness",
            "iceberg",
            "install",
            "million",
            "ten-million",
            "fleet",
            "object-store",
            "cluster",
            "soak",
        ],
        help="measure these figures only",
    )
    parser.add_argument(
        "--million", action="store_true", help="also the million-file figures (benchmarks/million.py)"
    )
    parser.add_argument("--million-files", type=int, default=1_000_000, help="files of the million table")
    parser.add_argument(
        "--object-store-files", type=int, default=100_000, help="files of the table on S3 (object-store)"
    )
    parser.add_argument(
        "--object-store-delay-ms", type=float, default=10.0, help="the S3 proxy's delay per request"
    )
    parser.add_argument("--cluster-files", type=int, default=100_000, help="files of the cluster's table")
    parser.add_argument("--cluster-dvs", type=int, default=20_000, help="DVs of the cluster's first version")
    parser.add_argument("--soak-minutes", type=float, default=30.0, help="how long the soak runs (soak)")
    parser.add_argument("--repeats", type=int, default=3, help="repetitions of the issue-18 figures (median)")
    parser.add_argument("--memory-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child is not None:
        _memory_child(args.memory_child, args.memory_dvs)
        return
    with tempfile.TemporaryDirectory(prefix="dvmirror-bench-") as name:
        tmp = Path(name)
        if args.only in ("install", "cluster", "soak"):  # processes of their own: no session here
            run_alone = {
                "install": lambda: install_figures(tmp),
                "cluster": lambda: cluster_figures(tmp, args.cluster_files, args.cluster_dvs),
                "soak": lambda: soak_figures(tmp, minutes=args.soak_minutes),
            }
            figures = run_alone[args.only]()
            print_figures(figures)
            return
        settings = MirrorSettings.resolve(catalog=CatalogConfig.under(tmp / "iceberg"))
        spark = get_or_create_spark(settings)
        print(
            f"dv-mirror bench: {os.cpu_count()} cores; Spark {spark.version}, "
            f"master {spark.sparkContext.master}"
        )
        figures: list[Figure | Unmeasured] = []
        if args.only is None:
            figures += per_version_and_first_version(spark, tmp, args.files)
            figures += dv_bytes_against_cp(spark, tmp, args.dvs)
            figures += positions_per_core(spark, tmp)
            figures += delete_vs_rewrite(spark, tmp)
            figures += peak_memory(tmp, args.memory_dvs)
        if args.only in (None, "backlog"):
            figures += backlog_in_one_run(settings, tmp, args.backlog)
        if args.only in (None, "freshness"):
            figures += freshness_figures(spark, settings, tmp)
        if args.only in (None, "iceberg"):
            figures += iceberg_side_by_side_figures(spark, tmp, args.repeats)
        if args.only in (None, "fleet"):
            figures += fleet_figures(tmp)
            figures += dagster_fleet_figures(tmp, mirrored=True, daemon_seconds=300)
            figures += dagster_run_figures(tmp)
        if args.only in (None, "object-store"):
            figures += object_store_figures(
                spark, settings.catalog, tmp, args.object_store_files, args.object_store_delay_ms
            )
        if args.only is None:
            figures += install_figures(tmp)
            figures += cluster_figures(tmp, args.cluster_files, args.cluster_dvs)
        if (args.only is None and args.million) or args.only == "million":
            figures += million_figures(tmp, args.million_files, args.repeats)
        if args.only == "ten-million":  # issue 35's 10,000,000 files: about an hour, never with the rest
            figures += million_figures(tmp, TEN_MILLION, args.repeats)
        print_figures(figures)
        spark.stop()


if __name__ == "__main__":
    main()
