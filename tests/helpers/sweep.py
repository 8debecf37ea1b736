"""A seeded generative conformance sweep (issue 27): random Delta tables over every primitive type, as
partition and data columns, with edge values, schema operations and DML between them, each mirrored in
format 3 and format 2 and compared at every version, then under filter queries, with every Iceberg reader.

One case is one seed: `random.Random(seed)` decides the table (types, partitioning, column mapping,
checkpoint interval) and its history; the statements run are recorded, so a failure prints what
reproduces it (`DVMIRROR_SWEEP_SEED=<seed> DVMIRROR_SWEEP_CASES=1 make test-sweep`). A statement Delta
itself rejects is recorded and skipped. What the mirror refuses by name (`MirrorInputError`) is a refusal,
not a failure: the versions before it are still compared.

Filter queries are rendered per reader (`Filter`): Spark SQL for Delta Spark and Iceberg Java, DuckDB SQL,
and pyiceberg's row filter. pyiceberg's text parser has no binary, NaN or infinity literal, so those
filters are pyiceberg expressions; its text is used for the rest. pyiceberg evaluates `<` / `>` on floats
with IEEE semantics (NaN compares false) where Spark and DuckDB order NaN above every number, so range
filters on a float column whose values at that version include NaN, or with a NaN literal, leave
pyiceberg out (a difference of SQL semantics, not of the mirror). pyiceberg 0.12 binds a scan's row
filter to the table's current schema, not the snapshot's ("Could not find field with name c2" for a
column dropped since; another column for a name re-added since): a filter on a column whose field id
differs between the snapshot's schema and the current one (or is absent from either) leaves pyiceberg out.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import struct
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Context, Decimal
from functools import reduce
from pathlib import Path
from typing import Any

from pyiceberg.expressions import (
    BooleanExpression,
    EqualTo,
    GreaterThan,
    In,
    IsNaN,
    IsNull,
    LessThan,
    NotNull,
    Or,
)
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.settings import CatalogConfig
from tests.helpers.delta_histories import (
    Mirrored,
    VersionRows,
    assert_mirrors_match,
    delta_ref,
    delta_versions,
    iceberg_versions,
    latest_version,
    mirror,
    sql_string,
)
from tests.helpers.readers import (
    duckdb_rows,
    filtered_reads,
    pyiceberg_rows,
    snapshots_by_delta_version,
)
from tests.helpers.rows import NAN, NEGATIVE_ZERO, as_tuples, sorted_rows

# --- types and values ---------------------------------------------------------------------------------

INTEGER_RANGES = {
    "TINYINT": (-(2**7), 2**7 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "INT": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
}
SIMPLE_TYPES = [
    *INTEGER_RANGES,
    "FLOAT",
    "DOUBLE",
    "STRING",
    "BINARY",
    "BOOLEAN",
    "DATE",
    "TIMESTAMP",
    "TIMESTAMP_NTZ",
]
DECIMALS = [(1, 0), (1, 1), (5, 2), (9, 9), (10, 0), (18, 4), (19, 2), (28, 10), (38, 0), (38, 18), (38, 38)]

FLOAT_MAX = struct.unpack("f", struct.pack("f", 3.4028234663852886e38))[0]
FLOAT_TINY = struct.unpack("f", struct.pack("I", 1))[0]  # the smallest subnormal float
FLOAT_EDGES = [math.nan, math.inf, -math.inf, -0.0, 0.0, FLOAT_MAX, -FLOAT_MAX, FLOAT_TINY, 1.0]
DOUBLE_EDGES = [
    math.nan,
    math.inf,
    -math.inf,
    -0.0,
    0.0,
    1.7976931348623157e308,
    -1.7976931348623157e308,
    5e-324,
]
STRING_EDGES = [
    "",
    " ",
    "a b",
    "x/y",
    "k=v",
    "50%",
    "%25",
    "a:b",
    "#tag",
    " lead",
    "trail ",
    "é",
    "e\u0301",  # é decomposed: another string than "é"
    "日本語",
    "😀",
    "ß",
    "it's",
    "back\\slash",
    "null",
    "NULL",
    "__HIVE_DEFAULT_PARTITION__",
    "a" * 20,
    "\uffff" * 17,  # past the 16-character truncation of string bounds, at the top of the BMP
    "\U0010ffff" * 17,  # the same with the largest code point (4 UTF-8 bytes each)
    "zz" + "é" * 16,
]
BINARY_EDGES = [b"", b"\x00", b"\xff\xff\xff", b"abc", "é".encode(), b"\xff" * 20, b"\x00" * 17, b"a/b=c%"]
DATE_EDGES = [
    dt.date(1, 1, 1),
    dt.date(9999, 12, 31),
    dt.date(1969, 12, 31),
    dt.date(1970, 1, 1),
    dt.date(1582, 10, 4),
    dt.date(1582, 10, 15),
    dt.date(1900, 1, 1),
]
TIMESTAMP_EDGES = [
    dt.datetime(1, 1, 1),
    dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
    dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
    dt.datetime(1970, 1, 1),
    dt.datetime(1582, 10, 10, 12, 0, 0, 1),
    dt.datetime(1900, 1, 1, 0, 0, 0, 500000),
]


def decimal_type(precision: int, scale: int) -> str:
    return f"DECIMAL({precision},{scale})"


def parse_decimal(sql_type: str) -> tuple[int, int]:
    precision, scale = sql_type[len("DECIMAL(") : -1].split(",")
    return int(precision), int(scale)


def random_type(rng: random.Random) -> str:
    if rng.random() < 0.2:
        return decimal_type(*rng.choice(DECIMALS))
    return rng.choice(SIMPLE_TYPES)


def to_float32(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


def random_value(rng: random.Random, sql_type: str, edge: float = 0.35) -> Any:
    """A value of the type (None sometimes), an edge value with probability `edge`."""
    if rng.random() < 0.1:
        return None
    edgy = rng.random() < edge
    if sql_type in INTEGER_RANGES:
        lo, hi = INTEGER_RANGES[sql_type]
        return rng.choice([lo, hi, 0, -1]) if edgy else rng.randint(max(lo, -1000), min(hi, 1000))
    if sql_type == "FLOAT":
        return rng.choice(FLOAT_EDGES) if edgy else to_float32(round(rng.uniform(-1000, 1000), 2))
    if sql_type == "DOUBLE":
        return rng.choice(DOUBLE_EDGES) if edgy else round(rng.uniform(-1e6, 1e6), 3)
    if sql_type.startswith("DECIMAL"):
        precision, scale = parse_decimal(sql_type)
        context = Context(prec=100)
        if edgy:
            top = Decimal(10**precision - 1).scaleb(-scale, context)
            return rng.choice([top, top.copy_negate(), Decimal(0).scaleb(-scale), Decimal(1).scaleb(-scale)])
        digits = rng.randint(1, precision)
        unscaled = rng.randint(-(10**digits) + 1, 10**digits - 1)
        return Decimal(unscaled).scaleb(-scale, context)
    if sql_type == "STRING":
        if edgy:
            return rng.choice(STRING_EDGES)
        return "".join(rng.choice("abcxyz é/=%:# 日😀") for _ in range(rng.randint(0, 8)))
    if sql_type == "BINARY":
        return (
            rng.choice(BINARY_EDGES) if edgy else bytes(rng.randrange(256) for _ in range(rng.randint(0, 6)))
        )
    if sql_type == "BOOLEAN":
        return rng.random() < 0.5
    if sql_type == "DATE":
        if edgy:
            return rng.choice(DATE_EDGES)
        return dt.date(1950, 1, 1) + dt.timedelta(days=rng.randint(0, 40000))
    if sql_type in ("TIMESTAMP", "TIMESTAMP_NTZ"):
        if edgy:
            return rng.choice(TIMESTAMP_EDGES)
        return dt.datetime(1950, 1, 1) + dt.timedelta(microseconds=rng.randint(0, 3 * 10**15))
    raise AssertionError(sql_type)


def float_text(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(value)


def spark_literal(value: Any, sql_type: str) -> str:
    """A Spark SQL expression of exactly this value and type."""
    if value is None:
        return f"CAST(NULL AS {sql_type})"
    if sql_type in INTEGER_RANGES:
        return f"CAST({value} AS {sql_type})"
    if sql_type in ("FLOAT", "DOUBLE"):
        return f"CAST('{float_text(value)}' AS {sql_type})"
    if sql_type.startswith("DECIMAL"):
        return f"CAST('{value:f}' AS {sql_type})"
    if sql_type == "STRING":
        return sql_string(value)
    if sql_type == "BINARY":
        return f"X'{value.hex().upper()}'"
    if sql_type == "BOOLEAN":
        return "TRUE" if value else "FALSE"
    if sql_type == "DATE":
        return f"DATE'{value.isoformat()}'"
    if sql_type == "TIMESTAMP":  # the session's time zone is UTC (dv_assets/mirror/spark.py)
        return f"TIMESTAMP'{_timestamp_text(value)}'"
    if sql_type == "TIMESTAMP_NTZ":
        return f"TIMESTAMP_NTZ'{_timestamp_text(value)}'"
    raise AssertionError(sql_type)


def _timestamp_text(value: dt.datetime) -> str:
    return f"{value.year:04d}-{value:%m-%d %H:%M:%S}.{value.microsecond:06d}"


def duckdb_literal(value: Any, sql_type: str) -> str:
    if sql_type in INTEGER_RANGES:
        return str(value)
    if sql_type == "BOOLEAN":
        return "true" if value else "false"
    if sql_type in ("FLOAT", "DOUBLE") or sql_type.startswith("DECIMAL"):
        return spark_literal(value, sql_type)
    if sql_type == "STRING":
        return "'" + value.replace("'", "''") + "'"
    if sql_type == "BINARY":
        return f"from_hex('{value.hex().upper()}')"
    if sql_type == "DATE":
        return f"DATE '{value.isoformat()}'"
    if sql_type == "TIMESTAMP":
        return f"TIMESTAMPTZ '{_timestamp_text(value)}+00'"
    if sql_type == "TIMESTAMP_NTZ":
        return f"TIMESTAMP '{_timestamp_text(value)}'"
    raise AssertionError(sql_type)


def pyiceberg_value(value: Any, sql_type: str) -> Any:
    """The value as pyiceberg's expressions take it (their literals convert to the column's type)."""
    if sql_type == "DATE":
        return value.isoformat()
    if sql_type == "TIMESTAMP":
        return _timestamp_text(value).replace(" ", "T") + "+00:00"
    if sql_type == "TIMESTAMP_NTZ":
        return _timestamp_text(value).replace(" ", "T")
    return value


def pyiceberg_text(value: Any, sql_type: str) -> str | None:
    """The literal in pyiceberg's row-filter syntax, or None where the parser has none (binary, floats:
    its grammar has no NaN or infinity and would read 1.5 as a decimal)."""
    if sql_type in INTEGER_RANGES:
        return str(value)
    if sql_type == "BOOLEAN":
        return "true" if value else "false"
    if sql_type.startswith("DECIMAL"):
        return f"{value:f}"
    if sql_type in ("STRING", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ"):
        return "'" + str(pyiceberg_value(value, sql_type)).replace("'", "''") + "'"
    return None


def from_canonical(value: Any, sql_type: str) -> Any:
    """A value of `tests.helpers.rows.canonical` form back as the Python value of the type."""
    if value is None:
        return None
    if sql_type in ("FLOAT", "DOUBLE"):
        return {NAN: math.nan, NEGATIVE_ZERO: -0.0}.get(value, value) if isinstance(value, str) else value
    if sql_type.startswith("DECIMAL"):
        return Decimal(value)
    if sql_type == "BINARY":
        return bytes.fromhex(value)
    if sql_type == "DATE":
        return dt.date.fromisoformat(value)
    if sql_type in ("TIMESTAMP", "TIMESTAMP_NTZ"):
        return dt.datetime.fromisoformat(value).replace(tzinfo=None)
    return value


def spark_type_name(data_type: T.DataType) -> str:
    """A Spark schema's type in the SQL spelling this module uses."""
    names = {
        T.ByteType: "TINYINT",
        T.ShortType: "SMALLINT",
        T.IntegerType: "INT",
        T.LongType: "BIGINT",
        T.FloatType: "FLOAT",
        T.DoubleType: "DOUBLE",
        T.StringType: "STRING",
        T.BinaryType: "BINARY",
        T.BooleanType: "BOOLEAN",
        T.DateType: "DATE",
        T.TimestampType: "TIMESTAMP",
        T.TimestampNTZType: "TIMESTAMP_NTZ",
    }
    if isinstance(data_type, T.DecimalType):
        return decimal_type(data_type.precision, data_type.scale)
    return names[type(data_type)]


