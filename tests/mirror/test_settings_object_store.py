"""GCS and Azure: which jars a location or a catalog asks for, and how one map of pyiceberg's `gcs.*` and
`adls.*` properties becomes pyarrow's options (the mirror's FileIO) and Hadoop's settings (the Delta side).
The same keys against real emulators: tests/integration/test_gcs_and_azure.py."""

from __future__ import annotations

import pyarrow.fs as pafs

from dv_assets.mirror.io import FileIO, azure_connection_string, azure_endpoints
from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from dv_assets.mirror.spark import azure_config, gcs_config

KEY = "a2V5"
EMULATOR = (
    f"DefaultEndpointsProtocol=http;AccountName=acct;AccountKey={KEY};"
    "BlobEndpoint=http://127.0.0.1:10000/acct;"
)


def test_the_location_or_the_catalog_asks_for_a_stores_jars(tmp_path) -> None:
    plain = MirrorSettings.resolve(catalog=CatalogConfig.under(tmp_path), environ={}, cwd=tmp_path)
    assert not (plain.s3 or plain.gcs or plain.azure)
    assert plain.for_location("gs://b/t").gcs and not plain.for_location("gs://b/t").azure
    for location in (
        "abfs://c@a.dfs.core.windows.net/t",
        "abfss://c@a.dfs.core.windows.net/t",
        "wasbs://c@a.x/t",
    ):
        chosen = plain.for_location(location)
        assert chosen.azure and not (chosen.gcs or chosen.s3), location
    assert plain.for_location("/data/t") == plain
    gcs_catalog = CatalogConfig({"type": "jdbc", "uri": "jdbc:sqlite:/c.db", "warehouse": "gs://b/wh"})
    azure_keys = CatalogConfig({"type": "rest", "uri": "http://h", "adls.connection-string": EMULATOR})
    assert gcs_catalog.uses_gcs and not gcs_catalog.uses_azure
    assert azure_keys.uses_azure and azure_keys.storage_properties() == {"adls.connection-string": EMULATOR}
    # Asked for by a location, kept when the catalog changes (a code location's shared catalog).
    kept = plain.for_location("gs://b/t").with_catalog(azure_keys)
    assert kept.gcs and kept.azure


def test_a_connection_string_gives_pyarrow_the_account_key_and_endpoints() -> None:
    assert azure_connection_string(EMULATOR) == {
        "DefaultEndpointsProtocol": "http",
        "AccountName": "acct",
        "AccountKey": KEY,
        "BlobEndpoint": "http://127.0.0.1:10000/acct",
    }
    # An emulator has no dfs endpoint: its blob endpoint serves as both, so nothing goes to Azure's.
    assert azure_endpoints({"adls.connection-string": EMULATOR}) == {
        "blob_storage_authority": "127.0.0.1:10000",
        "blob_storage_scheme": "http",
        "dfs_storage_authority": "127.0.0.1:10000",
        "dfs_storage_scheme": "http",
    }
    # pyiceberg's own keys win over the connection string's.
    chosen = azure_endpoints({"adls.connection-string": EMULATOR, "adls.blob-storage-authority": "h:1"})
    assert chosen["blob_storage_authority"] == "h:1" and chosen["dfs_storage_authority"] == "h:1"


def test_file_io_resolves_hadoop_and_pyarrow_spellings_of_azure_and_gcs() -> None:
    io = FileIO({"adls.connection-string": EMULATOR, "gcs.service.host": "http://127.0.0.1:4443"})
    abfs, path = io.resolve("abfs://lake@acct.dfs.core.windows.net/delta/t/part-0.parquet")
    assert isinstance(abfs, pafs.AzureFileSystem) and path == "lake/delta/t/part-0.parquet"
    wasb, path = io.resolve("wasbs://lake@acct.blob.core.windows.net/x")
    assert wasb is abfs and path == "lake/x"  # one file system per account
    bare, path = io.resolve("abfs://lake/y")  # pyarrow's form: the account from the properties
    assert isinstance(bare, pafs.AzureFileSystem) and path == "lake/y"
    gcs, path = io.resolve("gs://bucket/a/b")
    assert isinstance(gcs, pafs.GcsFileSystem) and path == "bucket/a/b"


def test_hadoop_settings_from_the_same_keys() -> None:
    assert gcs_config(
        {"gcs.service.host": "http://127.0.0.1:4443", "gcs.project-id": "p", "gcs.no-auth": "true"}
    ) == {
        "spark.hadoop.fs.gs.impl": "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem",
        "spark.hadoop.fs.gs.storage.root.url": "http://127.0.0.1:4443/",
        "spark.hadoop.fs.gs.project.id": "p",
        "spark.hadoop.fs.gs.auth.type": "UNAUTHENTICATED",
    }
    dfs = "acct.dfs.core.windows.net"
    assert azure_config({"adls.connection-string": EMULATOR}) == {
        f"spark.hadoop.fs.azure.account.key.{dfs}": KEY,
        "spark.hadoop.fs.azure.account.key.acct.blob.core.windows.net": KEY,
        f"spark.hadoop.fs.azure.abfs.endpoint.{dfs}": "127.0.0.1:10000",
        f"spark.hadoop.fs.azure.account.hns.enabled.{dfs}": "false",
        f"spark.hadoop.fs.azure.fns.account.service.type.{dfs}": "BLOB",
        "spark.hadoop.fs.azure.always.use.https": "false",
    }
    # A real account: its key only; ABFS finds its namespace and endpoints itself.
    assert azure_config({"adls.account-name": "prod", "adls.account-key": KEY}) == {
        "spark.hadoop.fs.azure.account.key.prod.dfs.core.windows.net": KEY,
        "spark.hadoop.fs.azure.account.key.prod.blob.core.windows.net": KEY,
    }
    assert azure_config({"adls.sas-token": "sv=x"}) == {}  # no account named: nothing to key
