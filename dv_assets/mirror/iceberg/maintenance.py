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

The expiry's own commit writes a metadata file, and Iceberg (`write.metadata.delete-after-commit.enabled`,
`write.metadata.previous-versions-max`, both set on every mirror) then deletes the metadata files that
fall off the end of the table's metadata log: those are reported too (`deleted_metadata_json`).

Nothing else is ever deleted: no Delta data file, no Delta DV file, nothing in `_delta_log`. And only a
mirror is maintained here: a table without the mirror's `dvmirror.delta-table` property (another team's
table, named by mistake) is refused before anything is expired or deleted (`check_is_mirror`).

A dry run is answered without a JVM where pyiceberg reads the catalog (`plan_without_jvm`): which snapshots
Iceberg's `ExpireSnapshots` would remove is computed here by its rules (`expired_snapshot_ids`), the
snapshots' files read with pyiceberg (`pyiceberg_reader.snapshot_files_by_id`), and the same `_reclaim`
decides what goes, so the dry run lists what the real run then deletes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.iceberg.layout import MirrorLayout
from dv_assets.mirror.iceberg.mirror_table import (
    DELTA_TABLE_PROPERTY,
    MAX_REF_AGE_MS,
    MirrorTable,
    ReferencedFiles,
    TableHistory,
)
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.locations import comparable

if TYPE_CHECKING:  # a dry run through pyiceberg imports no pyspark
    from dv_assets.mirror.iceberg.java import IcebergJava
    from dv_assets.mirror.settings import CatalogConfig


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


# A table's retention when none is given: the tables file's and the component's `retention:` defaults,
# `dvmirror expire` without --retain-last/--older-than, and what `dvmirror sync` applies in CLI mode. The
# newest 10 snapshots are always kept, and a snapshot beyond them goes once it is a week old (Iceberg's own
# default keeps days: what a reader may time-travel to should not go after a day of busy commits).
DEFAULT_RETENTION = Retention(retain_last=10, max_snapshot_age_hours=168.0)


@dataclass
class MaintenanceReport:
    iceberg_table: str
    snapshots_before: int = 0
    expired_snapshot_ids: list[int] = field(default_factory=list)
    retained_snapshots: int = 0
    deleted_delete_files: list[str] = field(default_factory=list)
    deleted_metadata_files: list[str] = field(default_factory=list)
    deleted_orphans: list[str] = field(default_factory=list)
    # Metadata files (`*.metadata.json`) Iceberg deletes when the expiry's commit drops them from the log.
    deleted_metadata_json: list[str] = field(default_factory=list)
    bytes_reclaimed: int = 0
    dry_run: bool = False
    # "pyiceberg": a dry run answered without a JVM; "iceberg-java": through Spark.
    read_with: str = "iceberg-java"
    # The Delta versions of the expired snapshots, when the caller read them (`RetentionKeeper`).
    expired_delta_versions: list[int] = field(default_factory=list)

    @property
    def deleted_files(self) -> list[str]:
        """Every file deleted (or, in a dry run, to be deleted), each once."""
        return (
            self.deleted_delete_files
            + self.deleted_orphans
            + self.deleted_metadata_files
            + self.deleted_metadata_json
        )

    @property
    def files_reclaimed(self) -> int:
        return len(self.deleted_files)