# Delta's type widening (`delta.enableTypeWidening`): the wider types each type may change to.
WIDENINGS = {
    "TINYINT": ["SMALLINT", "INT", "BIGINT", "DOUBLE", "DECIMAL(10,0)"],
    "SMALLINT": ["INT", "BIGINT", "DOUBLE"],
    "INT": ["BIGINT", "DOUBLE", "DECIMAL(10,0)"],
    "BIGINT": ["DECIMAL(20,0)"],
    "FLOAT": ["DOUBLE"],
    "DATE": ["TIMESTAMP_NTZ"],
}


def widenings(sql_type: str) -> list[str]:
    if sql_type.startswith("DECIMAL"):
        precision, scale = parse_decimal(sql_type)
        return [
            decimal_type(p, s) for p, s in [(precision + 2, scale), (precision + 3, scale + 1)] if p <= 38
        ]
    return WIDENINGS.get(sql_type, [])


# --- random histories ---------------------------------------------------------------------------------


@dataclass
class TableModel:
    """What the generator knows of the table now: its columns (name -> SQL type, `id BIGINT` first) and
    partition columns."""

    columns: dict[str, str]
    partitions: list[str]
    next_column: int

    def copy(self) -> TableModel:
        return TableModel(dict(self.columns), list(self.partitions), self.next_column)

    def data_columns(self) -> list[str]:
        return [c for c in self.columns if c != "id"]

    def new_name(self) -> str:
        self.next_column += 1
        return f"c{self.next_column}"


