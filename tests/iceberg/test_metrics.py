"""Delta stats -> Iceberg metrics: serialization checked against pyiceberg's, and only safe bounds."""

from __future__ import annotations

import json
import struct
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from pyiceberg.conversions import to_bytes
from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
)

from dv_assets.mirror.delta.schema import StructType
from dv_assets.mirror.iceberg.metrics import (
    MIRROR_TABLE_PROPERTIES,
    StatsConverter,
    to_single_value_bytes,
)
from dv_assets.mirror.iceberg.schema import to_iceberg_schema
from tests.helpers.paths import DELTA_FIXTURES
from tests.helpers.schemas import (
    ID,
    MAX,
    MIN,
    NULLS,
    FakeMetadata,
    field,
    metrics,
    metrics_from_delta_stats,
    micros,
    stats_json,
)


@pytest.mark.parametrize(
    ("iceberg_type", "pyiceberg_type", "value"),
    [
        ("boolean", BooleanType(), True),
        ("boolean", BooleanType(), False),
        ("int", IntegerType(), -123456),
        ("long", LongType(), 1 << 40),
        ("float", FloatType(), 1.5),
        ("float", FloatType(), -0.0),
        ("double", DoubleType(), -2.25),
        ("date", DateType(), 19783),
        ("timestamp", TimestampType(), 1704110400123456),
        ("timestamptz", TimestamptzType(), -1),
        ("string", StringType(), "héllo ✓"),
        ("decimal(10, 2)", DecimalType(10, 2), Decimal("12.30")),
        ("decimal(10, 2)", DecimalType(10, 2), Decimal("-1.28")),
        ("decimal(10, 2)", DecimalType(10, 2), Decimal("1.27")),
        ("decimal(10, 2)", DecimalType(10, 2), Decimal("1.28")),
        ("decimal(38, 0)", DecimalType(38, 0), Decimal("-99999999999999999999999999999999999999")),
        ("decimal(5, 0)", DecimalType(5, 0), Decimal("0")),
    ],
)
def test_single_value_bytes_match_pyiceberg(iceberg_type: str, pyiceberg_type: Any, value: Any) -> None:
    assert to_single_value_bytes(iceberg_type, value) == to_bytes(pyiceberg_type, value)


def test_bounds_for_every_supported_type() -> None:
    result = metrics(stats_json())
    assert result.record_count == 10
    lower, upper = result.lower_bounds, result.upper_bounds
    assert lower[ID["i"]] == to_bytes(IntegerType(), -5) and upper[ID["i"]] == to_bytes(IntegerType(), 7)
    assert lower[ID["l"]] == to_bytes(LongType(), 10)
    # Zero widens to the signed zero on the outside (Iceberg orders -0.0 < 0.0).
    assert lower[ID["f"]] == to_bytes(FloatType(), -0.0) and upper[ID["f"]] == to_bytes(FloatType(), 2.5)
    assert lower[ID["d"]] == to_bytes(DoubleType(), -1.5) and upper[ID["d"]] == to_bytes(DoubleType(), 0.0)
    assert lower[ID["dec"]] == to_bytes(DecimalType(10, 2), Decimal("1.10"))
    assert upper[ID["dec"]] == to_bytes(DecimalType(10, 2), Decimal("99.99"))
    assert lower[ID["b"]] == b"\x00" and upper[ID["b"]] == b"\x01"
    assert lower[ID["day"]] == to_bytes(DateType(), date(2024, 1, 1))
    # Timestamps: Delta stats are truncated to milliseconds, so the max widens by 999 us.
    assert lower[ID["ts"]] == to_bytes(TimestamptzType(), micros("2024-01-01T00:00:00.123+00:00"))
    assert upper[ID["ts"]] == to_bytes(TimestamptzType(), micros("2024-01-02T08:00:00.999+00:00") + 999)
    assert lower[ID["ntz"]] == to_bytes(TimestampType(), micros("2024-01-01T00:00:00.123"))
    assert upper[ID["ntz"]] == to_bytes(TimestampType(), micros("2024-01-02T00:00:00.500") + 999)
    assert lower[ID["s"]] == b"apple" and upper[ID["s"]] == b"banana"
    assert lower[ID["st.x"]] == to_bytes(LongType(), 1) and upper[ID["st.x"]] == to_bytes(LongType(), 9)
    # No bounds for binary, list/map contents, partition columns; null counts only for columns in the file.
    for skipped in ("bin", "arr", "part"):
        assert ID[skipped] not in lower and ID[skipped] not in upper
    assert ID["bin"] in result.null_value_counts
    assert ID["arr"] not in result.null_value_counts and ID["part"] not in result.null_value_counts
    assert result.null_value_counts[ID["s"]] == 3 and result.null_value_counts[ID["st.x"]] == 1
    assert result.value_counts == {}


def test_wide_decimal_bounds() -> None:
    schema = StructType.from_json({"type": "struct", "fields": [field("dec", "decimal(38,0)")]})
    iceberg = to_iceberg_schema(schema)
    big = "9" * 38
    text = f'{{"numRecords":1,"minValues":{{"dec":-{big}}},"maxValues":{{"dec":{big}}}}}'
    result = metrics_from_delta_stats(text, delta_schema=schema, iceberg_schema=iceberg)
    assert result.lower_bounds[1] == to_bytes(DecimalType(38, 0), Decimal("-" + big))
    assert result.upper_bounds[1] == to_bytes(DecimalType(38, 0), Decimal(big))


