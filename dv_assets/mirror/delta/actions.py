"""Frozen dataclasses of the Delta log actions the mirror needs, parsed from JSON commits or checkpoint rows.

Checkpoint rows arrive as dicts too (pyarrow `to_pylist(maps_as_pydicts="strict")`), so one parser
serves both. Unknown actions (txn, domainMetadata, cdc, checkpointMetadata, ...) are ignored by callers.
Parsing errors raise MirrorInputError without table/version context; callers add it with `.at()`.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from dv_assets.mirror.delta import column_mapping
from dv_assets.mirror.delta.paths import resolve_location
from dv_assets.mirror.errors import MirrorInputError


def _required(raw: Mapping[str, Any], key: str, action: str) -> Any:
    value = raw.get(key)
    if value is None:
        raise MirrorInputError(f"{action} action without required field {key!r}: {dict(raw)!r}"[:500])
    return value


@dataclass(frozen=True)
class DeletionVectorDescriptor:
    """`add.deletionVector` / `remove.deletionVector` (PROTOCOL.md, "Deletion Vector Descriptor Schema")."""

    storage_type: str  # u: relative file named by a UUID, i: inline Z85, p: absolute path
    path_or_inline_dv: str
    offset: int | None
    size_in_bytes: int
    cardinality: int

    @property
    def unique_id(self) -> str:
        """Together with the path, the key of a logical file in log replay."""
        base = f"{self.storage_type}{self.path_or_inline_dv}"
        return base if self.offset is None else f"{base}@{self.offset}"

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> DeletionVectorDescriptor:
        storage_type = _required(raw, "storageType", "deletionVector")
        if storage_type not in ("u", "i", "p"):
            raise MirrorInputError(f"deletion vector with unknown storageType {storage_type!r}")
        offset = raw.get("offset")
        return cls(
            storage_type=storage_type,
            path_or_inline_dv=_required(raw, "pathOrInlineDv", "deletionVector"),
            offset=None if offset is None else int(offset),
            size_in_bytes=int(_required(raw, "sizeInBytes", "deletionVector")),
            cardinality=int(_required(raw, "cardinality", "deletionVector")),
        )


def _deletion_vector(raw: Mapping[str, Any]) -> DeletionVectorDescriptor | None:
    dv = raw.get("deletionVector")
    return None if dv is None else DeletionVectorDescriptor.from_json(dv)


class _LogicalFile:
    """What `add` and `remove` share: (path, DV unique id) is a logical file's key in log replay."""

    deletion_vector: DeletionVectorDescriptor | None

    @property
    def dv_unique_id(self) -> str | None:
        return None if self.deletion_vector is None else self.deletion_vector.unique_id


@dataclass(frozen=True)
class AddFile(_LogicalFile):
    """A logical file of the table: a data file plus (optionally) its deletion vector."""

    path: str  # raw from the log (URL-encoded, maybe relative)
    location: str  # absolute, decoded: a plain POSIX path for local tables, else a URI
    partition_values: dict[str, str | None]  # keyed by physical column name (see Metadata.physical_names)
    size: int
    modification_time: int
    data_change: bool
    stats: str | None
    deletion_vector: DeletionVectorDescriptor | None
    tags: dict[str, str | None] | None

    def __hash__(self) -> int:
        # The generated hash would fail on the dict fields; (location, DV id) is the replay key.
        return hash((self.location, self.dv_unique_id))

    @cached_property
    def parsed_stats(self) -> dict | None:
        # Stats are optional and advisory: unreadable stats must not make the file unreadable.
        if not self.stats:
            return None
        try:
            parsed = json.loads(self.stats)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None

    @property
    def num_records(self) -> int | None:
        stats = self.parsed_stats
        value = None if stats is None else stats.get("numRecords")
        return None if value is None else int(value)

    @classmethod
    def from_action(cls, raw: Mapping[str, Any], table_root: str) -> AddFile:
        path = _required(raw, "path", "add")
        stats = raw.get("stats")
        if stats is None and raw.get("stats_parsed") is not None:
            # Checkpoints written with writeStatsAsJson=false carry only the struct form.
            stats = json.dumps(_jsonable(raw["stats_parsed"]), separators=(",", ":"))
        return cls(
            path=path,
            location=resolve_location(table_root, path),
            partition_values=dict(raw.get("partitionValues") or {}),
            size=int(_required(raw, "size", "add")),
            modification_time=int(raw.get("modificationTime") or 0),
            data_change=bool(raw.get("dataChange", True)),
            stats=stats,
            deletion_vector=_deletion_vector(raw),
            tags=None if raw.get("tags") is None else dict(raw["tags"]),
        )


