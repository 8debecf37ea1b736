"""Dagster runs launched as a deployment launches them, for the tests and the benchmarks alike: a code
server (`dagster api grpc -m dv_assets.definitions`, the tables from a tables file) and a persistent
instance whose `DefaultRunLauncher` starts each run in a fresh process (`dagster api execute_run`) under
the code server; `dagster job launch` submits the run. While it runs, the code server's process tree is
sampled from /proc (Linux only): every process the run started (Python and `java`), and the peak RSS of
them all.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from tests.helpers.paths import DVMIRROR, REPO_ROOT
from tests.helpers.processes import dvmirror_env, free_port, wait_for_text

DAGSTER = DVMIRROR.parent / "dagster"
PAGE = os.sysconf("SC_PAGE_SIZE")
INSTANCE_YAML = """\
telemetry:
  enabled: false
run_coordinator:
  module: dagster._core.run_coordinator
  class: DefaultRunCoordinator
run_launcher:
  module: dagster._core.launcher
  class: DefaultRunLauncher
"""


def _processes() -> dict[int, tuple[int, str, list[str], int]]:
    """pid -> (parent pid, start time in ticks, command line, resident bytes), from /proc."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            rss = int(Path(f"/proc/{entry}/statm").read_text().split()[1]) * PAGE
        except OSError:
            continue
        found[int(entry)] = (int(stat[1]), int(stat[19]), [c.decode() for c in cmdline if c], rss)
    return found


@dataclass
class TreeSample:
    """What the code server's descendants (not the server itself) were while sampled: every process seen,
    by (pid, start time), with its command line; the peak of their summed RSS."""

    seen: dict[tuple[int, int], list[str]] = field(default_factory=dict)
    parents: dict[int, int] = field(default_factory=dict)  # pid -> parent pid
    peak_rss: int = 0

    @property
    def jvms(self) -> int:
        """Spark drivers started (`spark-submit` first runs a short-lived `java` of Spark's launcher,
        `org.apache.spark.launcher.Main`, to build the driver's command line: not counted; nor are the
        driver's own forks)."""
        drivers = {pid for (pid, _), cmd in self.seen.items() if _kind(cmd) == "java SparkSubmit"}
        # A process the JVM forks (Hadoop's shell commands) holds its command line until it execs.
        return sum(1 for pid in drivers if self.parents.get(pid) not in drivers)

    def kinds(self) -> dict[str, int]:
        """How many processes of each kind: a Python module or script, a JVM's main class, a program."""
        counts: dict[str, int] = {}
        for cmd in self.seen.values():
            counts[_kind(cmd)] = counts.get(_kind(cmd), 0) + 1
        return counts

    @property
    def pythons(self) -> int:
        """Python processes running the run's code (not Dagster's log-capture helpers, `watch_orphans.py`,
        one per captured stream, each beside a `tail`)."""
        return sum(
            n for kind, n in self.kinds().items() if kind.startswith("python") and "watch_orphans" not in kind
        )


def _kind(cmd: list[str]) -> str:
    if not cmd:
        return "?"
    program = Path(cmd[0]).name
    if program == "java":
        main = next((c for c in cmd[1:] if c.startswith("org.") or c.startswith("com.")), "")
        return f"java {main.rsplit('.', 1)[-1]}"
    if program.startswith("python"):
        rest = cmd[1:]
        if rest[:1] == ["-m"] and len(rest) > 1:
            return f"python -m {' '.join(rest[1:4])}"
        if rest[:1] == ["-c"] or (rest[:2] and rest[0] == "-B" and rest[1] == "-c"):
            return "python -c " + rest[-1][:40]
        return f"python {Path(rest[0]).name}" if rest else "python"
    return program


