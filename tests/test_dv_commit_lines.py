"""A commit's DVs cross to Iceberg Java in compact lines (`ContentFileBatch.stageDeletionVectors`), every
other content file as `ContentFileParser` JSON: both must give Iceberg the same delete files."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dv_assets.mirror.iceberg.content_files import DeleteFile
from dv_assets.mirror.iceberg.java import (
    DV_LINES_FILE,
    IcebergJava,
    _split_dvs,
    _write_content_file_lines,
    _write_dv_lines,
)
from dv_assets.mirror.iceberg.mirror_table import CommitRequest
from dv_assets.mirror.sync import sync_table

pytestmark = pytest.mark.spark
TABLE = "dv-partitioned-with-checkpoint"


def _by_field_id(dv: DeleteFile, field_ids: list[int]) -> DeleteFile:
    """The DV with its partition as a {field id: value} object (ContentFileParser reads both forms)."""
    assert isinstance(dv.partition, tuple) and len(dv.partition) == len(field_ids)
    return dataclasses.replace(
        dv, partition={str(i): v for i, v in zip(field_ids, dv.partition, strict=True)}
    )


def test_dv_lines_stage_the_delete_files_their_json_stages(spark, copy_fixture, tmp_path: Path) -> None:
    """The current DVs of a partitioned v3 mirror removed, and each re-added at another Puffin path (as a
    replacing version does), staged once through each route and applied (manifests written, nothing
    committed): the snapshots' added and removed delete files print the same ContentFileParser JSON."""
    root = copy_fixture(TABLE)
    name = "dvlines.partitioned"
    sync_table(spark, root, name, format_version=3)
    iceberg = IcebergJava(spark)
    current = list(iceberg.delete_files_by_data_file(name).values())
    assert len(current) >= 2 and all(dv.content_offset is not None for dv in current)
    assert any(dv.partition for dv in current), "the fixture's DVs should be in partitions"
    table = iceberg._require(name)
    spec, io = table.spec(), table.io()
    field_ids = [int(f.fieldId()) for f in spec.fields()]
    # Removed as Iceberg printed them (a list in spec order), added in the other form Iceberg reads.
    replacing = tuple(
        dataclasses.replace(_by_field_id(dv, field_ids), path=dv.path.replace(".puffin", "-next.puffin"))
        for dv in current
    )
    request = CommitRequest(
        delta_version=0, summary={}, add_delete_files=replacing, remove_delete_files=tuple(current)
    )
    parser = spark._jvm.org.apache.iceberg.ContentFileParser

    def staged(as_lines: bool) -> tuple[list[str], list[str]]:
        # As the mirror stages a version: validated from the snapshot it was planned on.
        row_delta = table.newRowDelta().validateFromSnapshot(table.currentSnapshot().snapshotId())
        path = tmp_path / ("lines" if as_lines else "json") / "content-files.jsonl"
        path.parent.mkdir()
        if as_lines:
            add, _ = _split_dvs(request.add_delete_files)
            remove, _ = _split_dvs(request.remove_delete_files)
            assert len(add) == len(remove) == len(current)
            dv_path = path.with_name(DV_LINES_FILE)
            count = _write_dv_lines((("remove-delete", remove), ("add-delete", add)), dv_path)
            assert iceberg._batch.stageDeletionVectors(row_delta, str(dv_path), spec) == count
        else:
            count = _write_content_file_lines(request, path)
            assert iceberg._batch.stage(row_delta, str(path), spec) == count
        assert count == 2 * len(current)
        snapshot = row_delta.apply()
        added = sorted(str(parser.toJson(f, spec)) for f in snapshot.addedDeleteFiles(io))
        removed = sorted(str(parser.toJson(f, spec)) for f in snapshot.removedDeleteFiles(io))
        return added, removed

    json_added, json_removed = staged(as_lines=False)
    lines_added, lines_removed = staged(as_lines=True)
    assert len(json_added) == len(json_removed) == len(current)
    assert lines_added == json_added
    assert lines_removed == json_removed
    assert all("-next.puffin" in line for line in lines_added)


@pytest.mark.parametrize(
    ("puffin", "data_file"),
    [
        ("/t/a.puffin", "/t/data\nfile.parquet"),
        ("/t/a.puffin", "/t/data\rfile.parquet"),
        ("/t/a\n.puffin", "/t/data.parquet"),
        ("/t/a\r.puffin", "/t/data.parquet"),
    ],
)
def test_a_path_with_a_line_break_goes_as_json(puffin: str, data_file: str) -> None:
    dv = DeleteFile(puffin, "puffin", (), 10, 1, data_file, 4, 6)
    other = DeleteFile("/t/a.puffin", "puffin", (), 10, 1, "/t/data.parquet", 4, 6)
    parquet = dataclasses.replace(
        other, file_format="parquet", content_offset=None, content_size_in_bytes=None
    )
    assert _split_dvs((dv, other, parquet)) == ([other], (dv, parquet))


def test_dv_lines_name_each_puffin_file_once(tmp_path: Path) -> None:
    first = DeleteFile("/t/a.puffin", "puffin", (), 100, 3, "/t/x.parquet", 4, 20)
    second = dataclasses.replace(first, referenced_data_file="/t/y\tz.parquet", content_offset=24)
    elsewhere = dataclasses.replace(first, path="/t/b.puffin", partition=("p", 1))
    path = tmp_path / DV_LINES_FILE
    assert _write_dv_lines((("add-delete", [first, elsewhere, second]),), path) == 3
    assert path.read_text().splitlines() == [
        "puffin\t0\t100\t/t/a.puffin",
        "add-delete\t4\t20\t3\t[]\t/t/x.parquet",
        "add-delete\t24\t20\t3\t[]\t/t/y\tz.parquet",
        "puffin\t0\t100\t/t/b.puffin",
        'add-delete\t4\t20\t3\t["p",1]\t/t/x.parquet',
    ]
