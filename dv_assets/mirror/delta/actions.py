"""Frozen dataclasses of the Delta log actions the mirror needs, parsed from JSON commits or checkpoint rows.

Checkpoint rows arrive as dicts too (built per Arrow batch by log.py), so one parser serves both.
Unknown actions (txn, domainMetadata, cdc, checkpointMetadata, ...) are ignored by callers.
Parsing errors raise MirrorInputError without table/version context; callers add it with `.at()`.

Log replay keeps one AddFile per live file, so a table of a million files holds a million of them:
they are slotted, share equal partition-value and tag maps and DV file names through a `ValuePool`,
and drop their stats text once no one needs it (`AddFile.without_stats`; see replay.py).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NoReturn, TypeVar

from dv_assets.mirror.delta import column_mapping
from dv_assets.mirror.delta.schema import StructType
from dv_assets.mirror.errors import InvalidDeletionVectorError, MirrorInputError
from dv_assets.mirror.locations import resolve_location

_Shared = TypeVar("_Shared", str, int)


class FrozenMap(dict[str, Any]):
    """A read-only dict: one instance is shared by every file with the same partition values or tags.

    A dict subclass (not a MappingProxyType) so that it compares, prints, pickles and serialises to
    JSON like the plain dict it replaces.
    """

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("a Delta log map is shared between files and read-only; copy it with dict()")

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self) -> tuple[type[FrozenMap], tuple[dict[str, Any]]]:
        # Rebuilt through __init__: the default dict-subclass protocol would call __setitem__.
        return FrozenMap, (dict(self),)


class ValuePool:
    """One copy of each value that repeats across the files of one replay: partition-value and tag maps
    (a partition's files all carry the same one), deletion-vector file names (one DELETE writes many DVs
    into one file). Scoped to one `DeltaTable.state` / `changes` call, so it never outlives its replay."""

    __slots__ = ("_maps", "_values")

    def __init__(self) -> None:
        self._maps: dict[tuple[tuple[str, Any], ...], FrozenMap] = {}
        self._values: dict[str | int, str | int] = {}

    def map(self, raw: Mapping[str, Any]) -> FrozenMap:
        if isinstance(raw, FrozenMap):
            return raw
        key = tuple(raw.items())
        # Only string (or null) values, as the protocol writes them, are shared: 1, 1.0 and True are
        # equal as keys, so sharing anything else could hand one file another file's value.
        if not all(type(k) is str and (v is None or type(v) is str) for k, v in key):
            return FrozenMap(raw)
        shared = self._maps.get(key)
        if shared is None:
            shared = self._maps[key] = FrozenMap(raw)
        return shared

    def shared(self, value: _Shared) -> _Shared:
        """The pool's copy of an immutable value (a string, an int beyond CPython's small-int cache)."""
        return self._values.setdefault(value, value)  # type: ignore[return-value]


_NO_ENTRIES = FrozenMap()


def _map(raw: Any, pool: ValuePool | None) -> FrozenMap:
    if type(raw) is dict and not raw:  # an unpartitioned table's every file: one shared empty map
        return _NO_ENTRIES
    if not isinstance(raw, Mapping):
        raw = dict(raw or {})  # what dict() always accepted here: nothing, or key/value pairs
    return FrozenMap(raw) if pool is None else pool.map(raw)


def _required(raw: Mapping[str, Any], key: str, action: str) -> Any:
    value = raw.get(key)
    if value is None:
        raise MirrorInputError(f"{action} action without required field {key!r}: {dict(raw)!r}"[:500])
    return value


# The bounds of the numbers the protocol types as Java's long and int (PROTOCOL.md: `size`, `numRecords`,
# `cardinality` are longs; a DV's `offset` and `sizeInBytes` ints). A number outside them, or not a JSON
# integer at all (a float, a string, a bool), no Delta writer wrote: it is refused, never rounded or cut.
MAX_LONG = (1 << 63) - 1
MAX_INT = (1 << 31) - 1


def _bad_number(field: str, value: Any, low: int, high: int) -> MirrorInputError:
    """The refusal of a number of the log that is not an integer in [low, high]."""
    shown = repr(value) if len(repr(value)) <= 60 else f"{repr(value)[:60]}..."
    return MirrorInputError(
        f"{field} is {shown}, not an integer in [{_bound(low)}, {_bound(high)}]: no Delta writer writes "
        "that; refused rather than guessed"
    )


def _bound(value: int) -> str:
    return {MAX_LONG: "2^63 - 1", MAX_INT: "2^31 - 1", -MAX_LONG - 1: "-2^63"}.get(value, str(value))


def _number(value: Any, field: str, low: int = 0, high: int = MAX_LONG) -> int:
    """`value` when it is a JSON integer (an int, not a bool) in [low, high]; else refused, naming `field`."""
    if type(value) is not int or value < low or value > high:
        raise _bad_number(field, value, low, high)
    return value


@dataclass(frozen=True, slots=True)
class DeletionVectorDescriptor:
    """`add.deletionVector` / `remove.deletionVector` (PROTOCOL.md, "Deletion Vector Descriptor Schema")."""

    storage_type: str  # u: relative file named by a UUID, i: inline Z85, p: absolute path
    path_or_inline_dv: str
    offset: int | None  # None for inline DVs; a u / p DV without one is refused when read (dv/reader.py)
    size_in_bytes: int
    cardinality: int

    @property
    def unique_id(self) -> str:
        """Together with the path, the key of a logical file in log replay."""
        base = f"{self.storage_type}{self.path_or_inline_dv}"
        return base if self.offset is None else f"{base}@{self.offset}"

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], pool: ValuePool | None = None) -> DeletionVectorDescriptor:
        storage_type = _required(raw, "storageType", "deletionVector")
        if storage_type not in ("u", "i", "p"):
            raise MirrorInputError(f"deletion vector with unknown storageType {storage_type!r}")
        offset = raw.get("offset")
        path_or_inline_dv = _required(raw, "pathOrInlineDv", "deletionVector")
        if pool is not None and storage_type != "i" and isinstance(path_or_inline_dv, str):
            # Many DVs share one DV file; an inline DV is unique to its file and not worth pooling.
            path_or_inline_dv = pool.shared(path_or_inline_dv)
        try:
            return cls(
                storage_type=storage_type,
                path_or_inline_dv=path_or_inline_dv,
                offset=None if offset is None else _number(offset, "deletionVector.offset", 0, MAX_INT),
                size_in_bytes=_number(
                    _required(raw, "sizeInBytes", "deletionVector"), "deletionVector.sizeInBytes", 0, MAX_INT
                ),
                cardinality=_number(
                    _required(raw, "cardinality", "deletionVector"), "deletionVector.cardinality"
                ),
            )
        except MirrorInputError as exc:
            raise InvalidDeletionVectorError(exc.reason) from None


def _deletion_vector(raw: Mapping[str, Any], pool: ValuePool | None) -> DeletionVectorDescriptor | None:
    dv = raw.get("deletionVector")
    return None if dv is None else DeletionVectorDescriptor.from_json(dv, pool)


class _LogicalFile:
    """What `add` and `remove` share: (path, DV unique id) is a logical file's key in log replay."""

    __slots__ = ()  # keeps the slotted subclasses free of a per-instance __dict__
    deletion_vector: DeletionVectorDescriptor | None

    @property
    def dv_unique_id(self) -> str | None:
        return None if self.deletion_vector is None else self.deletion_vector.unique_id


