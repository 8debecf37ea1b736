"""Deletion-vector bytes: Z85, the 64-bit Roaring bitmap, and the `deletion-vector-v1` blob frame.

Pure functions over bytes. Delta's on-disk DV (`dataSize | bitmap | crc`, big-endian frame) and Iceberg's
`deletion-vector-v1` Puffin blob are the same bytes, so a Delta DV is verified here and then copied as is.
Layouts: Delta PROTOCOL.md ("Deletion Vector Format", "Deletion Vector Descriptor Schema"), Iceberg
puffin-spec.md (`deletion-vector-v1`); summarised in the shared `../shared/docs/FORMATS.md`, beside
the repository root (not a file of this repository).
"""

from __future__ import annotations

import struct
import uuid
import zlib
from itertools import islice

from pyroaring import BitMap64

from dv_assets.mirror.errors import InvalidDeletionVectorError

# ZeroMQ Z85 alphabet (rfc.zeromq.org/spec/32), as Delta's Base85Codec uses it.
Z85_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {char: value for value, char in enumerate(Z85_ALPHABET)}
UUID_Z85_LENGTH = 20  # 16 bytes of UUID -> 4 groups of 5 characters

BITMAP_MAGIC = 1681511377
BITMAP_MAGIC_BYTES = struct.pack("<I", BITMAP_MAGIC)  # D1 D3 39 64
FRAME_OVERHEAD = 8  # BE32 length before the bitmap + BE32 CRC-32 after it
# Iceberg (and Delta) keep the high 32 bits of a position as a signed Java int: keys stay below 2^31.
MAX_POSITION = (1 << 63) - 1
_FRAME_HEAD = struct.Struct(">I4s")  # a blob's length field and the bitmap's magic bytes
_CRC = struct.Struct(">I")
_NO_ROWS_BOUND = MAX_POSITION + 1  # the first position a DV may not hold when the row count is unknown


class Z85Error(ValueError):
    """Text that is not valid Z85."""


# --- Z85 -------------------------------------------------------------------------------------------------


def z85_decode(text: str) -> bytes:
    """Decode aligned Z85 (5 characters -> 4 bytes, big-endian).

    Stricter than Delta's decoder: a group above 2^32 - 1 is an error here, where Delta Spark silently
    keeps the low 32 bits. Such text was never produced by an encoder, so guessing is not an option.
    """
    if len(text) % 5:
        raise Z85Error(f"Z85 text of {len(text)} characters is not a multiple of 5")
    out = bytearray()
    for start in range(0, len(text), 5):
        group = text[start : start + 5]
        value = 0
        for char in group:
            digit = _Z85_VALUE.get(char)
            if digit is None:
                raise Z85Error(
                    f"character {char!r} at {start + group.index(char)} is not in the Z85 alphabet"
                )
            value = value * 85 + digit
        if value > 0xFFFFFFFF:
            raise Z85Error(f"Z85 group {start // 5} ({group!r}) decodes to {value}, above 2^32 - 1")
        out += value.to_bytes(4, "big")
    return bytes(out)


def z85_decode_wrapping(text: str) -> bytes:
    """Delta Spark's reading of Z85: like `z85_decode`, but an overflowing group keeps its low 32 bits.

    Used only to explain a refusal (what Delta Spark would have read), never to convert.
    """
    out = bytearray()
    for start in range(0, len(text) - len(text) % 5, 5):
        value = 0
        for char in text[start : start + 5]:
            value = value * 85 + _Z85_VALUE.get(char, 0)
        out += (value & 0xFFFFFFFF).to_bytes(4, "big")
    return bytes(out)


# --- descriptors ---------------------------------------------------------------------------------------


def decode_uuid_path(path_or_inline_dv: str) -> tuple[str, uuid.UUID]:
    """`u` descriptor: `<random prefix><20 chars Z85 of the UUID>` -> (prefix, UUID)."""
    if len(path_or_inline_dv) < UUID_Z85_LENGTH:
        raise InvalidDeletionVectorError(
            f"storageType u pathOrInlineDv {path_or_inline_dv!r} is shorter than the "
            f"{UUID_Z85_LENGTH} characters of an encoded UUID"
        )
    prefix = path_or_inline_dv[:-UUID_Z85_LENGTH]
    try:
        raw = z85_decode(path_or_inline_dv[-UUID_Z85_LENGTH:])
    except Z85Error as exc:
        raise InvalidDeletionVectorError(
            f"storageType u pathOrInlineDv {path_or_inline_dv!r}: {exc}"
        ) from exc
    return prefix, uuid.UUID(bytes=raw)


