"""Build Delta tables with Delta Spark (DML histories, random ones too, tables with each kind of
checkpoint), mirror them, and compare every version with the oracles.

The oracle is Delta Spark time travel (`versionAsOf`) on the Delta side and Iceberg Java through Spark
(`versionAsOf` = the snapshot id) on the Iceberg side; DuckDB reads every snapshot from the metadata file
and pyiceberg the final one, as independent Iceberg readers. Rows are compared exactly (sorted), never
just counted.

Spark jobs are the cost here, so all versions of one table are read in ONE job per side: the
time-travel reads of every version are unioned (by name, a `__v` column naming the version) and
collected once as Arrow.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import VariantType

from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table
from dv_assets.mirror.results import SyncResult
from dv_assets.mirror.settings import ICEBERG_CATALOG_NAME, CatalogConfig
from dv_assets.mirror.sync import sync_table
from tests.helpers.readers import (
    duckdb_column_types,
    duckdb_rows,
    pyiceberg_columns,
    pyiceberg_rows,
    snapshots_by_delta_version,
)
from tests.helpers.rows import as_tuples, canonical, row_key

VERSION_COLUMN = "__v"

# --- building Delta tables ---------------------------------------------------------------------------


def sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def delta_ref(path: Path | str) -> str:
    return f"delta.`{path}`"


def tblproperties(**extra: str) -> str:
    props = {"delta.enableDeletionVectors": "true", **extra}
    return ", ".join(f"'{k}'='{v}'" for k, v in props.items())


def latest_version(path: Path | str) -> int:
    """The latest commit in `_delta_log` (listing the folder is cheaper than a Spark job)."""
    names = (p.name for p in (Path(path) / "_delta_log").iterdir())
    return max(int(n[:20]) for n in names if re.fullmatch(r"\d{20}\.json", n))


# --- comparing ---------------------------------------------------------------------------------------


@dataclass
class VersionRows:
    """Rows of several versions read in one unioned job, and each version's own columns."""

    columns: dict[int, list[str]]  # version -> its columns, sorted
    union_columns: list[str]  # sorted; a version's rows hold None for columns it does not have
    rows: dict[int, list[tuple]]  # version -> sorted rows over union_columns

    def project(self, version: int, columns: Sequence[str]) -> list[tuple]:
        index = [self.union_columns.index(c) for c in columns]
        return sorted((tuple(row[i] for i in index) for row in self.rows[version]), key=row_key)


def variant_json(text: str | None) -> str | None:
    """A variant value's JSON text in one form: object keys sorted, and each number tagged by how it is
    written: an integer or a decimal keeps its text (`1` and `1.0` stay different: an int and a decimal
    variant), a number with an exponent (a float or double) is the double it spells (Spark writes
    `1.0E300`, DuckDB `1e300`). Readers are compared by value, not by bytes."""
    if text is None:
        return None
    return json.dumps(_sorted_keys(json.loads(text, parse_float=_number, parse_int=_number)))


def _number(text: str) -> tuple[str, str]:
    if "e" in text.lower():
        return ("double", repr(float(text)))
    return ("number", text)


def _sorted_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return ["object", [[k, _sorted_keys(v)] for k, v in sorted(value.items())]]
    if isinstance(value, list):
        return ["array", [_sorted_keys(v) for v in value]]
    return value  # a tagged number, a string, a boolean or None


def _variants_as_json(df: DataFrame) -> DataFrame:
    """Each top-level VARIANT column as its JSON text (`to_json`, Spark's own rendering)."""
    return df.select(
        *(
            F.to_json(F.col(f.name)).alias(f.name) if isinstance(f.dataType, VariantType) else F.col(f.name)
            for f in df.schema.fields
        )
    )


