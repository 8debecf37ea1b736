"""The mirror's configuration: one object, built from explicit values (CLI flags, a Dagster resource's
fields) over a configuration file over the environment over defaults. This module is the only reader of
`DVMIRROR_*` variables.

The Iceberg catalog is one property map in Iceberg's own property names (`type` or `catalog-impl`,
`uri`, `warehouse`, `io-impl`, `s3.endpoint`, …): Iceberg Java gets it as `spark.sql.catalog.dvmirror.*`,
pyiceberg through `load_catalog` (`CatalogConfig.pyiceberg_properties` translates the few names that
differ), and the object-storage keys (`s3.*`, `gcs.*`, `adls.*`) also configure the mirror's own storage
access and Spark's Hadoop file systems (the Delta side). Credentials are best left to the environment
(`AWS_ACCESS_KEY_ID`, …), which every engine reads.

Defaults are relative to the working directory, never to the source tree, so an installed package
behaves like a checkout run from the same folder. The JVM side: with a jars folder (DVMIRROR_JARS, or
`./.jars` as `make jars` leaves it in a checkout) Spark loads its jars; without one, the package's own
`dvmirror-jvm.jar` (shipped in the wheel) and Delta, Iceberg and the JDBC drivers resolved by Spark's Ivy
from the Maven coordinates of `maven.json` (jvm/pom.xml's) into the Ivy cache, once:

| setting | flag / file key | variable | default |
| --- | --- | --- | --- |
| catalog properties | `--catalog-property K=V`; `catalog:` | — | the sqlite catalog |
| sqlite catalog | `--catalog-uri sqlite:///PATH` | `DVMIRROR_CATALOG_URI` | `.dvmirror/catalog.db` |
| warehouse | `--warehouse`; `catalog.warehouse` | `DVMIRROR_WAREHOUSE` | `.dvmirror/warehouse` |
| configuration file | `--config FILE` | `DVMIRROR_CONFIG` | none |
| jars folder | — | `DVMIRROR_JARS` | `.jars` if it holds `dvmirror-jvm.jar` (`make jars`), else none |
| Maven packages | — | `DVMIRROR_SPARK_PACKAGES=1` | on when there is no jars folder |
| Ivy cache (Maven packages) | — | `DVMIRROR_IVY` | `$XDG_CACHE_HOME/dvmirror/ivy` (`~/.cache/…`) |
| S3 jars in Spark | on for an `s3://`/`s3a://` Delta | `DVMIRROR_S3=1` | on if the catalog uses S3 |
| GCS jars in Spark | on for a `gs://` Delta | — | on if the catalog uses GCS (`gs://` warehouse, `gcs.*`) |
| Azure jars in Spark | on for an `abfs[s]://`/`wasb[s]://` Delta | — | on if the catalog uses Azure |
| Spark master | — | `DVMIRROR_SPARK_MASTER` | `local[2]` |
| driver memory | — | `DVMIRROR_SPARK_DRIVER_MEMORY` | `3g` |
| sources file | — | `DVMIRROR_SOURCES` | `sources.yaml` (Dagster) |
| Spark-task DVs (cluster masters) | — | `DVMIRROR_EXECUTOR_DVS` | 50000 DVs in a version (`off`: driver) |
| Spark-task DV bytes (cluster masters) | — | `DVMIRROR_EXECUTOR_BYTES` | 268435456 (256 MiB) in a version |
| Spark tasks on a local master too | — | `DVMIRROR_EXECUTORS_ON_LOCAL=1` | off: driver on `local[…]` |
| tracebacks | — | `DVMIRROR_DEBUG=1` | off |

The configuration file is YAML, read by the one parser of the mirror's files (`config_file.py`, the
tables file's too); `${VAR}` in a value is replaced by the environment variable VAR (an unset one is an
error), so secrets need not be written into it, and a YAML boolean is written as `true`/`false`:

```yaml
catalog:
  type: rest
  uri: http://127.0.0.1:8181
  warehouse: s3://bucket/warehouse
  s3.endpoint: http://127.0.0.1:9000
  s3.path-style-access: true
  s3.secret-access-key: ${S3_SECRET}
```
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import quote, urlsplit

from dv_assets.mirror.config_file import load_config_file
from dv_assets.mirror.locations import TableLocation, store_of
from dv_assets.mirror.placement import (
    DEFAULT_EXECUTOR_BYTES,
    DEFAULT_EXECUTOR_DVS,
    DEFAULT_EXECUTOR_POLICY,
    ExecutorPolicy,
)
from dv_assets.mirror.secrets import masked, remember_secrets

CATALOG_URI_ENV = "DVMIRROR_CATALOG_URI"
WAREHOUSE_ENV = "DVMIRROR_WAREHOUSE"
CONFIG_ENV = "DVMIRROR_CONFIG"
JARS_ENV = "DVMIRROR_JARS"
IVY_ENV = "DVMIRROR_IVY"
SPARK_PACKAGES_ENV = "DVMIRROR_SPARK_PACKAGES"
SPARK_MASTER_ENV = "DVMIRROR_SPARK_MASTER"
DRIVER_MEMORY_ENV = "DVMIRROR_SPARK_DRIVER_MEMORY"
SOURCES_ENV = "DVMIRROR_SOURCES"
EXECUTOR_DVS_ENV = "DVMIRROR_EXECUTOR_DVS"
EXECUTOR_BYTES_ENV = "DVMIRROR_EXECUTOR_BYTES"
EXECUTORS_ON_LOCAL_ENV = "DVMIRROR_EXECUTORS_ON_LOCAL"
DEBUG_ENV = "DVMIRROR_DEBUG"
S3_ENV = "DVMIRROR_S3"

# The catalog property prefixes of the object stores (Iceberg's and pyiceberg's names), which the mirror's
# FileIO and Spark's Hadoop file systems read too (the stores' URI schemes: `locations.STORE_SCHEMES`).
STORAGE_PREFIXES = ("s3.", "client.", "gcs.", "adls.")

STATE_DIR = ".dvmirror"
JARS_DIR = ".jars"
HELPER_JAR = "dvmirror-jvm.jar"  # the project's own JVM helper (jvm/src), in every jars folder
SOURCES_FILE = "sources.yaml"
ICEBERG_CATALOG_NAME = "dvmirror"

# Iceberg Java's catalog types and implementations, and pyiceberg's name for each.
_JAVA_IMPLS = {
    "jdbc": "org.apache.iceberg.jdbc.JdbcCatalog",
    "rest": "org.apache.iceberg.rest.RESTCatalog",
    "hive": "org.apache.iceberg.hive.HiveCatalog",
    "glue": "org.apache.iceberg.aws.glue.GlueCatalog",
    "hadoop": "org.apache.iceberg.hadoop.HadoopCatalog",
    "nessie": "org.apache.iceberg.nessie.NessieCatalog",
    "bigquery": "org.apache.iceberg.gcp.bigquery.BigQueryMetastoreCatalog",
}
_PYICEBERG_TYPES = {"jdbc": "sql", "rest": "rest", "hive": "hive", "glue": "glue"}
# Properties that only Iceberg Java understands (pyiceberg would misread or ignore them).
_JAVA_ONLY = ("catalog-impl", "io-impl", "cache-enabled", "cache.expiration-interval-ms")


def _is_uri(location: str) -> bool:
    return bool(re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:", location))


def normalize_warehouse(warehouse: str | Path) -> str:
    """A local warehouse as an absolute path (relative ones against the working directory); a URI as is.

    A URI is never passed through `Path`, which would turn `s3://b/wh` into `s3:/b/wh`.
    """
    text = os.fspath(warehouse)
    if _is_uri(text):
        return text.rstrip("/")
    return str(Path(text).resolve())


@dataclass(frozen=True)
class CatalogConfig:
    """The Iceberg catalog: Iceberg Java's catalog properties, one map for every engine of the mirror."""

    properties: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        props = {str(k): str(v) for k, v in self.properties.items()}
        if "type" not in props and "catalog-impl" not in props:
            raise ValueError(
                "catalog properties need `type` (jdbc, rest, hive, glue, …) or `catalog-impl`, got "
                f"{sorted(props)}"
            )
        if "type" in props and props["type"].lower() not in _JAVA_IMPLS:
            # Iceberg Java would refuse it too, but only once a JVM is up (CatalogUtil.buildIcebergCatalog).
            raise ValueError(
                f"catalog property type={props['type']}: Iceberg knows the types {', '.join(_JAVA_IMPLS)}; "
                "any other catalog is named by its class with catalog-impl=…"
            )
        if props.get("warehouse"):
            props["warehouse"] = normalize_warehouse(props["warehouse"])
        object.__setattr__(self, "properties", dict(sorted(props.items())))
        remember_secrets(self.properties)  # masked wherever this process prints them

    def __hash__(self) -> int:
        # A value (frozen, properties normalized): settings holding it are hashable too.
        return hash(tuple(self.properties.items()))

    # -- construction --------------------------------------------------------------------------------
    @classmethod
    def sqlite(cls, path: str | Path, warehouse: str | Path) -> CatalogConfig:
        """The embedded catalog: one sqlite file that Iceberg Java (JDBC) and pyiceberg (SQL) both open."""
        uri = f"jdbc:sqlite:{Path(path).resolve()}"
        return cls({"type": "jdbc", "uri": uri, "warehouse": str(warehouse)})

    @classmethod
    def under(cls, root: str | Path) -> CatalogConfig:
        root = Path(root).resolve()
        return cls.sqlite(root / "catalog.db", root / "warehouse")

    @classmethod
    def from_uri(cls, catalog_uri: str, warehouse: str | Path) -> CatalogConfig:
        """`sqlite:///PATH/catalog.db`, the shorthand of `--catalog-uri` and DVMIRROR_CATALOG_URI."""
        prefix = "sqlite:///"
        if not catalog_uri.startswith(prefix):
            raise ValueError(
                f"catalog uri must look like sqlite:///PATH/catalog.db, got {catalog_uri!r}; other catalogs "
                "are configured by their properties (--catalog-property type=rest --catalog-property uri=…)"
            )
        return cls.sqlite(Path("/" + catalog_uri[len(prefix) :].lstrip("/")), warehouse)

    # -- what it is ----------------------------------------------------------------------------------
    @property
    def kind(self) -> str:
        """`jdbc`, `rest`, …, or the implementation class."""
        if "type" in self.properties:
            return self.properties["type"].lower()
        impl = self.properties["catalog-impl"]
        return next((kind for kind, java in _JAVA_IMPLS.items() if java == impl), impl)

    @property
    def warehouse(self) -> str | None:
        return self.properties.get("warehouse")

    @property
    def sqlite_path(self) -> Path | None:
        """The sqlite file of an embedded catalog (None for any other catalog)."""
        uri = self.properties.get("uri", "")
        if self.kind == "jdbc" and uri.startswith("jdbc:sqlite:"):
            return Path(uri[len("jdbc:sqlite:") :])
        return None

    @property
    def local_warehouse(self) -> Path | None:
        """The warehouse folder when it is on the local file system."""
        warehouse = self.warehouse
        if warehouse is None:
            return None
        if warehouse.startswith("file:"):
            return Path(urlsplit(warehouse).path)
        return None if _is_uri(warehouse) else Path(warehouse)

    def describe(self) -> str:
        """For messages: the catalog's kind and properties, secrets masked (`secrets.masked`: the values
        of secret properties, and the passwords and secret parameters inside URIs)."""
        shown = ", ".join(f"{k}={v}" for k, v in self.properties.items() if k != "type")
        return masked(f"{self.kind} catalog ({shown})")

    # -- for each engine ------------------------------------------------------------------------------
    def iceberg_java_properties(self) -> dict[str, str]:
        """The properties of catalog `dvmirror` in Spark (`spark.sql.catalog.dvmirror.<key>`)."""
        # Every read sees the latest commit, whichever engine made it (overridable).
        return {"cache-enabled": "false", **self.properties}

    def pyiceberg_reads(self) -> bool:
        """Whether pyiceberg has a counterpart of the catalog's kind (it reads the table without a JVM)."""
        try:
            self.pyiceberg_properties()
        except ValueError:
            return False
        return True

    def pyiceberg_properties(self) -> dict[str, str]:
        """The same catalog for pyiceberg's `load_catalog`: its own `type` names, a SQLAlchemy URI for
        a JDBC catalog, and without the Java-only keys."""
        props = {k: v for k, v in self.properties.items() if k not in _JAVA_ONLY and k != "type"}
        kind = self.kind
        py_type = _PYICEBERG_TYPES.get(kind)
        if py_type is None:
            raise ValueError(
                f"pyiceberg has no counterpart of the {kind} catalog; configure pyiceberg yourself "
                "(py-catalog-impl) to read the mirror"
            )
        props["type"] = py_type
        if kind == "jdbc":
            props["uri"] = _sqlalchemy_uri(props.get("uri", ""), props)
            props = {k: v for k, v in props.items() if not k.startswith("jdbc.")}
        warehouse = props.get("warehouse")
        if warehouse and not _is_uri(warehouse):
            props["warehouse"] = f"file://{warehouse}"
        return props

    def pyiceberg_catalog(self):  # -> pyiceberg.catalog.Catalog
        from pyiceberg.catalog import load_catalog

        sqlite = self.sqlite_path
        if sqlite is not None:
            sqlite.parent.mkdir(parents=True, exist_ok=True)
        return load_catalog(ICEBERG_CATALOG_NAME, **self.pyiceberg_properties())

    @property
    def uses_s3(self) -> bool:
        return self._uses("s3", "s3.")

    @property
    def uses_gcs(self) -> bool:
        return self._uses("gcs", "gcs.")

    @property
    def uses_azure(self) -> bool:
        return self._uses("azure", "adls.")

    def _uses(self, store: str, prefix: str) -> bool:
        """Whether the warehouse is on that store (`STORE_SCHEMES`) or any property configures it."""
        on_it = store_of(self.warehouse or "") == store
        return on_it or any(k.startswith(prefix) for k in self.properties)

    @property
    def endpoint(self) -> tuple[str, str, int] | None:
        """The server a catalog talks to, as (property, host, port): the `uri` of a REST, Hive or JDBC
        (non-sqlite) catalog. None when there is none to name (embedded sqlite, cloud services, a file
        system warehouse, a custom implementation)."""
        uri = self.properties.get("uri", "")
        kind = self.kind
        if kind == "jdbc" and uri.startswith("jdbc:") and not uri.startswith("jdbc:sqlite:"):
            uri = uri[len("jdbc:") :]
        elif kind not in ("rest", "hive"):
            return None
        parts = urlsplit(uri.split(",")[0])  # a Hive metastore list: the first one
        if not parts.hostname:
            return None
        default_port = {"https": 443, "http": 80, "thrift": 9083, "postgresql": 5432, "mysql": 3306}
        try:
            port = parts.port or default_port.get(parts.scheme)
        except ValueError:  # a port that is not a number: the catalog itself will say so
            return None
        return None if port is None else ("uri", parts.hostname, port)

    def storage_properties(self) -> dict[str, str]:
        """The object-storage keys (`s3.*`, `client.*`, `gcs.*`, `adls.*`) shared with the mirror's own
        FileIO and Spark's Hadoop file systems."""
        return {k: v for k, v in self.properties.items() if k.startswith(STORAGE_PREFIXES)}


