"""`IcebergSparkResource` is dagster-pyspark's resource: `spark_config` (nested or dotted keys) reaches the
Spark session, over the engine's settings, with the configured Iceberg catalog. A fresh process, since a
process holds one Spark session."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from dagster_pyspark import LazyPySparkResource

from resources import IcebergSparkResource
from tests.helpers.paths import REPO_ROOT
from tests.helpers.processes import run

START_A_SESSION = """
import json, sys
from resources import IcebergSparkResource
resource = IcebergSparkResource(
    catalog_uri=sys.argv[1],
    warehouse=sys.argv[2],
    spark_config={"spark": {"app": {"name": "from-spark-config"}}, "spark.sql.shuffle.partitions": "3"},
)
conf = resource.spark_session.conf
keys = ["spark.app.name", "spark.sql.shuffle.partitions", "spark.sql.catalog.dvmirror.uri"]
print(json.dumps({key: conf.get(key) for key in keys}))
resource.spark_session.stop()
"""


def test_the_resource_is_dagster_pysparks() -> None:
    assert issubclass(IcebergSparkResource, LazyPySparkResource)


@pytest.mark.spark
def test_spark_config_reaches_the_session(tmp_path: Path) -> None:
    catalog_uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    done = run(
        [sys.executable, "-c", START_A_SESSION, catalog_uri, str(tmp_path / "wh")], cwd=REPO_ROOT, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    conf = json.loads(done.stdout.strip().splitlines()[-1])
    assert conf == {
        "spark.app.name": "from-spark-config",
        "spark.sql.shuffle.partitions": "3",
        "spark.sql.catalog.dvmirror.uri": f"jdbc:sqlite:{tmp_path / 'catalog.db'}",
    }
