"""Delta logs written by hand, without Spark, and checks of log replay against itself.

* actions and commits: `add`, `remove`, `dv`, `info`, `base_commit` (PROTOCOL, METADATA), `write_log`,
  `read_commit`;
* `SyntheticTable`: a table of real Parquet data files and DV files, grown by DELETEs (also the tables
  of `benchmarks/`, which import this module); at a million files its data files can be hard links to a
  few real ones, and it writes Delta Spark's classic checkpoint and cleans up the commits before it;
* checkpoints (classic, multi-part, V2 with sidecars): CHECKPOINT_SCHEMA, `checkpoint_rows`,
  `write_parquet`, `checkpointed_log`;
* replay checks: a range of VersionChanges, applied in order, must give the same file sets as replaying
  each version from scratch (`assert_changes_match_states`); states against delta-rs.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import random
import shutil
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from dv_assets.mirror.delta.actions import AddFile, DeletionVectorDescriptor
from dv_assets.mirror.delta.replay import DeltaTable, TableState, VersionChange
from dv_assets.mirror.dv.codec import encode_blob, z85_encode
from dv_assets.mirror.errors import MirrorInputError
from tests.helpers.readers import delta_rs_deleted_rows, delta_rs_files

# --- actions and commits ---------------------------------------------------------------------------------

PROTOCOL = {
    "minReaderVersion": 3,
    "minWriterVersion": 7,
    "readerFeatures": ["deletionVectors"],
    "writerFeatures": ["deletionVectors"],
}
SCHEMA = json.dumps(
    {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
)
METADATA = {
    "id": "t1",
    "format": {"provider": "parquet", "options": {}},
    "schemaString": SCHEMA,
    "partitionColumns": [],
    "configuration": {"delta.enableDeletionVectors": "true"},
    "createdTime": 1,
}


def dv(name: str, cardinality: int = 1) -> dict[str, Any]:
    return {
        "storageType": "u",
        "pathOrInlineDv": name,
        "offset": 1,
        "sizeInBytes": 34,
        "cardinality": cardinality,
    }


def add(
    path: str, dv_: dict | None = None, *, data_change: bool = True, rows: int | None = 10, size: int = 100
) -> dict:
    action: dict[str, Any] = {
        "path": path,
        "partitionValues": {},
        "size": size,
        "modificationTime": 1,
        "dataChange": data_change,
    }
    if rows is not None:
        action["stats"] = json.dumps({"numRecords": rows})
    if dv_ is not None:
        action["deletionVector"] = dv_
    return {"add": action}


def remove(path: str, dv_: dict | None = None, *, data_change: bool = True, size: int | None = None) -> dict:
    """A remove; with `size`, the extended file metadata Delta writes (partition values and size) too."""
    action: dict[str, Any] = {"path": path, "deletionTimestamp": 2, "dataChange": data_change}
    if size is not None:
        action |= {"partitionValues": {}, "size": size}
    if dv_ is not None:
        action["deletionVector"] = dv_
    return {"remove": action}


def info(operation: str) -> dict:
    return {"commitInfo": {"timestamp": 1, "operation": operation}}


def write_commit(root: Path, version: int, actions: list[dict]) -> None:
    """`_delta_log/<version>.json`: one action per line, visible whole or not at all (written aside, then
    renamed, as Delta's local log store does), so that a reader polling the log never sees half of it."""
    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    temporary = log / f".{version:020d}.json.{uuid.uuid4()}.tmp"
    temporary.write_text("".join(json.dumps(a) + "\n" for a in actions))
    temporary.replace(log / f"{version:020d}.json")


def write_log(root: Path, commits: list[list[dict]], first: int = 0) -> Path:
    """The commits as versions `first`, `first` + 1, …; returns `root`."""
    for version, actions in enumerate(commits, start=first):
        write_commit(root, version, actions)
    return root


def read_commit(root: Path, version: int) -> list[dict]:
    """The actions of `_delta_log/<version>.json`, in order."""
    lines = (root / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def set_commit_time(root: Path, version: int, timestamp_ms: int) -> None:
    """Give a commit (of a copied fixture, say) a known commitInfo timestamp: the lag is measured from it."""
    actions = read_commit(root, version)
    (commit_info,) = [a["commitInfo"] for a in actions if "commitInfo" in a]
    assert "inCommitTimestamp" not in commit_info  # the timestamp the lag is read from
    commit_info["timestamp"] = timestamp_ms
    write_commit(root, version, actions)


def base_commit(*adds: dict) -> list[dict]:
    return [info("WRITE"), {"protocol": PROTOCOL}, {"metaData": METADATA}, *adds]


# --- synthetic tables: real data files and DV files (the benchmarks' tables too) ---------------------------


HARD_LINKS_PER_FILE = 60_000  # ext4 allows 65,000 names per inode
CHECKPOINT_BATCH = 100_000  # adds per row group of a written checkpoint


class SyntheticTable:
    """A Delta table of identical Parquet files (one template's bytes, a column `id` of `rows_per_file`
    rows), with DV files laid out as Delta's PROTOCOL.md says, written without Spark. `benchmarks/` builds
    its tables with it."""

    def __init__(self, root: Path, rows_per_file: int) -> None:
        self.root = root
        self.rows = rows_per_file
        (root / "_delta_log").mkdir(parents=True)
        template = root / "template.parquet"
        pq.write_table(pa.table({"id": pa.array(range(rows_per_file), pa.int64())}), template)
        self.content = template.read_bytes()
        template.unlink()
        self.version = -1
        self.files: list[str] = []
        self.dvs: dict[str, dict] = {}  # data file -> its current DV descriptor
        self.metadata: dict = {}
        self._link_target: Path | None = None  # the real file new hard links name, and its link count
        self._links = 0

    def _commit(self, actions: list[dict]) -> int:
        self.version += 1
        write_commit(self.root, self.version, actions)
        return self.version

    def _add(self, name: str, dv_: dict | None) -> dict:
        return add(name, dv_, rows=self.rows, size=len(self.content))

    def _new_file(self, *, linked: bool = False) -> dict:
        """A new data file of the template's bytes; `linked`: a hard link to an earlier such file (the
        same bytes and size, no inode or data block of its own), at most HARD_LINKS_PER_FILE names each."""
        name = f"part-{uuid.uuid4()}.parquet"
        path = self.root / name
        if linked and self._link_target is not None and self._links < HARD_LINKS_PER_FILE:
            os.link(self._link_target, path)
            self._links += 1
        else:
            path.write_bytes(self.content)
            if linked:
                self._link_target, self._links = path, 1
        self.files.append(name)
        return self._add(name, None)

    def create(self, files: int, *, real: int | None = None) -> int:
        """Version 0: the protocol and metadata (DVs enabled) and `files` data files; with `real`, only
        the first `real` have bytes of their own and the others are hard links (a bench's million files;
        give DVs only to real ones)."""
        self.metadata = {**METADATA, "id": str(uuid.uuid4())}
        actions = [info("WRITE"), {"protocol": PROTOCOL}, {"metaData": self.metadata}]
        adds = [self._new_file(linked=real is not None and i >= real) for i in range(files)]
        return self._commit(actions + adds)

    def append(self, files: int = 1) -> int:
        """A blind append (WRITE) of `files` new data files; its version."""
        return self._commit([info("WRITE"), *(self._new_file() for _ in range(files))])

    def delete(
        self, names: Iterable[str], positions: Callable[[int], Iterable[int]], *, append: int = 0
    ) -> tuple[int, int]:
        """A DELETE giving each named file (the i-th) the DV of `positions(i)`, all in one DV file, and
        adding `append` new files; the version and the DV file's bytes."""
        dv_id = uuid.uuid4()
        dv_bytes = bytearray(b"\x01")
        actions: list[dict] = [info("DELETE")]
        for index, name in enumerate(names):
            deleted = sorted(positions(index))
            blob = encode_blob(deleted)
            descriptor = {
                "storageType": "u",
                "pathOrInlineDv": z85_encode(dv_id.bytes),
                "offset": len(dv_bytes),
                "sizeInBytes": len(blob) - 8,
                "cardinality": len(deleted),
            }
            dv_bytes += blob
            actions += [remove(name, self.dvs.get(name), size=len(self.content)), self._add(name, descriptor)]
            self.dvs[name] = descriptor
        (self.root / f"deletion_vector_{dv_id}.bin").write_bytes(bytes(dv_bytes))
        actions += [self._new_file() for _ in range(append)]
        return self._commit(actions), len(dv_bytes) - 1

    def write_checkpoint(self) -> Path:
        """The classic single-file checkpoint of the current version, as Delta Spark writes it
        (DELTA_SPARK_CHECKPOINT_SCHEMA: protocol, metaData, then one `add` per live file with dataChange
        false, its stats JSON and its DV), and `_last_checkpoint` naming it. The adds are written
        column by column, CHECKPOINT_BATCH rows per row group, so a million files costs seconds."""
        log = self.root / "_delta_log"
        path = log / f"{self.version:020d}.checkpoint.parquet"
        schema = DELTA_SPARK_CHECKPOINT_SCHEMA
        meta = {
            **self.metadata,
            "format": {"provider": "parquet", "options": []},
            "configuration": list(self.metadata["configuration"].items()),
        }
        with pq.ParquetWriter(path, schema) as writer:
            writer.write_table(pa.Table.from_pylist([{"protocol": PROTOCOL}, {"metaData": meta}], schema))
            for first in range(0, len(self.files), CHECKPOINT_BATCH):
                writer.write_table(self._checkpoint_adds(self.files[first : first + CHECKPOINT_BATCH]))
        rows = len(self.files) + 2
        last = {"version": self.version, "size": rows, "sizeInBytes": path.stat().st_size}
        (log / "_last_checkpoint").write_text(json.dumps(last | {"numOfAddFiles": len(self.files)}))
        return path

    def _checkpoint_adds(self, names: list[str]) -> pa.Table:
        schema = DELTA_SPARK_CHECKPOINT_SCHEMA
        add_type = schema.field("add").type
        count = len(names)
        columns = {
            "path": pa.array(names, pa.string()),
            "partitionValues": pa.array([[]] * count, add_type.field("partitionValues").type),
            "size": pa.array([len(self.content)] * count, pa.int64()),
            "modificationTime": pa.array([1] * count, pa.int64()),
            "dataChange": pa.array([False] * count, pa.bool_()),
            "tags": pa.nulls(count, add_type.field("tags").type),
            "deletionVector": pa.array(
                [None if n not in self.dvs else {**self.dvs[n], "maxRowIndex": None} for n in names],
                DV_TYPE,
            ),
            "stats": pa.array([json.dumps({"numRecords": self.rows})] * count, pa.string()),
        }
        adds = pa.StructArray.from_arrays(list(columns.values()), fields=list(add_type))
        arrays = [adds if f.name == "add" else pa.nulls(count, f.type) for f in schema]
        return pa.Table.from_arrays(arrays, schema=schema)

    def clean_up_log(self) -> None:
        """Delete the commits before the newest checkpoint, as Delta's log cleanup does once they pass
        the log retention: the table's oldest version is then the checkpoint's."""
        log = self.root / "_delta_log"
        newest = max(int(p.name.split(".")[0]) for p in log.glob("*.checkpoint.parquet"))
        for version in range(newest):
            (log / f"{version:020d}.json").unlink(missing_ok=True)


# --- checkpoints -----------------------------------------------------------------------------------------

DV_TYPE = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
        ("maxRowIndex", pa.int64()),
    ]
)
CHECKPOINT_SCHEMA = pa.schema(
    [
        ("txn", pa.struct([("appId", pa.string()), ("version", pa.int64())])),
        (
            "add",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("partitionValues", pa.map_(pa.string(), pa.string())),
                    ("size", pa.int64()),
                    ("modificationTime", pa.int64()),
                    ("dataChange", pa.bool_()),
                    ("tags", pa.map_(pa.string(), pa.string())),
                    ("deletionVector", DV_TYPE),
                    ("stats", pa.string()),
                    (
                        "stats_parsed",
                        pa.struct(
                            [
                                ("numRecords", pa.int64()),
                                (
                                    "minValues",
                                    pa.struct([("id", pa.int64()), ("ts", pa.timestamp("us", "UTC"))]),
                                ),
                            ]
                        ),
                    ),
                ]
            ),
        ),
        (
            "remove",
            pa.struct([("path", pa.string()), ("dataChange", pa.bool_()), ("deletionVector", DV_TYPE)]),
        ),
        (
            "metaData",
            pa.struct(
                [
                    ("id", pa.string()),
                    (
                        "format",
                        pa.struct(
                            [("provider", pa.string()), ("options", pa.map_(pa.string(), pa.string()))]
                        ),
                    ),
                    ("schemaString", pa.string()),
                    ("partitionColumns", pa.list_(pa.string())),
                    ("configuration", pa.map_(pa.string(), pa.string())),
                    ("createdTime", pa.int64()),
                ]
            ),
        ),
        (
            "protocol",
            pa.struct(
                [
                    ("minReaderVersion", pa.int32()),
                    ("minWriterVersion", pa.int32()),
                    ("readerFeatures", pa.list_(pa.string())),
                    ("writerFeatures", pa.list_(pa.string())),
                ]
            ),
        ),
    ]
)


