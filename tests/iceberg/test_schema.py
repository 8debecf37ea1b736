"""Delta schema -> Iceberg schema JSON (parsed back by pyiceberg), evolution, name mapping, partitions."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

import pytest
from pyiceberg.partitioning import PartitionSpec

from dv_assets.mirror.delta.schema import StructType
from dv_assets.mirror.errors import MirrorInputError, UnsupportedFeatureError
from dv_assets.mirror.iceberg.schema import (
    NESTED_ID_BASE,
    check_format_version,
    evolve,
    highest_field_id,
    partition_spec,
    partition_value,
    partition_value_to_json,
    partition_value_typed,
    to_iceberg_schema,
)
from dv_assets.mirror.iceberg.types import PrimitiveType
from dv_assets.mirror.iceberg.types import Schema as IcebergSchema
from tests.helpers.paths import DELTA_FIXTURES
from tests.helpers.schemas import as_pyiceberg, field, mapped, struct

ALL_PRIMITIVES = [
    ("byte", "int"),
    ("short", "int"),
    ("integer", "int"),
    ("long", "long"),
    ("float", "float"),
    ("double", "double"),
    ("decimal(10,2)", "decimal(10, 2)"),
    ("decimal(38, 0)", "decimal(38, 0)"),
    ("string", "string"),
    ("binary", "binary"),
    ("boolean", "boolean"),
    ("date", "date"),
    ("timestamp", "timestamptz"),
    ("timestamp_ntz", "timestamp"),
]

NESTED = struct(
    field("id", "long", nullable=False),
    field("tags", {"type": "array", "elementType": "string", "containsNull": False}),
    field("attrs", {"type": "map", "keyType": "string", "valueType": "integer", "valueContainsNull": True}),
    field("point", struct(field("x", "double"), field("y", "double", nullable=False))),
    field(
        "events",
        {
            "type": "array",
            "elementType": struct(field("at", "timestamp"), field("what", "string")),
            "containsNull": True,
        },
    ),
)


@pytest.mark.parametrize(("delta_type", "iceberg_type"), ALL_PRIMITIVES)
def test_every_primitive_type(delta_type: str, iceberg_type: str) -> None:
    schema = to_iceberg_schema(StructType.from_json(struct(field("c", delta_type, comment="the column"))))
    assert schema.to_json() == {
        "type": "struct",
        "schema-id": 0,
        "fields": [{"id": 1, "name": "c", "required": False, "type": iceberg_type, "doc": "the column"}],
    }
    parsed = as_pyiceberg(schema)
    assert str(parsed.find_field(1).field_type) == iceberg_type


def test_unsupported_types_are_refused() -> None:
    for bad in ("void", "interval"):
        with pytest.raises(UnsupportedFeatureError, match=bad):
            to_iceberg_schema(StructType.from_json(struct(field("c", bad))))


def test_variant_is_an_iceberg_v3_type() -> None:
    """VARIANT maps to Iceberg's `variant` (the same Parquet encoding), which format 2 does not have.
    pyiceberg 0.12 cannot parse such a schema: dv-mirror reads a variant mirror's metadata without it
    (`pyiceberg_reader.read_mirror_table`)."""
    nested = struct(field("id", "long"), field("st", struct(field("v", "variant"))))
    schema = to_iceberg_schema(StructType.from_json(nested))
    assert str(schema) == "struct<id: long, st: struct<v: variant>>"
    with pytest.raises(ValueError, match="Unsupported field type: 'variant'"):
        as_pyiceberg(schema)
    check_format_version(schema, 3)
    with pytest.raises(UnsupportedFeatureError) as err:
        check_format_version(schema, 2)
    assert err.value.reason.startswith("column 'st.v' is a variant, a type Iceberg format 2 does not have")


def test_nested_types_get_ids_in_icebergs_order() -> None:
    typed = to_iceberg_schema(StructType.from_json(NESTED))
    schema = typed.to_json()
    # A struct's fields first (1-5), then their children, as Iceberg's assignFreshIds.
    assert [f["id"] for f in schema["fields"]] == [1, 2, 3, 4, 5]
    tags, attrs, point, events = (f["type"] for f in schema["fields"][1:])
    assert tags == {"type": "list", "element-id": 6, "element": "string", "element-required": True}
    assert attrs == {
        "type": "map",
        "key-id": 7,
        "key": "string",
        "value-id": 8,
        "value": "int",
        "value-required": False,
    }
    assert [f["id"] for f in point["fields"]] == [9, 10]
    assert point["fields"][1]["required"] is True
    assert events["element-id"] == 11
    assert [f["id"] for f in events["element"]["fields"]] == [12, 13]
    assert schema["fields"][0]["required"] is True
    assert highest_field_id(typed) == 13
    parsed = as_pyiceberg(typed)
    assert parsed.highest_field_id == 13
    assert parsed.find_field("events.element.at").field_id == 13 - 1


def test_column_mapping_takes_delta_ids_and_puts_nested_ids_out_of_deltas_reach() -> None:
    delta = struct(
        mapped("a", "long", 1),
        mapped("xs", {"type": "array", "elementType": "integer", "containsNull": True}, 3),
        mapped(
            "m", {"type": "map", "keyType": "string", "valueType": "string", "valueContainsNull": True}, 2
        ),
    )
    for mode in ("id", "name"):
        typed = to_iceberg_schema(StructType.from_json(delta), mode)
        schema = typed.to_json()
        assert [f["id"] for f in schema["fields"]] == [1, 3, 2]
        assert schema["fields"][1]["type"]["element-id"] == NESTED_ID_BASE
        assert (schema["fields"][2]["type"]["key-id"], schema["fields"][2]["type"]["value-id"]) == (
            NESTED_ID_BASE + 1,
            NESTED_ID_BASE + 2,
        )
        as_pyiceberg(typed)


def test_column_mapping_uses_deltas_nested_ids_when_present() -> None:
    nested_ids = {"col-3.element": 7}
    delta = struct(
        mapped(
            "xs",
            {"type": "array", "elementType": "integer", "containsNull": True},
            3,
            **{"delta.columnMapping.nested.ids": nested_ids},
        )
    )
    schema = to_iceberg_schema(StructType.from_json(delta), "id").to_json()
    assert schema["fields"][0]["type"]["element-id"] == 7


def test_column_mapping_without_ids_is_refused() -> None:
    with pytest.raises(MirrorInputError, match=r"delta\.columnMapping\.id"):
        to_iceberg_schema(StructType.from_json(struct(field("a", "long"))), "name")


def test_evolution_without_column_mapping_keeps_ids_by_name_path() -> None:
    first = to_iceberg_schema(StructType.from_json(NESTED))
    # Drop `attrs`, add a field inside `point`, add a top-level column, reorder.
    second_delta = struct(
        field("new_col", "string"),
        NESTED["fields"][0],
        field(
            "point", struct(field("x", "double"), field("z", "float"), field("y", "double", nullable=False))
        ),
        NESTED["fields"][4],
        NESTED["fields"][1],
    )
    typed_second = evolve(first, StructType.from_json(second_delta), "none")
    second = typed_second.to_json()
    assert second["schema-id"] == 1
    ids = {f["name"]: f["id"] for f in second["fields"]}
    assert ids == {"new_col": 14, "id": 1, "point": 4, "events": 5, "tags": 2}
    point = {f["name"]: f["id"] for f in second["fields"][2]["type"]["fields"]}
    assert point == {"x": 9, "z": 15, "y": 10}
    assert second["fields"][4]["type"]["element-id"] == 6
    events = second["fields"][3]["type"]
    assert events["element-id"] == 11 and [f["id"] for f in events["element"]["fields"]] == [12, 13]
    # Re-adding a dropped name gets a fresh id (above everything seen), not its old one.
    third = evolve(
        typed_second, StructType.from_json(struct(*second_delta["fields"], NESTED["fields"][2])), "none"
    )
    attrs = third.to_json()["fields"][-1]
    assert attrs["id"] == 16 and (attrs["type"]["key-id"], attrs["type"]["value-id"]) == (17, 18)
    as_pyiceberg(third)
    # Given the table's history, the name comes back with the ids it had: the same column to Delta.
    with_history = evolve(
        typed_second,
        StructType.from_json(struct(*second_delta["fields"], NESTED["fields"][2])),
        "none",
        history=(first,),
    )
    attrs = with_history.to_json()["fields"][-1]
    first_attrs = next(f for f in first.to_json()["fields"] if f["name"] == "attrs")
    assert attrs == first_attrs
    # A fresh column still gets an id above every id of the history.
    fresh = evolve(
        typed_second, StructType.from_json(struct(field("other", "integer"))), "none", history=(first,)
    ).to_json()
    assert fresh["fields"][0]["id"] == 16


def _required_by_name(schema: IcebergSchema) -> dict[str, bool]:
    return {f.name: f.required for f in schema.fields}


def test_a_column_once_optional_never_becomes_required_again() -> None:
    """CREATE OR REPLACE made `x` nullable, RESTORE made it NOT NULL again: the mirror keeps it optional
    (same id), and list elements and map values the same; a NOT NULL that always held stays required."""
    not_null = struct(
        field("id", "long", nullable=False),
        field("x", "string", nullable=False),
        field("tags", {"type": "array", "elementType": "string", "containsNull": False}, nullable=False),
        field(
            "attrs",
            {"type": "map", "keyType": "string", "valueType": "integer", "valueContainsNull": False},
            nullable=False,
        ),
        field("point", struct(field("y", "double", nullable=False)), nullable=False),
    )
    nullable = struct(
        field("id", "long", nullable=False),
        field("x", "string"),
        field("tags", {"type": "array", "elementType": "string", "containsNull": True}, nullable=False),
        field(
            "attrs",
            {"type": "map", "keyType": "string", "valueType": "integer", "valueContainsNull": True},
            nullable=False,
        ),
        field("point", struct(field("y", "double")), nullable=False),
    )
    first = to_iceberg_schema(StructType.from_json(not_null))
    assert _required_by_name(first) == {"id": True, "x": True, "tags": True, "attrs": True, "point": True}
    second = evolve(first, StructType.from_json(nullable), "none")
    restored = evolve(second, StructType.from_json(not_null), "none", history=(first,))
    assert restored.fields == second.fields  # nothing to commit: the current schema stays the relaxed one
    assert [f.id for f in restored.fields] == [f.id for f in first.fields]
    assert _required_by_name(restored) == {"id": True, "x": False, "tags": True, "attrs": True, "point": True}
    by_name = {f.name: f.type for f in restored.fields}
    assert by_name["tags"].element_required is False  # type: ignore[union-attr]
    assert by_name["attrs"].value_required is False  # type: ignore[union-attr]
    assert by_name["point"].fields[0].required is False  # type: ignore[union-attr]
    # Optional in an older schema of the history only (not the current one): optional too.
    again = evolve(first, StructType.from_json(not_null), "none", history=(second,))
    assert _required_by_name(again)["x"] is False
    as_pyiceberg(restored)
    # With column mapping the ids are Delta's; the same holds by id.
    mapped_not_null = struct(
        mapped("id", "long", 1, nullable=False), mapped("x", "string", 2, nullable=False)
    )
    mapped_nullable = struct(mapped("id", "long", 1, nullable=False), mapped("x", "string", 2))
    m1 = to_iceberg_schema(StructType.from_json(mapped_not_null), "name")
    m2 = evolve(m1, StructType.from_json(mapped_nullable), "name")
    m3 = evolve(m2, StructType.from_json(mapped_not_null), "name", history=(m1,))
    assert _required_by_name(m3) == {"id": True, "x": False}


def test_a_name_back_with_a_type_iceberg_cannot_promote_to_is_refused_by_name() -> None:
    first = to_iceberg_schema(StructType.from_json(struct(field("letter", "string"), field("n", "integer"))))
    second = evolve(first, StructType.from_json(struct(field("n", "integer"))), "none")
    with pytest.raises(UnsupportedFeatureError, match="letter"):
        evolve(second, StructType.from_json(struct(field("letter", "integer"))), "none", history=(first,))


def test_evolution_with_column_mapping_follows_delta_ids_across_renames() -> None:
    array = {"type": "array", "elementType": "integer", "containsNull": True}
    first = to_iceberg_schema(
        StructType.from_json(struct(mapped("a", "long", 1), mapped("xs", array, 2))), "name"
    )
    renamed = struct(mapped("b", "long", 1), mapped("xs_renamed", array, 2), mapped("c", "string", 3))
    typed_second = evolve(first, StructType.from_json(renamed), "name")
    second = typed_second.to_json()
    assert [(f["name"], f["id"]) for f in second["fields"]] == [("b", 1), ("xs_renamed", 2), ("c", 3)]
    assert second["fields"][1]["type"]["element-id"] == NESTED_ID_BASE  # kept
    more = struct(*renamed["fields"], mapped("ys", array, 4))
    third = evolve(typed_second, StructType.from_json(more), "name").to_json()
    assert third["fields"][3]["type"]["element-id"] == NESTED_ID_BASE + 1  # fresh above the previous


WIDENED = {"type": "array", "elementType": "integer", "containsNull": True}


@pytest.mark.parametrize("mapping", ["none", "name"])
@pytest.mark.parametrize(
    ("before", "after", "iceberg_after"),
    [
        ("byte", "short", "int"),
        ("short", "integer", "int"),
        ("integer", "long", "long"),
        ("byte", "long", "long"),
        ("decimal(5,2)", "decimal(10,2)", "decimal(10, 2)"),
        ("decimal(10,2)", "decimal(20,2)", "decimal(20, 2)"),
    ],
)
def test_type_widening_is_an_iceberg_promotion_on_the_same_id(
    mapping: str, before: str, after: str, iceberg_after: str
) -> None:
    """Delta's type widening keeps the column's id: a promotion Iceberg readers apply to the old files."""
    make = (lambda n, t, i: mapped(n, t, i)) if mapping == "name" else (lambda n, t, i: field(n, t))
    first = to_iceberg_schema(
        StructType.from_json(struct(make("k", "long", 1), make("c", before, 2))), mapping
    )
    widened = evolve(first, StructType.from_json(struct(make("k", "long", 1), make("c", after, 2))), mapping)
    assert [(f.name, f.id, str(f.type)) for f in widened.fields] == [
        ("k", 1, "long"),
        ("c", 2, iceberg_after),
    ]
    as_pyiceberg(widened)


CANNOT = "which Iceberg cannot express as a type promotion"


@pytest.mark.parametrize(
    ("before", "after", "old_type", "new_type", "why"),
    [
        ("integer", "double", "int", "double", CANNOT),  # Delta widens it, Iceberg does not
        # Iceberg promotes it, but pyiceberg and DuckDB filter the old files' floats wrongly
        ("float", "double", "float", "double", "an Iceberg type promotion that Iceberg readers do not read"),
        ("long", "decimal(20,0)", "long", "decimal(20, 0)", CANNOT),
        ("decimal(5,2)", "decimal(10,4)", "decimal(5, 2)", "decimal(10, 4)", CANNOT),  # a scale increase
        ("date", "timestamp_ntz", "date", "timestamp", CANNOT),  # v3 spec, not Iceberg Java 1.12
        ("long", "integer", "long", "int", CANNOT),
        ("integer", "string", "int", "string", CANNOT),
        ("integer", WIDENED, "int", "list<int>", CANNOT),
    ],
)
def test_a_type_change_iceberg_cannot_promote_is_refused_by_name(
    before: Any, after: Any, old_type: str, new_type: str, why: str
) -> None:
    first = to_iceberg_schema(StructType.from_json(struct(field("k", "long"), field("c", before))))
    with pytest.raises(UnsupportedFeatureError) as err:
        evolve(first, StructType.from_json(struct(field("k", "long"), field("c", after))), "none")
    assert f"column 'c' changes type from {old_type} to {new_type}, {why}" in err.value.reason
    assert ("not implemented by Iceberg Java" in err.value.reason) == (before == "date")
    # The same widening recorded in Delta's field metadata is refused on a table's first schema too:
    # the mirror may start after the widening, with files of the old type still live.
    recorded = field("c", after, **{"delta.typeChanges": [{"fromType": before, "toType": after}]})
    if isinstance(after, str):
        with pytest.raises(
            UnsupportedFeatureError, match=re.escape(f"column 'c' was widened from {before} to {after}")
        ):
            to_iceberg_schema(StructType.from_json(struct(recorded)))


def test_type_widening_inside_nested_types_keeps_their_ids() -> None:
    def nested(element: str, value: str) -> dict[str, Any]:
        points = {"type": "array", "elementType": element, "containsNull": True}
        attrs = {"type": "map", "keyType": "string", "valueType": value, "valueContainsNull": True}
        return struct(field("st", struct(field("x", element))), field("xs", points), field("m", attrs))

    first = to_iceberg_schema(StructType.from_json(nested("integer", "decimal(5,2)")))
    widened = evolve(first, StructType.from_json(nested("long", "decimal(10,2)")), "none")
    assert str(widened) == "struct<st: struct<x: long>, xs: list<long>, m: map<string, decimal(10, 2)>>"
    assert highest_field_id(widened) == highest_field_id(first)
    with pytest.raises(
        UnsupportedFeatureError, match=r"column 'm\.value' changes type from decimal\(5, 2\) to string"
    ):
        evolve(first, StructType.from_json(nested("integer", "string")), "none")


def test_a_recorded_widening_iceberg_promotes_is_accepted_on_a_first_schema() -> None:
    changes = {
        "delta.typeChanges": [
            {"fromType": "byte", "toType": "integer"},
            {"fromType": "integer", "toType": "long"},
        ]
    }
    schema = to_iceberg_schema(StructType.from_json(struct(field("c", "long", **changes))))
    assert str(schema) == "struct<c: long>"


def test_fixture_schemas_convert() -> None:
    for table in sorted(DELTA_FIXTURES.iterdir()):
        for line in (table / "_delta_log" / "00000000000000000000.json").read_text().splitlines():
            action = json.loads(line)
            if "metaData" in action:
                metadata = action["metaData"]
                delta = StructType.from_json(json.loads(metadata["schemaString"]))
                mode = metadata.get("configuration", {}).get("delta.columnMapping.mode", "none")
                schema = to_iceberg_schema(delta, mode)
                as_pyiceberg(schema)
                spec = partition_spec(schema, metadata.get("partitionColumns", []))
                PartitionSpec.model_validate_json(json.dumps(spec))


def test_partition_spec() -> None:
    delta = StructType.from_json(struct(field("a", "long"), field("part", "integer"), field("d", "date")))
    schema = to_iceberg_schema(delta)
    spec = partition_spec(schema, ["d", "part"])
    assert spec == {
        "spec-id": 0,
        "fields": [
            {"name": "d", "transform": "identity", "source-id": 3, "field-id": 1000},
            {"name": "part", "transform": "identity", "source-id": 2, "field-id": 1001},
        ],
    }
    parsed = PartitionSpec.model_validate_json(json.dumps(spec))
    assert parsed.fields[0].source_id == 3
    with pytest.raises(MirrorInputError, match="missing"):
        partition_spec(schema, ["missing"])


@pytest.mark.parametrize(
    ("value", "iceberg_type", "typed", "as_json"),
    [
        ("42", "int", 42, 42),
        ("-7", "long", -7, -7),
        ("1.5", "double", 1.5, 1.5),
        ("1.5", "float", 1.5, 1.5),
        ("12.30", "decimal(10, 2)", Decimal("12.30"), "12.30"),
        ("12.3", "decimal(10, 2)", Decimal("12.30"), "12.30"),
        ("true", "boolean", True, True),
        ("false", "boolean", False, False),
        ("hello", "string", "hello", "hello"),
        # Delta Spark writes a binary value as its bytes decoded as UTF-8 and reads it back encoded.
        ("\u0001\u0002\u00ff", "binary", b"\x01\x02\xc3\xbf", "0102C3BF"),
        ("\U0001f608", "binary", b"\xf0\x9f\x98\x88", "F09F9888"),
        ("2024-03-01", "date", 19783, "2024-03-01"),
        ("1970-01-01 00:00:00", "timestamptz", 0, "1970-01-01T00:00:00.000000+00:00"),
        ("2024-01-01 12:00:00.123456", "timestamptz", 1704110400123456, "2024-01-01T12:00:00.123456+00:00"),
        ("2024-01-01T12:00:00.123456Z", "timestamptz", 1704110400123456, "2024-01-01T12:00:00.123456+00:00"),
        ("2024-01-01T13:00:00+01:00", "timestamptz", 1704110400000000, "2024-01-01T12:00:00.000000+00:00"),
        ("2024-01-01 12:00:00", "timestamp", 1704110400000000, "2024-01-01T12:00:00.000000"),
        # Years beyond 9999: 9999-12-31 23:59:59.999999 written by a session west of UTC.
        (
            "+10000-01-01T07:59:59.999999Z",
            "timestamptz",
            253402329599999999,
            "+10000-01-01T07:59:59.999999+00:00",
        ),
        ("0001-01-01 00:00:00", "timestamp", -62135596800000000, "0001-01-01T00:00:00.000000"),
        ("1969-12-31 23:59:59.999999", "timestamp", -1, "1969-12-31T23:59:59.999999"),
        ("0001-01-01", "date", -719162, "0001-01-01"),
        ("9999-12-31", "date", 2932896, "9999-12-31"),
        (None, "int", None, None),
        ("", "date", None, None),
    ],
)
def test_partition_values(value: str | None, iceberg_type: str, typed: Any, as_json: Any) -> None:
    assert partition_value_typed(value, PrimitiveType(iceberg_type)) == typed
    assert partition_value_to_json(value, PrimitiveType(iceberg_type)) == as_json


def test_partition_value_by_column() -> None:
    schema = to_iceberg_schema(StructType.from_json(struct(field("part", "integer"))))
    assert partition_value("3", schema, "part") == 3


@pytest.mark.parametrize(
    ("value", "iceberg_type"),
    [
        ("x", "int"),
        ("3000000000", "int"),
        ("1.234", "decimal(10, 2)"),
        ("123456789.1", "decimal(5, 1)"),
        ("yes", "boolean"),
        ("2024-13-01", "date"),
        ("2024-01-01T00:00:00Z", "timestamp"),
    ],
)
def test_bad_partition_values_are_refused(value: str, iceberg_type: str) -> None:
    with pytest.raises(MirrorInputError, match="partition value"):
        partition_value_typed(value, PrimitiveType(iceberg_type))


@pytest.mark.parametrize("seed", range(3))
def test_date_and_timestamp_partition_values_agree_with_python_datetime(seed: int) -> None:
    """The calendar arithmetic against Python's own, over random instants of years 1..9999."""
    import random
    from datetime import UTC, date, datetime, timedelta

    rng = random.Random(seed)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    for _ in range(2000):
        micros = rng.randrange(-62135596800000000, 253402300799999999)
        instant = epoch + timedelta(microseconds=micros)
        text = f"{instant.year:04d}" + instant.strftime("-%m-%d %H:%M:%S.%f")  # %Y: no zero padding
        assert partition_value_typed(text, PrimitiveType("timestamp")) == micros, text
        shifted = instant + timedelta(hours=5, minutes=30) if instant.year < 9999 else instant
        zoned = f"{shifted.year:04d}" + shifted.strftime("-%m-%dT%H:%M:%S.%f") + "+05:30"
        if shifted is not instant:
            assert partition_value_typed(zoned, PrimitiveType("timestamptz")) == micros, zoned
        expected = instant.replace(tzinfo=None).isoformat(timespec="microseconds")
        assert partition_value_to_json(text, PrimitiveType("timestamp")) == expected
        day = instant.date()
        assert partition_value_typed(day.isoformat(), PrimitiveType("date")) == (day - date(1970, 1, 1)).days


@pytest.mark.parametrize("value", ["2024-02-30", "2023-02-29", "2024-13-01", "2024-1-01", "20240101"])
def test_impossible_dates_are_refused(value: str) -> None:
    with pytest.raises(MirrorInputError, match="not a valid date"):
        partition_value_typed(value, PrimitiveType("date"))
