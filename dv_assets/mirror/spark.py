"""The Spark session the engine runs in: Delta (spark_catalog) and Iceberg (catalog `dvmirror`) in one JVM.

Spark gets its JVM side (the project's own helper, Delta, Iceberg, the JDBC drivers) one of two ways:

* a jars folder (DVMIRROR_JARS, or `./.jars` in a checkout): the jars `make jars` copies out of Maven
  (`jvm/pom.xml`), the helper `dvmirror-jvm.jar` built from jvm/src among them. Offline; what the
  checkout's `make` targets and tests use. S3 support (Hadoop's S3A with the AWS SDK for the Delta side,
  Iceberg's AWS bundle for S3FileIO) is large, so it has its own folder, `<jars>/s3` (`make jars-s3`,
  `jvm/s3/pom.xml`), loaded only when the settings need S3; GCS (Google's Hadoop connector, Iceberg's GCP
  bundle for GCSFileIO) and Azure (hadoop-azure: ABFS and WASB) likewise, `<jars>/gcs` (`make jars-gcs`,
  `jvm/gcs/pom.xml`) and `<jars>/azure` (`make jars-azure`, `jvm/azure/pom.xml`);
* no jars folder (an installed wheel anywhere): the helper jar shipped in the package
  (`dv_assets/mirror/jars/`, put there by `make wheel`), and the rest resolved by Spark's Ivy from the
  Maven coordinates of `maven.json` (generated from jvm/pom.xml and jvm/{s3,gcs,azure}/pom.xml: one set of
  jars either way, but for the GCS connector: Spark's packages name no classifier, so Ivy resolves its
  plain jar and that jar's dependencies where Maven copies the shaded one) into the Ivy cache
  (settings.ivy_dir), from Maven Central (`ivysettings.xml`). The first run downloads them; later ones
  resolve from the cache. DVMIRROR_SPARK_PACKAGES=1 does the same with a jars folder's helper.

`check_spark_can_start` says what is missing (Java, a jar) in one line before any Spark start.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from dv_assets.mirror.errors import SparkSetupError
from dv_assets.mirror.io import azure_connection_string, azure_endpoints
from dv_assets.mirror.java_runtime import check_java
from dv_assets.mirror.secrets import masked
from dv_assets.mirror.settings import HELPER_JAR, ICEBERG_CATALOG_NAME, JARS_ENV, MirrorSettings

_HERE = Path(__file__).resolve().parent
LOG4J2_CONFIG = _HERE / "log4j2.properties"
IVY_SETTINGS = _HERE / "ivysettings.xml"
PACKAGED_HELPER = _HERE / "jars" / HELPER_JAR  # package data of the wheel (`make wheel`)

# jvm/pom.xml's and jvm/{s3,gcs,azure}/pom.xml's coordinates (tests/mirror/test_spark_jvm_coordinates.py
# holds them equal).
_MAVEN = json.loads((_HERE / "maven.json").read_text())
SPARK_PACKAGES: tuple[str, ...] = tuple(_MAVEN["packages"])
S3_PACKAGES: tuple[str, ...] = tuple(_MAVEN["s3_packages"])
GCS_PACKAGES: tuple[str, ...] = tuple(_MAVEN["gcs_packages"])
AZURE_PACKAGES: tuple[str, ...] = tuple(_MAVEN["azure_packages"])
EXCLUDED_GROUPS: tuple[str, ...] = tuple(_MAVEN["excluded_groups"])
AZURE_EXCLUDED_GROUPS: tuple[str, ...] = tuple(_MAVEN["azure_excluded_groups"])
CATALOG_PREFIX = f"spark.sql.catalog.{ICEBERG_CATALOG_NAME}"
# Hadoop's local file system setting permissions without a `chmod` process per file written (pyspark has
# no native Hadoop library): an Iceberg commit on a local warehouse forked six (jvm/src LocalFileSystem).
# Iceberg's catalog only (its `hadoop.` properties), uncached: Hadoop keeps one `file:` system per
# process, Spark's own, which starts before the helper jar is on the classpath.
LOCAL_FILE_SYSTEM = {
    "hadoop.fs.file.impl": "dev.dvmirror.LocalFileSystem",
    "hadoop.fs.file.impl.disable.cache": "true",
}
S3_JARS_DIR = "s3"
GCS_JARS_DIR = "gcs"
AZURE_JARS_DIR = "azure"

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


def helper_jar(jars_dir: Path | None) -> str:
    """The project's own helper: in the jars folder, or (none given) the one the package ships."""
    if jars_dir is None:
        if not PACKAGED_HELPER.is_file():
            raise SparkSetupError(
                f"this installation has no {HELPER_JAR} (expected at {PACKAGED_HELPER}): install dv-mirror "
                f"from a wheel `make wheel` built, or set {JARS_ENV} to a folder `make jars` filled"
            )
        return str(PACKAGED_HELPER)
    jar = Path(jars_dir) / HELPER_JAR
    if not jar.is_file():
        raise SparkSetupError(
            f"no {HELPER_JAR} in the jars folder {jars_dir}: run `make jars` (mvn, see jvm/pom.xml) or set "
            f"{JARS_ENV} to a folder it filled (unset, the package's own jar and Maven Central are used)"
        )
    return str(jar)


