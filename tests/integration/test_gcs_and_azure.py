"""Delta tables with deletion vectors on GCS and on Azure storage, mirrored end to end against emulators on
loopback (`make test-integration`): fake-gcs-server, and Azurite's blob service.

Delta Spark writes each table (6 versions: DELETEs that make DVs, an UPDATE; `spark_jobs.DML`) through
Hadoop's GCS connector or ABFS; the installed `dvmirror sync` mirrors it into a catalog whose warehouse is
on the same store (its metadata written by Iceberg Java, its delete files by the mirror through pyarrow);
then Iceberg Java (Spark, in a process of its own) and pyiceberg read every version back, each with the
catalog and storage properties: exactly Delta's rows. Each store's keys are pyiceberg's (`gcs.*`,
`adls.*`); pyiceberg gets a GCS token where the others get `gcs.no-auth` (it has no such switch).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.settings import CatalogConfig
from tests.helpers.processes import catalog_flags, spark_job, sync_json
from tests.helpers.readers import pyiceberg_versions
from tests.integration import servers

pytestmark = pytest.mark.integration

GCS_IO = "org.apache.iceberg.gcp.gcs.GCSFileIO"
# Iceberg's ADLSFileIO speaks only the dfs endpoint, which Azurite lacks: the warehouse goes through ABFS.
HADOOP_IO = "org.apache.iceberg.hadoop.HadoopFileIO"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("clouds")


def mirror_and_read_back(
    workdir: Path,
    storage: Mapping[str, str],
    delta: str,
    warehouse: str,
    io_impl: str,
    table: str,
    pyiceberg_storage: Mapping[str, str] | None = None,
) -> None:
    """Delta Spark writes `delta`, `dvmirror sync` mirrors it into a sqlite catalog with its warehouse at
    `warehouse`, and both Iceberg readers return Delta's rows at every version (pyiceberg with
    `pyiceberg_storage` for the store, when given)."""
    writer = {"type": "jdbc", "uri": f"jdbc:sqlite:{workdir}/{table}-writer.db", **storage}
    expected = spark_job("write-delta", delta, writer)
    assert sorted(expected) == list(range(6)), f"{delta}: Delta versions {sorted(expected)}"
    properties = {
        "type": "jdbc",
        "uri": f"jdbc:sqlite:{workdir}/{table}.db",
        "warehouse": warehouse,
        "io-impl": io_impl,
        **storage,
    }
    result = sync_json(delta, table, catalog_flags(properties))
    assert result["ok"] and len(result["versions"]) == 6, result
    assert result["dvs_written"] > 0, result
    without_storage = {k: v for k, v in properties.items() if k not in storage}
    pyiceberg = CatalogConfig({**without_storage, **(pyiceberg_storage or storage)})
    assert_on_the_store(CatalogConfig(properties), pyiceberg, table, delta, warehouse)
    java = spark_job("read-iceberg", table, properties)
    python = pyiceberg_versions(pyiceberg, table)
    assert sorted(java) == sorted(python) == sorted(expected), (table, sorted(java), sorted(python))
    for version, rows in expected.items():
        assert java[version] == rows, f"{table}: Iceberg Java differs from Delta at version {version}"
        assert python[version] == rows, f"{table}: pyiceberg differs from Delta at version {version}"


def assert_on_the_store(
    catalog: CatalogConfig, pyiceberg: CatalogConfig, table: str, delta: str, warehouse: str
) -> None:
    """The mirror's metadata and delete files are in the warehouse on the emulator, its data files are
    Delta's, where Delta wrote them: read through the mirror's own FileIO and through pyiceberg."""
    mirror = read_mirror_table(catalog, table)  # a sqlite catalog: the metadata file read through FileIO
    assert mirror is not None and mirror.last_mirrored_version == 5, (table, mirror)
    assert str(mirror.metadata_location).startswith(f"{warehouse}/"), mirror.metadata_location
    files = pyiceberg.pyiceberg_catalog().load_table(table).inspect.files().to_pylist()
    data = sorted(f["file_path"] for f in files if f["content"] == 0)
    deletes = sorted(f["file_path"] for f in files if f["content"] != 0)
    assert data and all(path.startswith(f"{delta}/") for path in data), (table, data)
    owned = [p for p in deletes if p.startswith(f"{warehouse}/") and "/data/dvmirror-" in p]
    assert deletes and owned == deletes, (table, deletes)
    io = FileIO(catalog.storage_properties())
    for path in data + deletes:
        info = io.stat(path)
        assert info.is_file and info.size, f"{table}: {path} is not a file on the store ({info})"


def test_gcs_delta_table_and_warehouse(workdir: Path) -> None:
    with servers.gcs_server(workdir) as gcs:
        gcs.create_bucket("lake")
        mirror_and_read_back(
            workdir,
            gcs.catalog_properties(),
            delta="gs://lake/delta/events",
            warehouse="gs://lake/warehouse",
            io_impl=GCS_IO,
            table="gcs_ns.events",
            pyiceberg_storage=gcs.pyiceberg_properties(),
        )


def test_azure_delta_table_and_warehouse(workdir: Path) -> None:
    with servers.azurite(workdir) as azure:
        azure.create_container("lake")
        mirror_and_read_back(
            workdir,
            azure.catalog_properties(),
            delta=azure.location("lake", "delta/events"),
            warehouse=azure.location("lake", "warehouse"),
            io_impl=HADOOP_IO,
            table="azure_ns.events",
        )
