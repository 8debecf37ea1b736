"""Following Delta's VACUUM: which of the mirror's retained Delta versions can no longer be read because
VACUUM deleted a data file they name, found from the Delta log, at a cost that follows the files removed.

The mirror's snapshots name Delta's data files where they are (its DVs are its own copies), so a VACUUM
that deletes the files only older versions needed leaves those versions' snapshots naming files that no
longer exist: no reader (Delta Spark included) can read them. Which ones:

* the candidates are the log's tombstones: the data files removed by the commits after the oldest
  retained version (a file a retained version names and Delta's latest does not was removed by one of
  them); only those are stat'ed, never the table's live files;
* a candidate that is gone is needed by the retained versions at which it was live, read from the same
  commits (the last commit at or before the version that adds or removes it says; before its first one,
  it was live if that first one removes it).

A retained version older than the commits the log still holds (log cleanup) cannot be placed this way:
`files_of`, a reader of that version's snapshot (its data files, from the Iceberg manifests), answers
for it; without one it is counted unreadable only if the caller says so (`unchecked` lists it).

When: a mirror snapshot of a `VACUUM END` commit newer than the table's `dvmirror.vacuum-checked`
property (the sync sets it once the versions VACUUM made unreadable are expired, in the expiry's own
commit; a crash before leaves it unset, so the next run does it again), or, for `dvmirror status`, a
`VACUUM END` commit Delta has and the mirror has not mirrored yet. The sync then expires those
snapshots (`iceberg/maintenance.expire_unreadable`: the mirror's own files only); the current one is
never expired but refused, naming the file (`check_current_readable`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.iceberg.mirror_table import VACUUM_CHECKED_PROPERTY, MirrorTable
from dv_assets.mirror.io import FileIO

if TYPE_CHECKING:  # `dvmirror status` imports this module: no pyspark
    from dv_assets.mirror.iceberg.java import IcebergJava

VACUUM_END = "VACUUM END"  # commitInfo.operation of the commit Delta writes once VACUUM deleted its files
STAT_CHUNK = 10_000


@dataclass(frozen=True)
class VacuumedVersions:
    """What a VACUUM took from a mirror's retained versions."""

    # The commits read: (first, last), None when none was needed.
    commits_read: tuple[int, int] | None = None
    candidates: int = 0  # removed data files stat'ed (the log's tombstones after the oldest retained one)
    gone: tuple[str, ...] = ()  # of them, those that no longer exist
    # Retained Delta version → one data file it names that is gone (its snapshot cannot be read).
    unreadable: Mapping[int, str] = field(default_factory=dict)
    # Retained versions older than the commits the log holds, with no `files_of` to answer for them.
    unchecked: tuple[int, ...] = ()

    @property
    def versions(self) -> list[int]:
        return sorted(self.unreadable)


def vacuum_checked_through(mirror: MirrorTable) -> int:
    """The newest `VACUUM END` version the sync has followed (-1: none)."""
    value = mirror.properties.get(VACUUM_CHECKED_PROPERTY, "")
    return int(value) if value.isdigit() else -1


def newest_vacuum_end(mirror: MirrorTable) -> int | None:
    """The newest Delta version among the mirror's retained snapshots that mirrors a `VACUUM END`."""
    found = [s.delta_version for s in mirror.mirror_snapshots() if s.delta_operation == VACUUM_END]
    return max((v for v in found if v is not None), default=None)


def vacuum_to_follow(mirror: MirrorTable) -> int | None:
    """The `VACUUM END` version the mirror holds and has not followed yet (None: nothing to do)."""
    newest = newest_vacuum_end(mirror)
    return newest if newest is not None and newest > vacuum_checked_through(mirror) else None


def vacuum_ahead(delta: DeltaTable, after: int, latest: int) -> int | None:
    """The newest `VACUUM END` among Delta's commits (after, latest] (their commitInfo only), or None."""
    for version in range(latest, after, -1):
        info = delta.commit_info(version)
        if info is not None and info.operation == VACUUM_END:
            return version
    return None


