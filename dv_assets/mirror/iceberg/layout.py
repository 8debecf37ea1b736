"""Where the mirror writes its own files inside the Iceberg table location, and how it knows them again.

The mirror owns only the delete files it wrote (names start with `dvmirror-`) and Iceberg's metadata.
Data files and Delta DVs stay where Delta put them and are never written or deleted by the mirror.
Paths in, paths out (a new delete file's name takes a random UUID); the writing goes through `FileIO`.
Locations are written and compared as `locations.py` says.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from dv_assets.mirror.locations import comparable, iceberg_location

OWNED_PREFIX = "dvmirror-"


@dataclass(frozen=True)
class MirrorLayout:
    """The mirror's own files under the table location, named by URI (`iceberg_location`) whichever
    form the location was recorded in."""

    table_location: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "table_location", iceberg_location(self.table_location.rstrip("/")))

    @property
    def delete_dir(self) -> str:
        return f"{self.table_location}/data"

    @property
    def checkpoint_index_dir(self) -> str:
        """Where the mirror keeps its indexes of Delta checkpoints (`delta/checkpoint_index.py`): its own
        folder, outside `data/` and `metadata/`, so that neither the mirror's maintenance nor Iceberg's
        sees it; losing it costs the next run a full read of the checkpoint, nothing else."""
        return f"{self.table_location}/{OWNED_PREFIX}delta-index"

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
