"""How the mirror names a file's location in Iceberg, and the one comparison of two locations.

Every location the mirror writes into Iceberg metadata is a full URI (`iceberg_location`): the spec's
`file_path` is one, and iceberg-rust refuses a bare path. Locally that is `file:/…` followed by the path
as it is on disk, unescaped: the form Iceberg Java (Hadoop's `Path`) records for a local table, and the
one Iceberg Java, pyiceberg and iceberg-rust all read literally (none of them percent-decodes it).
Mirrors made before kept bare local paths; `comparable` is the one comparison of two locations, whatever
form each was recorded in. A Delta log's own paths become locations in `delta/paths.resolve_location`.
Pure, and imports nothing of the project: every layer compares locations.
"""

from __future__ import annotations

import re

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