def _read_versions(frames: dict[int, DataFrame]) -> VersionRows:
    """Collect the frames (one per version) in one job: unioned by name, tagged with the version; a
    VARIANT column as its JSON text (`variant_json`).

    Versions where a column has another type (a name dropped and re-added as another type, a schema
    overwritten, a widened column) are read in a job of their own group: `unionByName` would cast the
    values of one to the other's type, and the rows would no longer be what that version holds.
    """
    variants = {
        f.name for df in frames.values() for f in df.schema.fields if isinstance(f.dataType, VariantType)
    }
    frames = {v: _variants_as_json(df) for v, df in frames.items()}
    groups: list[tuple[dict[str, Any], dict[int, DataFrame]]] = []
    for v, df in frames.items():
        types = {f.name: f.dataType for f in df.schema.fields}
        for group_types, group in groups:
            if all(group_types.get(name, t) == t for name, t in types.items()):
                group_types.update(types)
                group[v] = df
                break
        else:
            groups.append((types, {v: df}))
    tables = []
    for _, group in groups:
        tagged = [df.withColumn(VERSION_COLUMN, F.lit(v)) for v, df in group.items()]
        tables.append(reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), tagged).toArrow())
    union_columns = sorted({c for t in tables for c in t.column_names if c != VERSION_COLUMN})
    rows: dict[int, list[tuple]] = {v: [] for v in frames}
    for table in tables:
        versions = table.column(VERSION_COLUMN).to_pylist()
        for version, row in zip(versions, table.to_pylist(), strict=True):
            rows[version].append(
                tuple(
                    variant_json(row.get(c)) if c in variants else canonical(row.get(c))
                    for c in union_columns
                )
            )
    return VersionRows(
        columns={v: sorted(df.columns) for v, df in frames.items()},
        union_columns=union_columns,
        rows={v: sorted(r, key=row_key) for v, r in rows.items()},
    )


def delta_versions(spark: SparkSession, path: Path | str, versions: Sequence[int]) -> VersionRows:
    """Delta Spark's rows of every version in `versions`, read in one job."""
    reader = spark.read.format("delta")
    return _read_versions({v: reader.option("versionAsOf", v).load(str(path)) for v in versions})


def iceberg_versions(spark: SparkSession, table_name: str, snapshots: dict[int, int]) -> VersionRows:
    """Iceberg Java's (through Spark) rows of each {delta version: snapshot id}, read in one job."""
    full_name = f"{ICEBERG_CATALOG_NAME}.{table_name}"
    return _read_versions(
        {
            v: spark.read.option("versionAsOf", snapshot_id).table(full_name)
            for v, snapshot_id in snapshots.items()
        }
    )


# Settings that only make small Delta DML faster on two cores (no effect on what is written or read):
# whole-stage codegen and AQE cost more than they save on tables of a few dozen rows.
FAST_SPARK_CONF = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.adaptive.enabled": "false",
    "spark.databricks.delta.merge.materializeSource": "none",
    "spark.databricks.delta.history.metricsEnabled": "false",
    "spark.databricks.delta.writeChecksumFile.enabled": "false",
}


@contextlib.contextmanager
def fast_spark(spark: SparkSession) -> Iterator[None]:
    """FAST_SPARK_CONF for the duration, the session's own values restored after."""
    saved = {key: spark.conf.get(key, None) for key in FAST_SPARK_CONF}
    for key, value in FAST_SPARK_CONF.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


@dataclass
class Mirrored:
    """One Iceberg mirror of a Delta history."""

    table_name: str
    format_version: int
    snapshots: dict[int, int] = field(default_factory=dict)  # delta version -> snapshot id
    runs: list[SyncResult] = field(default_factory=list)


def mirror(
    spark: SparkSession,
    delta_path: Path | str,
    table_name: str,
    format_version: int,
    *,
    split_at: Sequence[int] = (),
) -> Mirrored:
    """Mirror the whole history, in one run or in several (`until_version` = each of `split_at`)."""
    out = Mirrored(table_name, format_version)
    for until in [*split_at, None]:
        result = sync_table(spark, delta_path, table_name, format_version=format_version, until_version=until)
        out.runs.append(result)
        for v in result.versions:
            assert v.delta_version not in out.snapshots, f"{table_name}: v{v.delta_version} mirrored twice"
            out.snapshots[v.delta_version] = v.snapshot_id
    return out


