"""Where a mirror stands against its Delta table: the mirrored version, Delta's latest, the lag, and the
mirror's current snapshot. Read from the Delta log and a `MirrorTable` value (pyiceberg or Iceberg Java),
so it needs no JVM; the Dagster overview and sensors, and `dvmirror status`, all report this one value.

`readable_versions` are the Delta versions a reader can still time-travel to in the mirror: those whose
snapshot the table retains (the cleanup job and `dvmirror expire` expire the others) and whose every data
file exists (a sync expires the snapshots a Delta VACUUM made unreadable; until it has, `vacuum_io` finds
them: `unreadable_versions`).

The lag in seconds is how long the oldest Delta commit the mirror lacks has been waiting: 0 when the
mirror is up to date, and it grows until that commit is mirrored, whatever came after it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.iceberg.mirror_table import FIRST_READABLE_VERSION_PROPERTY, MirrorTable
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.vacuum import vacuum_pending, vacuumed_versions


@dataclass(frozen=True)
class MirrorStatus:
    delta_path: str
    iceberg_table: str
    delta_latest_version: int
    mirrored_version: int | None  # None: no table yet, or nothing mirrored
    lag_versions: int
    lag_seconds: float | None  # None: the first missing commit's time is unknown (no commitInfo)
    first_missing_commit_ms: int | None
    snapshot_id: int | None
    metadata_location: str | None
    format_version: int | None
    live_rows: int | None  # from the current mirrored snapshot's summary
    live_data_files: int | None
    live_delete_files: int | None  # v3: the live DVs (one delete-file entry each)
    # The first Delta version the mirror could start at (its versions before are no longer readable in
    # Delta); None: the mirror started at version 0, or records none.
    first_readable_version: int | None = None
    # The Delta versions whose snapshots the mirror retains and whose every data file exists (readable by
    # time travel), ascending.
    readable_versions: tuple[int, ...] = field(default=())
    # Retained versions a Delta VACUUM made unreadable (a data file their snapshot names is gone) that the
    # next sync expires (`vacuum.py`): version → one file gone. Looked at only when asked (`vacuum_io`)
    # and a VACUUM is still to follow.
    unreadable_versions: Mapping[int, str] = field(default_factory=dict)

    @property
    def up_to_date(self) -> bool:
        return self.lag_versions == 0


def commit_time_ms(delta: DeltaTable, version: int) -> int | None:
    """When the version was committed: its in-commit timestamp, else the writer's commitInfo timestamp;
    None when the log no longer holds the commit or it has no commitInfo timestamp."""
    info = delta.commit_info(version)
    return None if info is None else info.commit_ms


def mirror_status(
    delta: DeltaTable,
    mirror: MirrorTable | None,
    iceberg_table: str,
    *,
    now_ms: int | None = None,
    latest_version: int | None = None,
    vacuum_io: FileIO | None = None,
    files_of: Callable[[int], Iterable[str]] | None = None,
) -> MirrorStatus:
    """The status of `mirror` (None: the catalog has no such table) against `delta`. `latest_version`
    saves a log listing when the caller has just listed it. With `vacuum_io`, a Delta VACUUM the sync has
    not followed yet is looked at (`vacuum.vacuumed_versions`, its files stat'ed through it; `files_of`
    answers for versions older than the log's commits): the versions it made unreadable are not listed
    readable."""
    latest = delta.latest_version() if latest_version is None else latest_version
    base = None if mirror is None else mirror.mirrored_base
    mirrored = None if base is None else base.delta_version
    first_missing = None if mirrored is None else mirrored + 1
    if first_missing is None or first_missing <= latest:
        # A first sync starts at the oldest version the log can reconstruct (older commits are gone).
        first_missing = max(first_missing or 0, delta.oldest_version())
    lag_versions = max(0, latest - first_missing + 1)
    missing_ms = None
    lag_seconds: float | None = 0.0
    if lag_versions:
        missing_ms = commit_time_ms(delta, first_missing)
        now = time.time() * 1000 if now_ms is None else now_ms
        lag_seconds = None if missing_ms is None else max(0.0, (now - missing_ms) / 1000)
    totals = None if base is None else base.totals
    unreadable: Mapping[int, str] = {}
    if (
        mirror is not None
        and vacuum_io is not None
        and vacuum_pending(delta, mirror, -1 if mirrored is None else mirrored, latest)
    ):
        found = vacuumed_versions(
            delta, readable_versions(mirror), vacuum_io, latest=latest, files_of=files_of
        )
        unreadable = dict(found.unreadable)
    return MirrorStatus(
        delta_path=delta.table_root,
        iceberg_table=iceberg_table,
        delta_latest_version=latest,
        mirrored_version=mirrored,
        lag_versions=lag_versions,
        lag_seconds=lag_seconds,
        first_missing_commit_ms=missing_ms,
        snapshot_id=None if base is None else base.snapshot_id,
        metadata_location=None if mirror is None else mirror.metadata_location,
        format_version=None if mirror is None else mirror.format_version,
        live_rows=None if totals is None else totals.live_rows,
        live_data_files=None if totals is None else totals.data_files,
        live_delete_files=None if totals is None else totals.delete_files,
        first_readable_version=None if mirror is None else recorded_first_readable_version(mirror),
        readable_versions=()
        if mirror is None
        else tuple(v for v in readable_versions(mirror) if v not in unreadable),
        unreadable_versions=unreadable,
    )


def readable_versions(mirror: MirrorTable) -> tuple[int, ...]:
    """The Delta versions whose snapshots `mirror` retains (a reader can time-travel to them), ascending."""
    return tuple(sorted({s.delta_version for s in mirror.mirror_snapshots() if s.delta_version is not None}))


def expired_versions(mirror: MirrorTable | None, versions: Iterable[int]) -> list[int]:
    """Those of `versions` the mirror holds (at or below its current version, from its first readable
    one) whose snapshots it no longer retains: expired by the cleanup job or `dvmirror expire`."""
    if mirror is None or (last := mirror.last_mirrored_version) is None:
        return []
    first = recorded_first_readable_version(mirror) or 0
    return [v for v in versions if first <= v <= last and mirror.snapshot_for_version(v) is None]


def version_ranges(versions: Iterable[int]) -> str:
    """Delta versions as ascending ranges: `0..3, 5, 7..9` (compact for a long retained history)."""
    spans: list[list[int]] = []
    for v in sorted(set(versions)):
        if spans and v == spans[-1][1] + 1:
            spans[-1][1] = v
        else:
            spans.append([v, v])
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in spans) or "none"


def recorded_first_readable_version(mirror: MirrorTable) -> int | None:
    """The first Delta version the mirror's first sync could read, as the table records it (None: none,
    or not a number)."""
    value = mirror.properties.get(FIRST_READABLE_VERSION_PROPERTY)
    return int(value) if value is not None and value.isdigit() else None
