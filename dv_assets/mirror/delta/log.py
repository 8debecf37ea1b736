"""Reading a table's `_delta_log`: listing it (into `log_files.LogListing`), JSON commits, checkpoints
(classic single and multi-part, V2 with sidecars, JSON or Parquet) and `_last_checkpoint`.

The files' names are parsed in log_files.py, a checkpoint's Parquet columns turned into actions in
checkpoint_columns.py; replay.py decides which files to read.
Every read of `_delta_log` is here, through `FileIO` (local paths and remote URIs alike); the files the
log names are read elsewhere (data file footers and sizes in data_files.py, DVs in dv/reader.py).

Actions are streamed, never loaded whole: a commit is split into lines one at a time, and a Parquet
checkpoint (each part, each sidecar) is read batch by batch, only the columns replay uses, so what
a checkpoint of a million files costs in memory is the state it builds, not its rows as Python dicts.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dv_assets.mirror.delta.add_candidates import AddCandidates
from dv_assets.mirror.delta.checkpoint_columns import (
    CHECKPOINT_COLUMNS,
    batch_actions,
    indexable_adds,
    selected_columns,
)
from dv_assets.mirror.delta.log_files import (
    LAST_CHECKPOINT,
    LOG_DIR,
    SIDECAR_DIR,
    Checkpoint,
    LogFile,
    LogListing,
    group_listing,
    parse_log_file_name,
)
from dv_assets.mirror.errors import MirrorInputError, StorageError
from dv_assets.mirror.io import REQUEST_CONCURRENCY, FileIO, NotARegularFileError
from dv_assets.mirror.locations import is_remote, resolve_location

# Bytes read at a time from a JSON commit or checkpoint (lines are cut from them as they come).
JSON_CHUNK_BYTES = 1 << 20
# The same on an object store, where each chunk is a request of its own (a ranged GET).
REMOTE_JSON_CHUNK_BYTES = 8 << 20
# Rows per Arrow batch when streaming a checkpoint: bounds the Python objects alive at once.
CHECKPOINT_BATCH_ROWS = 8192
# On an object store a replay's next commits are read ahead, this many at a time, each at most this
# big (a larger one is streamed when its turn comes): a request's latency is paid in parallel, not once
# per version, and what is held ahead stays bounded.
READ_AHEAD_COMMITS = 8
READ_AHEAD_MAX_BYTES = 4 << 20
# One pool for every log of the process (a fleet holds hundreds): its threads only wait on requests.
_READ_AHEAD_POOL = ThreadPoolExecutor(REQUEST_CONCURRENCY, thread_name_prefix="dvmirror-log")


_CHECKPOINT_UNREADABLE = "cannot read checkpoint Parquet"
_NOT_A_FILE = (NotARegularFileError, IsADirectoryError, NotADirectoryError)

_READ_HERE = object()  # `DeltaLog.list`'s default: it reads `_last_checkpoint` itself


class DeltaLog:
    """Reads the files of one table's `_delta_log`. Errors name the table, the version and the file."""

    def __init__(self, table_root: str, io: FileIO | None = None) -> None:
        self.table_root = table_root
        self._io = io or FileIO()
        self._log_dir = f"{table_root.rstrip('/')}/{LOG_DIR}"
        self._remote = is_remote(table_root)
        self._ahead: dict[str, Future[bytes]] = {}  # commit name → its bytes, being read
        self._queued: deque[str] = deque()  # the commits to read ahead next, in order

    def file_path(self, name: str) -> str:
        return f"{self._log_dir}/{name}"

    def read_ahead(self, commits: Sequence[LogFile], listing: LogListing) -> None:
        """The commits a replay is about to read, in order: on an object store, READ_AHEAD_COMMITS of
        them are read in the background at a time (those the listing says are at most
        READ_AHEAD_MAX_BYTES), each handed to `iter_commit` when it asks. Replaces any earlier order."""
        self._ahead.clear()  # a read in flight finishes on its own; its bytes are dropped
        self._queued.clear()
        if not self._remote:
            return
        for commit in commits:
            info = listing.infos.get(commit.name)
            if info is not None and info.size is not None and info.size <= READ_AHEAD_MAX_BYTES:
                self._queued.append(commit.name)
        self._top_up()

    def _top_up(self) -> None:
        while self._queued and len(self._ahead) < READ_AHEAD_COMMITS:
            name = self._queued.popleft()
            self._ahead[name] = _READ_AHEAD_POOL.submit(self._io.read, self.file_path(name))

    def list(self, from_version: int = 0, last_checkpoint: dict | object | None = _READ_HERE) -> LogListing:
        """The log's files of versions >= `from_version` (all by default). `last_checkpoint`: the
        `_last_checkpoint` the caller already read (None: it has none); read here when not given."""
        try:
            infos = self._io.list_dir(self._log_dir, from_name=f"{from_version:020d}" if from_version else "")
        except OSError as exc:
            raise self._read_failed(exc, "cannot list the Delta log", file=self._log_dir) from exc
        by_name = {info.location.rsplit("/", 1)[-1]: info for info in infos}
        files = [f for name in by_name if (f := parse_log_file_name(name)) is not None]
        if not files:
            raise self._error("not a Delta table: no commits or checkpoints", file=self._log_dir)
        hint = self.read_last_checkpoint() if last_checkpoint is _READ_HERE else last_checkpoint
        assert hint is None or isinstance(hint, dict)
        return group_listing(files, hint, {f.name: by_name[f.name] for f in files})

    def has_version_after(self, version: int) -> bool:
        """Whether the log holds a commit or checkpoint of a version after `version`: one listing from the
        next version's name on (a stat per name kept, on local storage), no file read."""
        try:
            infos = self._io.list_dir(self._log_dir, from_name=f"{version + 1:020d}")
        except OSError as exc:
            raise self._read_failed(exc, "cannot list the Delta log", file=self._log_dir) from exc
        return any(
            (f := parse_log_file_name(info.location.rsplit("/", 1)[-1])) is not None and f.version > version
            for info in infos
        )

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
                        if not indexable_adds(present):
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
                if not indexable_adds(present):
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
        """The file's bytes split at b"\n" (the last piece too, empty or not), read a chunk at a time
        (or, when it was read ahead, from its bytes)."""
        ahead = self._ahead.pop(path.rsplit("/", 1)[-1], None)
        if ahead is not None:
            self._top_up()
            try:
                content = ahead.result()
            except OSError as exc:
                raise self._read_failed(exc, "cannot read log file", version=version, file=path) from exc
            yield from content.split(b"\n")
            return
        try:
            handle = self._io.open_input(path)
        except OSError as exc:
            raise self._read_failed(exc, "cannot read log file", version=version, file=path) from exc
        with handle:
            pending = bytearray()  # the start of a line the next chunk ends
            while True:
                try:
                    chunk = handle.read(REMOTE_JSON_CHUNK_BYTES if self._remote else JSON_CHUNK_BYTES)
                except OSError as exc:
                    raise self._read_failed(exc, "cannot read log file", version=version, file=path) from exc
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
            yield from batch_actions(batch, candidates)

    def _iter_parquet_batches(
        self, path: str, version: int, columns: tuple[str, ...], *, stats: bool
    ) -> Iterator[pa.RecordBatch]:
        """A checkpoint Parquet file's batches, only the columns replay uses."""
        try:
            handle = self._io.open_input(path)
        except FileNotFoundError as exc:
            if path.rsplit("/", 1)[0] == f"{self._log_dir}/{SIDECAR_DIR}":
                # Named by the checkpoint, not listed: a file the version needs is not there (as a data
                # file the log adds): a refusal of that version, not a storage error.
                raise self._error(
                    "the sidecar file the checkpoint names does not exist", version=version, file=path
                ) from exc
            raise self._read_failed(exc, _CHECKPOINT_UNREADABLE, version=version, file=path) from exc
        except (OSError, pa.ArrowException) as exc:
            raise self._read_failed(exc, _CHECKPOINT_UNREADABLE, version=version, file=path) from exc
        with handle:
            try:
                parquet = pq.ParquetFile(handle)
                selected = selected_columns(parquet.schema_arrow, columns, stats=stats)
                if not selected:
                    return
                batches = iter(parquet.iter_batches(batch_size=CHECKPOINT_BATCH_ROWS, columns=selected))
            except (OSError, pa.ArrowException) as exc:
                raise self._read_failed(exc, _CHECKPOINT_UNREADABLE, version=version, file=path) from exc
            while True:
                try:
                    batch = next(batches)
                except StopIteration:
                    return
                except (OSError, pa.ArrowException) as exc:
                    raise self._read_failed(exc, _CHECKPOINT_UNREADABLE, version=version, file=path) from exc
                yield batch

    def _error(self, reason: str, *, version: int | None = None, file: str | None = None) -> MirrorInputError:
        return MirrorInputError(reason, table=self.table_root, version=version, file=file)

    def _read_failed(
        self, exc: BaseException, doing: str, *, file: str, version: int | None = None
    ) -> MirrorInputError | StorageError:
        """A failed read of the log itself: a storage error of its kind (it did not answer, the file is
        gone, access is denied: exit 5, never a refusal). A refusal only when the storage answered with
        something the log cannot be: a folder, a FIFO or a device where a file is named, bytes that are
        not Parquet (an ArrowException that is not an OSError)."""
        if isinstance(exc, OSError) and not isinstance(exc, _NOT_A_FILE):
            return StorageError.of(exc, file, table=self.table_root, doing=doing)
        return self._error(f"{doing}: {exc}", version=version, file=file)


@dataclass
class CheckpointContents:
    """A whole checkpoint (`DeltaLog.checkpoint_contents`): its actions other than adds, in order; its
    adds, in order, as Arrow struct arrays of the columns a restricted replay reads; every file read
    (its parts, then the sidecars they name, by location)."""

    actions: list[dict[str, Any]]
    adds: list[pa.StructArray]
    files: list[str]
