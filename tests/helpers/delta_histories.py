"""Build Delta tables with Delta Spark, mirror them, and compare every version with the oracles.

The oracle is Delta Spark time travel (`versionAsOf`) on the Delta side and Iceberg Java through Spark
(`versionAsOf` = the snapshot id) on the Iceberg side; pyiceberg reads the final snapshot as a second,
independent Iceberg reader. Rows are compared exactly (sorted), never just counted.

Spark jobs are the cost here, so all versions of one table are read in ONE job per side: the
time-travel reads of every version are unioned (by name, a `__v` column naming the version) and
collected once as Arrow.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dv_assets.mirror.settings import ICEBERG_CATALOG_NAME, CatalogConfig
from dv_assets.mirror.sync import SyncResult, sync_table
from tests.helpers.readers import snapshots_by_delta_version
from tests.helpers.rows import canonical, row_key, table_rows

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


def _read_versions(frames: dict[int, DataFrame]) -> VersionRows:
    """Collect the frames (one per version) in one job: unioned by name, tagged with the version."""
    tagged = [df.withColumn(VERSION_COLUMN, F.lit(v)) for v, df in frames.items()]
    table = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), tagged).toArrow()
    union_columns = sorted(c for c in table.column_names if c != VERSION_COLUMN)
    rows: dict[int, list[tuple]] = {v: [] for v in frames}
    versions = table.column(VERSION_COLUMN).to_pylist()
    for version, row in zip(versions, table.select(union_columns).to_pylist(), strict=True):
        rows[version].append(tuple(canonical(row[c]) for c in union_columns))
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


def pyiceberg_rows(
    catalog: CatalogConfig, table_name: str, snapshot_id: int, columns: Sequence[str]
) -> list[tuple]:
    """pyiceberg's rows of a snapshot (INT96 timestamps: see the switch in tests/helpers/readers.py)."""
    table = catalog.pyiceberg_catalog().load_table(table_name)
    arrow = table.scan(snapshot_id=snapshot_id).to_arrow()
    assert sorted(arrow.column_names) == sorted(columns), (arrow.column_names, columns)
    return table_rows(arrow, columns)


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
) -> int:
    """Every mirrored version of every mirror equals Delta Spark's rows; the final one also per pyiceberg.

    Returns the number of (mirror, version) pairs compared.
    """
    latest = latest_version(delta_path)
    versions = list(range(latest + 1))
    expected = delta_versions(spark, delta_path, versions)
    compared = 0
    for m in mirrors:
        where = f"{label} {m.table_name} (format {m.format_version})"
        assert sorted(m.snapshots) == versions, (
            f"{where}: mirrored {sorted(m.snapshots)}, Delta has {versions}"
        )
        assert snapshots_by_delta_version(catalog, m.table_name) == m.snapshots, where
        actual = iceberg_versions(spark, m.table_name, m.snapshots)
        for v in versions:
            assert actual.columns[v] == expected.columns[v], (
                where,
                v,
                expected.columns[v],
                actual.columns[v],
            )
            want, got = expected.project(v, expected.columns[v]), actual.project(v, expected.columns[v])
            assert got == want, _diff(where, v, want, got)
            compared += 1
        final_columns = expected.columns[latest]
        final = pyiceberg_rows(catalog, m.table_name, m.snapshots[latest], final_columns)
        want = expected.project(latest, final_columns)
        assert final == want, _diff(where + " [pyiceberg]", latest, want, final)
    return compared


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
