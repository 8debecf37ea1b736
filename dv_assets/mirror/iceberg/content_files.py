"""Iceberg content files: data files referenced in place, v3 deletion vectors (a blob of a Puffin file),
v2 position-delete files. Typed values, each with one `to_json()`: Iceberg's `ContentFileParser` JSON,
the form Iceberg Java parses them from (`iceberg/java.py`) and prints them in when the mirror reads its
own delete files back (`DeleteFile.from_json`). Pure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

PARQUET = "parquet"
PUFFIN = "puffin"

# A partition tuple as single-value JSON: a list in spec order (as the mirror writes it), or the
# {field id: value} object Iceberg Java prints; ContentFileParser reads both.
PartitionJson = tuple[Any, ...] | Mapping[str, Any]


_json = json.JSONEncoder(separators=(",", ":")).encode
# A string as JSON, without the encoder's per-call dispatch: the C function `_json` itself uses for strings.
_json_string = json.encoder.encode_basestring_ascii


def _int_list(values: Iterable[int]) -> str:
    return "[" + ",".join(str(int(v)) for v in values) + "]"


def partition_to_json(partition: PartitionJson) -> Any:
    return list(partition) if isinstance(partition, tuple) else dict(partition)


def _partition_json(partition: PartitionJson) -> str:
    """`partition_to_json` as JSON text; an unpartitioned table's `[]` without the encoder."""
    return "[]" if partition == () else _json(partition_to_json(partition))


# The hot values: ColumnMetrics and DataFile are made once per data file a version adds (a million in a
# first version), DeleteFile once per DV (100,000 in some versions). Slotted dataclasses, read-only by
# convention (nothing changes one after it is made), as a frozen dataclass's __init__ (an
# `object.__setattr__` per field) costs 3-6 times as much; `benchmarks/micro.py` holds the gain.
@dataclass(slots=True)
class ColumnMetrics:
    """Column metrics keyed by Iceberg field id; bounds in single-value binary form."""

    value_counts: dict[int, int] = field(default_factory=dict)
    null_value_counts: dict[int, int] = field(default_factory=dict)
    lower_bounds: dict[int, bytes] = field(default_factory=dict)
    upper_bounds: dict[int, bytes] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """ContentFileParser's form: counts as key/value lists, bounds as upper-case hex."""
        out: dict[str, Any] = {}
        for key, counts in (
            ("value-counts", self.value_counts),
            ("null-value-counts", self.null_value_counts),
        ):
            if counts:
                out[key] = {"keys": list(counts), "values": list(counts.values())}
        for key, bounds in (("lower-bounds", self.lower_bounds), ("upper-bounds", self.upper_bounds)):
            if bounds:
                out[key] = {"keys": list(bounds), "values": [b.hex().upper() for b in bounds.values()]}
        return out

    def json_members(self) -> str:
        """`to_json`'s members as JSON text, each after a comma (`DataFile.json_line`)."""
        text = ""
        for key, counts in (
            ("value-counts", self.value_counts),
            ("null-value-counts", self.null_value_counts),
        ):
            if counts:
                text += f',"{key}":{{"keys":{_int_list(counts)},"values":{_int_list(counts.values())}}}'
        for key, bounds in (("lower-bounds", self.lower_bounds), ("upper-bounds", self.upper_bounds)):
            if bounds:
                hexes = ",".join(f'"{b.hex().upper()}"' for b in bounds.values())
                text += f',"{key}":{{"keys":{_int_list(bounds)},"values":[{hexes}]}}'
        return text

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ColumnMetrics:
        def pairs(key: str) -> list[tuple[int, Any]]:
            entry = raw.get(key) or {}
            return list(zip(entry.get("keys", []), entry.get("values", []), strict=True))

        return cls(
            value_counts={int(k): int(v) for k, v in pairs("value-counts")},
            null_value_counts={int(k): int(v) for k, v in pairs("null-value-counts")},
            lower_bounds={int(k): bytes.fromhex(v) for k, v in pairs("lower-bounds")},
            upper_bounds={int(k): bytes.fromhex(v) for k, v in pairs("upper-bounds")},
        )


