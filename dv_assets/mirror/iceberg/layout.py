"""Where the mirror writes its own files inside the Iceberg table location, and how it knows them again.

The mirror owns only the delete files it wrote (names start with `dvmirror-`) and Iceberg's metadata.
Data files and Delta DVs stay where Delta put them and are never written or deleted by the mirror.
Pure: paths in, paths out; the writing goes through `FileIO`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

OWNED_PREFIX = "dvmirror-"


def comparable(location: str) -> str:
    """One spelling per file: Iceberg may name a local file `file:/x`, `file:///x` or `/x`, and Hadoop
    names S3 objects `s3a://` or `s3n://` where Iceberg says `s3://`."""
    if location.startswith("file://"):
        return location[len("file://") :]
    if location.startswith(("s3a://", "s3n://")):
        return "s3://" + location[len("s3a://") :]
    return location.removeprefix("file:")


@dataclass(frozen=True)
class MirrorLayout:
    table_location: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "table_location", self.table_location.rstrip("/"))

    @property
    def delete_dir(self) -> str:
        return f"{self.table_location}/data"

    @property
    def metadata_dir(self) -> str:
        return f"{self.table_location}/metadata"

    def puffin_path(self, delta_version: int) -> str:
        return f"{self.delete_dir}/{OWNED_PREFIX}v{delta_version:020d}-{uuid.uuid4()}.puffin"

    def position_deletes_path(self, delta_version: int) -> str:
        return f"{self.delete_dir}/{OWNED_PREFIX}v{delta_version:020d}-{uuid.uuid4()}-deletes.parquet"

    def is_owned(self, location: str) -> bool:
        """A delete file the mirror wrote: never a Delta data file or DV, never Iceberg metadata."""
        name = location.rsplit("/", 1)[-1]
        return comparable(location).startswith(comparable(self.delete_dir) + "/") and name.startswith(
            OWNED_PREFIX
        )

    def is_metadata(self, location: str) -> bool:
        """A file under the table's `metadata/` folder (manifests, manifest lists, metadata JSON)."""
        return comparable(location).startswith(comparable(self.metadata_dir) + "/")
