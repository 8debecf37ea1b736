"""Facts about a Delta data file that may need its storage: its row count and that it is really there.

The log usually knows both (stats' numRecords, add.size); storage is asked only to confirm what the
mirror is about to reference, one metadata call per version for the files it adds.

`find_readable_start`: where a new mirror can start, the first version whose every live data file
and DV file is still there (VACUUM removes the files only versions older than its retention need). It
asks storage about a table's whole state once, by listing the table's folder on an object store (a
request per 1,000 keys, not one per file), and its answer stands in for the presence check of the
version the new mirror starts at: a first sync looks at each file once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dv_assets.mirror.delta.actions import AddFile
from dv_assets.mirror.delta.paths import PathPolicy
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.dv.reader import resolve_dv_location
from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.io import FileIO, FolderListing

# Files stat'ed per call: one call per file system either way, without a million answers held at once
# (a first version's whole state).
STAT_CHUNK = 10_000


def record_count(add: AddFile, io: FileIO | None = None) -> int:
    """numRecords from the file's stats, else the Parquet footer (one small read, only for such files)."""
    if add.num_records is not None:
        return add.num_records
    return (io or FileIO()).parquet_row_count(add.location)


def check_data_files_present(
    adds: Iterable[AddFile],
    io: FileIO | None = None,
    *,
    walked: ReadableStart | None = None,
    listing: FolderListing | None = None,
) -> None:
    """Refuse to reference a data file that is missing (DataFileMissingError) or not the size the log
    says.

    A manifest entry pointing at nothing would commit cleanly and fail every reader later. `walked`: the
    walk that found these files' version readable (`find_readable_start`, in the same run), which
    stat'ed every file live at it: its answer is used, storage is not asked again. `listing`: the table
    folder's listing answers the files inside it (`FileIO.file_sizes`).
    """
    files = list(adds)
    if walked is not None:
        _check_present(files, [walked.wrong_sizes.get(add.location, add.size) for add in files])
        return
    io = io or FileIO()
    for first in range(0, len(files), STAT_CHUNK):
        chunk = files[first : first + STAT_CHUNK]
        _check_present(chunk, io.file_sizes([add.location for add in chunk], listing=listing))


class DataFileMissingError(MirrorInputError):
    """A data file the log names live is not in storage (a VACUUM removed it, or it was never written)."""


def _check_present(files: list[AddFile], sizes: list[int | None]) -> None:
    for add, size in zip(files, sizes, strict=True):
        if size is None:
            raise DataFileMissingError("the data file the log adds does not exist", file=add.location)
        if size != add.size:
            raise MirrorInputError(
                f"the data file is {size} bytes, the log's add.size says {add.size}", file=add.location
            )


@dataclass(frozen=True)
class ReadableStart:
    """Where a new mirror of versions [checked from, to] can start: `version`, the first of them whose
    every live data file and DV file is present (None: none is); `unreadable`, the newest version before
    it (or, when none is readable, the last one checked) found unreadable, with `missing`, one file of it
    that is gone (None, None: the first version checked was readable)."""

    version: int | None
    unreadable: int | None = None
    missing: str | None = None
    # The data files live at `version` found at another size than the log says: location → size found.
    # Every file live at `version` was stat'ed by the walk, so this is the whole presence check of it.
    wrong_sizes: Mapping[str, int] = field(default_factory=dict, compare=False)


def find_readable_start(
    delta: DeltaTable, start: int, end: int, io: FileIO, paths: PathPolicy
) -> ReadableStart:
    """The first version in [start, end] Delta can read: every data file live at it, and every DV file
    those carry, present. Walks forward from `start` over the log (no stats text), statting the files
    live at `start` once, then at each later version only the files it makes live or gives another DV:
    a version is readable when no file of it is gone, and a gone file stops counting once a version
    removes it (or replaces its DV). A file present at another size than the log says counts as present:
    the sync refuses it by name when it mirrors that version. Every location is checked against `paths`
    before it is statted (MirrorInputError naming the version: outside the allowed roots)."""
    missing: dict[str, str] = {}  # live data file → a file it needs that is gone (itself, or its DV file)
    wrong_sizes: dict[str, int] = {}  # live data file → its size in storage, where not the log's
    last: tuple[int | None, str | None] = (None, None)
    for version, files, gone in delta.live_files(start, end):
        for location in gone:
            missing.pop(location, None)
            wrong_sizes.pop(location, None)
        for add in files:
            missing.pop(add.location, None)
            wrong_sizes.pop(add.location, None)
        try:
            # The first version's files are the table's whole state: listed rather than stat'ed one by one.
            listing = io.listing(delta.table_root) if version == start else None
            missing.update(_gone_files(files, delta.table_root, io, paths, wrong_sizes, listing))
        except MirrorInputError as err:
            raise err.at(table=delta.table_root, version=version) from None
        if not missing:
            return ReadableStart(version, *last, wrong_sizes=wrong_sizes)
        last = (version, next(iter(missing.values())))
    return ReadableStart(None, *last)


def _gone_files(
    files: Sequence[AddFile],
    table_root: str,
    io: FileIO,
    paths: PathPolicy,
    wrong_sizes: dict[str, int],
    listing: FolderListing | None,
) -> dict[str, str]:
    """Of `files`, those whose data file or DV file does not exist: data file → the file that is gone.
    The data files present at another size than the log's go into `wrong_sizes`. With `listing`, the
    files are answered by that listing where it holds them (`FileIO.file_sizes`), else stat'ed."""
    gone: dict[str, str] = {}
    dv_files: dict[str, list[str]] = {}  # DV file → the data files whose DV it holds
    for add in files:
        paths.check(add.location, what="data file")
        dv = add.deletion_vector
        if dv is not None:
            location = resolve_dv_location(table_root, dv.storage_type, dv.path_or_inline_dv)
            if location is not None:
                dv_files.setdefault(location, []).append(add.location)
    for location in dv_files:
        paths.check(location, what="deletion vector file")
    locations = [*(add.location for add in files), *dv_files]
    sizes: list[int | None] = []
    for first in range(0, len(locations), STAT_CHUNK):
        sizes += io.file_sizes(locations[first : first + STAT_CHUNK], listing=listing)
    for add, size in zip(files, sizes, strict=False):
        if size is None:
            gone[add.location] = add.location
        elif size != add.size:
            wrong_sizes[add.location] = size
    for location, size in zip(dv_files, sizes[len(files) :], strict=True):
        if size is None:
            gone.update(dict.fromkeys((f for f in dv_files[location] if f not in gone), location))
    return gone