def dv_file_name(path_or_inline_dv: str) -> str:
    """The DV file of a `u` descriptor, relative to the table root (no folder when the prefix is empty)."""
    prefix, dv_uuid = decode_uuid_path(path_or_inline_dv)
    name = f"deletion_vector_{dv_uuid}.bin"
    return f"{prefix}/{name}" if prefix else name


def decode_inline_bitmap(encoded: str, size_in_bytes: int, *, num_records: int | None = None) -> bytes:
    """`i` descriptor: the serialized bitmap (magic included), exactly `size_in_bytes` long.

    Delta Z85-encodes the bitmap zero-padded to a multiple of 4, so the padding is dropped here.
    """
    expected_chars = -(-size_in_bytes // 4) * 5
    if len(encoded) != expected_chars:
        raise InvalidDeletionVectorError(
            f"inline DV of sizeInBytes {size_in_bytes} should be {expected_chars} Z85 characters, "
            f"got {len(encoded)}"
        )
    try:
        decoded = z85_decode(encoded)
    except Z85Error as exc:
        raise InvalidDeletionVectorError(
            f"inline DV is not valid Z85: {exc}{_wrapped_reading(encoded, size_in_bytes, num_records)}"
        ) from exc
    if any(decoded[size_in_bytes:]):
        raise InvalidDeletionVectorError("inline DV has non-zero bytes in its Z85 padding")
    return decoded[:size_in_bytes]


def _wrapped_reading(encoded: str, size_in_bytes: int, num_records: int | None) -> str:
    """What Delta Spark's 32-bit-wrapping decoder would make of invalid Z85, for the error message."""
    try:
        bitmap = parse_bitmap(z85_decode_wrapping(encoded)[:size_in_bytes])
    except InvalidDeletionVectorError as exc:
        return f"; read with Delta Spark's 32-bit wrap-around it is not a valid bitmap either ({exc.reason})"
    shown = ", ".join(str(p) for p in islice(bitmap, 10)) + (", ..." if len(bitmap) > 10 else "")
    reading = f"; read with Delta Spark's 32-bit wrap-around it would delete positions [{shown}]"
    if num_records is not None and bitmap and bitmap.max() >= num_records:
        reading += f", past the data file's {num_records} rows"
    return reading


# --- the bitmap ----------------------------------------------------------------------------------------


def parse_bitmap(bitmap_bytes: bytes) -> BitMap64:
    """Magic (u32 LE 1681511377) + portable 64-bit Roaring serialization -> BitMap64, checked."""
    if len(bitmap_bytes) < 4 + 8:
        raise InvalidDeletionVectorError(
            f"bitmap of {len(bitmap_bytes)} bytes is too short for magic and header"
        )
    magic = struct.unpack_from("<I", bitmap_bytes)[0]
    if magic != BITMAP_MAGIC:
        raise InvalidDeletionVectorError(f"bitmap magic is {magic} (0x{magic:08x}), expected {BITMAP_MAGIC}")
    vector = bitmap_bytes[4:]
    try:
        bitmap = BitMap64.deserialize(vector)
    except ValueError as exc:
        raise InvalidDeletionVectorError(
            f"bitmap is not a valid portable 64-bit Roaring bitmap: {exc}"
        ) from exc
    # pyroaring keeps container types when deserializing, so re-serializing gives the same length; a
    # difference means bytes the reader ignored (trailing garbage inside a CRC-valid frame).
    consumed = len(bitmap.serialize())
    if consumed != len(vector):
        raise InvalidDeletionVectorError(
            f"bitmap holds {len(vector)} bytes after the magic but its Roaring serialization is {consumed}"
        )
    if bitmap and bitmap.max() > MAX_POSITION:
        raise InvalidDeletionVectorError(f"bitmap holds position {bitmap.max()}, above 2^63 - 1")
    return bitmap


# --- the blob frame ------------------------------------------------------------------------------------


def frame_blob(bitmap_bytes: bytes) -> bytes:
    """BE32 length + bitmap + BE32 CRC-32 of the bitmap: a `deletion-vector-v1` blob."""
    return (
        struct.pack(">I", len(bitmap_bytes))
        + bitmap_bytes
        + struct.pack(">I", zlib.crc32(bitmap_bytes) & 0xFFFFFFFF)
    )


def unframe_blob(blob: bytes) -> bytes:
    """The bitmap bytes of a blob, after checking its length field and CRC-32."""
    if len(blob) < FRAME_OVERHEAD:
        raise InvalidDeletionVectorError(f"blob of {len(blob)} bytes is shorter than its 8-byte frame")
    length = struct.unpack_from(">I", blob)[0]
    if length != len(blob) - FRAME_OVERHEAD:
        raise InvalidDeletionVectorError(
            f"length field says {length} bytes but the blob holds {len(blob) - FRAME_OVERHEAD} "
            "between its frame"
        )
    bitmap_bytes = blob[4 : 4 + length]
    stored_crc = struct.unpack_from(">I", blob, 4 + length)[0]
    actual_crc = zlib.crc32(bitmap_bytes) & 0xFFFFFFFF
    if stored_crc != actual_crc:
        raise InvalidDeletionVectorError(
            f"CRC-32 mismatch: stored 0x{stored_crc:08x}, computed 0x{actual_crc:08x} over {length} bytes"
        )
    return bitmap_bytes


def decode_blob(blob: bytes) -> BitMap64:
    """A `deletion-vector-v1` blob -> its positions (frame, CRC and magic checked)."""
    return parse_bitmap(unframe_blob(blob))


def verified_bitmap(
    blob: bytes, expected_size: int | None, expected_cardinality: int | None, num_records: int | None
) -> BitMap64:
    """Check everything a blob claims before it is copied: frame length against the descriptor's
    sizeInBytes, magic, CRC-32, cardinality, and that every position addresses a row of the data file;
    the positions, or InvalidDeletionVectorError with the precise reason. A valid blob
    costs only C work (one header unpack, CRC-32 in zlib, the Roaring parse, re-serialization for the
    length and the cardinality and maximum in pyroaring); any mismatch is explained by `_refuse_blob`,
    which runs the checks one by one for the exact reason."""
    view = memoryview(blob)
    size = len(view) - FRAME_OVERHEAD
    if size >= len(BITMAP_MAGIC_BYTES) + 8:
        length, magic = _FRAME_HEAD.unpack_from(view)
        (stored_crc,) = _CRC.unpack_from(view, 4 + size)
        if (
            length == size
            and (expected_size is None or length == expected_size)
            and magic == BITMAP_MAGIC_BYTES
            and zlib.crc32(view[4 : 4 + size]) == stored_crc
        ):
            vector = view[8 : 4 + size]
            try:
                bitmap = BitMap64.deserialize(vector)
            except ValueError:
                bitmap = None
            if (
                bitmap is not None
                and len(bitmap.serialize()) == len(vector)
                and (expected_cardinality is None or len(bitmap) == expected_cardinality)
                and (not bitmap or bitmap.max() < (_NO_ROWS_BOUND if num_records is None else num_records))
            ):
                return bitmap
    _refuse_blob(blob, expected_size, expected_cardinality, num_records)
    raise AssertionError("unreachable: _refuse_blob raises")  # pragma: no cover


def _refuse_blob(
    blob: bytes, expected_size: int | None, expected_cardinality: int | None, num_records: int | None
) -> None:
    """The reason a blob failed `verified_bitmap`, found by running each check in order (raises)."""
    if expected_size is not None and len(blob) >= 4:
        length = struct.unpack_from(">I", blob)[0]
        if length != expected_size:
            raise InvalidDeletionVectorError(
                f"DV length field is {length} but the descriptor's sizeInBytes is {expected_size}"
            )
    check_positions(decode_blob(blob), expected_cardinality=expected_cardinality, num_records=num_records)


def check_positions(bitmap: BitMap64, *, expected_cardinality: int | None, num_records: int | None) -> None:
    """Cardinality as declared, and no position at or past the data file's row count (when known)."""
    if num_records is not None and num_records < 0:  # parsing refuses it first; never a negative bound
        raise InvalidDeletionVectorError(f"the data file's numRecords is {num_records}, below 0")
    cardinality = len(bitmap)
    if expected_cardinality is not None and cardinality != expected_cardinality:
        raise InvalidDeletionVectorError(
            f"DV holds {cardinality} positions but the descriptor's cardinality is {expected_cardinality}"
        )
    if num_records is not None and bitmap and bitmap.max() >= num_records:
        past = bitmap.range_cardinality(num_records, bitmap.max() + 1)
        raise InvalidDeletionVectorError(
            f"DV deletes {past} position(s) at or past the data file's {num_records} rows "
            f"(largest {bitmap.max()})"
        )
