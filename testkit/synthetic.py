"""Delta tables written by hand, without Spark, for the tests and the benchmarks alike: log actions and
commits (`add`, `remove`, `dv`, `info`, `base_commit`, `write_log`, `read_commit`), DV blobs as Delta and
Iceberg write them (`encode_blob`, `z85_encode`: the writing side of `dv_assets.mirror.dv.codec`, which
only reads), and `SyntheticTable`: real Parquet data files and DV files grown by DELETEs, at a million
files hard links to a few real ones, with Delta Spark's classic checkpoint.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap64

from dv_assets.mirror.dv.codec import BITMAP_MAGIC_BYTES, MAX_POSITION, Z85_ALPHABET, frame_blob

# --- DV blobs and descriptors --------------------------------------------------------------------------


def z85_encode(data: bytes) -> str:
    """Encode bytes as Z85, zero-padding to a multiple of 4 first (as Delta's `encodeBytes` does)."""
    padded = data + b"\x00" * (-len(data) % 4)
    chars = []
    for start in range(0, len(padded), 4):
        value = int.from_bytes(padded[start : start + 4], "big")
        group = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            group.append(Z85_ALPHABET[digit])
        chars.extend(reversed(group))
    return "".join(chars)


def serialize_bitmap(positions: BitMap64) -> bytes:
    """Magic + portable serialization, run-optimized first as Iceberg Java's writer does.

    Works on a copy: run-optimizing changes container types, and the caller's bitmap stays untouched.
    """
    bitmap = BitMap64(positions)
    bitmap.run_optimize()
    return BITMAP_MAGIC_BYTES + bitmap.serialize()


def encode_blob(positions: BitMap64 | Iterable[int]) -> bytes:
    """Positions -> a `deletion-vector-v1` blob, byte-identical to Iceberg Java's for the same positions."""
    bitmap = positions if isinstance(positions, BitMap64) else BitMap64(positions)
    if bitmap and bitmap.max() > MAX_POSITION:
        raise ValueError(f"position {bitmap.max()} is above 2^63 - 1")
    return frame_blob(serialize_bitmap(bitmap))


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
LINKS_PER_FOLDER = 1_000_000


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
        self._linked = 0  # hard links made

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
        if linked and self._link_target is not None and self._links < HARD_LINKS_PER_FILE:
            # In folders of LINKS_PER_FOLDER names: ext4's directory index holds ~10 million at most.
            folder = f"links-{self._linked // LINKS_PER_FOLDER:03d}"
            if self._linked % LINKS_PER_FOLDER == 0:
                (self.root / folder).mkdir(exist_ok=True)
            name = f"{folder}/{name}"
            os.link(self._link_target, self.root / name)
            self._links += 1
            self._linked += 1
        else:
            (self.root / name).write_bytes(self.content)
            if linked:
                self._link_target, self._links = self.root / name, 1
        self.files.append(name)
        return self._add(name, None)

    def create(self, files: int, *, real: int | None = None, logged: bool = True) -> int:
        """Version 0: the protocol and metadata (DVs enabled) and `files` data files; with `real`, only
        the first `real` have bytes of their own and the others are hard links (a bench's million files;
        give DVs only to real ones). Without `logged`, the commit holds no adds: for a table whose log is
        cleaned up after a checkpoint (`clean_up_log`), which nobody reads before (ten million adds)."""
        self.metadata = {**METADATA, "id": str(uuid.uuid4())}
        actions = [info("WRITE"), {"protocol": PROTOCOL}, {"metaData": self.metadata}]
        adds = [self._new_file(linked=real is not None and i >= real) for i in range(files)]
        return self._commit(actions + adds if logged else actions)

    def append(self, files: int = 1) -> int:
        """A blind append (WRITE) of `files` new data files; its version."""
        return self._commit([info("WRITE"), *(self._new_file() for _ in range(files))])

    def delete(
        self, names: Iterable[str], positions: Callable[[int], Iterable[int]], *, append: int = 0
    ) -> tuple[int, int]:
        """A DELETE giving each named file (the i-th) the DV of `positions(i)`, all in one DV file, and
        adding `append` new files; the version and the DV file's bytes. `positions(i)` may be a BitMap64:
        one returned for consecutive files is encoded once (a bench's many large DVs)."""
        dv_id = uuid.uuid4()
        dv_bytes = bytearray(b"\x01")
        actions: list[dict] = [info("DELETE")]
        encoded: tuple[BitMap64, bytes] | None = None
        for index, name in enumerate(names):
            deleted = positions(index)
            if isinstance(deleted, BitMap64):
                if encoded is None or encoded[0] is not deleted:
                    encoded = (deleted, encode_blob(deleted))
                blob = encoded[1]
            else:
                deleted = sorted(deleted)
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


PROTOCOL_TYPE = pa.struct(
    [
        ("minReaderVersion", pa.int32()),
        ("minWriterVersion", pa.int32()),
        ("readerFeatures", pa.list_(pa.string())),
        ("writerFeatures", pa.list_(pa.string())),
    ]
)

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
        ("protocol", PROTOCOL_TYPE),
    ]
)
