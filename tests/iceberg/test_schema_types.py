"""The typed schemas (issue 15): the Iceberg JSON the mirror sends to Iceberg Java stays byte for byte
what it was, it is Iceberg Java's own JSON, and both sides' schemas round-trip through their JSON.

`tests/data/schema_json_before_issue_15.json` was recorded from the dict-based schema code before the
schemas became typed (issue 15): for each Delta schema (evolved from an earlier case's result when
`evolve_from` is set), `json.dumps` of the Iceberg schema, the name mapping and the partition spec.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dv_assets.mirror.delta.schema import StructType as DeltaStruct
from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.iceberg.name_mapping import of_delta_schema
from dv_assets.mirror.iceberg.schema import evolve, partition_spec, to_iceberg_schema
from dv_assets.mirror.iceberg.types import ListType, MapType, NestedField, PrimitiveType, Schema, StructType

GOLDEN = json.loads((Path(__file__).parents[1] / "data" / "schema_json_before_issue_15.json").read_text())
CASES: list[dict[str, Any]] = GOLDEN["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_iceberg_json_is_what_it_was(case: dict[str, Any]) -> None:
    schemas: dict[str, Schema] = {}
    for earlier in CASES[: CASES.index(case) + 1]:
        previous = schemas.get(earlier["evolve_from"])
        delta, mode = DeltaStruct.from_json(earlier["delta"]), earlier["mode"]
        schemas[earlier["name"]] = (
            to_iceberg_schema(delta, mode) if previous is None else evolve(previous, delta, mode)
        )
    schema = schemas[case["name"]]
    assert json.dumps(schema.to_json()) == case["iceberg"]
    delta = DeltaStruct.from_json(case["delta"])
    assert of_delta_schema(schema, delta, case["mode"]).to_text() == case["name_mapping"]
    assert json.dumps(partition_spec(schema, case["partition_columns"])) == case["partition_spec"]


# --- the typed schemas' own JSON ----------------------------------------------------------------------

ICEBERG_EVERY_TYPE = {
    "type": "struct",
    "schema-id": 7,
    "identifier-field-ids": [1],
    "fields": [
        {"id": 1, "name": "id", "required": True, "type": "long", "doc": "the key"},
        {"id": 2, "name": "d", "required": False, "type": "decimal(38, 10)"},
        {"id": 3, "name": "f", "required": False, "type": "fixed[16]"},
        {"id": 4, "name": "ts", "required": False, "type": "timestamptz"},
        {"id": 5, "name": "ntz", "required": False, "type": "timestamp"},
        {"id": 6, "name": "ns", "required": False, "type": "timestamp_ns"},
        {"id": 7, "name": "nstz", "required": False, "type": "timestamptz_ns"},
        {"id": 8, "name": "u", "required": False, "type": "uuid"},
        {"id": 9, "name": "v", "required": False, "type": "variant"},
        {"id": 10, "name": "t", "required": False, "type": "time"},
        {"id": 11, "name": "x", "required": False, "type": "unknown"},
        {"id": 12, "name": "n", "required": False, "type": "int", "initial-default": 3, "write-default": 4},
        {
            "id": 13,
            "name": "m",
            "required": False,
            "type": {
                "type": "map",
                "key-id": 14,
                "key": "string",
                "value-id": 15,
                "value": {
                    "type": "list",
                    "element-id": 16,
                    "element": {
                        "type": "struct",
                        "fields": [{"id": 17, "name": "b", "required": True, "type": "binary"}],
                    },
                    "element-required": True,
                },
                "value-required": False,
            },
            "doc": "nested",
        },
    ],
}


def test_iceberg_schema_json_round_trips() -> None:
    schema = Schema.from_json(ICEBERG_EVERY_TYPE)
    assert json.dumps(schema.to_json()) == json.dumps(ICEBERG_EVERY_TYPE)  # keys in Iceberg Java's order
    assert Schema.from_json(schema.to_json()) == schema
    assert schema.fields[12].type == MapType(
        14,
        PrimitiveType("string"),
        15,
        ListType(16, StructType((NestedField(17, "b", True, PrimitiveType("binary")),)), True),
        False,
    )
    assert str(schema.fields[12].type) == "map<string, list<struct<b: binary>>>"
    assert str(schema.fields[1].type) == "decimal(38, 10)"


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_every_recorded_schema_round_trips(case: dict[str, Any]) -> None:
    iceberg = Schema.from_json(json.loads(case["iceberg"]))
    assert json.dumps(iceberg.to_json()) == case["iceberg"]
    assert Schema.from_json(iceberg.to_json()) == iceberg
    delta = DeltaStruct.from_json(case["delta"])
    assert DeltaStruct.from_json(delta.to_json()) == delta
    assert delta.to_json() == case["delta"]  # every recorded Delta schema is written with every key


def test_pyicebergs_json_reads_as_the_same_schema() -> None:
    # pyiceberg writes the same keys in another order, and identifier-field-ids even when empty.
    from pyiceberg.schema import Schema as PyicebergSchema

    for case in CASES:
        expected = Schema.from_json(json.loads(case["iceberg"]))
        pyiceberg = PyicebergSchema.model_validate_json(case["iceberg"])
        assert Schema.from_json(json.loads(pyiceberg.model_dump_json())) == expected


def test_unknown_iceberg_keys_are_refused_not_dropped() -> None:
    field = {"id": 1, "name": "a", "required": False, "type": "int", "future-key": 1}
    with pytest.raises(MirrorInputError, match="future-key"):
        Schema.from_json({"type": "struct", "schema-id": 0, "fields": [field]})
    with pytest.raises(MirrorInputError, match="not an Iceberg type"):
        Schema.from_json({"type": "struct", "fields": [{"id": 1, "name": "a", "type": {"type": "set"}}]})


def test_delta_schema_keeps_column_metadata_read_only() -> None:
    raw = {
        "type": "struct",
        "fields": [
            {
                "name": "xs",
                "type": {"type": "array", "elementType": "integer", "containsNull": True},
                "nullable": True,
                "metadata": {"delta.columnMapping.nested.ids": {"col-1.element": 7}, "comment": "c"},
            }
        ],
    }
    schema = DeltaStruct.from_json(raw)
    (xs,) = schema.fields
    assert xs.metadata["delta.columnMapping.nested.ids"] == {"col-1.element": 7} and xs.comment == "c"
    with pytest.raises(TypeError):
        xs.metadata["comment"] = "changed"  # type: ignore[index]
    with pytest.raises(TypeError):
        xs.metadata["delta.columnMapping.nested.ids"]["col-1.element"] = 8
    assert schema.to_json() == raw and str(schema) == "struct<xs: array<integer>>"
    # Absent flags and metadata read as Delta readers take them.
    sparse = {
        "type": "struct",
        "fields": [{"name": "m", "type": {"type": "map", "keyType": "s", "valueType": "t"}}],
    }
    (m,) = DeltaStruct.from_json(sparse).fields
    assert m.nullable and m.type.value_contains_null and dict(m.metadata) == {}
    with pytest.raises(MirrorInputError, match="not a struct"):
        DeltaStruct.from_json({"type": "array", "elementType": "long"})


@pytest.mark.spark
def test_iceberg_java_writes_exactly_this_json(spark) -> None:
    """Iceberg Java's SchemaParser, given `to_json`, writes it back byte for byte: the same keys in the
    same order, the same type names (so `to_json` is Iceberg Java's JSON, not merely one it accepts)."""
    parser = spark._jvm.org.apache.iceberg.SchemaParser
    for text in [json.dumps(ICEBERG_EVERY_TYPE), *(case["iceberg"] for case in CASES)]:
        compact = json.dumps(Schema.from_json(json.loads(text)).to_json(), separators=(",", ":"))
        assert str(parser.toJson(parser.fromJson(compact))) == compact