def _parse_stats(stats: str | None) -> dict | None:
    # Stats are optional and advisory: unreadable stats must not make the file unreadable.
    if not stats or not isinstance(stats, str):
        return None
    try:
        parsed = json.loads(stats)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


# The key under which a checkpoint row brings its JSON stats' numRecords already read (Arrow's parser,
# a batch at once: `log.stats_num_records`). Not a string, so never a field a logged action can carry.
NUM_RECORDS_READ = ("numRecords",)


def _num_records(stats: Mapping[str, Any] | None) -> Any:
    """The stats' numRecords as written (None when absent or null); `_checked_num_records` checks it."""
    return None if stats is None else stats.get("numRecords")


def _checked_num_records(value: Any, field: str) -> int | None:
    """A file's row count from its stats: absent (None: the Parquet footer tells), or a JSON integer in
    [0, 2^63 - 1]. Unreadable stats text reads as absent; a numRecords that is there but negative, too
    large or not an integer is a statement about the file no writer makes: refused, not guessed around
    (it bounds the file's DV positions and becomes its Iceberg record count)."""
    if value is None or (type(value) is int and 0 <= value <= MAX_LONG):
        return value
    raise _bad_number(field, value, 0, MAX_LONG)


def _modification_time(raw: Mapping[str, Any]) -> int:
    """add.modificationTime (0 when absent): informational, but a JSON integer (a long) when present."""
    value = raw.get("modificationTime")
    if type(value) is int and -MAX_LONG - 1 <= value <= MAX_LONG:
        return value
    return 0 if value is None else _number(value, "add.modificationTime", -MAX_LONG - 1)