def jar_paths(jars_dir: Path, *, s3: bool = False, gcs: bool = False, azure: bool = False) -> list[str]:
    helper_jar(jars_dir)
    jars = sorted(str(p) for p in Path(jars_dir).glob("*.jar"))
    if s3:
        jars += s3_jar_paths(jars_dir)
    if gcs:
        jars += _store_jar_paths(jars_dir, GCS_JARS_DIR, "GCS")
    if azure:
        jars += _store_jar_paths(jars_dir, AZURE_JARS_DIR, "Azure")
    return jars


def s3_jar_paths(jars_dir: Path) -> list[str]:
    return _store_jar_paths(jars_dir, S3_JARS_DIR, "S3")


def _store_jar_paths(jars_dir: Path, folder: str, store: str) -> list[str]:
    """The jars of one object store's folder (`make jars-<folder>`, jvm/<folder>/pom.xml)."""
    found = sorted(str(p) for p in (Path(jars_dir) / folder).glob("*.jar"))
    if not found:
        raise SparkSetupError(
            f"{store} needs the jars of `make jars-{folder}` (jvm/{folder}/pom.xml) in "
            f"{Path(jars_dir) / folder}, or DVMIRROR_SPARK_PACKAGES=1"
        )
    return found


def maven_config(settings: MirrorSettings) -> dict[str, str]:
    """Spark's settings for resolving the coordinates through Ivy: the packages, the groups pyspark
    already ships (jvm/pom.xml's excludeGroupIds, but not the group of a package asked for), our
    ivysettings and the cache."""
    packages = (
        SPARK_PACKAGES
        + (S3_PACKAGES if settings.s3 else ())
        + (GCS_PACKAGES if settings.gcs else ())
        + (AZURE_PACKAGES if settings.azure else ())
    )
    wanted_groups = {p.split(":")[0] for p in packages}
    groups = EXCLUDED_GROUPS + (AZURE_EXCLUDED_GROUPS if settings.azure else ())
    excluded = sorted({group for group in groups if group not in wanted_groups})
    return {
        "spark.jars.packages": ",".join(packages),
        "spark.jars.excludes": ",".join(f"{group}:*" for group in excluded),
        "spark.jars.ivySettings": str(IVY_SETTINGS),
        "spark.jars.ivy": str(settings.ivy_dir),
    }


def _classpath_record(settings: MirrorSettings) -> Path:
    """Where the jars Ivy resolved for these coordinates are remembered: in the Ivy folder, named by a
    digest of what was resolved (coordinates, exclusions, Ivy settings), so any change resolves again."""
    conf = maven_config(settings)
    key = json.dumps([conf["spark.jars.packages"], conf["spark.jars.excludes"], IVY_SETTINGS.read_text()])
    return settings.ivy_dir / f"dvmirror-classpath-{hashlib.sha256(key.encode()).hexdigest()[:16]}.txt"


def resolved_jars(settings: MirrorSettings) -> list[str] | None:
    """The jars an earlier run's Ivy resolution of the same coordinates gave, when the record is whole:
    Spark then loads them as a jars folder's, without resolving again (Ivy takes seconds even on a warm
    cache). None: resolve, as on any doubt; a damaged record never fails a run, it is only not used."""
    try:
        lines = _classpath_record(settings).read_text(encoding="utf-8").splitlines()
        recorded = [(int(size), jar) for size, jar in (line.split("\t", 1) for line in lines)]
    except (OSError, ValueError):  # missing, unreadable, not UTF-8, or not `<size> TAB <path>` lines
        return None
    cache = (settings.ivy_dir / "jars").resolve()
    # Whole: each jar a file in the Ivy cache of the size recorded, and a jar for every package asked for.
    for size, jar in recorded:
        path = Path(jar)
        try:
            if not (path.resolve().is_relative_to(cache) and path.is_file() and path.stat().st_size == size):
                return None
        except OSError:
            return None
    names = {Path(jar).name for _, jar in recorded}
    packages = maven_config(settings)["spark.jars.packages"].split(",")
    if not recorded or any(_ivy_jar_name(package) not in names for package in packages):
        return None
    return [jar for _, jar in recorded]


def _ivy_jar_name(package: str) -> str:
    """The file name Spark's Ivy gives a package's jar in its cache: `<group>_<artifact>-<version>.jar`."""
    group, artifact, version = package.split(":")
    return f"{group}_{artifact}-{version}.jar"


