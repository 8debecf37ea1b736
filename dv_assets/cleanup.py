"""Cleanup: expire Iceberg snapshots past each source's retention and reclaim the mirror's own files.

Iceberg's data files are Delta's data files, so Iceberg's own file cleanup must never run: snapshots are
expired with `cleanExpiredFiles(false)` and this module deletes only

* delete files the mirror wrote (`MirrorLayout.is_owned`: `<table location>/data/dvmirror-*`) that an
  expired snapshot referenced and no retained snapshot references;
* manifests and manifest lists of expired snapshots that no retained snapshot references, and only under
  `<table location>/metadata/` (Iceberg's own files);
* orphans: mirror-owned delete files no snapshot references at all (a crashed run's), once older than the
  source's `orphan_min_age_hours`, so files of a commit in flight are never taken.

Nothing else is ever deleted: no Delta data file, no Delta DV file, nothing in `_delta_log`.
"""

import time
from dataclasses import dataclass, field

import dagster as dg
from pydantic import Field
from pyspark.sql import SparkSession

from dv_assets.config import DeltaSource
from dv_assets.dv.reader import filesystem_and_path
from dv_assets.iceberg.commit import IcebergJava
from dv_assets.iceberg.layout import MirrorLayout
from dv_assets.sensors import CLEANUP_JOB_NAME, CLEANUP_OP_NAME
from resources.spark import IcebergSparkResource


@dataclass
class CleanupReport:
    source: str
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


@dataclass
class _References:
    delete_files: set[str] = field(default_factory=set)
    metadata_files: set[str] = field(default_factory=set)  # manifests and manifest lists


class _Referenced:
    """Files each snapshot references, reading every manifest once."""

    def __init__(self, spark: SparkSession, table) -> None:
        self._iceberg = spark._jvm.org.apache.iceberg
        self._table = table
        self._io = table.io()
        self._specs = table.specs()
        self._deletes_of_manifest: dict[str, set[str]] = {}

    def _manifest_deletes(self, manifest) -> set[str]:
        path = str(manifest.path())
        if path not in self._deletes_of_manifest:
            found: set[str] = set()
            entries = self._iceberg.ManifestFiles.readDeleteManifest(manifest, self._io, self._specs)
            iterator = entries.iterator()
            try:
                while iterator.hasNext():
                    found.add(str(iterator.next().location()))
            finally:
                entries.close()
            self._deletes_of_manifest[path] = found
        return self._deletes_of_manifest[path]

    def of(self, snapshots) -> _References:
        refs = _References()
        for snapshot in snapshots:
            manifest_list = snapshot.manifestListLocation()
            if manifest_list is not None:
                refs.metadata_files.add(str(manifest_list))
            for manifest in snapshot.allManifests(self._io):
                refs.metadata_files.add(str(manifest.path()))
            for manifest in snapshot.deleteManifests(self._io):
                refs.delete_files |= self._manifest_deletes(manifest)
        return refs


def _size_and_mtime(location: str) -> tuple[int, float] | None:
    filesystem, path = filesystem_and_path(location)
    info = filesystem.get_file_info(path)
    if info.size is None:
        return None
    mtime = info.mtime.timestamp() if info.mtime is not None else time.time()
    return info.size, mtime


def _owned_on_disk(layout: MirrorLayout) -> list[str]:
    import pyarrow.fs as pafs

    filesystem, path = filesystem_and_path(layout.delete_dir)
    listed = filesystem.get_file_info(pafs.FileSelector(path, allow_not_found=True, recursive=False))
    prefix = layout.delete_dir[: -len(path)] if layout.delete_dir.endswith(path) else ""
    out = []
    for info in listed:
        if info.type == pafs.FileType.File:
            location = prefix + info.path
            if layout.is_owned(location):
                out.append(location)
    return sorted(out)


def _under(location: str, folder: str) -> bool:
    return location.startswith(folder.rstrip("/") + "/")


def cleanup_source(
    spark: SparkSession, source: DeltaSource, *, dry_run: bool = False, now_ms: int | None = None
) -> CleanupReport:
    """Expire the source's snapshots past retention and delete what only they referenced."""
    report = CleanupReport(source.name, source.iceberg_table, dry_run=dry_run)
    iceberg = IcebergJava(spark)
    table = iceberg.load(source.iceberg_table)
    if table is None:
        return report
    location = iceberg.location(table).rstrip("/")
    layout = MirrorLayout(location)
    metadata_dir = f"{location}/metadata"
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    retention = source.retention

    before = list(table.snapshots())
    report.snapshots_before = len(before)
    cutoff = now_ms
    if retention.max_snapshot_age_hours is not None:
        cutoff = now_ms - int(retention.max_snapshot_age_hours * 3600 * 1000)
    expire = (
        table.expireSnapshots()
        .expireOlderThan(cutoff)
        .retainLast(retention.retain_last)
        # Never let Iceberg delete files: its data files are Delta's.
        .cleanExpiredFiles(False)
    )
    expired_ids = {int(s.snapshotId()) for s in expire.apply()}
    expired = [s for s in before if int(s.snapshotId()) in expired_ids]
    referenced = _Referenced(spark, table)
    expired_refs = referenced.of(expired)
    if expired and not dry_run:
        expire.commit()
        table.refresh()
    retained = [s for s in table.snapshots() if int(s.snapshotId()) not in expired_ids]
    retained_refs = referenced.of(retained)
    report.expired_snapshot_ids = sorted(expired_ids)
    report.retained_snapshots = len(retained)

    garbage_deletes = sorted(
        f for f in expired_refs.delete_files - retained_refs.delete_files if layout.is_owned(f)
    )
    garbage_metadata = sorted(
        f
        for f in expired_refs.metadata_files - retained_refs.metadata_files
        if _under(f, metadata_dir) and not layout.is_owned(f)
    )
    every_reference = expired_refs.delete_files | retained_refs.delete_files
    min_age_s = retention.orphan_min_age_hours * 3600
    orphans = []
    for f in _owned_on_disk(layout):
        if f in every_reference:
            continue
        stat = _size_and_mtime(f)
        if stat is not None and now_ms / 1000 - stat[1] >= min_age_s:
            orphans.append(f)

    for kind, files in (
        (report.deleted_delete_files, garbage_deletes),
        (report.deleted_metadata_files, garbage_metadata),
        (report.deleted_orphans, orphans),
    ):
        for f in files:
            # The last guard: only the mirror's delete files and Iceberg's own metadata, never Delta's.
            if not (layout.is_owned(f) or _under(f, metadata_dir)):
                continue
            stat = _size_and_mtime(f)
            if stat is None:
                continue
            if not dry_run:
                filesystem, path = filesystem_and_path(f)
                filesystem.delete_file(path)
            kind.append(f)
            report.bytes_reclaimed += stat[0]
    return report


