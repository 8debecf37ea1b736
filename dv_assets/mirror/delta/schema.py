"""A Delta schema as values (PROTOCOL.md, "Schema Serialization Format"), and the one walk over it.

`StructType` / `StructField` / `ArrayType` / `MapType` / `PrimitiveType`, parsed once from
`metaData.schemaString` (`Metadata.schema`). Primitive names stay as the log writes them (`integer`,
`decimal(10,2)`, `timestamp_ntz`, `variant`, ...): what they mean elsewhere is the reader's business.
Column metadata (`delta.columnMapping.*`, `comment`, `__COLLATIONS`, ...) is kept as written, read-only,
in `StructField.metadata`; `column_mapping.py` reads the column-mapping keys.

The values are immutable, all the way down: a schema is shared by every file of a version and serves as
a cache key (`iceberg/metrics.py`), so it can never change under a reader.

Every walk over a schema is a `SchemaVisitor` run by `visit` (`schema_visitor.py`, shared with the Iceberg
side; an array is a list there): `visit` knows what each kind of type contains, a visitor what to make of
each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dv_assets.mirror.errors import MirrorInputError, UnsupportedFeatureError
from dv_assets.mirror.schema_visitor import (
    ListNode,
    MapNode,
    PrimitiveNode,
    SchemaVisitor,
    StructNode,
    visit,
)


class FrozenJson(Mapping[str, Any]):
    """A JSON object that cannot change: nested objects are FrozenJson too, arrays tuples."""

    __slots__ = ("_items",)

    def __init__(self, raw: Mapping[str, Any] | None = None) -> None:
        self._items = {str(k): frozen_json(v) for k, v in (raw or {}).items()}

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(frozenset(self._items.items()))

    def __repr__(self) -> str:
        return repr(self._items)

    def __reduce__(self) -> tuple[type[FrozenJson], tuple[dict[str, Any]]]:
        return FrozenJson, (thawed_json(self),)


def frozen_json(value: Any) -> Any:
    if isinstance(value, Mapping):
        return value if isinstance(value, FrozenJson) else FrozenJson(value)
    if isinstance(value, list | tuple):
        return tuple(frozen_json(v) for v in value)
    return value


def thawed_json(value: Any) -> Any:
    """A frozen JSON value as `json` writes and reads it (dicts and lists)."""
    if isinstance(value, Mapping):
        return {k: thawed_json(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thawed_json(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class PrimitiveType(PrimitiveNode):
    name: str  # as the log writes it: `long`, `decimal(10,2)`, `timestamp_ntz`, ...


@dataclass(frozen=True, slots=True)
class ArrayType(ListNode):
    TYPE_NAME = "array"
    element_type: DataType
    contains_null: bool = True


@dataclass(frozen=True, slots=True)
class MapType(MapNode):
    key_type: DataType
    value_type: DataType
    value_contains_null: bool = True


@dataclass(frozen=True, slots=True)
class StructField:
    name: str
    type: DataType
    nullable: bool = True
    metadata: Mapping[str, Any] = field(default_factory=FrozenJson)  # read-only (a FrozenJson)

    def __post_init__(self) -> None:
        if not isinstance(self.metadata, FrozenJson):
            object.__setattr__(self, "metadata", FrozenJson(self.metadata))

    @property
    def comment(self) -> str | None:
        comment = self.metadata.get("comment")
        return comment if isinstance(comment, str) else None


@dataclass(frozen=True, slots=True)
class StructType(StructNode):
    """A struct type, and a table's schema (the top-level struct)."""

    fields: tuple[StructField, ...] = ()

    @classmethod
    def from_json(cls, raw: Any) -> StructType:
        """A schema from `metaData.schemaString`, parsed (a struct, or MirrorInputError)."""
        if not isinstance(raw, Mapping) or raw.get("type") != "struct":
            raise MirrorInputError(f"Delta schema is not a struct with fields: {raw!r}"[:500])
        parsed = type_from_json(raw)
        assert isinstance(parsed, StructType)
        return parsed

    def to_json(self) -> dict[str, Any]:
        """The JSON of the schema, as Delta writes it in `schemaString` (every key, in Delta's order)."""
        return visit(self, _TO_JSON, None)