def expired_snapshot_ids(
    state: TableHistory, *, older_than_ms: int, retain_last: int, now_ms: int
) -> list[int]:
    """The snapshots Iceberg Java's `expireSnapshots().expireOlderThan(older_than_ms).retainLast(retain_last)`
    removes (`RemoveSnapshots.internalApply`): every retained ref's snapshot is kept; on each retained
    branch the ancestors while fewer than its minimum are kept or they are newer than its cutoff (a ref's
    own `min-snapshots-to-keep` / `max-snapshot-age-ms` winning), stopping at the first that is neither;
    snapshots on no ref's history are kept when newer than the cutoff; a ref other than `main` older
    than its `max-ref-age-ms` is dropped first."""
    default_max_ref_age = int(state.properties.get(MAX_REF_AGE_MS, 2**63 - 1))
    retained_refs = {}
    for name, ref in state.refs.items():
        snapshot_id = int(ref["snapshot-id"])
        if name == "main":
            retained_refs[name] = ref
        elif snapshot_id in state.snapshots:
            max_age = ref.get("max-ref-age-ms")
            max_age = default_max_ref_age if max_age is None else int(max_age)
            if now_ms - state.snapshots[snapshot_id][1] <= max_age:
                retained_refs[name] = ref
    keep = {int(ref["snapshot-id"]) for ref in retained_refs.values()}
    on_a_ref: set[int] = set()
    for ref in retained_refs.values():
        head = int(ref["snapshot-id"])
        if ref.get("type", "branch") != "branch":
            on_a_ref.add(head)
            continue
        history = state.ancestors(head)
        on_a_ref.update(history)
        max_age = ref.get("max-snapshot-age-ms")
        cutoff = older_than_ms if max_age is None else now_ms - int(max_age)
        minimum = (
            retain_last if ref.get("min-snapshots-to-keep") is None else int(ref["min-snapshots-to-keep"])
        )
        kept: list[int] = []
        for snapshot_id in history:
            if len(kept) < minimum or state.snapshots[snapshot_id][1] >= cutoff:
                kept.append(snapshot_id)
            else:
                break
        keep.update(kept)
    keep.update(
        sid for sid, (_, ts) in state.snapshots.items() if sid not in on_a_ref and ts >= older_than_ms
    )
    return sorted(sid for sid in state.snapshots if sid not in keep)


def _union(files: list[ReferencedFiles]) -> ReferencedFiles:
    return ReferencedFiles(
        frozenset().union(*(f.metadata_files for f in files)),
        frozenset().union(*(f.delete_files for f in files)),
    )


def _only_in(files: frozenset[str], others: frozenset[str]) -> list[str]:
    """The files of `files` that `others` does not name, in any spelling (`comparable`)."""
    kept = {comparable(f) for f in others}
    return [f for f in files if comparable(f) not in kept]


def _cutoff_ms(retention: Retention, now_ms: int) -> int:
    if retention.max_snapshot_age_hours is None:
        return now_ms
    return now_ms - int(retention.max_snapshot_age_hours * 3600 * 1000)


def _reclaim(
    report: MaintenanceReport,
    layout: MirrorLayout,
    files: Mapping[int, ReferencedFiles],
    expired_ids: set[int],
    retention: Retention,
    io: FileIO,
    now_ms: int,
    *,
    dry_run: bool,
) -> None:
    """Decide, from every snapshot's files read before the expiry, what only the expired snapshots used
    (and the mirror's orphans), and delete it unless `dry_run`; the same rules for both runs."""
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
    orphans = sorted(
        info.location
        for info in io.list_dir(layout.delete_dir)
        if info.is_file
        and layout.is_owned(info.location)
        and comparable(info.location) not in every_reference
        and now_ms / 1000 - (info.mtime_s if info.mtime_s is not None else time.time()) >= min_age_s
    )

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


def _metadata_json_sizes(io: FileIO, layout: MirrorLayout, locations: list[str]) -> dict[str, int]:
    """The metadata files of `locations` that exist under the table's `metadata/`, with their sizes."""
    sizes = {}
    for location in locations:
        if not layout.is_metadata(location):
            continue
        info = io.stat(location)
        if info.exists and info.size is not None:
            sizes[location] = info.size
    return sizes


