"""Deletion vectors for the codec, Puffin and DV-sharing tests: every DV the fixtures' commits add (as
`DVTask`s), verified DVs of real Delta files, tasks of a synthetic DV file."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from dv_assets.mirror.dv.reader import DVBlob, DVTask, convert_dv_batch
from testkit.synthetic import z85_encode
from tests.helpers.paths import DELTA_FIXTURES


def fixture_dvs() -> list[tuple[str, int, DVTask]]:
    """(table, version, task) for every `add` with a DV in the fixtures' JSON commits."""
    out = []
    for table in sorted(DELTA_FIXTURES.iterdir()):
        for commit in sorted((table / "_delta_log").glob("*.json")):
            for line in commit.read_text().splitlines():
                add = json.loads(line).get("add") if line.strip() else None
                if not add or not add.get("deletionVector"):
                    continue
                dv = add["deletionVector"]
                stats = json.loads(add.get("stats") or "{}")
                task = DVTask(
                    table_root=str(table),
                    data_file=f"{table}/{add['path']}",
                    storage_type=dv["storageType"],
                    path_or_inline_dv=dv["pathOrInlineDv"],
                    offset=dv.get("offset"),
                    size_in_bytes=dv["sizeInBytes"],
                    cardinality=dv["cardinality"],
                    num_records=stats.get("numRecords"),
                )
                out.append((table.name, int(commit.stem), task))
    return out


def delta_dvs() -> list[DVBlob]:
    """Verified DVs from real Delta files (file-based and inline)."""
    tasks = [
        DVTask(
            str(DELTA_FIXTURES / "table-with-dv-small"),
            "/t/a.parquet",
            "u",
            "vBn[lx{q8@P<9BNH/isA",
            1,
            36,
            2,
            10,
        ),
        DVTask(
            "/unused",
            "/t/b.parquet",
            "i",
            "^Bg9^0rr910000000000iXQKl0rr91000935c8Xg000311onP9",
            None,
            40,
            4,
            10,
        ),
        DVTask(
            str(DELTA_FIXTURES / "with-short-dv"),
            "s3://bucket/c d.parquet",
            "u",
            short_dv_id(),
            1,
            38,
            3,
            10,
        ),
    ]
    return convert_dv_batch(tasks)


def short_dv_id() -> str:
    """The DV path (a `u` DV's prefix and encoded UUID) of the fixture `with-short-dv`."""
    for line in (DELTA_FIXTURES / "with-short-dv" / "_delta_log" / "00000000000000000000.json").open():
        add = json.loads(line).get("add")
        if add and add.get("deletionVector"):
            return add["deletionVector"]["pathOrInlineDv"]
    raise AssertionError("no DV in with-short-dv")


def dv_file_of(table: Path) -> Path:
    """The table's only DV file."""
    [path] = table.glob("deletion_vector_*.bin")
    return path


def dv_task(dv_file: uuid.UUID, offset: int, n: int) -> DVTask:
    """The n-th DV (10 bytes, cardinality 1, at `offset`) in the DV file `dv_file`, of a 5-row data file."""
    return DVTask("/t", f"/t/part-{dv_file}-{n}.parquet", "u", z85_encode(dv_file.bytes), offset, 10, 1, 5)
