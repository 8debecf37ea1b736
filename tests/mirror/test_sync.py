"""Issue 2's vertical slice: table-with-dv-small mirrored to Iceberg v3 through the `dvmirror` CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyiceberg.table.puffin import PuffinFile

from dv_assets.mirror.locations import comparable
from dv_assets.mirror.placement import ExecutorPolicy
from dv_assets.mirror.settings import CatalogConfig
from tests.helpers.paths import expected_rows
from tests.helpers.processes import catalog_uri, run_dvmirror
from tests.helpers.readers import iceberg_java_rows, pyiceberg_rows, snapshots_by_delta_version
from tests.helpers.rows import sorted_rows

pytestmark = pytest.mark.spark  # the CLI starts Spark (a JVM) in its process
TABLE = "table-with-dv-small"


@pytest.fixture(scope="module")
def cli_mirror(tmp_path_factory: pytest.TempPathFactory):
    """The issue's command, run once: a copy of the fixture mirrored into its own catalog."""
    import shutil

    from tests.helpers.paths import DELTA_FIXTURES

    root = tmp_path_factory.mktemp("cli")
    delta = root / TABLE
    shutil.copytree(DELTA_FIXTURES / TABLE, delta)
    catalog = CatalogConfig.sqlite(root / "catalog.db", root / "wh")
    args = ["sync", str(delta), "--table", "fx.t", "--catalog-uri", catalog_uri(catalog)]
    first = run_dvmirror(*args, "--warehouse", str(catalog.warehouse), "--json", cwd=root)
    assert first.returncode == 0, first.stderr
    second = run_dvmirror(*args, "--warehouse", str(catalog.warehouse), "--json", cwd=root)
    return delta, catalog, json.loads(first.stdout), second


def test_cli_mirrors_each_version_as_one_snapshot(cli_mirror) -> None:
    _, catalog, summary, _ = cli_mirror
    assert summary["mirrored_versions"] == [0, 1]
    assert summary["dvs_written"] == 1
    # The default settings on the default local master: the DV work stays on the driver, and says why.
    versions = {v["delta_version"]: v for v in summary["versions"]}
    assert versions[1]["dvs_converted_on"] == "driver"
    assert versions[1]["dv_placement"] == "driver: local master local[2]"
    assert versions[1]["executor_threshold"] == ExecutorPolicy().describe()
    assert versions[0]["dv_placement"] == "none: no DVs"
    table = catalog.pyiceberg_catalog().load_table("fx.t")
    assert table.format_version == 3
    by_version = snapshots_by_delta_version(catalog, "fx.t")
    assert by_version == {v["delta_version"]: v["snapshot_id"] for v in summary["versions"]}
    for version, snapshot_id in by_version.items():
        assert pyiceberg_rows(catalog, "fx.t", snapshot_id) == sorted_rows(expected_rows(TABLE, version))
    assert len(pyiceberg_rows(catalog, "fx.t", by_version[1])) == 8


def test_rerun_is_a_no_op(cli_mirror) -> None:
    _, catalog, _, second = cli_mirror
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["mirrored_versions"] == []
    assert len(catalog.pyiceberg_catalog().load_table("fx.t").snapshots()) == 2


def test_data_files_are_referenced_in_place(cli_mirror) -> None:
    delta, catalog, _, _ = cli_mirror
    table = catalog.pyiceberg_catalog().load_table("fx.t")
    data_files = [task.file.file_path for task in table.scan().plan_files()]
    # Named by URI, as Iceberg Java names a local table's files; the table's folder too.
    assert data_files == [f"file:{delta}/part-00000-fae5310a-a37d-4e51-827b-c3d5516560ca-c000.snappy.parquet"]
    assert table.location() == f"file:{catalog.local_warehouse}/fx/t"
    assert not list(catalog.local_warehouse.rglob("*.parquet"))  # nothing copied into the warehouse


def test_puffin_blob_is_byte_identical_to_the_delta_dv(cli_mirror) -> None:
    delta, catalog, _, _ = cli_mirror
    commit = [
        json.loads(line)
        for line in (delta / "_delta_log" / "00000000000000000001.json").read_text().splitlines()
    ]
    dv = next(a["add"]["deletionVector"] for a in commit if "add" in a)
    (dv_file,) = delta.glob("deletion_vector_*.bin")
    delta_bytes = dv_file.read_bytes()[dv["offset"] : dv["offset"] + dv["sizeInBytes"] + 8]

    table = catalog.pyiceberg_catalog().load_table("fx.t")
    (task,) = table.scan().plan_files()
    (delete_file,) = task.delete_files
    assert delete_file.file_format.value == "PUFFIN"
    assert delete_file.record_count == dv["cardinality"]
    assert delete_file.file_path.startswith(f"file:{catalog.local_warehouse}/fx/t/data/dvmirror-v")
    content = Path(comparable(delete_file.file_path)).read_bytes()
    # pyiceberg's own Puffin reader finds the blob (by referenced-data-file) and its positions.
    puffin = PuffinFile(content)
    (blob,) = puffin.footer.blobs
    assert blob.properties["referenced-data-file"] == task.file.file_path
    assert content[blob.offset : blob.offset + blob.length] == delta_bytes
    assert sorted(puffin.to_vector()[task.file.file_path].to_pylist()) == [0, 9]


@pytest.mark.spark
def test_iceberg_java_time_travel(spark, catalog, copy_fixture) -> None:
    """The same slice in-process, read back through Iceberg Java by snapshot id: 10 rows at v0, 8 at v1."""
    from dv_assets.mirror.sync import sync_table

    result = sync_table(spark, copy_fixture(TABLE), "slice.t")
    assert result.mirrored_versions == [0, 1]
    for version_result in result.versions:
        rows = iceberg_java_rows(spark, "slice.t", version_result.snapshot_id)
        assert rows == sorted_rows(expected_rows(TABLE, version_result.delta_version))
    assert [len(iceberg_java_rows(spark, "slice.t", v.snapshot_id)) for v in result.versions] == [10, 8]
    # Iceberg Java's view of the DV's manifest entry: the blob's place in the Puffin file, exactly.
    (entry,) = spark.sql(
        "SELECT file_path, file_format, referenced_data_file, content_offset, content_size_in_bytes, "
        "record_count FROM dvmirror.slice.t.delete_files"
    ).collect()
    assert entry.file_format == "PUFFIN"
    assert entry.record_count == 2
    footer = PuffinFile(Path(comparable(entry.file_path)).read_bytes()).footer.blobs[0]
    assert (entry.content_offset, entry.content_size_in_bytes) == (footer.offset, footer.length)
    assert entry.referenced_data_file == footer.properties["referenced-data-file"]