@dataclass(frozen=True)
class RemoveFile(_LogicalFile):
    """A `remove` action: ends the logical file (path, DV id). Most fields are optional in the log."""

    path: str
    location: str
    partition_values: dict[str, str | None] | None
    size: int | None
    data_change: bool
    deletion_vector: DeletionVectorDescriptor | None

    @classmethod
    def from_action(cls, raw: Mapping[str, Any], table_root: str) -> RemoveFile:
        path = _required(raw, "path", "remove")
        size = raw.get("size")
        partition_values = raw.get("partitionValues")
        return cls(
            path=path,
            location=resolve_location(table_root, path),
            partition_values=None if partition_values is None else dict(partition_values),
            size=None if size is None else int(size),
            data_change=bool(raw.get("dataChange", True)),
            deletion_vector=_deletion_vector(raw),
        )


@dataclass(frozen=True)
class Metadata:
    """The `metaData` action: schema, partitioning and table properties."""

    id: str
    schema_string: str
    partition_columns: list[str]
    configuration: dict[str, str]
    created_time: int | None
    name: str | None = None
    description: str | None = None
    format_provider: str = "parquet"

    @cached_property
    def schema(self) -> dict:
        try:
            return json.loads(self.schema_string)
        except ValueError as exc:
            raise MirrorInputError(f"metaData.schemaString is not valid JSON: {exc}") from exc

    @property
    def column_mapping_mode(self) -> column_mapping.ColumnMappingMode:
        """'none', 'name' or 'id'; partition values and stats use physical names unless 'none'."""
        return column_mapping.mode_of(self.configuration)

    @property
    def physical_names(self) -> dict[str, str]:
        """Top-level logical column name → physical name (identity without column mapping)."""
        return column_mapping.physical_names(self.schema, self.column_mapping_mode)

    @classmethod
    def from_action(cls, raw: Mapping[str, Any]) -> Metadata:
        fmt = raw.get("format") or {}
        created = raw.get("createdTime")
        return cls(
            id=_required(raw, "id", "metaData"),
            schema_string=_required(raw, "schemaString", "metaData"),
            partition_columns=list(raw.get("partitionColumns") or []),
            configuration={k: v for k, v in (raw.get("configuration") or {}).items() if v is not None},
            created_time=None if created is None else int(created),
            name=raw.get("name"),
            description=raw.get("description"),
            format_provider=fmt.get("provider") or "parquet",
        )


@dataclass(frozen=True)
class Protocol:
    """The `protocol` action. Features are None for legacy protocols (reader < 3 / writer < 7)."""

    min_reader_version: int
    min_writer_version: int
    reader_features: frozenset[str] | None = None
    writer_features: frozenset[str] | None = None

    @classmethod
    def from_action(cls, raw: Mapping[str, Any]) -> Protocol:
        return cls(
            min_reader_version=int(_required(raw, "minReaderVersion", "protocol")),
            min_writer_version=int(_required(raw, "minWriterVersion", "protocol")),
            reader_features=_features(raw.get("readerFeatures")),
            writer_features=_features(raw.get("writerFeatures")),
        )


def _features(raw: Iterable[str] | None) -> frozenset[str] | None:
    return None if raw is None else frozenset(raw)


@dataclass(frozen=True)
class CommitActions:
    """The actions of one commit (or one checkpoint) that matter for the file set, in log order."""

    commit_info: dict = field(default_factory=dict)
    protocol: Protocol | None = None
    metadata: Metadata | None = None
    adds: list[AddFile] = field(default_factory=list)
    removes: list[RemoveFile] = field(default_factory=list)

    @property
    def data_change(self) -> bool:
        return any(a.data_change for a in self.adds) or any(r.data_change for r in self.removes)


def parse_actions(
    raw_actions: Iterable[Mapping[str, Any]], table_root: str, *, include_removes: bool = True
) -> CommitActions:
    """Sort a commit's raw actions into a CommitActions. Checkpoint tombstones are skipped on request."""
    commit_info: dict = {}
    protocol = metadata = None
    adds: list[AddFile] = []
    removes: list[RemoveFile] = []
    for action in raw_actions:
        if (raw := action.get("add")) is not None:
            adds.append(AddFile.from_action(raw, table_root))
        elif (raw := action.get("remove")) is not None:
            if include_removes:
                removes.append(RemoveFile.from_action(raw, table_root))
        elif (raw := action.get("metaData")) is not None:
            metadata = Metadata.from_action(raw)
        elif (raw := action.get("protocol")) is not None:
            protocol = Protocol.from_action(raw)
        elif (raw := action.get("commitInfo")) is not None:
            commit_info = dict(raw)
    return CommitActions(commit_info, protocol, metadata, adds, removes)


def _jsonable(value: Any) -> Any:
    """A checkpoint's `stats_parsed` value as Delta writes it in JSON stats."""
    if isinstance(value, Mapping):
        return {k: _jsonable(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC)
        # Delta's JSON stats hold timestamps at millisecond precision; `Z` marks a UTC timestamp.
        text = value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}"
        return text + "Z" if value.tzinfo is not None else text
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        # Delta writes decimals as JSON numbers; a float is the closest Python's json can emit.
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value