def test_decimal_digits_survive_the_stats_text() -> None:
    schema = StructType.from_json({"type": "struct", "fields": [field("dec", "decimal(20,2)")]})
    iceberg = to_iceberg_schema(schema)
    text = (
        '{"numRecords":1,"minValues":{"dec":123456789012345678.91},"maxValues":{"dec":123456789012345678.91}}'
    )
    result = metrics_from_delta_stats(text, delta_schema=schema, iceberg_schema=iceberg)
    assert result.lower_bounds[1] == to_bytes(DecimalType(20, 2), Decimal("123456789012345678.91"))
    # Already parsed with floats, those digits are gone: no bound rather than a wrong one.
    parsed = json.loads(text)
    assert metrics_from_delta_stats(parsed, delta_schema=schema, iceberg_schema=iceberg).lower_bounds == {}


def test_truncated_string_max_is_not_emitted() -> None:
    long_max = "z" * 32 + "\uffff"  # Delta's truncated max: a prefix plus a tie-breaker
    result = metrics(stats_json(maxValues={**MAX, "s": long_max}, minValues={**MIN, "s": "a" * 32}))
    assert ID["s"] not in result.upper_bounds
    assert result.lower_bounds[ID["s"]] == b"a" * 32  # a prefix of the min is still a lower bound
    shorter_limit = metrics(stats_json(), string_prefix_length=4)
    assert ID["s"] not in shorter_limit.upper_bounds


def test_wide_bounds_keep_bounds_but_only_special_null_counts() -> None:
    nulls = {**NULLS, "i": 0, "l": 10, "s": 3}
    result = metrics(stats_json(tightBounds=False, nullCount=nulls))
    assert result.null_value_counts[ID["i"]] == 0  # all valid rows non-null
    assert result.null_value_counts[ID["l"]] == 10  # all valid rows null
    assert ID["s"] not in result.null_value_counts  # any other value carries no information
    assert result.lower_bounds[ID["i"]] == to_bytes(IntegerType(), -5)


def test_unsafe_or_odd_values_are_skipped() -> None:
    odd_min = {**MIN, "d": "NaN", "ts": "2024-01-01T00:00:00.123", "i": "x", "ntz": "2024-01-01T00:00:00Z"}
    result = metrics(stats_json(minValues=odd_min))
    for name in ("d", "ts", "i", "ntz"):
        assert ID[name] not in result.lower_bounds
    assert metrics(None).record_count is None
    assert metrics("not json").lower_bounds == {}


def test_collated_strings_are_skipped() -> None:
    schema = StructType.from_json(
        {"type": "struct", "fields": [field("s", "string", __COLLATIONS={"s": "ICU.en_US"})]}
    )
    stats = '{"numRecords":1,"minValues":{"s":"a"},"maxValues":{"s":"b"},"nullCount":{"s":0}}'
    result = metrics_from_delta_stats(stats, delta_schema=schema, iceberg_schema=to_iceberg_schema(schema))
    assert result.lower_bounds == {} and result.upper_bounds == {} and result.null_value_counts == {1: 0}


def test_a_variant_column_gets_a_null_count_and_never_bounds() -> None:
    schema = StructType.from_json({"type": "struct", "fields": [field("v", "variant")]})
    stats = '{"numRecords":3,"minValues":{"v":1},"maxValues":{"v":"z"},"nullCount":{"v":1}}'
    result = metrics_from_delta_stats(stats, delta_schema=schema, iceberg_schema=to_iceberg_schema(schema))
    assert result.lower_bounds == {} and result.upper_bounds == {} and result.null_value_counts == {1: 1}


def test_column_mapping_reads_physical_names() -> None:
    meta = {"delta.columnMapping.id": 5, "delta.columnMapping.physicalName": "col-abc"}
    schema = StructType.from_json({"type": "struct", "fields": [field("a", "long", **meta)]})
    iceberg = to_iceberg_schema(schema, "name")
    stats = '{"numRecords":2,"minValues":{"col-abc":1},"maxValues":{"col-abc":2},"nullCount":{"col-abc":0}}'
    result = metrics_from_delta_stats(
        stats, delta_schema=schema, iceberg_schema=iceberg, column_mapping_mode="name"
    )
    assert result.lower_bounds == {5: to_bytes(LongType(), 1)} and result.null_value_counts == {5: 0}


def test_fixture_stats_convert() -> None:
    table = DELTA_FIXTURES / "cdf-table-with-dv"
    lines = [
        json.loads(x) for x in (table / "_delta_log" / "00000000000000000000.json").read_text().splitlines()
    ]
    meta = next(x["metaData"] for x in lines if "metaData" in x)
    add = next(x["add"] for x in lines if "add" in x)
    schema = StructType.from_json(json.loads(meta["schemaString"]))
    result = StatsConverter.for_table(to_iceberg_schema(schema), FakeMetadata(schema))(add["stats"])
    assert result.record_count == 10
    assert result.lower_bounds == {1: struct.pack("<i", 0)} and result.upper_bounds == {
        1: struct.pack("<i", 9)
    }
    assert result.null_value_counts == {1: 0}


def test_recommended_table_properties_disable_metadata_min_max() -> None:
    assert MIRROR_TABLE_PROPERTIES == {"write.metadata.metrics.default": "counts"}
