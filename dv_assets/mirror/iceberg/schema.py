"""Delta schema -> Iceberg schema JSON, name mapping, partition spec and partition values (pure).

Iceberg JSON here is what Iceberg Java's `SchemaParser.fromJson` / `PartitionSpecParser.fromJson` and
`NameMappingParser.fromJson` accept.

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
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Context, Decimal, InvalidOperation
from typing import Any

from dv_assets.mirror.delta.column_mapping import (
    checked_mode,
    mapping_id,
    mapping_ids,
    nested_ids,
    physical_name,
    walk_fields,
)
from dv_assets.mirror.errors import MirrorInputError, UnsupportedFeatureError

IcebergType = str | dict[str, Any]

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
}
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
ICEBERG_DECIMAL = _DECIMAL  # Iceberg writes `decimal(P, S)`; both spellings parse

Key = tuple[Any, ...]  # identifies a field across schema versions (see `_field_key`)


# --- schema conversion -----------------------------------------------------------------------------------


def to_iceberg_schema(
    delta_schema: Mapping[str, Any], column_mapping_mode: str = "none", *, schema_id: int = 0
) -> dict[str, Any]:
    """The Iceberg schema JSON of a Delta schema (`metaData.schemaString`, parsed)."""
    return evolve(None, delta_schema, column_mapping_mode, schema_id=schema_id)


def evolve(
    previous: Mapping[str, Any] | None,
    delta_schema: Mapping[str, Any],
    column_mapping_mode: str,
    *,
    schema_id: int | None = None,
) -> dict[str, Any]:
    """The Iceberg schema for `delta_schema`, keeping the ids `previous` gave to the same columns.

    New columns get ids above the previous highest id (Iceberg's `last-column-id`). An upgrade to column
    mapping keeps every id or is refused (see `_check_upgrade_keeps_ids`).
    """
    mode = checked_mode(column_mapping_mode)
    if schema_id is None:
        schema_id = 0 if previous is None else int(previous.get("schema-id", 0)) + 1
    if previous is None:
        return _build(delta_schema, mode, {}, 0, schema_id)
    if _may_be_mapping_upgrade(previous, delta_schema, mode):
        # The same columns as before, now with Delta ids: the ids Iceberg gave them must be those ids.
        upgraded = _build(delta_schema, mode, {}, 0, schema_id)
        if {path for path, _ in _iceberg_keys(upgraded, "none")} == {
            path for path, _ in _iceberg_keys(previous, "none")
        }:
            _check_upgrade_keeps_ids(previous, upgraded)
            return upgraded
    known = dict(_iceberg_keys(previous, mode))
    return _build(delta_schema, mode, known, highest_field_id(previous), schema_id)


def _build(
    delta_schema: Mapping[str, Any], mode: str, known: dict[Key, int], previous_max: int, schema_id: int
) -> dict[str, Any]:
    delta_ids = list(mapping_ids(delta_schema)) if mode != "none" else []
    if any(i >= NESTED_ID_BASE for i in delta_ids):
        raise UnsupportedFeatureError(f"a delta.columnMapping.id is at or above {NESTED_ID_BASE}")
    if mode == "none":
        first_fresh = previous_max + 1
    else:
        first_fresh = max([NESTED_ID_BASE, *(i + 1 for i in known.values() if i >= NESTED_ID_BASE)])
    builder = _SchemaBuilder(mode=mode, known=known, next_id=first_fresh)
    fields = builder.struct_fields(_struct_fields(delta_schema, "schema"), parent_key=())
    return {"type": "struct", "schema-id": schema_id, "fields": fields}


def _may_be_mapping_upgrade(previous: Mapping[str, Any], delta_schema: Mapping[str, Any], mode: str) -> bool:
    """Whether `previous` may have been built without column mapping for the columns `delta_schema` now
    maps: Delta's upgrade (ALTER TABLE SET TBLPROPERTIES delta.columnMapping.mode = 'name') gives existing
    columns physical names equal to their names, and a schema built without column mapping has no id in
    the range kept for list elements and map keys/values under it. Under column mapping ids are matched
    by Delta id, which such a schema does not have, so `evolve` matches these columns by name path."""
    return (
        mode != "none"
        and highest_field_id(previous) < NESTED_ID_BASE
        and all(physical_name(f) == f["name"] for f in walk_fields(delta_schema))
    )


def _check_upgrade_keeps_ids(previous: Mapping[str, Any], upgraded: Mapping[str, Any]) -> None:
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


def highest_field_id(iceberg_schema: Mapping[str, Any]) -> int:
    """The largest field id anywhere in an Iceberg schema JSON (0 when it has no fields)."""
    return max((field_id for _, field_id in _iceberg_keys(iceberg_schema, "id")), default=0)


@dataclass
class _SchemaBuilder:
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

    def struct_fields(self, delta_fields: list[Mapping[str, Any]], parent_key: Key) -> list[dict[str, Any]]:
        # Iceberg's order: ids for all fields of a struct first, then for their children.
        ids = []
        for delta_field in delta_fields:
            key = _field_key(parent_key, delta_field, self.mode)
            fixed = mapping_id(delta_field) if self.mode != "none" else None
            ids.append((key, self.take(key, fixed)))
        out = []
        for delta_field, (key, field_id) in zip(delta_fields, ids, strict=True):
            nested = nested_ids(delta_field)
            nested_path = physical_name(delta_field)
            entry: dict[str, Any] = {
                "id": field_id,
                "name": delta_field["name"],
                "required": not delta_field.get("nullable", True),
                "type": self.type_(delta_field["type"], key, nested, nested_path),
            }
            comment = (delta_field.get("metadata") or {}).get("comment")
            if isinstance(comment, str):
                entry["doc"] = comment
            out.append(entry)
        return out

    def type_(
        self, delta_type: Any, key: Key, nested_ids: Mapping[str, int], nested_path: str
    ) -> IcebergType:
        if isinstance(delta_type, str):
            return primitive_type(delta_type)
        kind = delta_type.get("type")
        if kind == "struct":
            return {"type": "struct", "fields": self.struct_fields(_struct_fields(delta_type, "struct"), key)}
        if kind == "array":
            element_key = (*key, "element")
            element_id = self.take(element_key, nested_ids.get(f"{nested_path}.element"))
            return {
                "type": "list",
                "element-id": element_id,
                "element": self.type_(
                    delta_type["elementType"], element_key, nested_ids, f"{nested_path}.element"
                ),
                "element-required": not delta_type.get("containsNull", True),
            }
        if kind == "map":
            key_key, value_key = (*key, "key"), (*key, "value")
            key_id = self.take(key_key, nested_ids.get(f"{nested_path}.key"))
            value_id = self.take(value_key, nested_ids.get(f"{nested_path}.value"))
            return {
                "type": "map",
                "key-id": key_id,
                "key": self.type_(delta_type["keyType"], key_key, nested_ids, f"{nested_path}.key"),
                "value-id": value_id,
                "value": self.type_(delta_type["valueType"], value_key, nested_ids, f"{nested_path}.value"),
                "value-required": not delta_type.get("valueContainsNull", True),
            }
        raise UnsupportedFeatureError(f"Delta type {delta_type!r} has no Iceberg equivalent")


def primitive_type(delta_type: str) -> str:
    """A Delta primitive type name -> the Iceberg one (decimal keeps precision and scale)."""
    if delta_type in _PRIMITIVES:
        return _PRIMITIVES[delta_type]
    match = _DECIMAL.match(delta_type)
    if match:
        return f"decimal({int(match.group(1))}, {int(match.group(2))})"
    raise UnsupportedFeatureError(f"Delta type {delta_type!r} has no Iceberg equivalent")


def _struct_fields(struct: Mapping[str, Any], where: str) -> list[Mapping[str, Any]]:
    fields = struct.get("fields")
    if struct.get("type") != "struct" or not isinstance(fields, list):
        raise MirrorInputError(f"Delta {where} is not a struct with fields: {struct!r}")
    return fields


def _field_key(parent_key: Key, delta_field: Mapping[str, Any], mode: str) -> Key:
    """With column mapping a field is its Delta id (renames keep it); without, its name path."""
    if mode == "none":
        return (*parent_key, delta_field["name"])
    return ("id", mapping_id(delta_field))


def _iceberg_keys(iceberg_schema: Mapping[str, Any], mode: str) -> Iterator[tuple[Key, int]]:
    """(key, id) for every field, element, key and value of an Iceberg schema JSON."""

    def walk(iceberg_type: IcebergType, key: Key) -> Iterator[tuple[Key, int]]:
        if not isinstance(iceberg_type, Mapping):
            return
        kind = iceberg_type["type"]
        if kind == "struct":
            for iceberg_field in iceberg_type["fields"]:
                field_key = (*key, iceberg_field["name"]) if mode == "none" else ("id", iceberg_field["id"])
                yield field_key, iceberg_field["id"]
                yield from walk(iceberg_field["type"], field_key)
        elif kind == "list":
            yield (*key, "element"), iceberg_type["element-id"]
            yield from walk(iceberg_type["element"], (*key, "element"))
        elif kind == "map":
            yield (*key, "key"), iceberg_type["key-id"]
            yield (*key, "value"), iceberg_type["value-id"]
            yield from walk(iceberg_type["key"], (*key, "key"))
            yield from walk(iceberg_type["value"], (*key, "value"))

    yield from walk(iceberg_schema, ())


# --- name mapping ----------------------------------------------------------------------------------------


def name_mapping(
    iceberg_schema: Mapping[str, Any], delta_schema: Mapping[str, Any], column_mapping_mode: str
) -> list[dict[str, Any]]:
    """`schema.name-mapping.default`: how readers find columns in Parquet files without field ids.

    The names are those in the Parquet files: logical names without column mapping, physical names
    (`delta.columnMapping.physicalName`) with it. Ids come from `iceberg_schema` (matched to Delta
    fields by logical name), so the mapping is right for whatever schema the table ended up with.
    """
    mode = checked_mode(column_mapping_mode)
    return _mapped_fields(_struct_fields(delta_schema, "schema"), iceberg_schema["fields"], mode)


def matched_fields(
    delta_fields: Sequence[Mapping[str, Any]], iceberg_fields: Sequence[Mapping[str, Any]]
) -> Iterator[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """(Delta field, Iceberg field) pairs of one struct, matched by logical name; fields only one side
    has are skipped (the Iceberg schema may be another version of the table's)."""
    by_name = {f["name"]: f for f in iceberg_fields}
    for delta_field in delta_fields:
        iceberg_field = by_name.get(delta_field["name"])
        if iceberg_field is not None:
            yield delta_field, iceberg_field


def _mapped_fields(
    delta_fields: Sequence[Mapping[str, Any]], iceberg_fields: Sequence[Mapping[str, Any]], mode: str
) -> list[dict[str, Any]]:
    return [
        _mapping_entry(
            physical_name(delta_field, mode),
            iceberg_field["id"],
            delta_field["type"],
            iceberg_field["type"],
            mode,
        )
        for delta_field, iceberg_field in matched_fields(delta_fields, iceberg_fields)
    ]


def _mapping_entry(
    name: str, field_id: int, delta_type: Any, iceberg_type: IcebergType, mode: str
) -> dict[str, Any]:
    entry: dict[str, Any] = {"field-id": field_id, "names": [name]}
    children = _mapped_children(delta_type, iceberg_type, mode)
    if children:
        entry["fields"] = children
    return entry


def _mapped_children(delta_type: Any, iceberg_type: IcebergType, mode: str) -> list[dict[str, Any]]:
    if not isinstance(delta_type, Mapping) or not isinstance(iceberg_type, Mapping):
        return []
    kind = delta_type["type"]
    if kind == "struct" and iceberg_type["type"] == "struct":
        return _mapped_fields(delta_type["fields"], iceberg_type["fields"], mode)
    if kind == "array" and iceberg_type["type"] == "list":
        element = (delta_type["elementType"], iceberg_type["element"])
        return [_mapping_entry("element", iceberg_type["element-id"], *element, mode)]
    if kind == "map" and iceberg_type["type"] == "map":
        key = (delta_type["keyType"], iceberg_type["key"])
        value = (delta_type["valueType"], iceberg_type["value"])
        return [
            _mapping_entry("key", iceberg_type["key-id"], *key, mode),
            _mapping_entry("value", iceberg_type["value-id"], *value, mode),
        ]
    return []


# --- partitioning ----------------------------------------------------------------------------------------


def partition_spec(
    iceberg_schema: Mapping[str, Any], partition_columns: Sequence[str], *, spec_id: int = 0
) -> dict[str, Any]:
    """Identity partitioning on Delta's partition columns (logical top-level names), field ids from 1000."""
    by_name = {f["name"]: f for f in iceberg_schema["fields"]}
    fields = []
    for index, column in enumerate(partition_columns):
        source = by_name.get(column)
        if source is None:
            raise MirrorInputError(f"partition column {column!r} is not a top-level column of the schema")
        if not isinstance(source["type"], str):
            raise MirrorInputError(f"partition column {column!r} is not of a primitive type")
        fields.append(
            {
                "name": column,
                "transform": "identity",
                "source-id": source["id"],
                "field-id": PARTITION_FIELD_ID_BASE + index,
            }
        )
    return {"spec-id": spec_id, "fields": fields}


_EPOCH_DATE = date(1970, 1, 1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def partition_value(value: str | None, iceberg_schema: Mapping[str, Any], column: str) -> Any:
    """The Iceberg single-value JSON of a Delta partition value of top-level `column`."""
    source = next((f for f in iceberg_schema["fields"] if f["name"] == column), None)
    if source is None:
        raise MirrorInputError(f"partition column {column!r} is not a top-level column of the schema")
    return partition_value_to_json(value, source["type"], column=column)


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
    if not isinstance(iceberg_type, str):
        raise MirrorInputError(f"partition value {value!r} for non-primitive type {iceberg_type!r}")
    try:
        return _parse_partition_value(value, iceberg_type)
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
        return value.encode("latin-1")  # Delta writes each byte as one character
    if iceberg_type == "date":
        return (date.fromisoformat(value) - _EPOCH_DATE).days
    if iceberg_type in ("timestamp", "timestamptz"):
        parsed = datetime.fromisoformat(value)
        if iceberg_type == "timestamp":
            if parsed.tzinfo is not None:
                raise ValueError("timestamp_ntz value has a time zone")
            parsed = parsed.replace(tzinfo=UTC)
        elif parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        delta = parsed - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
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

    NaN and infinite floats are refused: `SingleValueParser.fromJson` takes only JSON numbers for
    float/double, Iceberg's Jackson mapper rejects the non-standard `NaN` / `Infinity` tokens, and a
    string ("NaN") is not a number to it, so no JSON reaches Iceberg Java as such a value.
    """
    internal = partition_value_typed(value, iceberg_type)
    if internal is None:
        return None
    if isinstance(internal, float) and not math.isfinite(internal):
        where = f" of column {column!r}" if column is not None else ""
        raise MirrorInputError(
            f"partition value {value!r}{where} ({iceberg_type}) cannot be represented as an Iceberg "
            "partition value: Iceberg's single-value JSON has no NaN or infinity"
        )
    if iceberg_type == "date":
        return date.fromordinal(_EPOCH_DATE.toordinal() + internal).isoformat()
    if iceberg_type in ("timestamp", "timestamptz"):
        instant = _EPOCH + timedelta(microseconds=internal)
        text = instant.replace(tzinfo=None).isoformat(timespec="microseconds")
        return f"{text}+00:00" if iceberg_type == "timestamptz" else text
    if iceberg_type == "binary":
        return internal.hex().upper()
    if isinstance(internal, Decimal):
        return str(internal)
    return internal