def vacuum_pending(delta: DeltaTable, mirror: MirrorTable, target: int, latest: int) -> bool:
    """Whether a sync up to `target` has a VACUUM to follow: one the mirror holds and has not followed,
    or (a target before Delta's latest) one Delta committed after the target."""
    if vacuum_to_follow(mirror) is not None:
        return True
    if target >= latest:
        return False
    ahead = vacuum_ahead(delta, target, latest)
    return ahead is not None and ahead > vacuum_checked_through(mirror)


def vacuumed_versions(
    delta: DeltaTable,
    retained: Iterable[int],
    io: FileIO,
    *,
    latest: int | None = None,
    files_of: Callable[[int], Iterable[str]] | None = None,
) -> VacuumedVersions:
    """Which `retained` Delta versions name a data file that no longer exists, from the log's tombstones
    after the oldest of them up to `latest` (default: Delta's latest version). See the module's docstring."""
    versions = sorted(set(retained))
    latest = delta.latest_version() if latest is None else latest
    if not versions or versions[0] >= latest:
        return VacuumedVersions()
    first = max(versions[0] + 1, delta.held_from(latest))  # commits first..latest are all in the log
    placed = [v for v in versions if v >= first - 1]
    older = [v for v in versions if v < first - 1]

    removed: dict[str, None] = {}  # the tombstones' data files, in log order
    for _version, commit in delta.commit_actions(first, latest):
        for remove in commit.removes:
            removed[remove.location] = None
    gone = _gone(list(removed), io)
    unreadable: dict[int, str] = {}
    if gone:
        events = _events(delta, first, latest, set(gone))
        for version in placed:
            needed = next((f for f in gone if _live_at(events[f], version)), None)
            if needed is not None:
                unreadable[version] = needed
    unchecked: list[int] = []
    for version in older:
        if files_of is None:
            unchecked.append(version)
            continue
        names = list(files_of(version))
        missing = [f for f, there in zip(names, _exists(names, io), strict=True) if not there]
        if missing:
            unreadable[version] = missing[0]
    return VacuumedVersions(
        commits_read=(first, latest),
        candidates=len(removed),
        gone=tuple(gone),
        unreadable=unreadable,
        unchecked=tuple(unchecked),
    )


def _gone(locations: list[str], io: FileIO) -> list[str]:
    return [f for f, there in zip(locations, _exists(locations, io), strict=True) if not there]


def _exists(locations: list[str], io: FileIO) -> list[bool]:
    out: list[bool] = []
    for start in range(0, len(locations), STAT_CHUNK):
        out.extend(size is not None for size in io.file_sizes(locations[start : start + STAT_CHUNK]))
    return out


# One file's history in the commits read: (version, live after that commit, removed by it), ascending.
_Event = tuple[int, bool, bool]


def _events(delta: DeltaTable, first: int, latest: int, wanted: set[str]) -> dict[str, list[_Event]]:
    """For each of `wanted`, the commits of first..latest that add or remove it (a second read of the
    commits, only once some tombstoned file is found gone)."""
    events: dict[str, list[_Event]] = {f: [] for f in wanted}
    for version, commit in delta.commit_actions(first, latest):
        added = {a.location for a in commit.adds if a.location in wanted}
        removed = {r.location for r in commit.removes if r.location in wanted}
        for location in added | removed:
            # A commit that removes and adds the same file (a DV update) leaves it live.
            events[location].append((version, location in added, location in removed))
    return events


def _live_at(events: list[_Event], version: int) -> bool:
    """Whether the file was live at `version`: as the last commit at or before it left it, else (no
    commit touched it by then) live if the first commit after removes it."""
    before = [e for e in events if e[0] <= version]
    if before:
        return before[-1][1]
    return bool(events) and events[0][2]


