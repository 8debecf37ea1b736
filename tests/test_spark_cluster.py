"""DV conversion on a real Spark cluster: a standalone master and worker started from the pyspark
distribution on this machine; the engine's session points at it (`spark.master=spark://127.0.0.1:…`,
as the Dagster resource's `spark_config` would), the DVs are converted in tasks on the worker's executor,
and the mirror reads back exactly.

Proof that the work ran on the worker comes from the executor side: each task reports the executor id its
own environment names, and the worker's work folder holds that executor's folder for the application.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from tests.helpers.paths import DELTA_FIXTURES, expected_rows
from tests.helpers.processes import dvmirror_env, free_port, run, wait_for_text
from tests.helpers.rows import sorted_rows

pytestmark = [pytest.mark.spark, pytest.mark.system]  # a standalone master and worker of its own

SPARK_HOME = Path(pyspark.__file__).parent
FIXTURE = "dv-partitioned-with-checkpoint"

SYNC_ON_THE_CLUSTER = """
import json, sys
from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from dv_assets.mirror.spark import get_or_create_spark
from dv_assets.mirror.placement import ExecutorPolicy
from dv_assets.mirror.sync import sync_table
from tests.helpers.readers import pyiceberg_rows, iceberg_java_rows, snapshots_by_delta_version

master, delta, catalog_root = sys.argv[1:]
catalog = CatalogConfig.under(catalog_root)
overrides = {"spark.master": master, "spark.executor.memory": "512m", "spark.cores.max": "1"}
spark = get_or_create_spark(MirrorSettings.resolve(catalog=catalog), overrides)
result = sync_table(spark, delta, "cluster.t", executors=ExecutorPolicy(min_dvs=1))
snapshots = snapshots_by_delta_version(catalog, "cluster.t")
print(json.dumps({
    "app": spark.sparkContext.applicationId,
    "converted_on": [v.dvs_converted_on for v in result.versions if v.dvs_written],
    "placement": [v.dv_placement for v in result.versions if v.dvs_written],
    "java": {v: iceberg_java_rows(spark, "cluster.t", s) for v, s in snapshots.items()},
    "pyiceberg": {v: pyiceberg_rows(catalog, "cluster.t", s) for v, s in snapshots.items()},
}))
spark.stop()
"""


@pytest.fixture
def standalone_cluster(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A standalone master and one worker (1 core, 1 GiB) on loopback; the master URL and work folder."""
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1"}
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port, work = free_port(), tmp_path / "worker-work"
    master_url = f"spark://127.0.0.1:{port}"
    logs = {name: tmp_path / f"{name}.log" for name in ("master", "worker")}
    master = subprocess.Popen(
        [
            spark_class,
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(free_port()),
        ],
        env=env,
        stdout=logs["master"].open("w"),
        stderr=subprocess.STDOUT,
    )
    processes = [master]
    try:
        wait_for_text(logs["master"], "I have been elected leader", master)
        worker = subprocess.Popen(
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                "1g",
                "--work-dir",
                str(work),
                "--webui-port",
                str(free_port()),
                master_url,
            ],
            env=env,
            stdout=logs["worker"].open("w"),
            stderr=subprocess.STDOUT,
        )
        processes.append(worker)
        wait_for_text(logs["worker"], "Successfully registered with master", worker)
        yield master_url, work
    finally:
        for process in reversed(processes):
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


def test_dvs_are_converted_on_the_worker(standalone_cluster, tmp_path: Path) -> None:
    master_url, work = standalone_cluster
    delta = tmp_path / FIXTURE
    shutil.copytree(DELTA_FIXTURES / FIXTURE, delta)
    done = run(
        [sys.executable, "-c", SYNC_ON_THE_CLUSTER, master_url, str(delta), str(tmp_path / "iceberg")],
        cwd=tmp_path,
        env=dvmirror_env(SPARK_LOCAL_IP="127.0.0.1"),
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # Every version with DVs ran as tasks on executor 0 of the worker, not in the driver.
    assert report["converted_on"] and all(c.endswith("on executor(s) 0)") for c in report["converted_on"])
    # A cluster master: no local-master override needed, the DV count (>= 1) chose the executors.
    assert all(p.startswith("executors: ") and p.endswith(f" on {master_url}") for p in report["placement"])
    assert (work / report["app"] / "0").is_dir()  # the worker ran that executor for this application
    for reader in ("java", "pyiceberg"):
        assert sorted(int(v) for v in report[reader]) == list(range(16))
        for version, rows in report[reader].items():
            assert rows == sorted_rows(expected_rows(FIXTURE, int(version))), (reader, version)
