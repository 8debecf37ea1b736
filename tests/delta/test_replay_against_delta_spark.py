"""dv_assets.mirror.delta on tables Delta Spark writes: escaped partition paths, classic, multi-part and V2
checkpoints, and logs whose early commits were cleaned up. Delta Spark and delta-rs are the oracles.

Two tables are built once per module (Spark jobs are the cost here):
- `classic`: partitioned by a string with spaces, `%`, `&`, `=` and non-ASCII in its values, DVs,
  checkpointInterval=2; the checkpoint at v4 is written multi-part (checkpoint.partSize=1).
- `v2`: the same data with `delta.checkpointPolicy=v2` (a JSON top-level checkpoint and sidecars).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dv_assets.mirror.delta.replay import DeltaTable
from tests.helpers.delta_histories import PARTITION_VALUES, build_classic, build_v2
from tests.helpers.delta_log import assert_changes_match_states, live_rows_per_file, without_early_commits
from tests.helpers.readers import delta_rs_view, spark_live_rows_per_file

pytestmark = pytest.mark.spark


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
