"""Table maintenance, after pyiceberg's `table/maintenance.py`: expire snapshots past retention and
reclaim the files only they referenced, the mirror's own files only.

Iceberg's data files are Delta's data files, so Iceberg's own file cleanup must never run: snapshots are
expired with `cleanExpiredFiles(false)` and this module deletes only

* delete files the mirror wrote (`MirrorLayout.is_owned`: `<table location>/data/dvmirror-*`) that an
  expired snapshot referenced and no retained snapshot references;
* manifests and manifest lists of expired snapshots that no retained snapshot references, and only under
  `<table location>/metadata/` (Iceberg's own files);
* orphans: mirror-owned delete files no snapshot references at all (a crashed run's), once older than
  `orphan_min_age_hours`, so files of a commit in flight are never taken.

Nothing else is ever deleted: no Delta data file, no Delta DV file, nothing in `_delta_log`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.iceberg.layout import MirrorLayout, comparable
from dv_assets.mirror.iceberg.mirror_table import SnapshotFiles
from dv_assets.mirror.io import FileIO


class Retention(BaseModel):
    """How many Iceberg snapshots of a mirror to keep (Iceberg's own expire semantics)."""

    retain_last: int = Field(default=10, ge=1, description="keep at least the newest N snapshots")
    max_snapshot_age_hours: float | None = Field(
        default=None,
        gt=0,
        description="expire snapshots older than this (never the newest retain_last); None: by count only",
    )
    orphan_min_age_hours: float = Field(
        default=24.0,
        ge=1,  # a commit in flight must never lose its files
        description="mirror-owned delete files no snapshot ever referenced (a crashed run's) are deleted "
        "only when older than this, so an in-flight commit's files are never taken",
    )


@dataclass
class MaintenanceReport:
    iceberg_table: str
    snapshots_before: int = 0
    expired_snapshot_ids: list[int] = field(default_factory=list)
    retained_snapshots: int = 0
    deleted_delete_files: list[str] = field(default_factory=list)
    deleted_metadata_files: list[str] = field(default_factory=list)
    deleted_orphans: list[str] = field(default_factory=list)
    bytes_reclaimed: int = 0
    dry_run: bool = False

    @property
    def files_reclaimed(self) -> int:
        return len(self.deleted_delete_files) + len(self.deleted_metadata_files) + len(self.deleted_orphans)


def _union(files: list[SnapshotFiles]) -> SnapshotFiles:
    return SnapshotFiles(
        frozenset().union(*(f.metadata_files for f in files)),
        frozenset().union(*(f.delete_files for f in files)),
    )


def _only_in(files: frozenset[str], others: frozenset[str]) -> list[str]:
    """The files of `files` that `others` does not name, in any spelling (`comparable`)."""
    kept = {comparable(f) for f in others}
    return [f for f in files if comparable(f) not in kept]


def expire_and_reclaim(
    iceberg: IcebergJava,
    table_name: str,
    retention: Retention,
    *,
    io: FileIO | None = None,
    dry_run: bool = False,
    now_ms: int | None = None,
) -> MaintenanceReport:
    """Expire the table's snapshots past `retention` and delete what only they referenced."""
    io = io or FileIO(iceberg.storage_properties())
    report = MaintenanceReport(table_name, dry_run=dry_run)
    table = iceberg.load(table_name)
    if table is None:
        return report
    layout = MirrorLayout(table.location)
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    report.snapshots_before = len(table.snapshots)

    # Every snapshot's files are read before expiry: afterwards the expired ones are gone from the table.
    files = iceberg.snapshot_files(table_name, [s.snapshot_id for s in table.snapshots])
    cutoff = now_ms
    if retention.max_snapshot_age_hours is not None:
        cutoff = now_ms - int(retention.max_snapshot_age_hours * 3600 * 1000)
    expired_ids = set(
        iceberg.expire_snapshots(
            table_name, older_than_ms=cutoff, retain_last=retention.retain_last, dry_run=dry_run
        )
    )
    expired = _union([f for sid, f in files.items() if sid in expired_ids])
    retained = _union([f for sid, f in files.items() if sid not in expired_ids])
    report.expired_snapshot_ids = sorted(expired_ids)
    report.retained_snapshots = len(files) - len(expired_ids)

    garbage_deletes = sorted(
        f for f in _only_in(expired.delete_files, retained.delete_files) if layout.is_owned(f)
    )
    garbage_metadata = sorted(
        f
        for f in _only_in(expired.metadata_files, retained.metadata_files)
        if layout.is_metadata(f) and not layout.is_owned(f)
    )
    # A listing names files by the layout's URI, Iceberg by what was recorded (bare paths in older mirrors).
    every_reference = {comparable(f) for f in expired.delete_files | retained.delete_files}
    min_age_s = retention.orphan_min_age_hours * 3600
    orphans = [
        info.location
        for info in io.list_dir(layout.delete_dir)
        if info.is_file
        and layout.is_owned(info.location)
        and comparable(info.location) not in every_reference
        and now_ms / 1000 - (info.mtime_s if info.mtime_s is not None else time.time()) >= min_age_s
    ]

    for kind, locations in (
        (report.deleted_delete_files, garbage_deletes),
        (report.deleted_metadata_files, garbage_metadata),
        (report.deleted_orphans, orphans),
    ):
        for location in locations:
            # The last guard: only the mirror's delete files and Iceberg's own metadata, never Delta's.
            if not (layout.is_owned(location) or layout.is_metadata(location)):
                continue
            info = io.stat(location)
            if not info.exists or info.size is None:
                continue
            if not dry_run:
                io.delete(location)
            kind.append(location)
            report.bytes_reclaimed += info.size
    return report
