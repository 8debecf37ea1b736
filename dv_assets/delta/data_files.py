"""Facts about a Delta data file that may need its storage: its row count and that it is really there.

The log usually knows both (stats' numRecords, add.size); storage is asked only to confirm what the
mirror is about to reference, one metadata call per file the version adds.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from dv_assets.delta.actions import AddFile
from dv_assets.dv.reader import filesystem_and_path
from dv_assets.errors import MirrorInputError


def record_count(add: AddFile) -> int:
    """numRecords from the file's stats, else the Parquet footer (one small read, only for such files)."""
    if add.num_records is not None:
        return add.num_records
    filesystem, path = filesystem_and_path(add.location)
    with filesystem.open_input_file(path) as handle:
        return pq.ParquetFile(handle).metadata.num_rows


def check_data_files_present(adds: Iterable[AddFile]) -> None:
    """Refuse to reference a data file that is missing or not the size the log says.

    A manifest entry pointing at nothing would commit cleanly and fail every reader later.
    """
    for add in adds:
        filesystem, path = filesystem_and_path(add.location)
        info = filesystem.get_file_info(path)
        if info.type != pafs.FileType.File:
            raise MirrorInputError("the data file the log adds does not exist", file=add.location)
        if info.size != add.size:
            raise MirrorInputError(
                f"the data file is {info.size} bytes, the log says {add.size}", file=add.location
            )
