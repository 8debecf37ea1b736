"""The engine against Delta tables Delta Spark writes: every version of every history, both formats.

Each history is built once (Spark DML is the cost), then mirrored into two Iceberg tables (format 3
with Puffin DVs, format 2 with position deletes), one of them incrementally (`until_version`), and
every Delta version is compared row for row: Delta Spark time travel vs Iceberg Java through Spark and
DuckDB (from the metadata file), and pyiceberg for the final version.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dv_assets.mirror.errors import MirrorInputError, UnsupportedFeatureError
from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table
from dv_assets.mirror.sync import sync_table
from tests.helpers.delta_histories import (
    assert_mirrors_match,
    check_random_histories,
    delta_ref,
    fast_spark,
    latest_version,
    mirror,
    mirror_both,
    partitioned_history,
    random_history,
    tblproperties,
    types_history,
)
from tests.helpers.delta_log import read_commit, write_commit
from tests.helpers.readers import duckdb_column_types

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True, scope="module")
def _fast(spark):
    with fast_spark(spark):
        yield


# `make test-extended` runs one of each kind (about 50 s each); `make test-long` the other column-mapping
# modes too.
@pytest.mark.parametrize(
    "mapping",
    [
        pytest.param("none", marks=pytest.mark.extended),
        pytest.param("id", marks=pytest.mark.slow),
        pytest.param("name", marks=pytest.mark.slow),
    ],
)
def test_types_history(spark, catalog, tmp_path: Path, mapping: str) -> None:
    root = tmp_path / f"types {mapping}"
    types_history(spark, root, mapping)
    assert latest_version(root) == 14
    mirrors = mirror_both(spark, root, f"types_{mapping}", split_at=[3, 9])
    assert assert_mirrors_match(spark, catalog, root, mirrors, label=f"types {mapping}") == 2 * 15
    # The rows above compared equal through one canonical form (tests/helpers/rows.py); these are the
    # types DuckDB read them as: each Iceberg type as its own DuckDB type (no text or float fallbacks),
    # zone kept for timestamptz and absent for timestamp.
    duckdb_types = {
        "id": "INTEGER",
        "big": "BIGINT",
        "s": "VARCHAR",
        "d": "DECIMAL(10,2)",
        "dt": "DATE",
        "ts": "TIMESTAMP WITH TIME ZONE",
        "ntz": "TIMESTAMP",
        "b": "BOOLEAN",
        "bin": "BLOB",
        "st": "STRUCT(x INTEGER, y VARCHAR)",
        **({"arr": "INTEGER[]", "m": "MAP(VARCHAR, INTEGER)"} if mapping == "none" else {}),
        "extra": "VARCHAR",
        "n2": "INTEGER",
    }
    for m in mirrors:
        table = read_mirror_table(catalog, m.table_name)
        assert table is not None and table.metadata_location is not None
        assert duckdb_column_types(table.metadata_location, m.snapshots[14]) == duckdb_types, m.table_name


@pytest.mark.parametrize(
    ("mapping", "v2_checkpoints"),
    [
        pytest.param("name", True, marks=pytest.mark.extended),
        pytest.param("id", False, marks=pytest.mark.slow),
        pytest.param("none", True, marks=pytest.mark.slow),
    ],
    ids=["name-v2ckpt", "id-classic", "none-v2ckpt"],
)
def test_partitioned_history(spark, catalog, tmp_path: Path, mapping: str, v2_checkpoints: bool) -> None:
    root = tmp_path / f"part {mapping}"
    partitioned_history(spark, root, mapping, v2_checkpoints)
    latest = latest_version(root)
    mirrors = mirror_both(spark, root, f"part_{mapping}", split_at=[1, latest - 2], split_format=3)
    assert assert_mirrors_match(spark, catalog, root, mirrors, label=f"part {mapping}") == 2 * (latest + 1)


def test_column_mapping_lists_refused(spark, catalog, tmp_path: Path) -> None:
    """Under column mapping Delta writes no Parquet field id on list elements / map keys and values, and
    Iceberg readers read such files by id only: the mirror refuses the version rather than create a
    table no Iceberg reader can read (Iceberg Java fails on the list column)."""
    root = tmp_path / "mapped lists"
    ref = delta_ref(root)
    props = tblproperties(**{"delta.columnMapping.mode": "id"})
    spark.sql(f"CREATE TABLE {ref} (id INT, st STRUCT<x: INT>) USING delta TBLPROPERTIES ({props})")
    spark.sql(f"ALTER TABLE {ref} ADD COLUMNS (arr ARRAY<INT>, m MAP<STRING, ARRAY<INT>>)")
    with pytest.raises(UnsupportedFeatureError) as raised:
        sync_table(spark, root, "gen.mapped_lists", until_version=1)
    err = raised.value
    assert (err.table, err.version) == (str(root), 1), err.one_line()
    assert "arr.element, m.key, m.value, m.value.element" in err.reason, err.reason
    # Version 0 (no lists yet) was mirrored; nothing of version 1.
    table = catalog.pyiceberg_catalog().load_table("gen.mapped_lists")
    assert [s.summary.additional_properties["dvmirror.delta-version"] for s in table.snapshots()] == ["0"]


@pytest.mark.extended  # 45-90 s: the slowest case of make test
@pytest.mark.parametrize("seed", [20240619])
def test_random_history_regressions(spark, catalog, tmp_path: Path, seed: int) -> None:
    """Random histories (12 ops) that found bugs.

    20240619: partitioned, column mapping: MERGE removes a file with a DV, RESTORE re-adds it with that
    DV. In format 3 the mirror left the removed file's DV to Iceberg to drop, which Iceberg did not do
    here; after the RESTORE the file had two DVs and Iceberg readers failed ("Can't index multiple DVs").
    """
    root = tmp_path / f"random {seed}"
    statements = random_history(spark, root, seed, 12)
    mirrors = mirror_both(spark, root, f"regression{seed}", [latest_version(root) // 2], split_format=3)
    try:
        assert_mirrors_match(spark, catalog, root, mirrors, label=f"seed {seed}")
    except Exception as err:
        raise AssertionError(f"seed {seed}, statements:\n" + "\n".join(statements) + f"\n{err}") from err


@pytest.mark.slow  # random histories are `make test-long`'s; make test keeps the regression seeds
def test_random_histories(spark, catalog, tmp_path: Path) -> None:
    check_random_histories(spark, catalog, tmp_path, count=3, ops=7, prefix="rnd")


@pytest.mark.slow
def test_random_histories_long(spark, catalog, tmp_path: Path) -> None:
    check_random_histories(spark, catalog, tmp_path, count=25, ops=12, prefix="rndlong")


def test_format_3_kept_after_a_schema_change(spark, catalog, copy_fixture) -> None:
    """A run after a schema change keeps a format-3 table format 3, with or without `format_version`.

    Regression: the format was read from the `format-version` table property, which Iceberg drops from
    the properties when the mirror rewrites the metadata for a new schema; later runs then took the
    table for format 2 (and refused `format_version=3`, or would have written Parquet deletes to it).
    """
    root = copy_fixture("table-with-dv-small")
    metadata = next(a["metaData"] for a in read_commit(root, 0) if "metaData" in a)
    schema = json.loads(metadata["schemaString"])
    schema["fields"].append({"name": "added", "type": "string", "nullable": True, "metadata": {}})
    metadata["schemaString"] = json.dumps(schema)
    commit = [{"commitInfo": {"timestamp": 1, "operation": "ADD COLUMNS"}}, {"metaData": metadata}]
    write_commit(root, 2, commit)

    name = "gen.format3_after_schema_change"
    assert sync_table(spark, root, name, format_version=3).mirrored_versions == [0, 1, 2]
    for flag in (None, 3):
        assert sync_table(spark, root, name, format_version=flag).format_version == 3
    with pytest.raises(MirrorInputError, match="format version 3, not 2"):
        sync_table(spark, root, name, format_version=2)
    table = catalog.pyiceberg_catalog().load_table(name)
    assert table.format_version == 3
    rows = table.scan().to_arrow().to_pylist()
    assert sorted(r["value"] for r in rows) == list(range(1, 9)) and {r["added"] for r in rows} == {None}


def test_restored_file_gets_exactly_one_dv(spark, catalog, copy_fixture) -> None:
    """A data file removed with its DV and restored with it (what RESTORE writes) has one DV, in both formats.

    (Here Iceberg happens to drop the removed file's DV itself; test_random_history_regressions has the
    history where it does not.)
    """
    root = copy_fixture("table-with-dv-small")
    add = next(a["add"] for a in read_commit(root, 1) if "add" in a)
    remove = {k: add[k] for k in ("path", "partitionValues", "size", "deletionVector")} | {"dataChange": True}
    commits = {
        2: [{"commitInfo": {"timestamp": 2, "operation": "DELETE"}}, {"remove": remove}],
        3: [{"commitInfo": {"timestamp": 3, "operation": "RESTORE"}}, {"add": add}],
    }
    for version, actions in commits.items():
        write_commit(root, version, actions)
    mirrors = [mirror(spark, root, f"gen.restored_v{fmt}", fmt) for fmt in (3, 2)]
    assert assert_mirrors_match(spark, catalog, root, mirrors, label="restored") == 2 * 4
    for fmt in (3, 2):
        table = catalog.pyiceberg_catalog().load_table(f"gen.restored_v{fmt}")
        assert [len(task.delete_files) for task in table.scan().plan_files()] == [1]
