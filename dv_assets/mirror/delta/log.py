"""Listing and reading a table's `_delta_log`: JSON commits, checkpoints (classic single and multi-part,
V2 with sidecars, JSON or Parquet) and `_last_checkpoint`.

Like delta-kernel-rs, file names are parsed into typed LogFiles, and a listing is grouped into the
commits and the complete checkpoints per version; replay.py decides which of them to read.
Every read of `_delta_log` is here, through `FileIO` (local paths and remote URIs alike); the files the
log names are read elsewhere (data file footers and sizes in data_files.py, DVs in dv/reader.py).

Actions are streamed, never loaded whole: a commit is split into lines one at a time, and a Parquet
checkpoint (each part, each sidecar) is read batch by batch, only the columns replay uses, so what
a checkpoint of a million files costs in memory is the state it builds, not its rows as Python dicts.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson
import pyarrow.parquet as pq

from dv_assets.mirror.delta.actions import NUM_RECORDS_READ
from dv_assets.mirror.delta.paths import resolve_location
from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.io import FileInfo, FileIO

LOG_DIR = "_delta_log"
SIDECAR_DIR = "_sidecars"
LAST_CHECKPOINT = "_last_checkpoint"
# Checkpoint columns that make up a table state; tombstones (`remove`) and txn/domainMetadata are not needed.
CHECKPOINT_COLUMNS = ("add", "metaData", "protocol", "sidecar", "checkpointMetadata")
# The fields of a checkpoint's `add` that AddFile reads (its stats_parsed is chosen separately).
ADD_FIELDS = (
    "path",
    "partitionValues",
    "size",
    "modificationTime",
    "dataChange",
    "tags",
    "deletionVector",
    "stats",
)
_REQUIRED_ADD_FIELDS = ("path", "size")
# Rows per Arrow batch when streaming a checkpoint: bounds the Python objects alive at once.
CHECKPOINT_BATCH_ROWS = 8192
# Bytes read at a time from a JSON commit or checkpoint (lines are cut from them as they come).
JSON_CHUNK_BYTES = 1 << 20


class LogFileKind(enum.Enum):
    COMMIT = "commit"
    CHECKPOINT = "checkpoint"  # N.checkpoint.parquet (classic; may also hold V2 sidecar actions)
    MULTIPART_CHECKPOINT = "multipart"  # N.checkpoint.PPPPPPPPPP.TTTTTTTTTT.parquet
    V2_CHECKPOINT = "v2"  # N.checkpoint.<uuid>.json|parquet


_VERSION = r"(\d{20})"
_PATTERNS: tuple[tuple[LogFileKind, re.Pattern[str]], ...] = (
    (LogFileKind.COMMIT, re.compile(rf"^{_VERSION}\.json$")),
    (LogFileKind.CHECKPOINT, re.compile(rf"^{_VERSION}\.checkpoint\.parquet$")),
    (
        LogFileKind.MULTIPART_CHECKPOINT,
        re.compile(rf"^{_VERSION}\.checkpoint\.(\d{{10}})\.(\d{{10}})\.parquet$"),
    ),
    (
        LogFileKind.V2_CHECKPOINT,
        re.compile(
            rf"^{_VERSION}\.checkpoint\.([0-9a-fA-F]{{8}}(?:-[0-9a-fA-F]{{4}}){{3}}-[0-9a-fA-F]{{12}})\.(json|parquet)$"
        ),
    ),
)


@dataclass(frozen=True)
class LogFile:
    """One file of `_delta_log` that log replay can use; parsed from its name alone."""

    version: int
    kind: LogFileKind
    name: str
    part: int | None = None  # multi-part checkpoints: 1-based part number
    num_parts: int | None = None

    @property
    def is_json(self) -> bool:
        return self.name.endswith(".json")


def parse_log_file_name(name: str) -> LogFile | None:
    """The LogFile a name denotes, or None for files replay ignores (.crc, compactions, temp files)."""
    for kind, pattern in _PATTERNS:
        match = pattern.match(name)
        if match is None:
            continue
        version = int(match.group(1))
        if kind is LogFileKind.MULTIPART_CHECKPOINT:
            part, num_parts = int(match.group(2)), int(match.group(3))
            if not 1 <= part <= num_parts:
                return None
            return LogFile(version, kind, name, part, num_parts)
        return LogFile(version, kind, name)
    return None


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint of one version: one file, or all parts of a multi-part checkpoint."""

    version: int
    files: tuple[LogFile, ...]

    @property
    def kind(self) -> LogFileKind:
        return self.files[0].kind