def _compact_path(path: str, location: str, pool: ValuePool | None) -> str | int:
    """A path that is the tail of its location as where it starts there (so `AddFile.path` is exact)."""
    if not isinstance(path, str) or not location.endswith(path):
        return path
    start = len(location) - len(path)
    return start if pool is None else pool.shared(start)


@dataclass(frozen=True, slots=True)
class AddFile(_LogicalFile):
    """A logical file of the table: a data file plus (optionally) its deletion vector.

    `stats` is the JSON text while a reader may still want it: on the files a VersionChange adds (the
    mirror builds their Iceberg metrics from it) and on a TableState read with stats. Replay drops it
    from files it only keeps for later versions (`without_stats`), which then still know their
    `num_records` (row counts of removed files, DV position bounds). It takes no part in equality: a
    file is the same logical file with or without its advisory stats text.

    `path` (raw from the log) is most often the tail of `location` (a relative path without escapes);
    then only where it starts in `location` is stored, not a second copy of the name.
    """

    _path: str | int = field(repr=False)  # the raw path, or its start in `location` (see `path`)
    location: str  # absolute, decoded: a plain POSIX path for local tables, else a URI
    partition_values: Mapping[str, str | None]  # keyed by physical column name; shared, read-only
    size: int
    modification_time: int
    data_change: bool
    stats: str | None = field(compare=False)
    deletion_vector: DeletionVectorDescriptor | None
    tags: Mapping[str, str | None] | None  # shared, read-only
    num_records: int | None  # stats' numRecords, kept when the stats text is dropped

    def __hash__(self) -> int:
        # The generated hash would fail on the map fields; (location, DV id) is the replay key.
        return hash((self.location, self.dv_unique_id))

    def __repr__(self) -> str:
        shown = [("path", self.path)] + [
            (f.name, getattr(self, f.name)) for f in dataclasses.fields(self) if f.name != "_path"
        ]
        return f"AddFile({', '.join(f'{name}={value!r}' for name, value in shown)})"

    @property
    def path(self) -> str:
        """The file's path as the log writes it (URL-encoded, maybe relative)."""
        raw = self._path
        return self.location[raw:] if isinstance(raw, int) else raw

    def without_stats(self) -> AddFile:
        """This file without its stats text, for keeping it live in a replay."""
        if self.stats is None:
            return self
        # Field by field, not dataclasses.replace (a few times slower): a first version followed by more
        # drops the stats of a million files.
        return AddFile(
            self._path,
            self.location,
            self.partition_values,
            self.size,
            self.modification_time,
            self.data_change,
            None,
            self.deletion_vector,
            self.tags,
            self.num_records,
        )

    @classmethod
    def from_action(
        cls,
        raw: Mapping[str, Any],
        table_root: str,
        *,
        pool: ValuePool | None = None,
        keep_stats: bool = True,
    ) -> AddFile:
        path = _required(raw, "path", "add")
        location = resolve_location(table_root, path)
        try:
            stats = raw.get("stats")
            struct_stats = raw.get("stats_parsed")
            if stats is None and struct_stats is not None:
                # Checkpoints written with writeStatsAsJson=false carry only the struct form.
                num_records = _checked_num_records(
                    _num_records(struct_stats) if isinstance(struct_stats, Mapping) else None,
                    "add.stats_parsed.numRecords",
                )
                if keep_stats:
                    stats = json.dumps(_jsonable(struct_stats), separators=(",", ":"))
            else:
                # Read by Arrow for a whole checkpoint (`log.stats_num_records`), or here from the text:
                # checked the same either way.
                read = raw[NUM_RECORDS_READ] if NUM_RECORDS_READ in raw else _num_records(_parse_stats(stats))
                num_records = _checked_num_records(read, "add.stats numRecords")
            size = raw.get("size")
            if type(size) is not int or size < 0 or size > MAX_LONG:
                size = _number(_required(raw, "size", "add"), "add.size")
            tags = raw.get("tags")
            return cls(
                _path=_compact_path(path, location, pool),
                location=location,
                partition_values=_map(raw.get("partitionValues"), pool),
                size=size,
                modification_time=_modification_time(raw),
                data_change=bool(raw.get("dataChange", True)),
                stats=stats if keep_stats else None,
                deletion_vector=_deletion_vector(raw, pool),
                tags=None if tags is None else _map(tags, pool),
                num_records=num_records,
            )
        except MirrorInputError as exc:
            raise exc.at(file=location) from None