_STRING_MAP = pa.map_(pa.string(), pa.string())
# The schema of the classic checkpoints Delta Spark writes (that of the shared fixtures'
# basic-dv-with-checkpoint): stats as JSON only, removes with their extended file metadata.
DELTA_SPARK_CHECKPOINT_SCHEMA = pa.schema(
    [
        ("txn", pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])),
        (
            "add",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("partitionValues", _STRING_MAP),
                    ("size", pa.int64()),
                    ("modificationTime", pa.int64()),
                    ("dataChange", pa.bool_()),
                    ("tags", _STRING_MAP),
                    ("deletionVector", DV_TYPE),
                    ("stats", pa.string()),
                ]
            ),
        ),
        (
            "remove",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("deletionTimestamp", pa.int64()),
                    ("dataChange", pa.bool_()),
                    ("extendedFileMetadata", pa.bool_()),
                    ("partitionValues", _STRING_MAP),
                    ("size", pa.int64()),
                    ("deletionVector", DV_TYPE),
                ]
            ),
        ),
        (
            "metaData",
            pa.struct(
                [
                    ("id", pa.string()),
                    ("name", pa.string()),
                    ("description", pa.string()),
                    ("format", pa.struct([("provider", pa.string()), ("options", _STRING_MAP)])),
                    ("schemaString", pa.string()),
                    ("partitionColumns", pa.list_(pa.string())),
                    ("configuration", _STRING_MAP),
                    ("createdTime", pa.int64()),
                ]
            ),
        ),
        ("protocol", CHECKPOINT_SCHEMA.field("protocol").type),
    ]
)


