"""The million-file figures of issue 18 (`make bench` passes `--million`; alone:
`.venv/bin/python benchmarks/million.py [--files 1000000] [--repeats 3]`).

Two synthetic Delta tables (`SyntheticTable` of testkit/synthetic.py), of 100 files and of
`--files` files, each of ROWS_PER_FILE rows, built the same way: version 0 adds every file; versions
1..10 are DELETEs giving 10 files a DV each; at version 10 a classic checkpoint as Delta Spark writes it
(its default `delta.checkpointInterval` is 10); then the commits before it are cleaned up, as Delta's log
cleanup does once they pass the log retention, so the table's oldest version is the checkpoint's; then
`--repeats` DELETE versions of 10 files each. Only the first REAL_FILES data files have bytes of their own
(every DV goes to one of them); the others are hard links to a few of those (the same bytes and size: the
sync stats every added file, and takes row counts from the stats' numRecords). delta-rs must read the
file count and every file's deleted rows the builder meant, or the bench fails.

Then, in a process of its own whose JVM heap is capped at HEAP, the first version of the big table (the
checkpoint's, mirrored whole) after a warm-up on the small one, with its peak driver memory (Python peak
RSS + JVM peak heap use); and in another, of the default heap (the cap would add garbage collection to a
time figure), each later 10-file DELETE version in a run of its own (a new `sync_table` call in the
running session, the mirror at the version before), at both sizes. Spark start-up is excluded.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: testkit, tests.helpers

from benchmarks.driver_memory import peaks, reset_peaks
from benchmarks.figures import Figure, Unmeasured, print_figures
from benchmarks.fleet import PeakRss
from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from dv_assets.mirror.spark import get_or_create_spark
from dv_assets.mirror.sync import sync_table
from testkit.synthetic import SyntheticTable
from tests.helpers.readers import delta_rs_deleted_rows, delta_rs_files

SMALL_FILES = 100
ROWS_PER_FILE = 100
REAL_FILES = 200
CHECKPOINT_VERSION = 10  # Delta Spark's default delta.checkpointInterval
FILES_PER_DELETE = 10
FIRST_DV = range(0, ROWS_PER_FILE, 10)  # versions 1..10
LATER_DV = range(0, ROWS_PER_FILE, 5)  # the measured versions: a superset, as a later DELETE gives
HEAP = "1536m"  # below the 2 GiB target: a JVM with room to spare lets garbage pile up to its limit
# Issue 35's ten million files: the first version's targets are for the whole process tree (Python and
# the JVM, resident), its heap capped below them.
TEN_MILLION = 10_000_000
TEN_MILLION_HEAP = "2g"
TEN_MILLION_SECONDS = 600.0
TEN_MILLION_TREE_GIB = 8.0


def build(root: Path, files: int, repeats: int) -> dict[str, int]:
    """The table described above; the deleted rows per data file with a DV, by file name."""
    assert files >= SMALL_FILES and REAL_FILES >= FILES_PER_DELETE * CHECKPOINT_VERSION
    table = SyntheticTable(root, rows_per_file=ROWS_PER_FILE)
    table.create(files, real=min(files, REAL_FILES), logged=False)  # commit 0 is cleaned up below
    for version in range(1, CHECKPOINT_VERSION + 1):
        first = (version - 1) * FILES_PER_DELETE
        table.delete(table.files[first : first + FILES_PER_DELETE], lambda _i: FIRST_DV)
    table.write_checkpoint()
    table.clean_up_log()
    for repeat in range(repeats):
        first = repeat * FILES_PER_DELETE
        table.delete(table.files[first : first + FILES_PER_DELETE], lambda _i: LATER_DV)
    later = repeats * FILES_PER_DELETE
    touched = table.files[: FILES_PER_DELETE * CHECKPOINT_VERSION]
    return {name: len(LATER_DV if i < later else FIRST_DV) for i, name in enumerate(touched)}


def check_with_delta_rs(root: Path, files: int, version: int, deleted: dict[str, int]) -> None:
    """delta-rs reads the version's file count and each file's deleted rows as built, or the bench fails."""
    found = len(delta_rs_files(root, version))
    if found != files:
        raise AssertionError(f"delta-rs reads {found:,} files at version {version} of {root}, not {files:,}")
    by_name = {Path(path).name: rows for path, rows in delta_rs_deleted_rows(root, version).items()}
    if by_name != deleted:
        raise AssertionError(f"delta-rs reads other deleted rows per file at version {version} of {root}")


def current_summary(spark, table: str) -> dict[str, str]:
    """The Iceberg table's current snapshot summary, through Iceberg Java."""
    (row,) = spark.sql(
        f"SELECT s.summary FROM dvmirror.{table}.snapshots s JOIN dvmirror.{table}.history h "
        "ON s.snapshot_id = h.snapshot_id WHERE h.is_current_ancestor ORDER BY s.committed_at DESC LIMIT 1"
    ).collect()
    return dict(row["summary"])