@dataclass(frozen=True)
class LogListing:
    """What `_delta_log` holds: the commit files and the complete checkpoints, by version."""

    commits: dict[int, LogFile]
    checkpoints: dict[int, list[Checkpoint]]  # best candidate first
    # What the listing said of each file, by name (size, modification time): what a mirror-owned index of
    # a checkpoint is checked against (`checkpoint_index.py`). Empty for a listing made by hand.
    infos: dict[str, FileInfo] = field(default_factory=dict, compare=False)

    @property
    def versions(self) -> set[int]:
        return set(self.commits) | set(self.checkpoints)


def group_listing(
    files: list[LogFile], last_checkpoint: dict | None = None, infos: dict[str, FileInfo] | None = None
) -> LogListing:
    """Group parsed log files; incomplete multi-part checkpoints are dropped (a writer may have died)."""
    commits = {f.version: f for f in files if f.kind is LogFileKind.COMMIT}
    parts: dict[tuple[int, int], dict[int, LogFile]] = {}
    checkpoints: dict[int, list[Checkpoint]] = {}
    for f in sorted(files, key=lambda f: f.name):
        if f.kind is LogFileKind.MULTIPART_CHECKPOINT:
            assert f.num_parts is not None and f.part is not None
            parts.setdefault((f.version, f.num_parts), {})[f.part] = f
        elif f.kind in (LogFileKind.CHECKPOINT, LogFileKind.V2_CHECKPOINT):
            checkpoints.setdefault(f.version, []).append(Checkpoint(f.version, (f,)))
    for (version, num_parts), found in parts.items():
        if len(found) == num_parts:
            files_in_order = tuple(found[i] for i in range(1, num_parts + 1))
            checkpoints.setdefault(version, []).append(Checkpoint(version, files_in_order))
    for candidates in checkpoints.values():
        candidates.sort(key=lambda c: _preference(c, last_checkpoint))
    return LogListing(commits, checkpoints, infos or {})


def _preference(checkpoint: Checkpoint, last_checkpoint: dict | None) -> tuple[int, int]:
    """Sort key: the checkpoint `_last_checkpoint` names first (it is the one known to be complete),
    then V2, then classic single-file, then multi-part."""
    hinted = 1
    if last_checkpoint and last_checkpoint.get("version") == checkpoint.version:
        v2 = last_checkpoint.get("v2Checkpoint") or {}
        names = {f.name for f in checkpoint.files}
        if v2.get("path") in names or (
            not v2 and (last_checkpoint.get("parts") or 1) == len(checkpoint.files)
        ):
            hinted = 0
    order = {LogFileKind.V2_CHECKPOINT: 0, LogFileKind.CHECKPOINT: 1, LogFileKind.MULTIPART_CHECKPOINT: 2}
    return hinted, order[checkpoint.kind]


_READ_HERE = object()  # `DeltaLog.list`'s default: it reads `_last_checkpoint` itself