def report_metadata(report: CleanupReport) -> dict[str, dg.MetadataValue]:
    listed = report.deleted_delete_files + report.deleted_orphans
    return {
        "snapshots_before": dg.MetadataValue.int(report.snapshots_before),
        "snapshots_expired": dg.MetadataValue.int(len(report.expired_snapshot_ids)),
        "snapshots_retained": dg.MetadataValue.int(report.retained_snapshots),
        "delete_files_reclaimed": dg.MetadataValue.int(len(report.deleted_delete_files)),
        "metadata_files_reclaimed": dg.MetadataValue.int(len(report.deleted_metadata_files)),
        "orphans_reclaimed": dg.MetadataValue.int(len(report.deleted_orphans)),
        "files_reclaimed": dg.MetadataValue.int(report.files_reclaimed),
        "bytes_reclaimed": dg.MetadataValue.int(report.bytes_reclaimed),
        "dry_run": dg.MetadataValue.bool(report.dry_run),
        "mirror_files_deleted": dg.MetadataValue.md(
            "\n".join(f"- `{f.rsplit('/', 1)[-1]}`" for f in listed[:50]) or "none"
        ),
    }


class CleanupConfig(dg.Config):
    sources: list[str] = Field(default_factory=list, description="source names to clean; empty: all")
    dry_run: bool = Field(default=False, description="report what would be reclaimed, delete nothing")


def build_cleanup_job(sources: list[DeltaSource]) -> dg.JobDefinition:
    by_name = {s.name: s for s in sources}

    @dg.op(
        name=CLEANUP_OP_NAME,
        description="Expire snapshots past retention (Iceberg's file cleanup off) and delete only the "
        "mirror's own files nothing retained references.",
    )
    def expire_and_clean(
        context: dg.OpExecutionContext, config: CleanupConfig, spark: IcebergSparkResource
    ) -> dg.Output[dict]:
        unknown = [n for n in config.sources if n not in by_name]
        if unknown:
            raise dg.Failure(description=f"unknown sources {unknown}; configured: {sorted(by_name)}")
        session = spark.get_session()
        totals = {"files_reclaimed": 0, "bytes_reclaimed": 0, "snapshots_expired": 0}
        rows = []
        for name in config.sources or list(by_name):
            source = by_name[name]
            report = cleanup_source(session, source, dry_run=config.dry_run)
            context.log.info(
                f"{name}: expired {len(report.expired_snapshot_ids)} of {report.snapshots_before} "
                f"snapshots, reclaimed {report.files_reclaimed} files, {report.bytes_reclaimed} bytes"
            )
            context.log_event(
                dg.AssetObservation(
                    asset_key=dg.AssetKey(source.mirror_asset_key), metadata=report_metadata(report)
                )
            )
            totals["files_reclaimed"] += report.files_reclaimed
            totals["bytes_reclaimed"] += report.bytes_reclaimed
            totals["snapshots_expired"] += len(report.expired_snapshot_ids)
            rows.append(
                f"| {name} | {len(report.expired_snapshot_ids)} | {report.retained_snapshots} | "
                f"{report.files_reclaimed} | {report.bytes_reclaimed} |"
            )
        table = "\n".join(
            [
                "| source | snapshots expired | retained | files reclaimed | bytes reclaimed |",
                "|---|--:|--:|--:|--:|",
                *rows,
            ]
        )
        return dg.Output(
            totals,
            metadata={
                "files_reclaimed": dg.MetadataValue.int(totals["files_reclaimed"]),
                "bytes_reclaimed": dg.MetadataValue.int(totals["bytes_reclaimed"]),
                "snapshots_expired": dg.MetadataValue.int(totals["snapshots_expired"]),
                "by_source": dg.MetadataValue.md(table),
            },
        )

    @dg.job(
        name=CLEANUP_JOB_NAME,
        description="Expire Iceberg snapshots past each source's retention; reclaim only mirror-owned files.",
        tags={"dvmirror/kind": "cleanup"},
    )
    def cleanup() -> None:
        expire_and_clean()

    return cleanup
