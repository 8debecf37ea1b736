"""Delta schema -> Iceberg schema, partition spec and partition values (pure).

Schemas are the typed values of `delta/schema.py` and `iceberg/types.py` (whose `to_json` is what Iceberg
Java's `SchemaParser.fromJson` reads); partition specs are the JSON Iceberg Java's
`PartitionSpecParser.fromJson` accepts. The name mapping is `iceberg/name_mapping.py`'s. Each walk over
a schema is a visitor of that side's `visit`.

Field ids, the contract with the Parquet files:
* Column mapping `id` / `name`: Delta writes Parquet field ids equal to `delta.columnMapping.id`, and
  Iceberg resolves columns by id first, so every struct field's Iceberg id *is* its Delta id. List
  elements and map keys/values take Delta's `delta.columnMapping.nested.ids` when present; otherwise
  they get ids from `NESTED_ID_BASE` up, a range Delta's own counter (which grows from 1) never reaches,
  so a column Delta adds later can never collide with them.
* Column mapping `none`: Parquet files carry no ids; ids are assigned in Iceberg's own order (a struct's
  fields first, then their children, as `TypeUtil.assignFreshIds`), and the name mapping (logical names)
  lets readers find the columns.
Evolution keeps every existing id (matched by Delta id, or by name path without column mapping) and
gives new columns ids above the previous highest. An upgrade of an existing table to column mapping
matches by name path and is refused unless every Delta id equals the Iceberg id the column already has.
A column never goes from optional back to required (Delta's NOT NULL is kept only where it held in
every schema the mirror had).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Context, Decimal, InvalidOperation
from typing import Any, NamedTuple

from dv_assets.mirror.delta import schema as delta
from dv_assets.mirror.delta.column_mapping import (
    checked_mode,
    mapping_id,
    mapping_ids,
    nested_ids,
    physical_name,
)
from dv_assets.mirror.errors import MirrorInputError, UnsupportedFeatureError
from dv_assets.mirror.iceberg import types as iceberg
from dv_assets.mirror.iceberg.type_promotion import check_type_changes, columns_by_id, refused_promotion
from dv_assets.mirror.iceberg.types import IcebergType, Schema
from dv_assets.mirror.schema_visitor import SchemaVisitor, visit

NESTED_ID_BASE = 1 << 30
PARTITION_FIELD_ID_BASE = 1000

_PRIMITIVES: dict[str, str] = {
    "byte": "int",
    "short": "int",
    "integer": "int",
    "long": "long",
    "float": "float",
    "double": "double",
    "string": "string",
    "binary": "binary",
    "boolean": "boolean",
    "date": "date",
    "timestamp": "timestamptz",  # Delta `timestamp` is an instant (UTC-adjusted)
    "timestamp_ntz": "timestamp",
    "variant": "variant",  # Iceberg v3 only (`check_format_version`); the same Parquet encoding
}
# Iceberg types a format version before 3 does not have.
V3_ONLY_TYPES = frozenset({"variant"})
_DECIMAL = iceberg.DECIMAL_PATTERN
ICEBERG_DECIMAL = _DECIMAL

Key = tuple[Any, ...]  # identifies a field across schema versions (see `_FieldKeys`)


# --- schema conversion -----------------------------------------------------------------------------------


def to_iceberg_schema(
    delta_schema: delta.StructType, column_mapping_mode: str = "none", *, schema_id: int = 0
) -> Schema:
    """The Iceberg schema of a Delta schema (`Metadata.schema`)."""
    return evolve(None, delta_schema, column_mapping_mode, schema_id=schema_id)


def evolve(
    previous: Schema | None,
    delta_schema: delta.StructType,
    column_mapping_mode: str,
    *,
    schema_id: int | None = None,
    history: Sequence[Schema] = (),
) -> Schema:
    """The Iceberg schema for `delta_schema`, keeping the ids `previous` gave to the same columns.

    `history` is every schema the table had before (oldest first): a column `previous` lacks but an older
    schema had takes that schema's id back. Without column mapping Delta identifies a column by its name,
    so a name that comes back (RESTORE across ADD COLUMNS, overwriteSchema, mergeSchema) is the same
    column for the files written before, and the name mapping, which is table-wide, can hold a name once.

    New columns get ids above the highest id the table ever had (Iceberg's `last-column-id`). An upgrade
    to column mapping keeps every id or is refused (see `_check_upgrade_keeps_ids`). A column whose type
    changed (Delta's type widening) keeps its id when the change is an Iceberg type promotion, and is
    refused otherwise (`type_promotion.check_type_changes`), against every schema that had the id. A
    field, list element or map value that was optional in any schema of `history` or `previous` stays
    optional, whatever Delta's schema says now (`_optional_where_ever_optional`).
    """
    mode = checked_mode(column_mapping_mode)
    check_recorded_type_changes(delta_schema)
    if schema_id is None:
        schema_id = 0 if previous is None else (previous.schema_id or 0) + 1
    if previous is None:
        return _build(delta_schema, mode, {}, 0, schema_id)
    evolved = None
    if _may_be_mapping_upgrade(previous, delta_schema, mode):
        # The same columns as before, now with Delta ids: the ids Iceberg gave them must be those ids.
        upgraded = _build(delta_schema, mode, {}, 0, schema_id)
        if {path for path, _ in _iceberg_keys(upgraded, "none")} == {
            path for path, _ in _iceberg_keys(previous, "none")
        }:
            _check_upgrade_keeps_ids(previous, upgraded)
            evolved = upgraded
    if evolved is None:
        known: dict[Key, int] = {}
        for older in (*history, previous):  # the newest schema that had a key decides its id
            known.update(_iceberg_keys(older, mode))
        highest = max(highest_field_id(s) for s in (*history, previous))
        evolved = _build(delta_schema, mode, known, highest, schema_id)
    for older in (*history, previous):
        check_type_changes(older, evolved)
    return _optional_where_ever_optional(evolved, (*history, previous))


def optional_ids(iceberg_schema: Schema) -> set[int]:
    """The ids of a schema's optional fields, list elements and map values, at any depth."""
    return visit(iceberg_schema.as_struct(), _OptionalIds(), None)


def _optional_where_ever_optional(evolved: Schema, older: Sequence[Schema]) -> Schema:
    """`evolved` with every field, list element and map value optional that any of `older` had optional.

    A column that held nulls under an earlier schema (Delta's CREATE OR REPLACE or overwriteSchema made it
    nullable, RESTORE made it NOT NULL again) has files with nulls that older snapshots still read, and
    Iceberg readers bind a filter to the *current* schema: Iceberg Java 1.12 (`BaseSparkScanBuilder`)
    folds `x IS NULL` on a required column to false and answers an older snapshot wrongly. Iceberg's own
    `UpdateSchema` refuses optional → required for this reason. So once optional, always optional in the
    mirror; Delta's NOT NULL is kept where it always held (docs/delta-features.md)."""
    ever_optional = set().union(*(optional_ids(s) for s in older))
    if not ever_optional & (field_ids(evolved) - optional_ids(evolved)):
        return evolved
    struct = visit(evolved.as_struct(), _Relaxed(frozenset(ever_optional)), None)
    assert isinstance(struct, iceberg.StructType)
    return replace(evolved, fields=struct.fields)


class _OptionalIds(SchemaVisitor[None, set[int]]):
    def struct(self, struct: iceberg.StructType, ctx: None, fields: Sequence[Callable]) -> set[int]:
        found = {f.id for f in struct.fields if not f.required}
        return found.union(*(child(None) for child in fields))

    def list(self, list_type: iceberg.ListType, ctx: None, element: Callable) -> set[int]:
        return element(None) | (set() if list_type.element_required else {list_type.element_id})

    def map(self, map_type: iceberg.MapType, ctx: None, key: Callable, value: Callable) -> set[int]:
        own = set() if map_type.value_required else {map_type.value_id}
        return key(None) | value(None) | own

    def primitive(self, primitive: iceberg.PrimitiveType, ctx: None) -> set[int]:
        return set()


@dataclass(frozen=True)
class _Relaxed(SchemaVisitor[None, IcebergType]):
    """A type with the fields, list elements and map values of `ids` optional, the rest unchanged."""

    ids: frozenset[int]

    def struct(self, struct: iceberg.StructType, ctx: None, fields: Sequence[Callable]) -> IcebergType:
        return iceberg.StructType(
            tuple(
                replace(f, required=f.required and f.id not in self.ids, type=child(None))
                for f, child in zip(struct.fields, fields, strict=True)
            )
        )

    def list(self, list_type: iceberg.ListType, ctx: None, element: Callable) -> IcebergType:
        required = list_type.element_required and list_type.element_id not in self.ids
        return replace(list_type, element_type=element(None), element_required=required)

    def map(self, map_type: iceberg.MapType, ctx: None, key: Callable, value: Callable) -> IcebergType:
        required = map_type.value_required and map_type.value_id not in self.ids
        return replace(map_type, key_type=key(None), value_type=value(None), value_required=required)

    def primitive(self, primitive: iceberg.PrimitiveType, ctx: None) -> IcebergType:
        return primitive


def _build(
    delta_schema: delta.StructType, mode: str, known: dict[Key, int], previous_max: int, schema_id: int
) -> Schema:
    delta_ids = list(mapping_ids(delta_schema)) if mode != "none" else []
    if any(i >= NESTED_ID_BASE for i in delta_ids):
        raise UnsupportedFeatureError(f"a delta.columnMapping.id is at or above {NESTED_ID_BASE}")
    if mode == "none":
        first_fresh = previous_max + 1
    else:
        first_fresh = max([NESTED_ID_BASE, *(i + 1 for i in known.values() if i >= NESTED_ID_BASE)])
    builder = _SchemaBuilder(mode=mode, known=known, next_id=first_fresh)
    struct = visit(delta_schema, builder, _Where(key=(), nested_ids={}, nested_path=""))
    assert isinstance(struct, iceberg.StructType)
    return Schema(fields=struct.fields, schema_id=schema_id)


def _may_be_mapping_upgrade(previous: Schema, delta_schema: delta.StructType, mode: str) -> bool:
    """Whether `previous` may have been built without column mapping for the columns `delta_schema` now
    maps: Delta's upgrade (ALTER TABLE SET TBLPROPERTIES delta.columnMapping.mode = 'name') gives existing
    columns physical names equal to their names, and a schema built without column mapping has no id in
    the range kept for list elements and map keys/values under it. Under column mapping ids are matched
    by Delta id, which such a schema does not have, so `evolve` matches these columns by name path."""
    return (
        mode != "none"
        and highest_field_id(previous) < NESTED_ID_BASE
        and all(physical_name(f) == f.name for f in delta.all_fields(delta_schema))
    )


def _check_upgrade_keeps_ids(previous: Schema, upgraded: Schema) -> None:
    """Refuse an upgrade to column mapping that would change an Iceberg field id.

    Old Parquet files have no field ids (read through the name mapping), but those written from now on
    carry Delta's ids, and Iceberg's ids must keep their meaning across schemas (manifests' metrics,
    partition specs). So Delta's id must be the id the column already has. Delta numbers columns depth
    first (1..n in field order for a flat schema, as Iceberg does); nested structs and list/map parts
    (numbered by Iceberg without a Delta id) usually differ.
    """
    old = dict(_iceberg_keys(previous, "none"))
    for path, field_id in _iceberg_keys(upgraded, "none"):
        if old.get(path, field_id) != field_id:
            raise UnsupportedFeatureError(
                f"column {'.'.join(path)!r} was upgraded to column mapping; its Iceberg field id is "
                f"{old[path]} but Delta's column mapping gives it {field_id}, so the id would mean "
                "different columns in old and new Parquet files; mirror the table into a new Iceberg table"
            )


def highest_field_id(iceberg_schema: Schema) -> int:
    """The largest field id anywhere in an Iceberg schema (0 when it has no fields)."""
    return max(field_ids(iceberg_schema), default=0)


def field_ids(iceberg_schema: Schema) -> set[int]:
    """Every field id of an Iceberg schema, at any depth (list elements, map keys and values too)."""
    return {field_id for _, field_id in _iceberg_keys(iceberg_schema, "id")}


class _Where(NamedTuple):
    """Where the builder is: the key of the node, and the nested ids of the nearest struct field with the
    physical path below it (`col-3.value`) that names the node's list/map parts in them."""

    key: Key
    nested_ids: Mapping[str, int]
    nested_path: str


@dataclass
class _SchemaBuilder(SchemaVisitor[_Where, IcebergType]):
    """A Delta type -> the Iceberg type, with ids in Iceberg's order: a struct's fields first, then their
    children (as `TypeUtil.assignFreshIds`); a list's element id (a map's key and value ids) before the
    element's (key's, value's) own."""

    mode: str
    known: dict[Key, int]
    next_id: int
    used: set[int] = field(default_factory=set)

    def take(self, key: Key, fixed: int | None = None) -> int:
        field_id = fixed if fixed is not None else self.known.get(key)
        if field_id is None:
            field_id = self.next_id
            self.next_id += 1
        if field_id in self.used:
            raise MirrorInputError(f"field id {field_id} would be used twice in the Iceberg schema")
        self.used.add(field_id)
        return field_id

    def struct(
        self, struct: delta.StructType, ctx: _Where, fields: Sequence[Callable[[_Where], IcebergType]]
    ) -> IcebergType:
        keys = [_field_key(ctx.key, f, self.mode) for f in struct.fields]
        ids = [
            self.take(key, mapping_id(f) if self.mode != "none" else None)
            for key, f in zip(keys, struct.fields, strict=True)
        ]
        return iceberg.StructType(
            tuple(
                iceberg.NestedField(
                    id=field_id,
                    name=f.name,
                    required=not f.nullable,
                    type=child(_Where(key, nested_ids(f), physical_name(f))),
                    doc=f.comment,
                )
                for f, key, field_id, child in zip(struct.fields, keys, ids, fields, strict=True)
            )
        )

    def list(
        self, array: delta.ArrayType, ctx: _Where, element: Callable[[_Where], IcebergType]
    ) -> IcebergType:
        where = self._part(ctx, "element")
        element_id = self.take(where.key, ctx.nested_ids.get(where.nested_path))
        return iceberg.ListType(element_id, element(where), element_required=not array.contains_null)

    def map(
        self,
        map_type: delta.MapType,
        ctx: _Where,
        key: Callable[[_Where], IcebergType],
        value: Callable[[_Where], IcebergType],
    ) -> IcebergType:
        key_at, value_at = self._part(ctx, "key"), self._part(ctx, "value")
        key_id = self.take(key_at.key, ctx.nested_ids.get(key_at.nested_path))
        value_id = self.take(value_at.key, ctx.nested_ids.get(value_at.nested_path))
        return iceberg.MapType(
            key_id, key(key_at), value_id, value(value_at), value_required=not map_type.value_contains_null
        )

    def primitive(self, primitive: delta.PrimitiveType, ctx: _Where) -> IcebergType:
        return iceberg.PrimitiveType(primitive_type(primitive.name))

    @staticmethod
    def _part(ctx: _Where, part: str) -> _Where:
        return _Where((*ctx.key, part), ctx.nested_ids, f"{ctx.nested_path}.{part}")


TYPE_CHANGES_KEY = "delta.typeChanges"  # Delta's type widening: [{"fromType", "toType", "fieldPath"?}]


def check_recorded_type_changes(delta_schema: delta.StructType) -> None:
    """Refuse a column whose recorded type widening (`delta.typeChanges`) the mirror would refuse as a
    schema change: its data files may still hold the old type even when the mirror starts after the
    widening (a first mirrored version already widened), where no two schemas are compared."""
    for delta_field in delta.all_fields(delta_schema):
        for change in delta_field.metadata.get(TYPE_CHANGES_KEY) or ():
            if not isinstance(change, Mapping):
                raise MirrorInputError(f"column {delta_field.name!r} has a malformed {TYPE_CHANGES_KEY}")
            old, new = (primitive_type(str(change.get(k))) for k in ("fromType", "toType"))
            reason = refused_promotion(old, new)
            if reason is not None:
                part = f" ({change['fieldPath']})" if change.get("fieldPath") else ""
                raise UnsupportedFeatureError(
                    f"column {delta_field.name!r}{part} was widened from {change.get('fromType')} to "
                    f"{change.get('toType')} (Iceberg {old} → {new}), {reason}: data files written before "
                    "may hold the old type; mirror the table into a new Iceberg table"
                )


def check_format_version(iceberg_schema: Schema, format_version: int) -> None:
    """Refuse (UnsupportedFeatureError) a column of a type the table's format version does not have."""
    if format_version >= 3:
        return
    for path, column_type in columns_by_id(iceberg_schema).values():
        if isinstance(column_type, iceberg.PrimitiveType) and column_type.name in V3_ONLY_TYPES:
            raise UnsupportedFeatureError(
                f"column {path!r} is a {column_type.name}, a type Iceberg format {format_version} does not "
                "have; mirror the table into a format 3 table"
            )


def primitive_type(delta_type: str) -> str:
    """A Delta primitive type name -> the Iceberg one (decimal keeps precision and scale)."""
    if delta_type in _PRIMITIVES:
        return _PRIMITIVES[delta_type]
    match = _DECIMAL.match(delta_type)
    if match:
        return f"decimal({int(match.group(1))}, {int(match.group(2))})"
    raise UnsupportedFeatureError(f"Delta type {delta_type!r} has no Iceberg equivalent")


def _field_key(parent_key: Key, delta_field: delta.StructField, mode: str) -> Key:
    """With column mapping a field is its Delta id (renames keep it); without, its name path."""
    if mode == "none":
        return (*parent_key, delta_field.name)
    return ("id", mapping_id(delta_field))


class _FieldKeys(SchemaVisitor[Key, list[tuple[Key, int]]]):
    """(key, id) for every field, element, key and value of an Iceberg type, parents first; a key as
    `_field_key` gives it (list and map parts: their parent's key and `element` / `key` / `value`)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def struct(
        self, struct: iceberg.StructType, ctx: Key, fields: Sequence[Callable[[Key], list[tuple[Key, int]]]]
    ) -> list[tuple[Key, int]]:
        out: list[tuple[Key, int]] = []
        for f, child in zip(struct.fields, fields, strict=True):
            key = (*ctx, f.name) if self.mode == "none" else ("id", f.id)
            out += [(key, f.id), *child(key)]
        return out

    def list(
        self, list_type: iceberg.ListType, ctx: Key, element: Callable[[Key], list[tuple[Key, int]]]
    ) -> list[tuple[Key, int]]:
        return [((*ctx, "element"), list_type.element_id), *element((*ctx, "element"))]

    def map(
        self, map_type: iceberg.MapType, ctx: Key, key: Callable, value: Callable
    ) -> list[tuple[Key, int]]:
        key_key, value_key = (*ctx, "key"), (*ctx, "value")
        return [(key_key, map_type.key_id), (value_key, map_type.value_id), *key(key_key), *value(value_key)]

    def primitive(self, primitive: iceberg.PrimitiveType, ctx: Key) -> list[tuple[Key, int]]:
        return []


def _iceberg_keys(iceberg_schema: Schema, mode: str) -> list[tuple[Key, int]]:
    return visit(iceberg_schema.as_struct(), _FieldKeys(mode), ())


# --- matching the two sides ----------------------------------------------------------------------------


def matched_fields(
    delta_struct: delta.StructType, fields: Sequence[Callable[[Any], Any]], partner: IcebergType
) -> Iterator[tuple[delta.StructField, Callable[[Any], Any], iceberg.NestedField]]:
    """(Delta field, its child visit, Iceberg field) of one struct, matched by logical name; fields only
    one side has are skipped (the Iceberg schema may be another version of the table's), and so are all
    when `partner` is no struct."""
    if not isinstance(partner, iceberg.StructType):
        return
    by_name = {f.name: f for f in partner.fields}
    for delta_field, child in zip(delta_struct.fields, fields, strict=True):
        iceberg_field = by_name.get(delta_field.name)
        if iceberg_field is not None:
            yield delta_field, child, iceberg_field


# --- partitioning ----------------------------------------------------------------------------------------


def partition_spec(
    iceberg_schema: Schema, partition_columns: Sequence[str], *, spec_id: int = 0
) -> dict[str, Any]:
    """Identity partitioning on Delta's partition columns (logical top-level names), field ids from 1000."""
    by_name = {f.name: f for f in iceberg_schema.fields}
    fields = []
    for index, column in enumerate(partition_columns):
        source = by_name.get(column)
        if source is None:
            raise MirrorInputError(f"partition column {column!r} is not a top-level column of the schema")
        if not isinstance(source.type, iceberg.PrimitiveType):
            raise MirrorInputError(f"partition column {column!r} is not of a primitive type")
        fields.append(
            {
                "name": column,
                "transform": "identity",
                "source-id": source.id,
                "field-id": PARTITION_FIELD_ID_BASE + index,
            }
        )
    return {"spec-id": spec_id, "fields": fields}


# Dates and timestamps as Delta Spark writes partition values (`2024-01-01`, `2024-01-01 00:00:00[.f]`,
# `2024-01-01T08:00:00.000000Z`), years beyond 9999 too: a session in a zone west of UTC writes
# 9999-12-31 23:59 as `+10000-01-01T07:59:00.000000Z`, which Python's datetime cannot hold.
_DATE_TEXT = re.compile(r"([+-]?\d{4,})-(\d{2})-(\d{2})")
_TIMESTAMP_TEXT = re.compile(
    r"([+-]?\d{4,})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})?"
)


def _epoch_day(year: str, month: str, day: str) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date, any year (Howard Hinnant's days_from_civil)."""
    y, m, d = int(year), int(month), int(day)
    if not 1 <= m <= 12 or not 1 <= d <= 31:
        raise ValueError("month or day out of range")
    y -= m <= 2
    era = y // 400
    year_of_era = y - era * 400
    day_of_year = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    days = era * 146_097 + day_of_era - 719_468
    if _civil(days) != (int(year), m, d):
        raise ValueError("no such day")
    return days


def _civil(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day since 1970-01-01 (Hinnant's civil_from_days)."""
    z = days + 719_468
    era = z // 146_097
    day_of_era = z - era * 146_097
    year_of_era = (day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    mp = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * mp + 2) // 5 + 1
    month = mp + (3 if mp < 10 else -9)
    return year_of_era + era * 400 + (month <= 2), month, day


def _date_text(days: int) -> str:
    """ISO-8601 text of a day since 1970-01-01; a year beyond 9999 (or before 0) signed, as Java's
    `LocalDate.toString` and `DateTimeFormatter.ISO_*` write and parse it."""
    year, month, day = _civil(days)
    year_text = f"{year:04d}" if 0 <= year <= 9999 else f"{year:+05d}"
    return f"{year_text}-{month:02d}-{day:02d}"


def _timestamp_micros(value: str, *, with_zone: bool) -> int:
    """Microseconds since the epoch of a Delta timestamp partition value. Without an offset the text is
    read as UTC (as delta-kernel-rs does; Delta Spark 4 writes `...Z`); timestamp_ntz takes none."""
    match = _TIMESTAMP_TEXT.fullmatch(value)
    if match is None:
        raise ValueError("expected YYYY-MM-DD HH:MM:SS[.ffffff][Z|+HH:MM]")
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    if zone is not None and not with_zone:
        raise ValueError("timestamp_ntz value has a time zone")
    if int(hour) > 23 or int(minute) > 59 or int(second) > 59:
        raise ValueError("time of day out of range")
    digits = (fraction or "").ljust(9, "0")
    if digits[6:] != "000":
        raise ValueError("finer than microseconds")
    offset = 0
    if zone not in (None, "Z"):
        sign = -1 if zone[0] == "-" else 1
        offset = sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    seconds = _epoch_day(year, month, day) * 86_400 + int(hour) * 3600 + int(minute) * 60 + int(second)
    return (seconds - offset) * 1_000_000 + int(digits[:6])


def partition_value(value: str | None, iceberg_schema: Schema, column: str) -> Any:
    """The Iceberg single-value JSON of a Delta partition value of top-level `column`."""
    source = next((f for f in iceberg_schema.fields if f.name == column), None)
    if source is None:
        raise MirrorInputError(f"partition column {column!r} is not a top-level column of the schema")
    return partition_value_to_json(value, source.type, column=column)


def partition_value_typed(value: str | None, iceberg_type: IcebergType) -> Any:
    """A Delta partition value (a string in the log) -> Iceberg's internal value for `iceberg_type`.

    None for null (and for the empty string, which Delta writes for null). Internal values as in
    Iceberg Java's `PartitionData`: int/long -> int, float/double -> float, decimal -> Decimal with the
    type's scale, string -> str, boolean -> bool, binary -> bytes, date -> days since 1970-01-01,
    timestamp / timestamptz -> microseconds since the epoch.

    Timestamps without an offset (`2024-01-01 00:00:00[.ffffff]`) are read as UTC, as delta-kernel-rs
    does; Delta Spark writes them in its session time zone, so a writer running in another zone would
    have produced different strings for the same instants.
    """
    if value is None or value == "":
        return None
    if not isinstance(iceberg_type, iceberg.PrimitiveType):
        raise MirrorInputError(f"partition value {value!r} for non-primitive type {iceberg_type}")
    try:
        return _parse_partition_value(value, iceberg_type.name)
    except (ValueError, InvalidOperation) as exc:
        raise MirrorInputError(f"partition value {value!r} is not a valid {iceberg_type}: {exc}") from exc


def _parse_partition_value(value: str, iceberg_type: str) -> Any:
    if iceberg_type in ("int", "long"):
        number = int(value)
        bits = 32 if iceberg_type == "int" else 64
        if not -(1 << (bits - 1)) <= number < 1 << (bits - 1):
            raise ValueError("out of range")
        return number
    if iceberg_type in ("float", "double"):
        # Delta Spark writes Java's Double.toString: "NaN", "Infinity", "-Infinity" included.
        return float(value)
    if iceberg_type == "string":
        return value
    if iceberg_type == "boolean":
        if value.lower() not in ("true", "false"):
            raise ValueError("expected true or false")
        return value.lower() == "true"
    if iceberg_type == "binary":
        # Delta Spark writes a binary partition value as the string Spark casts it to (its bytes decoded as
        # UTF-8) and reads it back as that string's UTF-8 bytes: the value Delta reads is this one.
        return value.encode("utf-8")
    if iceberg_type == "date":
        match = _DATE_TEXT.fullmatch(value)
        if match is None:
            raise ValueError("expected YYYY-MM-DD")
        return _epoch_day(*match.groups())
    if iceberg_type in ("timestamp", "timestamptz"):
        return _timestamp_micros(value, with_zone=iceberg_type == "timestamptz")
    match = ICEBERG_DECIMAL.match(iceberg_type)
    if match:
        precision, scale = int(match.group(1)), int(match.group(2))
        number = Decimal(value)
        scaled = number.quantize(Decimal(1).scaleb(-scale), context=Context(prec=100))
        if scaled != number:
            raise ValueError(f"has more than {scale} decimal places")
        if len(scaled.as_tuple().digits) > precision:
            raise ValueError(f"has more than {precision} digits")
        return scaled
    raise ValueError(f"unsupported partition type {iceberg_type}")


def partition_value_to_json(
    value: str | None, iceberg_type: IcebergType, *, column: str | None = None
) -> Any:
    """A Delta partition value -> Iceberg's single-value JSON (spec Appendix, as `SingleValueParser`):
    numbers and booleans as JSON literals, decimal as a string with the type's scale, date as
    `YYYY-MM-DD`, timestamp as `YYYY-MM-DDTHH:MM:SS.ffffff` (`+00:00` appended for timestamptz),
    binary as hex, null as None.

    NaN and infinite floats are the strings `"NaN"`, `"Infinity"` and `"-Infinity"`, as Iceberg Java's own
    JSON writes them (Jackson quotes numbers JSON has no literal for); `SingleValueParser` reads only
    numbers, so the project's JVM helper (`ContentFileBatch`) makes them numbers again for a float or
    double partition field. In the manifests they are Avro floats like any other.
    """
    internal = partition_value_typed(value, iceberg_type)
    if internal is None:
        return None
    if isinstance(internal, float) and not math.isfinite(internal):
        return "NaN" if math.isnan(internal) else ("Infinity" if internal > 0 else "-Infinity")
    name = str(iceberg_type)  # a primitive: partition_value_typed refuses the others
    if name == "date":
        return _date_text(internal)
    if name in ("timestamp", "timestamptz"):
        days, micros = divmod(internal, 86_400_000_000)
        seconds, fraction = divmod(micros, 1_000_000)
        clock = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{fraction:06d}"
        text = f"{_date_text(days)}T{clock}"
        return f"{text}+00:00" if name == "timestamptz" else text
    if name == "binary":
        return internal.hex().upper()
    if isinstance(internal, Decimal):
        return str(internal)
    return internal
