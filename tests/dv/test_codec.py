"""DV codec and reader against Iceberg Java's golden blobs and every DV in the Delta fixtures."""

from __future__ import annotations

import dataclasses
import json
import pickle
import shutil
import struct
import uuid
from pathlib import Path

import pytest
from pyroaring import BitMap64

from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.dv.codec import (
    decode_blob,
    decode_inline_bitmap,
    decode_uuid_path,
    dv_file_name,
    frame_blob,
    verified_bitmap,
    z85_decode,
)
from dv_assets.mirror.dv.reader import MAX_READ_GAP, DVTask, convert_dv_batch, resolve_dv_location
from dv_assets.mirror.errors import InvalidDeletionVectorError
from testkit.synthetic import encode_blob, z85_encode
from tests.helpers.dvs import dv_file_of, fixture_dvs
from tests.helpers.faults import patch_bytes
from tests.helpers.paths import DELTA_FIXTURES, ICEBERG_DV_BLOBS

ICEBERG_BLOBS = {
    "empty-position-index.bin": [],
    "small-alternating-values-position-index.bin": [1, 3, 5, 7, 9],
    "small-and-large-values-position-index.bin": [100, 101, 2147483747, 2147483748],
}


FIXTURE_DVS = fixture_dvs()
MALFORMED = ("cdf-table-with-dv", 5)


# --- Z85 and descriptors -------------------------------------------------------------------------------


def test_z85_round_trip_and_reference_vector() -> None:
    # The ZeroMQ spec's test vector.
    raw = bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    assert z85_encode(raw) == "HelloWorld"
    assert z85_decode("HelloWorld") == raw