def assert_mirrors_match(
    spark: SparkSession,
    catalog: CatalogConfig,
    delta_path: Path | str,
    mirrors: Sequence[Mirrored],
    *,
    label: str = "",
    pyiceberg_every_version: bool = False,
    pyiceberg: bool = True,
    versions: Sequence[int] | None = None,
    expected: VersionRows | None = None,
) -> int:
    """Every mirrored version of every mirror equals Delta Spark's rows, through Iceberg Java and DuckDB;
    the final one (`pyiceberg_every_version`: every one) also through pyiceberg, unless `pyiceberg` is
    False (a history that meets a limit of pyiceberg's own, README "Readers": the test pins it).

    `versions` (default: every version of the Delta table, each of which must be mirrored) limits the
    comparison to those versions, which each mirror must hold (a mirror that refused a later version);
    `expected` is Delta Spark's rows of them when the caller has read them already (`delta_versions`).
    Returns the number of (mirror, version) pairs compared.
    """
    latest = latest_version(delta_path)
    every_version = versions is None
    versions = list(range(latest + 1)) if versions is None else sorted(versions)
    if expected is None:
        expected = delta_versions(spark, delta_path, versions)
    compared = 0
    for m in mirrors:
        where = f"{label} {m.table_name} (format {m.format_version})"
        if every_version:
            assert sorted(m.snapshots) == versions, (
                f"{where}: mirrored {sorted(m.snapshots)}, Delta has {versions}"
            )
        else:
            held = sorted(m.snapshots)
            assert set(versions) <= set(held), f"{where}: mirrored {held}, not {versions}"
        assert snapshots_by_delta_version(catalog, m.table_name) == m.snapshots, where
        snapshots = {v: m.snapshots[v] for v in versions}
        actual = iceberg_versions(spark, m.table_name, snapshots)
        table = read_mirror_table(catalog, m.table_name)
        assert table is not None and table.metadata_location is not None, where
        metadata_location = table.metadata_location
        for v in versions:
            assert actual.columns[v] == expected.columns[v], (
                where,
                v,
                expected.columns[v],
                actual.columns[v],
            )
            want, got = expected.project(v, expected.columns[v]), actual.project(v, expected.columns[v])
            assert got == want, _diff(where, v, want, got)
            duckdb_types = duckdb_column_types(metadata_location, m.snapshots[v])
            duckdb_columns = sorted(duckdb_types)
            assert duckdb_columns == expected.columns[v], (where + " [DuckDB]", v, duckdb_columns)
            variants = [c for c, t in duckdb_types.items() if t == "VARIANT"]
            duckdb = as_tuples(
                duckdb_rows(metadata_location, m.snapshots[v], variants_as_json=variants),
                expected.columns[v],
            )
            want_duckdb = _variant_nulls_as_null(want, expected.columns[v], variants)
            assert duckdb == want_duckdb, _diff(where + " [DuckDB]", v, want_duckdb, duckdb)
            compared += 1
        for v in (versions if pyiceberg_every_version else versions[-1:]) if pyiceberg else []:
            columns = expected.columns[v]
            read_columns = pyiceberg_columns(catalog, m.table_name, m.snapshots[v])
            assert sorted(read_columns) == sorted(columns), (where, v, read_columns, columns)
            read = as_tuples(pyiceberg_rows(catalog, m.table_name, m.snapshots[v]), columns)
            want = expected.project(v, columns)
            assert read == want, _diff(where + " [pyiceberg]", v, want, read)
    return compared


def _variant_nulls_as_null(rows: list[tuple], columns: Sequence[str], variants: Sequence[str]) -> list[tuple]:
    """Delta Spark's rows as DuckDB 1.5.5 shows them: its VARIANT has a single null, so a top-level
    variant null (`parse_json('null')`) is SQL NULL there (`IS NULL` is true, `variant_typeof` of both
    is VARIANT_NULL). Nested nulls keep their place (`[1, null]`)."""
    if not variants:
        return rows
    null = variant_json("null")
    at = [i for i, c in enumerate(columns) if c in variants]
    return sorted(
        (tuple(None if i in at and x == null else x for i, x in enumerate(row)) for row in rows), key=row_key
    )


def _diff(where: str, version: int, expected: list[tuple], actual: list[tuple]) -> str:
    missing = [r for r in expected if r not in actual][:5]
    extra = [r for r in actual if r not in expected][:5]
    return (
        f"{where}: Delta version {version}: {len(expected)} rows expected, {len(actual)} read; "
        f"missing {missing}, unexpected {extra}"
    )


# --- randomized DML histories --------------------------------------------------------------------------

RANDOM_PARTS = ["a b", "x%y", "k&v=1", None, "plain"]