def _record_resolved_jars(settings: MirrorSettings, spark: SparkSession) -> None:
    """Remember the jars Ivy resolved into the cache (pyspark lists them in spark.submit.pyFiles), with
    their sizes. Best effort: a record that cannot be written is not one, and the run goes on."""
    conf = spark.sparkContext.getConf()
    cache = str(settings.ivy_dir / "jars") + os.sep
    listed = ",".join(conf.get(key, "") or "" for key in ("spark.submit.pyFiles", "spark.jars"))
    jars = sorted({j.removeprefix("file://") for j in listed.split(",") if j.endswith(".jar")})
    jars = [j for j in jars if j.startswith(cache) and Path(j).is_file() and "\n" not in j]
    if not jars:
        return
    record = _classpath_record(settings)
    temporary = record.with_name(f"{record.name}.{os.getpid()}")
    try:
        temporary.write_text("".join(f"{Path(j).stat().st_size}\t{j}\n" for j in jars), encoding="utf-8")
        os.replace(temporary, record)  # atomic: a concurrent run reads the old record or this one
    except OSError:
        temporary.unlink(missing_ok=True)


def check_spark_can_start(settings: MirrorSettings, environ: Mapping[str, str] | None = None) -> None:
    """SparkSetupError, one line saying what is needed, when no usable Java or a jar is missing: asked
    before anything is created (the catalog's folders, Spark's log) and before any Spark start."""
    check_java(environ)
    helper_jar(settings.jars_dir)
    if settings.spark_packages and resolved_jars(settings) is None:
        # Ivy waits for a lock it cannot create rather than failing: an unwritable cache is said here.
        try:
            settings.ivy_dir.mkdir(parents=True, exist_ok=True)
            writable = os.access(settings.ivy_dir, os.W_OK | os.X_OK)
        except OSError:
            writable = False
        if not writable:
            raise SparkSetupError(
                f"the Ivy cache {settings.ivy_dir} (DVMIRROR_IVY) is not a folder this user can write: Spark "
                f"downloads Delta and Iceberg there on a first run; point DVMIRROR_IVY elsewhere, or set "
                f"{JARS_ENV} to a folder `make jars` filled"
            )
    if not settings.spark_packages:
        assert settings.jars_dir is not None  # no jars folder means Maven packages (settings.resolve)
        jar_paths(settings.jars_dir, s3=settings.s3, gcs=settings.gcs, azure=settings.azure)


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


def gcs_config(storage: dict[str, str]) -> dict[str, str]:
    """Spark's Hadoop settings for Google's connector (`gs://`) from Iceberg's `gcs.*` properties:
    `gcs.service.host` (the JSON API's root), `gcs.project-id`, `gcs.no-auth=true` (no credentials, as an
    emulator takes). Credentials otherwise come from Google's default lookup (the connector has no
    setting for a bare `gcs.oauth2.token`)."""
    conf = {"spark.hadoop.fs.gs.impl": "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem"}
    if storage.get("gcs.service.host"):
        conf["spark.hadoop.fs.gs.storage.root.url"] = storage["gcs.service.host"].rstrip("/") + "/"
    if storage.get("gcs.project-id"):
        conf["spark.hadoop.fs.gs.project.id"] = storage["gcs.project-id"]
    if storage.get("gcs.no-auth", "").lower() == "true":
        conf["spark.hadoop.fs.gs.auth.type"] = "UNAUTHENTICATED"
    return conf


def azure_config(storage: dict[str, str]) -> dict[str, str]:
    """Spark's Hadoop settings for ABFS and WASB from pyiceberg's `adls.*` properties, for the account
    they name (`adls.account-name`, else the connection string's): its shared key (`adls.account-key`,
    else the connection string's) for both of its hosts. A custom blob endpoint (`azure_endpoints`: an
    emulator's, or a private one) becomes ABFS's `fs.azure.abfs.endpoint` (`host:port`, the account then
    first in the path; ABFS applies it to `<account>.dfs.core.windows.net` URIs only), over http when its
    scheme says so; without a dfs endpoint beside it, ABFS is told the account has a flat namespace and is
    reached through its blob client (Hadoop's FNS-over-blob), since there is no dfs endpoint to use.
    Other credentials (OAuth, SAS): Hadoop's own `fs.azure.*` settings through `spark_config`."""
    connection = azure_connection_string(storage.get("adls.connection-string", ""))
    account = storage.get("adls.account-name") or connection.get("AccountName")
    if not account:
        return {}
    dfs, blob = f"{account}.dfs.core.windows.net", f"{account}.blob.core.windows.net"
    conf: dict[str, str] = {}
    key = storage.get("adls.account-key") or connection.get("AccountKey")
    if key:
        for host in (dfs, blob):
            conf[f"spark.hadoop.fs.azure.account.key.{host}"] = key
    endpoints = azure_endpoints(storage)
    if "blob_storage_authority" in endpoints:
        conf[f"spark.hadoop.fs.azure.abfs.endpoint.{dfs}"] = endpoints["blob_storage_authority"]
        if not (storage.get("adls.dfs-storage-authority") or connection.get("DfsEndpoint")):
            conf[f"spark.hadoop.fs.azure.account.hns.enabled.{dfs}"] = "false"
            conf[f"spark.hadoop.fs.azure.fns.account.service.type.{dfs}"] = "BLOB"
    if endpoints.get("blob_storage_scheme") == "http":
        # ABFS reads this one without an account suffix; abfss:// URIs stay on https regardless.
        conf["spark.hadoop.fs.azure.always.use.https"] = "false"
    return conf


