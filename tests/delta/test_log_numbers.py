"""Every number of the Delta log that is negative, too large, not an integer or inconsistent with what it
describes is refused, naming the table, the version, the file and the field: never an internal error.

Cases on a copy of `table-with-dv-small` (v1 gives its one data file of 10 rows a DV of 2 positions in a
45-byte DV file), one field of commit 1 changed each, taken through what a sync does before Iceberg
(replay, row counts, the plan, the DVs read and verified on the driver): no Spark. Then the first version
read from a checkpoint, whose JSON stats' numRecords Arrow reads for the whole column at once
(`log.stats_num_records`): refused the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyroaring import BitMap64

from dv_assets.mirror.delta.checkpoint_columns import stats_num_records
from dv_assets.mirror.delta.data_files import record_count
from dv_assets.mirror.delta.paths import PathPolicy
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.dv.codec import check_positions
from dv_assets.mirror.dv.reader import convert_dv_batch
from dv_assets.mirror.errors import InvalidDeletionVectorError, MirrorInputError
from dv_assets.mirror.plan import MirrorState, files_to_count, plan_version
from tests.helpers.delta_log import (
    CHECKPOINT_SCHEMA,
    DELTA_SPARK_CHECKPOINT_SCHEMA,
    PROTOCOL,
    checkpoint_rows,
    info,
    read_commit,
    write_commit,
    write_log,
    write_parquet,
)
from tests.helpers.faults import DATA_NAME, SMALL

LONG_PAST = 2**63  # one past Java's long
INT_PAST = 2**31  # one past Java's int (a DV's offset and sizeInBytes)


def _add(actions: list[dict]) -> dict:
    (add,) = [a["add"] for a in actions if "add" in a]
    return add


def _stats(value: Any) -> Callable[[list[dict]], None]:
    def edit(actions: list[dict]) -> None:
        add = _add(actions)
        add["stats"] = json.dumps({**json.loads(add["stats"]), "numRecords": value})

    return edit


def _field(key: str, value: Any, *, dv: bool = False, action: str = "add") -> Callable[[list[dict]], None]:
    def edit(actions: list[dict]) -> None:
        (target,) = [a[action] for a in actions if action in a]
        (target["deletionVector"] if dv else target)[key] = value

    return edit


# (commit 1 edited, the error's type, what its reason names). The data file has 10 rows; its DV deletes
# 2 positions, 36 bytes at offset 1 of a 45-byte DV file.
CASES: dict[str, tuple[Callable[[list[dict]], None], type[MirrorInputError], str]] = {
    # The outside suite's case: a DV update on a file whose stats say -1 rows (was OverflowError, exit 3).
    "numRecords-negative": (_stats(-1), MirrorInputError, "numRecords is -1"),
    "numRecords-huge": (_stats(LONG_PAST), MirrorInputError, "numRecords is 9223372036854775808"),
    "numRecords-float": (_stats(10.0), MirrorInputError, "numRecords is 10.0"),
    "numRecords-string": (_stats("10"), MirrorInputError, "numRecords is '10'"),
    "numRecords-bool": (_stats(True), MirrorInputError, "numRecords is True"),
    "numRecords-below-dv": (_stats(1), InvalidDeletionVectorError, "cardinality is 2, more than"),
    "size-negative": (_field("size", -1), MirrorInputError, "add.size is -1"),
    "size-huge": (_field("size", LONG_PAST), MirrorInputError, "add.size is 9223372036854775808"),
    "size-float": (_field("size", 635.0), MirrorInputError, "add.size is 635.0"),
    "size-string": (_field("size", "635"), MirrorInputError, "add.size is '635'"),
    "size-bool": (_field("size", True), MirrorInputError, "add.size is True"),
    "remove-size-negative": (_field("size", -1, action="remove"), MirrorInputError, "remove.size is -1"),
    "remove-size-string": (_field("size", "x", action="remove"), MirrorInputError, "remove.size is 'x'"),
    "modificationTime-string": (_field("modificationTime", "x"), MirrorInputError, "modificationTime is"),
    "cardinality-above-numRecords": (
        _field("cardinality", 11, dv=True),
        InvalidDeletionVectorError,
        "cardinality is 11, more than the data file's 10 rows",
    ),
    "cardinality-not-the-blob's": (
        _field("cardinality", 3, dv=True),
        InvalidDeletionVectorError,
        "descriptor's cardinality is 3",
    ),
    "offset-zero": (_field("offset", 0, dv=True), InvalidDeletionVectorError, "the DV at offset 0"),
    "offset-past-the-file": (
        _field("offset", 10, dv=True),
        InvalidDeletionVectorError,
        "the DV at offset 10",
    ),
    "sizeInBytes-past-the-file": (
        _field("sizeInBytes", 100, dv=True),
        InvalidDeletionVectorError,
        "with sizeInBytes 100 needs bytes",
    ),
    "sizeInBytes-not-the-blob's": (
        _field("sizeInBytes", 35, dv=True),
        InvalidDeletionVectorError,
        "descriptor's sizeInBytes is 35",
    ),
}
# A DV descriptor's numbers: negative, past Java's long (cardinality) or int (offset, sizeInBytes), and
# JSON that is not an integer, each refused naming the field and the value as logged.
for _key, _valid, _past in (
    ("cardinality", 2, LONG_PAST),
    ("offset", 1, INT_PAST),
    ("sizeInBytes", 36, INT_PAST),
):
    for _kind, _value in (
        ("negative", -1),
        ("huge", _past),
        ("float", float(_valid)),
        ("string", str(_valid)),
        ("bool", True),
    ):
        CASES[f"{_key}-{_kind}"] = (
            _field(_key, _value, dv=True),
            InvalidDeletionVectorError,
            f"{_key} is {_value!r}",
        )


def _translate(root: Path, version: int) -> None:
    """What a sync does with `version` before Iceberg, on the driver: its change replayed, the row counts
    read, the version planned (as the table's first) and its DVs read and verified. A refusal names the
    table and the version, as the sync's does."""
    (change,) = DeltaTable(root).changes(version, version)
    try:
        rows = {add.location: record_count(add) for add in files_to_count(change)}
        state = MirrorState.new(str(root), str(root.parent / "warehouse"), 3)
        plan = plan_version(change, state, rows, PathPolicy.of(str(root)))
        convert_dv_batch(plan.delete_job.tasks)
    except MirrorInputError as err:
        raise err.at(table=str(root), version=version) from None


def test_the_small_table_translates_as_it_is(copy_fixture) -> None:
    _translate(copy_fixture(SMALL), 1)


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_number_in_a_commit_is_refused_naming_table_version_file_and_field(
    copy_fixture, case: str
) -> None:
    edit, error_type, says = CASES[case]
    root = copy_fixture(SMALL)
    actions = read_commit(root, 1)
    edit(actions)
    write_commit(root, 1, actions)

    with pytest.raises(MirrorInputError) as refused:
        _translate(root, 1)
    err = refused.value
    assert type(err) is error_type, err.one_line()
    assert (err.table, err.version, err.file) == (str(root), 1, str(root / DATA_NAME)), err.one_line()
    assert says in err.reason, err.one_line()
    line = err.one_line()
    assert "\n" not in line and str(root) in line and "version 1" in line and DATA_NAME in line


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        ({"minReaderVersion": "3"}, "protocol.minReaderVersion is '3'"),
        ({"minWriterVersion": -7}, "protocol.minWriterVersion is -7"),
        ({"minReaderVersion": 3.0}, "protocol.minReaderVersion is 3.0"),
    ],
)
def test_a_bad_protocol_version_is_refused_naming_the_commit_and_field(
    copy_fixture, edit: dict, says: str
) -> None:
    root = copy_fixture(SMALL)
    actions = read_commit(root, 0)
    for action in actions:
        if "protocol" in action:
            action["protocol"].update(edit)
    write_commit(root, 0, actions)
    with pytest.raises(MirrorInputError) as refused:
        DeltaTable(root).state(0)
    err = refused.value
    commit = root / "_delta_log" / f"{0:020d}.json"
    assert (err.table, err.version, err.file) == (str(root), 0, str(commit)), err.one_line()
    assert says in err.reason, err.one_line()


