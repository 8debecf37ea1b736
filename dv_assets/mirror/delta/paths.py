"""Resolving the paths written in a Delta log to the locations of the files they name.

Delta writes `add.path` / `remove.path` as URL-encoded URIs: relative to the table root, or absolute
(`file:/...`, `file:///...`, `s3://...`). Hive-style partition directories are already escaped on disk
(a partition value `a%b` lives in `p=a%25b/`), and the log encodes that name once more
(`p=a%2525b/...`). So the log path is decoded exactly once, never twice.

Local locations are plain absolute POSIX paths (no `file:` scheme), remote ones stay URIs, decoded;
Iceberg names them by URI (`locations.iceberg_location`).
"""

from __future__ import annotations

import functools
import os
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from dv_assets.mirror.errors import MirrorInputError

# A `%` not followed by two hex digits: Java's URI parser (which Delta uses) rejects such a path.
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
# A URI scheme has at least two characters, so a Windows drive letter (`C:`) is never taken for one.
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")


def is_remote(location: str) -> bool:
    """True for a URI with a scheme other than `file` (s3://, abfss://, gs://, ...)."""
    return bool(_SCHEME.match(location)) and not location.lower().startswith("file:")


def table_root_of(root: str | Path) -> str:
    """The canonical form of a table root: an absolute local path, or a remote URI; no trailing slash."""
    text = os.fspath(root)
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
    if _SCHEME.match(path):
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


@dataclass(frozen=True)
class PathPolicy:
    """Where the files a Delta log names may be: inside the table root, or inside a root the user
    allowed (shallow clones, `p` deletion vectors). Checked before any such file is opened, so a
    hostile log can make the mirror neither read nor reference another table's files, nor reach a host
    through URI parameters; a refusal names the path, never anything read from it.
    """

    table_root: str
    allowed_roots: tuple[str, ...] = ()

    @functools.cached_property
    def _root_prefixes(self) -> tuple[str, ...]:
        return tuple(root.rstrip("/") + "/" for root in (self.table_root, *self.allowed_roots))

    @classmethod
    def of(cls, table_root: str, allowed_roots: Sequence[str] = ()) -> PathPolicy:
        return cls(table_root_of(table_root), tuple(table_root_of(r) for r in allowed_roots))

    def check(self, location: str, *, what: str) -> None:
        problem = self.problem(location)
        if problem is not None:
            raise MirrorInputError(f"{what} {location} {problem}; refused", file=location)

    def problem(self, location: str) -> str | None:
        if is_remote(location) and urlsplit(location)[3:] != ("", ""):
            return "has a query string or fragment"
        # Only a location with "/." (or starting with ".") can have such a segment: the split is skipped
        # for the million plain names of a first version.
        if "/." in location or location.startswith("."):
            segments = location.split("/")
            if ".." in segments or "." in segments:
                return "has a '.' or '..' segment"
        if not location.startswith(self._root_prefixes):
            allowed = " and the allowed roots" if self.allowed_roots else ""
            return f"is outside the table root{allowed} (allow its folder with --allow-root)"
        return None


def readers_keep_apart(path: str, other: str) -> bool:
    """Whether Delta Spark and delta-rs both take two spellings of one location, written differently in
    the log, for two entries: a `remove` of one then ends nothing live under the other, to both alike.

    delta-rs (delta-kernel-rs) keys log replay on the path as written. Delta Spark keys it on a canonical
    path: an absolute one (`/t/x`, `file:/t/x`, `file:///t/x`) qualified to one URI, a relative one kept
    as written. So they agree on two relative spellings (`p=a/x` and `p%3Da/x`) and on a relative and an
    absolute one, measured in tests/test_path_spellings.py; on two absolute spellings Delta Spark may see
    one file where delta-rs sees two, and a relative path it might normalise is not decided here (False).
    """
    if path == other:
        return False
    relative = [not (p.startswith("/") or _SCHEME.match(p)) for p in (path, other)]
    if not any(relative):
        return False
    return all(_kept_relative(p) for p, rel in zip((path, other), relative, strict=True) if rel)


def _kept_relative(path: str) -> bool:
    segments = path.split("/")
    return bool(_PLAIN_URI_SEGMENTS.fullmatch(path)) and not any(s in ("", ".", "..") for s in segments)


# Characters a URI path holds unescaped (RFC 3986 pchar and `/`), and `%` escapes (checked elsewhere).
_PLAIN_URI_SEGMENTS = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=@%/-]+")
