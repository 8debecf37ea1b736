"""Locations: how a path written in a Delta log becomes one, how the mirror names one in Iceberg, and the
one comparison of two, and a table's root typed once (`TableLocation`).

Delta writes `add.path` / `remove.path` as URL-encoded URIs: relative to the table root, or absolute
(`file:/...`, `file:///...`, `s3://...`). Hive-style partition directories are already escaped on disk
(a partition value `a%b` lives in `p=a%25b/`), and the log encodes that name once more
(`p=a%2525b/...`). So the log path is decoded exactly once, never twice (`resolve_location`). Local
locations are plain absolute POSIX paths (no `file:` scheme), remote ones stay URIs, decoded.

Every location the mirror writes into Iceberg metadata is a full URI (`iceberg_location`): the spec's
`file_path` is one, and iceberg-rust refuses a bare path. Locally that is `file:/…` followed by the path
as it is on disk, unescaped: the form Iceberg Java (Hadoop's `Path`) records for a local table, and the
one Iceberg Java, pyiceberg and iceberg-rust all read literally (none of them percent-decodes it).
Mirrors made before kept bare local paths; `comparable` is the one spelling of a location to compare, and
`same_location` the one comparison of two, whatever form each was recorded in.

A table's root (the Delta table, an allowed root) is normalised once where it enters (a CLI argument, the
tables file's `TableSpec`, the Dagster source) into a `TableLocation`, which the layers below take as it
is. The object stores and the URI schemes that name each are written once, in `STORE_SCHEMES`.
Pure, and imports only the project's errors: every layer resolves and compares locations.
"""

from __future__ import annotations

import functools
import os
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from dv_assets.mirror.errors import MirrorInputError

# A URI scheme has at least two characters, so a Windows drive letter (`C:`) is never taken for one.
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")

# The object stores and the URI schemes that name each one's objects (Hadoop's `s3a://` and `s3n://` name the
# same S3 objects as Iceberg's `s3://`): the one table the settings (which jars), the FileIO (which file
# system) and `comparable` read.
STORE_SCHEMES: dict[str, tuple[str, ...]] = {
    "s3": ("s3", "s3a", "s3n"),
    "gcs": ("gs",),
    "azure": ("abfs", "abfss", "wasb", "wasbs"),
}
_STORE_OF_SCHEME = {scheme: store for store, schemes in STORE_SCHEMES.items() for scheme in schemes}


def store_of_scheme(scheme: str) -> str | None:
    """The object store a URI scheme names (`s3`, `gcs`, `azure`), None: none of them."""
    return _STORE_OF_SCHEME.get(scheme.lower())


def store_of(location: str) -> str | None:
    """The object store a location is on (`s3`, `gcs`, `azure`), None: a local path or another scheme."""
    scheme, sep, _ = location.partition("://")
    return store_of_scheme(scheme) if sep else None


@dataclass(frozen=True)
class TableLocation:
    """A table's root, normalised once (`table_root_of`): an absolute local path or a remote URI, no
    trailing slash (`uri`), and its scheme (`file` for a local path)."""

    uri: str
    scheme: str

    @classmethod
    def of(cls, location: str | Path | TableLocation) -> TableLocation:
        """`location` normalised (a TableLocation as it is: never normalised twice)."""
        if isinstance(location, TableLocation):
            return location
        uri = _normalised_root(os.fspath(location))
        scheme = uri.split(":", 1)[0].lower() if is_remote(uri) else "file"
        return cls(uri, scheme)

    @property
    def is_remote(self) -> bool:
        return self.scheme != "file"

    @property
    def store(self) -> str | None:
        """The object store it is on (`STORE_SCHEMES`), None: local or another scheme."""
        return store_of_scheme(self.scheme)

    def __str__(self) -> str:
        return self.uri


def iceberg_location(location: str) -> str:
    """The URI written to Iceberg for a resolved location: a local path (bare, `file:///x`,
    `file://localhost/x`) as `file:/x`, its characters kept as they are on disk; any other URI as is."""
    if location.startswith("/"):
        return "file:" + location
    if location.startswith("file:") and comparable(location).startswith("/"):
        return "file:" + comparable(location)
    if not SCHEME.match(location):
        raise ValueError(f"{location!r} is neither an absolute path nor a URI")
    return location