@dataclass
class History:
    seed: int
    root: Path
    mapping: str
    statements: list[str] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)  # statements Delta refused, and why

    def text(self) -> str:
        lines = [f"-- seed {self.seed}, column mapping {self.mapping}, table {self.root}"]
        lines += [f"{s};" for s in self.statements]
        lines += [f"-- rejected by Delta: {s}  ({why})" for s, why in self.rejected]
        return "\n".join(lines)


def _run(spark: SparkSession, statement: str) -> None:
    """A statement of the history: SQL, or (a DataFrame write) a Python expression over `spark`, run as
    written so that the recorded text is what ran."""
    if statement.startswith("spark."):
        eval(statement, {"spark": spark})  # the text is generated here, never read from outside
    else:
        spark.sql(statement)


class HistoryBuilder:
    """Builds one random history on a DV table, statement by statement."""

    def __init__(self, spark: SparkSession, root: Path, seed: int) -> None:
        self.spark = spark
        self.rng = random.Random(seed)
        self.root = root
        self.ref = delta_ref(root)
        rng = self.rng
        self.mapping = rng.choices(["none", "name", "id"], weights=[5, 4, 1])[0]
        self.history = History(seed, root, self.mapping)
        columns = {"id": "BIGINT"} | {f"c{i}": random_type(rng) for i in range(1, rng.randint(3, 6) + 1)}
        data = [c for c in columns if c != "id"]
        partitions = rng.sample(data, k=rng.choices([0, 1, 2], weights=[3, 4, 2])[0])
        self.model = TableModel(columns, partitions, len(columns) - 1)
        self.states: dict[int, TableModel] = {}
        # A few values per partition column (many partitions are many files, and Spark's cost is per file).
        self.partition_pool = {
            p: [random_value(rng, columns[p], edge=0.6) for _ in range(3)] for p in partitions
        }
        self.next_id = 0
        props = {
            "delta.enableDeletionVectors": "true",
            "delta.checkpointInterval": str(rng.choice([2, 3, 5])),
            "delta.columnMapping.mode": self.mapping,
        }
        if rng.random() < 0.25:
            props["delta.checkpointPolicy"] = "v2"
        self.props = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())

    # statements --------------------------------------------------------------------------------------

    def attempt(self, statements: Sequence[str], model: TableModel | None = None) -> bool:
        """Run the statements; on success the model becomes `model` (when given) at each new version.
        A statement Delta rejects is recorded and ends the attempt."""
        for statement in statements:
            try:
                _run(self.spark, statement)
            except Exception as err:
                if not self.history.statements:
                    raise
                self.history.rejected.append((statement, _first_line(err)))
                return False
            self.history.statements.append(statement)
            if model is not None:
                self.model = model
            self.states[latest_version(self.root)] = self.model.copy()
        return True

    def value(self, column: str, edge: float = 0.35) -> Any:
        if column in self.model.partitions and column in self.partition_pool and self.rng.random() < 0.9:
            return self.rng.choice(self.partition_pool[column])
        return random_value(self.rng, self.model.columns[column], edge)

    def rows_sql(self, count: int, columns: dict[str, str], new_ids: bool = True) -> str:
        rows = []
        for _ in range(count):
            if new_ids:
                row_id, self.next_id = self.next_id, self.next_id + 1
            else:
                row_id = self.rng.randrange(max(1, self.next_id + 5))
            values = [f"CAST({row_id} AS BIGINT)"]
            for c, sql_type in columns.items():
                if c != "id":
                    same = self.model.columns.get(c) == sql_type
                    value = self.value(c) if same else random_value(self.rng, sql_type)
                    values.append(spark_literal(value, sql_type))
            rows.append(f"({', '.join(values)})")
        return f"VALUES {', '.join(rows)} AS t({', '.join(columns)})"

    def create(self) -> None:
        columns = ", ".join(f"{c} {t}" for c, t in self.model.columns.items())
        parts = f"PARTITIONED BY ({', '.join(self.model.partitions)}) " if self.model.partitions else ""
        self.attempt([f"CREATE TABLE {self.ref} ({columns}) USING delta {parts}TBLPROPERTIES ({self.props})"])
        self.insert(self.rng.randint(15, 30))

    def insert(self, count: int) -> None:
        columns = self.model.columns
        self.attempt(
            [
                f"INSERT INTO {self.ref} ({', '.join(columns)}) SELECT /*+ REPARTITION(1) */ * "
                f"FROM {self.rows_sql(count, columns)}"
            ]
        )

    def where(self) -> str:
        rng = self.rng
        data = self.model.data_columns()
        if data and rng.random() < 0.35:
            column = rng.choice(data)
            value = self.value(column)
            if value is None:
                return f"{column} IS NULL"
            literal = spark_literal(value, self.model.columns[column])
            return f"{column} = {literal} OR id % 5 = {rng.randrange(5)}"
        return f"id % {rng.randint(2, 7)} = {rng.randrange(2)}"

    def step(self) -> None:
        rng = self.rng
        mapped = self.mapping != "none"
        kinds = {
            "insert": 3,
            "delete": 4,
            "update": 3,
            "merge": 2,
            "optimize": 1,
            "purge": 1,
            "restore": 1.5,
            "add_columns": 1.5,
            "merge_schema": 1,
            "overwrite_schema": 1,
            "widen": 0.5,
            "rename": 1.5 if mapped else 0,
            "drop": 1.5 if mapped else 0,
            "drop_readd": 1 if mapped else 0,
        }
        kind = rng.choices(list(kinds), weights=list(kinds.values()))[0]
        getattr(self, f"op_{kind}")()

    def op_insert(self) -> None:
        self.insert(self.rng.randint(3, 15))

    def op_delete(self) -> None:
        self.attempt([f"DELETE FROM {self.ref} WHERE {self.where()}"])

    def op_update(self) -> None:
        data = self.model.data_columns()
        if not data:
            return self.op_delete()
        column = self.rng.choice(data)
        literal = spark_literal(self.value(column), self.model.columns[column])
        self.attempt([f"UPDATE {self.ref} SET {column} = {literal} WHERE {self.where()}"])

    def op_merge(self) -> None:
        columns = self.model.columns
        source = f"SELECT * FROM {self.rows_sql(self.rng.randint(3, 12), columns, new_ids=False)}"
        self.attempt(
            [
                f"MERGE INTO {self.ref} t USING ({source}) s ON t.id = s.id "
                f"WHEN MATCHED AND s.id % 3 = {self.rng.randrange(3)} THEN DELETE "
                "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
            ]
        )
        self.next_id += 5

    def op_optimize(self) -> None:
        self.attempt([f"OPTIMIZE {self.ref}"])

    def op_purge(self) -> None:
        self.attempt([f"REORG TABLE {self.ref} APPLY (PURGE)"])

    def op_restore(self) -> None:
        current = latest_version(self.root)
        targets = [v for v in self.states if v != current]
        if not targets:
            return
        target = self.rng.choice(targets)
        self.attempt([f"RESTORE TABLE {self.ref} TO VERSION AS OF {target}"], self.states[target].copy())

    def op_add_columns(self) -> None:
        model = self.model.copy()
        added = {model.new_name(): random_type(self.rng) for _ in range(self.rng.randint(1, 2))}
        model.columns.update(added)
        spec = ", ".join(f"{c} {t}" for c, t in added.items())
        if self.attempt([f"ALTER TABLE {self.ref} ADD COLUMNS ({spec})"], model):
            self.op_insert()

    def op_merge_schema(self) -> None:
        """An append with a new column (`mergeSchema`)."""
        model = self.model.copy()
        model.columns[model.new_name()] = random_type(self.rng)
        select = (
            f"SELECT /*+ REPARTITION(1) */ * FROM {self.rows_sql(self.rng.randint(3, 10), model.columns)}"
        )
        self.attempt(
            [
                f"spark.sql({select!r}).write.format('delta').mode('append')"
                f".option('mergeSchema', 'true').save({str(self.root)!r})"
            ],
            model,
        )

    def op_overwrite_schema(self) -> None:
        """The whole table overwritten with another schema (`overwriteSchema`), same partitioning:
        some data columns dropped, some added, sometimes one kept under another type."""
        rng = self.rng
        model = self.model.copy()
        for c in model.data_columns():
            if c not in model.partitions and rng.random() < 0.3:
                del model.columns[c]
        if rng.random() < 0.3:
            kept = [c for c in model.data_columns() if c not in model.partitions]
            if kept:
                model.columns[rng.choice(kept)] = random_type(rng)
        for _ in range(rng.randint(0, 2)):
            model.columns[model.new_name()] = random_type(rng)
        select = f"SELECT /*+ REPARTITION(1) */ * FROM {self.rows_sql(rng.randint(5, 15), model.columns)}"
        parts = "".join(f", {p!r}" for p in model.partitions)[2:]
        self.attempt(
            [
                f"spark.sql({select!r}).write.format('delta').mode('overwrite')"
                f".option('overwriteSchema', 'true').partitionBy({parts}).save({str(self.root)!r})"
            ],
            model,
        )

    def op_widen(self) -> None:
        candidates = [(c, w) for c, t in self.model.columns.items() if c != "id" for w in widenings(t)]
        if not candidates:
            return
        column, wide = self.rng.choice(candidates)
        model = self.model.copy()
        model.columns[column] = wide
        enable = f"ALTER TABLE {self.ref} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')"
        if self.attempt([enable]):
            self.attempt([f"ALTER TABLE {self.ref} CHANGE COLUMN {column} TYPE {wide}"], model)

    def op_rename(self) -> None:
        data = self.model.data_columns()
        if not data:
            return
        column = self.rng.choice(data)
        model = self.model.copy()
        new = model.new_name().replace("c", "r")
        model.columns = {new if c == column else c: t for c, t in model.columns.items()}
        model.partitions = [new if p == column else p for p in model.partitions]
        if column in self.partition_pool:
            self.partition_pool[new] = self.partition_pool[column]
        self.attempt([f"ALTER TABLE {self.ref} RENAME COLUMN {column} TO {new}"], model)

    def op_drop(self, readd: bool = False) -> None:
        data = [c for c in self.model.data_columns() if c not in self.model.partitions]
        if len(data) < 2:
            return
        column = self.rng.choice(data)
        model = self.model.copy()
        old_type = model.columns.pop(column)
        if not self.attempt([f"ALTER TABLE {self.ref} DROP COLUMN {column}"], model):
            return
        self.op_delete() if self.rng.random() < 0.5 else self.op_insert()
        if readd:
            model = self.model.copy()
            model.columns[column] = old_type if self.rng.random() < 0.5 else random_type(self.rng)
            if self.attempt(
                [f"ALTER TABLE {self.ref} ADD COLUMNS ({column} {model.columns[column]})"], model
            ):
                self.op_insert()

    def op_drop_readd(self) -> None:
        self.op_drop(readd=True)