@dataclass(frozen=True, slots=True)
class RemoveFile(_LogicalFile):
    """A `remove` action: ends the logical file (path, DV id). Most fields are optional in the log."""

    path: str
    location: str
    partition_values: Mapping[str, str | None] | None
    size: int | None
    data_change: bool
    deletion_vector: DeletionVectorDescriptor | None

    @classmethod
    def from_action(
        cls, raw: Mapping[str, Any], table_root: str, *, pool: ValuePool | None = None
    ) -> RemoveFile:
        path = _required(raw, "path", "remove")
        location = resolve_location(table_root, path)
        size = raw.get("size")
        partition_values = raw.get("partitionValues")
        try:
            return cls(
                path=path,
                location=location,
                partition_values=None if partition_values is None else _map(partition_values, pool),
                size=None if size is None else _number(size, "remove.size"),
                data_change=bool(raw.get("dataChange", True)),
                deletion_vector=_deletion_vector(raw, pool),
            )
        except MirrorInputError as exc:
            raise exc.at(file=location) from None


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
    # Whether the table's protocol lets the configuration's column mapping mode take effect; None when
    # the protocol is not known (then the configuration alone decides). Replay sets it on every Metadata
    # it hands out (`with_protocol`). Not part of equality: the metaData action is the same.
    column_mapping_supported: bool | None = field(default=None, compare=False, repr=False)

    @cached_property
    def schema(self) -> StructType:
        try:
            return StructType.from_json(json.loads(self.schema_string))
        except ValueError as exc:
            raise MirrorInputError(f"metaData.schemaString is not valid JSON: {exc}") from exc

    @property
    def column_mapping_mode(self) -> column_mapping.ColumnMappingMode:
        """The mode readers apply, 'none', 'name' or 'id'; partition values and stats use physical names
        unless 'none'. The configuration's mode, but 'none' where the protocol does not support column
        mapping (delta-kernel-rs reads such a table by logical names)."""
        mode = column_mapping.mode_of(self.configuration)  # an unknown mode is refused either way
        return "none" if self.column_mapping_supported is False else mode

    def with_protocol(self, protocol: Protocol) -> Metadata:
        """This metadata as it reads under `protocol` (the same object when that changes nothing)."""
        supported = protocol.supports_column_mapping
        if supported == self.column_mapping_supported:
            return self
        return dataclasses.replace(self, column_mapping_supported=supported)

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
            created_time=None if created is None else _number(created, "metaData.createdTime", -MAX_LONG - 1),
            name=raw.get("name"),
            description=raw.get("description"),
            format_provider=fmt.get("provider") or "parquet",
        )


@dataclass(frozen=True, slots=True)
class Protocol:
    """The `protocol` action. Features are None for legacy protocols (reader < 3 / writer < 7)."""

    min_reader_version: int
    min_writer_version: int
    reader_features: frozenset[str] | None = None
    writer_features: frozenset[str] | None = None

    @classmethod
    def from_action(cls, raw: Mapping[str, Any]) -> Protocol:
        return cls(
            min_reader_version=_number(
                _required(raw, "minReaderVersion", "protocol"), "protocol.minReaderVersion", 1, MAX_INT
            ),
            min_writer_version=_number(
                _required(raw, "minWriterVersion", "protocol"), "protocol.minWriterVersion", 1, MAX_INT
            ),
            reader_features=_features(raw.get("readerFeatures")),
            writer_features=_features(raw.get("writerFeatures")),
        )

    @property
    def supports_column_mapping(self) -> bool:
        """Whether this protocol lets `delta.columnMapping.mode` take effect, as delta-kernel-rs's
        `column_mapping_mode(protocol, table_properties)` decides: reader version 2 (legacy, which implies
        column mapping), or 3 with the `columnMapping` feature. Elsewhere (reader version 1, or 3 without the
        feature) the property is allowed but ignored (PROTOCOL.md, "Column Mapping"): the mode is `none`.

        Like delta-kernel-rs, the feature is looked up in writerFeatures, of which readerFeatures is a subset:
        Delta Spark has written column-mapped tables that list it there only (delta-io/delta#3154).
        """
        if self.min_reader_version == 2:
            return True
        return self.min_reader_version == 3 and column_mapping.FEATURE in (self.writer_features or ())


