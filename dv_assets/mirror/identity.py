"""The mirror's identity: is this Iceberg table dv-mirror's mirror of this Delta table, and where does the
Delta log continue it. Each check refuses (MirrorInputError) rather than write to a table it cannot be
sure of; only `first_version_to_mirror` (and `mirror_position`, which calls it) reads storage (the Delta
log, through `DeltaTable`).
"""

from __future__ import annotations

from dv_assets.mirror.delta.replay import DeltaTable, VersionChange
from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.iceberg.mirror_table import (
    DELTA_TABLE_PROPERTY,
    DELTA_TIMESTAMP_SUMMARY,
    MirrorTable,
    Snapshot,
)
from dv_assets.mirror.locations import comparable, same_location


def check_apart(table_location: str, delta_root: str, table_name: str) -> None:
    """The Iceberg table's folder and the Delta table's must not contain one another: the mirror writes
    and deletes files in its own folder only."""
    mirror, delta = comparable(table_location).rstrip("/"), comparable(delta_root).rstrip("/")
    if mirror == delta or mirror.startswith(delta + "/") or delta.startswith(mirror + "/"):
        raise MirrorInputError(
            f"the Iceberg table {table_name} would live at {table_location}, which overlaps the Delta table; "
            "use a warehouse outside the Delta table's folder",
            table=delta_root,
        )


def check_is_mirror_of(table: MirrorTable, delta_root: str, format_version: int | None) -> None:
    """An existing Iceberg table is written only when it is dv-mirror's mirror of this Delta table, in the
    format version asked for (None: any)."""
    mirrored_from = table.properties.get(DELTA_TABLE_PROPERTY)
    if mirrored_from is None:
        raise MirrorInputError(
            f"Iceberg table {table.name} exists and is not a dv-mirror mirror (no {DELTA_TABLE_PROPERTY} "
            "property); refusing to write to it: choose another table name",
            table=delta_root,
        )
    if not same_location(mirrored_from, delta_root):
        raise MirrorInputError(
            f"Iceberg table {table.name} mirrors {mirrored_from}, not this table", table=delta_root
        )
    check_apart(table.location, delta_root, table.name)
    if format_version is not None and format_version != table.format_version:
        raise MirrorInputError(
            f"the Iceberg table is format version {table.format_version}, not {format_version}",
            table=delta_root,
        )


def mirror_position(
    delta: DeltaTable, table: MirrorTable, format_version: int | None, latest: int, target: int
) -> tuple[int | None, int]:
    """An existing mirror's last mirrored Delta version (None: none yet) and the next version to mirror,
    once it is known to be this Delta table's mirror, in `format_version` (None: any), continued by the log.
    The one answer of "is there anything to do", whichever adapter (Iceberg Java, pyiceberg) read `table`."""
    check_is_mirror_of(table, delta.table_root, format_version)
    base = table.mirrored_base
    start = first_version_to_mirror(delta, table, base, latest, target)
    return (None if base is None else base.delta_version), start


def first_version_to_mirror(
    delta: DeltaTable, table: MirrorTable, base: Snapshot | None, latest: int, target: int
) -> int:
    """The next Delta version to mirror, after checking that the log still continues the mirror."""
    oldest = delta.oldest_version()
    if base is None or base.delta_version is None:
        return oldest
    last = base.delta_version
    if last > latest:
        raise MirrorInputError(
            f"the mirror {table.name} is at Delta version {last}, but the Delta table's latest version is "
            f"{latest}: the folder no longer holds the table that was mirrored",
            table=delta.table_root,
        )
    mirrored_at = base.summary.get(DELTA_TIMESTAMP_SUMMARY) or None
    commit_info = delta.commit_info(last)
    logged_at = None if commit_info is None else commit_info.timestamp_text or None
    if mirrored_at is not None and logged_at is not None and mirrored_at != logged_at:
        raise MirrorInputError(
            f"Delta version {last} was committed at {logged_at}, but the mirror's version {last} at "
            f"{mirrored_at}: the folder now holds another Delta table",
            table=delta.table_root,
            version=last,
        )
    if last < target and last < oldest:
        raise MirrorInputError(
            f"the mirror {table.name} is at Delta version {last}, but the Delta log no longer holds the "
            f"commits after it (the oldest version it can reconstruct is {oldest}: log retention removed "
            "the others); the mirror cannot follow exactly: mirror the table into a new Iceberg table",
            table=delta.table_root,
            version=last + 1,
        )
    return last + 1


def check_same_delta_table(change: VersionChange, delta_table_id: str | None, delta_root: str) -> None:
    """Every version mirrored comes from the Delta table the mirror was made of (`delta_table_id`, its
    metaData.id; None when the mirror did not record it), or from that table replaced within its own log.

    CREATE OR REPLACE TABLE (and REPLACE TABLE) gives the table a new metaData.id, but its log goes on: the
    next version of the same `_delta_log`, the versions before it still there for time travel. The mirror
    follows such a version (it records the new id with that version's commit, `plan.py`): the id of the
    version before it (`previous_metadata_id`) is still the mirror's, so the log the mirror is continuing
    is the one it mirrored (`first_version_to_mirror` has also checked, by its commit, that the version
    last mirrored is still there, unchanged). Anything else with another id is another table: a folder
    deleted and re-created holds a log whose every version has the new id."""
    if delta_table_id is None or change.metadata.id == delta_table_id:
        return
    if change.previous_metadata_id == delta_table_id:
        return  # replaced in this very version: the same log under a new id
    raise MirrorInputError(
        f"the Delta table's id is {change.metadata.id}, the mirror's is {delta_table_id}: the "
        "folder now holds another Delta table; mirror it into a new Iceberg table",
        table=delta_root,
        version=change.version,
    )