DataType = PrimitiveType | ArrayType | MapType | StructType


def type_from_json(raw: Any) -> DataType:
    """A Delta type from its JSON: a string for a primitive, an object for struct, array and map.

    Absent `nullable` / `containsNull` / `valueContainsNull` mean true and absent metadata none, as
    Delta readers take them.
    """
    if isinstance(raw, str):
        return PrimitiveType(raw)
    if not isinstance(raw, Mapping):
        raise MirrorInputError(f"Delta type {raw!r} is neither a name nor an object"[:500])
    kind = raw.get("type")
    try:
        if kind == "struct":
            fields = raw.get("fields")
            if not isinstance(fields, list):
                raise MirrorInputError(f"Delta struct is not a struct with fields: {raw!r}"[:500])
            return StructType(tuple(_field_from_json(f) for f in fields))
        if kind == "array":
            return ArrayType(type_from_json(raw["elementType"]), bool(raw.get("containsNull", True)))
        if kind == "map":
            return MapType(
                type_from_json(raw["keyType"]),
                type_from_json(raw["valueType"]),
                bool(raw.get("valueContainsNull", True)),
            )
    except KeyError as missing:
        raise MirrorInputError(f"Delta {kind} type without {missing}: {raw!r}"[:500]) from None
    raise UnsupportedFeatureError(f"Delta type {raw!r} has no Iceberg equivalent"[:500])


def _field_from_json(raw: Any) -> StructField:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str) or "type" not in raw:
        raise MirrorInputError(f"Delta struct field without a name and a type: {raw!r}"[:500])
    return StructField(
        name=raw["name"],
        type=type_from_json(raw["type"]),
        nullable=bool(raw.get("nullable", True)),
        metadata=FrozenJson(raw.get("metadata") or {}),
    )


# --- walks ----------------------------------------------------------------------------------------


class _ToJson(SchemaVisitor[None, Any]):
    """The JSON of a type, as Delta writes it in `schemaString`."""

    def struct(self, struct: StructType, ctx: None, fields: Sequence[Callable[[None], Any]]) -> Any:
        return {
            "type": "struct",
            "fields": [
                {"name": f.name, "type": t(None), "nullable": f.nullable, "metadata": thawed_json(f.metadata)}
                for f, t in zip(struct.fields, fields, strict=True)
            ],
        }

    def list(self, array: ArrayType, ctx: None, element: Callable[[None], Any]) -> Any:
        return {"type": "array", "elementType": element(None), "containsNull": array.contains_null}

    def map(
        self, map_type: MapType, ctx: None, key: Callable[[None], Any], value: Callable[[None], Any]
    ) -> Any:
        return {
            "type": "map",
            "keyType": key(None),
            "valueType": value(None),
            "valueContainsNull": map_type.value_contains_null,
        }

    def primitive(self, primitive: PrimitiveType, ctx: None) -> Any:
        return primitive.name


class _AllFields(SchemaVisitor[None, list[StructField]]):
    def struct(
        self, struct: StructType, ctx: None, fields: Sequence[Callable[[None], list[StructField]]]
    ) -> list[StructField]:
        return [x for f, t in zip(struct.fields, fields, strict=True) for x in (f, *t(None))]

    def list(
        self, array: ArrayType, ctx: None, element: Callable[[None], list[StructField]]
    ) -> list[StructField]:
        return element(None)

    def map(self, map_type: MapType, ctx: None, key: Callable, value: Callable) -> list[StructField]:
        return key(None) + value(None)

    def primitive(self, primitive: PrimitiveType, ctx: None) -> list[StructField]:
        return []


_TO_JSON = _ToJson()


def all_fields(data_type: DataType) -> list[StructField]:
    """Every struct field of a type, depth first (a field before its children), inside arrays and maps too."""
    return visit(data_type, _AllFields(), None)
