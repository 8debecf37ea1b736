"""Where the mirror writes its own files inside the Iceberg table location, and how it knows them again.

The mirror owns only the delete files it wrote (names start with `dvmirror-`) and Iceberg's metadata.
Data files and Delta DVs stay where Delta put them and are never written or deleted by the mirror.
Pure: paths in, paths out; the writing goes through `FileIO`.

Every location the mirror writes into Iceberg metadata is a full URI (`iceberg_location`): the spec's
`file_path` is one, and iceberg-rust refuses a bare path. Locally that is `file:/…` followed by the path
as it is on disk, unescaped: the form Iceberg Java (Hadoop's `Path`) records for a local table, and the
one Iceberg Java, pyiceberg and iceberg-rust all read literally (none of them percent-decodes it).
Mirrors made before kept bare local paths; `comparable` is the one comparison of two locations, whatever
form each was recorded in.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

OWNED_PREFIX = "dvmirror-"
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")


def iceberg_location(location: str) -> str:
    """The URI written to Iceberg for a resolved location: a local path (bare, `file:///x`,
    `file://localhost/x`) as `file:/x`, its characters kept as they are on disk; any other URI as is."""
    if location.startswith("/"):
        return "file:" + location
    if location.startswith("file:") and comparable(location).startswith("/"):
        return "file:" + comparable(location)
    if not _SCHEME.match(location):
        raise ValueError(f"{location!r} is neither an absolute path nor a URI")
    return location


def comparable(location: str) -> str:
    """One spelling per file: Iceberg may name a local file `file:/x`, `file:///x` or `/x`, and Hadoop
    names S3 objects `s3a://` or `s3n://` where Iceberg says `s3://`."""
    if location.startswith("file://localhost/"):
        return location[len("file://localhost") :]
    if location.startswith("file://"):
        return location[len("file://") :]
    if location.startswith(("s3a://", "s3n://")):
        return "s3://" + location[len("s3a://") :]
    return location.removeprefix("file:")


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
