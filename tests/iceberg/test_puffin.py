"""Puffin writer (read back by pyiceberg) and the v2 position-delete Parquet writer."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyiceberg.table.deletion_vector import deletion_vectors_from_puffin_file
from pyiceberg.table.puffin import PuffinFile as PyIcebergPuffinFile
from pyroaring import BitMap64

from dv_assets.mirror.dv.reader import DVBlob
from dv_assets.mirror.iceberg.content_files import PUFFIN, DeleteFile
from dv_assets.mirror.iceberg.position_deletes import (
    FILE_PATH_FIELD_ID,
    POS_FIELD_ID,
    write_position_delete_file,
)
from dv_assets.mirror.iceberg.puffin import (
    DELETION_VECTOR_BLOB_TYPE,
    ROW_POSITION_FIELD_ID,
    BlobMetadata,
    PuffinFooter,
    build_puffin,
)
from testkit.synthetic import encode_blob
from tests.helpers.dvs import delta_dvs


def test_layout_matches_the_spec() -> None:
    blobs = delta_dvs()
    puffin = build_puffin(blobs, created_by="dv-mirror test")
    content = puffin.content
    assert content[:4] == b"PFA1" and content[-4:] == b"PFA1"
    payload_size, flags = struct.unpack("<II", content[-12:-4])
    assert flags == 0
    assert content[-12 - payload_size - 4 : -12 - payload_size] == b"PFA1"
    footer = json.loads(content[-12 - payload_size : -12])
    assert footer["properties"] == {"created-by": "dv-mirror test"}
    offset = 4
    for blob, entry, meta in zip(blobs, puffin.entries, footer["blobs"], strict=True):
        assert meta == {
            "type": DELETION_VECTOR_BLOB_TYPE,
            "fields": [ROW_POSITION_FIELD_ID],
            "snapshot-id": -1,
            "sequence-number": -1,
            "offset": offset,
            "length": len(blob.blob),
            "properties": {
                "referenced-data-file": blob.referenced_data_file,
                "cardinality": str(blob.cardinality),
            },
        }
        assert (entry.offset, entry.length) == (offset, len(blob.blob))
        assert content[entry.offset : entry.offset + entry.length] == blob.blob  # verbatim Delta bytes
        offset += len(blob.blob)
    assert "compression-codec" not in footer["blobs"][0]


def test_pyiceberg_reads_the_file_and_its_vectors() -> None:
    blobs = delta_dvs()
    content = build_puffin(blobs).content
    reader = PyIcebergPuffinFile(content)
    assert [b.properties["referenced-data-file"] for b in reader.footer.blobs] == [
        b.referenced_data_file for b in blobs
    ]
    for meta, blob in zip(reader.footer.blobs, blobs, strict=True):
        assert reader.get_blob_payload(meta) == blob.blob
    vectors = {
        dv.referenced_data_file: dv.to_vector().to_pylist()
        for dv in deletion_vectors_from_puffin_file(reader)
    }
    assert vectors == {
        "/t/a.parquet": [0, 9],
        "/t/b.parquet": [0, 1, 4, 5],
        "s3://bucket/c d.parquet": [0, 1, 2],
    }


def test_large_positions_round_trip_through_pyiceberg() -> None:
    positions = [3, 70_000, (1 << 32) + 5, (5 << 32) + 1]
    content = build_puffin([DVBlob("f", encode_blob(positions), 4)]).content
    [dv] = deletion_vectors_from_puffin_file(PyIcebergPuffinFile(content))
    assert dv.to_vector().to_pylist() == positions


def test_empty_puffin_and_duplicate_data_file() -> None:
    empty = build_puffin([])
    assert PyIcebergPuffinFile(empty.content).footer.blobs == []
    blob = DVBlob("f", encode_blob([1]), 1)
    with pytest.raises(ValueError, match="two deletion vectors"):
        build_puffin([blob, blob])


# --- v2 position deletes ------------------------------------------------------------------------------


def test_position_delete_file_reads_back_with_field_ids(tmp_path: Path) -> None:
    positions = BitMap64([9, 0, 5, (1 << 33) + 1])
    data_file = "/warehouse/db/t/part-0.parquet"
    out = tmp_path / "deletes.parquet"
    written = write_position_delete_file(str(out), data_file, positions, chunk_rows=3)
    table = pq.read_table(out)
    assert table.column("file_path").to_pylist() == [data_file] * 4
    assert table.column("pos").to_pylist() == [0, 5, 9, (1 << 33) + 1]
    schema = pq.read_schema(out)
    assert schema.field("file_path").metadata[b"PARQUET:field_id"] == str(FILE_PATH_FIELD_ID).encode()
    assert schema.field("pos").metadata[b"PARQUET:field_id"] == str(POS_FIELD_ID).encode()
    assert not schema.field("file_path").nullable and not schema.field("pos").nullable
    parquet_schema = pq.ParquetFile(out).schema
    assert [parquet_schema.column(i).max_definition_level for i in range(2)] == [0, 0]  # required
    assert pq.ParquetFile(out).metadata.num_row_groups == 2  # streamed in chunks of 3
    assert written.record_count == 4
    assert written.file_size_in_bytes == out.stat().st_size
    assert written.referenced_data_file == data_file
    assert written.lower_bounds[FILE_PATH_FIELD_ID] == data_file.encode()
    assert written.upper_bounds[FILE_PATH_FIELD_ID] == data_file.encode()
    assert written.lower_bounds[POS_FIELD_ID] == struct.pack("<q", 0)
    assert written.upper_bounds[POS_FIELD_ID] == struct.pack("<q", (1 << 33) + 1)


def test_position_delete_file_accepts_a_file_uri(tmp_path: Path) -> None:
    out = tmp_path / "d.parquet"
    written = write_position_delete_file(out.as_uri(), "f", BitMap64([1, 2]))
    assert written.path == out.as_uri()
    assert pq.read_table(out).column("pos").to_pylist() == [1, 2]


def test_position_delete_file_refuses_no_positions(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no positions"):
        write_position_delete_file(str(tmp_path / "x.parquet"), "f", BitMap64())


def test_footer_payload_is_the_json_of_its_entries_for_any_file_name() -> None:
    """The footer is built from a template per blob; it must equal the JSON of `to_json` byte for byte,
    whatever the names hold (quotes, backslashes, `%`, non-ASCII, control characters)."""
    names = ['file:/t/é "q" \\ 100%d.parquet', "s3://bucket/a\tb\n.parquet", "/t/plain.parquet", "/t/\u2028"]
    footer = PuffinFooter(
        tuple(BlobMetadata(name, 4 + 40 * i, 40, i + 1) for i, name in enumerate(names)),
        created_by='dv-mirror "x" é',
    )
    expected = json.dumps(footer.to_json(), separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    assert footer.payload() == expected
    empty = PuffinFooter((), created_by="c")
    assert empty.payload() == json.dumps(empty.to_json(), separators=(",", ":")).encode()


def test_puffin_dv_entries_are_the_delete_files_they_describe() -> None:
    """`DeleteFile.puffin_dvs` passes each value by position: each must land in the field of its name."""
    partition = (3, "x")
    [fast] = DeleteFile.puffin_dvs("file:/w/d.puffin", 900, [("file:/t/a.parquet", partition, 7, 4, 60)])
    built = DeleteFile(
        path="file:/w/d.puffin",
        file_format=PUFFIN,
        partition=partition,
        file_size_in_bytes=900,
        record_count=7,
        referenced_data_file="file:/t/a.parquet",
        content_offset=4,
        content_size_in_bytes=60,
    )
    assert fast == built and fast.to_json() == built.to_json()