def _check_mirror(spark, table: str, files: int, deleted: dict[str, int]) -> None:
    """The mirror's current snapshot holds every data file, every row and every deleted row (the
    summary's totals: a count through Iceberg Java would open a million files)."""
    summary = current_summary(spark, table)
    wanted = {
        "total-data-files": files,
        "total-records": files * ROWS_PER_FILE,
        "total-position-deletes": sum(deleted.values()),
    }
    got = {key: int(summary[key]) for key in wanted}
    if got != wanted:
        raise AssertionError(f"the mirror {table} holds {got}, not {wanted}")


def _tables(tmp: Path, files: int) -> dict[int, tuple[str, Path]]:
    return {SMALL_FILES: ("bench.small", tmp / "small"), files: ("bench.million", tmp / "million")}


def _first_version(tmp: Path, files: int) -> dict:
    """In the heap-capped process: the big table's first version after a warm-up on the small one."""
    spark = get_or_create_spark(MirrorSettings.resolve(catalog=CatalogConfig.under(tmp / "iceberg")))
    tables = _tables(tmp, files)
    name, root = tables[SMALL_FILES]
    sync_table(spark, root, name, until_version=CHECKPOINT_VERSION)  # warm-up: the JVM's first version
    name, root = tables[files]
    reset_peaks(spark)
    began = time.monotonic()
    result = sync_table(spark, root, name, until_version=CHECKPOINT_VERSION)
    seconds = time.monotonic() - began
    python_peak, jvm_peak = peaks(spark)
    (first,) = result.versions
    spark.stop()
    return {
        "seconds": seconds,
        "version_seconds": first.seconds,
        "python_peak": python_peak,
        "jvm_peak": jvm_peak,
    }


def _runs_of_their_own(tmp: Path, files: int, repeats: int) -> dict:
    """In a process of the default heap, the mirrors at CHECKPOINT_VERSION: each later version in a
    run of its own at both sizes (alternating), then the mirrors' contents checked."""
    spark = get_or_create_spark(MirrorSettings.resolve(catalog=CatalogConfig.under(tmp / "iceberg")))
    tables = _tables(tmp, files)
    expected = json.loads((tmp / "deleted.json").read_text())
    # Warm-up: a fresh JVM's first syncs load and compile what every later one uses.
    sync_table(spark, tables[SMALL_FILES][1], "bench.warm_up", until_version=CHECKPOINT_VERSION)
    sync_table(spark, tables[SMALL_FILES][1], "bench.warm_up")
    alone: dict[int, list[float]] = {size: [] for size in tables}
    parts: dict[int, list[dict[str, float]]] = {size: [] for size in tables}
    for version in range(CHECKPOINT_VERSION + 1, CHECKPOINT_VERSION + 1 + repeats):
        for size, (name, root) in tables.items():
            began = time.monotonic()
            result = sync_table(spark, root, name, until_version=version)
            alone[size].append(time.monotonic() - began)
            assert result.mirrored_versions == [version], result.mirrored_versions
            (mirrored,) = result.versions
            parts[size].append({"dv": mirrored.dv_seconds, "commit": mirrored.commit_seconds})
    for size, (name, _root) in tables.items():
        _check_mirror(spark, name, size, expected[str(size)])
    small_rows = spark.table(f"dvmirror.{tables[SMALL_FILES][0]}").count()
    wanted_rows = SMALL_FILES * ROWS_PER_FILE - sum(expected[str(SMALL_FILES)].values())
    if small_rows != wanted_rows:
        raise AssertionError(f"Iceberg Java counts {small_rows} rows in the small mirror, not {wanted_rows}")
    heap = spark.sparkContext.getConf().get("spark.driver.memory")
    spark.stop()
    return {
        "small": alone[SMALL_FILES],
        "big": alone[files],
        "small_parts": parts[SMALL_FILES],
        "big_parts": parts[files],
        "heap": heap,
    }