def build_history(spark: SparkSession, root: Path, seed: int, ops: int) -> History:
    builder = HistoryBuilder(spark, root, seed)
    builder.create()
    for _ in range(ops):
        builder.step()
    return builder.history


# --- comparing ----------------------------------------------------------------------------------------

REFUSED = (MirrorInputError,)


@dataclass
class Failure:
    seed: int
    what: str  # "rows", "filter", "mirror crashed", ...
    reader: str
    format_version: int
    version: int | None
    detail: str

    known: str = ""  # a known bug this failure looks like (see `KNOWN_SCHEMA_BUG`)

    def signature(self) -> tuple[str, str, int, str]:
        return (self.what, self.reader, self.format_version, self.known)


@dataclass
class Refusal:
    seed: int
    format_version: int
    version: int | None
    reason: str


@dataclass
class SweepReport:
    base_seed: int
    tables: int = 0
    versions: int = 0  # (mirror, version) pairs compared
    filters: int = 0  # (mirror, version, predicate) filter queries compared
    statements: int = 0
    rejected: int = 0
    refusals: list[Refusal] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    histories: dict[int, History] = field(default_factory=dict)
    # Tables pyiceberg was not compared on, for a known limit of its own (README "Readers"), by seed.
    reader_limits: dict[int, str] = field(default_factory=dict)

    def summary(self) -> str:
        lines = [
            f"sweep seed {self.base_seed}: {self.tables} tables, {self.statements} statements "
            f"({self.rejected} rejected by Delta), {self.versions} versions and {self.filters} filter "
            f"queries compared; {len(self.refusals)} refusals, {len(self.failures)} failures",
        ]
        for seed, limit in sorted(self.reader_limits.items()):
            lines.append(f"  pyiceberg not compared: seed {seed}: {limit}")
        for r in self.refusals:
            lines.append(f"  refused: seed {r.seed} format {r.format_version} v{r.version}: {r.reason[:300]}")
        distinct: dict[tuple[str, str, int], list[Failure]] = {}
        for f in self.failures:
            distinct.setdefault(f.signature(), []).append(f)
        for (what, reader, fmt, known), found in distinct.items():
            seeds = sorted({f.seed for f in found})
            note = f" ({known})" if known else ""
            lines.append(f"  FAILED {what} [{reader}] format {fmt}{note}: {len(found)} times, seeds {seeds}")
        for f in self.failures:
            note = f" ({f.known})" if f.known else ""
            lines.append(
                f"--- seed {f.seed} format {f.format_version} version {f.version} {f.what} "
                f"[{f.reader}]{note}:\n{f.detail[:2000]}"
            )
        failed_seeds = sorted({f.seed for f in self.failures})
        for seed in failed_seeds:
            if seed in self.histories:
                lines.append(self.histories[seed].text())
        return "\n".join(lines)


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:500]


