"""The Spark session the engine runs in: Delta (spark_catalog) and Iceberg (catalog `dvmirror`) in one JVM.

Spark gets its JVM side (Delta, Iceberg, the JDBC drivers) from the jars `make jars` copies out of Maven
(`jvm/pom.xml`) into the settings' jars folder, or, with `DVMIRROR_SPARK_PACKAGES=1`, resolves the same
coordinates itself through `spark.jars.packages`. The project's own helper, `dvmirror-jvm.jar` (built
from jvm/src by the same `make jars`), always comes from the jars folder. S3 support (Hadoop's S3A with
the AWS SDK for the Delta side, Iceberg's AWS bundle for S3FileIO) is large, so it has its own folder,
`<jars>/s3` (`make jars-s3`, `jvm/s3/pom.xml`), loaded only when the settings need S3.
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

# The direct dependencies of jvm/pom.xml and jvm/s3/pom.xml (tests/test_jvm_coordinates.py holds them equal).
SPARK_PACKAGES = (
    "io.delta:delta-spark_4.1_2.13:4.4.0",
    "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0",
    "org.xerial:sqlite-jdbc:3.54.1.0",
    "org.postgresql:postgresql:42.7.8",
)
S3_PACKAGES = ("org.apache.hadoop:hadoop-aws:3.4.2", "org.apache.iceberg:iceberg-aws-bundle:1.12.0")
CATALOG_PREFIX = f"spark.sql.catalog.{ICEBERG_CATALOG_NAME}"
HELPER_JAR = "dvmirror-jvm.jar"
S3_JARS_DIR = "s3"

# Iceberg's S3 properties and the S3A settings that say the same for the Delta side.
_S3A = {
    "s3.endpoint": "fs.s3a.endpoint",
    "s3.path-style-access": "fs.s3a.path.style.access",
    "s3.access-key-id": "fs.s3a.access.key",
    "s3.secret-access-key": "fs.s3a.secret.key",
    "s3.session-token": "fs.s3a.session.token",
    "client.region": "fs.s3a.endpoint.region",
    "s3.region": "fs.s3a.endpoint.region",
}


def helper_jar(jars_dir: Path) -> str:
    jar = Path(jars_dir) / HELPER_JAR
    if not jar.is_file():
        raise FileNotFoundError(
            f"no {HELPER_JAR} in {jars_dir}: run `make jars` (mvn, see jvm/pom.xml) or set DVMIRROR_JARS"
        )
    return str(jar)


def jar_paths(jars_dir: Path, *, s3: bool = False) -> list[str]:
    helper_jar(jars_dir)
    jars = sorted(str(p) for p in Path(jars_dir).glob("*.jar"))
    if s3:
        jars += s3_jar_paths(jars_dir)
    return jars


def s3_jar_paths(jars_dir: Path) -> list[str]:
    found = sorted(str(p) for p in (Path(jars_dir) / S3_JARS_DIR).glob("*.jar"))
    if not found:
        raise FileNotFoundError(
            f"S3 needs the jars of `make jars-s3` (jvm/s3/pom.xml) in {Path(jars_dir) / S3_JARS_DIR}, or "
            "DVMIRROR_SPARK_PACKAGES=1"
        )
    return found


def s3a_config(storage: dict[str, str]) -> dict[str, str]:
    """Spark's Hadoop settings for S3A from Iceberg's `s3.*` properties; `s3://` paths go to S3A too
    (open-source Hadoop has no other `s3` file system). Unset credentials come from the environment."""
    conf = {"spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem"}
    for key, value in storage.items():
        if key in _S3A:
            conf[f"spark.hadoop.{_S3A[key]}"] = value
    if storage.get("s3.endpoint", "").startswith("http://"):
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = "false"
    return conf


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
        conf[f"{CATALOG_PREFIX}.{key}"] = value
    if settings.s3:
        conf.update(s3a_config(settings.catalog.storage_properties()))
    if settings.spark_packages:
        conf["spark.jars.packages"] = ",".join(SPARK_PACKAGES + (S3_PACKAGES if settings.s3 else ()))
        conf["spark.jars"] = helper_jar(settings.jars_dir)
    else:
        conf["spark.jars"] = ",".join(jar_paths(settings.jars_dir, s3=settings.s3))
    return conf


def configured_catalog(spark: SparkSession) -> dict[str, str]:
    """The properties of the running session's `dvmirror` catalog."""
    prefix = f"{CATALOG_PREFIX}."
    return {k[len(prefix) :]: v for k, v in spark.sparkContext.getConf().getAll() if k.startswith(prefix)}


def get_or_create_spark(settings: MirrorSettings, overrides: Mapping[str, Any] | None = None) -> SparkSession:
    """The process's one Spark session, `overrides` applied over the mirror's own settings.

    A process holds one session and its `dvmirror` catalog is fixed when the session starts, so a
    running session whose catalog is another one is refused rather than written to.
    """
    catalog = settings.catalog
    active = SparkSession.getActiveSession()
    if active is None:
        if catalog.sqlite_path is not None:
            catalog.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
        if catalog.local_warehouse is not None:
            catalog.local_warehouse.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # local mode needs no routable address
        # Python tasks (DV conversion) import the installed engine: by default they run with this
        # interpreter, as the driver does (a cluster sets PYSPARK_PYTHON to its executors' Python).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = SparkSession.builder
        for key, value in {**spark_config(settings), **(overrides or {})}.items():
            builder = builder.config(key, str(value))
        active = builder.getOrCreate()
        active.sparkContext.setLogLevel("ERROR")
    configured = configured_catalog(active)
    wanted = catalog.iceberg_java_properties()
    if any(configured.get(k) != v for k, v in wanted.items()):
        raise RuntimeError(
            f"the running Spark session's `{ICEBERG_CATALOG_NAME}` catalog is "
            f"{configured.get('uri') or configured}, not the {catalog.describe()}: one process holds one "
            "catalog"
        )
    return active