def test_a_negative_row_count_never_reaches_the_codec_as_an_overflow() -> None:
    """The bound is checked before pyroaring sees it (`range_cardinality(-1, ...)` overflowed)."""
    with pytest.raises(InvalidDeletionVectorError, match="numRecords is -1"):
        check_positions(BitMap64([0, 3]), expected_cardinality=2, num_records=-1)


# --- the first version from a checkpoint: Arrow's numRecords and the struct stats refuse alike -------------


def _checkpointed(root: Path, add: dict, schema: pa.Schema) -> Path:
    """A checkpoint of version 1 of one add (and the protocol and metadata), commit 2 on top; the commits
    before the checkpoint cleaned up."""
    header = [r for r in checkpoint_rows() if "protocol" in r or "metaData" in r]
    assert [next(iter(r)) for r in header] == ["protocol", "metaData"] and header[0]["protocol"] == PROTOCOL
    if schema is DELTA_SPARK_CHECKPOINT_SCHEMA:
        header[1] = {"metaData": {**header[1]["metaData"], "name": None, "description": None}}
    write_parquet(root / "_delta_log" / f"{1:020d}.checkpoint.parquet", [*header, {"add": add}], schema)
    (root / "_delta_log" / "_last_checkpoint").write_text(json.dumps({"version": 1, "size": 3}))
    return write_log(root, [[info("WRITE")]], first=2)