def _mirror(
    spark: SparkSession, catalog: CatalogConfig, history: History, name: str, fmt: int, split: bool
) -> tuple[Mirrored, Refusal | None, str | None]:
    """The history mirrored (one version per run when `split`); a refusal ends it, an error too."""
    latest = latest_version(history.root)
    try:
        return (
            mirror(spark, history.root, name, fmt, split_at=list(range(latest)) if split else []),
            None,
            None,
        )
    except REFUSED as err:
        refusal = Refusal(history.seed, fmt, err.version, err.reason)
        problem = None
    except Exception:
        refusal, problem = None, traceback.format_exc(limit=6)
    held = snapshots_by_delta_version(catalog, name) if catalog.pyiceberg_catalog().table_exists(name) else {}
    return Mirrored(name, fmt, dict(held)), refusal, problem


KNOWN_SCHEMA_BUG = "looks like known bug 1: the name mapping lacks the columns of older schemas"


def tag_known(failures: list[Failure], spark: SparkSession, root: Path) -> None:
    """Tag a failure at a version with a column the latest version's schema does not have (dropped by an
    overwrite, a RESTORE or DROP COLUMN) or has as another type not by widening (re-added, overwritten):
    the versions where known bug 1 reads nulls. The tag is for triage only; such failures still fail."""
    latest = {f.name: spark_type_name(f.dataType) for f in spark.read.format("delta").load(str(root)).schema}
    for f in failures:
        if f.version is None:
            continue
        old = spark.read.format("delta").option("versionAsOf", f.version).load(str(root)).schema
        for column in old:
            old_type, new_type = spark_type_name(column.dataType), latest.get(column.name)
            if new_type != old_type and new_type not in widenings(old_type):
                f.known = KNOWN_SCHEMA_BUG


