"""Where the files a Delta log names may be (`PathPolicy`), and when two spellings of one path are two
entries to Delta's readers (`readers_keep_apart`). How a log path becomes a location is
`locations.resolve_location`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.locations import SCHEME, TableLocation, is_remote, table_root_of


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
    def of(
        cls, table_root: str | TableLocation, allowed_roots: Sequence[str | TableLocation] = ()
    ) -> PathPolicy:
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
    absolute one, measured in tests/mirror/test_locations_spellings.py; on two absolute spellings Delta
    Spark may see one file where delta-rs sees two, and a relative path it might normalise is not decided
    here (False).
    """
    if path == other:
        return False
    relative = [not (p.startswith("/") or SCHEME.match(p)) for p in (path, other)]
    if not any(relative):
        return False
    return all(_kept_relative(p) for p, rel in zip((path, other), relative, strict=True) if rel)


def _kept_relative(path: str) -> bool:
    segments = path.split("/")
    return bool(_PLAIN_URI_SEGMENTS.fullmatch(path)) and not any(s in ("", ".", "..") for s in segments)


# Characters a URI path holds unescaped (RFC 3986 pchar and `/`), and `%` escapes (checked elsewhere).
_PLAIN_URI_SEGMENTS = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=@%/-]+")
