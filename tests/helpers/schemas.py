"""Schemas and stats for the schema, metrics and legal-log tests: Delta schema JSON (fields, structs,
column-mapping metadata), Iceberg schema JSON parsed back by pyiceberg, and Delta stats over a schema of
every supported type, converted to Iceberg metrics."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pyiceberg.schema import Schema

from dv_assets.mirror.delta.schema import StructType
from dv_assets.mirror.iceberg.metrics import DEFAULT_STRING_PREFIX_LENGTH, IcebergMetrics, StatsConverter
from dv_assets.mirror.iceberg.schema import to_iceberg_schema
from dv_assets.mirror.iceberg.types import Schema as IcebergSchema

# --- Delta schema JSON ---------------------------------------------------------------------------------


def field(name: str, type_: Any, nullable: bool = True, **metadata: Any) -> dict[str, Any]:
    """A Delta schema field; `metadata` as Delta keeps it (column mapping, comments, collations)."""
    return {"name": name, "type": type_, "nullable": nullable, "metadata": metadata}


def mapped(name: str, type_: Any, column_id: int, nullable: bool = True, **metadata: Any) -> dict[str, Any]:
    return field(
        name,
        type_,
        nullable,
        **{"delta.columnMapping.id": column_id, "delta.columnMapping.physicalName": f"col-{column_id}"},
        **metadata,
    )


def struct(*fields: dict[str, Any]) -> dict[str, Any]:
    """A Delta struct type (a table schema too) of `fields`."""
    return {"type": "struct", "fields": list(fields)}


def upgraded(name: str, type_: Any, column_id: int) -> dict[str, Any]:
    """A field as Delta's upgrade leaves it: an id, and its old name as physical name."""
    metadata = {"delta.columnMapping.id": column_id, "delta.columnMapping.physicalName": name}
    return {"name": name, "type": type_, "nullable": True, "metadata": metadata}


def as_pyiceberg(schema: IcebergSchema) -> Schema:
    """An Iceberg schema as pyiceberg parses its JSON."""
    return Schema.model_validate_json(json.dumps(schema.to_json()))


# --- Delta stats -> Iceberg metrics ---------------------------------------------------------------------

DELTA_SCHEMA = StructType.from_json(
    {
        "type": "struct",
        "fields": [
            field("i", "integer"),
            field("l", "long"),
            field("f", "float"),
            field("d", "double"),
            field("dec", "decimal(10,2)"),
            field("b", "boolean"),
            field("day", "date"),
            field("ts", "timestamp"),
            field("ntz", "timestamp_ntz"),
            field("s", "string"),
            field("bin", "binary"),
            field("st", {"type": "struct", "fields": [field("x", "long")]}),
            field("arr", {"type": "array", "elementType": "long", "containsNull": True}),
            field("part", "integer"),
        ],
    }
)
ICEBERG_SCHEMA = to_iceberg_schema(DELTA_SCHEMA)
ID = {f["name"]: f["id"] for f in ICEBERG_SCHEMA.to_json()["fields"]}
ID["st.x"] = ICEBERG_SCHEMA.to_json()["fields"][11]["type"]["fields"][0]["id"]

MIN = {
    "i": -5,
    "l": 10,
    "f": 0.0,
    "d": -1.5,
    "dec": 1.10,
    "b": False,
    "day": "2024-01-01",
    "ts": "2024-01-01T00:00:00.123Z",
    "ntz": "2024-01-01T00:00:00.123",
    "s": "apple",
    "bin": "AAA",
    "st": {"x": 1},
}
MAX = {**MIN, "i": 7, "f": 2.5, "d": -0.0, "dec": 99.99, "b": True, "ts": "2024-01-02T10:00:00.999+02:00"}
MAX |= {"ntz": "2024-01-02T00:00:00.500", "s": "banana", "st": {"x": 9}}
NULLS = {name: 0 for name in MIN} | {"st": {"x": 1}, "s": 3}


def stats_json(**overrides: Any) -> str:
    stats = {"numRecords": 10, "minValues": MIN, "maxValues": MAX, "nullCount": NULLS, "tightBounds": True}
    return json.dumps(stats | overrides)


def metrics(stats: Any, **kwargs: Any):
    return metrics_from_delta_stats(
        stats, delta_schema=DELTA_SCHEMA, iceberg_schema=ICEBERG_SCHEMA, partition_columns=["part"], **kwargs
    )


def micros(text: str) -> int:
    instant = datetime.fromisoformat(text)
    instant = instant if instant.tzinfo else instant.replace(tzinfo=UTC)
    return round((instant - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() * 1_000_000)


@dataclasses.dataclass
class FakeMetadata:
    schema: StructType
    column_mapping_mode: str = "none"
    partition_columns: list[str] = dataclasses.field(default_factory=list)
    configuration: dict[str, str] = dataclasses.field(default_factory=dict)


STRING_SCHEMA = StructType.from_json(
    {
        "type": "struct",
        "fields": [{"name": "s", "type": "string", "nullable": True, "metadata": {}}],
    }
)


def string_bounds(min_value: str, max_value: str) -> tuple[bytes | None, bytes | None]:
    stats = json.dumps({"numRecords": 1, "minValues": {"s": min_value}, "maxValues": {"s": max_value}})
    result = metrics_from_delta_stats(
        stats, delta_schema=STRING_SCHEMA, iceberg_schema=to_iceberg_schema(STRING_SCHEMA)
    )
    return result.lower_bounds.get(1), result.upper_bounds.get(1)


def metrics_from_delta_stats(
    stats: str | Mapping[str, Any] | None,
    *,
    delta_schema: StructType,
    iceberg_schema: IcebergSchema,
    column_mapping_mode: str = "none",
    partition_columns: Sequence[str] = (),
    string_prefix_length: int = DEFAULT_STRING_PREFIX_LENGTH,
) -> IcebergMetrics:
    """Iceberg metrics from one Delta `add.stats` (the JSON text preferably: decimals keep their digits),
    through the converter a sync builds once per version (`StatsConverter`)."""
    converter = StatsConverter.of(
        delta_schema, iceberg_schema, column_mapping_mode, partition_columns, string_prefix_length
    )
    return converter(stats)