class DeltaLog:
    """Reads the files of one table's `_delta_log`. Errors name the table, the version and the file."""

    def __init__(self, table_root: str, io: FileIO | None = None) -> None:
        self.table_root = table_root
        self._io = io or FileIO()
        self._log_dir = f"{table_root.rstrip('/')}/{LOG_DIR}"

    def file_path(self, name: str) -> str:
        return f"{self._log_dir}/{name}"

    def list(self, from_version: int = 0, last_checkpoint: dict | object | None = _READ_HERE) -> LogListing:
        """The log's files of versions >= `from_version` (all by default). `last_checkpoint`: the
        `_last_checkpoint` the caller already read (None: it has none); read here when not given."""
        try:
            infos = self._io.list_dir(self._log_dir, from_name=f"{from_version:020d}" if from_version else "")
        except OSError as exc:
            raise self._error(f"cannot list the Delta log: {exc}", file=self._log_dir) from exc
        by_name = {info.location.rsplit("/", 1)[-1]: info for info in infos}
        files = [f for name in by_name if (f := parse_log_file_name(name)) is not None]
        if not files:
            raise self._error("not a Delta table: no commits or checkpoints", file=self._log_dir)
        hint = self.read_last_checkpoint() if last_checkpoint is _READ_HERE else last_checkpoint
        assert hint is None or isinstance(hint, dict)
        return group_listing(files, hint, {f.name: by_name[f.name] for f in files})

    def read_last_checkpoint(self) -> dict | None:
        """`_last_checkpoint`, a hint only: missing or unreadable means no hint."""
        try:
            parsed = json.loads(self._io.read(self.file_path(LAST_CHECKPOINT)))
        except (OSError, ValueError):
            return None
        return parsed if isinstance(parsed, dict) else None

    def iter_commit(self, commit: LogFile) -> Iterator[dict[str, Any]]:
        """The actions of a JSON commit, in file order, parsed one line at a time."""
        return self._iter_json_lines(commit.name, commit.version)

    def read_checkpoint(
        self, checkpoint: Checkpoint, *, stats: bool = True, candidates: AddCandidates | None = None
    ) -> Iterator[dict[str, Any]]:
        """The state-bearing actions of a checkpoint (adds, metaData, protocol), sidecars expanded.

        Without `stats`, adds come without their stats (but for what gives their numRecords), and
        Parquet parts skip the columns that hold them. With `candidates`, only the adds that may name a
        file with one of its (decoded) base names, filtered in Arrow before any Python object is made.
        """
        for f in checkpoint.files:
            if f.is_json:
                actions = self._iter_json_lines(f.name, f.version)
                if candidates is not None:
                    actions = (a for a in actions if candidates.admits_json(a))
            else:
                actions = self._iter_parquet_actions(
                    self.file_path(f.name), f.version, CHECKPOINT_COLUMNS, stats=stats, candidates=candidates
                )
            for action in actions:
                if (sidecar := action.get("sidecar")) is not None:
                    yield from self._read_sidecar(
                        sidecar, checkpoint.version, f.name, stats=stats, candidates=candidates
                    )
                elif action.get("remove") is None:
                    yield action

    def checkpoint_contents(self, checkpoint: Checkpoint) -> CheckpointContents | None:
        """The whole checkpoint as `read_checkpoint(stats=False)` reads it, its adds kept as Arrow: what a
        mirror-owned index of it is made of (`checkpoint_index.py`). None when its adds cannot all be
        held so: an add in a JSON part, an `add` column that is no struct with a `path`, adds of
        differing types. Read errors raise as `read_checkpoint`'s do."""
        contents = CheckpointContents([], [], [])
        for f in checkpoint.files:
            location = self.file_path(f.name)
            contents.files.append(location)
            if f.is_json:
                for action in self._iter_json_lines(f.name, f.version):
                    if action.get("add") is not None:
                        return None
                    if (sidecar := action.get("sidecar")) is not None:
                        if not self._sidecar_contents(sidecar, checkpoint.version, f.name, contents):
                            return None
                    elif action.get("remove") is None:
                        contents.actions.append(action)
                continue
            for batch in self._iter_parquet_batches(location, f.version, CHECKPOINT_COLUMNS, stats=False):
                for name in batch.schema.names:
                    column = batch.column(name)
                    present = column.filter(pc.is_valid(column))
                    if len(present) == 0:
                        continue
                    if name == "add":
                        if not _indexable_adds(present):
                            return None
                        contents.adds.append(present)
                        continue
                    rows = present.to_pylist(maps_as_pydicts="strict")
                    if name != "sidecar":
                        contents.actions += ({name: row} for row in rows)
                        continue
                    for row in rows:
                        if not self._sidecar_contents(row, checkpoint.version, f.name, contents):
                            return None
        if len({adds.type for adds in contents.adds}) > 1:
            return None
        return contents

    def _sidecar_contents(
        self, sidecar: dict, version: int, referenced_by: str, contents: CheckpointContents
    ) -> bool:
        location = self._sidecar_location(sidecar, version, referenced_by)
        contents.files.append(location)
        for batch in self._iter_parquet_batches(location, version, ("add",), stats=False):
            for name in batch.schema.names:
                column = batch.column(name)
                present = column.filter(pc.is_valid(column))
                if len(present) == 0:
                    continue
                if not _indexable_adds(present):
                    return False
                contents.adds.append(present)
        return True

    def _read_sidecar(
        self,
        sidecar: dict,
        version: int,
        referenced_by: str,
        *,
        stats: bool,
        candidates: AddCandidates | None = None,
    ) -> Iterator[dict[str, Any]]:
        location = self._sidecar_location(sidecar, version, referenced_by)
        return self._iter_parquet_actions(location, version, ("add",), stats=stats, candidates=candidates)

    def _sidecar_location(self, sidecar: dict, version: int, referenced_by: str) -> str:
        path = sidecar.get("path")
        if not path:
            raise self._error(f"sidecar action without a path in {referenced_by}", version=version)
        sidecar_dir = f"{self._log_dir}/{SIDECAR_DIR}"
        location = resolve_location(sidecar_dir, path)
        # PROTOCOL.md: sidecar files always reside in the table's own _delta_log/_sidecars folder.
        if location.rsplit("/", 1)[0] != sidecar_dir:
            raise self._error(
                f"sidecar {path!r} in {referenced_by} is not a file of {sidecar_dir}; refused",
                version=version,
                file=location,
            )
        return location

    def _iter_json_lines(self, name: str, version: int) -> Iterator[dict[str, Any]]:
        path = self.file_path(name)
        # Newline-delimited JSON: split on "\n" only. str.splitlines() would also split at U+2028,
        # U+0085, \x1c and the like, which may appear raw inside JSON strings (operation parameters,
        # partition values). A trailing "\r" (CRLF) is JSON whitespace, which json.loads skips.
        # Lines are cut from the bytes as they are read (a b"\n" is never part of a multi-byte UTF-8
        # character): neither the file nor a decoded copy of it is ever held whole.
        for number, raw in enumerate(self._lines(path, version), start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise self._error(
                    f"cannot read log file: line {number}: {exc}", version=version, file=path
                ) from exc
            if not line.strip():
                continue
            try:
                action = json.loads(line)
            except ValueError as exc:
                raise self._error(f"line {number} is not JSON: {exc}", version=version, file=path) from exc
            if not isinstance(action, dict):
                raise self._error(f"line {number} is not a JSON object", version=version, file=path)
            yield action

    def _lines(self, path: str, version: int) -> Iterator[bytes]:
        """The file's bytes split at b"\n" (the last piece too, empty or not), read a chunk at a time."""
        try:
            handle = self._io.open_input(path)
        except FileNotFoundError as exc:
            raise self._error("log file is missing", version=version, file=path) from exc
        except OSError as exc:
            raise self._error(f"cannot read log file: {exc}", version=version, file=path) from exc
        with handle:
            pending = bytearray()  # the start of a line the next chunk ends
            while True:
                try:
                    chunk = handle.read(JSON_CHUNK_BYTES)
                except OSError as exc:
                    raise self._error(f"cannot read log file: {exc}", version=version, file=path) from exc
                if not chunk:
                    break
                pieces = chunk.split(b"\n")
                pending += pieces[0]
                if len(pieces) == 1:
                    continue
                yield bytes(pending)
                yield from pieces[1:-1]
                pending = bytearray(pieces[-1])
            yield bytes(pending)

    def _iter_parquet_actions(
        self,
        path: str,
        version: int,
        columns: tuple[str, ...],
        *,
        stats: bool,
        candidates: AddCandidates | None = None,
    ) -> Iterator[dict[str, Any]]:
        """A checkpoint Parquet file's actions, one Arrow batch at a time, only the columns replay uses."""
        for batch in self._iter_parquet_batches(path, version, columns, stats=stats):
            yield from _batch_actions(batch, candidates)

    def _iter_parquet_batches(
        self, path: str, version: int, columns: tuple[str, ...], *, stats: bool
    ) -> Iterator[pa.RecordBatch]:
        """A checkpoint Parquet file's batches, only the columns replay uses."""
        try:
            handle = self._io.open_input(path)
        except FileNotFoundError as exc:
            raise self._error("checkpoint file is missing", version=version, file=path) from exc
        except (OSError, pa.ArrowException) as exc:
            raise self._error(f"cannot read checkpoint Parquet: {exc}", version=version, file=path) from exc
        with handle:
            try:
                parquet = pq.ParquetFile(handle)
                selected = _checkpoint_columns(parquet.schema_arrow, columns, stats=stats)
                if not selected:
                    return
                batches = iter(parquet.iter_batches(batch_size=CHECKPOINT_BATCH_ROWS, columns=selected))
            except (OSError, pa.ArrowException) as exc:
                raise self._error(
                    f"cannot read checkpoint Parquet: {exc}", version=version, file=path
                ) from exc
            while True:
                try:
                    batch = next(batches)
                except StopIteration:
                    return
                except (OSError, pa.ArrowException) as exc:
                    raise self._error(
                        f"cannot read checkpoint Parquet: {exc}", version=version, file=path
                    ) from exc
                yield batch

    def _error(self, reason: str, *, version: int | None = None, file: str | None = None) -> MirrorInputError:
        return MirrorInputError(reason, table=self.table_root, version=version, file=file)


@dataclass
class CheckpointContents:
    """A whole checkpoint (`DeltaLog.checkpoint_contents`): its actions other than adds, in order; its
    adds, in order, as Arrow struct arrays of the columns a restricted replay reads; every file read
    (its parts, then the sidecars they name, by location)."""

    actions: list[dict[str, Any]]
    adds: list[pa.StructArray]
    files: list[str]


def _indexable_adds(adds: pa.Array) -> bool:
    return pa.types.is_struct(adds.type) and adds.type.get_field_index("path") >= 0


def _checkpoint_columns(schema: pa.Schema, columns: tuple[str, ...], *, stats: bool) -> list[str]:
    """The (nested) columns to read of a checkpoint file with this schema: of `add` only the fields
    AddFile reads, and of stats_parsed (the struct form of stats) all of it with `stats`, else its
    numRecords alone (a file's row count must survive dropping its stats)."""
    selected: list[str] = []
    for name in columns:
        if schema.get_field_index(name) < 0:
            continue
        add_type = schema.field(name).type
        if name != "add" or not pa.types.is_struct(add_type):
            selected.append(name)
            continue
        fields = {add_type.field(i).name: add_type.field(i).type for i in range(add_type.num_fields)}
        if any(required not in fields for required in _REQUIRED_ADD_FIELDS):
            selected.append(name)  # read whole, so that parsing names the missing field
            continue
        selected += [f"add.{field}" for field in ADD_FIELDS if field in fields]
        struct_stats = fields.get("stats_parsed")
        if struct_stats is None:
            continue
        if stats:
            selected.append("add.stats_parsed")
        elif pa.types.is_struct(struct_stats) and struct_stats.get_field_index("numRecords") >= 0:
            selected.append("add.stats_parsed.numRecords")
    return selected


def _batch_actions(
    batch: pa.RecordBatch, candidates: AddCandidates | None = None
) -> Iterator[dict[str, Any]]:
    """The actions of one batch of checkpoint rows: each row holds one action in one column. With
    `candidates`, only the adds it admits."""
    for name in batch.schema.names:
        column = batch.column(name)
        present = column.filter(pc.is_valid(column))
        if len(present) == 0:
            continue
        if name == "add" and pa.types.is_struct(present.type):
            if candidates is not None:
                present = candidates.admitted(present)
            yield from ({"add": row} for row in add_rows(present))
        else:
            yield from ({name: row} for row in present.to_pylist(maps_as_pydicts="strict"))


def add_rows(adds: pa.StructArray) -> Iterator[dict[str, Any]]:
    """Checkpoint `add` rows as the dicts AddFile parses, built from whole columns: stats_parsed only
    for the rows without JSON stats, the only rows that use it."""
    names = [adds.type.field(i).name for i in range(adds.type.num_fields)]
    children = dict(zip(names, adds.flatten(), strict=True))
    struct_stats = children.pop("stats_parsed", None)
    values = {name: column_values(child) for name, child in children.items()}
    from_struct: dict[int, Any] = {}
    if struct_stats is not None:
        text = children.get("stats")
        without_text = pc.is_null(text) if text is not None else pa.array([True] * len(adds))
        indices = pc.indices_nonzero(pc.and_(without_text, pc.is_valid(struct_stats)))
        if len(indices):
            parsed = struct_stats.take(indices).to_pylist(maps_as_pydicts="strict")
            from_struct = dict(zip(indices.to_pylist(), parsed, strict=True))
    text = children.get("stats")
    num_records = None if text is None else stats_num_records(text)
    keys: list[Any] = list(values)
    if num_records is not None:
        keys.append(NUM_RECORDS_READ)
        values[NUM_RECORDS_READ] = num_records  # type: ignore[index]
    for index, row_values in enumerate(zip(*values.values(), strict=True)):
        row = dict(zip(keys, row_values, strict=True))
        if index in from_struct:
            row["stats_parsed"] = from_struct[index]
        yield row


def stats_num_records(stats: pa.Array) -> list[int | None] | None:
    """Each JSON stats text's numRecords (None where it has none), read by Arrow's JSON parser for the
    whole column at once: a json.loads per file costs ~4.5 s for a million files, this ~0.4 s. None (the
    caller then parses each text itself, as `AddFile.from_action` does) unless Arrow reads exactly what
    json.loads would: each text one object on a line of its own (no line break in any), numRecords a
    JSON integer, null or absent, and every text valid JSON (Arrow's parser rejects what json.loads
    rejects; it also rejects lone surrogates, NaN in numRecords, repeated keys: those fall back)."""
    if not pa.types.is_string(stats.type) or len(stats) == 0:
        return None
    filled = pc.fill_null(stats, "")
    texts = pc.if_else(pc.equal(filled, ""), pa.scalar("{}"), filled).cast(pa.large_string())
    one_object_per_line = (
        pc.all(pc.starts_with(texts, "{")).as_py()
        and pc.all(pc.ends_with(texts, "}")).as_py()
        and not pc.any(pc.match_substring(texts, "\n")).as_py()
        and not pc.any(pc.match_substring(texts, "\r")).as_py()
    )
    if not one_object_per_line:
        return None
    lines = pa.LargeListArray.from_arrays(pa.array([0, len(texts)], pa.int64()), texts)
    joined = pc.binary_join(lines, pa.scalar("\n", pa.large_string()))[0].as_buffer()
    longest = pc.max(pc.binary_length(texts)).as_py()
    try:
        read = pajson.read_json(
            pa.BufferReader(joined),
            read_options=pajson.ReadOptions(block_size=max(1 << 22, 2 * longest)),
            parse_options=pajson.ParseOptions(
                explicit_schema=_NUM_RECORDS_SCHEMA, unexpected_field_behavior="ignore"
            ),
        )
    except pa.ArrowException:
        return None
    if read.num_rows != len(texts):  # two objects on one line (json.loads: invalid)
        return None
    return read.column("numRecords").to_pylist()


_NUM_RECORDS_SCHEMA = pa.schema([("numRecords", pa.int64())])


def column_values(column: pa.Array) -> list[Any]:
    """`column.to_pylist(maps_as_pydicts="strict")`, faster on what a checkpoint's add columns mostly are
    (a million rows of them in a first version): null-free integers, string maps (mostly empty), and
    columns mostly null (tags, deletion vectors)."""
    rows, nulls = len(column), column.null_count
    if nulls == rows:
        return [None] * rows
    if nulls * 2 > rows:  # only the valid rows are converted, then put in their places
        valid = pc.indices_nonzero(pc.is_valid(column))
        values: list[Any] = [None] * rows
        for index, value in zip(valid.to_pylist(), column_values(column.take(valid)), strict=True):
            values[index] = value
        return values
    kind = column.type
    if nulls == 0 and kind in _NATIVE_INTEGERS:  # read from the data buffer: no scalar per value
        data = memoryview(column.buffers()[1]).cast(_NATIVE_INTEGERS[kind])
        return data[column.offset : column.offset + rows].tolist()
    if pa.types.is_map(kind) and kind.key_type == pa.string() and kind.item_type == pa.string():
        return _string_maps(column) or column.to_pylist(maps_as_pydicts="strict")
    return column.to_pylist(maps_as_pydicts="strict")


_NATIVE_INTEGERS = {pa.int64(): "q", pa.int32(): "i"}  # Arrow buffers are in the machine's byte order


def _string_maps(column: pa.MapArray) -> list[dict[str, str | None] | None] | None:
    """A string map column's rows as dicts; None when a map repeats a key (pyarrow's strict conversion
    then raises its own error)."""
    offsets = column.offsets.to_pylist()  # the slice's own, into the whole keys and items
    keys, items = column.keys.to_pylist(), column.items.to_pylist()
    valid = column.is_valid().to_pylist() if column.null_count else None
    maps: list[dict[str, str | None] | None] = []
    for index in range(len(column)):
        first, end = offsets[index], offsets[index + 1]
        if valid is not None and not valid[index]:
            maps.append(None)
        elif first == end:
            maps.append({})
        else:
            row = dict(zip(keys[first:end], items[first:end], strict=True))
            if len(row) != end - first:
                return None
            maps.append(row)
    return maps


# A raw path whose decoded location may have another base name than the raw path's own: percent escapes
# (`a%2Db` is `a-b`), and a last segment that normalisation removes (`x/.`, `x/..`, `x/`).
_BASENAME_MAY_CHANGE = r"%|(^|/)\.{0,2}$"


def raw_basenames(paths: pa.Array) -> pa.Array:
    """Each raw path's last segment, as written (null for a null path)."""
    return pc.replace_substring_regex(paths, pattern="^.*/", replacement="")


def always_admitted(paths: pa.Array) -> pa.Array:
    """Whether `AddCandidates` admits the add of each raw path whatever base names it is given: decoding
    may change its base name, or it has none (never null)."""
    return pc.fill_null(pc.match_substring_regex(paths, _BASENAME_MAY_CHANGE), True)


@dataclass
class AddCandidates:
    """Which checkpoint adds a restricted replay reads: a SUPERSET of those whose decoded location has one
    of `basenames` (the exact check, on decoded locations, is the replay's). An add is admitted when its
    raw path's base name is one of them, when decoding may change that base name, or when it has no path
    (parsing refuses it); all are, when the `add` column lacks `path` (read whole to be refused).

    `passed_over` keeps the base names of the adds left out (raw = decoded for them), one Arrow array
    per batch: a base name seen twice may be a file listed twice, which the replay must still refuse."""

    basenames: frozenset[str]
    passed_over: list[pa.Array] = field(default_factory=list)
    _value_set: pa.Array = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._value_set = pa.array(sorted(self.basenames), pa.string())

    def admitted(self, adds: pa.StructArray) -> pa.StructArray:
        if adds.type.get_field_index("path") < 0:
            return adds
        paths = pc.struct_field(adds, "path")
        basenames = raw_basenames(paths)
        named = pc.is_in(basenames, value_set=self._value_set)
        mask = pc.or_(named, always_admitted(paths))
        self.passed_over.append(basenames.filter(pc.invert(mask)))
        return adds.filter(mask)

    def admits_json(self, action: dict[str, Any]) -> bool:
        """`admitted` for one action of a JSON checkpoint part (every other action is admitted)."""
        add = action.get("add")
        path = add.get("path") if isinstance(add, dict) else None
        if not isinstance(path, str):
            return True
        basename = path.rsplit("/", 1)[-1]
        if basename in self.basenames or re.search(_BASENAME_MAY_CHANGE, path) is not None:
            return True
        self.passed_over.append(pa.array([basename], pa.string()))
        return False

    def repeated(self, admitted_basenames: list[str]) -> set[str]:
        """The base names seen more than once among the adds passed over and the (decoded) base names of
        those admitted, `admitted_basenames`: where a file may be listed twice unseen."""
        names = pa.chunked_array([*self.passed_over, pa.array(admitted_basenames, pa.string())], pa.string())
        counts = pc.value_counts(names)
        twice = counts.filter(pc.greater(counts.field("counts"), 1)).field("values")
        return set(twice.to_pylist())
