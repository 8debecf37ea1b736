"""The Spark session the engine runs in: Delta (spark_catalog) and Iceberg (catalog `dvmirror`) in one JVM.

Spark gets its JVM side (Delta, Iceberg, sqlite-jdbc) from the jars `make jars` copies out of Maven
(`jvm/pom.xml`) into the settings' jars folder, or, with `DVMIRROR_SPARK_PACKAGES=1`, resolves the same
coordinates itself through `spark.jars.packages`. The project's own helper, `dvmirror-jvm.jar` (built
from jvm/src by the same `make jars`), always comes from the jars folder.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from dv_assets.mirror.settings import ICEBERG_CATALOG_NAME, MirrorSettings

LOG4J2_CONFIG = Path(__file__).resolve().parent / "log4j2.properties"

# Keep in step with jvm/pom.xml.
SPARK_PACKAGES = (
    "io.delta:delta-spark_4.1_2.13:4.4.0",
    "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0",
    "org.xerial:sqlite-jdbc:3.54.1.0",
)
CATALOG_URI_KEY = f"spark.sql.catalog.{ICEBERG_CATALOG_NAME}.uri"
HELPER_JAR = "dvmirror-jvm.jar"


def helper_jar(jars_dir: Path) -> str:
    jar = Path(jars_dir) / HELPER_JAR
    if not jar.is_file():
        raise FileNotFoundError(
            f"no {HELPER_JAR} in {jars_dir}: run `make jars` (mvn, see jvm/pom.xml) or set DVMIRROR_JARS"
        )
    return str(jar)


def jar_paths(jars_dir: Path) -> list[str]:
    helper_jar(jars_dir)
    return sorted(str(p) for p in Path(jars_dir).glob("*.jar"))


def spark_config(settings: MirrorSettings) -> dict[str, str]:
    """Spark settings for Delta (spark_catalog) and Iceberg (catalog `dvmirror`), small-machine tuned."""
    conf = {
        "spark.master": settings.spark_master,
        "spark.app.name": "dv-mirror",
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension,"
        "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        f"spark.sql.catalog.{ICEBERG_CATALOG_NAME}": "org.apache.iceberg.spark.SparkCatalog",
        # Small tables, two cores: Spark's defaults of 200/50 partitions only add scheduling time.
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": settings.driver_memory,
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J2_CONFIG}",
    }
    for key, value in settings.catalog.iceberg_java_properties().items():
        conf[f"spark.sql.catalog.{ICEBERG_CATALOG_NAME}.{key}"] = value
    if settings.spark_packages:
        conf["spark.jars.packages"] = ",".join(SPARK_PACKAGES)
        conf["spark.jars"] = helper_jar(settings.jars_dir)
    else:
        conf["spark.jars"] = ",".join(jar_paths(settings.jars_dir))
    return conf


def get_or_create_spark(settings: MirrorSettings, overrides: Mapping[str, Any] | None = None) -> SparkSession:
    """The process's one Spark session, `overrides` applied over the mirror's own settings.

    A process holds one session and its `dvmirror` catalog is fixed when the session starts, so a
    running session whose catalog is another one is refused rather than written to.
    """
    catalog = settings.catalog
    active = SparkSession.getActiveSession()
    if active is None:
        catalog.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
        catalog.warehouse.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # local mode needs no routable address
        # Python tasks (DV conversion) import the installed engine: by default they run with this
        # interpreter, as the driver does (a cluster sets PYSPARK_PYTHON to its executors' Python).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = SparkSession.builder
        for key, value in {**spark_config(settings), **(overrides or {})}.items():
            builder = builder.config(key, str(value))
        active = builder.getOrCreate()
        active.sparkContext.setLogLevel("ERROR")
    configured = active.conf.get(CATALOG_URI_KEY, None)
    if configured != catalog.jdbc_uri:
        raise RuntimeError(
            f"the running Spark session's `{ICEBERG_CATALOG_NAME}` catalog is {configured}, not "
            f"{catalog.jdbc_uri}: one process holds one catalog"
        )
    return active
