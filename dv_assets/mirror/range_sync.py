"""A run over a range of Delta versions (what one Dagster run of `iceberg/<source>` asks for): the
versions of the range the mirror already holds, the sync of those it does not (every version after the
mirror's up to the range's last, below the range too), and what became of each version of the range.

Plain values, no Dagster: the platform turns them into materializations and observations
(`dv_assets.defs.iceberg.assets`). Each version of the range ends as one of:

* mirrored by this run (`mirrored`, in commit order; with the versions below the range it mirrored
  first);
* already mirrored, its snapshot still retained (`existing`);
* already mirrored, its snapshot expired by a cleanup (`expired`);
* mirrored, then expired by the run itself after Delta's VACUUM deleted a data file it named
  (`vacuumed`, `dv_assets.mirror.vacuum`);
* before the mirror's first readable version: not readable in Delta any more (`unreadable`);
* none of these (`absent`): Delta has no such version; the caller fails the run.

A sync that raises ends the run there: the error is kept (`error`), with the versions committed before
it, which are in the table and so are still recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.iceberg.mirror_table import MirrorTable, Snapshot
from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table
from dv_assets.mirror.placement import DEFAULT_EXECUTOR_POLICY, ExecutorPolicy
from dv_assets.mirror.results import VersionResult
from dv_assets.mirror.settings import CatalogConfig
from dv_assets.mirror.status import (
    MirrorStatus,
    expired_versions,
    mirror_status,
    recorded_first_readable_version,
)
from dv_assets.mirror.sync import sync_table

Log = Callable[[str], None]


def versions_text(versions: Sequence[int]) -> str:
    return ", ".join(str(v) for v in versions)


@dataclass
class RangeSync:
    """What a run over `versions` (ascending) found and did; see the module's docstring."""

    iceberg_table: str
    versions: list[int]
    existing: dict[int, Snapshot] = field(default_factory=dict)
    expired: list[int] = field(default_factory=list)
    mirrored: list[VersionResult] = field(default_factory=list)
    vacuumed: list[int] = field(default_factory=list)
    first_readable: int | None = None  # the mirror's first readable Delta version (None: from 0)
    latest: int | None = None  # Delta's latest version, when the run synced
    error: Exception | None = None  # the sync's, when it raised

    @property
    def newest(self) -> int:
        return self.versions[-1]

    @property
    def span(self) -> str:
        """The range as `N` or `first..last`."""
        return str(self.newest) if len(self.versions) == 1 else f"{self.versions[0]}..{self.newest}"

    @property
    def unreadable(self) -> list[int]:
        first = self.first_readable
        return [] if first is None else [v for v in self.versions if v < first]

    @property
    def absent(self) -> list[int]:
        """The range's versions that are none of the others: Delta has no such version."""
        done = {r.delta_version for r in self.mirrored} | set(self.existing) | set(self.expired)
        done |= set(self.unreadable) | set(self.vacuumed)
        return [v for v in self.versions if v not in done]

    @property
    def mirrored_below(self) -> list[VersionResult]:
        """The versions mirrored first, below the range (a gap, or an earlier run that failed)."""
        return [r for r in self.mirrored if r.delta_version not in self.versions]

    def absent_text(self, delta_path: str) -> str:
        return (
            f"Delta version(s) {versions_text(self.absent)} do not exist in {delta_path} "
            f"(latest is {self.latest})"
        )


def _held(run: RangeSync, mirror: MirrorTable | None, log: Log) -> None:
    """The range's versions the mirror holds before the sync: retained snapshots and expired ones."""
    if mirror is None:
        return
    run.first_readable = recorded_first_readable_version(mirror)
    run.existing = {v: s for v in run.versions if (s := mirror.snapshot_for_version(v)) is not None}
    run.expired = expired_versions(mirror, run.versions)
    if run.expired:
        log(
            f"Delta version(s) {versions_text(run.expired)} already mirrored; their snapshots have expired "
            "(cleanup job): nothing to commit, recorded as expired"
        )
    if run.existing:
        log(f"Delta version(s) {versions_text(sorted(run.existing))} already mirrored")


def sync_range(
    spark: SparkSession,
    versions: Sequence[int],
    *,
    delta_path: str,
    iceberg_table: str,
    format_version: int,
    allowed_roots: Sequence[str] = (),
    executors: ExecutorPolicy = DEFAULT_EXECUTOR_POLICY,
    log: Log = lambda _: None,
) -> RangeSync:
    """Mirror every version not mirrored yet up to the last of `versions` (`sync_table`), after noting
    which of them the mirror already holds; `log` gets one line per finding and per version mirrored."""
    iceberg = IcebergJava(spark)
    mirror = iceberg.load(iceberg_table)
    run = RangeSync(iceberg_table, sorted(versions))
    _held(run, mirror, log)
    last = None if mirror is None else mirror.last_mirrored_version
    if last is not None and run.newest <= last:
        return _with_unreadable_logged(run, log)  # nothing to sync: every version is held (or absent)

    def on_version(result: VersionResult) -> None:
        run.mirrored.append(result)
        log(
            f"mirrored Delta version {result.delta_version} ({result.operation}) as snapshot "
            f"{result.snapshot_id}: {result.dvs_written} DVs, {result.bytes_written} bytes"
        )

    try:
        synced = sync_table(
            spark,
            delta_path,
            iceberg_table,
            format_version=format_version,
            until_version=run.newest,
            allowed_roots=allowed_roots,
            executors=executors,
            iceberg=iceberg,
            on_version=on_version,
        )
    except Exception as err:  # the versions committed before it are in the table: the caller records them
        run.error = err
        return run
    run.latest = synced.latest_delta_version
    run.vacuumed = [] if synced.vacuum is None else list(synced.vacuum.expired_versions)
    # Versions this run mirrored whose snapshots the VACUUM it followed expired: recorded as such.
    run.mirrored = [r for r in run.mirrored if r.delta_version not in run.vacuumed]
    run.existing = {v: s for v, s in run.existing.items() if v not in run.vacuumed}
    if synced.start_note is not None:
        log(f"{iceberg_table}: {synced.start_note}")
        run.first_readable = synced.first_readable_version
    return _with_unreadable_logged(run, log)


def _with_unreadable_logged(run: RangeSync, log: Log) -> RangeSync:
    if run.unreadable:
        log(
            f"Delta version(s) {versions_text(run.unreadable)} not mirrored: {run.iceberg_table} starts at "
            f"Delta version {run.first_readable}, the versions before it are no longer readable in Delta"
        )
    return run


def read_back(
    catalog: CatalogConfig, delta: DeltaTable, iceberg_table: str
) -> tuple[MirrorTable, MirrorStatus]:
    """The table as the catalog has it after a run (pyiceberg), and where it stands against `delta`."""
    mirror = read_mirror_table(catalog, iceberg_table)
    if mirror is None:
        raise ValueError(f"{iceberg_table} is not in the catalog {catalog.describe()}")
    return mirror, mirror_status(delta, mirror, iceberg_table)


def current_after(mirror: MirrorTable, newest: int) -> Snapshot | None:
    """The mirror's current version's snapshot when it is past `newest` (a run of older versions records
    it again, last, so that it stays the asset's latest); None otherwise."""
    current = mirror.mirrored_base
    if current is not None and current.delta_version is not None and current.delta_version > newest:
        return current
    return None