def random_history(spark: SparkSession, path: Path, seed: int, ops: int) -> list[str]:
    """A reproducible random sequence of Delta DML on a DV table; returns the statements run."""
    rng = random.Random(seed)
    partitioned = rng.random() < 0.5
    props: dict[str, str] = {"delta.checkpointInterval": str(rng.choice([2, 3, 10]))}
    if rng.random() < 0.3:
        props["delta.columnMapping.mode"] = rng.choice(["name", "id"])
    if rng.random() < 0.3:
        props["delta.checkpointPolicy"] = "v2"
    ref = delta_ref(path)
    part_clause = "PARTITIONED BY (p)" if partitioned else ""
    statements = [
        f"CREATE TABLE {ref} (id BIGINT, p STRING, n INT, s STRING) USING delta {part_clause} "
        f"TBLPROPERTIES ({tblproperties(**props)})"
    ]
    next_id = 0

    def insert_rows(count: int) -> str:
        nonlocal next_id
        values = []
        for _ in range(count):
            p = rng.choice(RANDOM_PARTS)
            p_sql = "NULL" if p is None else sql_string(p)
            values.append(f"({next_id}, {p_sql}, {rng.randint(0, 9)}, 's{rng.randint(0, 99)}')")
            next_id += 1
        # One file per task: REPARTITION(1) keeps files large enough that deletes leave DVs.
        return (
            f"INSERT INTO {ref} SELECT /*+ REPARTITION(1) */ * FROM VALUES {', '.join(values)} "
            "AS t(id, p, n, s)"
        )

    statements.append(insert_rows(rng.randint(20, 40)))
    for statement in statements:
        spark.sql(statement)
    restorable = [latest_version(path)]
    for _ in range(ops):
        kind = rng.choices(
            ["insert", "delete", "update", "merge", "optimize", "purge", "restore"],
            weights=[2, 4, 3, 3, 1, 1, 1],
        )[0]
        if kind == "insert":
            statements.append(insert_rows(rng.randint(3, 15)))
        elif kind == "restore" and not [v for v in restorable if v != latest_version(path)]:
            continue
        elif kind == "delete":
            statements.append(
                f"DELETE FROM {ref} WHERE n = {rng.randint(0, 9)} OR id % 7 = {rng.randint(0, 6)}"
            )
        elif kind == "update":
            target = rng.choice(RANDOM_PARTS)
            set_p = "p" if target is None or not partitioned else sql_string(target)
            statements.append(
                f"UPDATE {ref} SET s = concat(s, 'u'), p = {set_p}, n = (n + 1) % 10 "
                f"WHERE n = {rng.randint(0, 9)}"
            )
        elif kind == "merge":
            lo = rng.randint(0, max(0, next_id - 10))
            hi = next_id + rng.randint(0, 5)
            next_id = hi + 1
            statements.append(
                f"MERGE INTO {ref} t USING (SELECT CAST(id AS BIGINT) AS id, CAST(id % 10 AS INT) AS n "
                f"FROM range({lo}, {hi})) src ON t.id = src.id "
                f"WHEN MATCHED AND src.n < 3 THEN DELETE "
                f"WHEN MATCHED THEN UPDATE SET t.s = concat(t.s, 'm') "
                f"WHEN NOT MATCHED THEN INSERT (id, p, n, s) VALUES (src.id, 'plain', src.n, 'merged')"
            )
        elif kind == "optimize":
            statements.append(f"OPTIMIZE {ref}")
        elif kind == "purge":
            statements.append(f"REORG TABLE {ref} APPLY (PURGE)")
        else:
            current = latest_version(path)
            target = rng.choice(sorted({v for v in restorable if v != current}))
            statements.append(f"RESTORE TABLE {ref} TO VERSION AS OF {target}")
        spark.sql(statements[-1])
        restorable.append(latest_version(path))
    return statements


def dump(obj: Any) -> str:
    return json.dumps(obj, default=str)


# --- histories of every kind of DML, in both formats --------------------------------------------------------

PARTITIONED_HISTORY_VALUES = ["a b", "50%", "k&v", "x=y", None, "a%20b=c&d"]


def mirror_both(spark, root: Path, name: str, split_at: list[int], split_format: int = 2) -> list[Mirrored]:
    """Both formats; `split_format` incrementally (stopping at each of `split_at`), the other in one run."""
    return [
        mirror(spark, root, f"gen.{name}_v{fmt}", fmt, split_at=split_at if fmt == split_format else [])
        for fmt in (3, 2)
    ]


def types_history(spark, root: Path, mapping: str) -> None:
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


def partitioned_history(spark, root: Path, mapping: str, v2_checkpoints: bool) -> None:
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
        p = PARTITIONED_HISTORY_VALUES[i % len(PARTITIONED_HISTORY_VALUES)]
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


# The default base seed gives make test a partitioned history, one with column mapping id and V2
# checkpoints, and one with column mapping name.
RANDOM_SEED = int(os.environ.get("DVMIRROR_TEST_SEED", "75"))