def check_current_readable(found: VacuumedVersions, mirror: MirrorTable, delta_root: str) -> None:
    """Refuse when VACUUM deleted a data file the mirror's current version names: that snapshot cannot be
    expired (it is the table's current one) and no reader can read it."""
    current = mirror.last_mirrored_version
    if current is None or current not in found.unreadable:
        return
    raise MirrorInputError(
        f"Delta's VACUUM deleted a data file that Iceberg table {mirror.name}'s current snapshot (this "
        "version) names: no reader can read the mirror's current version; mirror the later versions "
        "(a sync up to Delta's latest), or start the mirror again from scratch",
        table=delta_root,
        version=current,
        file=found.unreadable[current],
    )


@dataclass
class VacuumFollowed:
    """What a sync did after a Delta VACUUM (`follow_vacuum`): plain values, for `--json` and Dagster."""

    vacuum_version: int  # the newest `VACUUM END` followed
    commits_read: tuple[int, int] | None
    candidates: int  # tombstoned data files stat'ed
    gone: list[str]  # of them, those VACUUM deleted
    expired_versions: list[int]  # the Delta versions whose snapshots were expired (unreadable)
    expired_snapshot_ids: list[int]
    deleted_files: list[str]  # the mirror's own files reclaimed with them
    seconds: float


def follow_vacuum(
    iceberg: IcebergJava,
    table_name: str,
    delta_root: str,
    io: FileIO,
    *,
    vacuum_version: int | None = None,
) -> VacuumFollowed | None:
    """After a sync run: when the mirror holds a `VACUUM END` it has not followed (or `vacuum_version`
    names one Delta has beyond the run's target), expire the retained snapshots a VACUUM made unreadable
    and mark it followed, in one commit; refuse (MirrorInputError naming the file) when the current one
    is among them, once the others are expired. None: nothing to follow."""
    from dv_assets.mirror.iceberg.maintenance import expire_unreadable

    began = time.monotonic()
    mirror = iceberg.load(table_name)
    if mirror is None:
        return None
    to_follow = [v for v in (vacuum_to_follow(mirror), vacuum_version) if v is not None]
    if not to_follow or max(to_follow) <= vacuum_checked_through(mirror):
        return None
    followed = max(to_follow)
    by_version: dict[int, list[int]] = {}
    for snapshot in mirror.mirror_snapshots():
        if snapshot.delta_version is not None:
            by_version.setdefault(snapshot.delta_version, []).append(snapshot.snapshot_id)
    # A full listing of the log: the run's own starts at its newest checkpoint, and the retained versions
    # may be older.
    delta = DeltaTable(delta_root, io=io, enforce_protocol=False)

    def files_of(version: int) -> list[str]:
        return sorted({f for sid in by_version[version] for f in iceberg.data_files(table_name, sid)})

    found = vacuumed_versions(delta, by_version, io, files_of=files_of)
    base = mirror.mirrored_base
    current = None if base is None else base.snapshot_id
    doomed = sorted(sid for v in found.unreadable for sid in by_version[v] if sid != current)
    current_unreadable = base is not None and base.delta_version in found.unreadable
    # Marked followed only when nothing unreadable stays: a refused current version is looked at again.
    properties = {} if current_unreadable else {VACUUM_CHECKED_PROPERTY: str(followed)}
    report = None
    if doomed or properties:
        report = expire_unreadable(iceberg, table_name, doomed, properties=properties, io=io)
    outcome = VacuumFollowed(
        vacuum_version=followed,
        commits_read=found.commits_read,
        candidates=found.candidates,
        gone=list(found.gone),
        expired_versions=sorted(
            v for v in found.unreadable if v != (None if base is None else base.delta_version)
        ),
        expired_snapshot_ids=doomed,
        deleted_files=[] if report is None else report.deleted_files,
        seconds=round(time.monotonic() - began, 3),
    )
    if current_unreadable:
        check_current_readable(found, mirror, delta_root)
    return outcome
