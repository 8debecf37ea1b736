"""A mirror-owned index of a Delta checkpoint, so that a run after it reads a few thousand rows of it, not
all of them, and verifies about as much: of what a run reads and checks, only the manifest's one entry
per shard grows with the checkpoint.

A checkpoint is immutable. The first time a run ends with a checkpoint to continue from, the mirror writes
an index of it into a folder it owns (`CheckpointIndexes`, under the Iceberg table's location): the
checkpoint's adds, exactly the Arrow rows a restricted replay reads of it (`DeltaLog.checkpoint_contents`:
the columns of `read_checkpoint(stats=False)`), with their ordinal in the checkpoint, in groups (record
batches) that are

* first the adds `AddCandidates` admits whatever it is asked (`always_admitted`: decoding may change
  their base name), read by every lookup;
* then buckets: the other adds sorted by raw base name, cut into groups of about BUCKET_ROWS rows,
  never between two adds of one base name.

The groups are cut into shards, each a whole Arrow IPC file (one record batch a group, zstd-compressed;
format 3's Parquet shards cost five times as much to open and read a bucket of, their footer of
column-chunk metadata decoded whole every open): the always-read groups one shard, then SHARD_BUCKETS
buckets a shard. The adds file is the shards one after another, each followed by its shard manifest
(JSON: its row counts, each bucket's first name, its own first name and the next shard's, and one SHA-256
per block of VERIFY_BLOCK_BYTES of its Arrow bytes). The index's manifest (JSON, written last: an index
without one does not exist) holds the checkpoint's files with their size and modification time (parts
and sidecars), its other actions (protocol, metaData, ...) as it has them, the base names
`AddCandidates(∅).repeated` finds over the whole checkpoint, and per shard where it lies, its rows, its
first base name and the SHA-256 of its shard manifest: one entry per SHARD_BUCKETS * BUCKET_ROWS adds
(~300 at 10 million).

A restricted replay with base names K then reads the always-read shard and, of the shards K's names fall
in, K's buckets, restores checkpoint order by ordinal and filters with `AddCandidates(K)`: every add it
leaves unread is in another bucket, so its raw base name is not one of K and it may not change, which
`AddCandidates(K)` would drop too. The same rows in the same order, so the same replay, changes and
refusals. The names seen twice, which the replay reads too (a file may be listed twice), are the
manifest's minus K: for a name outside K, the count `AddCandidates(K).repeated` takes is the one over the
whole checkpoint.

A cache may make a run faster, never change what it commits, so what an index answers from is verified
before it is used, and on any doubt the run reads the checkpoint itself (one warning line; the folder is
removed once a new index is written, `remove_older`); a damaged index is never a reason to refuse:

* the manifest holds the SHA-256 of its own canonical JSON (`digest`): a field altered by a bit is found
  before any is read (its copies of the checkpoint's protocol and metaData included: they are kept, not
  read from the checkpoint, because that would open every part of it and read every row group of its
  non-add columns, the reads the index is there to save);
* a shard is used only once its shard manifest's SHA-256 is the manifest's, and its Arrow bytes are
  verified a block at a time (`BlockHashes`): the IPC reader is handed only bytes of blocks that matched
  (so no checksum of its own is needed: format 3's Parquet page checksums are gone), and a lookup fetches
  only the blocks it reads (a footer, a few record batches);
* what the manifests say of the adds file is cross-checked against it: the shards laid end to end over
  the whole file, their rows adding up; a shard's own first name and its next shard's against the
  manifest's (so a name is looked for in the one shard that can hold it, whichever shards are read); its
  schema (column names, `ordinal` int64, `basename` string, the add type the manifest's), its record
  batches as many as its groups and each batch read holding its group's rows; the shape of its groups
  (one first name per bucket, in order); the rows read: ordinals in range and unique, base names those
  of their paths, the always-read rows exactly those `always_admitted` admits, each bucket's names
  within its bounds (its smallest its first name, its largest below the next bucket's); and the rows of
  the bucket after each bucket read, read for that only: its names within its bounds too (a first name
  written wrong would send a name to the bucket before its own, whose rows could not tell; format 3
  checked the same against its footer's statistics);
* the checkpoint's files (names, sizes, modification times: a rewritten or replaced checkpoint is another
  one), the table root and the checkpoint version must be the ones the index was made of.

A run verifies the manifest whole (O(shards)) and, of the adds file, only the shards it reads; the build
verifies every shard as a lookup would (shard manifest, schema, every record batch's rows and bounds)
once, so that an index no lookup would accept is not left behind.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import uuid
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dv_assets.mirror.delta.actions import parse_actions
from dv_assets.mirror.delta.add_candidates import AddCandidates, always_admitted, raw_basenames
from dv_assets.mirror.delta.checkpoint_columns import add_rows
from dv_assets.mirror.delta.log import DeltaLog
from dv_assets.mirror.delta.log_files import Checkpoint
from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.io import FileInfo, FileIO

FORMAT = "dvmirror-delta-checkpoint-index"
# 2: the manifest's digest, the adds file's block hashes and base-name statistics (an index of version 1
# is not used, and replaced by the run). 3: the adds file in shards, each with its shard manifest, so that
# a run reads and verifies what it uses, not a footer and block list that grow with the checkpoint. 4: each
# shard an Arrow IPC file, not a Parquet file (opening one and reading a bucket costs a fifth as much).
FORMAT_VERSION = 4
MANIFEST = "manifest.json"
# The shards one after another. Each is an Arrow IPC file since format 4; the name every format used is
# kept, so that the mirror (`_remove`) and `dvmirror drop` name the same two files in a folder of any format.
# The shards, one after another. Arrow IPC since format 4, under the name every format used: what
# `_remove` and `dvmirror drop` know an index folder holds (an older folder keeps its file under it).
ADDS = "adds.parquet"
FOLDER_PREFIX = "dvmirror-checkpoint-"
# Rows per bucket: a lookup of K base names reads at most |K| buckets (and the always-read rows), each
# decoded and checked whole: most of a lookup's work is in proportion to it.
BUCKET_ROWS = 512
# Buckets per shard: a lookup verifies the footer and shard manifest of each shard it reads (64 record
# batches, ~7 KiB of JSON), and the manifest holds one entry per shard (~300 at 10 million adds).
SHARD_BUCKETS = 64
# Rows copied into index order at a time while writing (what the build holds besides the checkpoint's adds).
BLOCK_ROWS = 1 << 16
# Bytes per verified block of a shard's Arrow bytes: a lookup fetches and hashes the blocks it reads,
# about one more per record batch than it needs; a shard manifest holds one SHA-256 per block.
VERIFY_BLOCK_BYTES = 64 << 10
# Adds per chunk the build copies rows from (`_take_rows` takes from each chunk for each block it copies;
# a checkpoint is read in batches of ~8,000 adds: 1,222 chunks at ten million).
REGROUP_ROWS = 1 << 20
# Bytes of a shard written to the hashing sink at a time.
WRITE_BUFFER_BYTES = 1 << 20
# What reading an index or a checkpoint may raise besides MirrorInputError while building: no index then.
_READ_ERRORS = (OSError, pa.ArrowException, ValueError, KeyError, TypeError)
_ADD_COLUMNS = ("ordinal", "basename", "add")
# Each shard's record batches compressed with zstd: 1.7 MB a shard of 32,768 adds against 6.8 MB plain
# (lz4: 2.9 MB) and about as fast to read, so fewer blocks to fetch and hash.
_WRITE_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd")
_READ_OPTIONS = pa.ipc.IpcReadOptions(use_threads=False)
_READ_NAMES_OPTIONS = pa.ipc.IpcReadOptions(
    use_threads=False, included_fields=[_ADD_COLUMNS.index("basename")]
)
_REASON_CHARS = 300

_LOG = logging.getLogger(__name__)


class IndexUnusable(Exception):
    """Why an index is not used: what the warning line says."""


@dataclass(frozen=True)
class SourceFile:
    """A file of the checkpoint as the index saw it: a rewritten or replaced file differs in one of these."""

    location: str
    size: int | None
    mtime_s: float | None

    @classmethod
    def of(cls, info: FileInfo) -> SourceFile:
        return cls(info.location, info.size, info.mtime_s)

    @classmethod
    def from_json(cls, value: Any) -> SourceFile:
        if not isinstance(value, dict) or set(value) != {"location", "size", "mtime_s"}:
            raise IndexUnusable("a file entry of its manifest is not one")
        size, mtime_s = value["size"], value["mtime_s"]
        if size is not None:
            _int(size, "file size")
        if mtime_s is not None and (isinstance(mtime_s, bool) or not isinstance(mtime_s, int | float)):
            raise IndexUnusable("a file's modification time in its manifest is not a number")
        return cls(_str(value["location"], "file location"), size, mtime_s)

    def to_json(self) -> dict[str, Any]:
        return {"location": self.location, "size": self.size, "mtime_s": self.mtime_s}


@dataclass(frozen=True)
class BlockHashes:
    """A shard's Arrow bytes as written: their size and the SHA-256 of each block of `block_bytes` (the
    last one shorter), what every byte a lookup reads of them is verified against (`_VerifiedFile`)."""

    size: int
    block_bytes: int
    block_sha256: tuple[str, ...]

    @classmethod
    def from_json(cls, value: Any) -> BlockHashes:
        if not isinstance(value, dict) or set(value) != {"size", "block_bytes", "block_sha256"}:
            raise IndexUnusable("a shard manifest's blocks are not one")
        size, block_bytes = _int(value["size"], "shard size"), _int(value["block_bytes"], "block size")
        hashes = _strs(value["block_sha256"], "block hashes")
        if block_bytes <= 0 or len(hashes) != math.ceil(size / block_bytes):
            raise IndexUnusable("a shard manifest's block hashes do not cover its shard")
        return cls(size, block_bytes, hashes)

    def to_json(self) -> dict[str, Any]:
        return {"size": self.size, "block_bytes": self.block_bytes, "block_sha256": list(self.block_sha256)}


@dataclass(frozen=True)
class ShardEntry:
    """Where a shard lies in the adds file (its Arrow bytes, then its shard manifest's), its rows, and
    the SHA-256 of its shard manifest: the manifest's entry for it."""

    offset: int
    arrow_bytes: int
    manifest_bytes: int
    manifest_sha256: str
    rows: int

    @classmethod
    def from_json(cls, value: Any) -> ShardEntry:
        fields = ("offset", "arrow_bytes", "manifest_bytes", "manifest_sha256", "rows")
        if not isinstance(value, dict) or set(value) != set(fields):
            raise IndexUnusable("a shard entry of its manifest is not one")
        entry = cls(
            _int(value["offset"], "shard offset"),
            _int(value["arrow_bytes"], "shard size"),
            _int(value["manifest_bytes"], "shard manifest size"),
            _str(value["manifest_sha256"], "shard manifest hash"),
            _int(value["rows"], "shard rows"),
        )
        if entry.offset < 0 or min(entry.arrow_bytes, entry.manifest_bytes, entry.rows) <= 0:
            raise IndexUnusable("a shard entry of its manifest is empty or out of the adds file")
        return entry

    def to_json(self) -> dict[str, Any]:
        return {
            "offset": self.offset,
            "arrow_bytes": self.arrow_bytes,
            "manifest_bytes": self.manifest_bytes,
            "manifest_sha256": self.manifest_sha256,
            "rows": self.rows,
        }

    @property
    def end(self) -> int:
        return self.offset + self.arrow_bytes + self.manifest_bytes


@dataclass(frozen=True)
class Shard:
    """A shard as its verified shard manifest describes it: its groups' rows, each bucket's first
    base name (none in the always-read shard), and the hashes of its Arrow bytes."""

    entry: ShardEntry
    group_rows: tuple[int, ...]
    bucket_first: tuple[str, ...]
    blocks: BlockHashes
    following: str | None  # the next shard's first base name: every name of this one is below it

    def bucket_following(self, bucket: int) -> str | None:
        """The first base name after bucket `bucket`: the next bucket's, or the next shard's."""
        return self.bucket_first[bucket + 1] if bucket + 1 < len(self.bucket_first) else self.following

    def groups_of(self, basenames: Iterable[str]) -> list[int]:
        """The groups holding these raw base names (all of them in the always-read shard)."""
        if not self.bucket_first:
            return list(range(len(self.group_rows)))
        return sorted({bisect_right(self.bucket_first, name) - 1 for name in basenames} - {-1})


@dataclass(frozen=True)
class CheckpointIndex:
    """One checkpoint's index, its manifest verified and checked against the log
    (`CheckpointIndexes.find`)."""

    folder: str
    version: int
    actions: tuple[dict[str, Any], ...]  # the checkpoint's other actions, in order
    rows: int  # the checkpoint's adds (their ordinals are 0..rows-1)
    always: ShardEntry | None  # the shard of the adds read by every lookup
    shards: tuple[ShardEntry, ...]  # the bucket shards, by base name
    shard_first: tuple[str, ...]  # the first raw base name of each bucket shard
    adds_bytes: int  # the adds file's size (0: no adds, and no adds file)
    add_type: str
    repeated: frozenset[str]

    def shards_of(self, basenames: Iterable[str]) -> dict[int, list[str]]:
        """The bucket shards these raw base names fall in, each with its names (a name below the first
        shard's first is in none: no add has it)."""
        found: dict[int, list[str]] = {}
        for name in sorted(basenames):
            shard = bisect_right(self.shard_first, name) - 1
            if shard >= 0:
                found.setdefault(shard, []).append(name)
        return found

    def following(self, shard: int) -> str | None:
        return self.shard_first[shard + 1] if shard + 1 < len(self.shard_first) else None


class CheckpointIndexes:
    """The folder of a mirror's checkpoint indexes (`<table location>/dvmirror-delta-index`, given by the
    caller: this package knows nothing of Iceberg), through `FileIO`. One instance per run: the folder is
    listed once, and an index found unusable is reported once and not looked at again."""

    def __init__(self, root: str, io: FileIO | None = None) -> None:
        self.root = root.rstrip("/")
        self._io = io or FileIO()
        self._folders: list[str] | None = None
        self._rejected: dict[str, str] = {}  # folder -> why it is not used

    # --- reading ----------------------------------------------------------------------------------

    def find(
        self, log: DeltaLog, checkpoint: Checkpoint, infos: Mapping[str, FileInfo]
    ) -> CheckpointIndex | None:
        """A usable index of `checkpoint` (its files as `infos`, the listing, describes them), or None."""
        expected = [infos.get(f.name) for f in checkpoint.files]
        if any(info is None for info in expected):
            return None
        parts = [SourceFile.of(info) for info in expected if info is not None]
        for folder in self._version_folders(checkpoint.version):
            try:
                index = self._checked(folder, log, checkpoint.version, parts)
            except Exception as exc:  # whatever the doubt, the checkpoint answers instead: never a refusal
                self._reject(folder, exc)
                continue
            if index is not None:
                return index
        return None

    def read(self, index: CheckpointIndex, candidates: AddCandidates) -> list[dict[str, Any]] | None:
        """What `DeltaLog.read_checkpoint(checkpoint, stats=False, candidates=candidates)` yields, as far as
        replay can tell (the other actions first, then the admitted adds in checkpoint order); None when the
        index cannot be read or does not verify (reported once: `_reject`)."""
        if index.folder in self._rejected:
            return None
        if not index.rows:  # a checkpoint without adds: no adds file
            return list(index.actions)
        try:
            adds = self._admitted_adds(index, candidates)
            rows = [] if adds is None else add_rows(adds)
            return [*index.actions, *({"add": row} for row in rows)]
        except Exception as exc:  # whatever the doubt, the checkpoint answers instead: never a refusal
            self._reject(index.folder, exc)
            return None

    def _admitted_adds(self, index: CheckpointIndex, candidates: AddCandidates) -> pa.StructArray | None:
        names = sorted(candidates.basenames)
        with self._io.open_input(f"{index.folder}/{ADDS}") as handle:
            if handle.size() != index.adds_bytes:
                raise IndexUnusable(f"its adds file has {handle.size()} bytes, not {index.adds_bytes}")
            reads = [] if index.always is None else [_read_shard(handle, index, None, [])]
            for shard, shard_names in index.shards_of(names).items():
                reads.append(_read_shard(handle, index, shard, shard_names))
        if not reads:  # no always-read adds, and no name of K in any shard
            return None
        table = pa.concat_tables(read.table for read in reads)
        _check_rows(index, reads, table)
        # Only K's rows of its buckets (a few of thousands) and the always-read rows go on to the
        # filter, which keeps exactly them: a superset of what it keeps, so the same rows.
        always_rows = 0 if index.always is None else index.always.rows
        in_buckets = table.slice(always_rows)
        named = pc.is_in(in_buckets.column("basename"), value_set=pa.array(names, pa.string()))
        table = pa.concat_tables([table.slice(0, always_rows), in_buckets.filter(named)])
        adds = table.sort_by("ordinal").column("add").combine_chunks()
        return candidates.admitted(adds) if len(adds) else adds

    def _reject(self, folder: str, exc: Exception) -> None:
        """Not used again by this instance; ONE warning line per index (a run asks more than once)."""
        if folder in self._rejected:
            return
        reason = str(exc) if isinstance(exc, IndexUnusable) else f"{type(exc).__name__}: {exc}"
        reason = " ".join(reason.split())[:_REASON_CHARS]
        self._rejected[folder] = reason
        _LOG.warning(
            "checkpoint index %s not used (%s): the checkpoint is read instead, and a new index written "
            "once the run's versions are committed",
            folder,
            reason,
        )

    def _version_folders(self, version: int) -> list[str]:
        prefix = f"{FOLDER_PREFIX}{version:020d}-"
        return [
            f for f in self._listed() if f.rsplit("/", 1)[-1].startswith(prefix) and f not in self._rejected
        ]

    def _listed(self) -> list[str]:
        if self._folders is None:
            try:
                infos = self._io.list_dir(self.root)
            except OSError:
                infos = []
            names = (i.location.rsplit("/", 1)[-1] for i in infos if i.exists and not i.is_file)
            self._folders = [f"{self.root}/{name}" for name in names if name.startswith(FOLDER_PREFIX)]
        return self._folders

    def _checked(
        self, folder: str, log: DeltaLog, version: int, parts: list[SourceFile]
    ) -> CheckpointIndex | None:
        """The folder's index if its manifest verifies and it indexes this checkpoint; None when it has no
        manifest (being written, or half removed: no index, not a doubt); else raises why not."""
        try:
            content = self._io.read(f"{folder}/{MANIFEST}")
        except FileNotFoundError:
            return None
        manifest = _verified_manifest(content)
        if manifest.get("table_root") != log.table_root:
            raise IndexUnusable("it indexes another table's checkpoint")
        if manifest.get("checkpoint_version") != version:
            raise IndexUnusable(f"it indexes another version's checkpoint, not version {version}'s")
        files = manifest.get("files")
        if not isinstance(files, list):
            raise IndexUnusable("its manifest's files are not a list")
        sources = [SourceFile.from_json(s) for s in files]
        if sources[: len(parts)] != parts:
            raise IndexUnusable("the checkpoint's files are not the ones it indexed (rewritten or replaced)")
        # The sidecars: the checkpoint's parts are unchanged, so these are the ones they name.
        sidecars = sources[len(parts) :]
        if sidecars:
            found = self._io.stat_many([s.location for s in sidecars])
            if [SourceFile(i.location, i.size, i.mtime_s) for i in found] != sidecars:
                raise IndexUnusable("the checkpoint's sidecars are not the ones it indexed")
        return _index_of(folder, version, manifest)

    # --- writing ----------------------------------------------------------------------------------

    def build(
        self, log: DeltaLog, checkpoint: Checkpoint, infos: Mapping[str, FileInfo]
    ) -> CheckpointIndex | None:
        """Write the index of `checkpoint` (whose files `infos` describes) into a new folder, the manifest
        last, and return it as `find` would, every shard verified as a lookup verifies it; None when the
        checkpoint cannot be indexed, or reading or writing fails (nothing is then used; a partial folder
        without its manifest is never read)."""
        if any(infos.get(f.name) is None for f in checkpoint.files):
            return None
        try:
            contents = log.checkpoint_contents(checkpoint)
            if contents is None or not _json_exact(contents.actions):
                return None
            adds = _regrouped(contents.adds) if contents.adds else None
            ordered = None if adds is None else _ordered(adds, log.table_root)
            if adds is not None and ordered is None:
                return None
            parts = [SourceFile.of(infos[f.name]) for f in checkpoint.files]
            sidecars = [SourceFile.of(i) for i in self._io.stat_many(contents.files[len(parts) :])]
            folder = f"{self.root}/{FOLDER_PREFIX}{checkpoint.version:020d}-{uuid.uuid4()}"
            self._io.makedirs(folder)
            written = _Written(None, [], [], 0)
            if adds is not None and ordered is not None:
                written = self._write_adds(f"{folder}/{ADDS}", adds, ordered)
            manifest = {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "table_root": log.table_root,
                "checkpoint_version": checkpoint.version,
                "files": [s.to_json() for s in (*parts, *sidecars)],
                "actions": contents.actions,
                "rows": 0 if adds is None else len(adds),
                **written.to_json(),
                "add_type": "" if adds is None else str(_stored_type(adds.type)),
                "repeated": [] if ordered is None else sorted(ordered.repeated),
            }
            self._io.write(f"{folder}/{MANIFEST}", _sealed(manifest))
        except (*_READ_ERRORS, MirrorInputError):
            return None
        if self._folders is not None:
            self._folders.append(folder)
        index = self.find(log, checkpoint, infos)
        return index if index is None or self._shards_verify(index) else None

    def _shards_verify(self, index: CheckpointIndex) -> bool:
        """Whether a lookup will accept every shard's shard manifest, schema and record batches (their
        rows and each bucket's bounds): checked once here, so that an index that would never be used is
        not left to be found, doubted and rebuilt by every run."""
        if not index.rows:
            return True
        try:
            with self._io.open_input(f"{index.folder}/{ADDS}") as handle:
                shards: list[int | None] = [None] if index.always is not None else []
                for number in [*shards, *range(len(index.shards))]:
                    shard = _verified_shard(handle, index, number)
                    reader = _verified_ipc(_shard_source(handle, shard), index, shard)
                    for group in range(len(shard.group_rows)):
                        batch = _batch(reader, shard, group)
                        if shard.bucket_first:
                            _check_bucket_names(shard, group, batch.column("basename"))
        except Exception as exc:  # the index is not used: no answer depends on it
            self._reject(index.folder, exc)
            self._remove(index.folder)
            return False
        return True

    def _write_adds(self, location: str, adds: pa.ChunkedArray, ordered: _Ordered) -> _Written:
        """The adds file: the always-read shard, then the bucket shards, each hashed a block at a time as
        it is written (what is verified is what was meant to be stored, not what storage gives back)."""
        always = ordered.always
        groups = [(i, min(i + BUCKET_ROWS, always)) for i in range(0, always, BUCKET_ROWS)]
        buckets = [(always + a, always + b) for a, b in _bucket_bounds(ordered.names.slice(always))]
        shards = [buckets[i : i + SHARD_BUCKETS] for i in range(0, len(buckets), SHARD_BUCKETS)]
        shard_first = [ordered.names[shard[0][0]].as_py() for shard in shards]
        entries: list[ShardEntry] = []
        with self._io.open_output(location) as out:
            writer = _ShardWriter(out, adds, ordered)
            always_entry = writer.write(groups, None, None) if groups else None
            for number, shard in enumerate(shards):
                following = shard_first[number + 1] if number + 1 < len(shards) else None
                entries.append(writer.write(shard, shard_first[number], following))
        return _Written(always_entry, entries, shard_first, writer.position)

    def remove_older(self, version: int) -> None:
        """Delete this folder's indexes of checkpoints before `version`, and those found unusable by this
        instance (the mirror's own files only: the folders it named; their manifest first, so that a
        half-deleted index is never read)."""
        for folder in list(self._listed()):
            name = folder.rsplit("/", 1)[-1]
            digits = name[len(FOLDER_PREFIX) : len(FOLDER_PREFIX) + 20]
            if folder in self._rejected or (digits.isdigit() and int(digits) < version):
                self._remove(folder)

    def _remove(self, folder: str) -> None:
        """Delete one of the mirror's index folders, its manifest first (a half-deleted index is never
        read)."""
        self._io.delete_quietly([f"{folder}/{MANIFEST}", f"{folder}/{ADDS}"])
        self._io.delete_dir_quietly(folder)
        self._folders = [f for f in self._listed() if f != folder]


@dataclass(frozen=True)
class _Written:
    """What `_write_adds` wrote: the always-read shard (None: no always-read adds), the bucket shards and
    their first base names, and the adds file's size (0: no adds file)."""

    always: ShardEntry | None
    shards: list[ShardEntry]
    shard_first: list[str]
    adds_bytes: int

    def to_json(self) -> dict[str, Any]:
        return {
            "always": None if self.always is None else self.always.to_json(),
            "shards": [entry.to_json() for entry in self.shards],
            "shard_first": self.shard_first,
            "adds_bytes": self.adds_bytes,
        }


# --- verifying ------------------------------------------------------------------------------------------


def _digest(manifest: Mapping[str, Any]) -> str:
    """SHA-256 of the manifest's canonical JSON (sorted keys, no spaces, ASCII), its digest left out."""
    fields = {k: v for k, v in manifest.items() if k != "digest"}
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def _sealed(manifest: Mapping[str, Any]) -> bytes:
    """The manifest as written: its fields and their digest."""
    return json.dumps({**manifest, "digest": _digest(manifest)}, sort_keys=True).encode()


def _verified_manifest(content: bytes) -> dict[str, Any]:
    """The manifest's fields, once its format is this one and its digest matches them."""
    manifest = json.loads(content)
    if not isinstance(manifest, dict):
        raise IndexUnusable("its manifest is not a JSON object")
    if manifest.get("format") != FORMAT or manifest.get("format_version") != FORMAT_VERSION:
        found = manifest.get("format_version")
        raise IndexUnusable(f"its manifest is of format version {found!r}, not {FORMAT_VERSION}")
    if manifest.get("digest") != _digest(manifest):
        raise IndexUnusable("its manifest's digest does not match its content")
    return manifest


def _index_of(folder: str, version: int, manifest: Mapping[str, Any]) -> CheckpointIndex:
    """The index a verified manifest describes, its fields typed and consistent with one another."""
    actions = manifest.get("actions")
    if not isinstance(actions, list) or not all(isinstance(a, dict) and len(a) == 1 for a in actions):
        raise IndexUnusable("its manifest's actions are not actions")
    repeated = _strs(manifest.get("repeated"), "repeated base names")
    if list(repeated) != sorted(set(repeated)):
        raise IndexUnusable("its manifest's repeated base names are not sorted and distinct")
    always = manifest.get("always")
    index = CheckpointIndex(
        folder=folder,
        version=version,
        actions=tuple(actions),
        rows=_int(manifest.get("rows"), "rows"),
        always=None if always is None else ShardEntry.from_json(always),
        shards=tuple(ShardEntry.from_json(entry) for entry in _list(manifest.get("shards"), "shards")),
        shard_first=_strs(manifest.get("shard_first"), "shard first names"),
        adds_bytes=_int(manifest.get("adds_bytes"), "adds file size"),
        add_type=_str(manifest.get("add_type"), "add type"),
        repeated=frozenset(repeated),
    )
    _check_shape(index)
    return index


def _check_shape(index: CheckpointIndex) -> None:
    """The shards as the build lays them out: the always-read one (if any) then the bucket shards, end to
    end from the adds file's first byte to its last, their rows adding up to the checkpoint's adds; one
    first name per bucket shard, in strictly increasing order (a base name is never cut between two); an
    adds file (and an add type) exactly when there are rows."""
    entries = [*([] if index.always is None else [index.always]), *index.shards]
    if len(index.shard_first) != len(index.shards):
        raise IndexUnusable("its manifest's shards and their first names do not match")
    if any(a >= b for a, b in pairwise(index.shard_first)):
        raise IndexUnusable("its manifest's shard first names are not in strictly increasing order")
    starts = [0, *(entry.end for entry in entries)]
    if [entry.offset for entry in entries] != starts[:-1] or starts[-1] != index.adds_bytes:
        raise IndexUnusable("its manifest's shards do not lie end to end over its adds file")
    if sum(entry.rows for entry in entries) != index.rows or index.rows < 0:
        raise IndexUnusable("its manifest's shards do not hold its rows")
    if (index.adds_bytes == 0) != (index.rows == 0) or (index.add_type == "") != (index.rows == 0):
        raise IndexUnusable("its manifest's adds file does not match its rows")


def _verified_shard(handle: pa.NativeFile, index: CheckpointIndex, number: int | None) -> Shard:
    """Bucket shard `number` (None: the always-read shard) as its shard manifest describes it, once that
    manifest's SHA-256 is the index manifest's and its bounds are the index manifest's."""
    entry = index.always if number is None else index.shards[number]
    assert entry is not None
    content = handle.read_at(entry.manifest_bytes, entry.offset + entry.arrow_bytes)
    if hashlib.sha256(content).hexdigest() != entry.manifest_sha256:
        raise IndexUnusable(f"the shard manifest at byte {entry.offset} is not the one written")
    fields = json.loads(content)
    if not isinstance(fields, dict) or set(fields) != {"group_rows", "bucket_first", "bounds", "blocks"}:
        raise IndexUnusable("a shard manifest is not one")
    bounds = _list(fields["bounds"], "shard bounds")
    expected = [None, None] if number is None else [index.shard_first[number], index.following(number)]
    if bounds != expected:
        raise IndexUnusable("a shard's bounds are not the ones its manifest looks it up by")
    shard = Shard(
        entry=entry,
        group_rows=tuple(_int(rows, "row count") for rows in _list(fields["group_rows"], "group_rows")),
        bucket_first=_strs(fields["bucket_first"], "bucket first names"),
        blocks=BlockHashes.from_json(fields["blocks"]),
        following=expected[1],
    )
    _check_shard_shape(shard, None if number is None else index.shard_first[number])
    return shard


def _check_shard_shape(shard: Shard, first: str | None) -> None:
    """A shard's groups as the build cuts them: all its rows, none empty; a bucket shard's one first
    name per group, the first its own, in strictly increasing order below the next shard's."""
    if shard.blocks.size != shard.entry.arrow_bytes:
        raise IndexUnusable("a shard manifest's blocks do not cover its shard")
    if any(rows <= 0 for rows in shard.group_rows) or sum(shard.group_rows) != shard.entry.rows:
        raise IndexUnusable("a shard manifest's groups do not hold its rows")
    names = shard.bucket_first
    if first is None:
        if names:
            raise IndexUnusable("the always-read shard's manifest names buckets")
        return
    if len(names) != len(shard.group_rows) or names[0] != first:
        raise IndexUnusable("a shard manifest's buckets are not its groups from its first name")
    if any(a >= b for a, b in pairwise(names)) or (
        shard.following is not None and names[-1] >= shard.following
    ):
        raise IndexUnusable("a shard manifest's bucket first names are not in strictly increasing order")


def _shard_source(handle: pa.NativeFile, shard: Shard) -> pa.NativeFile:
    """A shard's Arrow bytes as the IPC reader reads them, through its block hashes: the reader is handed
    only bytes of blocks that matched (no other check of its bytes is needed), and only those it reads
    are fetched (its footer, the record batches asked for)."""
    return pa.PythonFile(_VerifiedFile(handle, shard.entry.offset, shard.blocks), mode="r")


def _verified_ipc(
    source: pa.NativeFile, index: CheckpointIndex, shard: Shard
) -> pa.ipc.RecordBatchFileReader:
    """A shard as an Arrow IPC file (`_shard_source`), its schema the manifest's and its record batches as
    many as its shard manifest's buckets."""
    reader = pa.ipc.open_file(source, options=_READ_OPTIONS)
    schema = reader.schema
    if (
        tuple(schema.names) != _ADD_COLUMNS
        or schema.field("ordinal").type != pa.int64()
        or schema.field("basename").type != pa.string()
        or str(schema.field("add").type) != index.add_type
    ):
        raise IndexUnusable("its adds file's columns are not the manifest's")
    if reader.num_record_batches != len(shard.group_rows):
        raise IndexUnusable("a shard's record batches are not its shard manifest's groups")
    return reader


def _batch(reader: pa.ipc.RecordBatchFileReader, shard: Shard, group: int) -> pa.RecordBatch:
    """Record batch `group` of a shard, its rows as many as its shard manifest gives."""
    batch = reader.get_batch(group)
    if batch.num_rows != shard.group_rows[group]:
        raise IndexUnusable(f"a shard's record batch {group} does not hold its shard manifest's rows")
    return batch


def _check_bucket_names(shard: Shard, bucket: int, names: pa.Array | pa.ChunkedArray) -> None:
    """A bucket's base names (all its rows'): the smallest its first name, the largest below the next
    bucket's first name."""
    low, high = (v.as_py() for v in pc.min_max(names).values())
    following = shard.bucket_following(bucket)
    if low != shard.bucket_first[bucket] or (following is not None and high >= following):
        raise IndexUnusable(f"bucket {bucket}'s rows are not within its manifest's bounds")


def _check_buckets_after(source: pa.NativeFile, shard: Shard, groups: list[int]) -> None:
    """The bucket after each bucket read, in the same shard and not read itself, read too (its base names
    only, by a second reader of the shard whose schema `_verified_ipc` checked: the adds are most of a
    bucket's bytes and of its decoding) and its base names checked against its bounds: a first name
    written wrong would send a name to the bucket before its own, whose rows could not tell (the buckets
    read are checked by `_check_rows`)."""
    after = sorted({group + 1 for group in groups} - set(groups) - {len(shard.bucket_first)})
    if after:
        names = pa.ipc.open_file(source, options=_READ_NAMES_OPTIONS)
        for bucket in after:
            _check_bucket_names(shard, bucket, _batch(names, shard, bucket).column(0))


@dataclass(frozen=True)
class _ShardRead:
    """What a lookup read of one shard: its buckets (record batches) `groups`, all of their rows."""

    shard: Shard
    groups: list[int]
    table: pa.Table


def _read_shard(
    handle: pa.NativeFile, index: CheckpointIndex, number: int | None, names: list[str]
) -> _ShardRead:
    """The buckets of `names` in bucket shard `number` (None: the always-read shard, whole), read through
    its verified shard manifest and block hashes; the bucket after each checked too."""
    shard = _verified_shard(handle, index, number)
    groups = shard.groups_of(names)
    source = _shard_source(handle, shard)
    reader = _verified_ipc(source, index, shard)
    table = pa.Table.from_batches([_batch(reader, shard, group) for group in groups], reader.schema)
    if shard.bucket_first:  # not the always-read shard
        _check_buckets_after(source, shard, groups)
    return _ShardRead(shard, groups, table)


def _check_rows(index: CheckpointIndex, reads: list[_ShardRead], table: pa.Table) -> None:
    """The rows read (`table`: the reads' rows one after another) against the manifests: ordinals in range
    and unique, each base name its path's, the always-read shard's rows exactly the always admitted, each
    bucket's names within its bounds."""
    _check_ordinals(index, table)
    names = table.column("basename")
    paths = pc.struct_field(table.column("add"), "path")
    if not raw_basenames(paths).cast(names.type).equals(names):
        raise IndexUnusable("its adds file's base names are not those of its paths")
    always_rows = 0 if index.always is None else index.always.rows
    admitted = always_admitted(paths)
    always_ok = pc.all(admitted.slice(0, always_rows), min_count=0).as_py()
    if not always_ok or pc.any(admitted.slice(always_rows), min_count=0).as_py():
        raise IndexUnusable("its adds file's always-read rows are not those always admitted")
    start = always_rows
    for read in reads[0 if index.always is None else 1 :]:
        for group in read.groups:
            rows = read.shard.group_rows[group]
            _check_bucket_names(read.shard, group, names.slice(start, rows))
            start += rows


def _check_ordinals(index: CheckpointIndex, table: pa.Table) -> None:
    """The ordinals of the rows read: in range and unique (each add of the checkpoint once)."""
    ordinals = table.column("ordinal")
    if not len(table):
        return
    low, high = pc.min_max(ordinals).values()
    if ordinals.null_count or low.as_py() < 0 or high.as_py() >= index.rows:
        raise IndexUnusable("its adds file's ordinals are out of range")
    if pc.count_distinct(ordinals).as_py() != len(table):
        raise IndexUnusable("its adds file lists an ordinal twice")


class _VerifiedFile:
    """A shard's Arrow bytes (those at `offset` of the adds file) as the Arrow IPC reader reads them
    (`read`, `seek`, `tell`), every byte handed out from a block whose SHA-256 is its shard manifest's: a
    block that differs raises before any of it is used. Only the blocks read are fetched, consecutive
    missing ones in one read."""

    def __init__(self, handle: pa.NativeFile, offset: int, blocks: BlockHashes) -> None:
        self._handle = handle
        self._offset = offset
        self._file = blocks
        self._blocks: dict[int, bytes] = {}
        self._position = 0
        self.closed = False

    def read(self, size: int = -1) -> bytes:
        start, total = self._position, self._file.size
        end = total if size is None or size < 0 else min(start + size, total)
        if start >= end:
            return b""
        width = self._file.block_bytes
        first, last = start // width, (end - 1) // width
        self._load(first, last)
        data = b"".join(self._blocks[i] for i in range(first, last + 1))
        self._position = end
        return data[start - first * width : end - first * width]

    def _load(self, first: int, last: int) -> None:
        missing = [i for i in range(first, last + 1) if i not in self._blocks]
        if not missing:
            return
        width = self._file.block_bytes
        low, high = missing[0], missing[-1]
        span = self._handle.read_at(
            min((high + 1) * width, self._file.size) - low * width, self._offset + low * width
        )
        for block in range(low, high + 1):
            data = span[(block - low) * width : (block - low + 1) * width]
            if hashlib.sha256(data).hexdigest() != self._file.block_sha256[block]:
                raise IndexUnusable(
                    f"block {block} of the shard at byte {self._offset} is not the one written"
                )
            self._blocks[block] = bytes(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._position, 2: self._file.size}[whence]
        self._position = base + offset
        return self._position

    def tell(self) -> int:
        return self._position

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True


class _HashingSink:
    """An output stream that hashes what goes through it a block of `block_bytes` at a time (the
    `BlockHashes` of what was written)."""

    def __init__(self, out: pa.NativeFile, block_bytes: int) -> None:
        self._out = out
        self._block_bytes = block_bytes
        self._hasher = hashlib.sha256()
        self._filled = 0  # bytes in the block being hashed
        self._hashes: list[str] = []
        self._size = 0
        self.closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self._out.write(view)
        done = 0
        while done < len(view):
            take = min(len(view) - done, self._block_bytes - self._filled)
            self._hasher.update(view[done : done + take])
            self._filled += take
            done += take
            if self._filled == self._block_bytes:
                self._hashes.append(self._hasher.hexdigest())
                self._hasher, self._filled = hashlib.sha256(), 0
        self._size += len(view)
        return len(view)

    def blocks(self) -> BlockHashes:
        last = [self._hasher.hexdigest()] if self._filled else []
        return BlockHashes(self._size, self._block_bytes, (*self._hashes, *last))

    def tell(self) -> int:
        return self._size

    def flush(self) -> None:
        self._out.flush()

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise IndexUnusable(f"its manifest's {what} is not an integer")
    return value


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise IndexUnusable(f"its manifest's {what} is not a string")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise IndexUnusable(f"its manifest's {what} is not a list")
    return value


def _strs(value: Any, what: str) -> tuple[str, ...]:
    return tuple(_str(item, what) for item in _list(value, what))


# --- writing --------------------------------------------------------------------------------------------


class _ShardWriter:
    """Writes shards one after another into the adds file: each one's Arrow bytes (hashed as written),
    then its shard manifest; `position` is where the next one starts."""

    def __init__(self, out: pa.NativeFile, adds: pa.ChunkedArray, ordered: _Ordered) -> None:
        self._out = out
        self._adds = adds
        self._ordered = ordered
        self._schema = pa.schema([("ordinal", pa.int64()), ("basename", pa.string()), ("add", adds.type)])
        self.position = 0

    def write(self, groups: list[tuple[int, int]], first: str | None, following: str | None) -> ShardEntry:
        """The shard of buckets [start, end) of the adds in index order, one record batch each: a bucket
        shard has its first base name and the next shard's (`first` None: the always-read shard, no
        buckets)."""
        sink = _HashingSink(self._out, VERIFY_BLOCK_BYTES)
        # The IPC writer writes each buffer of each batch apart (~60 writes a bucket): coalesced here into
        # WRITE_BUFFER_BYTES before they reach the hashing sink's Python code.
        buffered = pa.BufferedOutputStream(pa.PythonFile(sink, mode="w"), buffer_size=WRITE_BUFFER_BYTES)
        with pa.ipc.new_file(buffered, self._schema, options=_WRITE_OPTIONS) as writer:
            _write_groups(writer, self._schema, self._adds, self._ordered, groups)
        buffered.flush()
        names = self._ordered.names
        manifest = {
            "group_rows": [end - start for start, end in groups],
            "bucket_first": [] if first is None else [names[start].as_py() for start, _end in groups],
            "bounds": [first, following],
            "blocks": sink.blocks().to_json(),
        }
        content = json.dumps(manifest, sort_keys=True).encode()
        self._out.write(content)
        rows = sum(manifest["group_rows"])
        entry = ShardEntry(
            self.position, sink.tell(), len(content), hashlib.sha256(content).hexdigest(), rows
        )
        self.position = entry.end
        return entry


def _write_groups(
    writer: pa.ipc.RecordBatchFileWriter,
    schema: pa.Schema,
    adds: pa.ChunkedArray,
    ordered: _Ordered,
    groups: list[tuple[int, int]],
) -> None:
    """The buckets [start, end) of the adds in index order, one record batch each, copied a block of
    buckets at a time (not all at once)."""
    for block in _blocks(groups):
        first, last = block[0][0], block[-1][1]
        order = ordered.order.slice(first, last - first)
        columns = [order, ordered.names.slice(first, last - first), _take_rows(adds, order)]
        batch = pa.record_batch(columns, schema=schema)
        for start, end in block:
            writer.write_batch(batch.slice(start - first, end - start))


def _regrouped(chunks: list[pa.StructArray]) -> pa.ChunkedArray:
    """The checkpoint's adds in chunks of about REGROUP_ROWS, copied from `chunks` (emptied as it goes, each
    freed once copied: the adds are held once, and one chunk more)."""
    groups: list[pa.Array] = []
    group: list[pa.Array] = []
    rows = 0
    chunks.reverse()  # taken from the end: each pop is O(1)
    while chunks:
        group.append(chunks.pop())
        rows += len(group[-1])
        if rows >= REGROUP_ROWS or not chunks:
            groups.append(pa.concat_arrays(group))
            group, rows = [], 0
    return pa.chunked_array(groups)


def _take_rows(adds: pa.ChunkedArray, rows: pa.Array) -> pa.Array:
    """`adds.take(rows)` as one array, taken chunk by chunk: a take over a chunked array of structs
    concatenates all its chunks first, every call, so the build's copy a block at a time was quadratic
    (130 s of 194 at ten million adds: 1,222 chunks, 153 blocks); each take costs ~0.2 ms, hence chunks of
    REGROUP_ROWS (`_regrouped`)."""
    if adds.num_chunks == 1:
        return adds.chunk(0).take(rows)
    if not len(rows):
        return pa.array([], adds.type)
    by_row = pc.sort_indices(rows)
    ascending = rows.take(by_row).to_pylist()
    pieces: list[pa.Array] = []
    start = 0
    for chunk in adds.chunks:
        end = start + len(chunk)
        low, high = bisect_left(ascending, start), bisect_left(ascending, end)
        if high > low:
            pieces.append(chunk.take(pa.array([row - start for row in ascending[low:high]], pa.int64())))
        start = end
    # The i-th smallest row stands at by_row[i] of `rows`: the inverse permutation puts each back there.
    return pa.concat_arrays(pieces).take(pc.sort_indices(by_row))


def _blocks(groups: list[tuple[int, int]]) -> Iterator[list[tuple[int, int]]]:
    """Consecutive groups [start, end) gathered into blocks of at least BLOCK_ROWS rows (the last may
    hold fewer)."""
    block: list[tuple[int, int]] = []
    for group in groups:
        block.append(group)
        if block[-1][1] - block[0][0] >= BLOCK_ROWS:
            yield block
            block = []
    if block:
        yield block


def _bucket_bounds(sorted_names: pa.Array) -> Iterator[tuple[int, int]]:
    """[start, end) of each bucket of about BUCKET_ROWS sorted names, never cutting between equal names."""
    start, total = 0, len(sorted_names)
    while start < total:
        end = min(start + BUCKET_ROWS, total)
        if end < total:
            last = sorted_names[end - 1].as_py()
            # Equal names are adjacent: find the end of the run of `last` (rare: Delta names files by UUID).
            while end < total and sorted_names[end].as_py() == last:
                end += 1
        yield start, end
        start = end


@dataclass(frozen=True)
class _Ordered:
    """A checkpoint's adds in index order: the always-read ones first (checkpoint order), then the others
    by raw base name."""

    order: pa.Array  # the adds' ordinals, in index order
    names: pa.Array  # their raw base names, in index order
    always: int  # how many come first
    repeated: frozenset[str]


def _ordered(adds: pa.ChunkedArray, table_root: str) -> _Ordered | None:
    """The index order of the adds, and the base names `AddCandidates(∅).repeated` finds over the whole
    checkpoint, computed as a restricted replay computes it (the always-read adds parsed to their decoded
    base names, the others' raw base names passed over); None when the always-read adds already make the
    replay refuse (parsing fails, or one file twice): no index then, the replay refuses as before."""
    paths = pc.struct_field(adds, "path").combine_chunks()
    names, always = raw_basenames(paths), always_admitted(paths)
    first, others = pc.indices_nonzero(always), pc.indices_nonzero(pc.invert(always))
    other_names = names.take(others)
    by_name = pc.sort_indices(other_names)
    rows = add_rows(adds.take(first).combine_chunks())
    actions = parse_actions(({"add": row} for row in rows), table_root, include_removes=False)
    locations = [add.location for add in actions.adds]
    if len(set(locations)) != len(locations):
        return None
    candidates = AddCandidates(frozenset(), passed_over=[other_names])
    repeated = candidates.repeated([location.rsplit("/", 1)[-1] for location in locations])
    order = pa.concat_arrays([first, others.take(by_name)]).cast(pa.int64())
    return _Ordered(order, names.take(order), len(first), frozenset(repeated))


def _stored_type(add_type: pa.DataType) -> pa.DataType:
    """The add type as a shard gives it back: Arrow IPC names a map's entries `entries` where the Parquet
    reader names them after their column (`add_rows` reads neither name)."""
    return pa.ipc.read_schema(pa.schema([("add", add_type)]).serialize()).field("add").type


def _json_exact(actions: list[dict[str, Any]]) -> bool:
    """Whether the actions come back from JSON as they are (no bytes, no non-string map keys, ...)."""
    try:
        return json.loads(json.dumps(actions)) == actions
    except (TypeError, ValueError):
        return False