def test_uuid_path_with_prefix_resolves_like_the_protocol_example() -> None:
    prefix, dv_uuid = decode_uuid_path("ab^-aqEH.-t@S}K{vb[*k^")
    assert prefix == "ab"
    assert dv_uuid == uuid.UUID("d2c639aa-8816-431a-aaf6-d3fe2512ff61")
    assert (
        dv_file_name("ab^-aqEH.-t@S}K{vb[*k^")
        == "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    )
    assert dv_file_name("^-aqEH.-t@S}K{vb[*k^") == "deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"


def test_bad_uuid_path_is_refused() -> None:
    with pytest.raises(InvalidDeletionVectorError, match="shorter than"):
        decode_uuid_path("abc")
    with pytest.raises(InvalidDeletionVectorError, match="not in the Z85 alphabet"):
        decode_uuid_path('"' * 20)


def test_inline_bitmap_drops_z85_padding() -> None:
    bitmap = b"\xd1\xd39d" + BitMap64([0, 5]).serialize()  # 36 bytes: aligned
    odd = bitmap + b"\x01\x02"  # 38 bytes: padded to 40 when encoded
    assert decode_inline_bitmap(z85_encode(bitmap), len(bitmap)) == bitmap
    assert decode_inline_bitmap(z85_encode(odd), len(odd)) == odd
    with pytest.raises(InvalidDeletionVectorError, match="should be 55 Z85 characters, got 50"):
        decode_inline_bitmap(z85_encode(odd), 38 + 4)


# --- Iceberg Java's blobs -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in ICEBERG_DV_BLOBS.glob("*.bin")))
def test_iceberg_blob_decodes_and_re_encodes_byte_identical(name: str) -> None:
    blob = (ICEBERG_DV_BLOBS / name).read_bytes()
    positions = decode_blob(blob)
    if name in ICEBERG_BLOBS:
        assert list(positions) == ICEBERG_BLOBS[name]
    else:  # all-container-types: array, bitset and run containers over two 32-bit keys
        assert len(positions) == 132561
        assert positions.max() >> 32 == 1
    # Built position by position (no run containers yet): the encoder must run-optimize like Iceberg.
    rebuilt = BitMap64()
    for position in positions:
        rebuilt.add(position)
    assert encode_blob(rebuilt) == blob
    assert encode_blob(list(positions)) == blob
    verified = verified_bitmap(blob, len(blob) - 8, len(positions), None)
    assert verified == positions


def test_encode_does_not_change_the_callers_bitmap() -> None:
    bitmap = BitMap64()
    for position in range(100):
        bitmap.add(position)
    before = bitmap.serialize()
    encode_blob(bitmap)
    assert bitmap.serialize() == before


# --- every DV of the Delta fixtures -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "version", "task"),
    [case for case in FIXTURE_DVS if case[:2] != MALFORMED],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_fixture_dv_reads_and_verifies(table: str, version: int, task: DVTask) -> None:
    [dv] = convert_dv_batch([task])
    assert dv.cardinality == task.cardinality
    positions = dv.positions()
    assert len(positions) == task.cardinality
    assert positions.max() < task.num_records
    assert encode_blob(positions) == dv.blob or task.storage_type == "u"  # Delta may not run-optimize
    if task.storage_type == "u":
        location = resolve_dv_location(task.table_root, "u", task.path_or_inline_dv)
        raw = Path(location).read_bytes()
        offset = task.offset or 1
        assert dv.blob == raw[offset : offset + task.size_in_bytes + 8]  # verbatim
    else:
        assert dv.blob == frame_blob(decode_inline_bitmap(task.path_or_inline_dv, task.size_in_bytes))


def test_fixture_tables_cover_all_storage_kinds() -> None:
    kinds = {task.storage_type for _, _, task in FIXTURE_DVS}
    assert kinds == {"u", "i"}
    assert len(FIXTURE_DVS) > 60


def test_known_positions() -> None:
    by_table = {(t, v): task for t, v, task in FIXTURE_DVS}
    small = convert_dv_batch([by_table[("table-with-dv-small", 1)]])[0]
    assert list(small.positions()) == [0, 9]
    inline = convert_dv_batch([by_table[("cdf-table-with-dv", 3)]])[0]
    assert list(inline.positions()) == [0, 1, 4, 5]


def test_malformed_inline_dv_of_cdf_table_v5_is_refused() -> None:
    [task] = [task for t, v, task in FIXTURE_DVS if (t, v) == MALFORMED]
    with pytest.raises(InvalidDeletionVectorError) as info:
        convert_dv_batch([task])
    message = str(info.value)
    assert "inline" in message
    assert "above 2^32 - 1" in message
    assert "past the data file's 10 rows" in message
    assert info.value.file == task.data_file


def test_batch_reads_shared_file_once_in_order(tmp_path: Path) -> None:
    # Two DVs in one file (offsets 1 and after the first), plus an inline one, in mixed order.
    first, second = encode_blob([1, 2, 3]), encode_blob([7])
    dv_uuid = uuid.uuid4()
    name = f"deletion_vector_{dv_uuid}.bin"
    (tmp_path / name).write_bytes(b"\x01" + first + second)
    path_or_inline = z85_encode(dv_uuid.bytes)

    def task(data_file: str, offset: int, blob: bytes, cardinality: int) -> DVTask:
        return DVTask(str(tmp_path), data_file, "u", path_or_inline, offset, len(blob) - 8, cardinality, 10)

    inline_bitmap = decode_blob(encode_blob([4]))
    inline_bytes = b"\xd1\xd39d" + inline_bitmap.serialize()
    inline = DVTask(str(tmp_path), "c", "i", z85_encode(inline_bytes), None, len(inline_bytes), 1, 10)
    tasks = [task("b", 1 + len(first), second, 1), inline, task("a", 1, first, 3)]
    results = convert_dv_batch(pickle.loads(pickle.dumps(tasks)))
    assert [r.data_file for r in results] == ["b", "c", "a"]
    assert [list(r.positions()) for r in results] == [[7], [4], [1, 2, 3]]
    assert results[0].blob == second and results[2].blob == first


@pytest.mark.parametrize("gap", [0, 100, MAX_READ_GAP + 1])
def test_dvs_of_one_file_apart_or_together_are_each_their_own_bytes(tmp_path: Path, gap: int) -> None:
    """DVs of a file are sliced out of one read of the span they cover, or read apart past MAX_READ_GAP
    (bytes no DV needs between them); either way each is its own verbatim frame, named as `names` says."""
    blobs = [encode_blob([1, 2, 3]), encode_blob(range(0, 5000, 7)), encode_blob([(1 << 32) + 9])]
    dv_uuid = uuid.uuid4()
    content = bytearray(b"\x01")
    offsets = []
    for blob in blobs:
        offsets.append(len(content))
        content += blob + b"\x00" * gap
    (tmp_path / f"deletion_vector_{dv_uuid}.bin").write_bytes(bytes(content))
    path_or_inline = z85_encode(dv_uuid.bytes)
    tasks = [
        DVTask(
            str(tmp_path),
            f"f{i}",
            "u",
            path_or_inline,
            offset,
            len(blob) - 8,
            len(decode_blob(blob)),
            1 << 40,
        )
        for i, (offset, blob) in reversed(list(enumerate(zip(offsets, blobs, strict=True))))
    ]
    results = convert_dv_batch(tasks, names={f"f{i}": f"file:/t/f{i}" for i in range(3)})
    assert [r.data_file for r in results] == ["file:/t/f2", "file:/t/f1", "file:/t/f0"]
    assert [r.blob for r in results] == blobs[::-1]
    assert [r.cardinality for r in results] == [1, 715, 3]


def test_p_storage_with_file_uri_and_plain_path(tmp_path: Path) -> None:
    blob = encode_blob([0, 2])
    dv_path = tmp_path / "some where" / "dv.bin"
    dv_path.parent.mkdir()
    dv_path.write_bytes(b"\x01" + blob)
    for location in (str(dv_path), dv_path.as_uri()):
        descriptor = DVTask("/unused", "d", "p", location, 1, len(blob) - 8, 2, 3)
        [dv] = convert_dv_batch([descriptor])
        assert dv.blob == blob


def test_dv_task_of_a_descriptor_object() -> None:
    class Descriptor:
        storage_type = "u"
        path_or_inline_dv = "vBn[lx{q8@P<9BNH/isA"
        offset = 1
        size_in_bytes = 36
        cardinality = 2

    root = str(DELTA_FIXTURES / "table-with-dv-small")
    task = DVTask.of(root, Descriptor(), data_file="x.parquet", num_records=10)
    # `of` passes the fields by position: each lands in the field of its name.
    constructed = DVTask(
        table_root=root,
        data_file="x.parquet",
        storage_type="u",
        path_or_inline_dv=Descriptor.path_or_inline_dv,
        offset=1,
        size_in_bytes=36,
        cardinality=2,
        num_records=10,
    )
    assert task == constructed
    assert pickle.loads(pickle.dumps(task)) == task
    [dv] = convert_dv_batch([task])
    assert list(dv.positions()) == [0, 9]


# --- corrupted input -----------------------------------------------------------------------------------


@pytest.fixture
def small_table(tmp_path: Path) -> tuple[Path, DVTask]:
    table = tmp_path / "t"
    shutil.copytree(DELTA_FIXTURES / "table-with-dv-small", table)
    for path in table.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    [task] = [task for t, v, task in FIXTURE_DVS if (t, v) == ("table-with-dv-small", 1)]
    return table, dataclasses.replace(task, table_root=str(table))


def test_flipped_crc_byte_is_refused(small_table: tuple[Path, DVTask]) -> None:
    table, task = small_table
    path = dv_file_of(table)
    crc_at = 1 + 4 + task.size_in_bytes
    patch_bytes(path, crc_at, bytes([path.read_bytes()[crc_at] ^ 0xFF]))
    with pytest.raises(InvalidDeletionVectorError, match="CRC-32 mismatch") as info:
        convert_dv_batch([task])
    assert str(path) in str(info.value)


def test_flipped_bitmap_byte_is_refused_by_crc(small_table: tuple[Path, DVTask]) -> None:
    table, task = small_table
    patch_bytes(dv_file_of(table), 20, b"\x7f")
    with pytest.raises(InvalidDeletionVectorError, match="CRC-32 mismatch"):
        convert_dv_batch([task])


def test_wrong_magic_is_refused(small_table: tuple[Path, DVTask]) -> None:
    table, task = small_table
    path = dv_file_of(table)
    data = path.read_bytes()
    bitmap = b"\x00\x00\x00\x00" + data[9 : 5 + task.size_in_bytes]
    path.write_bytes(data[:1] + frame_blob(bitmap) + data[5 + task.size_in_bytes + 4 :])
    with pytest.raises(InvalidDeletionVectorError, match="magic"):
        convert_dv_batch([task])


def test_truncated_file_is_refused(small_table: tuple[Path, DVTask]) -> None:
    table, task = small_table
    path = dv_file_of(table)
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(InvalidDeletionVectorError, match="truncated") as info:
        convert_dv_batch([task])
    assert str(path) in str(info.value)


def test_wrong_size_in_bytes_is_refused(small_table: tuple[Path, DVTask]) -> None:
    _, task = small_table
    smaller = dataclasses.replace(task, size_in_bytes=task.size_in_bytes - 4)
    with pytest.raises(InvalidDeletionVectorError, match="sizeInBytes is 32"):
        convert_dv_batch([smaller])
    larger = dataclasses.replace(task, size_in_bytes=task.size_in_bytes + 100)
    with pytest.raises(InvalidDeletionVectorError, match="needs bytes"):
        convert_dv_batch([larger])


def test_wrong_cardinality_and_positions_past_the_file_are_refused(small_table: tuple[Path, DVTask]) -> None:
    _, task = small_table
    with pytest.raises(InvalidDeletionVectorError, match="cardinality is 3"):
        convert_dv_batch([dataclasses.replace(task, cardinality=3)])
    with pytest.raises(
        InvalidDeletionVectorError, match="1 position\\(s\\) at or past the data file's 9 rows"
    ):
        convert_dv_batch([dataclasses.replace(task, num_records=9)])


def test_missing_file_is_refused(small_table: tuple[Path, DVTask]) -> None:
    table, task = small_table
    path = dv_file_of(table)
    path.unlink()
    with pytest.raises(InvalidDeletionVectorError, match="cannot be opened") as info:
        convert_dv_batch([task])
    assert str(path) in str(info.value)
    assert info.value.file == task.data_file


def test_bad_version_byte_is_refused(small_table: tuple[Path, DVTask]) -> None:
    table, task = small_table
    patch_bytes(dv_file_of(table), 0, b"\x02")
    with pytest.raises(InvalidDeletionVectorError, match="format version 02"):
        convert_dv_batch([task])


@pytest.mark.parametrize("storage_type", ["u", "p"])
def test_file_dv_without_offset_is_refused(copy_fixture, storage_type: str) -> None:
    """Delta Spark reads a file DV without `offset` from byte 0 (and fails), delta-kernel-rs from byte 1."""
    root = copy_fixture("table-with-dv-small")
    commit = root / "_delta_log" / f"{1:020d}.json"
    actions = [json.loads(line) for line in commit.read_text().splitlines()]
    [dv] = [a["add"]["deletionVector"] for a in actions if "add" in a]
    del dv["offset"]
    if storage_type == "p":
        dv.update(storageType="p", pathOrInlineDv=dv_file_of(root).as_uri())
    commit.write_text("".join(json.dumps(a) + "\n" for a in actions))
    (change,) = DeltaTable(root).changes(1, 1)
    [(_, after)] = change.dv_changed
    assert after.deletion_vector is not None and after.deletion_vector.offset is None
    task = DVTask.of(
        str(root), after.deletion_vector, data_file=after.location, num_records=after.num_records
    )
    with pytest.raises(InvalidDeletionVectorError, match="has no offset") as info:
        convert_dv_batch([task])
    assert info.value.file == after.location and str(dv_file_of(root)) in info.value.reason


def test_trailing_bytes_inside_a_valid_frame_are_refused() -> None:
    bitmap = b"\xd1\xd39d" + BitMap64([1]).serialize() + b"\x00\x00"
    with pytest.raises(InvalidDeletionVectorError, match="Roaring serialization is"):
        decode_blob(frame_blob(bitmap))


def test_length_field_disagreeing_with_blob_is_refused() -> None:
    blob = encode_blob([1, 2])
    bad = struct.pack(">I", len(blob) - 7) + blob[4:]
    with pytest.raises(InvalidDeletionVectorError, match="length field"):
        decode_blob(bad)
