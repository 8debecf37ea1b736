"""CREATE OR REPLACE TABLE is the same Delta table under a new metaData.id, not another table.

Delta gives the replaced table a new id, but its log goes on: the next version of the same `_delta_log`,
the versions before still readable by time travel. The mirror follows it and records the new id with
the commit of the version that replaced the table (`identity.check_same_delta_table`, `plan.py`). A log
that started again (a folder deleted and re-created) is still another table and refused, even where its
commits' times match the mirror's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.iceberg.mirror_table import DELTA_TABLE_ID_PROPERTY, CommitOutcome
from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table
from dv_assets.mirror.identity import check_same_delta_table
from dv_assets.mirror.plan import MirrorState
from dv_assets.mirror.sync import sync_table
from tests.helpers.delta_histories import (
    assert_mirrors_match,
    delta_ref,
    fast_spark,
    latest_version,
    mirror_both,
    tblproperties,
)
from tests.helpers.delta_log import SyntheticTable, info, read_commit, write_commit
from tests.helpers.plans import HEADER, add_action, log_changes, plan_of, remove_of
from tests.helpers.readers import pyiceberg_state


def _metadata(table_id: str) -> dict:
    """HEADER's metaData under another id (what CREATE OR REPLACE TABLE writes, schema aside)."""
    (metadata,) = [a["metaData"] for a in HEADER if "metaData" in a]
    return {"metaData": {**metadata, "id": table_id}}


def _mirrored(change, root: Path) -> MirrorState:
    """The state once `change` (the table's first version) is mirrored."""
    state = MirrorState.new(str(root), "/warehouse/t", 3)
    plan = plan_of(change, state, root)
    assert plan.new_table is not None
    return state.after(change.metadata, plan.commit_request([]), CommitOutcome(1, plan.new_table.schema))


def test_a_table_replaced_within_its_log_is_followed_and_its_new_id_recorded(tmp_path: Path) -> None:
    root = tmp_path / "delta"
    a, b, c = add_action("a.parquet", 10), add_action("b.parquet", 5), add_action("c.parquet", 3)
    v0, v1, v2 = log_changes(root, [*HEADER, a], [_metadata("replaced-id"), remove_of(a), b], [c])
    state = _mirrored(v0, root)
    assert state.delta_table_id == "delta-id"

    assert (v1.previous_metadata_id, v1.metadata.id, v1.metadata_changed) == ("delta-id", "replaced-id", True)
    check_same_delta_table(v1, state.delta_table_id, str(root))
    request = plan_of(v1, state, root).commit_request([])
    assert request.properties == {DELTA_TABLE_ID_PROPERTY: "replaced-id"}
    state = state.after(v1.metadata, request, CommitOutcome(2, state.schema))
    assert state.delta_table_id == "replaced-id"

    check_same_delta_table(v2, state.delta_table_id, str(root))
    assert plan_of(v2, state, root).commit_request([]).properties == {}


@pytest.mark.parametrize("with_metadata", [True, False])
def test_a_log_that_started_again_is_another_table(tmp_path: Path, with_metadata: bool) -> None:
    """Every version of a re-created table has its new id: the version after the one mirrored has it
    before its own commit too, whether or not that commit writes a metaData action."""
    root = tmp_path / "delta"
    mirrored, _ = log_changes(root, [*HEADER, add_action("a.parquet", 10)], [])
    state = _mirrored(mirrored, root)
    shutil.rmtree(root)
    header = [a if "metaData" not in a else _metadata("other-id") for a in HEADER]
    second = [_metadata("other-id")] if with_metadata else []
    _, v1 = log_changes(root, [*header, add_action("b.parquet", 5)], [*second, add_action("c.parquet", 3)])
    assert (v1.previous_metadata_id, v1.metadata.id) == ("other-id", "other-id")
    with pytest.raises(MirrorInputError, match="the folder now holds another Delta table") as refused:
        check_same_delta_table(v1, state.delta_table_id, str(root))
    assert (refused.value.table, refused.value.version) == (str(root), 1)


# --- on tables Delta Spark writes ---------------------------------------------------------------------------


@pytest.fixture
def _fast(spark):
    with fast_spark(spark):
        yield


