"""The start-up cost of an installed package without a jars folder (issue 28, `--only install`).

Spark start-up alone (a process that starts the session `dvmirror sync` starts and ends, as the CLI's
does), from a folder outside the checkout, three ways, alternated REPEAT times:

1. a jars folder (DVMIRROR_JARS, what `make jars` fills): the baseline;
2. no jars folder, a second run: the package's helper jar and the jars an earlier run's Ivy resolution put
   in the cache (remembered, so no resolution): target <= 1 s over (1);
3. no jars folder, Ivy resolving again on a warm cache (the record of (2) removed): what (2) saves, as
   a ratio of (3) over (2) (target >= 1: the remembered jars must never start slower than resolving).

Before them, the first run of all on an empty Ivy cache (downloads from Maven Central), once: target
<= 60 s over (1), the longest a new user's first command should wait beyond every later one's.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import time
from pathlib import Path

from benchmarks.figures import Figure, Unmeasured
from benchmarks.freshness import SPARK_START
from dv_assets.mirror.spark import PACKAGED_HELPER
from tests.helpers.paths import REPO_ROOT
from tests.helpers.processes import clean_env, jars_dir, run

REPEAT = 3


def _start(tmp: Path, **env: str) -> float:
    """Wall seconds of one Spark start-up process in `tmp` (outside the checkout)."""
    # freshness.py's start-up, its Delta table argument a local folder (a Delta table on S3 adds S3 jars).
    command = [
        sys.executable,
        "-c",
        SPARK_START,
        f"sqlite:///{tmp / 'catalog.db'}",
        str(tmp / "warehouse"),
        str(tmp),
    ]
    began = time.monotonic()
    done = run(command, cwd=tmp, env=clean_env("DVMIRROR_", "DAGSTER_", PYTHONPATH=str(REPO_ROOT), **env))
    seconds = time.monotonic() - began
    if done.returncode != 0:
        raise RuntimeError(f"Spark start-up exited {done.returncode}:\n{done.stderr[-3000:]}")
    return seconds


def install_figures(tmp: Path) -> list[Figure | Unmeasured]:
    name = "second run without a jars folder: start-up over local jars"
    if not PACKAGED_HELPER.is_file():
        return [Unmeasured(name, f"no {PACKAGED_HELPER} (`make setup` copies it there)")]
    folder = tmp / "install"
    folder.mkdir()
    ivy = tmp / "ivy"
    cold = _start(folder, DVMIRROR_IVY=str(ivy))
    [record] = ivy.glob("dvmirror-classpath-*.txt")
    local, second, resolving = [], [], []
    for _ in range(REPEAT):
        local.append(_start(folder, DVMIRROR_JARS=jars_dir()))
        second.append(_start(folder, DVMIRROR_IVY=str(ivy)))
        kept = record.read_text()
        record.unlink()
        resolving.append(_start(folder, DVMIRROR_IVY=str(ivy)))
        record.write_text(kept)
    shutil.rmtree(ivy, ignore_errors=True)
    base = statistics.median(local)
    print(
        f"  Spark start-up: local jars {', '.join(f'{s:.2f}' for s in local)} s; no jars folder, second run "
        f"{', '.join(f'{s:.2f}' for s in second)} s; Ivy resolving on a warm cache "
        f"{', '.join(f'{s:.2f}' for s in resolving)} s; first run, empty Ivy cache {cold:.2f} s"
    )
    return [
        Figure(name, statistics.median(second) - base, "s", 1.0, True),
        Figure(
            "start-up with Ivy resolving on a warm cache / remembered jars",
            statistics.median(resolving) / statistics.median(second),
            "x",
            1.0,
            False,
        ),
        Figure("first run, empty Ivy cache: start-up over local jars", cold - base, "s", 60.0, True),
    ]
