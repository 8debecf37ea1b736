"""The engine against Delta tables Delta Spark writes: every version of every history, both formats.

Each history is built once (Spark DML is the cost), then mirrored into two Iceberg tables (format 3
with Puffin DVs, format 2 with position deletes), one of them incrementally (`until_version`), and
every Delta version is compared row for row: Delta Spark time travel vs Iceberg Java through Spark,
and pyiceberg for the final version.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dv_assets.mirror.errors import MirrorInputError, UnsupportedFeatureError
from dv_assets.mirror.sync import sync_table
from tests.helpers.delta_histories import (
    Mirrored,
    assert_mirrors_match,
    delta_ref,
    fast_spark,
    latest_version,
    mirror,
    random_history,
    sql_string,
    tblproperties,
)

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True, scope="module")
def _fast(spark):
    with fast_spark(spark):
        yield


PARTS = ["a b", "50%", "k&v", "x=y", None, "a%20b=c&d"]


def _mirror_both(spark, root: Path, name: str, split_at: list[int], split_format: int = 2) -> list[Mirrored]:
    """Both formats; `split_format` incrementally (stopping at each of `split_at`), the other in one run."""
    return [
        mirror(spark, root, f"gen.{name}_v{fmt}", fmt, split_at=split_at if fmt == split_format else [])
        for fmt in (3, 2)
    ]


def _types_history(spark, root: Path, mapping: str) -> None:
    """Unpartitioned, a mix of types, classic checkpoints every 2 versions, column mapping `mapping`.

    v0 create, v1 insert (2 files), v2 delete, v3 update, v4 merge (delete/update/insert), v5 insert,
    v6 optimize, v7 delete, v8 reorg purge, v9 delete, v10 restore to v4, v11 add columns,
    v12 insert with the new columns, v13 update of a new column, v14 delete on it.
    """
    ref = delta_ref(root)
    columns = (
        "id INT, big BIGINT, s STRING, d DECIMAL(10,2), dt DATE, ts TIMESTAMP, ntz TIMESTAMP_NTZ, "
        "b BOOLEAN, bin BINARY, st STRUCT<x: INT, y: STRING>"
    )
    # Lists and maps only without column mapping (see test_column_mapping_lists_refused).
    nested = mapping == "none"
    if nested:
        columns += ", arr ARRAY<INT>, m MAP<STRING, INT>"
    row = (
        "SELECT CAST(id AS INT) AS id, id * 10000000000 AS big, concat('s', id) AS s, "
        "CAST(id / 3 AS DECIMAL(10,2)) AS d, date_add(DATE'2024-02-28', CAST(id AS INT)) AS dt, "
        "TIMESTAMP'2024-03-10 01:30:00' + make_interval(0, 0, 0, 0, CAST(id AS INT), 7, 0.123456) AS ts, "
        "CAST(TIMESTAMP_NTZ'2000-01-01 00:00:00' + make_interval(0, 0, 0, CAST(id AS INT)) AS TIMESTAMP_NTZ) "
        "AS ntz, id % 2 = 0 AS b, CAST(concat('bin', id) AS BINARY) AS bin, "
        "named_struct('x', CAST(id AS INT), 'y', IF(id % 3 = 0, NULL, 'y')) AS st"
    )
    if nested:
        row += ", array(CAST(id AS INT), NULL, 3) AS arr, map('k', CAST(id AS INT), 'z', 0) AS m"
    props = {"delta.checkpointInterval": "2", "delta.columnMapping.mode": mapping}
    spark.sql(f"CREATE TABLE {ref} ({columns}) USING delta TBLPROPERTIES ({tblproperties(**props)})")
    spark.sql(f"INSERT INTO {ref} SELECT /*+ REPARTITION(2) */ * FROM ({row} FROM range(0, 40))")
    spark.sql(f"DELETE FROM {ref} WHERE id % 5 = 0")
    spark.sql(f"UPDATE {ref} SET s = concat(s, '-u'), st.y = 'u' WHERE id % 7 = 1")
    spark.sql(
        f"MERGE INTO {ref} t USING ({row} FROM range(30, 50)) src ON t.id = src.id "
        "WHEN MATCHED AND src.id % 4 = 0 THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET t.s = 'merged', t.b = NULL "
        "WHEN NOT MATCHED THEN INSERT *"
    )
    spark.sql(f"INSERT INTO {ref} {row} FROM range(100, 110)")
    spark.sql(f"OPTIMIZE {ref}")
    spark.sql(f"DELETE FROM {ref} WHERE id < 12")
    spark.sql(f"REORG TABLE {ref} APPLY (PURGE)")
    spark.sql(f"DELETE FROM {ref} WHERE id = 101 OR id = 33")
    spark.sql(f"RESTORE TABLE {ref} TO VERSION AS OF 4")
    spark.sql(f"ALTER TABLE {ref} ADD COLUMNS (extra STRING, n2 INT)")
    spark.sql(
        f"INSERT INTO {ref} SELECT *, concat('e', id), CAST(id AS INT) FROM ({row} FROM range(200, 205))"
    )
    spark.sql(f"UPDATE {ref} SET extra = 'x' WHERE id % 3 = 0")
    spark.sql(f"DELETE FROM {ref} WHERE extra IS NULL AND id % 2 = 0")


def _partitioned_history(spark, root: Path, mapping: str, v2_checkpoints: bool) -> None:
    """Partitioned by a string (spaces, %, &, =, null) and an int (null too), column mapping `mapping`.

    v0 create+insert, v1 delete, v2 update moving rows between partitions, v3 merge, v4 insert,
    v5 optimize, v6 delete, v7 restore to v2, v8 add columns, v9 insert, v10 rename column (mapping
    only) or update, v11 reorg purge, v12 delete.
    """
    ref = delta_ref(root)
    props = {"delta.checkpointInterval": "2", "delta.columnMapping.mode": mapping}
    if v2_checkpoints:
        props["delta.checkpointPolicy"] = "v2"
    values = []
    for i in range(48):
        p = PARTS[i % len(PARTS)]
        q = "NULL" if i % 4 == 3 else str(i % 2)
        values.append(
            f"({i}, {'NULL' if p is None else sql_string(p)}, {q}, 'v{i}', "
            f"TIMESTAMP_NTZ'2020-01-01 10:00:00' + make_interval(0, 0, 0, {i}))"
        )
    spark.sql(
        f"CREATE TABLE {ref} USING delta PARTITIONED BY (p, q) TBLPROPERTIES ({tblproperties(**props)}) AS "
        f"SELECT /*+ REPARTITION(1) */ CAST(id AS BIGINT) AS id, p, CAST(q AS INT) AS q, v, "
        f"CAST(t AS TIMESTAMP_NTZ) AS t FROM VALUES {', '.join(values)} AS t(id, p, q, v, t)"
    )
    spark.sql(f"DELETE FROM {ref} WHERE id % 6 = 1 OR id = 4")
    spark.sql(f"UPDATE {ref} SET p = 'moved here', v = concat(v, '!') WHERE id % 5 = 2")
    spark.sql(
        f"MERGE INTO {ref} t USING (SELECT CAST(id AS BIGINT) AS id FROM range(40, 60)) src ON t.id = src.id "
        "WHEN MATCHED AND src.id % 3 = 0 THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET t.v = 'merged' "
        "WHEN NOT MATCHED THEN INSERT (id, p, q, v, t) VALUES (src.id, '50%', NULL, 'new', NULL)"
    )
    spark.sql(f"INSERT INTO {ref} VALUES (100, 'k&v', 1, 'late', NULL), (101, NULL, NULL, 'late', NULL)")
    spark.sql(f"OPTIMIZE {ref}")
    spark.sql(f"DELETE FROM {ref} WHERE id % 4 = 2")
    spark.sql(f"RESTORE TABLE {ref} TO VERSION AS OF 2")
    spark.sql(f"ALTER TABLE {ref} ADD COLUMNS (added DOUBLE)")
    spark.sql(f"INSERT INTO {ref} VALUES (200, 'x=y', 0, 'with added', NULL, 2.5)")
    if mapping != "none":
        spark.sql(f"ALTER TABLE {ref} RENAME COLUMN v TO v_renamed")
        spark.sql(f"UPDATE {ref} SET v_renamed = 'after rename' WHERE id % 3 = 0")
    else:
        spark.sql(f"UPDATE {ref} SET v = 'updated' WHERE id % 3 = 0")
    spark.sql(f"REORG TABLE {ref} APPLY (PURGE)")
    spark.sql(f"DELETE FROM {ref} WHERE id % 7 = 0")


# `make test` runs one of each kind; `make test-long` the other column-mapping modes too.
@pytest.mark.parametrize(
    "mapping",
    ["none", pytest.param("id", marks=pytest.mark.slow), pytest.param("name", marks=pytest.mark.slow)],
)
def test_types_history(spark, catalog, tmp_path: Path, mapping: str) -> None:
    root = tmp_path / f"types {mapping}"
    _types_history(spark, root, mapping)
    assert latest_version(root) == 14
    mirrors = _mirror_both(spark, root, f"types_{mapping}", split_at=[3, 9])
    assert assert_mirrors_match(spark, catalog, root, mirrors, label=f"types {mapping}") == 2 * 15


@pytest.mark.parametrize(
    ("mapping", "v2_checkpoints"),
    [
        ("name", True),
        pytest.param("id", False, marks=pytest.mark.slow),
        pytest.param("none", True, marks=pytest.mark.slow),
    ],
    ids=["name-v2ckpt", "id-classic", "none-v2ckpt"],
)
def test_partitioned_history(spark, catalog, tmp_path: Path, mapping: str, v2_checkpoints: bool) -> None:
    root = tmp_path / f"part {mapping}"
    _partitioned_history(spark, root, mapping, v2_checkpoints)
    latest = latest_version(root)
    mirrors = _mirror_both(spark, root, f"part_{mapping}", split_at=[1, latest - 2], split_format=3)
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


# The default base seed gives make test a partitioned history, one with column mapping id and V2
# checkpoints, and one with column mapping name.
RANDOM_SEED = int(os.environ.get("DVMIRROR_TEST_SEED", "75"))


def _random_histories(spark, catalog, tmp_path: Path, count: int, ops: int, prefix: str) -> None:
    print(f"random histories: seed {RANDOM_SEED} (DVMIRROR_TEST_SEED={RANDOM_SEED} to reproduce)")
    for index in range(count):
        seed = RANDOM_SEED + index
        root = tmp_path / f"random {seed}"
        statements = random_history(spark, root, seed, ops)
        latest = latest_version(root)
        mirrors = _mirror_both(spark, root, f"{prefix}{seed}", [latest // 2], split_format=3 - index % 2)
        try:
            assert_mirrors_match(spark, catalog, root, mirrors, label=f"seed {seed}")
        except Exception as err:
            raise AssertionError(f"seed {seed}, statements:\n" + "\n".join(statements) + f"\n{err}") from err


@pytest.mark.parametrize("seed", [20240619])
def test_random_history_regressions(spark, catalog, tmp_path: Path, seed: int) -> None:
    """Random histories (12 ops) that found bugs.

    20240619: partitioned, column mapping: MERGE removes a file with a DV, RESTORE re-adds it with that
    DV. In format 3 the mirror left the removed file's DV to Iceberg to drop, which Iceberg did not do
    here; after the RESTORE the file had two DVs and Iceberg readers failed ("Can't index multiple DVs").
    """
    root = tmp_path / f"random {seed}"
    statements = random_history(spark, root, seed, 12)
    mirrors = _mirror_both(spark, root, f"regression{seed}", [latest_version(root) // 2], split_format=3)
    try:
        assert_mirrors_match(spark, catalog, root, mirrors, label=f"seed {seed}")
    except Exception as err:
        raise AssertionError(f"seed {seed}, statements:\n" + "\n".join(statements) + f"\n{err}") from err


@pytest.mark.slow  # random histories are `make test-long`'s; make test keeps the regression seeds
def test_random_histories(spark, catalog, tmp_path: Path) -> None:
    _random_histories(spark, catalog, tmp_path, count=3, ops=7, prefix="rnd")


@pytest.mark.slow
def test_random_histories_long(spark, catalog, tmp_path: Path) -> None:
    _random_histories(spark, catalog, tmp_path, count=25, ops=12, prefix="rndlong")


def test_format_3_kept_after_a_schema_change(spark, catalog, copy_fixture) -> None:
    """A run after a schema change keeps a format-3 table format 3, with or without `format_version`.

    Regression: the format was read from the `format-version` table property, which Iceberg drops from
    the properties when the mirror rewrites the metadata for a new schema; later runs then took the
    table for format 2 (and refused `format_version=3`, or would have written Parquet deletes to it).
    """
    root = copy_fixture("table-with-dv-small")
    log = root / "_delta_log"
    metadata = next(
        json.loads(line)["metaData"]
        for line in (log / f"{0:020d}.json").read_text().splitlines()
        if '"metaData"' in line
    )
    schema = json.loads(metadata["schemaString"])
    schema["fields"].append({"name": "added", "type": "string", "nullable": True, "metadata": {}})
    metadata["schemaString"] = json.dumps(schema)
    commit = [{"commitInfo": {"timestamp": 1, "operation": "ADD COLUMNS"}}, {"metaData": metadata}]
    (log / f"{2:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in commit))

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
    log = root / "_delta_log"
    add = next(
        json.loads(line)["add"]
        for line in (log / f"{1:020d}.json").read_text().splitlines()
        if '"add"' in line
    )
    remove = {k: add[k] for k in ("path", "partitionValues", "size", "deletionVector")} | {"dataChange": True}
    commits = {
        2: [{"commitInfo": {"timestamp": 2, "operation": "DELETE"}}, {"remove": remove}],
        3: [{"commitInfo": {"timestamp": 3, "operation": "RESTORE"}}, {"add": add}],
    }
    for version, actions in commits.items():
        (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    mirrors = [mirror(spark, root, f"gen.restored_v{fmt}", fmt) for fmt in (3, 2)]
    assert assert_mirrors_match(spark, catalog, root, mirrors, label="restored") == 2 * 4
    for fmt in (3, 2):
        table = catalog.pyiceberg_catalog().load_table(f"gen.restored_v{fmt}")
        assert [len(task.delete_files) for task in table.scan().plan_files()] == [1]
