"""A Spark standalone cluster on loopback for the tests and the benchmarks: one master and `workers`
workers, each started from the installed pyspark package's own launcher (`bin/spark-class` with
`org.apache.spark.deploy.master.Master` / `org.apache.spark.deploy.worker.Worker`; SPARK_HOME is the
pyspark package folder), each worker with its own cores, memory and work folder. Nothing is installed on
the "nodes": the driver's `spark.jars` (the jars folder, or the helper jar and Ivy's jars) reach the
executors through the driver's file server, and their Python tasks run the driver's interpreter.

`standalone_cluster(folder)` is a context manager: on leaving it, whatever happened inside, every
process it started is stopped (SIGTERM to each one's own process group, SIGKILL after a grace period),
executors included, as they are the workers' children in those groups.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
START_SECONDS = 180.0  # a JVM's start on a loaded 2-core machine
STOP_SECONDS = 30.0


@dataclass(frozen=True)
class StandaloneCluster:
    """A running cluster: the master URL, each worker's work folder, the folder of the daemons' logs."""

    master_url: str
    work_dirs: tuple[Path, ...]
    logs: Path
    cores: int  # in all: workers x cores each

    def executor_folders(self, app_id: str) -> list[Path]:
        """The executor folders the workers made for application `app_id` (`<work>/<app>/<executor id>`):
        proof from the worker side that executors ran for it."""
        return sorted(p for work in self.work_dirs for p in (work / app_id).glob("*") if p.is_dir())

    def driver_settings(self, executor_memory: str = "512m") -> dict[str, str]:
        """The Spark settings a driver needs to run on this cluster with one executor per worker."""
        return {
            "spark.master": self.master_url,
            "spark.executor.memory": executor_memory,
            "spark.cores.max": str(self.cores),
        }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_text(log: Path, text: str, process: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            raise RuntimeError(
                f"{log.stem} exited ({process.returncode}) before {text!r}:\n"
                + log.read_text(errors="replace")[-3000:]
            )
        time.sleep(0.25)
    raise TimeoutError(f"{text!r} not in {log} after {seconds:.0f} s")


def _exited(process: subprocess.Popen) -> bool:
    """Whether the process has ended, without reaping it: its pid (its group's id) stays its own until
    `wait`, so a signal to the group never reaches another's processes."""
    return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _stop(processes: list[subprocess.Popen]) -> None:
    """SIGTERM to each process group (a worker stops its executors), then SIGKILL to whatever is left
    of the group (an executor or Python worker still shutting down, or the leader after STOP_SECONDS),
    then the leader reaped. Only the groups of processes started here: each began a session of its own."""
    for process in reversed(processes):
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_SECONDS
    for process in reversed(processes):
        if process.returncode is not None:
            continue
        while not _exited(process) and time.monotonic() < deadline:
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextmanager
def standalone_cluster(
    folder: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g"
) -> Iterator[StandaloneCluster]:
    """A master and `workers` workers (`cores` cores and `memory` for executors each) on 127.0.0.1,
    their logs and work folders under `folder`; all stopped on leaving."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("SPARK_CONF_DIR", None)  # the daemons' defaults, not a caller's spark-defaults.conf
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port = free_port()
    master_url = f"spark://127.0.0.1:{port}"
    processes: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> tuple[subprocess.Popen, Path]:
        log = folder / f"{name}.log"
        with log.open("w") as out:
            process = subprocess.Popen(
                [spark_class, *args],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: stopped as one, executors included
            )
        processes.append(process)
        return process, log

    try:
        master, log = start(
            "master",
            MASTER_CLASS,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(free_port()),
        )
        _wait_for_text(log, "I have been elected leader", master, START_SECONDS)
        work_dirs = tuple(folder / f"worker-{index}" for index in range(workers))
        started = [
            start(
                f"worker-{index}",
                WORKER_CLASS,
                "--host",
                "127.0.0.1",
                "--cores",
                str(cores),
                "--memory",
                memory,
                "--work-dir",
                str(work),
                "--webui-port",
                str(free_port()),
                master_url,
            )
            for index, work in enumerate(work_dirs)
        ]
        for process, log in started:
            _wait_for_text(log, "Successfully registered with master", process, START_SECONDS)
        yield StandaloneCluster(master_url, work_dirs, folder, workers * cores)
    finally:
        _stop(processes)
