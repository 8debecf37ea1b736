"""The soak figures of issue 36 (`bench.py --only soak`, or `python -m benchmarks.soak [--minutes 30]
[--tables 20]`; minutes, never in CI): one follower (`dvmirror sync --tables FILE --follow --interval
0.5 --json`) over N mirrored copies of the fixture `table-with-dv-small` (benchmarks/fleet.py's
`build`), while a writer makes a Delta commit every 2 s, spread over the tables in turn (a blind append
of a copy of the table's data file, written without Spark, the way fleet.py's is).

Printed next to their targets: commit → snapshot latency (from the commit file written to the
follower's `version` event for it, read from its output as it comes) p50 <= 0.75 s and p99 <= 2 s;
the process tree's resident set (Python and the JVM, /proc) at each 5 minutes, its growth from minute 5
to the end <= 5%; open files of the tree (its /proc/*/fd entries) at each 5 minutes, flat (the end's
no more than minute 5's + 5%). Every commit written must have been mirrored, once, or the bench fails.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: testkit, tests.helpers

from benchmarks.figures import Figure, Unmeasured, print_figures
from benchmarks.fleet import DATA_FILE, build, sync_tables, tree_rss
from dv_assets.mirror.settings import CatalogConfig
from testkit.synthetic import add, info, write_commit
from tests.helpers.paths import DVMIRROR
from tests.helpers.processes import catalog_args, dvmirror_env

TARGET_P50 = 0.75
TARGET_P99 = 2.0
TARGET_GROWTH = 0.05  # RSS and open files, minute 5 to the end
COMMIT_EVERY = 2.0
POLL_INTERVAL = "0.5"
REPORT_EVERY = 300.0  # seconds: a line of RSS and open files
SAMPLE_EVERY = 5.0


def tree_pids(root: int) -> list[int]:
    """`root` and all its descendants (/proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def rss_of(pid: int) -> int:
    with contextlib.suppress(OSError):
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return 0


def open_files(root: int) -> int:
    total = 0
    for pid in tree_pids(root):
        with contextlib.suppress(OSError):
            total += len(os.listdir(f"/proc/{pid}/fd"))
    return total


def append_commit(root: Path, version: int) -> None:
    """`version`: a blind append of a copy of the table's data file (10 rows)."""
    name = f"part-{uuid.uuid4()}.parquet"
    shutil.copyfile(root / DATA_FILE, root / name)
    write_commit(root, version, [info("WRITE"), add(name, rows=10, size=(root / name).stat().st_size)])


class FollowerOutput:
    """The follower's JSON lines, read as they come: each `version` event's arrival by (table, version)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._offset = 0
        self._pending = ""
        self.arrived: dict[tuple[str, int], float] = {}
        self.duplicates = 0
        self.following = 0

    def read(self) -> None:
        with self._path.open() as out:
            out.seek(self._offset)
            text = out.read()
            self._offset = out.tell()
        now = time.monotonic()
        lines = (self._pending + text).split("\n")
        self._pending = lines.pop()
        for line in lines:
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            if event["event"] == "following":
                self.following += 1
            elif event["event"] == "version":
                key = (event["table"], event["delta_version"])
                if key in self.arrived:
                    self.duplicates += 1
                self.arrived.setdefault(key, now)


def soak(folder: Path, n: int, minutes: float) -> dict:
    tables = build(folder, n)
    catalog = CatalogConfig.under(folder / "iceberg")
    sync_tables(folder, tables, catalog)  # every table mirrored first: the follower's steady state
    out_path = folder / "follow.out"
    command = [str(DVMIRROR), "sync", "--tables", str(tables), *catalog_args(catalog), "--follow", "--json"]
    with out_path.open("w") as out:
        process = subprocess.Popen(
            [*command, "--interval", POLL_INTERVAL],
            cwd=folder,
            env=dvmirror_env(),
            stdout=out,
            stderr=subprocess.DEVNULL,
            text=True,
        )
    output = FollowerOutput(out_path)
    # (seconds since the first commit, the tree's RSS, open files, the follower's own RSS: Python)
    samples: list[tuple[float, int, int, int]] = []
    written: dict[tuple[str, int], float] = {}
    try:
        deadline = time.monotonic() + 300
        while output.following < n:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the follower did not follow every table (exit {process.poll()})")
            time.sleep(0.1)
            output.read()
        began = time.monotonic()
        end = began + minutes * 60
        next_version = dict.fromkeys(range(n), 2)
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(SAMPLE_EVERY):
                tree = tree_rss(process.pid)
                samples.append((time.monotonic() - began, tree, open_files(process.pid), rss_of(process.pid)))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        commit = 0
        while time.monotonic() < end:
            i = commit % n
            append_commit(folder / f"t{i:03d}", next_version[i])
            written[(f"t{i:03d}", next_version[i])] = time.monotonic()
            next_version[i] += 1
            commit += 1
            while time.monotonic() < began + commit * COMMIT_EVERY:
                output.read()
                time.sleep(0.02)
            if process.poll() is not None:
                raise RuntimeError(f"the follower exited {process.returncode} after {commit} commits")
        settle = time.monotonic() + 60
        while len(set(written) & set(output.arrived)) < len(written) and time.monotonic() < settle:
            output.read()
            time.sleep(0.02)
        stop.set()
        sampler.join()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=300)
    missing = sorted(set(written) - set(output.arrived))
    if missing or output.duplicates:
        raise AssertionError(
            f"{len(missing)} commits never mirrored ({missing[:3]}), {output.duplicates} twice"
        )
    latencies = sorted(output.arrived[key] - at for key, at in written.items())
    return {"latencies": latencies, "samples": samples, "commits": len(written), "code": process.returncode}


def _at(samples: list[tuple[float, int, int, int]], seconds: float) -> tuple[float, int, int, int]:
    """The first sample at or after `seconds` (the last one when none is)."""
    return next((s for s in samples if s[0] >= seconds), samples[-1])


def soak_figures(tmp: Path, n: int = 20, minutes: float = 30.0) -> list[Figure | Unmeasured]:
    if not sys.platform.startswith("linux"):
        return [Unmeasured("soak: a follower over hours", "reads /proc (Linux only)")]
    load = Path("/proc/loadavg").read_text().split()[:3]
    result = soak(tmp / "soak", n, minutes)
    latencies = result["latencies"]
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
    samples = result["samples"]
    load_at_end = Path("/proc/loadavg").read_text().split()[:3]
    print(
        f"  soak: {result['commits']} commits over {n} tables in {minutes:g} minutes, each mirrored once; "
        f"commit -> snapshot p50 {p50:.2f} s, p99 {p99:.2f} s, max {latencies[-1]:.2f} s "
        f"(load average at start {' '.join(load)}, at end {' '.join(load_at_end)})"
    )
    for minute in range(0, int(minutes) + 1, int(REPORT_EVERY // 60)):
        at = _at(samples, minute * 60)
        print(
            f"    minute {at[0] / 60:5.1f}: process tree RSS {at[1] / 2**20:7.0f} MiB (Python "
            f"{at[3] / 2**20:.0f}, the JVM {(at[1] - at[3]) / 2**20:.0f}), open files {at[2]}"
        )
    first, last = _at(samples, REPORT_EVERY), samples[-1]
    return [
        Figure("soak: commit -> snapshot p50", p50, "s", TARGET_P50, True),
        Figure("soak: commit -> snapshot p99", p99, "s", TARGET_P99, True),
        Figure("soak: RSS growth, minute 5 to the end", last[1] / first[1] - 1, "", TARGET_GROWTH, True),
        Figure(
            "soak: open files growth, minute 5 to the end", last[2] / first[2] - 1, "", TARGET_GROWTH, True
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=20)
    parser.add_argument("--minutes", type=float, default=30.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dvmirror-soak-") as name:
        figures = soak_figures(Path(name), args.tables, args.minutes)
        print_figures(figures)


if __name__ == "__main__":
    main()
