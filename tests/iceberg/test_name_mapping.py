"""The name mapping (`iceberg/name_mapping.py`): a schema's mapping by file names, merged over the table's
history, read back by pyiceberg."""

from __future__ import annotations

import json

import pytest
from pyiceberg.table.name_mapping import parse_mapping_from_json

from dv_assets.mirror.delta.schema import StructType
from dv_assets.mirror.errors import UnsupportedFeatureError
from dv_assets.mirror.iceberg.name_mapping import NameMapping, merged, of_delta_schema, of_iceberg_schema
from dv_assets.mirror.iceberg.schema import NESTED_ID_BASE, highest_field_id, to_iceberg_schema
from dv_assets.mirror.iceberg.types import Schema as IcebergSchema
from tests.helpers.schemas import field, mapped, struct
from tests.iceberg.test_schema import NESTED


def test_merged_name_mapping_keeps_every_id_and_name_of_the_history() -> None:
    old = [
        {"field-id": 1, "names": ["letter"]},
        {"field-id": 2, "names": ["point"], "fields": [{"field-id": 3, "names": ["x"]}]},
    ]
    new = [
        {"field-id": 4, "names": ["num1"]},
        {"field-id": 2, "names": ["point", "pt"], "fields": [{"field-id": 5, "names": ["y"]}]},
    ]
    merged_mapping = merged(NameMapping.from_json(old), NameMapping.from_json(new))
    assert merged_mapping.to_json() == [
        {"field-id": 1, "names": ["letter"]},
        {
            "field-id": 2,
            "names": ["point", "pt"],
            "fields": [{"field-id": 3, "names": ["x"]}, {"field-id": 5, "names": ["y"]}],
        },
        {"field-id": 4, "names": ["num1"]},
    ]
    parse_mapping_from_json(merged_mapping.to_text())  # a mapping pyiceberg reads
    assert (
        merged(merged_mapping, NameMapping.from_json(new)) == merged_mapping
    )  # merging again changes nothing
    with pytest.raises(UnsupportedFeatureError, match=r"'letter'.*ids 1 and 6"):
        merged(NameMapping.from_json(old), NameMapping.from_json([{"field-id": 6, "names": ["letter"]}]))


def test_iceberg_name_mapping_names_every_field_by_its_id() -> None:
    schema = to_iceberg_schema(StructType.from_json(NESTED))
    mapping = of_iceberg_schema(schema)
    assert mapping.field_ids() == {i for i in range(1, highest_field_id(schema) + 1)}
    assert mapping == of_delta_schema(schema, StructType.from_json(NESTED), "none")


def test_name_mapping_uses_file_names() -> None:
    delta = struct(
        mapped("a", "long", 1),
        mapped("s", struct(mapped("inner", "string", 2)), 3),
        mapped("xs", {"type": "array", "elementType": "integer", "containsNull": True}, 4),
    )
    delta_schema = StructType.from_json(delta)
    schema = to_iceberg_schema(delta_schema, "name")
    mapping = of_delta_schema(schema, delta_schema, "name").to_json()
    assert mapping == [
        {"field-id": 1, "names": ["col-1"]},
        {"field-id": 3, "names": ["col-3"], "fields": [{"field-id": 2, "names": ["col-2"]}]},
        {"field-id": 4, "names": ["col-4"], "fields": [{"field-id": NESTED_ID_BASE, "names": ["element"]}]},
    ]
    parsed = parse_mapping_from_json(json.dumps(mapping))
    assert parsed.root[1].fields[0].field_id == 2

    nested = StructType.from_json(NESTED)
    plain_mapping = of_delta_schema(to_iceberg_schema(nested), nested, "none").to_json()
    assert [m["names"] for m in plain_mapping] == [["id"], ["tags"], ["attrs"], ["point"], ["events"]]
    assert plain_mapping[2]["fields"] == [
        {"field-id": 7, "names": ["key"]},
        {"field-id": 8, "names": ["value"]},
    ]
    parse_mapping_from_json(json.dumps(plain_mapping))


def test_name_mapping_matches_by_name_when_the_table_schema_differs() -> None:
    # The Iceberg schema may hold columns Delta dropped; the mapping covers what Delta has.
    iceberg = IcebergSchema.from_json(
        {
            "type": "struct",
            "schema-id": 3,
            "fields": [
                {"id": 9, "name": "gone", "required": False, "type": "int"},
                {"id": 4, "name": "a", "required": False, "type": "long"},
            ],
        }
    )
    delta = StructType.from_json(struct(field("a", "long")))
    assert of_delta_schema(iceberg, delta, "none").to_json() == [{"field-id": 4, "names": ["a"]}]


def test_a_stored_mapping_reads_back_and_knows_when_it_was_spelled_otherwise() -> None:
    written = '[{"field-id": 1, "names": ["a"], "fields": [{"field-id": 2, "names": ["element"]}]}]'
    mapping = NameMapping.parse(written)
    assert mapping is not None and mapping.to_text() == written and not mapping.respelled
    respelled = NameMapping.parse('[{"names": ["a"], "field-id": "1", "fields": []}]')
    assert respelled == NameMapping.parse('[{"field-id": 1, "names": ["a"]}]') and respelled.respelled
    assert [NameMapping.parse(t) for t in (None, "", "{}", "not json", '[{"names": ["a"]}]')] == [None] * 5
