"""Iceberg v2 position-delete Parquet files, one per data file (the v2 form of a deletion vector).

Rows are `(file_path, pos)` with Iceberg's reserved field ids, sorted by pos (a single file_path, so that
is the spec's file_path-then-pos order). Positions stream from the bitmap in fixed-size chunks, so a
file with many deletes never becomes one large Python list.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice

import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap64

from dv_assets.dv.reader import filesystem_and_path

FILE_PATH_FIELD_ID = 2147483546
POS_FIELD_ID = 2147483545
DEFAULT_CHUNK_ROWS = 1 << 20


def _field(name: str, type_: pa.DataType, field_id: int) -> pa.Field:
    return pa.field(name, type_, nullable=False, metadata={b"PARQUET:field_id": str(field_id).encode()})


POSITION_DELETE_SCHEMA = pa.schema(
    [_field("file_path", pa.string(), FILE_PATH_FIELD_ID), _field("pos", pa.int64(), POS_FIELD_ID)]
)


@dataclass(frozen=True)
class PositionDeleteFile:
    """What the delete manifest entry needs (content = 1, file_format = PARQUET)."""

    path: str
    file_size_in_bytes: int
    record_count: int
    referenced_data_file: str
    value_counts: dict[int, int]
    null_value_counts: dict[int, int]
    lower_bounds: dict[int, bytes]  # Iceberg single-value serialization
    upper_bounds: dict[int, bytes]


def write_position_delete_file(
    output_path: str, data_file: str, positions: BitMap64, *, chunk_rows: int = DEFAULT_CHUNK_ROWS
) -> PositionDeleteFile:
    """Write the deletes of `data_file` to `output_path` (a path or URI) and describe the result."""
    if not positions:
        raise ValueError(f"no positions to write for {data_file}: an empty delete file is never needed")
    filesystem, path = filesystem_and_path(output_path)
    with pq.ParquetWriter(path, POSITION_DELETE_SCHEMA, filesystem=filesystem) as writer:
        for chunk in _position_chunks(positions, chunk_rows):
            file_paths = pa.repeat(pa.scalar(data_file, pa.string()), len(chunk))
            writer.write_batch(
                pa.record_batch([file_paths, chunk], schema=POSITION_DELETE_SCHEMA), row_group_size=chunk_rows
            )
    record_count = len(positions)
    path_bytes = data_file.encode("utf-8")
    # file_path bounds equal the data file: readers use them to match this file to its data file.
    return PositionDeleteFile(
        path=output_path,
        file_size_in_bytes=filesystem.get_file_info(path).size,
        record_count=record_count,
        referenced_data_file=data_file,
        value_counts={FILE_PATH_FIELD_ID: record_count, POS_FIELD_ID: record_count},
        null_value_counts={FILE_PATH_FIELD_ID: 0, POS_FIELD_ID: 0},
        lower_bounds={FILE_PATH_FIELD_ID: path_bytes, POS_FIELD_ID: struct.pack("<q", positions.min())},
        upper_bounds={FILE_PATH_FIELD_ID: path_bytes, POS_FIELD_ID: struct.pack("<q", positions.max())},
    )


def _position_chunks(positions: BitMap64, chunk_rows: int) -> Iterator[pa.Array]:
    """Ascending positions as int64 Arrow arrays of at most `chunk_rows`, without a Python list."""
    iterator = iter(positions)
    while True:
        chunk = array("q", islice(iterator, chunk_rows))
        if not chunk:
            return
        yield pa.Array.from_buffers(pa.int64(), len(chunk), [None, pa.py_buffer(chunk)])
