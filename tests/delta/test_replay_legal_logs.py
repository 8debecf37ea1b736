"""Legal Delta logs and values the mirror used to get stuck on or mirror wrongly: raw line separators in
commit JSON, non-BMP strings in stats, NaN / infinite partition values, upgrading to column mapping, a
column mapping mode the protocol does not support."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.delta.schema import StructType
from dv_assets.mirror.errors import UnsupportedFeatureError
from dv_assets.mirror.iceberg.name_mapping import of_delta_schema
from dv_assets.mirror.iceberg.schema import (
    evolve,
    partition_spec,
    partition_value,
    partition_value_to_json,
    partition_value_typed,
    to_iceberg_schema,
)
from dv_assets.mirror.iceberg.types import PrimitiveType
from dv_assets.mirror.sync import sync_table
from tests.helpers.paths import expected_rows
from tests.helpers.readers import iceberg_java_rows, pyiceberg_rows, snapshots_by_delta_version
from tests.helpers.schemas import field, string_bounds, struct, upgraded

# --- commit files are newline-delimited JSON ------------------------------------------------------------

PROTOCOL = {"minReaderVersion": 1, "minWriterVersion": 2}
ODD = "a\u2028b\u0085c\u2029d\x1ce\x0bf\x0cg"  # str.splitlines() splits at each of these


def test_raw_unicode_line_separators_inside_json_strings(tmp_path: Path) -> None:
    schema = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "p", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
    metadata = {
        "id": "t1",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(schema),
        "partitionColumns": ["p"],
        "configuration": {},
        "createdTime": 1,
    }
    add = {
        "path": "p=x/a.parquet",
        "partitionValues": {"p": ODD},
        "size": 100,
        "modificationTime": 1,
        "dataChange": True,
        "stats": json.dumps({"numRecords": 3}),
    }
    info = {"commitInfo": {"timestamp": 1, "operation": "WRITE", "operationParameters": {"note": ODD}}}
    log = tmp_path / "_delta_log"
    log.mkdir()
    # ensure_ascii=False: the separators are written raw, as a JSON writer may; CRLF line ends are legal.
    lines = [
        json.dumps(a, ensure_ascii=False) for a in (info, {"protocol": PROTOCOL}, {"metaData": metadata})
    ]
    text = "\r\n".join(lines) + "\n" + json.dumps({"add": add}, ensure_ascii=False) + "\n"
    assert "\u2028" in text and "\x85" in text
    (log / f"{0:020d}.json").write_text(text, encoding="utf-8", newline="")

    table = DeltaTable(str(tmp_path))
    (change,) = table.changes(0, 0)
    assert change.commit_info["operationParameters"]["note"] == ODD
    assert [f.partition_values for f in change.added] == [{"p": ODD}]
    assert [f.partition_values for f in table.state(0).files.values()] == [{"p": ODD}]


# --- string upper bounds: Delta truncates in UTF-16 code units ------------------------------------------

EMOJI = "\U0001f600"  # outside the BMP: 2 UTF-16 code units, 4 UTF-8 bytes


@pytest.mark.parametrize(
    "truncated_max",
    [
        # 16 emoji are 32 Java chars (16 code points): an older Delta kept them and appended U+FFFD,
        # which sorts below any emoji in UTF-8 byte order. A bound of it would hide live rows.
        EMOJI * 16 + "\ufffd",
        "x" * 10 + EMOJI * 11 + "\ufffd",
        # Newer Delta's tie-breaker, and '\uffff': possible truncations, never emitted.
        "x" * 10 + EMOJI * 11 + "\U0010ffff",
        "abc\ufffd",
        "abc\uffff",
    ],
    ids=["emoji-fffd", "mixed-fffd", "mixed-10ffff", "short-fffd", "short-ffff"],
)
def test_possibly_truncated_string_max_is_not_an_upper_bound(truncated_max: str) -> None:
    _, upper = string_bounds("a", truncated_max)
    assert upper is None


def test_string_bounds_near_the_limit_in_utf16_units() -> None:
    # 26 code points but 32 Java chars: at Delta's limit, so not certainly untruncated.
    assert string_bounds("a", "a" * 20 + EMOJI * 6)[1] is None
    # 15 emoji + one char: 31 Java chars, certainly the exact max.
    exact = EMOJI * 15 + "z"
    assert string_bounds("a", exact)[1] == exact.encode("utf-8")
    # A prefix of the min is a lower bound, emoji and all; a truncation that split a surrogate pair
    # still leaves a prefix once the dangling high surrogate goes.
    lower, _ = string_bounds(EMOJI * 20, "z")
    assert lower == (EMOJI * 20).encode("utf-8")
    lower, _ = string_bounds("a" + EMOJI * 15 + "\ud83d", "z")
    assert lower == ("a" + EMOJI * 15).encode("utf-8")
    assert lower <= ("a" + EMOJI * 16).encode("utf-8")


# --- NaN / infinite float partition values ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "check"),
    [
        ("NaN", math.isnan),
        ("Infinity", lambda x: x == math.inf),
        ("-Infinity", lambda x: x == -math.inf),
    ],
)
@pytest.mark.parametrize("iceberg_type", ["float", "double"])
def test_nan_and_infinite_partition_values_are_written_as_iceberg_writes_them(
    value: str, check: Any, iceberg_type: str
) -> None:
    """The strings of Iceberg Java's own JSON; the JVM helper reads them as numbers (ContentFileBatch)."""
    typed = partition_value_typed(value, PrimitiveType(iceberg_type))
    assert isinstance(typed, float) and check(typed)
    assert partition_value_to_json(value, PrimitiveType(iceberg_type)) == value
    kind = "float" if iceberg_type == "float" else "double"
    schema = to_iceberg_schema(
        StructType.from_json({"type": "struct", "fields": [{"name": "p", "type": kind, "nullable": True}]})
    )
    assert partition_value(value, schema, "p") == value