class TreeSampler:
    """Samples the descendants of `root` (but those under its children `ignore`) every `every` seconds,
    in a thread, until `stop`."""

    def __init__(self, root: int, every: float = 0.1, ignore: set[int] | None = None) -> None:
        self.sample = TreeSample()
        self._root = root
        self._ignore = ignore or set()
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            processes = _processes()
            children: dict[int, list[int]] = {}
            for pid, (ppid, _, _, _) in processes.items():
                children.setdefault(ppid, []).append(pid)
            total, todo = 0, [pid for pid in children_of(self._root, processes) if pid not in self._ignore]
            while todo:
                pid = todo.pop()
                ppid, started, cmdline, rss = processes[pid]
                self.sample.parents[pid] = ppid
                if cmdline or (pid, started) not in self.sample.seen:  # an exited one's is empty
                    self.sample.seen[(pid, started)] = cmdline  # the latest: spark-class execs java
                if ppid not in processes or processes[ppid][2] != cmdline:  # a fork shares its pages
                    total += rss
                todo += children.get(pid, [])
            self.sample.peak_rss = max(self.sample.peak_rss, total)

    def stop(self) -> TreeSample:
        self._stop.set()
        self._thread.join()
        return self.sample


@dataclass
class LaunchedRun:
    run_id: str
    status: dg.DagsterRunStatus
    seconds: float  # the run's creation (the launch) to its end, as the instance recorded them
    tree: TreeSample  # the processes the run started, and their peak RSS


@dataclass
class CodeServer:
    """A running code server and the instance its runs are launched into."""

    home: Path
    workspace: Path
    process: subprocess.Popen
    env: dict[str, str]

    def instance(self) -> dg.DagsterInstance:
        return dg.DagsterInstance.from_config(str(self.home))

    def launch(self, job_name: str, tags: dict[str, str], timeout: float = 900) -> LaunchedRun:
        """`dagster job launch` of `job_name` with `tags`, waited on to its end."""
        run_id = str(uuid.uuid4())
        resident = set(children_of(self.process.pid))  # none, unless a run is still exiting
        sampler = TreeSampler(self.process.pid, ignore=resident)
        try:
            done = subprocess.run(
                [
                    str(DAGSTER),
                    *("job", "launch", "-w", str(self.workspace), "-j", job_name),
                    *("--tags", json.dumps(tags), "--run-id", run_id),
                ],
                cwd=REPO_ROOT,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
            deadline = time.monotonic() + timeout
            with self.instance() as instance:
                while True:
                    record = instance.get_run_record_by_id(run_id)
                    if record is not None and record.dagster_run.is_finished:
                        break
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"run {run_id} of {job_name} not finished in {timeout} s")
                    time.sleep(0.2)
                # The run worker may still be exiting (and its JVM with it): let the tree empty.
                while set(children_of(self.process.pid)) - resident and time.monotonic() < deadline:
                    time.sleep(0.2)
        finally:
            tree = sampler.stop()
        assert record.end_time is not None
        return LaunchedRun(
            run_id=run_id,
            status=record.dagster_run.status,
            seconds=record.end_time - record.create_timestamp.timestamp(),
            tree=tree,
        )


def children_of(pid: int, processes: dict[int, tuple[int, int, list[str], int]] | None = None) -> list[int]:
    """The children of `pid` but the helpers of the code server (multiprocessing's resource tracker,
    which it starts with its first run and keeps)."""
    return [
        child
        for child, (ppid, _, cmdline, _) in (_processes() if processes is None else processes).items()
        if ppid == pid and "multiprocessing.resource_tracker" not in " ".join(cmdline)
    ]


@contextlib.contextmanager
def code_server(
    folder: Path, tables_file: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> Iterator[CodeServer]:
    """A code server over `tables_file` (DVMIRROR_SOURCES) and a persistent instance under `folder`,
    stopped on exit; its environment (and its runs') `env`, else `dvmirror_env()`."""
    home = folder / "dagster_home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(INSTANCE_YAML)
    port = free_port()
    workspace = folder / "workspace.yaml"
    workspace.write_text(
        f"load_from:\n  - grpc_server:\n      host: localhost\n      port: {port}\n"
        "      location_name: dv_assets\n"
    )
    env = {**(dvmirror_env() if env is None else env), "DAGSTER_HOME": str(home)}
    env["DVMIRROR_SOURCES"] = str(tables_file)
    log = (folder / "code_server.log").open("w")
    process = subprocess.Popen(
        [str(DAGSTER), "api", "grpc", "-m", "dv_assets.definitions", "-h", "localhost", "-p", str(port)],
        cwd=REPO_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_text(folder / "code_server.log", "Started Dagster code server", process, timeout)
        yield CodeServer(home, workspace, process, env)
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
