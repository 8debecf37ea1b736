"""The table's name mapping (`schema.name-mapping.default`) as typed values, and its rules, in one place.

Readers find the columns of a Parquet file without field ids through the name mapping: each mapped field
is a field id with the names the files give it, and the mapped fields below it (a struct's fields, a
list's `element`, a map's `key` and `value`), as pyiceberg's `table/name_mapping.py` models it. The JSON
(`to_json`) is what Iceberg Java's `NameMappingParser.fromJson` reads: `field-id`, `names`, and `fields`
only when there are some.

The mapping is table-wide, not per snapshot: a Parquet file written under an older schema is read through
today's mapping, so no id and no name the table ever had may leave it (`merged`). What the mirror maps
besides the schema: Delta's physical-only columns (`PHYSICAL_ONLY_COLUMNS`), and, without column mapping,
the file columns of partition columns on ids of their own (`_partition_columns_unmapped`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dv_assets.mirror.delta import schema as delta
from dv_assets.mirror.delta.column_mapping import checked_mode, physical_name
from dv_assets.mirror.errors import UnsupportedFeatureError
from dv_assets.mirror.iceberg import types as iceberg
from dv_assets.mirror.iceberg.schema import field_ids, matched_fields
from dv_assets.mirror.iceberg.types import IcebergType, Schema
from dv_assets.mirror.schema_visitor import SchemaVisitor, visit

# Columns Delta writers put in data files without the table schema having them, with the field ids
# their mapped fields use: below Iceberg's reserved ids, far above any id a schema here reaches.
PHYSICAL_ONLY_COLUMNS = {"_change_type": 2_147_482_000}
# The ids the file columns of partition columns are mapped to, in Delta's order, without column mapping
# (see `_partition_columns_unmapped`): below PHYSICAL_ONLY_COLUMNS', ids no schema has.
PARTITION_FILE_COLUMN_ID_BASE = 2_147_481_000


@dataclass(frozen=True)
class MappedField:
    """One field id, every name the files give it (first known first), and the mapped fields below it."""

    field_id: int
    names: tuple[str, ...]
    fields: tuple[MappedField, ...] = ()

    def to_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"field-id": self.field_id, "names": list(self.names)}
        if self.fields:
            entry["fields"] = [child.to_json() for child in self.fields]
        return entry

    @classmethod
    def from_json(cls, raw: Any) -> MappedField:
        """A mapped field of stored JSON; ValueError when it is none (no `field-id`, names not strings)."""
        if not isinstance(raw, dict) or "field-id" not in raw:
            raise ValueError("a mapped field is an object with a field-id")
        names, children = raw.get("names") or (), raw.get("fields") or ()
        if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
            raise ValueError("a mapped field's names are strings")
        if not isinstance(children, list | tuple):
            raise ValueError("a mapped field's fields are a list")
        return cls(int(raw["field-id"]), tuple(names), tuple(cls.from_json(c) for c in children))


@dataclass(frozen=True)
class NameMapping:
    """A name mapping: its top-level mapped fields, in order.

    `respelled` (not part of the value) is set when the stored JSON it was read from is not what
    `to_json` writes (another writer's spelling: ids as strings, empty `fields`, other keys): the next
    merge writes the mapping again even when its value is unchanged, as the mirror always has."""

    fields: tuple[MappedField, ...] = ()
    respelled: bool = field(default=False, compare=False)

    def to_json(self) -> list[dict[str, Any]]:
        return [mapped.to_json() for mapped in self.fields]

    def to_text(self) -> str:
        """The table property's value."""
        return json.dumps(self.to_json())

    @classmethod
    def from_json(cls, raw: Any) -> NameMapping:
        """The mapping of its JSON; ValueError when it is none."""
        if not isinstance(raw, list):
            raise ValueError("a name mapping is a list of mapped fields")
        fields = tuple(MappedField.from_json(entry) for entry in raw)
        return cls(fields, respelled=[mapped.to_json() for mapped in fields] != raw)

    @classmethod
    def parse(cls, text: str | None) -> NameMapping | None:
        """The stored name mapping (None when absent or not a JSON list of mapped fields)."""
        try:
            return cls.from_json(json.loads(text)) if text else None
        except (ValueError, TypeError):
            return None

    def field_ids(self) -> set[int]:
        """Every field id the mapping maps, at any depth."""
        found: set[int] = set()
        pending = list(self.fields)
        while pending:
            mapped = pending.pop()
            found.add(mapped.field_id)
            pending += mapped.fields
        return found


# --- the mapping of one schema ---------------------------------------------------------------------------


def of_delta_schema(
    iceberg_schema: Schema, delta_schema: delta.StructType, column_mapping_mode: str
) -> NameMapping:
    """How readers find a Delta schema's columns in Parquet files without field ids.

    The names are those in the Parquet files: logical names without column mapping, physical names
    (`delta.columnMapping.physicalName`) with it. Ids come from `iceberg_schema` (matched to Delta
    fields by logical name), so the mapping is right for whatever schema the table ended up with.
    """
    mode = checked_mode(column_mapping_mode)
    return NameMapping(visit(delta_schema, _DeltaNames(mode), iceberg_schema.as_struct()))


def of_iceberg_schema(iceberg_schema: Schema) -> NameMapping:
    """The mapping of an Iceberg schema's own names: the Parquet names of a table without column
    mapping, whose files name columns by their logical names."""
    return NameMapping(visit(iceberg_schema.as_struct(), _IcebergNames(), None))


def _mapped(name: str, field_id: int, children: tuple[MappedField, ...]) -> MappedField:
    return MappedField(field_id, (name,), children)


class _DeltaNames(SchemaVisitor[IcebergType, tuple[MappedField, ...]]):
    """The mapped fields of a Delta type's children, visited with its Iceberg counterpart."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def struct(
        self, struct: delta.StructType, ctx: IcebergType, fields: Sequence[Callable]
    ) -> tuple[MappedField, ...]:
        return tuple(
            _mapped(physical_name(delta_field, self.mode), iceberg_field.id, child(iceberg_field.type))
            for delta_field, child, iceberg_field in matched_fields(struct, fields, ctx)
        )

    def list(self, array: delta.ArrayType, ctx: IcebergType, element: Callable) -> tuple[MappedField, ...]:
        if not isinstance(ctx, iceberg.ListType):
            return ()
        return (_mapped("element", ctx.element_id, element(ctx.element_type)),)

    def map(
        self, map_type: delta.MapType, ctx: IcebergType, key: Callable, value: Callable
    ) -> tuple[MappedField, ...]:
        if not isinstance(ctx, iceberg.MapType):
            return ()
        return (
            _mapped("key", ctx.key_id, key(ctx.key_type)),
            _mapped("value", ctx.value_id, value(ctx.value_type)),
        )

    def primitive(self, primitive: delta.PrimitiveType, ctx: IcebergType) -> tuple[MappedField, ...]:
        return ()


class _IcebergNames(SchemaVisitor[None, tuple[MappedField, ...]]):
    def struct(
        self, struct: iceberg.StructType, ctx: None, fields: Sequence[Callable]
    ) -> tuple[MappedField, ...]:
        return tuple(
            _mapped(f.name, f.id, child(None)) for f, child in zip(struct.fields, fields, strict=True)
        )

    def list(self, list_type: iceberg.ListType, ctx: None, element: Callable) -> tuple[MappedField, ...]:
        return (_mapped("element", list_type.element_id, element(None)),)

    def map(
        self, map_type: iceberg.MapType, ctx: None, key: Callable, value: Callable
    ) -> tuple[MappedField, ...]:
        return (_mapped("key", map_type.key_id, key(None)), _mapped("value", map_type.value_id, value(None)))

    def primitive(self, primitive: iceberg.PrimitiveType, ctx: None) -> tuple[MappedField, ...]:
        return ()


# --- merging ---------------------------------------------------------------------------------------------


def merged(*mappings: NameMapping) -> NameMapping:
    """One name mapping holding every mapped field of `mappings` (oldest first): each field id once, with
    every name it was known by, its children merged the same way.

    A name given to two ids at one level cannot be mapped (readers would not know which id a file's
    column is): refused.
    """
    return NameMapping(_merged_fields([mapping.fields for mapping in mappings]))


def _merged_fields(levels: Iterable[Sequence[MappedField]]) -> tuple[MappedField, ...]:
    names: dict[int, list[str]] = {}  # by field id, in the order ids first appear
    children: dict[int, list[Sequence[MappedField]]] = {}
    for level in levels:
        for mapped in level:
            known = names.setdefault(mapped.field_id, [])
            known += [n for n in mapped.names if n not in known]
            if mapped.fields:
                children.setdefault(mapped.field_id, []).append(mapped.fields)
    owner: dict[str, int] = {}
    result = []
    for field_id, known in names.items():
        for name in known:
            if owner.setdefault(name, field_id) != field_id:
                raise UnsupportedFeatureError(
                    f"column {name!r} has meant two different columns in the table's history (Iceberg field "
                    f"ids {owner[name]} and {field_id}), and Iceberg's name mapping can give a name one id "
                    "only; mirror the table into a new Iceberg table"
                )
        result.append(MappedField(field_id, tuple(known), _merged_fields(children.get(field_id, ()))))
    return tuple(result)


# --- the table's mapping ---------------------------------------------------------------------------------


def table_mapping(
    schema: Schema, delta_schema: delta.StructType, column_mapping_mode: str, partition_columns: Sequence[str]
) -> NameMapping:
    """The table's name mapping for `schema`, plus Delta's physical-only columns: data files may carry
    columns the schema does not have (Databricks writes CDF's `_change_type` into UPDATE/MERGE files).
    Delta readers and Iceberg Java skip them; pyiceberg needs each file column mapped to some id, and one
    the schema never has is projected away."""
    mapping = of_delta_schema(schema, delta_schema, column_mapping_mode)
    mapping = _partition_columns_unmapped(mapping, column_mapping_mode, partition_columns)
    taken = {mapped.field_id for mapped in mapping.fields} | {f.id for f in schema.fields}
    names = {name for mapped in mapping.fields for name in mapped.names}
    extra = tuple(
        MappedField(field_id, (name,))
        for name, field_id in PHYSICAL_ONLY_COLUMNS.items()
        if name not in names and field_id not in taken
    )
    return NameMapping(mapping.fields + extra)


def merged_table_mapping(
    stored: NameMapping | None,
    history: Sequence[Schema],
    schema: Schema,
    delta_schema: delta.StructType,
    column_mapping_mode: str,
    partition_columns: Sequence[str],
) -> NameMapping:
    """The table's name mapping after a version with `schema`: the `stored` one, every schema of the
    table's `history` (without column mapping their names are the files' names), and this version's,
    merged."""
    older = [] if column_mapping_mode != "none" else history
    return merged(
        *(
            _partition_columns_unmapped(of_iceberg_schema(s), column_mapping_mode, partition_columns)
            for s in older
        ),
        _partition_columns_unmapped(stored or NameMapping(), column_mapping_mode, partition_columns),
        table_mapping(schema, delta_schema, column_mapping_mode, partition_columns),
    )


def _partition_columns_unmapped(
    mapping: NameMapping, column_mapping_mode: str, partition_columns: Sequence[str]
) -> NameMapping:
    """`mapping` with the partition columns' names mapped to ids no schema has, without column mapping.

    Delta reads a partition column from the log's partition value, but Delta Spark may write the column
    into the data file too, with another value: an empty binary is null in the log and `b''` in the file,
    bytes that are not UTF-8 are the replacement character in the log. Iceberg Java takes the partition
    value; pyiceberg and DuckDB would take a mapped file column. Mapped to an id of its own (pyiceberg
    wants every file column mapped), the file column is projected away and every reader takes the
    partition value, as Delta does."""
    if column_mapping_mode != "none" or not partition_columns:
        return mapping
    partition_names = set(partition_columns)
    kept = []
    for mapped in mapping.fields:
        if mapped.field_id >= PARTITION_FILE_COLUMN_ID_BASE:
            continue  # an earlier mapping's own field for a partition column: made again below
        names = tuple(name for name in mapped.names if name not in partition_names)
        if names:
            kept.append(MappedField(mapped.field_id, names, mapped.fields))
    return NameMapping(
        (
            *kept,
            *(
                MappedField(PARTITION_FILE_COLUMN_ID_BASE + index, (column,))
                for index, column in enumerate(partition_columns)
            ),
        )
    )


def mapping_is_stale(
    mapping: NameMapping | None, history: Sequence[Schema], schema: Schema, partition_columns: Sequence[str]
) -> bool:
    """Whether a stored name mapping predates what the mirror maps now: a physical-only column, every
    field id of the table's history, partition columns' file columns on ids of their own. A stale mapping
    is merged again (and rewritten if that changes it) with the next commit."""
    if mapping is None:
        return True
    mapped = mapping.field_ids()
    partition_ids = {f.id for f in schema.fields if f.name in partition_columns}
    history_ids = {i for s in history for i in field_ids(s)}
    top_level_partition_names = any(
        name in partition_columns and top.field_id < PARTITION_FILE_COLUMN_ID_BASE
        for top in mapping.fields
        for name in top.names
    )
    return (
        not set(PHYSICAL_ONLY_COLUMNS.values()) <= mapped
        or not history_ids - partition_ids <= mapped
        or top_level_partition_names
    )
