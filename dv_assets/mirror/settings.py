"""The mirror's configuration: one object, built from explicit values (CLI flags, a Dagster resource's
fields) over the environment over defaults. This module is the only reader of `DVMIRROR_*` variables.

Defaults are relative to the working directory, never to the source tree, so an installed package
behaves like a checkout run from the same folder:

| setting        | variable                        | default                          |
|----------------|---------------------------------|----------------------------------|
| catalog        | `DVMIRROR_CATALOG_URI`          | `sqlite:///<cwd>/.dvmirror/catalog.db` |
| warehouse      | `DVMIRROR_WAREHOUSE`            | `<cwd>/.dvmirror/warehouse`      |
| jars folder    | `DVMIRROR_JARS`                 | `<cwd>/.jars` (`make jars`)      |
| Maven packages | `DVMIRROR_SPARK_PACKAGES=1`     | off: jars from the folder        |
| Spark master   | `DVMIRROR_SPARK_MASTER`         | `local[2]`                       |
| driver memory  | `DVMIRROR_SPARK_DRIVER_MEMORY`  | `3g`                             |
| sources file   | `DVMIRROR_SOURCES`              | `<cwd>/sources.yaml` (Dagster)   |
| Spark-task DVs | `DVMIRROR_EXECUTOR_DVS`         | 1000 DVs in a version (`off`: driver) |
| tracebacks     | `DVMIRROR_DEBUG=1`              | off                              |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

CATALOG_URI_ENV = "DVMIRROR_CATALOG_URI"
WAREHOUSE_ENV = "DVMIRROR_WAREHOUSE"
JARS_ENV = "DVMIRROR_JARS"
SPARK_PACKAGES_ENV = "DVMIRROR_SPARK_PACKAGES"
SPARK_MASTER_ENV = "DVMIRROR_SPARK_MASTER"
DRIVER_MEMORY_ENV = "DVMIRROR_SPARK_DRIVER_MEMORY"
SOURCES_ENV = "DVMIRROR_SOURCES"
EXECUTOR_DVS_ENV = "DVMIRROR_EXECUTOR_DVS"
DEFAULT_EXECUTOR_DVS = 1000
DEBUG_ENV = "DVMIRROR_DEBUG"

STATE_DIR = ".dvmirror"
JARS_DIR = ".jars"
SOURCES_FILE = "sources.yaml"
ICEBERG_CATALOG_NAME = "dvmirror"


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


@dataclass(frozen=True)
class MirrorSettings:
    """Everything the engine is configured with (see the module docstring for variables and defaults)."""

    catalog: CatalogLocation
    jars_dir: Path
    spark_packages: bool = False
    spark_master: str = "local[2]"
    driver_memory: str = "3g"
    sources_file: Path = Path(SOURCES_FILE)
    debug: bool = False
    executor_threshold: int | None = DEFAULT_EXECUTOR_DVS  # None: DVs always converted on the driver

    @classmethod
    def resolve(
        cls,
        *,
        catalog: CatalogLocation | None = None,
        catalog_uri: str | None = None,
        warehouse: str | Path | None = None,
        jars_dir: str | Path | None = None,
        sources_file: str | Path | None = None,
        environ: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> MirrorSettings:
        """Explicit values first, then the environment, then defaults under the working directory."""
        env = os.environ if environ is None else environ
        cwd = (cwd or Path.cwd()).resolve()
        state = cwd / STATE_DIR
        if catalog is None:
            uri = catalog_uri or env.get(CATALOG_URI_ENV) or f"sqlite:///{state / 'catalog.db'}"
            catalog = CatalogLocation.from_uri(
                uri, warehouse or env.get(WAREHOUSE_ENV) or state / "warehouse"
            )
        return cls(
            catalog=catalog,
            jars_dir=Path(jars_dir or env.get(JARS_ENV) or cwd / JARS_DIR).resolve(),
            spark_packages=env.get(SPARK_PACKAGES_ENV) == "1",
            spark_master=env.get(SPARK_MASTER_ENV) or "local[2]",
            driver_memory=env.get(DRIVER_MEMORY_ENV) or "3g",
            sources_file=Path(sources_file or env.get(SOURCES_ENV) or cwd / SOURCES_FILE).resolve(),
            debug=bool(env.get(DEBUG_ENV)),
            executor_threshold=_threshold(env.get(EXECUTOR_DVS_ENV)),
        )


def _threshold(value: str | None) -> int | None:
    if value is None or value == "":
        return DEFAULT_EXECUTOR_DVS
    if value.lower() == "off":
        return None
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{EXECUTOR_DVS_ENV} must be a positive number of DVs or `off`, got {value!r}")
    return int(value)