def test_finite_float_partition_values_still_mirror() -> None:
    schema = to_iceberg_schema(
        StructType.from_json(
            {"type": "struct", "fields": [{"name": "p", "type": "double", "nullable": True}]}
        )
    )
    assert partition_value("-1.5E300", schema, "p") == -1.5e300
    assert json.loads(json.dumps(partition_value("0.1", schema, "p"), allow_nan=False)) == 0.1


# --- upgrading an existing table to column mapping -------------------------------------------------------


def test_upgrade_to_column_mapping_keeps_ids_of_a_flat_schema() -> None:
    before = struct(field("id", "long"), field("name", "string"), field("p", "date"))
    previous = to_iceberg_schema(StructType.from_json(before))
    # Delta numbers existing columns 1..n in field order, as Iceberg did.
    after = struct(upgraded("id", "long", 1), upgraded("name", "string", 2), upgraded("p", "date", 3))
    evolved = evolve(previous, StructType.from_json(after), "name")
    assert evolved.to_json()["fields"] == previous.to_json()["fields"]
    assert evolved.to_json()["schema-id"] == previous.to_json()["schema-id"] + 1
    # Old files (no field ids) are still read by name: the same names map to the same ids.
    assert of_delta_schema(evolved, StructType.from_json(after), "name") == of_delta_schema(
        previous, StructType.from_json(before), "none"
    )
    assert partition_spec(evolved, ["p"]) == partition_spec(previous, ["p"])
    # Later, columns Delta adds (id 4, a fresh physical name) and renames follow Delta's ids.
    ids = {"delta.columnMapping.id": 4, "delta.columnMapping.physicalName": "col-4a1c"}
    added = {**field("extra", "integer"), "metadata": ids}
    renamed = {**after["fields"][1], "name": "full_name"}
    later = evolve(
        evolved, StructType.from_json(struct(after["fields"][0], renamed, after["fields"][2], added)), "name"
    ).to_json()
    assert [(f["name"], f["id"]) for f in later["fields"]] == [
        ("id", 1),
        ("full_name", 2),
        ("p", 3),
        ("extra", 4),
    ]


def test_upgrade_to_column_mapping_that_would_change_ids_is_refused() -> None:
    # Iceberg numbers a struct's fields before their children (s=1, b=2, s.x=3); Delta numbers depth
    # first (s=1, s.x=2, b=3): keeping Iceberg's ids would let id 2 mean `b` in old files and `s.x` in new.
    previous = to_iceberg_schema(
        StructType.from_json(struct(field("s", struct(field("x", "long"))), field("b", "long")))
    )
    after = StructType.from_json(
        struct(upgraded("s", struct(upgraded("x", "long", 2)), 1), upgraded("b", "long", 3))
    )
    with pytest.raises(
        UnsupportedFeatureError, match=r"'s\.x' was upgraded to column mapping.*is 3 .*gives it 2"
    ):
        evolve(previous, after, "name")


def test_upgrade_with_a_list_column_without_nested_ids_is_refused() -> None:
    # The list element has Iceberg id 3, which Delta will give to the next column it adds.
    array = {"type": "array", "elementType": "long", "containsNull": True}
    previous = to_iceberg_schema(StructType.from_json(struct(field("xs", array), field("b", "long"))))
    after = StructType.from_json(struct(upgraded("xs", array, 1), upgraded("b", "long", 2)))
    with pytest.raises(UnsupportedFeatureError, match=r"'xs\.element' was upgraded to column mapping"):
        evolve(previous, after, "name")


def test_upgrade_reordering_ids_of_a_flat_schema_is_refused() -> None:
    previous = to_iceberg_schema(StructType.from_json(struct(field("a", "long"), field("b", "long"))))
    after = StructType.from_json(struct(upgraded("a", "long", 2), upgraded("b", "long", 1)))
    with pytest.raises(UnsupportedFeatureError, match="was upgraded to column mapping"):
        evolve(previous, after, "name")


# --- a column mapping mode the protocol does not support -------------------------------------------------


@pytest.mark.spark
def test_a_column_mapping_mode_without_protocol_support_mirrors_by_logical_names(
    spark, catalog, copy_fixture
) -> None:
    """`delta.columnMapping.mode` is allowed but ignored where the protocol (here reader version 1) does
    not support column mapping: the table reads as before, by logical names."""
    root = copy_fixture("table-without-dv-small")
    commit = root / "_delta_log" / f"{0:020d}.json"
    text = commit.read_text()
    assert text.count('"configuration":{}') == 1 and '"minReaderVersion":1,' in text
    commit.write_text(
        text.replace('"configuration":{}', '"configuration":{"delta.columnMapping.mode":"name"}')
    )
    name = "legal.mapping_mode_without_protocol"
    assert sync_table(spark, root, name).mirrored_versions == [0]
    snapshot = snapshots_by_delta_version(catalog, name)[0]
    expected = expected_rows("table-without-dv-small", 0)
    assert len(expected) == 10
    assert pyiceberg_rows(catalog, name, snapshot) == expected == iceberg_java_rows(spark, name, snapshot)
