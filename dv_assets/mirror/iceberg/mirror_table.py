"""The Iceberg side as values: the mirror table read once (`MirrorTable`, `Snapshot`), the requests that
change it (`NewTable`, `CommitRequest`) and their outcome, and every table property and snapshot summary
name the mirror writes or reads. No py4j and no pyiceberg here: `java.py` (Iceberg Java, in Spark) and
`pyiceberg_reader.py` (no JVM) are two adapters producing these same values.

"Where does the mirror stand" has one answer, `MirrorTable.mirrored_base`: the sync, the sensors and the
checks all walk the lineage through it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.iceberg.content_files import DataFile, DeleteFile
from dv_assets.mirror.iceberg.name_mapping import NameMapping
from dv_assets.mirror.iceberg.types import Schema

# -- table properties the mirror writes -------------------------------------------------------------------
DELTA_TABLE_PROPERTY = "dvmirror.delta-table"  # the Delta table's root: which table this one mirrors
DELTA_TABLE_ID_PROPERTY = "dvmirror.delta-table-id"  # metaData.id: the same folder may hold another table
DELTA_PARTITION_COLUMNS_PROPERTY = "dvmirror.delta-partition-columns"  # JSON list, in Delta's order
NAME_MAPPING_PROPERTY = "schema.name-mapping.default"
GC_ENABLED_PROPERTY = "gc.enabled"
# "true": every data file of the current snapshot is named by its URI (`locations.iceberg_location`). Set when
# the table is created, or once a mirror made before that holds no data file recorded as a bare path.
URI_LOCATIONS_PROPERTY = "dvmirror.uri-locations"
# The first Delta version the mirror could start at, set when its first sync started after version 0: the
# versions before it are no longer readable in Delta (log retention removed their commits, or VACUUM
# their data or DV files).
FIRST_READABLE_VERSION_PROPERTY = "dvmirror.first-readable-version"
# The newest Delta `VACUUM END` version the sync has followed: the snapshots of the versions that VACUUM
# made unreadable (a data file they name is gone) are expired, in the commit that sets it (`vacuum.py`).
VACUUM_CHECKED_PROPERTY = "dvmirror.vacuum-checked"
# Properties every mirror table carries (older mirrors get them with their next commit):
SAFETY_PROPERTIES: Mapping[str, str] = {
    # No Iceberg procedure (expire_snapshots, remove_orphan_files) and no DROP TABLE ... PURGE may
    # delete the table's data files: they are Delta's. The mirror's own cleanup works around it.
    GC_ENABLED_PROPERTY: "false",
    # Every version rewrites metadata.json; keep a bounded history instead of all of them.
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "20",
    # The mirror re-plans from the log after a conflict; Iceberg must not re-apply a stale plan.
    "commit.retry.num-retries": "0",
}

# -- snapshot summary keys the mirror writes --------------------------------------------------------------
DELTA_VERSION_SUMMARY = "dvmirror.delta-version"  # the Delta version a snapshot mirrors
DELTA_OPERATION_SUMMARY = "dvmirror.delta-operation"  # that version's commitInfo.operation
DELTA_TIMESTAMP_SUMMARY = "dvmirror.delta-timestamp"  # that version's commitInfo.timestamp
# "true" on a snapshot committed by a mirror that names every data file by URI and knew of no bare path
# left (`MirrorState.recorded_paths`): older code committing after the table was marked leaves it out,
# so the next run looks for bare paths again rather than trusting URI_LOCATIONS_PROPERTY.
URI_LOCATIONS_SUMMARY = "dvmirror.uri-locations"

# Summary keys of a snapshot that changed the table's content (Iceberg's SnapshotSummary). A snapshot the
# mirror did not write is tolerated only without any of them: metadata-only maintenance such as
# rewrite_manifests.
CONTENT_SUMMARY_KEYS = (
    "added-data-files",
    "deleted-data-files",
    "added-delete-files",
    "removed-delete-files",
    "added-records",
    "deleted-records",
    "added-position-deletes",
    "removed-position-deletes",
    "added-equality-deletes",
    "removed-equality-deletes",
    "added-dvs",
    "removed-dvs",
)


# Iceberg's own summary keys (SnapshotSummary) the platform reports: the table's totals after a snapshot,
# and what the snapshot added.
TOTAL_RECORDS_SUMMARY = "total-records"
TOTAL_POSITION_DELETES_SUMMARY = "total-position-deletes"  # v3 DVs' rows are counted here too
TOTAL_EQUALITY_DELETES_SUMMARY = "total-equality-deletes"
TOTAL_DELETE_FILES_SUMMARY = "total-delete-files"  # a v3 DV is one delete-file entry
TOTAL_DATA_FILES_SUMMARY = "total-data-files"
ADDED_DVS_SUMMARY = "added-dvs"
ADDED_DELETE_FILES_SUMMARY = "added-delete-files"


def _total(summary: Mapping[str, str], key: str) -> int | None:
    return int(summary[key]) if key in summary else None


@dataclass(frozen=True)
class SnapshotTotals:
    """The table's totals after a snapshot as its summary records them; None where the summary has no
    such total (Iceberg drops a total it could not carry over)."""

    records: int | None
    position_deletes: int | None
    equality_deletes: int | None
    delete_files: int | None
    data_files: int | None = None

    @classmethod
    def of(cls, summary: Mapping[str, str]) -> SnapshotTotals:
        equality = summary.get(TOTAL_EQUALITY_DELETES_SUMMARY)
        return cls(
            records=_total(summary, TOTAL_RECORDS_SUMMARY),
            position_deletes=_total(summary, TOTAL_POSITION_DELETES_SUMMARY),
            equality_deletes=None if equality is None else int(equality or 0),
            delete_files=_total(summary, TOTAL_DELETE_FILES_SUMMARY),
            data_files=_total(summary, TOTAL_DATA_FILES_SUMMARY),
        )

    @property
    def live_rows_problem(self) -> str | None:
        """Why the summary cannot tell the live rows (None: it can)."""
        missing = [
            key
            for key, value in (
                (TOTAL_RECORDS_SUMMARY, self.records),
                (TOTAL_POSITION_DELETES_SUMMARY, self.position_deletes),
            )
            if value is None
        ]
        if missing:
            return f"the snapshot summary has no {', '.join(missing)}"
        if self.equality_deletes:
            return f"the snapshot has {self.equality_deletes} equality deletes; rows are not countable"
        return None

    @property
    def live_rows(self) -> int | None:
        """`total-records` - `total-position-deletes`: exact for the mirror, which writes one DV (or one set
        of position deletes) per data file and never two for one row. None (see `live_rows_problem`) when
        the summary lacks a total or holds equality deletes (not countable from metadata; the mirror
        never writes them)."""
        if self.live_rows_problem is not None or self.records is None or self.position_deletes is None:
            return None
        return self.records - self.position_deletes


def delta_version_of(summary: Mapping[str, str] | None) -> int | None:
    """The Delta version a snapshot summary records (None for a snapshot the mirror did not write)."""
    value = None if summary is None else summary.get(DELTA_VERSION_SUMMARY)
    return None if value is None else int(value)


@dataclass(frozen=True)
class Snapshot:
    snapshot_id: int
    parent_id: int | None
    timestamp_ms: int
    summary: Mapping[str, str]
    schema_id: int | None = None  # the table schema the snapshot was written with

    @property
    def delta_version(self) -> int | None:
        """The Delta version this snapshot mirrors (None for a snapshot the mirror did not write)."""
        return delta_version_of(self.summary)

    @property
    def delta_operation(self) -> str:
        """The Delta operation this snapshot mirrors ('' when unknown)."""
        return self.summary.get(DELTA_OPERATION_SUMMARY, "")

    @property
    def totals(self) -> SnapshotTotals:
        return SnapshotTotals.of(self.summary)

    @property
    def dvs_added(self) -> int:
        """The DVs (v3) or position-delete files (v2) the snapshot added."""
        return int(self.summary.get(ADDED_DVS_SUMMARY, self.summary.get(ADDED_DELETE_FILES_SUMMARY, 0)))

    @property
    def changed_content(self) -> bool:
        return any(self.summary.get(key, "0") not in ("0", "") for key in CONTENT_SUMMARY_KEYS)


@dataclass(frozen=True)
class MirrorTable:
    """An Iceberg table as the mirror sees it, read once: a value, not a handle."""

    name: str
    location: str
    format_version: int
    properties: Mapping[str, str]
    schema: Schema
    current_snapshot_id: int | None
    snapshots: tuple[Snapshot, ...]  # in the table's order (oldest first)
    schemas: Mapping[int, Schema] = field(default_factory=dict)  # schema id → schema, every one
    # The table's current metadata file: where a reader without the catalog (DuckDB, iceberg-rust) starts.
    metadata_location: str | None = None

    @classmethod
    def from_metadata(cls, name: str, metadata: Mapping[str, Any], metadata_location: str) -> MirrorTable:
        """The table of a metadata file's JSON (Iceberg's table spec; `TableMetadataParser.toJson`): read in
        one piece, whatever the number of snapshots. A snapshot's summary keeps its `operation`."""
        current = metadata.get("current-snapshot-id")
        schemas = {int(s["schema-id"]): Schema.from_json(s) for s in metadata.get("schemas", ())}
        return cls(
            name=name,
            location=metadata["location"],
            format_version=int(metadata["format-version"]),
            properties=dict(metadata.get("properties") or {}),
            schema=schemas[int(metadata["current-schema-id"])],
            current_snapshot_id=None if current is None or int(current) == -1 else int(current),
            snapshots=tuple(
                Snapshot(
                    snapshot_id=int(s["snapshot-id"]),
                    parent_id=None if s.get("parent-snapshot-id") is None else int(s["parent-snapshot-id"]),
                    timestamp_ms=int(s["timestamp-ms"]),
                    summary=dict(s.get("summary") or {}),
                    schema_id=None if s.get("schema-id") is None else int(s["schema-id"]),
                )
                for s in metadata.get("snapshots", ())
            ),
            schemas=schemas,
            metadata_location=metadata_location,
        )

    @property
    def current_snapshot(self) -> Snapshot | None:
        return self.snapshot(self.current_snapshot_id)

    def snapshot(self, snapshot_id: int | None) -> Snapshot | None:
        return next((s for s in self.snapshots if s.snapshot_id == snapshot_id), None)

    def schema_of(self, snapshot: Snapshot) -> Schema:
        """The schema the snapshot was written with (a version mirrored before a schema change keeps the
        old columns); the table's current one when the metadata does not say."""
        found = None if snapshot.schema_id is None else self.schemas.get(snapshot.schema_id)
        return found or self.schema

    @property
    def mirrored_base(self) -> Snapshot | None:
        """The newest snapshot in the current lineage that the mirror wrote: what the table shows now.

        Snapshots other writers added on top are tolerated when they changed no content (metadata-only
        maintenance such as rewrite_manifests); one that did is refused, never mirrored over.
        """
        by_id = {s.snapshot_id: s for s in self.snapshots}
        snapshot = self.current_snapshot
        while snapshot is not None:
            if snapshot.delta_version is not None:
                return snapshot
            if snapshot.changed_content:
                raise MirrorInputError(
                    f"Iceberg table {self.name}: snapshot {snapshot.snapshot_id} "
                    f"({snapshot.summary.get('operation', 'unknown operation')}) changed the table's "
                    "content outside dv-mirror; the mirror cannot be sure it is exact and refuses to "
                    "continue (roll it back to the last dv-mirror snapshot, or mirror into a new table)"
                )
            snapshot = None if snapshot.parent_id is None else by_id.get(snapshot.parent_id)
        return None

    @property
    def last_mirrored_version(self) -> int | None:
        """The Delta version the table shows now (see `mirrored_base`)."""
        base = self.mirrored_base
        return None if base is None else base.delta_version

    def mirror_snapshots(self) -> list[Snapshot]:
        """Snapshots that carry a Delta version, oldest first."""
        found = [s for s in self.snapshots if s.delta_version is not None]
        return sorted(found, key=lambda s: (s.timestamp_ms, s.delta_version))

    def snapshot_for_version(self, delta_version: int) -> Snapshot | None:
        """The newest retained snapshot recording `delta_version`, if any."""
        matching = [s for s in self.mirror_snapshots() if s.delta_version == delta_version]
        return matching[-1] if matching else None


