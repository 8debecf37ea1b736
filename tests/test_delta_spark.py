"""dv_assets.mirror.delta on tables Delta Spark writes: escaped partition paths, classic, multi-part and V2
checkpoints, and logs whose early commits were cleaned up. Delta Spark and delta-rs are the oracles.

Two tables are built once per module (Spark jobs are the cost here):
- `classic`: partitioned by a string with spaces, `%`, `&`, `=` and non-ASCII in its values, DVs,
  checkpointInterval=2; the checkpoint at v4 is written multi-part (checkpoint.partSize=1).
- `v2`: the same data with `delta.checkpointPolicy=v2` (a JSON top-level checkpoint and sidecars).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

import deltalake
import pyarrow as pa
import pytest

from dv_assets.mirror.delta.replay import DeltaTable, TableState
from tests.helpers.delta_log import assert_changes_match_states

pytestmark = pytest.mark.spark

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


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    # Spaces in the table roots too: the root is a plain path, never decoded.
    base = tmp_path_factory.mktemp("delta_spark")
    built = {"classic": base / "classic table", "v2": base / "v2 table"}
    build_classic(spark, built["classic"])
    build_v2(spark, built["v2"])
    return built


LATEST = {"classic": 5, "v2": 3}
# The last checkpoint: the commits before it are deleted (Delta Spark needs the checkpoint's own commit
# for time travel; test_delta_log covers a log without it).
OLDEST = {"classic": 4, "v2": 2}
# Version -> number of files whose DV the DELETE replaced (v1 deletes row 10*k of every file).
DV_UPDATES = {"classic": {1: len(PARTITION_VALUES), 5: 2}, "v2": {1: len(PARTITION_VALUES), 2: 2}}


def without_early_commits(root: Path, dest: Path, oldest: int) -> Path:
    """A copy of the table whose commits before `oldest` (and their checksums) were cleaned up."""
    shutil.copytree(root, dest)
    for v in range(oldest):
        for name in (f"{v:020d}.json", f".{v:020d}.json.crc", f"{v:020d}.crc", f".{v:020d}.crc.crc"):
            (dest / "_delta_log" / name).unlink(missing_ok=True)
    return dest


def spark_live_rows_per_file(spark, root: Path, version: int) -> dict[str, int]:
    from pyspark.sql.functions import input_file_name

    df = spark.read.format("delta").option("versionAsOf", version).load(str(root))
    counted = df.groupBy(input_file_name().alias("f")).count().collect()
    return {
        unquote(urlsplit(r["f"]).path) if r["f"].startswith("file:") else r["f"]: r["count"] for r in counted
    }


def live_rows_per_file(state: TableState) -> dict[str, int]:
    rows = {
        loc: f.num_records - (f.deletion_vector.cardinality if f.deletion_vector else 0)
        for loc, f in state.files.items()
    }
    return {loc: n for loc, n in rows.items() if n > 0}


def delta_rs_view(root: Path, version: int) -> tuple[set[str], dict[str, int]]:
    table = deltalake.DeltaTable(str(root), version=version)
    dvs = pa.table(table.deletion_vectors()).to_pylist()
    deleted = {unquote(urlsplit(r["filepath"]).path): r["selection_vector"].count(False) for r in dvs}
    # delta-rs URL-encodes the table root (only) in file_uris(); undo that for the comparison.
    encoded_root = quote(str(root))
    files = {
        str(root) + uri[len(encoded_root) :] if uri.startswith(encoded_root) else uri
        for uri in table.file_uris()
    }
    return files, deleted


@pytest.mark.parametrize("name", ["classic", "v2"])
def test_every_version_matches_delta_rs_and_paths_exist(tables: dict[str, Path], name: str) -> None:
    root = tables[name]
    table = DeltaTable(root)
    assert (table.oldest_version(), table.latest_version()) == (0, LATEST[name])
    for version in range(LATEST[name] + 1):
        state = table.state(version)
        files, deleted = delta_rs_view(root, version)
        assert set(state.files) == files, version
        assert {
            loc: f.deletion_vector.cardinality for loc, f in state.files.items() if f.deletion_vector
        } == deleted
        assert all(Path(loc).is_file() for loc in state.files), version
    partition_dirs = {Path(loc).parent.name for loc in table.state(0).files}
    assert partition_dirs == {"p=a b", "p=a%25b c", "p=x&y%3Dz", "p=%2525", "p=é ü", "p=plain"}
    assert {f.partition_values["p"] for f in table.state(0).files.values()} == set(PARTITION_VALUES)


def test_checkpoint_kinds_written(tables: dict[str, Path]) -> None:
    classic = {p.name for p in (tables["classic"] / "_delta_log").iterdir()}
    assert f"{2:020d}.checkpoint.parquet" in classic
    assert sum(n.startswith(f"{4:020d}.checkpoint.0000000001.") for n in classic) == 1
    assert sum(n.startswith(f"{4:020d}.checkpoint.") and n.endswith(".parquet") for n in classic) > 1
    v2_log = tables["v2"] / "_delta_log"
    assert any(p.name.startswith(f"{2:020d}.checkpoint.") and p.suffix == ".json" for p in v2_log.iterdir())
    assert [p for p in (v2_log / "_sidecars").iterdir() if p.suffix == ".parquet"]


@pytest.mark.parametrize("name", ["classic", "v2"])
def test_without_early_commits_matches_delta_spark(
    spark, tables: dict[str, Path], tmp_path: Path, name: str
) -> None:
    oldest, latest = OLDEST[name], LATEST[name]
    root = without_early_commits(tables[name], tmp_path / f"{name} trimmed", oldest)
    table = DeltaTable(root)
    assert (table.oldest_version(), table.latest_version()) == (oldest, latest)
    for version in (oldest, latest):
        assert live_rows_per_file(table.state(version)) == spark_live_rows_per_file(spark, root, version), (
            version
        )
    whole, last = assert_changes_match_states(table, oldest, latest)
    # Nothing before the oldest version survives: its change adds the whole state.
    assert (whole.removed, whole.dv_changed) == ([], [])
    assert {f.location for f in whole.added} == set(table.state(oldest).files)
    assert whole.operation == ("WRITE" if name == "classic" else "DELETE")
    if name == "classic":
        assert len(last.dv_changed) == DV_UPDATES[name][latest]
    else:
        assert last.operation.startswith("REORG") and not last.data_change
        assert last.removed and all(f.deletion_vector for f in last.removed) and last.added


@pytest.mark.parametrize("name", ["classic", "v2"])
def test_changes_classify_spark_deletes_as_dv_updates(tables: dict[str, Path], name: str) -> None:
    table = DeltaTable(tables[name])
    changes = assert_changes_match_states(table, 0, LATEST[name])
    for version, updated in DV_UPDATES[name].items():
        change = changes[version]
        assert (change.added, change.removed, change.operation, change.data_change) == (
            [],
            [],
            "DELETE",
            True,
        )
        assert len(change.dv_changed) == updated
        assert all(before.location == after.location for before, after in change.dv_changed)
