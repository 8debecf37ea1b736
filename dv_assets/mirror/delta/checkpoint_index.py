"""A mirror-owned index of a Delta checkpoint, so that a run after it reads a few thousand rows of it, not
all of them.

A checkpoint is immutable. The first time a run ends with a checkpoint to continue from, the mirror writes
an index of it into a folder it owns (`CheckpointIndexes`, under the Iceberg table's location): the
checkpoint's adds, exactly the Arrow rows a restricted replay reads of it (`DeltaLog.checkpoint_contents`:
the columns of `read_checkpoint(stats=False)`), with their ordinal in the checkpoint, in one Parquet file
whose row groups are

* first the adds `AddCandidates` admits whatever it is asked (`always_admitted`: decoding may change
  their base name), read by every lookup;
* then buckets: the other adds sorted by raw base name, cut into row groups of about BUCKET_ROWS rows,
  never between two adds of one base name; the manifest keeps each bucket's first name.

and a manifest (JSON, written last: an index without one does not exist) holding the checkpoint's files
with their size and modification time (parts and sidecars), its other actions (protocol, metaData, ...)
as it has them, the row count of every row group, and the base names `AddCandidates(∅).repeated` finds
over the whole checkpoint.

A restricted replay with base names K then reads the first row groups and K's buckets, restores checkpoint
order by ordinal and filters with `AddCandidates(K)`: every add it leaves unread is in another bucket, so
its raw base name is not one of K and it may not change, which `AddCandidates(K)` would drop too. The
same rows in the same order, so the same replay, changes and refusals. The names seen twice, which the
replay reads too (a file may be listed twice), are the manifest's minus K: for a name outside K, the
count `AddCandidates(K).repeated` takes is the one over the whole checkpoint.

An index is used only when everything checks: its format, the table root, the checkpoint's files (names,
sizes, modification times: a rewritten or replaced checkpoint is another one), the row groups and the add
type of its Parquet file. Otherwise, or when it cannot be read, the run reads the checkpoint as before.
"""

from __future__ import annotations

import json
import uuid
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dv_assets.mirror.delta.actions import parse_actions
from dv_assets.mirror.delta.log import (
    AddCandidates,
    Checkpoint,
    DeltaLog,
    add_rows,
    always_admitted,
    raw_basenames,
)
from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.io import FileInfo, FileIO

FORMAT = "dvmirror-delta-checkpoint-index"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
ADDS = "adds.parquet"
FOLDER_PREFIX = "dvmirror-checkpoint-"
# Rows per bucket: a lookup of K base names reads at most |K| buckets (and the always-read rows).
BUCKET_ROWS = 2048
# Rows copied into index order at a time while writing (what the build holds besides the checkpoint's adds).
BLOCK_ROWS = 1 << 16
# What reading an index or a checkpoint may raise besides MirrorInputError: the index is then not used.
_READ_ERRORS = (OSError, pa.ArrowException, ValueError, KeyError, TypeError)


@dataclass(frozen=True)
class SourceFile:
    """A file of the checkpoint as the index saw it: a rewritten or replaced file differs in one of these."""

    location: str
    size: int | None
    mtime_s: float | None

    @classmethod
    def of(cls, info: FileInfo) -> SourceFile:
        return cls(info.location, info.size, info.mtime_s)

    def to_json(self) -> dict[str, Any]:
        return {"location": self.location, "size": self.size, "mtime_s": self.mtime_s}


@dataclass(frozen=True)
class CheckpointIndex:
    """One checkpoint's index, its manifest checked against the log (`CheckpointIndexes.find`)."""

    folder: str
    version: int
    actions: tuple[dict[str, Any], ...]  # the checkpoint's other actions, in order
    always_groups: int  # the first row groups: the adds read by every lookup
    bucket_first: tuple[str, ...]  # the first raw base name of each bucket (row group always_groups + i)
    group_rows: tuple[int, ...]
    add_type: str
    repeated: frozenset[str]

    def groups_of(self, basenames: Iterable[str]) -> list[int]:
        """The row groups to read for these raw base names: the always-read ones and their buckets."""
        buckets = {bisect_right(self.bucket_first, name) - 1 for name in basenames}
        return [*range(self.always_groups), *sorted(self.always_groups + b for b in buckets if b >= 0)]


