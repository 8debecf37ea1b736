"""Delta column mapping (PROTOCOL.md, "Column Mapping"), in one place, after delta-kernel-rs's
`table_features/column_mapping.rs`: the mode, each field's id and physical name, the nested ids of list
elements and map keys/values, and whether Iceberg readers can read the Parquet files by field id.

Without column mapping (`none`) a field's physical name is its logical name and it has no id. Under
`name` or `id`, Delta writes Parquet columns under physical names with field ids equal to
`delta.columnMapping.id`; partition values and file stats are keyed by physical names too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

from dv_assets.mirror.errors import MirrorInputError, UnsupportedFeatureError

if TYPE_CHECKING:  # actions.py imports this module
    from dv_assets.mirror.delta.actions import Protocol

ColumnMappingMode = Literal["none", "id", "name"]
MODES: tuple[ColumnMappingMode, ...] = ("none", "id", "name")

MODE_KEY = "delta.columnMapping.mode"
FEATURE = "columnMapping"
COLUMN_MAPPING_ID = "delta.columnMapping.id"
PHYSICAL_NAME = "delta.columnMapping.physicalName"
NESTED_IDS = "delta.columnMapping.nested.ids"


def mode_of(configuration: Mapping[str, str]) -> ColumnMappingMode:
    """The mode `metaData.configuration` names ('none' when unset); it takes effect only where the
    protocol supports column mapping (`supported_by`)."""
    return checked_mode(configuration.get(MODE_KEY))


def supported_by(protocol: Protocol) -> bool:
    """Whether the protocol lets `delta.columnMapping.mode` take effect, as delta-kernel-rs's
    `column_mapping_mode(protocol, table_properties)` decides: reader version 2 (legacy, which implies
    column mapping), or 3 with the `columnMapping` feature. Elsewhere (reader version 1, or 3 without the
    feature) the property is allowed but ignored (PROTOCOL.md, "Column Mapping"): the mode is `none`.

    Like delta-kernel-rs, the feature is looked up in writerFeatures, of which readerFeatures is a subset:
    Delta Spark has written column-mapped tables that list it there only (delta-io/delta#3154).
    """
    if protocol.min_reader_version == 2:
        return True
    return protocol.min_reader_version == 3 and FEATURE in (protocol.writer_features or ())


def has_annotations(schema: Mapping[str, Any]) -> bool:
    """Whether any field of the schema carries a column mapping id, physical name or nested ids."""
    keys = (COLUMN_MAPPING_ID, PHYSICAL_NAME, NESTED_IDS)
    return any(key in field_metadata(f) for f in walk_fields(schema) for key in keys)


def checked_mode(mode: str | None) -> ColumnMappingMode:
    value = mode or "none"
    if value not in MODES:
        raise UnsupportedFeatureError(f"unknown {MODE_KEY} {value!r}")
    return value  # type: ignore[return-value]


def field_metadata(delta_field: Mapping[str, Any]) -> Mapping[str, Any]:
    return delta_field.get("metadata") or {}


def physical_name(delta_field: Mapping[str, Any], mode: str = "name") -> str:
    """The name of the field in Parquet files, stats and partition values."""
    if mode == "none":
        return delta_field["name"]
    return field_metadata(delta_field).get(PHYSICAL_NAME) or delta_field["name"]


def mapping_id(delta_field: Mapping[str, Any]) -> int:
    """The field's `delta.columnMapping.id` (its Parquet field id); required under column mapping."""
    value = field_metadata(delta_field).get(COLUMN_MAPPING_ID)
    if value is None:
        raise MirrorInputError(
            f"column {delta_field.get('name')!r} has no {COLUMN_MAPPING_ID} under column mapping"
        )
    return int(value)


def nested_ids(delta_field: Mapping[str, Any]) -> Mapping[str, int]:
    """`<physical path>.element` / `.key` / `.value` → Parquet field id, for list and map columns."""
    return field_metadata(delta_field).get(NESTED_IDS) or {}


def physical_names(schema: Mapping[str, Any], mode: str) -> dict[str, str]:
    """Top-level logical column name → physical name (identity without column mapping)."""
    return {f["name"]: physical_name(f, mode) for f in schema.get("fields", [])}


def walk_fields(delta_type: Any) -> Iterator[Mapping[str, Any]]:
    """Every struct field of a Delta type, depth first, inside lists and maps too."""
    if not isinstance(delta_type, Mapping):
        return
    kind = delta_type.get("type")
    if kind == "struct":
        for delta_field in delta_type.get("fields", []):
            yield delta_field
            yield from walk_fields(delta_field["type"])
    elif kind == "array":
        yield from walk_fields(delta_type["elementType"])
    elif kind == "map":
        yield from walk_fields(delta_type["keyType"])
        yield from walk_fields(delta_type["valueType"])


def mapping_ids(schema: Mapping[str, Any]) -> Iterator[int]:
    """Every `delta.columnMapping.id` of a schema."""
    for delta_field in walk_fields(schema):
        value = field_metadata(delta_field).get(COLUMN_MAPPING_ID)
        if value is not None:
            yield int(value)


def check_field_ids_readable(schema: Mapping[str, Any], mode: str) -> None:
    """Refuse column mapping with list/map columns whose Parquet element/key/value nodes carry no field id.

    Under column mapping Delta writes Parquet field ids on struct fields only; list elements and map
    keys/values get one only when `delta.columnMapping.nested.ids` says so (IcebergCompat). Iceberg
    readers read a file that has field ids by id alone (the name mapping is only for files without
    any), so such a column cannot be read from the mirror: Iceberg Java fails on it.
    """
    if checked_mode(mode) == "none":
        return
    missing: list[str] = []

    def walk(delta_type: Any, logical: str, physical: str, ids: Mapping[str, int]) -> None:
        if not isinstance(delta_type, Mapping):
            return
        kind = delta_type.get("type")
        if kind == "struct":
            for f in delta_type.get("fields", []):
                name = f"{logical}.{f['name']}" if logical else f["name"]
                walk(f["type"], name, physical_name(f, mode), nested_ids(f))
            return
        parts = {"array": [("element", "elementType")], "map": [("key", "keyType"), ("value", "valueType")]}
        for part, child in parts.get(kind, []):
            if f"{physical}.{part}" not in ids:
                missing.append(f"{logical}.{part}")
            walk(delta_type[child], f"{logical}.{part}", f"{physical}.{part}", ids)

    walk(schema, "", "", {})
    if missing:
        raise UnsupportedFeatureError(
            f"column mapping mode {mode!r} with list/map columns whose Parquet element/key/value fields "
            f"have no field id (no {NESTED_IDS}): {', '.join(missing)}; Iceberg readers "
            "read these files by field id and could not read those columns"
        )
