"""Delta column mapping (PROTOCOL.md, "Column Mapping"), in one place, after delta-kernel-rs's
`table_features/column_mapping.rs`: the mode, each field's id and physical name, the nested ids of list
elements and map keys/values, and whether Iceberg readers can read the Parquet files by field id.

Without column mapping (`none`) a field's physical name is its logical name and it has no id. Under
`name` or `id`, Delta writes Parquet columns under physical names with field ids equal to
`delta.columnMapping.id`; partition values and file stats are keyed by physical names too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Literal, NamedTuple

from dv_assets.mirror.delta.schema import (
    ArrayType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
    all_fields,
)
from dv_assets.mirror.errors import MirrorInputError, UnsupportedFeatureError
from dv_assets.mirror.schema_visitor import SchemaVisitor, visit

ColumnMappingMode = Literal["none", "id", "name"]
MODES: tuple[ColumnMappingMode, ...] = ("none", "id", "name")

MODE_KEY = "delta.columnMapping.mode"
FEATURE = "columnMapping"
COLUMN_MAPPING_ID = "delta.columnMapping.id"
PHYSICAL_NAME = "delta.columnMapping.physicalName"
NESTED_IDS = "delta.columnMapping.nested.ids"


def mode_of(configuration: Mapping[str, str]) -> ColumnMappingMode:
    """The mode `metaData.configuration` names ('none' when unset); it takes effect only where the
    protocol supports column mapping (`Protocol.supports_column_mapping`)."""
    return checked_mode(configuration.get(MODE_KEY))


def has_annotations(schema: StructType) -> bool:
    """Whether any field of the schema carries a column mapping id, physical name or nested ids."""
    keys = (COLUMN_MAPPING_ID, PHYSICAL_NAME, NESTED_IDS)
    return any(key in f.metadata for f in all_fields(schema) for key in keys)


def checked_mode(mode: str | None) -> ColumnMappingMode:
    value = mode or "none"
    if value not in MODES:
        raise UnsupportedFeatureError(f"unknown {MODE_KEY} {value!r}")
    return value  # type: ignore[return-value]


def physical_name(delta_field: StructField, mode: str = "name") -> str:
    """The name of the field in Parquet files, stats and partition values."""
    if mode == "none":
        return delta_field.name
    return delta_field.metadata.get(PHYSICAL_NAME) or delta_field.name


def mapping_id(delta_field: StructField) -> int:
    """The field's `delta.columnMapping.id` (its Parquet field id); required under column mapping."""
    value = delta_field.metadata.get(COLUMN_MAPPING_ID)
    if value is None:
        raise MirrorInputError(f"column {delta_field.name!r} has no {COLUMN_MAPPING_ID} under column mapping")
    return int(value)


def nested_ids(delta_field: StructField) -> Mapping[str, int]:
    """`<physical path>.element` / `.key` / `.value` → Parquet field id, for list and map columns."""
    return delta_field.metadata.get(NESTED_IDS) or {}


def physical_names(schema: StructType, mode: str) -> dict[str, str]:
    """Top-level logical column name → physical name (identity without column mapping)."""
    return {f.name: physical_name(f, mode) for f in schema.fields}


def mapping_ids(schema: StructType) -> Iterator[int]:
    """Every `delta.columnMapping.id` of a schema."""
    for delta_field in all_fields(schema):
        value = delta_field.metadata.get(COLUMN_MAPPING_ID)
        if value is not None:
            yield int(value)


def check_field_ids_readable(schema: StructType, mode: str) -> None:
    """Refuse column mapping with list/map columns whose Parquet element/key/value nodes carry no field id.

    Under column mapping Delta writes Parquet field ids on struct fields only; list elements and map
    keys/values get one only when `delta.columnMapping.nested.ids` says so (IcebergCompat). Iceberg
    readers read a file that has field ids by id alone (the name mapping is only for files without
    any), so such a column cannot be read from the mirror: Iceberg Java fails on it.
    """
    if checked_mode(mode) == "none":
        return
    missing = visit(schema, _MissingNestedIds(mode), _Place("", "", {}))
    if missing:
        raise UnsupportedFeatureError(
            f"column mapping mode {mode!r} with list/map columns whose Parquet element/key/value fields "
            f"have no field id (no {NESTED_IDS}): {', '.join(missing)}; Iceberg readers "
            "read these files by field id and could not read those columns"
        )


class _Place(NamedTuple):
    logical: str  # the dotted logical path (`m.value.element`)
    physical: str  # the physical name of the nearest field, then the parts below it (`col-3.value`)
    ids: Mapping[str, int]  # the nearest field's nested ids


class _MissingNestedIds(SchemaVisitor[_Place, list[str]]):
    """The logical paths of list elements and map keys/values without a nested id, parents first."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def struct(
        self, struct: StructType, ctx: _Place, fields: Sequence[Callable[[_Place], list[str]]]
    ) -> list[str]:
        missing = []
        for f, child in zip(struct.fields, fields, strict=True):
            logical = f"{ctx.logical}.{f.name}" if ctx.logical else f.name
            missing += child(_Place(logical, physical_name(f, self.mode), nested_ids(f)))
        return missing

    def list(self, array: ArrayType, ctx: _Place, element: Callable[[_Place], list[str]]) -> list[str]:
        return self._part(ctx, "element", element)

    def map(self, map_type: MapType, ctx: _Place, key: Callable, value: Callable) -> list[str]:
        return self._part(ctx, "key", key) + self._part(ctx, "value", value)

    def primitive(self, primitive: PrimitiveType, ctx: _Place) -> list[str]:
        return []

    @staticmethod
    def _part(ctx: _Place, part: str, child: Callable[[_Place], list[str]]) -> list[str]:
        here = _Place(f"{ctx.logical}.{part}", f"{ctx.physical}.{part}", ctx.ids)
        return ([] if here.physical in ctx.ids else [here.logical]) + child(here)
