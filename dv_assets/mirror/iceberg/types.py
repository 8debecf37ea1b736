"""An Iceberg schema as values, its exact JSON, and the one walk over it.

`Schema` / `NestedField` / `StructType` / `ListType` / `MapType` / `PrimitiveType`, with `to_json` and
`from_json` of the JSON of Iceberg Java's `SchemaParser` (the table spec's, Appendix C): `to_json` writes
the keys Iceberg Java writes, in its order (`type`, `schema-id`, `identifier-field-ids` when there are
any, `fields`; a field's `id`, `name`, `required`, `type`, then `doc`, `initial-default` and
`write-default` when set), so `json.dumps(schema.to_json())` is what Iceberg Java would write itself, and
from Iceberg Java's JSON `to_json(from_json(j)) == j`. Keys this module does not know are refused rather
than dropped: the schema sent back must be the one read.

A primitive type is kept as its name in that JSON (`long`, `decimal(10, 2)`, `fixed[16]`, `timestamptz`,
`timestamp_ns`, `variant`, ...): names Iceberg adds later pass through unchanged. Defaults are kept as
their single-value JSON.

pyiceberg's `Schema` is not used: its JSON puts `schema-id` after the fields and always writes
`identifier-field-ids`. `pyiceberg_reader.py` reads its JSON into these values.

Every walk over a schema is a `SchemaVisitor` run by `visit` (`schema_visitor.py`, shared with the Delta
side): `visit` knows what each kind of type contains, a visitor what to make of each.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.schema_visitor import ListNode, MapNode, PrimitiveNode, SchemaVisitor, StructNode, visit

# A decimal type's name: Iceberg writes `decimal(P, S)`, Delta `decimal(P,S)`; both parse.
DECIMAL_PATTERN = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


@dataclass(frozen=True, slots=True)
class PrimitiveType(PrimitiveNode):
    name: str  # as Iceberg's JSON names it: `int`, `decimal(10, 2)`, `fixed[16]`, `timestamptz`, ...


@dataclass(frozen=True, slots=True)
class ListType(ListNode):
    element_id: int
    element_type: IcebergType
    element_required: bool


@dataclass(frozen=True, slots=True)
class MapType(MapNode):
    key_id: int
    key_type: IcebergType
    value_id: int
    value_type: IcebergType
    value_required: bool


@dataclass(frozen=True, slots=True)
class NestedField:
    id: int
    name: str
    required: bool
    type: IcebergType
    doc: str | None = None
    initial_default: Any = None  # single-value JSON; None: not set (Iceberg Java never writes null)
    write_default: Any = None


@dataclass(frozen=True, slots=True)
class StructType(StructNode):
    fields: tuple[NestedField, ...] = ()


IcebergType = PrimitiveType | ListType | MapType | StructType


@dataclass(frozen=True, slots=True)
class Schema:
    """A table schema: its top-level fields, its id in the table's metadata, its identifier fields."""

    fields: tuple[NestedField, ...] = ()
    schema_id: int | None = None
    identifier_field_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in ("fields", "identifier_field_ids"):
            if not isinstance(getattr(self, name), tuple):
                object.__setattr__(self, name, tuple(getattr(self, name)))

    def as_struct(self) -> StructType:
        return StructType(self.fields)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "struct"}
        if self.schema_id is not None:
            out["schema-id"] = self.schema_id
        if self.identifier_field_ids:
            out["identifier-field-ids"] = list(self.identifier_field_ids)
        out["fields"] = visit(self.as_struct(), _TO_JSON, None)["fields"]
        return out

    @classmethod
    def from_json(cls, raw: Any) -> Schema:
        """A schema from the JSON of Iceberg Java's `SchemaParser.toJson` (or pyiceberg's, the same keys)."""
        _check_keys(raw, _SCHEMA_KEYS, "schema")
        if raw.get("type") != "struct":
            raise MirrorInputError(f"Iceberg schema JSON is not a struct: {raw!r}"[:500])
        schema_id = raw.get("schema-id")
        return cls(
            fields=_struct_from_json(raw).fields,
            schema_id=None if schema_id is None else int(schema_id),
            identifier_field_ids=tuple(int(i) for i in raw.get("identifier-field-ids") or ()),
        )

    def __str__(self) -> str:
        return str(self.as_struct())