def check_case(
    spark: SparkSession, catalog: CatalogConfig, tmp: Path, seed: int, report: SweepReport, ops: int
) -> None:
    """Build the history of `seed`, mirror it in both formats and compare; findings go to `report`."""
    root = tmp / f"sweep {seed}"
    builder = HistoryBuilder(spark, root, seed)
    report.histories[seed] = history = builder.history
    builder.create()
    for _ in range(ops):
        builder.step()
    report.tables += 1
    report.statements += len(history.statements)
    report.rejected += len(history.rejected)
    latest = latest_version(root)
    mirrors: list[tuple[Mirrored, list[int]]] = []
    split_format = 3 - seed % 2
    for fmt in (3, 2):
        m, refusal, problem = _mirror(
            spark, catalog, history, f"sweep.s{seed}_v{fmt}", fmt, fmt == split_format
        )
        if refusal is not None:
            report.refusals.append(refusal)
        if problem is not None:
            report.failures.append(Failure(seed, "mirror crashed", "mirror", fmt, None, problem))
        versions = sorted(v for v in m.snapshots if v <= latest)
        expected_versions = list(range(len(versions)))
        if versions != expected_versions:
            report.failures.append(
                Failure(seed, "versions", "mirror", fmt, None, f"mirrored {versions}, Delta has 0..{latest}")
            )
        if refusal is None and problem is None and len(versions) != latest + 1:
            report.failures.append(Failure(seed, "versions", "mirror", fmt, None, f"mirrored {versions}"))
        if versions:
            mirrors.append((m, versions))
    if not mirrors:
        return
    every = sorted({v for _, versions in mirrors for v in versions})
    expected = delta_versions(spark, root, every)
    limit = pyiceberg_limit(expected)
    if limit is not None:
        report.reader_limits[seed] = limit
    for m, versions in mirrors:
        label = f"seed {seed}"
        try:
            report.versions += assert_mirrors_match(
                spark,
                catalog,
                root,
                [m],
                label=label,
                pyiceberg_every_version=True,
                pyiceberg=limit is None,
                versions=versions,
                expected=expected,
            )
        except Exception as err:
            report.versions += len(versions)
            found = diagnose(spark, catalog, seed, m, versions, expected)
            report.failures += found or [
                Failure(seed, "rows", "?", m.format_version, None, traceback.format_exc(limit=4) + str(err))
            ]
        check_filters(spark, catalog, seed, history, m, versions, expected, report, pyiceberg=limit is None)
    tag_known([f for f in report.failures if f.seed == seed], spark, root)


