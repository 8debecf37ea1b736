"""Facts about a Delta data file that may need its storage: its row count and that it is really there.

The log usually knows both (stats' numRecords, add.size); storage is asked only to confirm what the
mirror is about to reference, one metadata call per version for the files it adds.
"""

from __future__ import annotations

from collections.abc import Iterable

from dv_assets.mirror.delta.actions import AddFile
from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.io import FileIO

# Files stat'ed per call: one call per file system either way, without a million answers held at once
# (a first version's whole state).
STAT_CHUNK = 10_000


def record_count(add: AddFile, io: FileIO | None = None) -> int:
    """numRecords from the file's stats, else the Parquet footer (one small read, only for such files)."""
    if add.num_records is not None:
        return add.num_records
    return (io or FileIO()).parquet_row_count(add.location)


def check_data_files_present(adds: Iterable[AddFile], io: FileIO | None = None) -> None:
    """Refuse to reference a data file that is missing or not the size the log says.

    A manifest entry pointing at nothing would commit cleanly and fail every reader later.
    """
    io = io or FileIO()
    files = list(adds)
    for first in range(0, len(files), STAT_CHUNK):
        chunk = files[first : first + STAT_CHUNK]
        _check_present(chunk, io.file_sizes([add.location for add in chunk]))


def _check_present(files: list[AddFile], sizes: list[int | None]) -> None:
    for add, size in zip(files, sizes, strict=True):
        if size is None:
            raise MirrorInputError("the data file the log adds does not exist", file=add.location)
        if size != add.size:
            raise MirrorInputError(
                f"the data file is {size} bytes, the log's add.size says {add.size}", file=add.location
            )
