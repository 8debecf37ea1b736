"""A Parquet checkpoint's columns as the actions replay parses: which columns to read of a file (of
`add` only the fields AddFile reads), and the Arrow batches turned into action dicts, built from whole
columns rather than row by row (a first version reads a million adds)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from dv_assets.mirror.delta.actions import NUM_RECORDS_READ
from dv_assets.mirror.delta.add_candidates import AddCandidates

# Checkpoint columns that make up a table state; tombstones (`remove`) and txn/domainMetadata are not needed.
CHECKPOINT_COLUMNS = ("add", "metaData", "protocol", "sidecar", "checkpointMetadata")
# The fields of a checkpoint's `add` that AddFile reads (its stats_parsed is chosen separately).
ADD_FIELDS = (
    "path",
    "partitionValues",
    "size",
    "modificationTime",
    "dataChange",
    "tags",
    "deletionVector",
    "stats",
)
_REQUIRED_ADD_FIELDS = ("path", "size")


def indexable_adds(adds: pa.Array) -> bool:
    return pa.types.is_struct(adds.type) and adds.type.get_field_index("path") >= 0


def selected_columns(schema: pa.Schema, columns: tuple[str, ...], *, stats: bool) -> list[str]:
    """The (nested) columns to read of a checkpoint file with this schema: of `add` only the fields
    AddFile reads, and of stats_parsed (the struct form of stats) all of it with `stats`, else its
    numRecords alone (a file's row count must survive dropping its stats)."""
    selected: list[str] = []
    for name in columns:
        if schema.get_field_index(name) < 0:
            continue
        add_type = schema.field(name).type
        if name != "add" or not pa.types.is_struct(add_type):
            selected.append(name)
            continue
        fields = {add_type.field(i).name: add_type.field(i).type for i in range(add_type.num_fields)}
        if any(required not in fields for required in _REQUIRED_ADD_FIELDS):
            selected.append(name)  # read whole, so that parsing names the missing field
            continue
        selected += [f"add.{field}" for field in ADD_FIELDS if field in fields]
        struct_stats = fields.get("stats_parsed")
        if struct_stats is None:
            continue
        if stats:
            selected.append("add.stats_parsed")
        elif pa.types.is_struct(struct_stats) and struct_stats.get_field_index("numRecords") >= 0:
            selected.append("add.stats_parsed.numRecords")
    return selected


def batch_actions(batch: pa.RecordBatch, candidates: AddCandidates | None = None) -> Iterator[dict[str, Any]]:
    """The actions of one batch of checkpoint rows: each row holds one action in one column. With
    `candidates`, only the adds it admits."""
    for name in batch.schema.names:
        column = batch.column(name)
        present = column.filter(pc.is_valid(column))
        if len(present) == 0:
            continue
        if name == "add" and pa.types.is_struct(present.type):
            if candidates is not None:
                present = candidates.admitted(present)
            yield from ({"add": row} for row in add_rows(present))
        else:
            yield from ({name: row} for row in present.to_pylist(maps_as_pydicts="strict"))


def add_rows(adds: pa.StructArray) -> Iterator[dict[str, Any]]:
    """Checkpoint `add` rows as the dicts AddFile parses, built from whole columns: stats_parsed only
    for the rows without JSON stats, the only rows that use it."""
    names = [adds.type.field(i).name for i in range(adds.type.num_fields)]
    children = dict(zip(names, adds.flatten(), strict=True))
    struct_stats = children.pop("stats_parsed", None)
    values = {name: column_values(child) for name, child in children.items()}
    from_struct: dict[int, Any] = {}
    if struct_stats is not None:
        text = children.get("stats")
        without_text = pc.is_null(text) if text is not None else pa.array([True] * len(adds))
        indices = pc.indices_nonzero(pc.and_(without_text, pc.is_valid(struct_stats)))
        if len(indices):
            parsed = struct_stats.take(indices).to_pylist(maps_as_pydicts="strict")
            from_struct = dict(zip(indices.to_pylist(), parsed, strict=True))
    text = children.get("stats")
    num_records = None if text is None else stats_num_records(text)
    keys: list[Any] = list(values)
    if num_records is not None:
        keys.append(NUM_RECORDS_READ)
        values[NUM_RECORDS_READ] = num_records  # type: ignore[index]
    for index, row_values in enumerate(zip(*values.values(), strict=True)):
        row = dict(zip(keys, row_values, strict=True))
        if index in from_struct:
            row["stats_parsed"] = from_struct[index]
        yield row


def stats_num_records(stats: pa.Array) -> list[int | None] | None:
    """Each JSON stats text's numRecords (None where it has none), read by Arrow's JSON parser for the
    whole column at once: a json.loads per file costs ~4.5 s for a million files, this ~0.4 s. None (the
    caller then parses each text itself, as `AddFile.from_action` does) unless Arrow reads exactly what
    json.loads would: each text one object on a line of its own (no line break in any), numRecords a
    JSON integer, null or absent, and every text valid JSON (Arrow's parser rejects what json.loads
    rejects; it also rejects lone surrogates, NaN in numRecords, repeated keys: those fall back)."""
    if not pa.types.is_string(stats.type) or len(stats) == 0:
        return None
    filled = pc.fill_null(stats, "")
    texts = pc.if_else(pc.equal(filled, ""), pa.scalar("{}"), filled).cast(pa.large_string())
    one_object_per_line = (
        pc.all(pc.starts_with(texts, "{")).as_py()
        and pc.all(pc.ends_with(texts, "}")).as_py()
        and not pc.any(pc.match_substring(texts, "\n")).as_py()
        and not pc.any(pc.match_substring(texts, "\r")).as_py()
    )
    if not one_object_per_line:
        return None
    lines = pa.LargeListArray.from_arrays(pa.array([0, len(texts)], pa.int64()), texts)
    joined = pc.binary_join(lines, pa.scalar("\n", pa.large_string()))[0].as_buffer()
    longest = pc.max(pc.binary_length(texts)).as_py()
    try:
        read = pajson.read_json(
            pa.BufferReader(joined),
            read_options=pajson.ReadOptions(block_size=max(1 << 22, 2 * longest)),
            parse_options=pajson.ParseOptions(
                explicit_schema=_NUM_RECORDS_SCHEMA, unexpected_field_behavior="ignore"
            ),
        )
    except pa.ArrowException:
        return None
    if read.num_rows != len(texts):  # two objects on one line (json.loads: invalid)
        return None
    return read.column("numRecords").to_pylist()


_NUM_RECORDS_SCHEMA = pa.schema([("numRecords", pa.int64())])


def column_values(column: pa.Array) -> list[Any]:
    """`column.to_pylist(maps_as_pydicts="strict")`, faster on what a checkpoint's add columns mostly are
    (a million rows of them in a first version): null-free integers, string maps (mostly empty), and
    columns mostly null (tags, deletion vectors)."""
    rows, nulls = len(column), column.null_count
    if nulls == rows:
        return [None] * rows
    if nulls * 2 > rows:  # only the valid rows are converted, then put in their places
        valid = pc.indices_nonzero(pc.is_valid(column))
        values: list[Any] = [None] * rows
        for index, value in zip(valid.to_pylist(), column_values(column.take(valid)), strict=True):
            values[index] = value
        return values
    kind = column.type
    if nulls == 0 and kind in _NATIVE_INTEGERS:  # read from the data buffer: no scalar per value
        data = memoryview(column.buffers()[1]).cast(_NATIVE_INTEGERS[kind])
        return data[column.offset : column.offset + rows].tolist()
    if pa.types.is_map(kind) and kind.key_type == pa.string() and kind.item_type == pa.string():
        return _string_maps(column) or column.to_pylist(maps_as_pydicts="strict")
    return column.to_pylist(maps_as_pydicts="strict")


_NATIVE_INTEGERS = {pa.int64(): "q", pa.int32(): "i"}  # Arrow buffers are in the machine's byte order


def _string_maps(column: pa.MapArray) -> list[dict[str, str | None] | None] | None:
    """A string map column's rows as dicts; None when a map repeats a key (pyarrow's strict conversion
    then raises its own error)."""
    offsets = column.offsets.to_pylist()  # the slice's own, into the whole keys and items
    keys, items = column.keys.to_pylist(), column.items.to_pylist()
    valid = column.is_valid().to_pylist() if column.null_count else None
    maps: list[dict[str, str | None] | None] = []
    for index in range(len(column)):
        first, end = offsets[index], offsets[index + 1]
        if valid is not None and not valid[index]:
            maps.append(None)
        elif first == end:
            maps.append({})
        else:
            row = dict(zip(keys[first:end], items[first:end], strict=True))
            if len(row) != end - first:
                return None
            maps.append(row)
    return maps