# pyiceberg 0.12 reads Delta Spark's INT96 timestamps (a `timestamp` column's default Parquet type) as
# nanoseconds in an int64, so an instant outside 1677-09-21 .. 2262-04-11 wraps around (9999-12-31 reads as
# 1816-03-30); Iceberg Java and DuckDB read them right. Canonical rows hold such an instant as UTC text.
INT96_YEARS = range(1678, 2262)


def pyiceberg_limit(expected: VersionRows) -> str | None:
    """Why pyiceberg cannot be compared on a table whose Delta rows are `expected` (None: it can)."""
    for rows in expected.rows.values():
        for row in rows:
            for value in row:
                instant = isinstance(value, str) and value.endswith("+00:00") and len(value) > 20
                if instant and value[:4].isdigit() and value[4] == "-" and int(value[:4]) not in INT96_YEARS:
                    return f"an INT96 timestamp outside 1678..2261 ({value}): pyiceberg wraps it around"
    return None


def diagnose(
    spark: SparkSession,
    catalog: CatalogConfig,
    seed: int,
    m: Mirrored,
    versions: Sequence[int],
    expected: VersionRows,
) -> list[Failure]:
    """Every (version, reader) whose rows differ from Delta Spark's, each reader read on its own (so
    that one reader's failure does not hide another's)."""
    found = []
    try:
        java = iceberg_versions(spark, m.table_name, {v: m.snapshots[v] for v in versions})
    except Exception as err:
        java = None
        found.append(Failure(seed, "read failed", "Iceberg Java", m.format_version, None, _first_line(err)))
    metadata_location = catalog.pyiceberg_catalog().load_table(m.table_name).metadata_location
    for v in versions:
        columns = expected.columns[v]
        want = expected.project(v, columns)
        readers: dict[str, Callable[[], list[tuple]]] = {
            "DuckDB": lambda v=v, c=columns: as_tuples(duckdb_rows(metadata_location, m.snapshots[v]), c),
            "pyiceberg": lambda v=v, c=columns: as_tuples(
                pyiceberg_rows(catalog, m.table_name, m.snapshots[v]), c
            ),
        }
        if java is not None:
            if java.columns[v] != columns:
                found.append(
                    Failure(
                        seed,
                        "columns",
                        "Iceberg Java",
                        m.format_version,
                        v,
                        f"{java.columns[v]} != {columns}",
                    )
                )
            else:
                readers["Iceberg Java"] = lambda v=v, c=columns: java.project(v, c)
        for reader, read in readers.items():
            try:
                got = read()
            except Exception as err:
                found.append(Failure(seed, "read failed", reader, m.format_version, v, _first_line(err)))
                continue
            if got != want:
                found.append(Failure(seed, "rows", reader, m.format_version, v, row_diff(want, got, columns)))
    return found


def row_diff(want: list, got: list, columns: Sequence[str] | None = None) -> str:
    missing = [r for r in want if r not in got][:4]
    extra = [r for r in got if r not in want][:4]
    head = f"columns {list(columns)}: " if columns is not None else ""
    return f"{head}{len(want)} rows expected, {len(got)} read; missing {missing}; unexpected {extra}"


# --- filter queries -----------------------------------------------------------------------------------


@dataclass
class Filter:
    """One predicate, said to each reader."""

    spark: str
    duckdb: str
    pyiceberg: str | BooleanExpression | None  # None: pyiceberg left out (see the module docstring)


def make_filter(rng: random.Random, column: str, sql_type: str, values: list[Any]) -> Filter:
    """A random predicate on `column` with literals picked from its `values` at that version (and the
    type's edge values)."""
    present = [v for v in values if v is not None]
    op = rng.choice(
        ["=", "<", ">", "IS NULL", "IS NOT NULL", "IN"] if present else ["IS NULL", "IS NOT NULL"]
    )
    if op in ("IS NULL", "IS NOT NULL"):
        text = f"{column} {op}"
        return Filter(text, text, IsNull(column) if op == "IS NULL" else NotNull(column))
    if sql_type == "BOOLEAN" and op in ("<", ">"):
        op = "="

    def pick() -> Any:
        if rng.random() < 0.2:
            value = random_value(rng, sql_type, edge=0.9)
            if value is not None:
                return value
        return rng.choice(present)

    literals = [pick() for _ in range(rng.randint(2, 3) if op == "IN" else 1)]
    spark_lits = [spark_literal(v, sql_type) for v in literals]
    duckdb_lits = [duckdb_literal(v, sql_type) for v in literals]
    if op == "IN":
        spark_text, duckdb_text = (f"{column} IN ({', '.join(lits)})" for lits in (spark_lits, duckdb_lits))
    else:
        spark_text, duckdb_text = f"{column} {op} {spark_lits[0]}", f"{column} {op} {duckdb_lits[0]}"
    floats = sql_type in ("FLOAT", "DOUBLE")
    nan_literal = floats and any(math.isnan(v) for v in literals)
    nan_data = floats and any(isinstance(v, float) and math.isnan(v) for v in present)
    pyiceberg: str | BooleanExpression | None
    zero_literal = floats and op == "IN" and any(v == 0 for v in literals)
    if floats and op in ("<", ">") and (nan_literal or nan_data):
        pyiceberg = None  # NaN orders above every number in Spark and DuckDB, compares false in pyiceberg
    elif zero_literal:
        # pyiceberg 0.12 evaluates IN with Arrow's is_in, which hashes floats by their bits: a -0.0 row is
        # not IN (0.0), which Delta Spark, Iceberg Java and DuckDB return (seed 479787; README "Readers").
        pyiceberg = None
    elif floats or sql_type == "BINARY":
        pyiceberg = _pyiceberg_expression(column, op, literals, sql_type)
    else:
        texts = [pyiceberg_text(v, sql_type) for v in literals]
        pyiceberg = (
            f"{column} IN ({', '.join(t or '' for t in texts)})"
            if op == "IN"
            else f"{column} {op} {texts[0]}"
        )
    return Filter(spark_text, duckdb_text, pyiceberg)


