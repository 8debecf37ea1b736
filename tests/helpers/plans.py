"""Small hand-written Delta logs and mirror states for the translation's own tests
(tests/mirror/test_plan.py): no Spark, no Iceberg."""

from __future__ import annotations

import json
from pathlib import Path

from dv_assets.mirror.delta.paths import PathPolicy
from dv_assets.mirror.delta.replay import DeltaTable, VersionChange
from dv_assets.mirror.iceberg.content_files import PUFFIN, DeleteFile
from dv_assets.mirror.plan import MirrorState, VersionPlan, files_to_count, plan_version

FIELDS = [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]
HEADER = [
    {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"]}},
    {
        "metaData": {
            "id": "delta-id",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps({"type": "struct", "fields": FIELDS}),
            "partitionColumns": [],
            "configuration": {"delta.enableDeletionVectors": "true"},
        }
    },
]


def add_action(name: str, rows: int, dv_at: str | None = None, offset: int = 1) -> dict:
    action = {"path": name, "partitionValues": {}, "size": 100, "dataChange": True}
    action["stats"] = json.dumps({"numRecords": rows})
    if dv_at is not None:
        action["deletionVector"] = {
            "storageType": "p",
            "pathOrInlineDv": dv_at,
            "offset": offset,
            "sizeInBytes": 34,
            "cardinality": 2,
        }
    return {"add": action}


def log_changes(root: Path, *commits: list[dict]) -> list[VersionChange]:
    (root / "_delta_log").mkdir(parents=True)
    for version, actions in enumerate(commits):
        lines = [{"commitInfo": {"timestamp": 1000 + version, "operation": "WRITE"}}, *actions]
        (root / "_delta_log" / f"{version:020d}.json").write_text("\n".join(map(json.dumps, lines)) + "\n")
    return list(DeltaTable(root).changes(0, len(commits) - 1))


def plan_of(change: VersionChange, state: MirrorState, root: Path) -> VersionPlan:
    rows = {add.location: add.num_records or 0 for add in files_to_count(change)}
    return plan_version(change, state, rows, PathPolicy.of(str(root)))


def puffin_entry(data_file: str, version: int) -> DeleteFile:
    return DeleteFile(
        path=f"/warehouse/t/data/dvmirror-v{version}.puffin",
        file_format=PUFFIN,
        partition=(),
        file_size_in_bytes=60,
        record_count=2,
        referenced_data_file=data_file,
        content_offset=4,
        content_size_in_bytes=34,
    )


def remove_of(add: dict) -> dict:
    """The `remove` of a live entry written by `add_action` (same path and DV)."""
    live = add["add"]
    return {
        "remove": {"path": live["path"], "deletionVector": live.get("deletionVector"), "dataChange": True}
    }