_CHECKPOINT_ADD = {
    "path": "a.parquet",
    "partitionValues": [],
    "size": 100,
    "modificationTime": 1,
    "dataChange": False,
    "deletionVector": None,
}


@pytest.mark.parametrize(
    ("add", "schema", "says"),
    [
        # JSON stats: read for the whole column by Arrow (the fast path), checked as the text's would be.
        ({"stats": '{"numRecords":-3}'}, DELTA_SPARK_CHECKPOINT_SCHEMA, "add.stats numRecords is -3"),
        # JSON stats Arrow declines (a float): parsed one by one, refused the same.
        ({"stats": '{"numRecords":3.5}'}, DELTA_SPARK_CHECKPOINT_SCHEMA, "add.stats numRecords is 3.5"),
        ({"stats": '{"numRecords":1}', "size": -100}, DELTA_SPARK_CHECKPOINT_SCHEMA, "add.size is -100"),
        # Only the struct form (writeStatsAsJson=false).
        (
            {"stats": None, "stats_parsed": {"numRecords": -3, "minValues": None}},
            CHECKPOINT_SCHEMA,
            "add.stats_parsed.numRecords is -3",
        ),
    ],
)
def test_a_bad_number_in_a_checkpoint_is_refused_as_in_a_commit(
    tmp_path: Path, add: dict, schema: pa.Schema, says: str
) -> None:
    root = _checkpointed(tmp_path / "t", {**_CHECKPOINT_ADD, **add}, schema)
    if add.get("stats") == '{"numRecords":-3}':  # the fast path does read it: the check is AddFile's
        assert stats_num_records(pa.array([add["stats"]], pa.string())) == [-3]
    for read in (lambda: DeltaTable(root).state(1), lambda: list(DeltaTable(root).changes(1, 2))):
        with pytest.raises(MirrorInputError) as refused:
            read()
        err = refused.value
        assert (err.table, err.version, err.file) == (str(root), 1, str(root / "a.parquet")), err.one_line()
        assert says in err.reason, err.one_line()
