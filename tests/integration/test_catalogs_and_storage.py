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
from collections.abc import Iterator
from pathlib import Path

import pytest

from dv_assets.mirror.iceberg.pyiceberg_reader import mirror_table_of, read_mirror_table
from dv_assets.mirror.settings import CatalogConfig
from testkit.object_store import S3Store, s3_store
from tests.helpers.paths import DELTA_FIXTURES, all_expected_rows
from tests.helpers.processes import catalog_flags, run_dvmirror, spark_job, sync_json
from tests.helpers.readers import assert_readers_exact
from tests.integration import servers

pytestmark = pytest.mark.integration

FIXTURE = "dv-partitioned-with-checkpoint"  # 16 versions: DVs, partitions, a checkpoint
S3_IO = "org.apache.iceberg.aws.s3.S3FileIO"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("integration")


@pytest.fixture(scope="module")
def s3(workdir: Path) -> Iterator[S3Store]:
    """moto's S3 server, its credentials in this process's environment (pyiceberg and pyarrow read them)."""
    with s3_store(workdir / "s3") as server:
        server.create_bucket("lake")
        yield server


def test_rest_catalog_with_a_local_warehouse(workdir: Path) -> None:
    warehouse = workdir / "rest-warehouse"
    with servers.rest_catalog(workdir, {"CATALOG_WAREHOUSE": f"file://{warehouse}"}) as uri:
        properties = {"type": "rest", "uri": uri}
        result = sync_json(str(DELTA_FIXTURES / FIXTURE), "rest_ns.events", catalog_flags(properties))
        assert result["ok"] and len(result["versions"]) == len(all_expected_rows(FIXTURE))
        location = CatalogConfig(properties).pyiceberg_catalog().load_table("rest_ns.events").location()
        assert location.removeprefix("file:").lstrip("/").startswith(str(warehouse).lstrip("/")), location
        assert_readers_exact(properties, "rest_ns.events", all_expected_rows(FIXTURE))
        # A second run has nothing to do.
        assert (
            sync_json(str(DELTA_FIXTURES / FIXTURE), "rest_ns.events", catalog_flags(properties))["versions"]
            == []
        )


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
        result = sync_json(str(DELTA_FIXTURES / FIXTURE), "pg_ns.events", ["--config", str(config)])
        assert result["ok"] and len(result["versions"]) == len(all_expected_rows(FIXTURE))
        assert_readers_exact(properties, "pg_ns.events", all_expected_rows(FIXTURE))


def test_s3_delta_table_and_warehouse_behind_a_rest_catalog(workdir: Path, s3: S3Store) -> None:
    storage = s3.catalog_properties()
    delta = "s3a://lake/delta/events"
    expected = spark_job(
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
        result = sync_json(delta, "s3_ns.events", catalog_flags(properties))
        assert result["ok"] and len(result["versions"]) == 6
        assert result["dvs_written"] > 0
        location = CatalogConfig(properties).pyiceberg_catalog().load_table("s3_ns.events").location()
        assert location.startswith("s3://lake/warehouse/"), location
        assert_readers_exact(properties, "s3_ns.events", expected)


def test_s3_warehouse_in_a_postgresql_catalog_with_v2_position_deletes(workdir: Path, s3: S3Store) -> None:
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
        expected = spark_job("write-delta", "s3a://lake/delta/events-v2", properties)
        result = sync_json(
            "s3a://lake/delta/events-v2",
            "pg_s3.events",
            [*catalog_flags(properties), "--format-version", "2"],
        )
        assert result["ok"] and len(result["versions"]) == len(expected)
        assert_readers_exact(properties, "pg_s3.events", expected)


def test_the_embedded_catalogs_reader_with_its_warehouse_on_s3(workdir: Path, s3: S3Store) -> None:
    """`read_mirror_table` on a sqlite catalog reads the metadata file itself (no pyiceberg): from S3 here,
    through the catalog's s3.* properties, to the same value pyiceberg reads; `dvmirror status` with it."""
    properties = {
        "type": "jdbc",
        "uri": f"jdbc:sqlite:{workdir}/s3-warehouse-catalog.db",
        "warehouse": "s3://lake/sqlite-warehouse",
        "io-impl": S3_IO,
        **s3.catalog_properties(),
    }
    result = sync_json(str(DELTA_FIXTURES / FIXTURE), "sq_s3.events", catalog_flags(properties))
    assert result["ok"] and len(result["versions"]) == len(all_expected_rows(FIXTURE))
    catalog = CatalogConfig(properties)
    mirror = read_mirror_table(catalog, "sq_s3.events")
    assert mirror is not None and str(mirror.metadata_location).startswith("s3://lake/sqlite-warehouse/")
    assert mirror == mirror_table_of("sq_s3.events", catalog.pyiceberg_catalog().load_table("sq_s3.events"))
    assert mirror.last_mirrored_version == max(all_expected_rows(FIXTURE))
    status = run_dvmirror("status", "sq_s3.events", *catalog_flags(properties), "--json", cwd=workdir)
    assert status.returncode == 0, status.stderr
    (table,) = json.loads(status.stdout)["tables"]
    assert table["up_to_date"] is True and table["metadata_location"] == mirror.metadata_location
