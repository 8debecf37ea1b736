"""What a sync reports: per version mirrored, and per run. Plain values (no Spark in this module), so that
the answers given without a JVM (`dvmirror sync` when up to date) have the same shape as a sync's."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dv_assets.mirror.vacuum import VacuumFollowed


@dataclass
class VersionResult:
    delta_version: int
    snapshot_id: int
    operation: str | None
    data_files_added: int
    data_files_removed: int
    dvs_written: int
    deletes_replaced: int
    rows_deleted_by_new_dvs: int
    delete_files: list[str]
    bytes_written: int
    seconds: float
    dvs_converted_on: str = "none"  # "driver", "spark (N tasks on executor(s) …)" or "none"
    # Why there (`placement.py`): "driver: local master local[2]", "executors: 60000 DVs >= 50000 on spark://…"
    dv_placement: str = "none: no DVs"
    executor_threshold: str = ""  # the executors' threshold in force ("off", "50000 DVs or … bytes, on …")
    dv_seconds: float = 0.0  # of `seconds`: reading, verifying and writing the version's delete files
    commit_seconds: float = 0.0  # of `seconds`: the Iceberg transaction
    delta_commit_ms: int | None = None  # when Delta committed the version (CommitInfo.commit_ms)


@dataclass
class SyncResult:
    delta_table: str
    iceberg_table: str
    format_version: int
    previously_mirrored: int | None
    latest_delta_version: int
    versions: list[VersionResult] = field(default_factory=list)
    # A first sync that started after version 0: the first version Delta can still read, and the one line
    # saying why the versions before it are not mirrored (None: the sync started at version 0, or continued
    # a mirror).
    first_readable_version: int | None = None
    start_note: str | None = None
    # Delta's VACUUM followed by this run (`vacuum.py`): the snapshots it made unreadable, expired.
    vacuum: VacuumFollowed | None = None

    @property
    def mirrored_versions(self) -> list[int]:
        return [v.delta_version for v in self.versions]

    def to_json(self) -> dict:
        out = asdict(self)
        out["mirrored_versions"] = self.mirrored_versions
        out["dvs_written"] = sum(v.dvs_written for v in self.versions)
        out["bytes_written"] = sum(v.bytes_written for v in self.versions)
        return out