def comparable(location: str) -> str:
    """One spelling per file: Iceberg may name a local file `file:/x`, `file:///x` or `/x`, and Hadoop
    names S3 objects `s3a://` or `s3n://` where Iceberg says `s3://`."""
    if location.startswith("file://localhost/"):
        return location[len("file://localhost") :]
    if location.startswith("file://"):
        return location[len("file://") :]
    scheme, sep, rest = location.partition("://")
    if sep and scheme != "s3" and store_of_scheme(scheme) == "s3":
        return "s3://" + rest
    return location.removeprefix("file:")


def same_location(first: str | TableLocation, second: str | TableLocation) -> bool:
    """Whether two locations name the same file or folder, whatever spelling each was recorded in (a
    trailing slash aside)."""
    return comparable(str(first)).rstrip("/") == comparable(str(second)).rstrip("/")


# A `%` not followed by two hex digits: Java's URI parser (which Delta uses) rejects such a path.
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def is_remote(location: str) -> bool:
    """True for a URI with a scheme other than `file` (s3://, abfss://, gs://, ...)."""
    return bool(SCHEME.match(location)) and not location.lower().startswith("file:")


def table_root_of(root: str | Path | TableLocation) -> str:
    """The canonical form of a table root: an absolute local path, or a remote URI; no trailing slash."""
    return TableLocation.of(root).uri


def _normalised_root(text: str) -> str:
    if text.lower().startswith("file:"):
        text = _local_path_of_file_uri(text, original=text)
    if is_remote(text):
        return text.rstrip("/")
    return posixpath.normpath(os.path.abspath(text))


# A relative path of plain segments: no escape, no scheme, no `.`, `..` or empty segment.
_PLAIN_RELATIVE = re.compile(r"[\w=+-][\w.=+-]*(?:/[\w=+-][\w.=+-]*)*", re.ASCII)


def resolve_location(table_root: str, path: str) -> str:
    """The absolute, decoded location of a file named in the log of the table at `table_root`."""
    if _PLAIN_RELATIVE.fullmatch(path) and _joins_plainly(table_root):
        # What the rules of `_resolve` give such a path, without them: a checkpoint names a million.
        return f"{table_root.rstrip('/')}/{path}"
    return _resolve(table_root, path)


@functools.lru_cache(maxsize=64)
def _joins_plainly(table_root: str) -> bool:
    """Whether `_resolve` puts a plain relative path under `table_root` with one slash: a remote root,
    or a local one that normalisation leaves as it is."""
    if is_remote(table_root):
        return True
    return table_root.startswith("/") and posixpath.normpath(table_root) == table_root


def _resolve(table_root: str, path: str) -> str:
    if _BAD_ESCAPE.search(path):
        raise MirrorInputError(f"malformed URL escape in log path {path!r}", table=table_root, file=path)
    if path.lower().startswith("file:"):
        return _local_path_of_file_uri(path, original=path, table_root=table_root)
    if SCHEME.match(path):
        return unquote(path)
    decoded = unquote(path)
    if is_remote(table_root):
        if decoded.startswith("/"):
            # Absolute path on the table's own file system (Hadoop semantics of Path(parent, "/x")).
            parts = urlsplit(table_root)
            return f"{parts.scheme}://{parts.netloc}{decoded}"
        return f"{table_root.rstrip('/')}/{decoded}"
    if decoded.startswith("/"):
        return posixpath.normpath(decoded)
    return posixpath.normpath(posixpath.join(table_root, decoded))


def _local_path_of_file_uri(uri: str, *, original: str, table_root: str | None = None) -> str:
    parts = urlsplit(uri)
    if parts.query or parts.fragment:
        raise MirrorInputError(
            "file URI with a query string or fragment is not supported", table=table_root, file=original
        )
    if parts.netloc not in ("", "localhost"):
        raise MirrorInputError(
            f"file URI with a remote host {parts.netloc!r} is not supported", table=table_root, file=original
        )
    return posixpath.normpath(unquote(parts.path))
