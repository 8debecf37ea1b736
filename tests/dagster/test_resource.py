"""`IcebergSparkResource` is dagster-pyspark's resource: `spark_config` (nested or dotted keys) reaches the
Spark session, over the engine's settings, with the configured Iceberg catalog. A fresh process, since a
process holds one Spark session."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import pytest
from dagster_pyspark import LazyPySparkResource

from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from resources import IcebergSparkResource
from tests.helpers.paths import REPO_ROOT
from tests.helpers.processes import run
from tests.helpers.settings import leaky_environment

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


def test_explicit_catalog_properties_take_nothing_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    leaky_environment(tmp_path, monkeypatch)
    explicit = {"type": "jdbc", "uri": f"jdbc:sqlite:{tmp_path / 'c.db'}"}  # no warehouse: none filled in
    settings = IcebergSparkResource(catalog_properties=explicit).settings
    assert settings.catalog == CatalogConfig(explicit)
    assert "leaked" not in json.dumps(dict(settings.catalog.properties))
    assert not settings.s3
    # The resource's own `warehouse` field is explicit too: it fills a missing warehouse.
    given = IcebergSparkResource(catalog_properties=explicit, warehouse=str(tmp_path / "wh")).settings
    assert given.catalog == CatalogConfig({**explicit, "warehouse": str(tmp_path / "wh")})


def test_the_resource_holds_the_settings_it_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "DVMIRROR_SPARK_MASTER": "local[1]",
        "DVMIRROR_SPARK_DRIVER_MEMORY": "1g",
        "DVMIRROR_EXECUTOR_DVS": "off",
        "DVMIRROR_SPARK_PACKAGES": "1",
        "DVMIRROR_S3": "1",
        "DVMIRROR_JARS": str(tmp_path / "jars"),
    }.items():
        monkeypatch.setenv(name, value)
    settings = MirrorSettings.resolve(catalog=CatalogConfig.under(tmp_path))
    resource = IcebergSparkResource.for_settings(settings)
    for name in list(os.environ):
        if name.startswith("DVMIRROR_"):
            monkeypatch.delenv(name)  # the resource's fields hold the values: nothing is read again
    held = dataclasses.replace(resource.settings, sources_file=settings.sources_file, debug=settings.debug)
    assert held == settings
    assert resource.settings is resource.settings  # resolved once per resource object
