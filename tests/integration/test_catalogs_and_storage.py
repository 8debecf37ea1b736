"""The mirror against real servers (`make test-integration`): Iceberg's REST catalog server, PostgreSQL
as a JDBC catalog, and an S3 object store (moto) holding both a Delta table with deletion vectors that
Delta Spark wrote through S3A and the Iceberg warehouse.

Each case runs the installed `dvmirror` CLI with `--catalog-property` flags (or a configuration file) and
reads every mirrored version back with Iceberg Java (Spark, in a process of its own) and pyiceberg
(`load_catalog` with the same property map); both must return exactly Delta's rows at each version.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from dv_assets.mirror.iceberg.mirror_table import DELTA_VERSION_SUMMARY
from dv_assets.mirror.settings import CatalogConfig
from tests.helpers.paths import DELTA_FIXTURES, DVMIRROR, REPO_ROOT, expected_rows
from tests.helpers.readers import pyiceberg_rows
from tests.integration import servers

pytestmark = pytest.mark.integration

FIXTURE = "dv-partitioned-with-checkpoint"  # 16 versions: DVs, partitions, a checkpoint
S3_IO = "org.apache.iceberg.aws.s3.S3FileIO"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("integration")


@pytest.fixture(scope="module")
def s3(workdir: Path) -> Iterator[servers.S3Server]:
    saved = {k: os.environ.get(k) for k in servers.S3_CREDENTIALS}
    os.environ.update(servers.S3_CREDENTIALS)  # pyiceberg and pyarrow in this process read them
    try:
        with servers.s3_server(workdir) as server:
            server.create_bucket("lake")
            yield server
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _flags(properties: Mapping[str, str]) -> list[str]:
    return [arg for key, value in properties.items() for arg in ("--catalog-property", f"{key}={value}")]


def _sync(delta: str, table: str, args: list[str]) -> dict:
    done = subprocess.run(
        [str(DVMIRROR), "sync", delta, "--table", table, *args, "--json"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"dvmirror exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)


def _spark_job(job: str, target: str, properties: Mapping[str, str]) -> dict[int, list[dict]]:
    command = [sys.executable, "-m", "tests.integration.spark_jobs", job, target, *_flags(properties)]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, (
        f"{job} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return {int(k): v for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


def _pyiceberg_versions(catalog: CatalogConfig, table: str) -> dict[int, list[dict]]:
    loaded = catalog.pyiceberg_catalog().load_table(table)
    versions = {
        int(s.summary[DELTA_VERSION_SUMMARY]): s.snapshot_id
        for s in loaded.snapshots()
        if s.summary is not None and s.summary[DELTA_VERSION_SUMMARY] is not None
    }
    return {v: pyiceberg_rows(catalog, table, sid) for v, sid in versions.items()}


def _assert_exact(properties: Mapping[str, str], table: str, expected: Mapping[int, list[dict]]) -> None:
    """Iceberg Java and pyiceberg each return exactly `expected` at every version."""
    java = _spark_job("read-iceberg", table, properties)
    python = _pyiceberg_versions(CatalogConfig(properties), table)
    assert sorted(java) == sorted(python) == sorted(expected)
    for version, rows in expected.items():
        assert java[version] == rows, f"Iceberg Java differs from Delta at version {version}"
        assert python[version] == rows, f"pyiceberg differs from Delta at version {version}"


def _fixture_rows() -> dict[int, list[dict]]:
    versions = len(list((DELTA_FIXTURES.parent / "expected" / FIXTURE).glob("v*.jsonl")))
    return {v: expected_rows(FIXTURE, v) for v in range(versions)}


def test_rest_catalog_with_a_local_warehouse(workdir: Path) -> None:
    warehouse = workdir / "rest-warehouse"
    with servers.rest_catalog(workdir, {"CATALOG_WAREHOUSE": f"file://{warehouse}"}) as uri:
        properties = {"type": "rest", "uri": uri}
        result = _sync(str(DELTA_FIXTURES / FIXTURE), "rest_ns.events", _flags(properties))
        assert result["ok"] and len(result["versions"]) == len(_fixture_rows())
        location = CatalogConfig(properties).pyiceberg_catalog().load_table("rest_ns.events").location()
        assert location.removeprefix("file:").lstrip("/").startswith(str(warehouse).lstrip("/")), location
        _assert_exact(properties, "rest_ns.events", _fixture_rows())
        # A second run has nothing to do.
        assert _sync(str(DELTA_FIXTURES / FIXTURE), "rest_ns.events", _flags(properties))["versions"] == []


def test_postgresql_jdbc_catalog_from_a_configuration_file(workdir: Path) -> None:
    with servers.postgres(workdir / "pg") as jdbc_uri:
        config = workdir / "dvmirror.yaml"
        config.write_text(
            "catalog:\n"
            "  type: jdbc\n"
            f"  uri: {jdbc_uri}\n"
            "  jdbc.user: ${PG_USER}\n"
            f"  warehouse: {workdir / 'pg-warehouse'}\n"
        )
        os.environ["PG_USER"] = "postgres"
        properties = {
            "type": "jdbc",
            "uri": jdbc_uri,
            "jdbc.user": "postgres",
            "warehouse": str(workdir / "pg-warehouse"),
        }
        result = _sync(str(DELTA_FIXTURES / FIXTURE), "pg_ns.events", ["--config", str(config)])
        assert result["ok"] and len(result["versions"]) == len(_fixture_rows())
        _assert_exact(properties, "pg_ns.events", _fixture_rows())


def test_s3_delta_table_and_warehouse_behind_a_rest_catalog(workdir: Path, s3: servers.S3Server) -> None:
    storage = s3.catalog_properties()
    delta = "s3a://lake/delta/events"
    expected = _spark_job(
        "write-delta", delta, {"type": "jdbc", "uri": f"jdbc:sqlite:{workdir}/w.db", **storage}
    )
    assert len(expected) == 6
    catalog_env = {
        "CATALOG_WAREHOUSE": "s3://lake/warehouse",
        "CATALOG_IO__IMPL": S3_IO,
        "CATALOG_S3_ENDPOINT": s3.endpoint,
        "CATALOG_S3_PATH__STYLE__ACCESS": "true",
        "CATALOG_CLIENT_REGION": "us-east-1",
    }
    with servers.rest_catalog(workdir, catalog_env) as uri:
        properties = {"type": "rest", "uri": uri, "io-impl": S3_IO, **storage}
        result = _sync(delta, "s3_ns.events", _flags(properties))
        assert result["ok"] and len(result["versions"]) == 6
        assert result["dvs_written"] > 0
        location = CatalogConfig(properties).pyiceberg_catalog().load_table("s3_ns.events").location()
        assert location.startswith("s3://lake/warehouse/"), location
        _assert_exact(properties, "s3_ns.events", expected)


def test_s3_warehouse_in_a_postgresql_catalog_with_v2_position_deletes(
    workdir: Path, s3: servers.S3Server
) -> None:
    storage = s3.catalog_properties()
    with servers.postgres(workdir / "pg-s3") as jdbc_uri:
        properties = {
            "type": "jdbc",
            "uri": jdbc_uri,
            "jdbc.user": "postgres",
            "warehouse": "s3://lake/pg-warehouse",
            "io-impl": S3_IO,
            **storage,
        }
        expected = _spark_job("write-delta", "s3a://lake/delta/events-v2", properties)
        result = _sync(
            "s3a://lake/delta/events-v2", "pg_s3.events", [*_flags(properties), "--format-version", "2"]
        )
        assert result["ok"] and len(result["versions"]) == len(expected)
        _assert_exact(properties, "pg_s3.events", expected)
