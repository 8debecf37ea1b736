"""The fast paths a million-file first version takes give what the plain ones give: `column_values` is
`to_pylist(maps_as_pydicts="strict")` on every column kind of a checkpoint's adds (sliced too, and with
pyarrow's own error on a repeated map key), `AddFile.without_stats` is `dataclasses.replace`, and
`DataFile.json_line` is the JSON of `DataFile.to_json`, and `stats_num_records` (Arrow's JSON parser over a
batch's stats) gives each text's numRecords as json.loads does, or declines the batch."""

from __future__ import annotations

import dataclasses
import json
import random

import pyarrow as pa
import pytest

from dv_assets.mirror.delta.actions import NUM_RECORDS_READ, AddFile, _num_records, _parse_stats
from dv_assets.mirror.delta.checkpoint_columns import add_rows, column_values, stats_num_records
from dv_assets.mirror.iceberg.content_files import ColumnMetrics, DataFile

STRING_MAP = pa.map_(pa.string(), pa.string())
DV = pa.struct([("storageType", pa.string()), ("offset", pa.int32()), ("cardinality", pa.int64())])


def _random_value(kind: pa.DataType, rng: random.Random) -> object:
    if rng.random() < 0.3:
        return None
    if kind == STRING_MAP:
        keys = rng.sample(["a", "b", "c", "p=1"], rng.randint(0, 3))
        return {key: rng.choice([None, "", "x", "ü"]) for key in keys}
    if kind == DV:
        return {"storageType": "u", "offset": rng.randint(-5, 5), "cardinality": rng.randint(0, 2**40)}
    if pa.types.is_integer(kind):
        bits = kind.bit_width - 1
        return rng.randint(-(2**bits), 2**bits - 1)
    if pa.types.is_boolean(kind):
        return rng.random() < 0.5
    return rng.choice(["", "part-0.parquet", "a%20b"])


def _conversions(array: pa.Array) -> tuple[object, object]:
    def run(convert):
        try:
            return convert(array)
        except KeyError as exc:
            return ("KeyError", str(exc))

    return run(lambda a: a.to_pylist(maps_as_pydicts="strict")), run(column_values)