def check_random_histories(spark, catalog, tmp_path: Path, count: int, ops: int, prefix: str) -> None:
    """`count` random histories of `ops` DML statements each, mirrored and compared; a failure names the
    seed and the statements."""
    print(f"random histories: seed {RANDOM_SEED} (DVMIRROR_TEST_SEED={RANDOM_SEED} to reproduce)")
    for index in range(count):
        seed = RANDOM_SEED + index
        root = tmp_path / f"random {seed}"
        statements = random_history(spark, root, seed, ops)
        latest = latest_version(root)
        mirrors = mirror_both(spark, root, f"{prefix}{seed}", [latest // 2], split_format=3 - index % 2)
        try:
            assert_mirrors_match(spark, catalog, root, mirrors, label=f"seed {seed}")
        except Exception as err:
            raise AssertionError(f"seed {seed}, statements:\n" + "\n".join(statements) + f"\n{err}") from err


# --- tables with classic, multi-part and V2 checkpoints -----------------------------------------

PARTITION_VALUES = ["a b", "a%b c", "x&y=z", "%25", "é ü", "plain"]
CHECKPOINT_PART_SIZE = "spark.databricks.delta.checkpoint.partSize"
# Four rows per partition value, ids 10*k .. 10*k+3 for the k-th value.
ROWS_SQL = ", ".join(f"({10 * k + i}, '{p}')" for k, p in enumerate(PARTITION_VALUES) for i in range(4))


def build_classic(spark, root: Path) -> None:
    """v0 CTAS; v1 delete (DVs); v2 insert (classic checkpoint); v3 insert; v4 insert (multi-part
    checkpoint, checkpoint.partSize=1); v5 delete (DV updates after the checkpoint)."""
    create_with_rows(spark, root, "")
    spark.sql(f"DELETE FROM delta.`{root}` WHERE id % 10 = 0")
    spark.sql(f"INSERT INTO delta.`{root}` VALUES (100, 'a b')")
    spark.sql(f"INSERT INTO delta.`{root}` VALUES (101, 'new')")
    spark.conf.set(CHECKPOINT_PART_SIZE, "1")
    try:
        spark.sql(f"INSERT INTO delta.`{root}` VALUES (102, 'new')")
    finally:
        spark.conf.unset(CHECKPOINT_PART_SIZE)
    spark.sql(f"DELETE FROM delta.`{root}` WHERE id IN (11, 21)")


def build_v2(spark, root: Path) -> None:
    """v0 CTAS; v1, v2 deletes (DVs; V2 checkpoint with sidecars at 2); v3 REORG ... APPLY (PURGE)
    (dataChange=false)."""
    create_with_rows(spark, root, ", 'delta.checkpointPolicy'='v2'")
    spark.sql(f"DELETE FROM delta.`{root}` WHERE id % 10 = 0")
    spark.sql(f"DELETE FROM delta.`{root}` WHERE id IN (11, 21)")
    spark.sql(f"REORG TABLE delta.`{root}` APPLY (PURGE)")


def create_with_rows(spark, root: Path, properties: str) -> None:
    # One file per partition value (a single task), so that deletes leave DVs rather than drop files.
    spark.sql(
        f"CREATE TABLE delta.`{root}` USING delta PARTITIONED BY (p) "
        f"TBLPROPERTIES ('delta.enableDeletionVectors'='true', 'delta.checkpointInterval'='2'{properties}) "
        f"AS SELECT /*+ REPARTITION(1) */ CAST(id AS BIGINT) AS id, p FROM VALUES {ROWS_SQL} AS t(id, p)"
    )


# --- a table with DVs, and VACUUM --------------------------------------------------------------------


def delta_table_with_dvs(spark: SparkSession, root: Path) -> str:
    """A partitioned DV table at `root`: 300 rows, then a DELETE (DVs); its SQL reference."""
    ref = f"delta.`{root}`"
    spark.sql(
        f"CREATE TABLE {ref} (id BIGINT, p STRING) USING delta PARTITIONED BY (p) "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    spark.sql(f"INSERT INTO {ref} SELECT id, CAST(id % 3 AS STRING) FROM range(0, 300)")
    spark.sql(f"DELETE FROM {ref} WHERE id % 7 = 0")
    return ref


def vacuum_now(spark: SparkSession, ref: str) -> None:
    """VACUUM with no retention: every file the latest version does not need is deleted now."""
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        spark.sql(f"VACUUM {ref} RETAIN 0 HOURS")
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
