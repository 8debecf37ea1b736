"""The files of a `_delta_log`, by name: commits and checkpoints (classic single and multi-part, V2),
parsed into typed `LogFile`s from their names alone, and a listing grouped into the commits and the
complete checkpoints per version, best candidate first (delta-kernel-rs: `path.rs`, `listed_log_files.rs`).
Nothing here reads a file; `log.py` does, and `replay.py` decides which of them to read."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field

from dv_assets.mirror.io import FileInfo

LOG_DIR = "_delta_log"
SIDECAR_DIR = "_sidecars"
LAST_CHECKPOINT = "_last_checkpoint"


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
