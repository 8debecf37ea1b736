"""The demo's Delta table, written by Delta Spark with deletion vectors on: every kind of commit the
mirror handles (inserts, DELETE, UPDATE, MERGE, OPTIMIZE) in a few small versions."""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Step:
    description: str
    sql: str


def steps(ref: str) -> list[Step]:
    rows = (
        "SELECT id, CASE id % 3 WHEN 0 THEN 'a' WHEN 1 THEN 'b' ELSE 'c' END AS category, "
        "CAST(id * 1.5 AS DOUBLE) AS amount"
    )
    return [
        Step(
            "create the table, deletion vectors on",
            f"CREATE TABLE {ref} (id BIGINT, category STRING, amount DOUBLE) USING delta "
            "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
        ),
        Step(
            "insert 600 rows",
            f"INSERT INTO {ref} {rows} FROM range(0, 600)",
        ),
        Step(
            "insert 300 more",
            f"INSERT INTO {ref} {rows} FROM range(600, 900)",
        ),
        Step("DELETE every 10th row (DVs)", f"DELETE FROM {ref} WHERE id % 10 = 0"),
        Step(
            "UPDATE category b (DVs + rewritten rows)",
            f"UPDATE {ref} SET amount = amount * 2 WHERE category = 'b' AND id < 300",
        ),
        Step(
            "MERGE: update some, delete some, insert new",
            f"MERGE INTO {ref} t USING (SELECT id, id % 4 AS op FROM range(850, 950)) s ON t.id = s.id "
            "WHEN MATCHED AND s.op = 0 THEN DELETE "
            "WHEN MATCHED THEN UPDATE SET amount = -1.0 "
            "WHEN NOT MATCHED THEN INSERT (id, category, amount) VALUES (s.id, 'm', 0.0)",
        ),
        Step("DELETE every 7th row (DVs updated)", f"DELETE FROM {ref} WHERE id % 7 = 0"),
        Step("OPTIMIZE (files carrying DVs compacted away)", f"OPTIMIZE {ref}"),
        Step("DELETE after OPTIMIZE (a DV on a compacted file)", f"DELETE FROM {ref} WHERE id % 11 = 0"),
    ]


def build_sample_table(spark: SparkSession, path: Path, *, progress: Callable[[str], None] = print) -> int:
    """Write the demo table at `path` (which must not exist yet); returns its latest version."""
    path.parent.mkdir(parents=True, exist_ok=True)
    ref = f"delta.`{path}`"
    # Several files per insert, so DVs land on some files and OPTIMIZE has something to compact.
    spark.conf.set("spark.sql.shuffle.partitions", "3")
    for version, step in enumerate(steps(ref)):
        if step.sql.startswith(f"INSERT INTO {ref} "):
            select = step.sql.removeprefix(f"INSERT INTO {ref} ")
            spark.sql(select).repartition(3).write.format("delta").mode("append").save(str(path))
        else:
            spark.sql(step.sql)
        progress(f"  Delta v{version}: {step.description}")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    return len(steps(ref)) - 1