def _sqlalchemy_uri(jdbc_uri: str, props: Mapping[str, str]) -> str:
    """`jdbc:sqlite:/p` → `sqlite:////p`; `jdbc:postgresql://h:5432/db` (+ jdbc.user/jdbc.password) →
    `postgresql+psycopg2://user:password@h:5432/db`."""
    if jdbc_uri.startswith("jdbc:sqlite:"):
        return f"sqlite:///{jdbc_uri[len('jdbc:sqlite:') :]}"
    if jdbc_uri.startswith("jdbc:postgresql://"):
        rest = jdbc_uri[len("jdbc:postgresql://") :]
        user, password = props.get("jdbc.user"), props.get("jdbc.password")
        auth = ""
        if user:
            auth = quote(user, safe="") + (f":{quote(password, safe='')}" if password else "") + "@"
        return f"postgresql+psycopg2://{auth}{rest}"
    kind = ":".join(jdbc_uri.split(":")[:2])
    raise ValueError(f"a JDBC catalog on {kind} is not supported (sqlite and postgresql are)")


def parse_property(text: str) -> tuple[str, str]:
    """`KEY=VALUE` of `--catalog-property`."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--catalog-property must be KEY=VALUE, got {text!r}")
    return key.strip(), value


@dataclass(frozen=True)
class MirrorSettings:
    """Everything the engine is configured with (see the module docstring for variables and defaults)."""

    catalog: CatalogConfig
    # None: no jars folder; the packaged helper jar, and Maven coordinates resolved by Spark (Ivy).
    jars_dir: Path | None
    spark_packages: bool = False
    ivy_dir: Path = Path.home() / ".cache" / "dvmirror" / "ivy"
    spark_master: str = "local[2]"
    driver_memory: str = "3g"
    sources_file: Path = Path(SOURCES_FILE)
    # Whether the tables file was named (DVMIRROR_SOURCES, or given): then it must exist. Otherwise
    # `sources.yaml` in the working directory is used when there is one.
    sources_named: bool = False
    debug: bool = False
    executors: ExecutorPolicy = DEFAULT_EXECUTOR_POLICY  # when a version's DVs are converted in Spark tasks
    # S3 support in Spark (S3A for the Delta side, Iceberg's S3FileIO): the jars of `make jars-s3`. On when
    # asked for (`s3_requested`: the flag, DVMIRROR_S3) or when the catalog uses S3.
    s3: bool = False
    s3_requested: bool = False
    # The same for GCS (`make jars-gcs`) and Azure (`make jars-azure`): asked for by the Delta table's
    # location (`gs://`; `abfs[s]://`, `wasb[s]://`), or the catalog uses them.
    gcs: bool = False
    gcs_requested: bool = False
    azure: bool = False
    azure_requested: bool = False

    @classmethod
    def resolve(
        cls,
        *,
        catalog: CatalogConfig | None = None,
        catalog_properties: Mapping[str, str] | None = None,
        file_catalog: Mapping[str, str] | None = None,
        config_file: str | Path | None = None,
        catalog_uri: str | None = None,
        warehouse: str | Path | None = None,
        jars_dir: str | Path | None = None,
        sources_file: str | Path | None = None,
        s3: bool = False,
        gcs: bool = False,
        azure: bool = False,
        spark_master: str | None = None,
        driver_memory: str | None = None,
        spark_packages: bool | None = None,
        executor_dvs: str | None = None,
        environ: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> MirrorSettings:
        """Explicit values first, then a file, then the environment, then defaults under the working
        directory. The catalog: `catalog` (the whole catalog), else `_resolved_catalog`'s. `executor_dvs`
        is DVMIRROR_EXECUTOR_DVS's form: a number of DVs, or `off`.
        """
        env = os.environ if environ is None else environ
        cwd = (cwd or Path.cwd()).resolve()
        state = cwd / STATE_DIR
        if catalog is None:
            catalog = _resolved_catalog(
                catalog_properties=catalog_properties,
                file_catalog=file_catalog,
                config_file=config_file,
                catalog_uri=catalog_uri,
                warehouse=warehouse,
                env=env,
                state=state,
            )
        s3_requested = s3 or env.get(S3_ENV) == "1"
        found_jars = _jars_folder(jars_dir or env.get(JARS_ENV), cwd)
        return cls(
            catalog=catalog,
            jars_dir=found_jars,
            spark_packages=found_jars is None
            or (env.get(SPARK_PACKAGES_ENV) == "1" if spark_packages is None else spark_packages),
            ivy_dir=Path(env.get(IVY_ENV) or _cache_home(env) / "dvmirror" / "ivy").resolve(),
            spark_master=spark_master or env.get(SPARK_MASTER_ENV) or "local[2]",
            driver_memory=driver_memory or env.get(DRIVER_MEMORY_ENV) or "3g",
            sources_file=Path(sources_file or env.get(SOURCES_ENV) or cwd / SOURCES_FILE).resolve(),
            sources_named=bool(sources_file or env.get(SOURCES_ENV)),
            debug=bool(env.get(DEBUG_ENV)),
            executors=_executor_policy(executor_dvs, env),
            s3=s3_requested or catalog.uses_s3,
            s3_requested=s3_requested,
            gcs=gcs or catalog.uses_gcs,
            gcs_requested=gcs,
            azure=azure or catalog.uses_azure,
            azure_requested=azure,
        )

    def with_catalog(self, catalog: CatalogConfig) -> MirrorSettings:
        """The same settings over another catalog (a code location whose tables name theirs): what
        `resolve(catalog=catalog)` gives, without reading the environment again."""
        return replace(
            self,
            catalog=catalog,
            s3=self.s3_requested or catalog.uses_s3,
            gcs=self.gcs_requested or catalog.uses_gcs,
            azure=self.azure_requested or catalog.uses_azure,
        )

    def for_location(self, location: str | TableLocation) -> MirrorSettings:
        """These settings with the jars a Delta table at `location` needs (its URI's object store)."""
        store = location.store if isinstance(location, TableLocation) else store_of(location)
        if store == "s3":
            return replace(self, s3=True, s3_requested=True)
        if store == "gcs":
            return replace(self, gcs=True, gcs_requested=True)
        if store == "azure":
            return replace(self, azure=True, azure_requested=True)
        return self

    @property
    def executor_dvs(self) -> str:
        """The executors' DV threshold as DVMIRROR_EXECUTOR_DVS spells it (a number of DVs, or `off`)."""
        return "off" if self.executors.min_dvs is None else str(self.executors.min_dvs)


def _resolved_catalog(
    *,
    catalog_properties: Mapping[str, str] | None,
    file_catalog: Mapping[str, str] | None,
    config_file: str | Path | None,
    catalog_uri: str | None,
    warehouse: str | Path | None,
    env: Mapping[str, str],
    state: Path,
) -> CatalogConfig:
    """The catalog when `MirrorSettings.resolve` is given no whole catalog.

    When `catalog_uri` (`--catalog-uri`) is given, that sqlite catalog (a flag: no file's catalog counts;
    `--config` with it is refused as two answers to one question); else the file's property map,
    `catalog_properties` (flags) over it, and `warehouse` (the flag) over both. The file is `file_catalog`
    (a tables file's `catalog:`), which is a whole catalog: nothing of the environment goes under it;
    else the configuration file's `catalog:` (`config_file`, else DVMIRROR_CONFIG), DVMIRROR_WAREHOUSE
    filling a missing `warehouse`. With no properties at all: the sqlite shorthand (DVMIRROR_CATALOG_URI,
    ./.dvmirror/catalog.db) and DVMIRROR_WAREHOUSE.
    """
    if catalog_uri and (catalog_properties or config_file):
        raise ValueError("give the catalog as --catalog-uri or as catalog properties, not both")
    env_warehouse = env.get(WAREHOUSE_ENV)
    properties: dict[str, str] = {}
    if file_catalog and not catalog_uri:
        properties = dict(file_catalog)
    elif not catalog_uri:
        config_file = config_file or env.get(CONFIG_ENV)
        properties = dict(load_config_file(config_file, env)["catalog"]) if config_file else {}
    properties.update(catalog_properties or {})
    if properties:
        if warehouse:
            properties["warehouse"] = str(warehouse)
        elif env_warehouse and not file_catalog and "warehouse" not in properties:
            properties["warehouse"] = env_warehouse
        return CatalogConfig(properties)
    uri = catalog_uri or env.get(CATALOG_URI_ENV) or f"sqlite:///{state / 'catalog.db'}"
    return CatalogConfig.from_uri(uri, warehouse or env_warehouse or state / "warehouse")


def _executor_policy(executor_dvs: str | None, env: Mapping[str, str]) -> ExecutorPolicy:
    """When DV work goes to Spark executors: `executor_dvs` (a flag) else the environment's."""
    return ExecutorPolicy(
        min_dvs=_threshold(env.get(EXECUTOR_DVS_ENV) if executor_dvs is None else executor_dvs),
        min_bytes=_byte_threshold(env.get(EXECUTOR_BYTES_ENV)),
        on_local_master=env.get(EXECUTORS_ON_LOCAL_ENV) == "1",
    )


def _jars_folder(given: str | Path | None, cwd: Path) -> Path | None:
    """The jars folder: the one given (flag or DVMIRROR_JARS), else `./.jars` when `make jars` filled it
    (a checkout), else None (the packaged helper and Maven coordinates)."""
    if given:
        return Path(given).resolve()
    local = cwd / JARS_DIR
    return local.resolve() if (local / HELPER_JAR).is_file() else None


def _cache_home(env: Mapping[str, str]) -> Path:
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def _threshold(value: str | None) -> int | None:
    if value is None or value == "":
        return DEFAULT_EXECUTOR_DVS
    if value.lower() == "off":
        return None
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{EXECUTOR_DVS_ENV} must be a positive number of DVs or `off`, got {value!r}")
    return int(value)


def _byte_threshold(value: str | None) -> int:
    if value is None or value == "":
        return DEFAULT_EXECUTOR_BYTES
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{EXECUTOR_BYTES_ENV} must be a positive number of bytes, got {value!r}")
    return int(value)