def _run_child(root: Path, part: str, files: int, repeats: int, env: dict[str, str]) -> dict | str:
    """A measuring process: its JSON line with its process tree's peak resident set (`tree_peak`,
    sampled from /proc while it ran, Spark start-up included), or why it failed (printed with its
    output's tail)."""
    command = [sys.executable, __file__, "--child", str(root), "--part", part, "--files", str(files)]
    began = time.monotonic()
    with subprocess.Popen(
        [*command, "--repeats", str(repeats)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        sampler = PeakRss(child.pid)
        stdout, stderr = child.communicate()
        tree_peak = sampler.stop()
    if child.returncode == 0:
        return json.loads(stdout.strip().splitlines()[-1]) | {"tree_peak": tree_peak}
    tail = (stderr or stdout).strip().splitlines()[-30:]
    print(f"  the {part} process failed (exit {child.returncode}) after {time.monotonic() - began:.0f} s:")
    print("\n".join(tail))
    return f"the sync failed: {(tail or ['no output'])[-1]}"


def _ms(seconds: list[float]) -> str:
    return ", ".join(f"{s * 1000:.0f}" for s in seconds)


def million_figures(tmp: Path, files: int, repeats: int = 3) -> list[Figure | Unmeasured]:
    """Build both tables (timed), check them with delta-rs, measure in two processes of their own."""
    root = tmp / "million"
    root.mkdir()
    began = time.monotonic()
    expected = {
        size: build(root / name, size, repeats) for size, name in ((SMALL_FILES, "small"), (files, "million"))
    }
    built = time.monotonic() - began
    latest = CHECKPOINT_VERSION + repeats
    began = time.monotonic()
    for size, name in ((SMALL_FILES, "small"), (files, "million")):
        check_with_delta_rs(root / name, size, latest, expected[size])
    checked = time.monotonic() - began
    print(
        f"  built a {files:,}-file and a {SMALL_FILES}-file table (checkpoint at version "
        f"{CHECKPOINT_VERSION}, {repeats} later 10-file DELETEs) in {built:.1f} s; delta-rs read both "
        f"as built in {checked:.1f} s"
    )
    (root / "deleted.json").write_text(json.dumps({str(size): d for size, d in expected.items()}))
    first_name = f"first version of a {files:,}-file table"
    alone_name = f"a 10-file DELETE version in a run of its own, {files:,} vs {SMALL_FILES} files"
    figures: list[Figure | Unmeasured] = []
    heap = TEN_MILLION_HEAP if files >= TEN_MILLION else HEAP
    first = _run_child(root, "first", files, repeats, {**os.environ, "DVMIRROR_SPARK_DRIVER_MEMORY": heap})
    if isinstance(first, str):
        return [Unmeasured(first_name, first), Unmeasured(alone_name, "the first version failed")]
    peak = first["python_peak"] + first["jvm_peak"]
    print(
        f"  first version of {files:,} files: {first['seconds']:.1f} s (the version itself "
        f"{first['version_seconds']:.1f} s); Python peak RSS {first['python_peak'] / 2**20:.0f} MiB, "
        f"JVM peak heap {first['jvm_peak'] / 2**20:.0f} MiB (heap capped at {heap}); the process tree's "
        f"peak RSS {first['tree_peak'] / 2**30:.2f} GiB (Spark start-up and the warm-up included)"
    )
    if files >= TEN_MILLION:
        figures += [
            Figure(first_name, first["seconds"], "s", TEN_MILLION_SECONDS, True),
            Figure(
                f"peak RSS of the process tree, first version of {files:,} files",
                first["tree_peak"] / 2**30,
                "GiB",
                TEN_MILLION_TREE_GIB,
                True,
            ),
        ]
    else:
        figures += [
            Figure(first_name, first["seconds"], "s", 60.0, True),
            Figure(f"peak driver memory, first version of {files:,} files", peak / 2**30, "GiB", 2.0, True),
        ]
    alone = _run_child(root, "alone", files, repeats, dict(os.environ))
    if isinstance(alone, str):
        return [*figures, Unmeasured(alone_name, alone)]
    small, big = statistics.median(alone["small"]), statistics.median(alone["big"])
    print(
        f"  a 10-file DELETE version in a run of its own (heap {alone['heap']}), median of {repeats}: "
        f"{small * 1000:.0f} ms at {SMALL_FILES} files ({_ms(alone['small'])}), {big * 1000:.0f} ms at "
        f"{files:,} ({_ms(alone['big'])})"
    )
    for size, key in ((SMALL_FILES, "small"), (files, "big")):
        print(f"    at {size:,} files: {_where_it_goes(alone[key], alone[f'{key}_parts'])}")
    return [*figures, Figure(alone_name, big / small, "x", 1.5, True)]


def _where_it_goes(runs: list[float], parts: list[dict[str, float]]) -> str:
    """Medians of a run's parts: the DV conversion, the Iceberg commit (Iceberg Java's transaction: the
    new manifest list among it), and the rest (listing and replaying the log, the checkpoint index,
    planning)."""
    dv_ms = 1000 * statistics.median(p["dv"] for p in parts)
    commit_ms = 1000 * statistics.median(p["commit"] for p in parts)
    rest_ms = 1000 * statistics.median(
        run - p["dv"] - p["commit"] for run, p in zip(runs, parts, strict=True)
    )
    return f"DV conversion {dv_ms:.0f} ms, Iceberg commit {commit_ms:.0f} ms, the rest {rest_ms:.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1_000_000, help="files of the big table")
    parser.add_argument("--repeats", type=int, default=3, help="10-file DELETE versions measured alone")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--part", choices=["first", "alone"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        if args.part == "first":
            print(json.dumps(_first_version(args.child, args.files)))
        else:
            print(json.dumps(_runs_of_their_own(args.child, args.files, args.repeats)))
        return
    with tempfile.TemporaryDirectory(prefix="dvmirror-million-") as name:
        figures = million_figures(Path(name), args.files, args.repeats)
        print_figures(figures)


if __name__ == "__main__":
    main()
