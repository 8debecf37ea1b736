"""What a Delta commit did and what a version holds, in the terms a person reads (files, DVs, rows),
from the log alone: the Dagster assets' metadata, the checks' expected rows, the demo's summary."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from dv_assets.mirror.delta.actions import AddFile
from dv_assets.mirror.delta.data_files import record_count
from dv_assets.mirror.delta.replay import DeltaTable, TableState, VersionChange
from dv_assets.mirror.delta.schema import StructType


def dv_cardinality(add: AddFile) -> int:
    return 0 if add.deletion_vector is None else add.deletion_vector.cardinality


def live_rows(state: TableState) -> int:
    """Rows of the table at that version from Delta's metadata alone: Σ numRecords - Σ DV cardinality."""
    return sum(record_count(f) - dv_cardinality(f) for f in state.files.values())


@dataclass(frozen=True)
class StatsRowCount:
    """Live rows of a version from the log's statistics alone (never a data file's footer)."""

    rows: int | None  # None when a live data file has no numRecords: the log cannot tell
    records: int  # Σ numRecords of the files that have it
    deleted_by_dvs: int  # Σ DV cardinality
    files: int
    files_without_stats: list[str]  # locations, sorted


def live_rows_from_stats(state: TableState) -> StatsRowCount:
    """Σ numRecords - Σ DV cardinality, as the log records them; refuses (rows None, the files named) when
    a file lacks numRecords rather than reading its Parquet footer, so a metadata-only check never
    guesses nor touches data."""
    missing = sorted(loc for loc, f in state.files.items() if f.num_records is None)
    records = sum(f.num_records or 0 for f in state.files.values())
    deleted = sum(dv_cardinality(f) for f in state.files.values())
    return StatsRowCount(
        rows=None if missing else records - deleted,
        records=records,
        deleted_by_dvs=deleted,
        files=len(state.files),
        files_without_stats=missing,
    )


def dv_cardinalities(state: TableState) -> dict[str, int]:
    """Data file location → its DV's cardinality, for the files of the version that carry a DV."""
    return {loc: f.deletion_vector.cardinality for loc, f in state.files.items() if f.deletion_vector}


@dataclass
class CommitFacts:
    """What one Delta commit did, in the terms a person reads: files, DVs, rows."""

    version: int
    operation: str
    timestamp_ms: int | None
    operation_parameters: dict
    data_files_added: int
    data_files_removed: int
    dvs_added: int
    dvs_updated: int
    dvs_removed: int  # DVs dropped: with their data file (OPTIMIZE, REORG PURGE, rewrites) or alone
    data_files_with_dv_removed: int
    rows_deleted_by_dvs: int  # Σ (new DV cardinality - old DV cardinality) of DV changes and new files
    rows_added: int  # live rows of the added data files
    rows_removed: int  # live rows of the removed data files
    live_rows: int
    live_data_files: int
    live_dvs: int
    files: list[dict] = field(default_factory=list)  # one row per touched file, for the UI table
    schema: StructType | None = None  # the version's Delta schema (`Metadata.schema`)


def _short(location: str, root: str) -> str:
    return location[len(root) + 1 :] if location.startswith(root + "/") else location


def commit_facts(delta: DeltaTable, version: int) -> CommitFacts:
    change: VersionChange = next(iter(delta.changes(version, version)))
    state = delta.state(version, with_stats=False)  # counts only: row counts survive without the stats text
    return facts_of(change, state, delta.table_root)


def facts_of(change: VersionChange, state: TableState, root: str) -> CommitFacts:
    files: list[dict] = []
    dvs_added = dvs_updated = dvs_removed = with_dv_removed = 0
    rows_deleted = rows_added = rows_removed = 0
    for add in change.added:
        rows_added += record_count(add) - dv_cardinality(add)
        if add.deletion_vector is not None:
            dvs_added += 1
        files.append({"file": _short(add.location, root), "change": "added", "dv_cardinality": None})
    for old in change.removed:
        rows_removed += record_count(old) - dv_cardinality(old)
        if old.deletion_vector is not None:
            with_dv_removed += 1
        files.append(
            {"file": _short(old.location, root), "change": "removed", "dv_cardinality": dv_cardinality(old)}
        )
    for before, after in change.dv_changed:
        if before.deletion_vector is None:
            dvs_added += 1
            kind = "DV added"
        elif after.deletion_vector is None:
            dvs_removed += 1
            kind = "DV removed"
        else:
            dvs_updated += 1
            kind = "DV updated"
        rows_deleted += dv_cardinality(after) - dv_cardinality(before)
        files.append(
            {"file": _short(after.location, root), "change": kind, "dv_cardinality": dv_cardinality(after)}
        )
    return CommitFacts(
        version=change.version,
        operation=change.operation or "UNKNOWN",
        timestamp_ms=change.commit_info.timestamp,
        operation_parameters=dict(change.commit_info.operation_parameters),
        data_files_added=len(change.added),
        data_files_removed=len(change.removed),
        dvs_added=dvs_added,
        dvs_updated=dvs_updated,
        dvs_removed=dvs_removed + with_dv_removed,
        data_files_with_dv_removed=with_dv_removed,
        rows_deleted_by_dvs=rows_deleted,
        rows_added=rows_added,
        rows_removed=rows_removed,
        live_rows=live_rows(state),
        live_data_files=len(state.files),
        live_dvs=sum(1 for f in state.files.values() if f.deletion_vector is not None),
        files=files,
        schema=change.metadata.schema if change.metadata is not None else None,
    )


def operation_parameters_text(facts: CommitFacts) -> str:
    return json.dumps(facts.operation_parameters, sort_keys=True)[:2000]


def drops_dv_files(change: VersionChange) -> bool:
    """True when the commit ended a DV the mirror copied: its data file removed (OPTIMIZE, REORG PURGE,
    a rewrite) or the DV itself replaced or dropped; the mirror's delete file then becomes garbage once
    the snapshots that reference it expire."""
    return any(f.deletion_vector is not None for f in change.removed) or any(
        before.deletion_vector is not None for before, _ in change.dv_changed
    )