@dataclass(slots=True)
class DataFile:
    """A Parquet data file of the Delta table, referenced in place; `partition` holds Iceberg
    single-value JSON per partition field, in spec order."""

    path: str
    partition: PartitionJson
    file_size_in_bytes: int
    record_count: int
    metrics: ColumnMetrics = field(default_factory=ColumnMetrics)
    spec_id: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "spec-id": self.spec_id,
            "content": "data",
            "file-path": self.path,
            "file-format": PARQUET,
            "partition": partition_to_json(self.partition),
            "file-size-in-bytes": self.file_size_in_bytes,
            "record-count": self.record_count,
            **self.metrics.to_json(),
        }

    def json_line(self) -> str:
        """`to_json` as compact JSON text, written directly: the lines a first version of a million files
        hands to the JVM, a few times faster than encoding each dict."""
        return (
            f'{{"spec-id":{int(self.spec_id)},"content":"data","file-path":{_json_string(self.path)},'
            f'"file-format":"{PARQUET}","partition":{_partition_json(self.partition)},'
            f'"file-size-in-bytes":{int(self.file_size_in_bytes)},"record-count":{int(self.record_count)}'
            f"{self.metrics.json_members()}}}"
        )


# No metrics (a DV's entry has none): one shared value, as a version's thousands of DVs need no dicts each.
NO_METRICS = ColumnMetrics()


@dataclass(slots=True)
class DeleteFile:
    """Position deletes for exactly one data file: a v3 DV (a blob of a Puffin file, at `content_offset`)
    or a v2 position-delete Parquet file."""

    path: str
    file_format: str  # PUFFIN or PARQUET
    partition: PartitionJson
    file_size_in_bytes: int
    record_count: int  # rows it deletes
    referenced_data_file: str
    content_offset: int | None = None  # DVs only: where the blob starts in the Puffin file
    content_size_in_bytes: int | None = None
    metrics: ColumnMetrics = field(default_factory=ColumnMetrics)
    spec_id: int = 0

    @property
    def lower_bounds(self) -> dict[int, bytes]:
        return self.metrics.lower_bounds

    @property
    def upper_bounds(self) -> dict[int, bytes]:
        return self.metrics.upper_bounds

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "spec-id": self.spec_id,
            "content": "position-deletes",
            "file-path": self.path,
            "file-format": self.file_format,
            "partition": partition_to_json(self.partition),
            "file-size-in-bytes": self.file_size_in_bytes,
            "record-count": self.record_count,
            "referenced-data-file": self.referenced_data_file,
        }
        if self.content_offset is not None:
            out["content-offset"] = self.content_offset
            out["content-size-in-bytes"] = self.content_size_in_bytes
        out.update(self.metrics.to_json())
        return out

    @classmethod
    def puffin_dvs(
        cls, path: str, file_size_in_bytes: int, dvs: Iterable[tuple[str, PartitionJson, int, int, int]]
    ) -> list[DeleteFile]:
        """The DVs of one Puffin file as delete files, from (referenced data file, partition, cardinality,
        blob offset, blob length) each; no metrics."""
        return [
            cls(
                path,
                PUFFIN,
                partition,
                file_size_in_bytes,
                cardinality,
                data_file,
                offset,
                length,
                NO_METRICS,
            )
            for data_file, partition, cardinality, offset, length in dvs
        ]

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> DeleteFile:
        """A delete file as Iceberg Java's `ContentFileParser.toJson` prints it."""
        if raw.get("content") != "position-deletes" or raw.get("referenced-data-file") is None:
            raise ValueError(
                f"{raw.get('file-path')}: not a position delete file for one data file; the mirror writes "
                "no other kind (was the table changed outside dv-mirror?)"
            )
        return cls(
            path=raw["file-path"],
            file_format=str(raw["file-format"]).lower(),
            partition=_partition_from_json(raw.get("partition")),
            file_size_in_bytes=int(raw["file-size-in-bytes"]),
            record_count=int(raw["record-count"]),
            referenced_data_file=raw["referenced-data-file"],
            content_offset=raw.get("content-offset"),
            content_size_in_bytes=raw.get("content-size-in-bytes"),
            metrics=ColumnMetrics.from_json(raw),
            spec_id=int(raw.get("spec-id", 0)),
        )


def _partition_from_json(raw: Any) -> PartitionJson:
    if isinstance(raw, Mapping):
        return dict(raw)
    return tuple(raw or ())
