"""DV conversion on a real Spark cluster: a standalone master and two workers started from the pyspark
distribution on this machine (testkit/spark_cluster.py, as `bench.py --only cluster` starts them); the
engine's session points at it (`spark.master=spark://127.0.0.1:…`, as the Dagster resource's
`spark_config` would) with the driver's heap capped at 1 GiB, the DVs are converted in tasks on the
workers' executors (the jars reaching them through the driver's `spark.jars`), and the mirror reads back
exactly, through Iceberg Java (its read tasks on the executors too) and pyiceberg.

Proof that the work ran on the workers comes from the executor side: each task reports the executor id
its own environment names, and the workers' work folders hold executor folders for the application.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.spark_cluster import StandaloneCluster, standalone_cluster
from tests.helpers.paths import DELTA_FIXTURES, expected_rows
from tests.helpers.processes import dvmirror_env, run
from tests.helpers.rows import sorted_rows

pytestmark = [pytest.mark.spark, pytest.mark.system]  # a standalone master and worker of its own

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
overrides = {"spark.master": master, "spark.executor.memory": "512m", "spark.cores.max": "2"}
spark = get_or_create_spark(MirrorSettings.resolve(catalog=catalog), overrides)
result = sync_table(spark, delta, "cluster.t", executors=ExecutorPolicy(min_dvs=1))
snapshots = snapshots_by_delta_version(catalog, "cluster.t")
print(json.dumps({
    "app": spark.sparkContext.applicationId,
    "heap_max": spark._jvm.java.lang.Runtime.getRuntime().maxMemory(),
    "converted_on": [v.dvs_converted_on for v in result.versions if v.dvs_written],
    "placement": [v.dv_placement for v in result.versions if v.dvs_written],
    "java": {v: iceberg_java_rows(spark, "cluster.t", s) for v, s in snapshots.items()},
    "pyiceberg": {v: pyiceberg_rows(catalog, "cluster.t", s) for v, s in snapshots.items()},
}))
spark.stop()
"""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[StandaloneCluster]:
    """A standalone master and two workers (1 core, 1 GiB each) on loopback, stopped after the test."""
    with standalone_cluster(tmp_path / "spark", workers=2, cores=1, memory="1g") as running:
        yield running


def test_dvs_are_converted_on_the_workers(cluster: StandaloneCluster, tmp_path: Path) -> None:
    delta = tmp_path / FIXTURE
    shutil.copytree(DELTA_FIXTURES / FIXTURE, delta)
    done = run(
        [
            sys.executable,
            "-c",
            SYNC_ON_THE_CLUSTER,
            cluster.master_url,
            str(delta),
            str(tmp_path / "iceberg"),
        ],
        cwd=tmp_path,
        # The driver's heap capped as a cluster's driver would be: the work is the executors'.
        env=dvmirror_env(SPARK_LOCAL_IP="127.0.0.1", DVMIRROR_SPARK_DRIVER_MEMORY="1g"),
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # Every version with DVs ran as tasks on the workers' executors (ids 0 and 1), not in the driver.
    ran_on = [
        re.fullmatch(r"spark \(\d+ tasks on executor\(s\) ([\d, ]+)\)", c) for c in report["converted_on"]
    ]
    assert ran_on and all(ran_on), report["converted_on"]
    assert {e for m in ran_on if m for e in m.group(1).split(", ")} <= {"0", "1"}
    # A cluster master: no local-master override needed, the DV count (>= 1) chose the executors.
    assert all(
        p.startswith("executors: ") and p.endswith(f" on {cluster.master_url}") for p in report["placement"]
    )
    # The workers ran executors for this application (their folders in the workers' work folders).
    assert cluster.executor_folders(report["app"])
    assert report["heap_max"] <= 2**30
    for reader in ("java", "pyiceberg"):
        assert sorted(int(v) for v in report[reader]) == list(range(16))
        for version, rows in report[reader].items():
            assert rows == sorted_rows(expected_rows(FIXTURE, int(version))), (reader, version)
