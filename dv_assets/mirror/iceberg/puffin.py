"""Puffin files holding `deletion-vector-v1` blobs (Iceberg format/puffin-spec.md), as bytes.

Pure: verified `DVBlob`s in, file bytes plus the (offset, length) of each blob out; the caller writes
the bytes and uses the offsets as the manifest's `content_offset` / `content_size_in_bytes`. Blobs are
copied verbatim (they were verified when read) and stored uncompressed, as Iceberg's DV writer does.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from json.encoder import encode_basestring  # what json.dumps(str, ensure_ascii=False) calls
from typing import Any

from dv_assets.mirror.dv.reader import DVBlob

MAGIC = b"PFA1"
DELETION_VECTOR_BLOB_TYPE = "deletion-vector-v1"
ROW_POSITION_FIELD_ID = 2147483645  # the reserved `_pos` metadata column a DV applies to
FOOTER_STRUCT_SIZE = 12  # u32 LE payload size, u32 LE flags, magic
UNASSIGNED = -1  # snapshot id and sequence number are inherited from the commit for DV blobs


def _created_by() -> str:
    try:
        return f"dv-mirror {version('dv-mirror')}"
    except PackageNotFoundError:  # running from a source checkout
        return "dv-mirror (source checkout)"


CREATED_BY = _created_by()


@dataclass(slots=True)
class BlobMetadata:
    """One blob's entry in the Puffin footer: where it landed, and what the DV's manifest entry needs
    (`content_offset` / `content_size_in_bytes`, `referenced_data_file`, the cardinality). One per DV: a
    slotted dataclass, read-only by convention, as the mirror's other hot values (`dv/reader.py`)."""

    referenced_data_file: str
    offset: int
    length: int
    cardinality: int

    def to_json(self) -> dict[str, Any]:
        """The blob metadata Iceberg's DV writer records."""
        return {
            "type": DELETION_VECTOR_BLOB_TYPE,
            "fields": [ROW_POSITION_FIELD_ID],
            "snapshot-id": UNASSIGNED,
            "sequence-number": UNASSIGNED,
            "offset": self.offset,
            "length": self.length,
            "properties": {
                "referenced-data-file": self.referenced_data_file,
                "cardinality": str(self.cardinality),
            },
        }


@dataclass(frozen=True)
class PuffinFooter:
    blobs: tuple[BlobMetadata, ...]
    created_by: str

    def to_json(self) -> dict[str, Any]:
        return {"blobs": [b.to_json() for b in self.blobs], "properties": {"created-by": self.created_by}}

    def payload(self) -> bytes:
        """The footer JSON as stored: compact, UTF-8; byte for byte `json.dumps(self.to_json(),
        separators=(",", ":"), ensure_ascii=False)`, built from one template per blob (a version of
        100,000 DVs has 100,000 entries, and a dict per entry costs more than the DV work itself)."""
        entries = ",".join(
            _BLOB_JSON % (b.offset, b.length, encode_basestring(b.referenced_data_file), b.cardinality)
            for b in self.blobs
        )
        properties = json.dumps({"created-by": self.created_by}, separators=(",", ":"), ensure_ascii=False)
        return f'{{"blobs":[{entries}],"properties":{properties}}}'.encode()


# One footer entry as `BlobMetadata.to_json` gives it, compact, in its key order.
_BLOB_JSON = (
    f'{{"type":"{DELETION_VECTOR_BLOB_TYPE}","fields":[{ROW_POSITION_FIELD_ID}],'
    f'"snapshot-id":{UNASSIGNED},"sequence-number":{UNASSIGNED},"offset":%d,"length":%d,'
    '"properties":{"referenced-data-file":%s,"cardinality":"%d"}}'
)


@dataclass(frozen=True)
class PuffinFile:
    content: bytes
    entries: tuple[BlobMetadata, ...]


def build_puffin(blobs: Sequence[DVBlob], *, created_by: str = CREATED_BY) -> PuffinFile:
    """`PFA1 | blobs | PFA1 | footer JSON | u32 LE payload size | u32 LE flags (0) | PFA1`."""
    parts = [MAGIC]
    entries: list[BlobMetadata] = []
    offset = len(MAGIC)
    # One pass per DV (a version may hold 100,000): plain locals, one BlobMetadata each.
    for dv in blobs:
        blob = dv.blob
        length = len(blob)
        parts.append(blob)
        entries.append(BlobMetadata(dv.data_file, offset, length, dv.cardinality))
        offset += length
    if len({entry.referenced_data_file for entry in entries}) != len(entries):
        # Iceberg v3 allows one DV per data file in a snapshot; two here would be a planning bug.
        seen: set[str] = set()
        duplicate = next(
            e.referenced_data_file
            for e in entries
            if e.referenced_data_file in seen or seen.add(e.referenced_data_file)
        )
        raise ValueError(f"two deletion vectors for data file {duplicate}")
    payload = PuffinFooter(tuple(entries), created_by).payload()
    parts += [MAGIC, payload, struct.pack("<II", len(payload), 0), MAGIC]
    return PuffinFile(content=b"".join(parts), entries=tuple(entries))


def read_puffin_footer(content: bytes) -> dict[str, Any]:
    """The footer JSON of a Puffin file, after checking both magics and the flags (uncompressed only)."""
    if len(content) < 2 * len(MAGIC) + FOOTER_STRUCT_SIZE or content[:4] != MAGIC or content[-4:] != MAGIC:
        raise ValueError("not a Puffin file: magic PFA1 missing at the start or the end")
    payload_size, flags = struct.unpack_from("<II", content, len(content) - FOOTER_STRUCT_SIZE)
    if flags != 0:
        raise ValueError(f"Puffin footer flags are {flags:#x}; compressed footers are not supported")
    payload_end = len(content) - FOOTER_STRUCT_SIZE
    footer_start = payload_end - payload_size - len(MAGIC)
    if footer_start < len(MAGIC) or content[footer_start : payload_end - payload_size] != MAGIC:
        raise ValueError("Puffin footer magic missing before the footer payload")
    return json.loads(content[payload_end - payload_size : payload_end].decode("utf-8"))
