"""Where the mirror writes its own files inside the Iceberg table location, and how it knows them again.

The mirror owns only the delete files it wrote (names start with `dvmirror-`) and Iceberg's metadata.
Data files and Delta DVs stay where Delta put them and are never written or deleted by the mirror.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable

from dv_assets.dv.reader import filesystem_and_path

OWNED_PREFIX = "dvmirror-"


class MirrorLayout:
    def __init__(self, table_location: str) -> None:
        self.table_location = table_location.rstrip("/")

    @property
    def delete_dir(self) -> str:
        return f"{self.table_location}/data"

    def puffin_path(self, delta_version: int) -> str:
        return f"{self.delete_dir}/{OWNED_PREFIX}v{delta_version:020d}-{uuid.uuid4()}.puffin"

    def position_deletes_path(self, delta_version: int) -> str:
        return f"{self.delete_dir}/{OWNED_PREFIX}v{delta_version:020d}-{uuid.uuid4()}-deletes.parquet"

    def is_owned(self, location: str) -> bool:
        name = location.rsplit("/", 1)[-1]
        return location.startswith(self.delete_dir + "/") and name.startswith(OWNED_PREFIX)

    def write(self, location: str, content: bytes) -> None:
        filesystem, path = filesystem_and_path(location)
        filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
        with filesystem.open_output_stream(path) as out:
            out.write(content)

    def ensure_delete_dir(self) -> None:
        filesystem, path = filesystem_and_path(self.delete_dir)
        filesystem.create_dir(path, recursive=True)

    def size_of(self, location: str) -> int:
        filesystem, path = filesystem_and_path(location)
        return filesystem.get_file_info(path).size or 0

    def delete_quietly(self, locations: Iterable[str]) -> None:
        """Best-effort removal of files an unfinished commit wrote; never touches files it does not own."""
        for location in locations:
            if not self.is_owned(location):
                continue
            filesystem, path = filesystem_and_path(location)
            with contextlib.suppress(OSError):
                filesystem.delete_file(path)
