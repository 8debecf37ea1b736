"""One Spark configuration for Delta + Iceberg, shared by the CLI, the tests and Dagster.

Spark gets its JVM side (Delta, Iceberg, sqlite-jdbc) from the jars that `make jars` copies out of
Maven into `.jars/` (see `jvm/pom.xml`). Users with internet access can set `DVMIRROR_SPARK_PACKAGES=1`
to have Spark resolve the same coordinates through `spark.jars.packages` instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from pydantic import Field
from pyspark.sql import SparkSession

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_JARS_DIR = REPO_ROOT / ".jars"
ICEBERG_CATALOG_NAME = "dvmirror"
LOG4J2_CONFIG = Path(__file__).resolve().parent / "log4j2.properties"

# Keep in step with jvm/pom.xml.
SPARK_PACKAGES = (
    "io.delta:delta-spark_4.1_2.13:4.4.0",
    "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0",
    "org.xerial:sqlite-jdbc:3.54.1.0",
)


@dataclass(frozen=True)
class CatalogLocation:
    """The Iceberg catalog: a sqlite file (JDBC for Java, SQLAlchemy for pyiceberg) and a warehouse."""

    sqlite_path: Path
    warehouse: Path

    @classmethod
    def from_uri(cls, catalog_uri: str, warehouse: str | Path) -> CatalogLocation:
        prefix = "sqlite:///"
        if not catalog_uri.startswith(prefix):
            raise ValueError(f"catalog uri must look like sqlite:///PATH/catalog.db, got {catalog_uri!r}")
        return cls(Path("/" + catalog_uri[len(prefix) :].lstrip("/")).resolve(), Path(warehouse).resolve())

    @classmethod
    def under(cls, root: str | Path) -> CatalogLocation:
        root = Path(root).resolve()
        return cls(root / "catalog.db", root / "warehouse")

    @property
    def sqlalchemy_uri(self) -> str:
        return f"sqlite:///{self.sqlite_path}"

    @property
    def jdbc_uri(self) -> str:
        return f"jdbc:sqlite:{self.sqlite_path}"

    def iceberg_java_properties(self) -> dict[str, str]:
        """Properties of Iceberg Java's JdbcCatalog; the same tables pyiceberg's SqlCatalog reads."""
        return {
            "catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
            "uri": self.jdbc_uri,
            "warehouse": str(self.warehouse),
            # Every read sees the latest commit, whichever engine made it.
            "cache-enabled": "false",
        }

    def pyiceberg_catalog(self):  # -> pyiceberg.catalog.sql.SqlCatalog
        from pyiceberg.catalog.sql import SqlCatalog

        self.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
        return SqlCatalog(ICEBERG_CATALOG_NAME, uri=self.sqlalchemy_uri, warehouse=f"file://{self.warehouse}")


def jar_paths(jars_dir: Path = DEFAULT_JARS_DIR) -> list[str]:
    jars = sorted(str(p) for p in Path(jars_dir).glob("*.jar"))
    if not jars:
        raise FileNotFoundError(f"no jars in {jars_dir}: run `make jars` (mvn, see jvm/pom.xml)")
    return jars


def spark_config(catalog: CatalogLocation, jars_dir: Path | None = None) -> dict[str, str]:
    """Spark settings for Delta (spark_catalog) and Iceberg (catalog `dvmirror`), small-machine tuned."""
    conf = {
        "spark.master": os.environ.get("DVMIRROR_SPARK_MASTER", "local[2]"),
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
        "spark.driver.memory": os.environ.get("DVMIRROR_SPARK_DRIVER_MEMORY", "3g"),
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J2_CONFIG}",
    }
    for key, value in catalog.iceberg_java_properties().items():
        conf[f"spark.sql.catalog.{ICEBERG_CATALOG_NAME}.{key}"] = value
    if os.environ.get("DVMIRROR_SPARK_PACKAGES") == "1":
        conf["spark.jars.packages"] = ",".join(SPARK_PACKAGES)
    else:
        conf["spark.jars"] = ",".join(jar_paths(jars_dir or DEFAULT_JARS_DIR))
    return conf


def get_or_create_spark(catalog: CatalogLocation, jars_dir: Path | None = None) -> SparkSession:
    """The process's one Spark session. Its `dvmirror` catalog is fixed once the session exists."""
    catalog.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
    catalog.warehouse.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # local mode needs no routable address
    builder = SparkSession.builder
    for key, value in spark_config(catalog, jars_dir).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class IcebergSparkResource(dg.ConfigurableResource):
    """Spark with Delta and Iceberg for the Dagster assets, checks and cleanup: the CLI's settings.

    A process has one SparkSession and its `dvmirror` catalog is fixed when the session starts, so the
    resource reuses a running session (the tests', or an earlier run step's) and refuses one whose
    catalog is not the configured one rather than writing to the wrong catalog.
    """

    catalog_uri: str = Field(description="sqlite:///PATH/catalog.db, the Iceberg catalog both engines open")
    warehouse: str = Field(description="Directory of the Iceberg warehouse")
    jars_dir: str = Field(default=str(DEFAULT_JARS_DIR), description="Folder of jars from `make jars`")

    @classmethod
    def for_catalog(cls, catalog: CatalogLocation) -> IcebergSparkResource:
        return cls(catalog_uri=catalog.sqlalchemy_uri, warehouse=str(catalog.warehouse))

    @property
    def catalog(self) -> CatalogLocation:
        return CatalogLocation.from_uri(self.catalog_uri, self.warehouse)

    def pyspark(self) -> LazyPySparkResource:
        """dagster-pyspark's resource with the same configuration (for ops that want its interface)."""
        return LazyPySparkResource(spark_config=spark_config(self.catalog, Path(self.jars_dir)))

    def get_session(self) -> SparkSession:
        catalog = self.catalog
        active = SparkSession.getActiveSession()
        spark = active if active is not None else get_or_create_spark(catalog, Path(self.jars_dir))
        configured = spark.conf.get(f"spark.sql.catalog.{ICEBERG_CATALOG_NAME}.uri", None)
        if configured != catalog.jdbc_uri:
            raise dg.DagsterInvariantViolationError(
                f"the running Spark session's `{ICEBERG_CATALOG_NAME}` catalog is {configured}, not "
                f"{catalog.jdbc_uri}: one process holds one catalog; configure the resource to match"
            )
        return spark

    @property
    def spark_session(self) -> SparkSession:
        return self.get_session()
