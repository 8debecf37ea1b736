"""Iceberg v2 position-delete Parquet files, one per data file (the v2 form of a deletion vector).

Rows are `(file_path, pos)` with Iceberg's reserved field ids, sorted by pos (a single file_path, so that
is the spec's file_path-then-pos order). Positions stream from the bitmap in fixed-size chunks, so a
file with many deletes never becomes one large Python list.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator
from itertools import islice

import pyarrow as pa
from pyroaring import BitMap64

from dv_assets.mirror.iceberg.content_files import PARQUET, ColumnMetrics, DeleteFile, PartitionJson
from dv_assets.mirror.io import FileIO

FILE_PATH_FIELD_ID = 2147483546
POS_FIELD_ID = 2147483545
DEFAULT_CHUNK_ROWS = 1 << 20


def _field(name: str, type_: pa.DataType, field_id: int) -> pa.Field:
    return pa.field(name, type_, nullable=False, metadata={b"PARQUET:field_id": str(field_id).encode()})


POSITION_DELETE_SCHEMA = pa.schema(
    [_field("file_path", pa.string(), FILE_PATH_FIELD_ID), _field("pos", pa.int64(), POS_FIELD_ID)]
)


def write_position_delete_file(
    output_path: str,
    data_file: str,
    positions: BitMap64,
    *,
    partition: PartitionJson = (),
    io: FileIO | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> DeleteFile:
    """Write the deletes of `data_file` to `output_path` (a path or URI); the delete file's entry."""
    if not positions:
        raise ValueError(f"no positions to write for {data_file}: an empty delete file is never needed")
    io = io or FileIO()
    with io.parquet_writer(output_path, POSITION_DELETE_SCHEMA) as writer:
        for chunk in _position_chunks(positions, chunk_rows):
            file_paths = pa.repeat(pa.scalar(data_file, pa.string()), len(chunk))
            writer.write_batch(
                pa.record_batch([file_paths, chunk], schema=POSITION_DELETE_SCHEMA), row_group_size=chunk_rows
            )
    record_count = len(positions)
    path_bytes = data_file.encode("utf-8")
    # file_path bounds equal the data file: readers use them to match this file to its data file.
    return DeleteFile(
        path=output_path,
        file_format=PARQUET,
        partition=partition,
        file_size_in_bytes=io.stat(output_path).size or 0,
        record_count=record_count,
        referenced_data_file=data_file,
        metrics=ColumnMetrics(
            value_counts={FILE_PATH_FIELD_ID: record_count, POS_FIELD_ID: record_count},
            null_value_counts={FILE_PATH_FIELD_ID: 0, POS_FIELD_ID: 0},
            lower_bounds={FILE_PATH_FIELD_ID: path_bytes, POS_FIELD_ID: struct.pack("<q", positions.min())},
            upper_bounds={FILE_PATH_FIELD_ID: path_bytes, POS_FIELD_ID: struct.pack("<q", positions.max())},
        ),
    )


def _position_chunks(positions: BitMap64, chunk_rows: int) -> Iterator[pa.Array]:
    """Ascending positions as int64 Arrow arrays of at most `chunk_rows`, without a Python list."""
    iterator = iter(positions)
    while True:
        chunk = array("q", islice(iterator, chunk_rows))
        if not chunk:
            return
        yield pa.Array.from_buffers(pa.int64(), len(chunk), [None, pa.py_buffer(chunk)])
