"""Listing and reading a table's `_delta_log`: JSON commits, checkpoints (classic single and multi-part,
V2 with sidecars, JSON or Parquet) and `_last_checkpoint`.

Like delta-kernel-rs, file names are parsed into typed LogFiles, and a listing is grouped into the
commits and the complete checkpoints per version; replay.py decides which of them to read.
All storage reads of the package are here, through `FileIO` (local paths and remote URIs alike).
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dv_assets.mirror.delta.paths import resolve_location
from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.io import FileIO

LOG_DIR = "_delta_log"
SIDECAR_DIR = "_sidecars"
LAST_CHECKPOINT = "_last_checkpoint"
# Checkpoint columns that make up a table state; tombstones (`remove`) and txn/domainMetadata are not needed.
CHECKPOINT_COLUMNS = ("add", "metaData", "protocol", "sidecar", "checkpointMetadata")


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

    @property
    def versions(self) -> set[int]:
        return set(self.commits) | set(self.checkpoints)


def group_listing(files: list[LogFile], last_checkpoint: dict | None = None) -> LogListing:
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
    return LogListing(commits, checkpoints)


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


class DeltaLog:
    """Reads the files of one table's `_delta_log`. Errors name the table, the version and the file."""

    def __init__(self, table_root: str, io: FileIO | None = None) -> None:
        self.table_root = table_root
        self._io = io or FileIO()
        self._log_dir = f"{table_root.rstrip('/')}/{LOG_DIR}"

    def file_path(self, name: str) -> str:
        return f"{self._log_dir}/{name}"

    def list(self) -> LogListing:
        try:
            infos = self._io.list_dir(self._log_dir)
        except OSError as exc:
            raise self._error(f"cannot list the Delta log: {exc}", file=self._log_dir) from exc
        names = (info.location.rsplit("/", 1)[-1] for info in infos)
        files = [f for name in names if (f := parse_log_file_name(name)) is not None]
        if not files:
            raise self._error("not a Delta table: no commits or checkpoints", file=self._log_dir)
        return group_listing(files, self.read_last_checkpoint())

    def read_last_checkpoint(self) -> dict | None:
        """`_last_checkpoint`, a hint only: missing or unreadable means no hint."""
        try:
            parsed = json.loads(self._io.read(self.file_path(LAST_CHECKPOINT)))
        except (OSError, ValueError):
            return None
        return parsed if isinstance(parsed, dict) else None

    def read_commit(self, commit: LogFile) -> list[dict[str, Any]]:
        """The actions of a JSON commit, in file order."""
        return self._read_json_lines(commit.name, commit.version)

    def read_checkpoint(self, checkpoint: Checkpoint) -> Iterator[dict[str, Any]]:
        """The state-bearing actions of a checkpoint (adds, metaData, protocol), sidecars expanded."""
        for f in checkpoint.files:
            if f.is_json:
                actions: list[dict[str, Any]] = self._read_json_lines(f.name, f.version)
            else:
                actions = self._read_parquet_actions(self.file_path(f.name), f.version, CHECKPOINT_COLUMNS)
            for action in actions:
                if (sidecar := action.get("sidecar")) is not None:
                    yield from self._read_sidecar(sidecar, checkpoint.version, f.name)
                elif action.get("remove") is None:
                    yield action

    def _read_sidecar(self, sidecar: dict, version: int, referenced_by: str) -> list[dict[str, Any]]:
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
        return self._read_parquet_actions(location, version, ("add",))

    def _read_json_lines(self, name: str, version: int) -> list[dict[str, Any]]:
        path = self.file_path(name)
        try:
            text = self._io.read(path).decode("utf-8")
        except FileNotFoundError as exc:
            raise self._error("log file is missing", version=version, file=path) from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise self._error(f"cannot read log file: {exc}", version=version, file=path) from exc
        actions = []
        # Newline-delimited JSON: split on "\n" only. str.splitlines() would also split at U+2028,
        # U+0085, \x1c and the like, which may appear raw inside JSON strings (operation parameters,
        # partition values). A trailing "\r" (CRLF) is JSON whitespace, which json.loads skips.
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                action = json.loads(line)
            except ValueError as exc:
                raise self._error(f"line {number} is not JSON: {exc}", version=version, file=path) from exc
            if not isinstance(action, dict):
                raise self._error(f"line {number} is not a JSON object", version=version, file=path)
            actions.append(action)
        return actions

    def _read_parquet_actions(
        self, path: str, version: int, columns: tuple[str, ...]
    ) -> list[dict[str, Any]]:
        try:
            table = self._io.read_parquet(path, columns)
        except FileNotFoundError as exc:
            raise self._error("checkpoint file is missing", version=version, file=path) from exc
        except (OSError, pa.ArrowException) as exc:
            raise self._error(f"cannot read checkpoint Parquet: {exc}", version=version, file=path) from exc
        actions: list[dict[str, Any]] = []
        for name in table.column_names:
            column = table.column(name)
            # Each row holds one action; keep only this column's non-null rows.
            rows = column.filter(pc.is_valid(column)).to_pylist(maps_as_pydicts="strict")
            actions.extend({name: row} for row in rows)
        return actions

    def _error(self, reason: str, *, version: int | None = None, file: str | None = None) -> MirrorInputError:
        return MirrorInputError(reason, table=self.table_root, version=version, file=file)