@pytest.mark.spark
@pytest.mark.usefixtures("_fast")
def test_create_or_replace_table_is_mirrored_at_every_version(spark, catalog, tmp_path: Path) -> None:
    """DVs before and after a CREATE OR REPLACE TABLE with another schema (`s` dropped, `t` and `n`
    added) and then a REPLACE TABLE that brings `s` back: every version mirrors exactly in both formats
    (the versions before a replacement keep their columns: the name mapping keeps the table's history),
    the incremental mirror stopping right before and right at each replacing version, and the mirror
    ends with the id of the last replacement.

    On a path, Delta Spark's CREATE OR REPLACE TABLE with a column list refuses a schema other than the
    table's (DELTA_CREATE_TABLE_SCHEME_MISMATCH) and commits nothing with the same one; with AS SELECT
    it replaces the table (a new id), as REPLACE TABLE does."""
    root = tmp_path / "replaced"
    ref = delta_ref(root)
    spark.sql(f"CREATE TABLE {ref} (id INT, s STRING) USING delta TBLPROPERTIES ({tblproperties()})")
    spark.sql(f"INSERT INTO {ref} SELECT /*+ REPARTITION(1) */ id, concat('s', id) FROM range(0, 40) t(id)")
    spark.sql(f"DELETE FROM {ref} WHERE id % 7 = 0")
    spark.sql(
        f"CREATE OR REPLACE TABLE {ref} USING delta TBLPROPERTIES ({tblproperties()}) AS SELECT "
        "/*+ REPARTITION(1) */ CAST(id AS INT) AS id, concat('t', id) AS t, id * 10 AS n "
        "FROM range(0, 30) t(id)"
    )  # 3
    spark.sql(f"DELETE FROM {ref} WHERE id % 4 = 1")
    spark.sql(
        f"REPLACE TABLE {ref} (id INT, s STRING, n BIGINT) USING delta TBLPROPERTIES ({tblproperties()})"
    )
    spark.sql(
        f"INSERT INTO {ref} SELECT /*+ REPARTITION(1) */ id, concat('u', id), id FROM range(0, 20) t(id)"
    )
    spark.sql(f"UPDATE {ref} SET s = concat(s, 'x') WHERE id % 3 = 0")
    latest = latest_version(root)
    assert latest == 7
    ids = {v: a["metaData"]["id"] for v in range(latest + 1) for a in read_commit(root, v) if "metaData" in a}
    assert sorted(ids) == [0, 3, 5] and len(set(ids.values())) == 3, ids

    mirrors = mirror_both(spark, root, "create_or_replace", split_at=[2, 3, 4, 5])
    compared = assert_mirrors_match(
        spark, catalog, root, mirrors, label="CREATE OR REPLACE", pyiceberg_every_version=True
    )
    assert compared == 2 * (latest + 1)
    for m in mirrors:
        table = read_mirror_table(catalog, m.table_name)
        assert table is not None and table.properties[DELTA_TABLE_ID_PROPERTY] == ids[5], m.table_name


@pytest.mark.spark
def test_a_recreated_folder_is_refused_even_with_the_same_commit_times(
    spark, catalog, tmp_path: Path
) -> None:
    """The folder deleted and re-created by a writer whose commits carry the same times as the mirrored
    ones (the synthetic tables' commits all say 1): the version after the mirrored one even writes a
    metaData action, as a CREATE OR REPLACE would, but the log started again: refused, nothing written."""
    root = tmp_path / "recreated"
    first = SyntheticTable(root, rows_per_file=10)
    first.create(1)
    first.delete(first.files, lambda _: [0, 3])
    assert sync_table(spark, root, "replaced.recreated").mirrored_versions == [0, 1]
    before = pyiceberg_state(catalog, "replaced.recreated")

    shutil.rmtree(root)
    second = SyntheticTable(root, rows_per_file=10)
    second.create(1)
    second.append()
    changed = {**second.metadata, "configuration": {**second.metadata["configuration"], "k": "v"}}
    write_commit(root, 2, [info("SET TBLPROPERTIES"), {"metaData": changed}])
    assert json.loads((root / "_delta_log" / f"{1:020d}.json").read_text().splitlines()[0]) == info("WRITE")

    with pytest.raises(MirrorInputError, match="the folder now holds another Delta table") as refused:
        sync_table(spark, root, "replaced.recreated")
    assert (refused.value.table, refused.value.version) == (str(root), 2), refused.value.one_line()
    assert pyiceberg_state(catalog, "replaced.recreated") == before
