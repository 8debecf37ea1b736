"""The engine's values the platform reports from: a snapshot's totals from its summary, the schema a
snapshot was written with, and the DV findings of a snapshot against Delta's DVs. No Spark."""

from __future__ import annotations

from dv_assets.mirror.dv_findings import compare_dvs
from dv_assets.mirror.iceberg.mirror_table import DeleteFileRow, MirrorTable, Snapshot, SnapshotTotals
from dv_assets.mirror.iceberg.types import Schema


def snapshot(summary: dict[str, str], snapshot_id: int = 1, schema_id: int | None = None) -> Snapshot:
    return Snapshot(snapshot_id, None, 0, summary, schema_id)


def test_live_rows_from_the_summary_or_why_not() -> None:
    totals = snapshot(
        {"total-records": "10", "total-position-deletes": "3", "total-delete-files": "2"}
    ).totals
    assert totals == SnapshotTotals(records=10, position_deletes=3, equality_deletes=None, delete_files=2)
    assert (totals.live_rows, totals.live_rows_problem) == (7, None)

    lacking = SnapshotTotals.of({"total-position-deletes": "3"})
    assert lacking.live_rows is None
    assert lacking.live_rows_problem == "the snapshot summary has no total-records"
    assert SnapshotTotals.of({}).live_rows_problem == (
        "the snapshot summary has no total-records, total-position-deletes"
    )
    equality = SnapshotTotals.of(
        {"total-records": "10", "total-position-deletes": "0", "total-equality-deletes": "4"}
    )
    assert equality.live_rows is None
    assert equality.live_rows_problem == "the snapshot has 4 equality deletes; rows are not countable"
    blank_equality = {"total-records": "1", "total-position-deletes": "0", "total-equality-deletes": ""}
    assert SnapshotTotals.of(blank_equality)
    assert SnapshotTotals.of(blank_equality).live_rows == 1  # an empty total counts as none, not a refusal
    assert snapshot({"added-dvs": "2", "added-delete-files": "5"}).dvs_added == 2
    assert snapshot({"added-delete-files": "5"}).dvs_added == 5
    assert snapshot({}).dvs_added == 0


def test_a_snapshot_keeps_the_schema_it_was_written_with() -> None:
    old = {
        "type": "struct",
        "schema-id": 0,
        "fields": [{"id": 1, "name": "a", "required": False, "type": "int"}],
    }
    new = {
        **old,
        "schema-id": 1,
        "fields": [*old["fields"], {"id": 2, "name": "b", "required": False, "type": "int"}],
    }
    old, new = Schema.from_json(old), Schema.from_json(new)  # MirrorTable holds typed schemas
    first, second, unknown = snapshot({}, 1, 0), snapshot({}, 2, 1), snapshot({}, 3, None)
    table = MirrorTable("n.t", "/wh/t", 3, {}, new, 2, (first, second, unknown), {0: old, 1: new})
    assert table.snapshot(1) is first and table.snapshot(9) is None
    assert (table.schema_of(first), table.schema_of(second), table.schema_of(unknown)) == (old, new, new)


def test_dv_findings_name_every_kind_of_problem() -> None:
    fine = compare_dvs({"/d/a", "/d/b"}, [DeleteFileRow("/x/1.puffin", "/d/a", 2)], {"/d/a": 2})
    assert fine.passed and fine.found == {}
    assert (fine.iceberg_delete_files, fine.delta_dvs, fine.iceberg_data_files) == (1, 1, 2)

    findings = compare_dvs(
        {"/d/a", "/d/b"},
        [
            DeleteFileRow("/x/1.puffin", "/d/a", 2),
            DeleteFileRow("/x/2.puffin", "/d/a", 1),  # a second DV for /d/a
            DeleteFileRow("/x/3.parquet", None, 4),  # a delete file for no one data file
            DeleteFileRow("/x/4.puffin", "/d/gone", 1),  # a data file not in the snapshot
        ],
        {"/d/a": 2, "/d/b": 1},
    )
    assert not findings.passed
    assert findings.found == {
        "data files with more than one DV": ("/d/a (2)",),
        "delete files without a referenced data file": ("/x/3.parquet",),
        "DVs of data files not live in the snapshot": ("/d/gone",),
        "Delta DVs missing in Iceberg": ("/d/b",),
        "Iceberg DVs Delta does not have": ("/d/gone",),
        "cardinality differs from Delta's": ("/d/a: Iceberg 3, Delta 2",),
    }
    assert len(findings.problems) == 6  # every kind, the empty ones too


def test_dv_findings_see_one_data_file_whatever_its_spelling() -> None:
    """Iceberg names a file `file:/d/a` (or `/d/a` in an older mirror), Delta's replay `/d/a`: the same file.
    But a DV must name the data file exactly as it is live (readers match by string)."""
    uri = compare_dvs({"file:/d/a"}, [DeleteFileRow("file:/x/1.puffin", "file:/d/a", 2)], {"/d/a": 2})
    assert uri.passed
    findings = compare_dvs(
        {"/d/a"},
        [DeleteFileRow("file:/x/1.puffin", "/d/a", 1), DeleteFileRow("file:/x/2.puffin", "file:/d/a", 1)],
        {"/d/a": 2},
    )
    assert findings.found == {
        "data files with more than one DV": ("/d/a (2)",),
        "DVs of data files not live in the snapshot": ("file:/d/a",),
    }