def check_is_mirror(table_name: str, properties: Mapping[str, str]) -> None:
    """Refuse a table the mirror did not write: its snapshots and metadata files are its owner's."""
    if DELTA_TABLE_PROPERTY not in properties:
        raise MirrorInputError(
            f"Iceberg table {table_name} is not a dv-mirror mirror (no {DELTA_TABLE_PROPERTY} property): "
            "its snapshots and files are not the mirror's to expire; nothing expired or deleted",
            table=table_name,
        )


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
    opened = _open_mirror(iceberg, table_name, report)
    if opened is None:
        return report
    table, layout, before = opened
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)

    # Every snapshot's files are read before expiry: afterwards the expired ones are gone from the table.
    files = iceberg.snapshot_files(table_name, [s.snapshot_id for s in table.snapshots])
    # Iceberg deletes these itself when the expiry commits: their sizes are known only before.
    dropped = _metadata_json_sizes(io, layout, before.metadata_log_dropped_by_commit())
    expired_ids = set(
        iceberg.expire_snapshots(
            table_name,
            older_than_ms=_cutoff_ms(retention, now_ms),
            retain_last=retention.retain_last,
            dry_run=dry_run,
        )
    )
    _reclaim(report, layout, files, expired_ids, retention, io, now_ms, dry_run=dry_run)
    if expired_ids:  # a commit was (or, in a dry run, would be) made
        gone = list(dropped) if dry_run else _metadata_json_gone(iceberg, table_name, before, layout, io)
        report.deleted_metadata_json = gone
        report.bytes_reclaimed += sum(dropped.get(f, 0) for f in gone)
    return report


def plan_without_jvm(
    catalog: CatalogConfig, table_name: str, retention: Retention, *, now_ms: int | None = None
) -> MaintenanceReport:
    """`expire_and_reclaim(..., dry_run=True)` read with pyiceberg instead of Iceberg Java: no JVM."""
    from dv_assets.mirror.iceberg.pyiceberg_reader import table_state_and_files

    report = MaintenanceReport(table_name, dry_run=True, read_with="pyiceberg")
    found = table_state_and_files(catalog, table_name)
    if found is None:
        return report
    state, files = found
    check_is_mirror(table_name, state.properties)
    io = FileIO(catalog.storage_properties())
    layout = MirrorLayout(state.location)
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    report.snapshots_before = len(state.snapshots)
    expired_ids = set(
        expired_snapshot_ids(
            state,
            older_than_ms=_cutoff_ms(retention, now_ms),
            retain_last=retention.retain_last,
            now_ms=now_ms,
        )
    )
    _reclaim(report, layout, files, expired_ids, retention, io, now_ms, dry_run=True)
    if expired_ids:
        dropped = _metadata_json_sizes(io, layout, state.metadata_log_dropped_by_commit())
        report.deleted_metadata_json = list(dropped)
        report.bytes_reclaimed += sum(dropped.values())
    return report


def retention_due(snapshot_times_ms: Sequence[int], retention: Retention, now_ms: int | None = None) -> bool:
    """Whether a snapshot is past `retention` (one beyond the newest `retain_last` and older than its
    cutoff): when a sync in CLI mode expires. Counted on the snapshots' times alone, so Iceberg's own
    rules (refs, their minimums) may still keep it: then the expiry finds nothing, as the cleanup would."""
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    beyond = sorted(snapshot_times_ms, reverse=True)[retention.retain_last :]
    cutoff = _cutoff_ms(retention, now_ms)
    return any(t < cutoff for t in beyond)


# How often a sync in CLI mode (`dvmirror sync --follow`, `sync --tables --follow`) looks whether a
# table's snapshots are past its retention: one read of the table's snapshots, after a pass.
RETENTION_CHECK_SECONDS = 600.0


