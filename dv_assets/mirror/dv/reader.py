"""Reading Delta deletion vectors (`u`, `i`, `p`) as verified `deletion-vector-v1` blobs.

The I/O edge of `dv/`: files are opened through `FileIO`, so a table root may be a plain path or a URI.
For file-based DVs the blob is `dv_file[offset : offset + sizeInBytes + 8]` verbatim: the Delta frame
is the Iceberg frame, so nothing is re-encoded. Inline DVs get the frame added.

The record: a `DVTask` says which DV to read and what to expect of it (picklable plain values); a
`DVBlob` is that DV read and verified, the one form the Puffin and position-delete writers take. Both are
made once per DV (a version may hold 100,000): slotted dataclasses, read-only by convention, as every hot
value of the mirror is (their plain constructors are the fast path; `benchmarks/micro.py` holds the gain).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from pyroaring import BitMap64

from dv_assets.mirror.dv.codec import (
    FRAME_OVERHEAD,
    check_positions,
    decode_blob,
    decode_inline_bitmap,
    dv_file_name,
    frame_blob,
    parse_bitmap,
    verified_bitmap,
)
from dv_assets.mirror.errors import InvalidDeletionVectorError, MirrorInputError, StorageError
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.locations import resolve_location

DV_FILE_FORMAT_VERSION = 1
# Where the first DV of a DV file starts, right after the version byte. Only a sort key for DVs without an
# offset (inline ones): a file-based DV without one is refused (`_offset`).
FIRST_DV_OFFSET = 1
# DVs of one file are read as one span unless bytes no DV needs lie between them: past this gap a second
# read is cheaper than reading the gap (an object store's request costs about what 1 MiB takes to fetch).
MAX_READ_GAP = 1 << 20


class DeletionVectorDescriptorLike(Protocol):
    """The fields of `dv_assets.mirror.delta.actions.DeletionVectorDescriptor` this module reads."""

    @property
    def storage_type(self) -> str: ...
    @property
    def path_or_inline_dv(self) -> str: ...
    @property
    def offset(self) -> int | None: ...
    @property
    def size_in_bytes(self) -> int: ...
    @property
    def cardinality(self) -> int: ...


@dataclass(slots=True)
class DVTask:
    """One DV to read and verify: where it is and what to expect of it, as plain (picklable) values."""

    table_root: str
    data_file: str  # the data file's location (what a refusal names)
    storage_type: str
    path_or_inline_dv: str
    offset: int | None
    size_in_bytes: int
    cardinality: int
    num_records: int | None  # rows in the data file, when its stats say so

    @classmethod
    def of(
        cls, table_root: str, dv: DeletionVectorDescriptorLike, *, data_file: str, num_records: int | None
    ) -> DVTask:
        """The task of reading `dv`, a deletion vector of `data_file`."""
        return cls(
            table_root,
            data_file,
            dv.storage_type,
            dv.path_or_inline_dv,
            dv.offset,
            dv.size_in_bytes,
            dv.cardinality,
            num_records,
        )


@dataclass(slots=True)
class DVBlob:
    """A DV whose length, magic, CRC-32, cardinality and position range were checked."""

    data_file: str  # the data file it deletes from (named as in Iceberg when written: `referenced-data-file`)
    blob: bytes  # the exact deletion-vector-v1 blob (length | magic | vector | crc)
    cardinality: int
    source: str = "inline"  # the DV file location, or "inline"

    @property
    def referenced_data_file(self) -> str:
        return self.data_file

    def positions(self) -> BitMap64:
        """Decoded on demand: callers that only copy the blob never hold the positions."""
        return decode_blob(self.blob)


@functools.lru_cache(maxsize=4096)
def resolve_dv_location(table_root: str, storage_type: str, path_or_inline_dv: str) -> str | None:
    """Where a DV lives: a path or URI for `u` / `p`, None for inline (`i`).

    Pure, and cached: the DVs of one version mostly share a few DV files (a Z85 decode each otherwise).
    """
    if storage_type == "i":
        return None
    if storage_type == "u":
        return resolve_location(table_root, dv_file_name(path_or_inline_dv))
    if storage_type == "p":
        return resolve_location(table_root, path_or_inline_dv)
    raise InvalidDeletionVectorError(f"unknown deletion vector storageType {storage_type!r}")


def convert_dv_batch(
    tasks: Iterable[DVTask], io: FileIO | None = None, names: Mapping[str, str] | None = None
) -> list[DVBlob]:
    """Verified blobs for a batch of DVs, in the order of `tasks`; each names its data file as `names`
    maps it (default: the task's `data_file`, which refusals name in any case).

    The DVs of one file are read with one ranged read of the span they cover (ranges further apart than
    `MAX_READ_GAP` are read separately), then each is verified as a slice of it: per DV only C work (CRC-32,
    the Roaring parse, the checks in pyroaring); only one DV's positions are decoded at a time.
    """
    task_list = list(tasks)
    io = io or FileIO()
    results: list[DVBlob | None] = [None] * len(task_list)
    by_file: dict[str, list[tuple[int, int]]] = defaultdict(list)  # DV file -> (offset, task index)
    for index, task in enumerate(task_list):
        try:
            location = resolve_dv_location(task.table_root, task.storage_type, task.path_or_inline_dv)
        except MirrorInputError as exc:
            raise InvalidDeletionVectorError(exc.reason, file=task.data_file) from exc
        if location is None:
            results[index] = _inline_dv(task, names)
        else:
            by_file[location].append((_offset(task, location), index))
    for location, placed in by_file.items():
        placed.sort()
        _verify_file(io, location, placed, task_list, names, results)
    return [result for result in results if result is not None]


def _verify_file(
    io: FileIO,
    location: str,
    placed: list[tuple[int, int]],
    tasks: list[DVTask],
    names: Mapping[str, str] | None,
    results: list[DVBlob | None],
) -> None:
    """Read and verify the DVs of one DV file, `placed` as (offset, task index) in offset order, into
    `results` at their tasks' indexes. The loop runs once per DV of a version: plain locals and tuples,
    one call of C checks (`verified_bitmap`) and one DVBlob per DV."""
    for span, read_from, span_dvs in _read_spans(io, location, placed, tasks):
        for offset, index in span_dvs:
            task = tasks[index]
            at = offset - read_from
            size = task.size_in_bytes
            blob = span[at : at + size + FRAME_OVERHEAD]
            try:
                verified_bitmap(blob, size, task.cardinality, task.num_records)
            except InvalidDeletionVectorError as exc:
                raise InvalidDeletionVectorError(
                    f"deletion vector in {location} at offset {offset}: {exc.reason}", file=task.data_file
                ) from exc
            # Verified: the bitmap holds exactly the descriptor's cardinality.
            name = task.data_file if names is None else names[task.data_file]
            results[index] = DVBlob(name, blob, task.cardinality, location)


def _offset(task: DVTask, location: str) -> int:
    """Where a file-based DV starts. A `u` / `p` descriptor must say: readers disagree on an absent offset,
    Delta Spark reading from byte 0 (the version byte, so its size check fails and it refuses the table),
    delta-kernel-rs from byte 1. Reading either would be a guess."""
    if task.offset is None:
        raise InvalidDeletionVectorError(
            f"deletion vector in {location} (storageType {task.storage_type!r}) has no offset: Delta Spark "
            "would read it from byte 0 and refuse it, delta-kernel-rs from byte 1; refused",
            file=task.data_file,
        )
    return task.offset


def _inline_dv(task: DVTask, names: Mapping[str, str] | None) -> DVBlob:
    try:
        bitmap_bytes = decode_inline_bitmap(
            task.path_or_inline_dv, task.size_in_bytes, num_records=task.num_records
        )
        bitmap = parse_bitmap(bitmap_bytes)
        check_positions(bitmap, expected_cardinality=task.cardinality, num_records=task.num_records)
    except InvalidDeletionVectorError as exc:
        raise InvalidDeletionVectorError(
            f"inline deletion vector: {exc.reason}", file=task.data_file
        ) from exc
    name = task.data_file if names is None else names[task.data_file]
    return DVBlob(name, frame_blob(bitmap_bytes), len(bitmap))


def _read_spans(
    io: FileIO, location: str, placed: list[tuple[int, int]], tasks: list[DVTask]
) -> Iterator[tuple[bytes, int, list[tuple[int, int]]]]:
    """(bytes, the file offset they start at, the (offset, task index) of the DVs in them) for each span
    of DVs (`_spans`) of one file, `placed` in offset order, after checking every DV lies inside the
    file and the file's format version byte: one read per span, each DV a slice of it."""
    first = tasks[placed[0][1]]
    try:
        handle = io.open_input(location)
    except StorageError:
        raise  # the storage did not answer (or denied access): no verdict on the DV file
    except OSError as exc:
        raise InvalidDeletionVectorError(
            f"deletion vector file {location} cannot be opened: {exc}", file=first.data_file
        ) from exc
    with handle:
        file_size = handle.size()
        for offset, index in placed:
            task = tasks[index]
            end = offset + task.size_in_bytes + FRAME_OVERHEAD
            if offset < 1 or task.size_in_bytes < 0 or end > file_size:
                raise InvalidDeletionVectorError(
                    f"deletion vector file {location} is {file_size} bytes; the DV at offset {offset} with "
                    f"sizeInBytes {task.size_in_bytes} needs bytes {offset}..{end} (truncated "
                    "file or wrong offset/sizeInBytes)",
                    file=task.data_file,
                )
        checked_version = False
        for start, end, span_dvs in _spans(placed, tasks):
            # The version byte comes with the first span when that span starts right after it.
            read_from = 0 if not checked_version and start == FIRST_DV_OFFSET else start
            span = handle.read_at(end - read_from, read_from)
            if not checked_version:
                version = span[:1] if read_from == 0 else handle.read_at(1, 0)
                if version != bytes([DV_FILE_FORMAT_VERSION]):
                    raise InvalidDeletionVectorError(
                        f"deletion vector file {location} starts with format version "
                        f"{version.hex() or 'nothing'}, expected {DV_FILE_FORMAT_VERSION:02x}",
                        file=first.data_file,
                    )
                checked_version = True
            yield span, read_from, span_dvs


def _spans(
    placed: list[tuple[int, int]], tasks: list[DVTask]
) -> Iterator[tuple[int, int, list[tuple[int, int]]]]:
    """(start, end, DVs) of each span of DVs to read at once, `placed` as (offset, task index) in offset
    order: split where the next DV starts more than MAX_READ_GAP bytes after the span's end (bytes no DV
    needs)."""
    span_start = 0
    start = end = placed[0][0] if placed else 0
    for position, (offset, index) in enumerate(placed):
        if offset - end > MAX_READ_GAP:
            yield start, end, placed[span_start:position]
            span_start, start, end = position, offset, offset
        dv_end = offset + tasks[index].size_in_bytes + FRAME_OVERHEAD
        if dv_end > end:
            end = dv_end
    if placed:
        yield start, end, placed[span_start:]