def _pyiceberg_expression(column: str, op: str, literals: list[Any], sql_type: str) -> BooleanExpression:
    values = [pyiceberg_value(v, sql_type) for v in literals]

    def equal(value: Any) -> BooleanExpression:
        return IsNaN(column) if isinstance(value, float) and math.isnan(value) else EqualTo(column, value)

    if op == "=":
        return equal(values[0])
    if op == "<":
        return LessThan(column, values[0])
    if op == ">":
        return GreaterThan(column, values[0])
    plain = [v for v in values if not (isinstance(v, float) and math.isnan(v))]
    parts: list[BooleanExpression] = [IsNaN(column)] if len(plain) < len(values) else []
    if plain:
        parts.append(In(column, plain))
    return reduce(Or, parts)


def check_filters(
    spark: SparkSession,
    catalog: CatalogConfig,
    seed: int,
    history: History,
    m: Mirrored,
    versions: Sequence[int],
    expected: VersionRows,
    report: SweepReport,
    per_version: int = 3,
    max_versions: int = 3,
    pyiceberg: bool = True,
) -> None:
    """Filter queries at a few versions (the last always): each reader's rows against Delta Spark's rows
    for the same predicate, Delta's all read in one job per version."""
    rng = random.Random(seed * 31 + m.format_version)
    table = catalog.pyiceberg_catalog().load_table(m.table_name)
    current_ids = {f.name: f.field_id for f in table.schema().fields}
    chosen = sorted(set(rng.sample(list(versions), k=min(max_versions - 1, len(versions)))) | {versions[-1]})
    for v in chosen:
        df = spark.read.format("delta").option("versionAsOf", v).load(str(history.root))
        types = {f.name: spark_type_name(f.dataType) for f in df.schema.fields}
        columns = [c for c in expected.columns[v] if c != "id"] or ["id"]
        snapshot = table.snapshot_by_id(m.snapshots[v])
        schema_id = snapshot.schema_id if snapshot is not None else None
        snapshot_ids = (
            {f.name: f.field_id for f in table.schemas()[schema_id].fields} if schema_id is not None else {}
        )
        filters = []
        for _ in range(per_version):
            column = rng.choice(columns)
            values = [from_canonical(row[0], types[column]) for row in expected.project(v, [column])]
            f = make_filter(rng, column, types[column], values)
            if not pyiceberg or snapshot_ids.get(column, -1) != current_ids.get(column, -2):
                f.pyiceberg = None  # pyiceberg would bind it to the current schema (see the module docstring)
            filters.append(f)
        try:
            tagged = [df.where(f.spark).withColumn("__q", F.lit(i)) for i, f in enumerate(filters)]
            found = reduce(lambda a, b: a.unionByName(b), tagged).toArrow().to_pylist()
        except Exception as err:
            detail = f"Delta Spark could not run {[f.spark for f in filters]}: {_first_line(err)}"
            report.failures.append(Failure(seed, "filter syntax", "Delta Spark", m.format_version, v, detail))
            continue
        for i, f in enumerate(filters):
            want = sorted_rows({k: r[k] for k in r if k != "__q"} for r in found if r["__q"] == i)
            report.filters += 1
            try:
                reads = filtered_reads(
                    spark,
                    catalog,
                    m.table_name,
                    m.snapshots[v],
                    f.spark,
                    duckdb_predicate=f.duckdb,
                    pyiceberg_filter=f.pyiceberg,
                    with_pyiceberg=f.pyiceberg is not None,
                )
            except Exception as err:
                detail = f"{f}: {_first_line(err)}"
                report.failures.append(Failure(seed, "filter read failed", "?", m.format_version, v, detail))
                continue
            for reader, rows in reads.items():
                if rows != want:
                    detail = f"predicate {f}:\n{row_diff(want, rows)}"
                    report.failures.append(Failure(seed, "filter", reader, m.format_version, v, detail))


def run_sweep(
    spark: SparkSession,
    catalog: CatalogConfig,
    tmp: Path,
    base_seed: int,
    *,
    seconds: float,
    max_cases: int | None = None,
    ops: tuple[int, int] = (4, 9),
) -> SweepReport:
    """Cases `base_seed`, `base_seed + 1`, ... until `seconds` have passed (a case started before then
    is finished) or `max_cases` are done."""
    report = SweepReport(base_seed)
    deadline = time.monotonic() + seconds
    seed = base_seed
    while seed == base_seed or (
        (max_cases is None or seed - base_seed < max_cases) and time.monotonic() < deadline
    ):
        count = random.Random(seed).randint(*ops)
        try:
            check_case(spark, catalog, tmp, seed, report, count)
        except Exception:
            report.failures.append(
                Failure(seed, "case crashed", "sweep", 0, None, traceback.format_exc(limit=8))
            )
        seed += 1
    return report