@pytest.mark.parametrize("kind", [STRING_MAP, DV, pa.int64(), pa.int32(), pa.bool_(), pa.string()], ids=str)
@pytest.mark.parametrize("null_share", [0.0, 0.3, 0.9, 1.0])
def test_column_values_is_to_pylist(kind: pa.DataType, null_share: float) -> None:
    rng = random.Random(f"{kind}{null_share}")
    for _ in range(30):
        rows = [
            None if rng.random() < null_share else _random_value(kind, rng) for _ in range(rng.randint(0, 40))
        ]
        if null_share == 0.0:
            rows = [_random_value(kind, rng) if row is None else row for row in rows]
        array = pa.array(rows, type=kind)
        first = rng.randint(0, len(rows))
        for part in (array, array.slice(first), array.slice(first // 2, len(rows) // 3)):
            expected, got = _conversions(part)
            assert got == expected and [type(v) for v in got] == [type(v) for v in expected]


def test_a_repeated_map_key_fails_as_pyarrow_fails() -> None:
    array = pa.array([[("a", "1")], [("a", "1"), ("a", "2")]], type=STRING_MAP)
    expected, got = _conversions(array)
    assert expected[0] == "KeyError" and got == expected


def test_without_stats_is_replace() -> None:
    add = AddFile.from_action(
        {
            "path": "p%3D1/part-0.parquet",
            "partitionValues": {"p": "1"},
            "size": 7,
            "modificationTime": 9,
            "dataChange": False,
            "stats": '{"numRecords":3}',
            "tags": {"t": "v"},
            "deletionVector": {
                "storageType": "u",
                "pathOrInlineDv": "ab",
                "offset": 1,
                "sizeInBytes": 2,
                "cardinality": 1,
            },
        },
        "/table",
    )
    dropped, replaced = add.without_stats(), dataclasses.replace(add, stats=None)
    assert dropped.stats is None and add.stats is not None
    assert [getattr(dropped, f.name) for f in dataclasses.fields(AddFile)] == [
        getattr(replaced, f.name) for f in dataclasses.fields(AddFile)
    ]


@pytest.mark.parametrize(
    "data_file",
    [
        DataFile("file:/t/part-0.parquet", (), 10, 3),
        DataFile(
            'file:/t/ü "quoted"\\ \u2028 #?.parquet',
            ("2024-01-01", None, 7, True),
            2**40,
            0,
            ColumnMetrics({1: 3}, {1: 0, 2: 3}, {1: b"\x00\xff", 3: b""}, {1: b"\xab"}),
            spec_id=4,
        ),
        DataFile("s3://b/k.parquet", {"1000": "x"}, 1, 1, ColumnMetrics(null_value_counts={5: 1})),
    ],
)
def test_json_line_is_to_json(data_file: DataFile) -> None:
    line = data_file.json_line()
    assert "\n" not in line and json.loads(line) == data_file.to_json()


# Stats texts as Delta Spark writes them, and absent or empty ones (a file without stats).
DELTA_STATS = [
    '{"numRecords":7,"minValues":{"a":1,"s":"x"},"maxValues":{"a":2,"s":"y"},"nullCount":{"a":0,"s":1}}',
    None,
    "",
    '{"minValues":{}}',
    '{"numRecords":null}',
    '{"numRecords":0,"tightBounds":true}',
]


def _parsed_one_by_one(texts: list[str | None]) -> list[int | None]:
    return [_num_records(_parse_stats(text)) for text in texts]


def test_stats_num_records_reads_delta_stats_at_once() -> None:
    texts = DELTA_STATS * 1000
    assert stats_num_records(pa.array(texts, pa.string())) == _parsed_one_by_one(texts)
    assert stats_num_records(pa.array(texts, pa.string()).slice(1, 5)) == _parsed_one_by_one(texts[1:6])
    raws = [{"path": f"f{i}", "size": 1, "stats": text} for i, text in enumerate(texts[:6])]
    rows = list(add_rows(pa.array(raws)))
    assert [row[NUM_RECORDS_READ] for row in rows] == _parsed_one_by_one(texts[:6])
    assert [AddFile.from_action(row, "/t") for row in rows] == [
        AddFile.from_action(raw, "/t") for raw in raws
    ]
    assert [AddFile.from_action(row, "/t").num_records for row in rows] == _parsed_one_by_one(texts[:6])


@pytest.mark.parametrize(
    "text",
    [
        '{"a":"x\ty","numRecords":3}',  # a raw tab in a string: json.loads refuses it
        '{"a":"\\x","numRecords":3}',
        '{"a":1e999,"numRecords":3}',
        '{"numRecords":3,"a":[1,2,{"b":null}]}',
        '{"a":"\x01","numRecords":3}',
        '{"numRecords":-3}',
        '{"numRecords":9223372036854775808}',
        '{"numRecords":3}{}',
        '{"numRecords":3} {"numRecords":4}',
        '{"numRecords":3} ',
        ' {"numRecords":3}',
        '{ "numRecords" : 3 }',
        '{"numRecords":\n3}',
        '{"numRecords":3.0}',
        '{"numRecords":"3"}',
        '{"numRecords":true}',
        '{"a":tru,"numRecords":3}',
        '{"a":"\\u00e9","numRecords":3}',
        '{"a":"\u00e9\U0001f600","numRecords":3}',
        '{"numRecords":3,"numRecords":4}',
        '{"a":{"numRecords":5},"numRecords":3}',
        '{"numRecords":3,"a":NaN}',
        '{"numRecords":0003}',
        '{"numRecords":3,"a":"\\ud800"}',
        "[3]",
        "{}",
    ],
)
def test_stats_num_records_reads_what_json_loads_reads_or_declines(text: str) -> None:
    texts = [*DELTA_STATS, text, *DELTA_STATS]
    read = stats_num_records(pa.array(texts, pa.string()))
    assert read is None or read == _parsed_one_by_one(texts)