class RetentionKeeper:
    """A table's retention applied after its sync passes in CLI mode, as the Dagster cleanup applies it
    (`expire_and_reclaim`: the same expiry, the mirror's own files only): after the first pass of each
    table, then at most once per `every_seconds`, an expiry when a snapshot is past the table's retention
    (`retention_of`, else `DEFAULT_RETENTION`). Orphans alone (a crashed run's files) are left to the
    cleanup and `dvmirror expire`. Thread-safe across tables (one fleet pass per table at a time)."""

    def __init__(
        self,
        retention_of: Mapping[str, Retention] | None = None,
        *,
        every_seconds: float = RETENTION_CHECK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.retention_of = dict(retention_of or {})
        self.every_seconds = every_seconds
        self.clock = clock
        self._last: dict[str, float] = {}

    def retention(self, table_name: str) -> Retention:
        return self.retention_of.get(table_name, DEFAULT_RETENTION)

    def after_pass(self, iceberg: IcebergJava, table_name: str) -> MaintenanceReport | None:
        """The expiry's report when one was due and made; None when not looked at or nothing was due."""
        now = self.clock()
        last = self._last.get(table_name)
        if last is not None and now - last < self.every_seconds:
            return None
        self._last[table_name] = now
        table = iceberg.load(table_name)
        retention = self.retention(table_name)
        if table is None or not retention_due([s.timestamp_ms for s in table.snapshots], retention):
            return None
        report = expire_and_reclaim(iceberg, table_name, retention)
        versions = {s.snapshot_id: s.delta_version for s in table.snapshots}
        report.expired_delta_versions = sorted(
            v for sid in report.expired_snapshot_ids if (v := versions.get(sid)) is not None
        )
        return report


def expire_unreadable(
    iceberg: IcebergJava,
    table_name: str,
    snapshot_ids: list[int],
    *,
    properties: Mapping[str, str],
    io: FileIO | None = None,
    now_ms: int | None = None,
) -> MaintenanceReport:
    """Expire exactly `snapshot_ids` (snapshots no reader can read: a Delta VACUUM deleted a data file they
    name, `vacuum.py`) and set `properties` in the same commit, then delete what only they referenced,
    by the rules of `expire_and_reclaim` (the mirror's own delete files and Iceberg metadata; orphans
    older than the default `orphan_min_age_hours`). Never the current snapshot (Iceberg refuses it)."""
    io = io or FileIO(iceberg.storage_properties())
    report = MaintenanceReport(table_name)
    opened = _open_mirror(iceberg, table_name, report)
    if opened is None:
        return report
    table, layout, before = opened
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    files = (
        iceberg.snapshot_files(table_name, [s.snapshot_id for s in table.snapshots]) if snapshot_ids else {}
    )
    expired_ids = set(iceberg.expire_snapshot_ids(table_name, snapshot_ids, properties=properties))
    if not expired_ids:
        report.retained_snapshots = len(table.snapshots)
        return report
    _reclaim(report, layout, files, expired_ids, Retention(), io, now_ms, dry_run=False)
    report.deleted_metadata_json = _metadata_json_gone(iceberg, table_name, before, layout, io)
    return report


def _open_mirror(
    iceberg: IcebergJava, table_name: str, report: MaintenanceReport
) -> tuple[MirrorTable, MirrorLayout, TableHistory] | None:
    """The mirror as an expiry starts from: the table, its layout and its history (None: no such table;
    a table that is not a mirror is refused)."""
    table = iceberg.load(table_name)
    if table is None:
        return None
    check_is_mirror(table_name, table.properties)
    report.snapshots_before = len(table.snapshots)
    return table, MirrorLayout(table.location), iceberg.table_state(table_name)


def _metadata_json_gone(
    iceberg: IcebergJava, table_name: str, before: TableHistory, layout: MirrorLayout, io: FileIO
) -> list[str]:
    """The metadata files of `before`'s log that the expiry's commit dropped and Iceberg deleted."""
    after = iceberg.table_state(table_name)
    still_logged = {comparable(f) for f in (*after.metadata_log, after.metadata_location)}
    return [
        f
        for f in before.metadata_log
        if comparable(f) not in still_logged and not io.stat(f).exists and layout.is_metadata(f)
    ]