class CheckpointIndexes:
    """The folder of a mirror's checkpoint indexes (`<table location>/dvmirror-delta-index`, given by the
    caller: this package knows nothing of Iceberg), through `FileIO`. One instance per run: the folder is
    listed once."""

    def __init__(self, root: str, io: FileIO | None = None) -> None:
        self.root = root.rstrip("/")
        self._io = io or FileIO()
        self._folders: list[str] | None = None

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
            except (*_READ_ERRORS, MirrorInputError):
                index = None
            if index is not None:
                return index
        return None

    def read(self, index: CheckpointIndex, candidates: AddCandidates) -> list[dict[str, Any]] | None:
        """What `DeltaLog.read_checkpoint(checkpoint, stats=False, candidates=candidates)` yields, as far as
        replay can tell (the other actions first, then the admitted adds in checkpoint order); None when the
        index cannot be read."""
        if not index.group_rows:  # a checkpoint without adds: no adds file
            return list(index.actions)
        try:
            with self._io.open_input(f"{index.folder}/{ADDS}") as handle:
                parquet = pq.ParquetFile(handle, page_checksum_verification=True)
                metadata = parquet.metadata
                rows = tuple(metadata.row_group(i).num_rows for i in range(metadata.num_row_groups))
                if rows != index.group_rows or str(parquet.schema_arrow.field("add").type) != index.add_type:
                    return None
                groups = index.groups_of(candidates.basenames)
                table = parquet.read_row_groups(groups, use_threads=False)
            # Only K's rows of its buckets (a few of thousands) and the always-read rows go on to the
            # filter, which keeps exactly them: a superset of what it keeps, so the same rows.
            always_rows = sum(index.group_rows[: index.always_groups])
            in_buckets = table.slice(always_rows)
            named = pc.is_in(in_buckets.column("basename"), value_set=pa.array(sorted(candidates.basenames)))
            table = pa.concat_tables([table.slice(0, always_rows), in_buckets.filter(named)])
            adds = table.sort_by("ordinal").column("add").combine_chunks()
            admitted = candidates.admitted(adds) if len(adds) else adds
            return [*index.actions, *({"add": row} for row in add_rows(admitted))]
        except _READ_ERRORS:
            return None

    def _version_folders(self, version: int) -> list[str]:
        prefix = f"{FOLDER_PREFIX}{version:020d}-"
        return [f for f in self._listed() if f.rsplit("/", 1)[-1].startswith(prefix)]

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
        manifest = json.loads(self._io.read(f"{folder}/{MANIFEST}"))
        if (
            manifest.get("format") != FORMAT
            or manifest.get("format_version") != FORMAT_VERSION
            or manifest.get("table_root") != log.table_root
            or manifest.get("checkpoint_version") != version
        ):
            return None
        sources = [SourceFile(**s) for s in manifest["files"]]
        if sources[: len(parts)] != parts:
            return None
        # The sidecars: the checkpoint's parts are unchanged, so these are the ones they name.
        sidecars = sources[len(parts) :]
        if sidecars:
            found = self._io.stat_many([s.location for s in sidecars])
            if [SourceFile(i.location, i.size, i.mtime_s) for i in found] != sidecars:
                return None
        return CheckpointIndex(
            folder=folder,
            version=version,
            actions=tuple(manifest["actions"]),
            always_groups=int(manifest["always_groups"]),
            bucket_first=tuple(manifest["bucket_first"]),
            group_rows=tuple(manifest["group_rows"]),
            add_type=str(manifest["add_type"]),
            repeated=frozenset(manifest["repeated"]),
        )

    # --- writing ----------------------------------------------------------------------------------

    def build(
        self, log: DeltaLog, checkpoint: Checkpoint, infos: Mapping[str, FileInfo]
    ) -> CheckpointIndex | None:
        """Write the index of `checkpoint` (whose files `infos` describes) into a new folder, the manifest
        last, and return it as `find` would; None when the checkpoint cannot be indexed, or reading or
        writing fails (nothing is then used; a partial folder without its manifest is never read)."""
        if any(infos.get(f.name) is None for f in checkpoint.files):
            return None
        try:
            contents = log.checkpoint_contents(checkpoint)
            if contents is None or not _json_exact(contents.actions):
                return None
            adds = pa.chunked_array(contents.adds) if contents.adds else None  # not copied
            ordered = None if adds is None else _ordered(adds, log.table_root)
            if adds is not None and ordered is None:
                return None
            parts = [SourceFile.of(infos[f.name]) for f in checkpoint.files]
            sidecars = [SourceFile.of(i) for i in self._io.stat_many(contents.files[len(parts) :])]
            folder = f"{self.root}/{FOLDER_PREFIX}{checkpoint.version:020d}-{uuid.uuid4()}"
            self._io.makedirs(folder)
            groups, bucket_first, repeated = (0, []), [], frozenset()
            if adds is not None and ordered is not None:
                groups, bucket_first = self._write_adds(f"{folder}/{ADDS}", adds, ordered)
                repeated = ordered.repeated
            manifest = {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "table_root": log.table_root,
                "checkpoint_version": checkpoint.version,
                "files": [s.to_json() for s in (*parts, *sidecars)],
                "actions": contents.actions,
                "always_groups": groups[0],
                "bucket_first": bucket_first,
                "group_rows": groups[1],
                "add_type": "" if adds is None else str(adds.type),
                "repeated": sorted(repeated),
            }
            self._io.write(f"{folder}/{MANIFEST}", json.dumps(manifest).encode())
        except (*_READ_ERRORS, MirrorInputError):
            return None
        if self._folders is not None:
            self._folders.append(folder)
        return self.find(log, checkpoint, infos)

    def _write_adds(
        self, location: str, adds: pa.ChunkedArray, ordered: _Ordered
    ) -> tuple[tuple[int, list[int]], list[str]]:
        """The adds file; ((always-read row groups, rows per row group), first base name per bucket)."""
        always = ordered.always
        groups = [(i, min(i + BUCKET_ROWS, always)) for i in range(0, always, BUCKET_ROWS)]
        buckets = [(always + a, always + b) for a, b in _bucket_bounds(ordered.names.slice(always))]
        schema = pa.schema([("ordinal", pa.int64()), ("basename", pa.string()), ("add", adds.type)])
        # No column statistics: nothing reads them, and without them the footer a lookup parses is small.
        # Page checksums: a page of the file that rotted is refused on reading, never read as other rows.
        options = {"write_statistics": False, "write_page_checksum": True}
        with self._io.parquet_writer(location, schema, **options) as writer:
            # The adds are copied into index order a block of row groups at a time, not all at once.
            for block in _blocks([*groups, *buckets]):
                first, last = block[0][0], block[-1][1]
                order = ordered.order.slice(first, last - first)
                columns = [order, ordered.names.slice(first, last - first), adds.take(order)]
                table = pa.table(columns, schema=schema)
                for start, end in block:
                    writer.write_table(table.slice(start - first, end - start), row_group_size=end - start)
        rows = [end - start for start, end in [*groups, *buckets]]
        return (len(groups), rows), [ordered.names[start].as_py() for start, _end in buckets]

    def remove_older(self, version: int) -> None:
        """Delete this folder's indexes of checkpoints before `version` (the mirror's own files only: the
        folders it named; their manifest first, so that a half-deleted index is never read)."""
        for folder in list(self._listed()):
            name = folder.rsplit("/", 1)[-1]
            digits = name[len(FOLDER_PREFIX) : len(FOLDER_PREFIX) + 20]
            if not digits.isdigit() or int(digits) >= version:
                continue
            self._io.delete_quietly([f"{folder}/{MANIFEST}", f"{folder}/{ADDS}"])
            self._io.delete_dir_quietly(folder)
            self._folders = [f for f in self._listed() if f != folder]


def _blocks(groups: list[tuple[int, int]]) -> Iterator[list[tuple[int, int]]]:
    """Consecutive row groups [start, end) gathered into blocks of at least BLOCK_ROWS rows (the last may
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


def _json_exact(actions: list[dict[str, Any]]) -> bool:
    """Whether the actions come back from JSON as they are (no bytes, no non-string map keys, ...)."""
    try:
        return json.loads(json.dumps(actions)) == actions
    except (TypeError, ValueError):
        return False