def checkpoint_add(path: str, dv_: dict | None, rows: int) -> dict:
    return {
        "add": {
            "path": path,
            "partitionValues": [],
            "size": 100,
            "modificationTime": 1,
            "dataChange": False,
            "deletionVector": None if dv_ is None else {**dv_, "maxRowIndex": 5},
            "stats": None,  # writeStatsAsJson=false: only stats_parsed
            "stats_parsed": {
                "numRecords": rows,
                "minValues": {"id": 0, "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)},
            },
        }
    }


def checkpoint_rows() -> list[dict]:
    meta = {
        **METADATA,
        "format": {"provider": "parquet", "options": []},
        "configuration": list(METADATA["configuration"].items()),
    }
    return [
        {"protocol": PROTOCOL},
        {"metaData": meta},
        {"txn": {"appId": "x", "version": 1}},
        checkpoint_add("a.parquet", dv("dv1", 2), 10),
        checkpoint_add("b%20c.parquet", None, 5),
        {"remove": {"path": "gone.parquet", "dataChange": True, "deletionVector": None}},
    ]


def write_parquet(path: Path, rows: list[dict], schema: pa.Schema = CHECKPOINT_SCHEMA) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def checkpointed_log(tmp_path: Path) -> Path:
    """Commits 0..1 deleted; checkpoint at 1 (written by the test); commit 2 on top."""
    return write_log(
        tmp_path,
        [[info("DELETE"), remove("a.parquet", dv("dv1", 2)), add("a.parquet", dv("dv9", 3))]],
        first=2,
    )


def assert_checkpoint_state(root: Path) -> None:
    table = DeltaTable(root)
    assert (table.oldest_version(), table.latest_version()) == (1, 2)
    state = table.state(1)
    files = {Path(loc).name: f for loc, f in state.files.items()}
    assert sorted(files) == ["a.parquet", "b c.parquet"]
    assert files["a.parquet"].deletion_vector == DeletionVectorDescriptor("u", "dv1", 1, 34, 2)
    assert files["b c.parquet"].num_records == 5
    assert files["a.parquet"].parsed_stats == {
        "numRecords": 10,
        "minValues": {"id": 0, "ts": "2024-01-02T03:04:05.678Z"},
    }
    assert state.metadata.configuration == METADATA["configuration"] and state.protocol.reader_features == {
        "deletionVectors"
    }
    first, second = table.changes(1, 2)
    assert names(first.added) == ["a.parquet", "b c.parquet"] and first.commit_info == {}
    assert [(b.dv_unique_id, a.dv_unique_id) for b, a in second.dv_changed] == [("udv1@1", "udv9@1")]


# --- replay checks -----------------------------------------------------------------------------------


def dv_ids(files: dict[str, AddFile]) -> dict[str, str | None]:
    return {loc: f.dv_unique_id for loc, f in files.items()}


def comparable(files: dict[str, AddFile]) -> dict[str, AddFile]:
    """Checkpoints rewrite dataChange to false; everything else about a live file must agree."""
    return {loc: dataclasses.replace(f, data_change=False) for loc, f in files.items()}


def replay_changes(changes: list[VersionChange], files: dict[str, AddFile]) -> dict[int, dict[str, AddFile]]:
    """Apply VersionChanges to a copy of `files`; the file set after each version."""
    files = dict(files)
    after: dict[int, dict[str, AddFile]] = {}
    for change in changes:
        for f in change.removed:
            assert files.pop(f.location) == f, "removed must be the file as it was live before"
        for before, new in change.dv_changed:
            assert files[before.location] == before
            files[before.location] = new
        for f in change.added:
            assert f.location not in files
            files[f.location] = f
        after[change.version] = dict(files)
    return after


def assert_changes_match_states(table: DeltaTable, start: int, end: int) -> list[VersionChange]:
    changes = list(table.changes(start, end))
    assert [c.version for c in changes] == list(range(start, end + 1))
    base = {} if start == table.oldest_version() else table.state(start - 1).files
    for version, files in replay_changes(changes, base).items():
        state = table.state(version)
        assert dv_ids(files) == dv_ids(state.files), f"version {version}"
        assert comparable(files) == comparable(state.files), f"version {version}"
    for change in changes:
        state = table.state(change.version)
        assert (change.protocol, change.metadata) == (state.protocol, state.metadata)
    return changes


def names(files) -> list[str]:
    return sorted(Path(f.location).name for f in files)


def live_rows_per_file(state: TableState) -> dict[str, int]:
    """Data file → rows left by its DV (files with none left are absent), from the log alone."""
    rows = {
        loc: f.num_records - (f.deletion_vector.cardinality if f.deletion_vector else 0)
        for loc, f in state.files.items()
    }
    return {loc: n for loc, n in rows.items() if n > 0}


def without_early_commits(root: Path, dest: Path, oldest: int) -> Path:
    """A copy of the table whose commits before `oldest` (and their checksums) were cleaned up."""
    shutil.copytree(root, dest)
    for v in range(oldest):
        for name in (f"{v:020d}.json", f".{v:020d}.json.crc", f"{v:020d}.crc", f".{v:020d}.crc.crc"):
            (dest / "_delta_log" / name).unlink(missing_ok=True)
    return dest


def assert_matches_delta_rs(table: DeltaTable, root: Path | str, version: int) -> TableState:
    """The state at `version` has delta-rs's files and, per file with a DV, its deleted-row count."""
    state = table.state(version)
    assert state.version == version
    assert set(state.files) == delta_rs_files(root, version)
    ours = {loc: f.deletion_vector.cardinality for loc, f in state.files.items() if f.deletion_vector}
    assert ours == delta_rs_deleted_rows(root, version)
    return state


# --- random hand-written logs (valid and invalid), and the restricted replay against the full one ---------

SPELLINGS = ("relative", "absolute", "file-uri", "escaped")


def spelled(root: Path, name: str, spelling: str) -> str:
    """`name` (relative to the table root) as the log may write it."""
    if spelling == "absolute":
        return f"{root}/{name}"
    if spelling == "file-uri":
        return f"file://{root}/{name}"
    if spelling == "escaped":  # `-` as %2D and ` ` as %20: decoded, the same file
        return name.replace("-", "%2D").replace(" ", "%20")
    return name.replace(" ", "%20")


def random_log(root: Path, seed: int, commits: int = 14, *, invalid: bool = False) -> None:
    """A random history of appends, DELETEs (DV updates), removes, stale removes and identical re-adds over
    files spelled in every way the log may spell them, some sharing a base name in other folders, with
    checkpoints of every kind (classic, multi-part, V2 with Parquet sidecars) at random versions. With
    `invalid`, one thing replay must refuse: an add or remove of a live file under another spelling, a
    checkpoint listing a file twice, or a missing commit."""
    rng = random.Random(seed)
    live: dict[str, tuple[str, dict | None]] = {}  # name -> (its raw path, its DV)
    counter = 0
    flaw = rng.choice(["add-respelled", "remove-respelled", "checkpoint-twice", "missing-commit"])
    flaw_at = rng.randrange(2, commits)

    def new_name() -> str:
        nonlocal counter
        counter += 1
        folder = rng.choice(["", "", "p=1/", "p=2/"])
        stem = rng.choice([f"part-{counter}", f"b c-{counter}", "same"])  # "same": one base name, 3 folders
        return f"{folder}{stem}.parquet"

    for version in range(commits):
        actions: list[dict] = [info("WRITE")] if version else base_commit()
        if version and invalid and version == flaw_at and flaw.endswith("respelled") and live:
            name, (raw, dv_) = rng.choice(sorted(live.items()))
            other = next(spelled(root, name, s) for s in SPELLINGS if spelled(root, name, s) != raw)
            actions.append(add(other, dv("x", 1)) if flaw == "add-respelled" else remove(other, dv_))
        for _ in range(rng.randint(1, 4)):
            op = (
                rng.choice(["append", "append", "dv", "dv", "remove", "stale", "readd"]) if live else "append"
            )
            if op == "append":
                name = new_name()
                if name in live or any(a.get("add", {}).get("path") == name for a in actions):
                    continue
                raw = spelled(root, name, rng.choice(SPELLINGS))
                live[name] = (raw, None)
                actions.append(add(raw, None, rows=10))
                continue
            name = rng.choice(sorted(live))
            raw, dv_ = live[name]
            if any(a.get("add", a.get("remove", {})).get("path") == raw for a in actions[1:]):
                continue  # one action per file and commit keeps the history valid
            if op == "dv":
                new = dv(f"dv{version}-{rng.randrange(1000)}", rng.randint(1, 9))
                actions += [remove(raw, dv_), add(raw, new, rows=10)]
                live[name] = (raw, new)
            elif op == "remove":
                actions.append(remove(raw, dv_))
                del live[name]
            elif op == "stale":
                actions.append(remove(raw, dv("stale", 1)))
            else:
                actions.append(add(raw, dv_, rows=10, data_change=False))
        write_commit(root, version, actions)
        if version and rng.random() < 0.35:
            twice = invalid and flaw == "checkpoint-twice" and version >= flaw_at
            write_checkpoint(root, version, rng.choice(["classic", "multipart", "v2"]), rng, twice=twice)
    if invalid and flaw == "missing-commit":
        (root / "_delta_log" / f"{flaw_at:020d}.json").unlink()


def write_checkpoint(root: Path, version: int, kind: str, rng: random.Random, *, twice: bool = False) -> None:
    """A checkpoint of `version` (its state as the full replay reads it), with stats_parsed only; with
    `twice`, one file listed a second time under another spelling. Nothing when the log is invalid there."""
    try:
        state = DeltaTable(root, restricted_replay=False).state(version)
    except MirrorInputError:
        return
    adds = [
        checkpoint_add(f.path, _dv_json(f.deletion_vector), f.num_records or 0) for f in state.files.values()
    ]
    if twice and adds:
        first = adds[0]["add"]["path"]
        name = unquote(first.split(str(root) + "/", 1)[-1])
        other = next(spelled(root, name, s) for s in SPELLINGS if spelled(root, name, s) != first)
        adds.insert(rng.randrange(len(adds) + 1), {"add": {**adds[0]["add"], "path": other}})
    rng.shuffle(adds)
    rows = [*checkpoint_rows()[:2], *adds]
    log = root / "_delta_log"
    if kind == "classic":
        write_parquet(log / f"{version:020d}.checkpoint.parquet", rows)
    elif kind == "multipart":
        parts = 3
        for part in range(parts):
            write_parquet(
                log / f"{version:020d}.checkpoint.{part + 1:010d}.{parts:010d}.parquet", rows[part::parts]
            )
    else:
        sidecars = []
        for index in range(2):
            write_parquet(log / "_sidecars" / f"v{version}-{index}.parquet", adds[index::2])
            sidecars.append(
                {"sidecar": {"path": f"v{version}-{index}.parquet", "sizeInBytes": 1, "modificationTime": 1}}
            )
        top = [
            {"checkpointMetadata": {"version": version}},
            {"protocol": PROTOCOL},
            {"metaData": METADATA},
            *sidecars,
        ]
        name = f"{version:020d}.checkpoint.{uuid.UUID(int=rng.getrandbits(128))}.json"
        (log / name).write_text("".join(json.dumps(a) + "\n" for a in top))


def _dv_json(descriptor: DeletionVectorDescriptor | None) -> dict | None:
    if descriptor is None:
        return None
    return {
        "storageType": descriptor.storage_type,
        "pathOrInlineDv": descriptor.path_or_inline_dv,
        "offset": descriptor.offset,
        "sizeInBytes": descriptor.size_in_bytes,
        "cardinality": descriptor.cardinality,
    }


Outcome = tuple[list[tuple[Any, ...]], tuple[type, str] | None]


def changes_outcome(table: DeltaTable, start: int, end: int) -> Outcome:
    """What `changes(start, end)` hands out before it ends or raises (every field, stats text too), and
    its error (class and message)."""
    handed_out: list[tuple[Any, ...]] = []
    try:
        for change in table.changes(start, end):
            handed_out.append(
                (
                    change,
                    [a.stats for a in change.added],
                    [r.stats for r in change.removed],
                    [(b.stats, a.stats) for b, a in change.dv_changed],
                )
            )
    except MirrorInputError as exc:
        return handed_out, (type(exc), str(exc))
    return handed_out, None