@dataclass(frozen=True)
class NewTable:
    """What creating the mirror table needs; field ids are kept exactly as given."""

    schema: Schema
    partition_spec_json: dict[str, Any]
    properties: Mapping[str, str]


@dataclass(frozen=True)
class CommitRequest:
    """Everything one Delta version changes on the Iceberg side: one snapshot."""

    delta_version: int
    summary: Mapping[str, str]
    # The snapshot the plan was made against: the commit happens only while it is still current.
    base_snapshot_id: int | None = None
    # Made as iterated, possibly (plan.py `DataFiles`): a first version may add a million.
    add_data_files: Collection[DataFile] = ()
    remove_data_files: tuple[DataFile, ...] = ()
    add_delete_files: tuple[DeleteFile, ...] = ()
    remove_delete_files: tuple[DeleteFile, ...] = ()
    # Set when the Delta schema changed: the table's new schema, field ids exactly as given, and the
    # name mapping that goes with it.
    schema: Schema | None = None
    name_mapping: NameMapping | None = None
    # Table properties set in the same transaction (e.g. safety properties missing on older mirrors).
    properties: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CommitOutcome:
    snapshot_id: int
    schema: Schema  # the table's schema after the commit


@dataclass(frozen=True)
class ReferencedFiles:
    """The files one snapshot references besides data files: its manifest list and manifests
    (Iceberg's metadata) and its delete files (what expiring it may free, `maintenance.py`)."""

    metadata_files: frozenset[str] = field(default_factory=frozenset)
    delete_files: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class DeleteFileRow:
    """One delete file of the snapshot as Iceberg's `delete_files` metadata table lists it."""

    file_path: str
    referenced_data_file: str | None
    record_count: int


