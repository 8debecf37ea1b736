"""Plan of changes: what one Delta version means for the Iceberg mirror. Pure: no I/O.

The plan names Delta files; turning them into Iceberg content files (and DV blobs into Puffin or
position-delete files) is the writer's job (`dv_assets.mirror.sync`).
"""

from __future__ import annotations

from dataclasses import dataclass

from dv_assets.mirror.delta.actions import AddFile
from dv_assets.mirror.delta.replay import VersionChange


@dataclass(frozen=True)
class MirrorPlan:
    delta_version: int
    operation: str | None
    add_data_files: list[AddFile]
    remove_data_files: list[AddFile]
    # Live files (after this version) whose DV must be converted and committed: files added with a DV
    # and files whose DV changed to a new one.
    write_dvs: list[AddFile]
    # Data files (by location) whose current Iceberg delete file must go in this commit: a replaced or
    # dropped DV, or a removed data file that had one.
    drop_deletes_of: list[str]
    schema_changed: bool

    @property
    def rows_deleted_by_dvs(self) -> int:
        """Net change in DV-deleted rows among files that stay live (for metadata, not correctness)."""
        return sum(f.deletion_vector.cardinality for f in self.write_dvs if f.deletion_vector is not None)


def plan_version(change: VersionChange) -> MirrorPlan:
    drop = [f.location for f in change.removed if f.deletion_vector is not None]
    drop += [before.location for before, _ in change.dv_changed if before.deletion_vector is not None]
    write = [f for f in change.added if f.deletion_vector is not None]
    write += [after for _, after in change.dv_changed if after.deletion_vector is not None]
    return MirrorPlan(
        delta_version=change.version,
        operation=change.operation,
        add_data_files=list(change.added),
        remove_data_files=list(change.removed),
        write_dvs=write,
        drop_deletes_of=drop,
        schema_changed=change.metadata_changed,
    )