# The driver JVM's class-data-sharing archive (written by class_archive.py, which says why and how).
CLASS_ARCHIVE = "dvmirror-classes.jsa"
CLASS_ARCHIVE_RECORD = f"{CLASS_ARCHIVE}.json"  # {"bytes": the archive's size once complete}
# Whatever the JVM thinks of the archive (skipped classes while dumping, a mismatch at start) stays off
# the console: the archive is an optimisation, its absence no error.
CDS_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def class_archive_folder(settings: MirrorSettings) -> Path:
    return settings.jars_dir if settings.jars_dir is not None else settings.ivy_dir


def class_archive_options(settings: MirrorSettings) -> str:
    """The driver JVM's options mapping the class archive `class_archive.py` writes (with a leading space), or
    "" without a complete one."""
    folder = class_archive_folder(settings)
    archive = folder / CLASS_ARCHIVE
    try:
        recorded = json.loads((folder / CLASS_ARCHIVE_RECORD).read_text())["bytes"]
        complete = archive.stat().st_size == recorded
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    return f" -XX:SharedArchiveFile={archive} {CDS_QUIET}" if complete else ""


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
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J2_CONFIG}"
        + class_archive_options(settings),
    }
    for key, value in {**LOCAL_FILE_SYSTEM, **settings.catalog.iceberg_java_properties()}.items():
        conf[f"{CATALOG_PREFIX}.{key}"] = value
    storage = settings.catalog.storage_properties()
    if settings.s3:
        conf.update(s3a_config(storage))
    if settings.gcs:
        conf.update(gcs_config(storage))
    if settings.azure:
        conf.update(azure_config(storage))
    if settings.spark_packages:
        resolved = resolved_jars(settings)
        if resolved is None:
            conf.update(maven_config(settings))
        conf["spark.jars"] = ",".join([helper_jar(settings.jars_dir), *(resolved or ())])
    else:
        assert settings.jars_dir is not None
        conf["spark.jars"] = ",".join(
            jar_paths(settings.jars_dir, s3=settings.s3, gcs=settings.gcs, azure=settings.azure)
        )
    return conf


def _with_stdout_on_stderr(start: Callable[[], SparkSession]) -> SparkSession:
    """`start()` with file descriptor 1 pointing where 2 does (the JVM it launches inherits it)."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        return start()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


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
        check_spark_can_start(settings)  # before anything is created
        if catalog.sqlite_path is not None:
            catalog.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
        if catalog.local_warehouse is not None:
            catalog.local_warehouse.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # local mode needs no routable address
        # Python tasks (DV conversion) import the installed engine: by default they run with this
        # interpreter, as the driver does (a cluster sets PYSPARK_PYTHON to its executors' Python).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = SparkSession.builder
        conf = {**spark_config(settings), **(overrides or {})}
        for key, value in conf.items():
            builder = builder.config(key, str(value))
        if "spark.jars.packages" in conf:
            # Ivy reports its resolution on the JVM's stdout: it goes to stderr (a CLI's Spark log), so
            # that stdout holds only what the caller prints (`--json`).
            try:
                active = _with_stdout_on_stderr(builder.getOrCreate)
            except Exception as err:
                raise RuntimeError(
                    f"Spark could not resolve its jars from Maven Central into {settings.ivy_dir} (offline, "
                    f"a proxy, or the folder is not writable?): {str(err).splitlines()[0][:200]}; set "
                    f"{JARS_ENV} to a folder `make jars` filled to run offline"
                ) from err
            _record_resolved_jars(settings, active)
        else:
            active = builder.getOrCreate()
        active.sparkContext.setLogLevel("ERROR")
    configured = configured_catalog(active)
    wanted = catalog.iceberg_java_properties()
    if any(configured.get(k) != v for k, v in wanted.items()):
        raise RuntimeError(
            masked(
                f"the running Spark session's `{ICEBERG_CATALOG_NAME}` catalog is "
                f"{configured.get('uri') or configured}, not the {catalog.describe()}: one process holds "
                "one catalog"
            )
        )
    return active
