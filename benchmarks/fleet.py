"""The CLI fleet figures of issue 29 (`bench.py --only fleet`, or `python -m benchmarks.fleet [N ...]`):
N copies of the fixture `table-with-dv-small` (2 versions, a DV at version 1) in one catalog, each run in
a catalog of its own, through the installed console script:

1. `dvmirror sync --tables FILE` of all N (first mirror of every table, one process, one Spark session):
   wall time per table, at the smallest N against the largest (target <= 1.2x), beside one
   `dvmirror sync DELTA --table` of one table (the per-process cost a table paid before).
2. `dvmirror sync --tables FILE --follow --interval 1` over the N mirrored tables: one new commit on each
   (a blind append of a copy of its data file, written without Spark), time from the last commit written
   to the last `version` event printed; and the peak RSS of the process tree (Python and the JVM) over
   the whole run, sampled from /proc every 0.25 s. Target (issue 29): 300 tables in <= 60 s and <= 3 GiB,
   measured at 300 (the default sizes are 20 and 300); a run whose largest N is smaller prints its
   figures and leaves the target unmeasured rather than scaling them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from benchmarks.figures import Figure, Unmeasured
from dv_assets.mirror.settings import CatalogConfig
from testkit.synthetic import add, info, write_commit
from tests.helpers.paths import DELTA_FIXTURES, DVMIRROR
from tests.helpers.processes import catalog_args, dvmirror_env

FIXTURE = "table-with-dv-small"
DATA_FILE = "part-00000-fae5310a-a37d-4e51-827b-c3d5516560ca-c000.snappy.parquet"
TARGET_TABLES = 300
TARGET_SECONDS = 60.0
TARGET_GIB = 3.0
PAGE = os.sysconf("SC_PAGE_SIZE")


def build(folder: Path, n: int) -> Path:
    """N copies of the fixture under `folder` and their tables file."""
    folder.mkdir(parents=True)
    documents = []
    for i in range(n):
        shutil.copytree(DELTA_FIXTURES / FIXTURE, folder / f"t{i:03d}")
        documents.append(
            "type: dv_assets.components.DeltaMirrorComponent\n"
            f"attributes: {{name: t{i:03d}, delta_path: t{i:03d}, iceberg_table: fleet.t{i:03d}}}\n"
        )
    tables = folder / "tables.yaml"
    tables.write_text("---\n".join(documents))
    return tables


def tree_rss(root: int) -> int:
    """Bytes resident in `root` and all its descendants (/proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        with contextlib.suppress(OSError):
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
        todo += children.get(pid, [])
    return total


class PeakRss:
    """The peak of `tree_rss(pid)`, sampled in a thread until `stop`."""

    def __init__(self, pid: int) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(pid,), daemon=True)
        self._thread.start()

    def _run(self, pid: int) -> None:
        while not self._stop.wait(0.25):
            self.peak = max(self.peak, tree_rss(pid))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def sync_tables(folder: Path, tables: Path, catalog: CatalogConfig) -> tuple[float, int]:
    """`dvmirror sync --tables` to its end: wall seconds and peak RSS of its tree."""
    began = time.monotonic()
    process = subprocess.Popen(
        [str(DVMIRROR), "sync", "--tables", str(tables), *catalog_args(catalog), "--json"],
        cwd=folder,
        env=dvmirror_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak = PeakRss(process.pid)
    out, err = process.communicate()
    seconds = time.monotonic() - began
    rss = peak.stop()
    assert process.returncode == 0, f"exit {process.returncode}: {out[-2000:]}{err[-2000:]}"
    return seconds, rss


def single_sync(folder: Path, catalog: CatalogConfig) -> float:
    """One `dvmirror sync DELTA --table` of one more copy: the per-process cost of a table."""
    shutil.copytree(DELTA_FIXTURES / FIXTURE, folder / "single")
    began = time.monotonic()
    done = subprocess.run(
        [str(DVMIRROR), "sync", str(folder / "single"), "--table", "fleet.single", *catalog_args(catalog)],
        cwd=folder,
        env=dvmirror_env(),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return time.monotonic() - began


def append_commit(root: Path) -> None:
    """Version 2: a blind append of a copy of the table's data file (10 rows)."""
    name = f"part-{uuid.uuid4()}.parquet"
    shutil.copyfile(root / DATA_FILE, root / name)
    write_commit(root, 2, [info("WRITE"), add(name, rows=10, size=(root / name).stat().st_size)])


def follow_one_commit_each(folder: Path, tables: Path, catalog: CatalogConfig, n: int) -> tuple[float, int]:
    """A follower over the N mirrored tables, one new commit on each: seconds from the last commit written
    to the last version printed, and the peak RSS of its tree over the run."""
    out = (folder / "follow.out").open("w")
    process = subprocess.Popen(
        [
            str(DVMIRROR),
            "sync",
            "--tables",
            str(tables),
            *catalog_args(catalog),
            "--follow",
            "--json",
            "--interval",
            "1",
        ],
        cwd=folder,
        env=dvmirror_env(),
        stdout=out,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    peak = PeakRss(process.pid)

    def events() -> list[dict]:
        return [json.loads(x) for x in (folder / "follow.out").read_text().splitlines() if x.endswith("}")]

    def wait(check, what: str, seconds: float = 1800) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if check(events()):
                return
            if process.poll() is not None:
                raise RuntimeError(f"follower exited {process.returncode} before {what}")
            time.sleep(0.1)
        raise RuntimeError(f"not {what} after {seconds} s")

    try:
        wait(lambda ev: sum(e["event"] == "following" for e in ev) == n, "following every table")
        for i in range(n):
            append_commit(folder / f"t{i:03d}")
        written = time.monotonic()
        wait(lambda ev: sum(e["event"] == "version" for e in ev) == n, "every new version mirrored")
        seconds = time.monotonic() - written
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=300)
        out.close()
    rss = peak.stop()
    assert code == 0, f"follower exited {code}"
    return seconds, rss


def fleet_figures(tmp: Path, sizes: tuple[int, ...] = (20, TARGET_TABLES)) -> list[Figure | Unmeasured]:
    if not sys.platform.startswith("linux"):
        return [Unmeasured("fleet: peak RSS of the process tree", "reads /proc (Linux only)")]
    per_table: dict[int, float] = {}
    follow: dict[int, tuple[float, int]] = {}
    single = 0.0
    for n in sizes:
        folder = tmp / f"fleet{n}"
        tables = build(folder, n)
        catalog = CatalogConfig.under(folder / "iceberg")
        seconds, rss = sync_tables(folder, tables, catalog)
        per_table[n] = seconds / n
        print(
            f"  fleet N={n}: sync --tables {seconds:.1f} s ({per_table[n]:.2f} s/table), "
            f"peak RSS {rss / 2**30:.2f} GiB",
            flush=True,
        )
        follow[n] = follow_one_commit_each(folder, tables, catalog, n)
        print(
            f"  fleet N={n}: follower, one new commit on each: all mirrored in {follow[n][0]:.1f} s, "
            f"peak RSS {follow[n][1] / 2**30:.2f} GiB",
            flush=True,
        )
        if n == sizes[0]:
            single = single_sync(folder, catalog)
            print(f"  one table by its own `dvmirror sync` process: {single:.1f} s", flush=True)
    small, large = min(sizes), max(sizes)
    seconds, rss = follow[large]
    at_target: Figure | Unmeasured = (
        Figure(
            f"fleet: follower, a commit on each of {large} tables", seconds, "s", TARGET_SECONDS, at_most=True
        )
        if large >= TARGET_TABLES
        else Unmeasured(
            f"fleet: follower, a commit on each of {TARGET_TABLES} tables",
            f"largest N {large} took {seconds:.1f} s; the target is measured at {TARGET_TABLES}, not scaled",
        )
    )
    return [
        Figure(
            f"fleet: sync --tables s/table at N={large} vs N={small}",
            per_table[large] / per_table[small],
            "x",
            1.2,
            at_most=True,
        ),
        Figure(
            f"fleet: own-process sync vs sync --tables, s/table, N={large}",
            single / per_table[large],
            "x",
            1.0,
            at_most=False,
        ),
        at_target,
        Figure(
            f"fleet: follower peak RSS, process tree, N={large}", rss / 2**30, "GiB", TARGET_GIB, at_most=True
        ),
    ]


if __name__ == "__main__":
    import tempfile

    sizes = tuple(int(a) for a in sys.argv[1:]) or (20, TARGET_TABLES)
    with tempfile.TemporaryDirectory(prefix="dvmirror-fleet-") as name:
        for figure in fleet_figures(Path(name), sizes):
            print(figure.line())
