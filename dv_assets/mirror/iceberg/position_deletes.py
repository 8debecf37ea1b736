"""Iceberg v2 position-delete Parquet files, one per data file (the v2 form of a deletion vector).

Rows are `(file_path, pos)` with Iceberg's reserved field ids, sorted by pos (a single file_path, so that
is the spec's file_path-then-pos order). Positions leave the bitmap in chunks of `chunk_rows` values
as native arrays (never a Python int per position), and the one file_path is a dictionary of one
entry: the file is written at tens of millions of positions per second per core.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pyarrow as pa
from pyroaring import BitMap64

from dv_assets.mirror.iceberg.content_files import PARQUET, ColumnMetrics, DeleteFile, PartitionJson
from dv_assets.mirror.io import FileIO

FILE_PATH_FIELD_ID = 2147483546
POS_FIELD_ID = 2147483545
DEFAULT_CHUNK_ROWS = 1 << 20


def _field(name: str, type_: pa.DataType, field_id: int) -> pa.Field:
    return pa.field(name, type_, nullable=False, metadata={b"PARQUET:field_id": str(field_id).encode()})


# What is written: the same columns, file_path as a dictionary (Parquet stores a plain string column).
_WRITTEN_SCHEMA = pa.schema(
    [
        _field("file_path", pa.dictionary(pa.int32(), pa.string()), FILE_PATH_FIELD_ID),
        _field("pos", pa.int64(), POS_FIELD_ID),
    ]
)
# Sorted positions delta-encode to a few bits each; the one file_path is dictionary-encoded. Parquet
# statistics are kept for pos only: file_path's bounds are in the manifest, where readers look for them.
_WRITER_OPTIONS = {
    "use_dictionary": ["file_path"],
    "column_encoding": {"pos": "DELTA_BINARY_PACKED"},
    "write_statistics": ["pos"],
    "store_schema": False,
}


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
    path_dictionary = pa.array([data_file], pa.string())
    with io.parquet_writer(output_path, _WRITTEN_SCHEMA, **_WRITER_OPTIONS) as writer:
        for chunk in _position_chunks(positions, chunk_rows):
            indices = pa.Array.from_buffers(
                pa.int32(), len(chunk), [None, pa.py_buffer(bytes(4 * len(chunk)))]
            )
            file_paths = pa.DictionaryArray.from_arrays(indices, path_dictionary)
            writer.write_batch(
                pa.record_batch([file_paths, chunk], schema=_WRITTEN_SCHEMA), row_group_size=chunk_rows
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
    """Ascending positions as int64 Arrow arrays of `chunk_rows` values (the last one fewer): each chunk
    is the bitmap cut between two of its values (found by rank) and copied out natively (`to_array`)."""
    total = len(positions)
    for first in range(0, total, chunk_rows):
        last = min(first + chunk_rows, total) - 1
        if first == 0 and last == total - 1:
            chunk = positions
        else:
            window = BitMap64()
            window.add_range(positions[first], positions[last] + 1)
            chunk = positions & window
        values = chunk.to_array()  # array('Q'); every position is below 2^63 (checked when decoded)
        yield pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])