def _features(raw: Iterable[str] | None) -> frozenset[str] | None:
    return None if raw is None else frozenset(raw)


def _json_int(value: Any) -> int | None:
    """A JSON integer as an int; anything else (a float, a string, a bool, null) as unknown."""
    return value if type(value) is int else None


@dataclass(frozen=True, eq=False)
class CommitInfo(Mapping[str, Any]):
    """The `commitInfo` action, parsed once (PROTOCOL.md, "Commit Provenance Information").

    The action is free-form: the fields the mirror reads are typed here, and one of another type than
    Delta writes reads as unknown (None), never as a guess. It is also a read-only Mapping over `raw`, the
    action as written (for display), so it compares equal to the dict it was parsed from.
    """

    timestamp: int | None = None  # milliseconds since the epoch, by the writer's clock
    operation: str | None = None
    operation_parameters: Mapping[str, Any] = field(default_factory=FrozenMap)
    in_commit_timestamp: int | None = None  # set by writers with the inCommitTimestamp feature
    raw: Mapping[str, Any] = field(default_factory=FrozenMap)

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)

    @property
    def commit_ms(self) -> int | None:
        """When the version was committed: its in-commit timestamp, else the writer's timestamp."""
        return self.in_commit_timestamp if self.in_commit_timestamp is not None else self.timestamp

    @property
    def timestamp_text(self) -> str:
        """The timestamp as the mirror records and compares it: str(timestamp), '' when unknown."""
        return "" if self.timestamp is None else str(self.timestamp)

    @classmethod
    def from_action(cls, raw: Any) -> CommitInfo:
        if not isinstance(raw, Mapping):
            raise MirrorInputError(f"commitInfo action is not a JSON object: {raw!r}"[:500])
        operation = raw.get("operation")
        parameters = raw.get("operationParameters") or {}
        return cls(
            timestamp=_json_int(raw.get("timestamp")),
            operation=operation if isinstance(operation, str) else None,
            # Delta writes an object; any other value is kept under "value" so that it is still shown.
            operation_parameters=FrozenMap(
                parameters if isinstance(parameters, Mapping) else {"value": parameters}
            ),
            in_commit_timestamp=_json_int(raw.get("inCommitTimestamp")),
            raw=FrozenMap(raw),
        )


@dataclass(frozen=True)
class CommitActions:
    """The actions of one commit (or one checkpoint) that matter for the file set, in log order."""

    commit_info: CommitInfo = field(default_factory=CommitInfo)
    protocol: Protocol | None = None
    metadata: Metadata | None = None
    adds: list[AddFile] = field(default_factory=list)
    removes: list[RemoveFile] = field(default_factory=list)

    @property
    def data_change(self) -> bool:
        return any(a.data_change for a in self.adds) or any(r.data_change for r in self.removes)


def parse_actions(
    raw_actions: Iterable[Mapping[str, Any]],
    table_root: str,
    *,
    include_removes: bool = True,
    pool: ValuePool | None = None,
    keep_stats: bool = True,
) -> CommitActions:
    """Sort a commit's raw actions into a CommitActions. Checkpoint tombstones are skipped on request;
    adds keep their stats text unless `keep_stats` is false (their num_records stays either way)."""
    commit_info = CommitInfo()
    protocol = metadata = None
    adds: list[AddFile] = []
    removes: list[RemoveFile] = []
    for action in raw_actions:
        if (raw := action.get("add")) is not None:
            adds.append(AddFile.from_action(raw, table_root, pool=pool, keep_stats=keep_stats))
        elif (raw := action.get("remove")) is not None:
            if include_removes:
                removes.append(RemoveFile.from_action(raw, table_root, pool=pool))
        elif (raw := action.get("metaData")) is not None:
            metadata = Metadata.from_action(raw)
        elif (raw := action.get("protocol")) is not None:
            protocol = Protocol.from_action(raw)
        elif (raw := action.get("commitInfo")) is not None:
            commit_info = CommitInfo.from_action(raw)
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