@dataclass(frozen=True)
class SnapshotFiles:
    """The live content files of a snapshot: its data files' paths and its delete files (DVs, position-
    and equality-delete files), each as the manifests name it."""

    data_files: frozenset[str]
    deletes: tuple[DeleteFileRow, ...]


# Iceberg's TableProperties: the metadata log's length, and whether a commit deletes what falls off it.
PREVIOUS_VERSIONS_MAX = "write.metadata.previous-versions-max"
PREVIOUS_VERSIONS_MAX_DEFAULT = 100
DELETE_AFTER_COMMIT = "write.metadata.delete-after-commit.enabled"
MAX_REF_AGE_MS = "history.expire.max-ref-age-ms"


@dataclass(frozen=True)
class TableHistory:
    """What expiry needs of a table, from its metadata JSON (Iceberg's table spec; either adapter): the
    snapshots with their parents and times, the refs, the metadata log and the properties."""

    location: str
    metadata_location: str
    properties: Mapping[str, str]
    snapshots: Mapping[int, tuple[int | None, int]]  # id -> (parent id, timestamp ms), in the table's order
    refs: Mapping[str, Mapping[str, Any]]  # name -> {"snapshot-id", "type", "min-snapshots-to-keep", ...}
    metadata_log: tuple[str, ...]  # previous metadata files, oldest first

    @classmethod
    def of(cls, metadata: Mapping[str, Any], metadata_location: str) -> TableHistory:
        refs = dict(metadata.get("refs") or {})
        current = metadata.get("current-snapshot-id")
        if not refs and current is not None and int(current) != -1:  # v1 metadata may carry no refs
            refs = {"main": {"snapshot-id": int(current), "type": "branch"}}
        return cls(
            location=str(metadata["location"]),
            metadata_location=metadata_location,
            properties=dict(metadata.get("properties") or {}),
            snapshots={
                int(s["snapshot-id"]): (
                    None if s.get("parent-snapshot-id") is None else int(s["parent-snapshot-id"]),
                    int(s["timestamp-ms"]),
                )
                for s in metadata.get("snapshots", ())
            },
            refs=refs,
            metadata_log=tuple(str(e["metadata-file"]) for e in metadata.get("metadata-log") or ()),
        )

    def ancestors(self, snapshot_id: int) -> list[int]:
        """`snapshot_id` and its ancestors still in the table, newest first (Iceberg's `ancestorsOf`)."""
        out: list[int] = []
        current: int | None = snapshot_id
        while current is not None and current in self.snapshots and current not in out:
            out.append(current)
            current = self.snapshots[current][0]
        return out

    def metadata_log_dropped_by_commit(self) -> list[str]:
        """The metadata files the next commit deletes: those that fall off the metadata log when the
        current file joins it (Iceberg's `TableMetadata.addPreviousFile` and
        `BaseMetastoreTableOperations.deleteRemovedMetadataFiles`), when delete-after-commit is on."""
        if self.properties.get(DELETE_AFTER_COMMIT, "false").lower() != "true":
            return []
        keep = max(1, int(self.properties.get(PREVIOUS_VERSIONS_MAX, PREVIOUS_VERSIONS_MAX_DEFAULT)))
        if len(self.metadata_log) < keep:
            return []
        return list(self.metadata_log[: len(self.metadata_log) - keep + 1])
