"""Iceberg content files (data files, DVs, position-delete files) as `ContentFileParser` JSON. Pure.

This is the form Iceberg Java parses into `DataFile` / `DeleteFile` objects (see `commit.py`), and the
form it prints them in when the mirror reads its own delete files back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dv_assets.iceberg.metrics import IcebergMetrics
from dv_assets.iceberg.position_deletes import PositionDeleteFile
from dv_assets.iceberg.puffin import PuffinBlobEntry


def metrics_json(
    value_counts: Mapping[int, int],
    null_value_counts: Mapping[int, int],
    lower_bounds: Mapping[int, bytes],
    upper_bounds: Mapping[int, bytes],
) -> dict[str, Any]:
    """Column metrics keyed by field id, in ContentFileParser's form (bounds: single-value bytes as hex)."""
    out: dict[str, Any] = {}
    for key, counts in (("value-counts", value_counts), ("null-value-counts", null_value_counts)):
        if counts:
            out[key] = {"keys": list(counts), "values": list(counts.values())}
    for key, bounds in (("lower-bounds", lower_bounds), ("upper-bounds", upper_bounds)):
        if bounds:
            out[key] = {"keys": list(bounds), "values": [b.hex().upper() for b in bounds.values()]}
    return out


def data_file(
    *,
    spec_id: int,
    location: str,
    partition: Sequence[Any],
    size: int,
    record_count: int,
    metrics: IcebergMetrics | None = None,
) -> dict[str, Any]:
    """A Parquet data file referenced in place; `partition` holds Iceberg single-value JSON per field."""
    out = {
        "spec-id": spec_id,
        "content": "data",
        "file-path": location,
        "file-format": "parquet",
        "partition": list(partition),
        "file-size-in-bytes": size,
        "record-count": record_count,
    }
    if metrics is not None:
        out.update(
            metrics_json(
                metrics.value_counts, metrics.null_value_counts, metrics.lower_bounds, metrics.upper_bounds
            )
        )
    return out


def deletion_vector(
    *, spec_id: int, puffin_path: str, puffin_size: int, partition: Sequence[Any], entry: PuffinBlobEntry
) -> dict[str, Any]:
    """A v3 DV: one blob of a Puffin file, bound to exactly one data file."""
    return {
        "spec-id": spec_id,
        "content": "position-deletes",
        "file-path": puffin_path,
        "file-format": "puffin",
        "partition": list(partition),
        "file-size-in-bytes": puffin_size,
        "record-count": entry.cardinality,
        "referenced-data-file": entry.referenced_data_file,
        "content-offset": entry.offset,
        "content-size-in-bytes": entry.length,
    }


def position_delete_file(
    *, spec_id: int, partition: Sequence[Any], written: PositionDeleteFile
) -> dict[str, Any]:
    """A v2 position-delete Parquet file covering one data file."""
    out = {
        "spec-id": spec_id,
        "content": "position-deletes",
        "file-path": written.path,
        "file-format": "parquet",
        "partition": list(partition),
        "file-size-in-bytes": written.file_size_in_bytes,
        "record-count": written.record_count,
        "referenced-data-file": written.referenced_data_file,
    }
    out.update(
        metrics_json(
            written.value_counts, written.null_value_counts, written.lower_bounds, written.upper_bounds
        )
    )
    return out