_SCHEMA_KEYS = frozenset({"type", "schema-id", "identifier-field-ids", "fields"})
_FIELD_KEYS = frozenset({"id", "name", "required", "type", "doc", "initial-default", "write-default"})
_STRUCT_KEYS = frozenset({"type", "fields"})
_LIST_KEYS = frozenset({"type", "element-id", "element", "element-required"})
_MAP_KEYS = frozenset({"type", "key-id", "key", "value-id", "value", "value-required"})


def type_from_json(raw: Any) -> IcebergType:
    """An Iceberg type from its JSON: a name for a primitive, an object for struct, list and map.

    An absent `required` / `element-required` / `value-required` reads as false (optional).
    """
    if isinstance(raw, str):
        return PrimitiveType(raw)
    kind = raw.get("type") if isinstance(raw, Mapping) else None
    try:
        if kind == "struct":
            _check_keys(raw, _STRUCT_KEYS, "struct")
            return _struct_from_json(raw)
        if kind == "list":
            _check_keys(raw, _LIST_KEYS, "list")
            element = type_from_json(raw["element"])
            return ListType(int(raw["element-id"]), element, bool(raw.get("element-required", False)))
        if kind == "map":
            _check_keys(raw, _MAP_KEYS, "map")
            key, value = type_from_json(raw["key"]), type_from_json(raw["value"])
            required = bool(raw.get("value-required", False))
            return MapType(int(raw["key-id"]), key, int(raw["value-id"]), value, required)
    except KeyError as missing:
        raise MirrorInputError(f"Iceberg {kind} type JSON without {missing}: {raw!r}"[:500]) from None
    raise MirrorInputError(f"not an Iceberg type: {raw!r}"[:500])


def _struct_from_json(raw: Mapping[str, Any]) -> StructType:
    fields = raw.get("fields")
    if not isinstance(fields, list):
        raise MirrorInputError(f"Iceberg struct JSON without fields: {raw!r}"[:500])
    return StructType(tuple(_field_from_json(f) for f in fields))


def _field_from_json(raw: Any) -> NestedField:
    _check_keys(raw, _FIELD_KEYS, "field")
    if "id" not in raw or not isinstance(raw.get("name"), str) or "type" not in raw:
        raise MirrorInputError(f"Iceberg field JSON without an id, a name and a type: {raw!r}"[:500])
    return NestedField(
        id=int(raw["id"]),
        name=raw["name"],
        required=bool(raw.get("required", False)),
        type=type_from_json(raw["type"]),
        doc=raw.get("doc"),
        initial_default=raw.get("initial-default"),
        write_default=raw.get("write-default"),
    )


def _check_keys(raw: Any, known: frozenset[str], what: str) -> None:
    if not isinstance(raw, Mapping):
        raise MirrorInputError(f"Iceberg {what} JSON is not an object: {raw!r}"[:500])
    unknown = set(raw) - known
    if unknown:
        raise MirrorInputError(f"Iceberg {what} JSON with unknown keys {sorted(unknown)}: {raw!r}"[:500])


# --- walks ----------------------------------------------------------------------------------------


class _ToJson(SchemaVisitor[None, Any]):
    """A type's JSON, keys as Iceberg Java's SchemaParser writes them, in its order."""

    def struct(self, struct: StructType, ctx: None, fields: Sequence[Callable[[None], Any]]) -> Any:
        return {
            "type": "struct",
            "fields": [_field_json(f, t(None)) for f, t in zip(struct.fields, fields, strict=True)],
        }

    def list(self, list_type: ListType, ctx: None, element: Callable[[None], Any]) -> Any:
        return {
            "type": "list",
            "element-id": list_type.element_id,
            "element": element(None),
            "element-required": list_type.element_required,
        }

    def map(
        self, map_type: MapType, ctx: None, key: Callable[[None], Any], value: Callable[[None], Any]
    ) -> Any:
        return {
            "type": "map",
            "key-id": map_type.key_id,
            "key": key(None),
            "value-id": map_type.value_id,
            "value": value(None),
            "value-required": map_type.value_required,
        }

    def primitive(self, primitive: PrimitiveType, ctx: None) -> Any:
        return primitive.name


def _field_json(field: NestedField, type_json: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"id": field.id, "name": field.name, "required": field.required, "type": type_json}
    if field.doc is not None:
        out["doc"] = field.doc
    if field.initial_default is not None:
        out["initial-default"] = field.initial_default
    if field.write_default is not None:
        out["write-default"] = field.write_default
    return out


_TO_JSON = _ToJson()
