"""Content files cross to Iceberg Java in one line format (`iceberg/content_file_lines.py`, read by
`ContentFileBatch.stage`): a DV in its short form, any content file as `ContentFileParser` JSON (the
fallback). Both forms must give Iceberg the same delete files."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from pyspark.errors.exceptions.captured import IllegalArgumentException

from dv_assets.mirror.iceberg.content_file_lines import (
    ADD_DATA,
    ADD_DELETE,
    PUFFIN_LINE,
    REMOVE_DATA,
    REMOVE_DELETE,
    split_short_dvs,
    write_content_files,
)
from dv_assets.mirror.iceberg.content_files import DataFile, DeleteFile
from dv_assets.mirror.iceberg.java import IcebergJava
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

    def staged(short_dvs: bool) -> tuple[list[str], list[str]]:
        # As the mirror stages a version: validated from the snapshot it was planned on.
        row_delta = table.newRowDelta().validateFromSnapshot(table.currentSnapshot().snapshotId())
        path = tmp_path / f"short-{short_dvs}.lines"
        with path.open("w") as out:
            count = write_content_files(out, request, short_dvs=short_dvs)
        lines = path.read_text().splitlines()
        assert any(line.startswith("puffin\t") for line in lines) == short_dvs
        assert sum(line.split("\t", 1)[1].startswith("{") for line in lines) == (0 if short_dvs else count)
        assert iceberg._batch.stage(row_delta, str(path), spec) == count
        assert count == 2 * len(current)
        snapshot = row_delta.apply()
        added = sorted(str(parser.toJson(f, spec)) for f in snapshot.addedDeleteFiles(io))
        removed = sorted(str(parser.toJson(f, spec)) for f in snapshot.removedDeleteFiles(io))
        return added, removed

    json_added, json_removed = staged(short_dvs=False)
    lines_added, lines_removed = staged(short_dvs=True)
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
    assert split_short_dvs((dv, other, parquet)) == ([other], [dv, parquet])


def _lines(request: CommitRequest, tmp_path: Path, **options: bool) -> tuple[int, list[str]]:
    path = tmp_path / "lines"
    with path.open("w") as out:
        count = write_content_files(out, request, **options)
    return count, path.read_text().splitlines()


def test_dv_lines_name_each_puffin_file_once(tmp_path: Path) -> None:
    first = DeleteFile("/t/a.puffin", "puffin", (), 100, 3, "/t/x.parquet", 4, 20)
    second = dataclasses.replace(first, referenced_data_file="/t/y\tz.parquet", content_offset=24)
    elsewhere = dataclasses.replace(first, path="/t/b.puffin", partition=("p", 1))
    request = CommitRequest(delta_version=1, summary={}, add_delete_files=(first, elsewhere, second))
    assert _lines(request, tmp_path) == (
        3,
        [
            "puffin\t0\t100\t/t/a.puffin",
            "add-delete\t4\t20\t3\t[]\t/t/x.parquet",
            "add-delete\t24\t20\t3\t[]\t/t/y\tz.parquet",
            "puffin\t0\t100\t/t/b.puffin",
            'add-delete\t4\t20\t3\t["p",1]\t/t/x.parquet',
        ],
    )


def test_every_content_file_is_a_line_of_one_format_removals_first(tmp_path: Path) -> None:
    """Removed delete files, removed data files, added data files (unless they go apart), added
    delete files: each `<action> TAB <content file>`, a DV that cannot go short as JSON."""
    data = DataFile("/t/d.parquet", (), 500, 10)
    gone = dataclasses.replace(data, path="/t/gone.parquet")
    dv = DeleteFile("/t/a.puffin", "puffin", (), 100, 3, "/t/d.parquet", 4, 20)
    broken = dataclasses.replace(dv, referenced_data_file="/t/line\nbreak.parquet")
    request = CommitRequest(
        delta_version=2,
        summary={},
        add_data_files=(data,),
        remove_data_files=(gone,),
        add_delete_files=(dv, broken),
        remove_delete_files=(dv,),
    )
    count, lines = _lines(request, tmp_path)
    assert count == 5
    actions = [line.split("\t", 1)[0] for line in lines]
    assert actions == [
        "puffin",
        "remove-delete",
        "remove-data",
        "add-data",
        "puffin",
        "add-delete",
        "add-delete",
    ]
    assert lines[3] == f"add-data\t{data.json_line()}"
    assert json.loads(lines[-1].split("\t", 1)[1]) == broken.to_json()
    assert _lines(request, tmp_path, data_files=False)[0] == 4


def test_the_line_words_are_the_readers_own(spark) -> None:
    """The actions and the `puffin` word are written by Python and read by Java: the same five strings."""
    batch = IcebergJava(spark)._batch
    written = {ADD_DATA, REMOVE_DATA, ADD_DELETE, REMOVE_DELETE, PUFFIN_LINE}
    read = {
        str(getattr(batch, name))
        for name in ("ADD_DATA", "REMOVE_DATA", "ADD_DELETE", "REMOVE_DELETE", "PUFFIN")
    }
    assert len(written) == 5
    assert read == written


@pytest.mark.parametrize(
    ("lines", "refusal"),
    [
        ("add-delete\t4\t20\t3\t[]\t/t/x.parquet", "deletion vector line out of place"),
        ("puffin\t0\t100\t/t/a.puffin\nadd-data\t4\t20\t3\t[]\t/t/x.parquet", "not a data file"),
        ("puffin\t7\t100\t/t/a.puffin", "Puffin line not of partition spec 0"),
        ("replace\t{}", "unknown content file action"),
        ("no action at all", "content file line without an action"),
    ],
)
def test_lines_out_of_the_format_are_refused(spark, tmp_path: Path, lines: str, refusal: str) -> None:
    """Iceberg Java's reader refuses a line it cannot place, naming it; nothing is staged silently."""
    spec = spark._jvm.org.apache.iceberg.PartitionSpec.unpartitioned()
    path = tmp_path / "lines"
    path.write_text(lines + "\n")
    batch = IcebergJava(spark)._batch
    with pytest.raises(IllegalArgumentException, match=refusal):
        batch.stage(None, str(path), spec)
