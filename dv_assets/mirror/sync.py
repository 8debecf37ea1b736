"""sync_table(): mirror every Delta version not yet mirrored, each as one Iceberg snapshot.

Delta log → plan of changes (`plan.py`) → delete files written (Puffin for v3, Parquet for v2) →
one Iceberg transaction (`iceberg/java.py`). A failure at any step leaves the Iceberg table at its
last mirrored version and removes what this run wrote; the next run starts again from there.

Words: to *sync* is the act (the CLI's `dvmirror sync`); the *mirror* is the Iceberg table it keeps.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from dv_assets.mirror.delta.actions import AddFile, Metadata
from dv_assets.mirror.delta.column_mapping import check_field_ids_readable
from dv_assets.mirror.delta.data_files import check_data_files_present, record_count
from dv_assets.mirror.delta.paths import PathPolicy, table_root_of
from dv_assets.mirror.delta.replay import DeltaTable, VersionChange
from dv_assets.mirror.dv.reader import DVTask, resolve_dv_location
from dv_assets.mirror.errors import (
    InvalidDeletionVectorError,
    MirrorConflictError,
    MirrorInputError,
    UnsupportedFeatureError,
)
from dv_assets.mirror.iceberg import metrics as iceberg_metrics
from dv_assets.mirror.iceberg import schema as iceberg_schema
from dv_assets.mirror.iceberg.content_files import DataFile, DeleteFile
from dv_assets.mirror.iceberg.delete_files import DeleteFileJob, write_delete_files, write_on_executors
from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.iceberg.layout import MirrorLayout, comparable
from dv_assets.mirror.iceberg.mirror_table import (
    DELTA_OPERATION_SUMMARY,
    DELTA_PARTITION_COLUMNS_PROPERTY,
    DELTA_TABLE_ID_PROPERTY,
    DELTA_TABLE_PROPERTY,
    DELTA_TIMESTAMP_SUMMARY,
    NAME_MAPPING_PROPERTY,
    SAFETY_PROPERTIES,
    CommitRequest,
    MirrorTable,
    NewTable,
    Snapshot,
)
from dv_assets.mirror.iceberg.types import Schema
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.plan import MirrorPlan, plan_version
from dv_assets.mirror.settings import DEFAULT_EXECUTOR_DVS

DEFAULT_FORMAT_VERSION = 3
# A v2 mirror writes one row per deleted position: a DV claiming more than this many is checked against
# the data file's own row count (its Parquet footer), not only against stats that may over-state it.
LARGE_DV_POSITIONS = 1 << 20
# Columns Delta writers put in data files without the table schema having them, with the field ids
# their name-mapping entries use: below Iceberg's reserved ids, far above any id a schema here reaches.
PHYSICAL_ONLY_COLUMNS = {"_change_type": 2_147_482_000}


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
    dv_seconds: float = 0.0  # of `seconds`: reading, verifying and writing the version's delete files
    commit_seconds: float = 0.0  # of `seconds`: the Iceberg transaction


@dataclass
class SyncResult:
    delta_table: str
    iceberg_table: str
    format_version: int
    previously_mirrored: int | None
    latest_delta_version: int
    versions: list[VersionResult] = field(default_factory=list)

    @property
    def mirrored_versions(self) -> list[int]:
        return [v.delta_version for v in self.versions]

    def to_json(self) -> dict:
        out = asdict(self)
        out["mirrored_versions"] = self.mirrored_versions
        out["dvs_written"] = sum(v.dvs_written for v in self.versions)
        out["bytes_written"] = sum(v.bytes_written for v in self.versions)
        return out


def sync_table(
    spark: SparkSession,
    delta_path: str | Path,
    table_name: str,
    *,
    format_version: int | None = None,
    until_version: int | None = None,
    on_version: Callable[[VersionResult], None] | None = None,
    allowed_roots: Sequence[str] = (),
    executor_threshold: int | None = DEFAULT_EXECUTOR_DVS,
    iceberg: IcebergJava | None = None,
    io: FileIO | None = None,
) -> SyncResult:
    """Mirror Delta versions (last mirrored, min(until_version, latest)] into Iceberg `table_name`.

    Files the log names must be inside the Delta table's root or one of `allowed_roots`. A version with
    at least `executor_threshold` DVs converts them in Spark tasks (None: always on the driver).
    `iceberg` and `io` are the seams to Iceberg Java and to storage (defaults: the session's catalog
    and a `FileIO` with its storage properties); tests pass their own to inject faults.
    """
    iceberg = iceberg or IcebergJava(spark)
    io = io or FileIO(iceberg.storage_properties())
    delta_root = table_root_of(delta_path)
    paths = PathPolicy.of(delta_root, allowed_roots)
    delta = DeltaTable(delta_root, io=io)
    latest = delta.latest_version()
    target = latest if until_version is None else min(until_version, latest)

    table = iceberg.load(table_name)
    deletes: dict[str, DeleteFile] = {}
    base_snapshot_id: int | None = None  # every commit goes on top of the snapshot it was planned on
    pending_properties: dict[str, str] = {}
    stale_mapping = False
    expected_table_id: str | None = None
    if table is None:
        last_mirrored = None
        start = delta.oldest_version()
        fmt = format_version or DEFAULT_FORMAT_VERSION
        current_schema: Schema | None = None
        _check_apart(iceberg.default_location(table_name), delta_root, table_name)
    else:
        _check_mirrors(table, delta_root)
        fmt = table.format_version
        if format_version is not None and format_version != fmt:
            raise MirrorInputError(
                f"the Iceberg table is format version {fmt}, not {format_version}", table=delta_root
            )
        base = table.mirrored_base
        last_mirrored = None if base is None else base.delta_version
        start = _first_version_to_mirror(delta, table, base, latest, target)
        base_snapshot_id = table.current_snapshot_id
        if start <= target:
            deletes = iceberg.delete_files_by_data_file(table_name, base_snapshot_id)
        current_schema = table.schema
        pending_properties = {k: v for k, v in SAFETY_PROPERTIES.items() if table.properties.get(k) != v}
        # Mirrors made before a physical-only column was mapped get the full mapping with their next commit.
        stale_mapping = any(
            f'"{name}"' not in table.properties.get(NAME_MAPPING_PROPERTY, "")
            for name in PHYSICAL_ONLY_COLUMNS
        )
        expected_table_id = table.properties.get(DELTA_TABLE_ID_PROPERTY)

    result = SyncResult(delta_root, table_name, fmt, last_mirrored, latest)
    if start > target:
        return result

    for change in delta.changes(start, target):
        began = time.monotonic()
        if expected_table_id is not None and change.metadata.id != expected_table_id:
            raise MirrorInputError(
                f"the Delta table's id is {change.metadata.id}, the mirror's is {expected_table_id}: the "
                "folder now holds another Delta table; mirror it into a new Iceberg table",
                table=delta_root,
                version=change.version,
            )
        plan = plan_version(change)
        location = iceberg.default_location(table_name) if table is None else table.location
        layout = MirrorLayout(location)
        written: list[DeleteFile] = []
        # Once a commit may have landed, nothing it references may be deleted; leftovers of a commit
        # that did not land are orphans for the cleanup job.
        commit_attempted = False
        try:
            new_table = None
            if table is None:
                new_table = _new_table(change.metadata, delta_root, fmt)
                current_schema = new_table.schema
            elif change.metadata_changed:
                _check_partitioning_unchanged(change.metadata, table)
            if new_table is not None or change.metadata_changed:
                check_field_ids_readable(change.metadata.schema, change.metadata.column_mapping_mode)
            assert current_schema is not None
            for add in plan.add_data_files:
                paths.check(add.location, what="data file")
            check_data_files_present(plan.add_data_files, io)
            dv_began = time.monotonic()
            converted_on = _write_deletes(
                spark,
                delta_root,
                plan,
                change,
                fmt,
                layout,
                current_schema,
                io,
                paths,
                executor_threshold,
                written,
            )
            dv_seconds = time.monotonic() - dv_began
            request = _commit_request(change, plan, deletes, written, current_schema, delta_root, io)
            request = dataclasses.replace(
                request, base_snapshot_id=base_snapshot_id, properties=pending_properties
            )
            if stale_mapping and request.name_mapping is None:
                request = dataclasses.replace(
                    request, name_mapping=_name_mapping(current_schema, change.metadata)
                )
            if new_table is not None:
                # Created only once its first version is known to be mirrorable.
                table = iceberg.create(table_name, new_table, location)
                expected_table_id = change.metadata.id
            commit_attempted = True
            commit_began = time.monotonic()
            outcome = iceberg.commit(table_name, request)
            commit_seconds = time.monotonic() - commit_began
            current_schema = outcome.schema
        except MirrorInputError as err:
            if not commit_attempted:
                io.delete_quietly(f.path for f in written if layout.is_owned(f.path))
            raise err.at(table=delta_root, version=change.version) from None
        except MirrorConflictError:
            io.delete_quietly(f.path for f in written if layout.is_owned(f.path))  # known not to be committed
            raise
        except BaseException:
            if not commit_attempted:
                io.delete_quietly(f.path for f in written if layout.is_owned(f.path))
            raise
        base_snapshot_id = outcome.snapshot_id
        pending_properties, stale_mapping = {}, False
        for data_file in plan.drop_deletes_of:
            deletes.pop(data_file, None)
        for delete_file in written:
            deletes[delete_file.referenced_data_file] = delete_file
        version_result = VersionResult(
            delta_version=change.version,
            snapshot_id=outcome.snapshot_id,
            operation=change.operation,
            data_files_added=len(plan.add_data_files),
            data_files_removed=len(plan.remove_data_files),
            dvs_written=len(plan.write_dvs),
            deletes_replaced=len(plan.drop_deletes_of),
            rows_deleted_by_new_dvs=plan.rows_deleted_by_dvs,
            delete_files=sorted({f.path for f in written}),
            bytes_written=sum({f.path: f.file_size_in_bytes for f in written}.values()),
            seconds=round(time.monotonic() - began, 3),
            dvs_converted_on=converted_on,
            dv_seconds=round(dv_seconds, 6),
            commit_seconds=round(commit_seconds, 6),
        )
        result.versions.append(version_result)
        if on_version is not None:
            on_version(version_result)
    return result


# -- the mirror's identity ----------------------------------------------------------------------------


def _check_apart(table_location: str, delta_root: str, table_name: str) -> None:
    """The Iceberg table's folder and the Delta table's must not contain one another: the mirror writes
    and deletes files in its own folder only."""
    mirror, delta = comparable(table_location).rstrip("/"), comparable(delta_root).rstrip("/")
    if mirror == delta or mirror.startswith(delta + "/") or delta.startswith(mirror + "/"):
        raise MirrorInputError(
            f"the Iceberg table {table_name} would live at {table_location}, which overlaps the Delta table; "
            "use a warehouse outside the Delta table's folder",
            table=delta_root,
        )


def _check_mirrors(table: MirrorTable, delta_root: str) -> None:
    """An existing Iceberg table is written only when it is dv-mirror's mirror of this Delta table."""
    mirrored_from = table.properties.get(DELTA_TABLE_PROPERTY)
    if mirrored_from is None:
        raise MirrorInputError(
            f"Iceberg table {table.name} exists and is not a dv-mirror mirror (no {DELTA_TABLE_PROPERTY} "
            "property); refusing to write to it: choose another table name",
            table=delta_root,
        )
    if mirrored_from != delta_root:
        raise MirrorInputError(
            f"Iceberg table {table.name} mirrors {mirrored_from}, not this table", table=delta_root
        )
    _check_apart(table.location, delta_root, table.name)


def _first_version_to_mirror(
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
    logged_at = None if commit_info is None else str(commit_info.get("timestamp", "")) or None
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


# -- Delta version → Iceberg content ------------------------------------------------------------------


def _new_table(metadata: Metadata, delta_root: str, fmt: int) -> NewTable:
    mode = metadata.column_mapping_mode
    schema = iceberg_schema.to_iceberg_schema(metadata.schema, mode)
    return NewTable(
        schema=schema,
        partition_spec_json=iceberg_schema.partition_spec(schema, metadata.partition_columns),
        properties={
            "format-version": str(fmt),
            DELTA_TABLE_PROPERTY: delta_root,
            DELTA_TABLE_ID_PROPERTY: metadata.id,
            DELTA_PARTITION_COLUMNS_PROPERTY: json.dumps(list(metadata.partition_columns)),
            **SAFETY_PROPERTIES,
            **iceberg_metrics.MIRROR_TABLE_PROPERTIES,
            NAME_MAPPING_PROPERTY: json.dumps(_name_mapping(schema, metadata)),
        },
    )


def _name_mapping(schema: Schema, metadata: Metadata) -> list[dict]:
    """The table's name mapping, plus Delta's physical-only columns: data files may carry columns the
    schema does not have (Databricks writes CDF's `_change_type` into UPDATE/MERGE files). Delta readers
    and Iceberg Java skip them; pyiceberg needs each file column mapped to some id, and one the schema
    never has is projected away."""
    mapping = iceberg_schema.name_mapping(schema, metadata.schema, metadata.column_mapping_mode)
    taken = {entry["field-id"] for entry in mapping} | {f.id for f in schema.fields}
    names = {name for entry in mapping for name in entry["names"]}
    for name, field_id in PHYSICAL_ONLY_COLUMNS.items():
        if name not in names and field_id not in taken:
            mapping.append({"field-id": field_id, "names": [name]})
    return mapping


def _check_partitioning_unchanged(metadata: Metadata, table: MirrorTable) -> None:
    """Delta can only change partition columns by rewriting the table; the mirror refuses to follow."""
    mirrored = table.properties.get(DELTA_PARTITION_COLUMNS_PROPERTY)
    if mirrored is not None and json.loads(mirrored) != list(metadata.partition_columns):
        raise UnsupportedFeatureError(
            f"the partition columns changed from {json.loads(mirrored)} to "
            f"{list(metadata.partition_columns)}; mirror the rewritten table into a new Iceberg table"
        )


def _partition(add: AddFile, metadata: Metadata, schema: Schema) -> tuple:
    """The data file's partition tuple as Iceberg single-value JSON, in partition-spec order."""
    physical = metadata.physical_names
    return tuple(
        iceberg_schema.partition_value(add.partition_values.get(physical[column]), schema, column)
        for column in metadata.partition_columns
    )


def _write_deletes(
    spark: SparkSession,
    delta_root: str,
    plan: MirrorPlan,
    change: VersionChange,
    fmt: int,
    layout: MirrorLayout,
    schema: Schema,
    io: FileIO,
    paths: PathPolicy,
    executor_threshold: int | None,
    written: list[DeleteFile],
) -> str:
    """Convert the version's new DVs and write them as Puffin (v3) or position deletes (v2), into
    `written`; on the driver, or as Spark tasks when there are at least `executor_threshold` DVs.
    Returns where the work ran, for the version's report."""
    tasks = [
        DVTask.of(delta_root, add.deletion_vector, data_file=add.location, num_records=_rows(add, fmt, io))
        for add in plan.write_dvs
        if add.deletion_vector is not None
    ]
    if not tasks:
        return "none"
    for task in tasks:
        location = resolve_dv_location(task.table_root, task.storage_type, task.path_or_inline_dv)
        if location is not None:
            try:
                paths.check(location, what="deletion vector file")
            except MirrorInputError as err:
                raise InvalidDeletionVectorError(err.reason, file=task.data_file) from None
    job = DeleteFileJob(
        tasks=tuple(tasks),
        partitions={add.location: _partition(add, change.metadata, schema) for add in plan.write_dvs},
        format_version=fmt,
        layout=layout,
        delta_version=change.version,
    )
    if executor_threshold is not None and len(tasks) >= executor_threshold:
        on_executors, run = write_on_executors(spark, job, io)
        written += on_executors
        return str(run)
    write_delete_files(job, io, written)
    return "driver"


def _rows(add: AddFile, fmt: int, io: FileIO) -> int:
    """The data file's row count, the bound every DV position is checked against."""
    rows = record_count(add, io)
    dv = add.deletion_vector
    if fmt < 3 and dv is not None and dv.cardinality > LARGE_DV_POSITIONS:
        in_file = io.parquet_row_count(add.location)
        if in_file != rows:
            raise InvalidDeletionVectorError(
                f"the data file has {in_file} rows but its stats say {rows}; its DV of {dv.cardinality} "
                "positions cannot be checked",
                file=add.location,
            )
    return rows


def _data_file(add: AddFile, metadata: Metadata, schema: Schema, io: FileIO) -> DataFile:
    return DataFile(
        path=add.location,
        partition=_partition(add, metadata, schema),
        file_size_in_bytes=add.size,
        record_count=record_count(add, io),
        metrics=iceberg_metrics.from_delta_stats(add.stats, schema, metadata),
    )


def _removed_data_file(add: AddFile, metadata: Metadata, schema: Schema) -> DataFile:
    """A data file to remove: Iceberg matches it by path, so neither its rows nor its metrics are
    needed (VACUUM may have deleted the file already)."""
    return DataFile(
        path=add.location,
        partition=_partition(add, metadata, schema),
        file_size_in_bytes=add.size,
        record_count=add.num_records or 0,
    )


def _commit_request(
    change: VersionChange,
    plan: MirrorPlan,
    deletes: dict[str, DeleteFile],
    added_deletes: list[DeleteFile],
    schema: Schema,
    delta_root: str,
    io: FileIO,
) -> CommitRequest:
    metadata = change.metadata
    new_schema = None
    if plan.schema_changed:
        evolved = iceberg_schema.evolve(schema, metadata.schema, metadata.column_mapping_mode)
        if evolved.fields != schema.fields:
            new_schema = evolved
    missing = [loc for loc in plan.drop_deletes_of if loc not in deletes]
    if missing:
        raise MirrorInputError(
            "the mirror has no delete file for a Delta DV it should replace (was the Iceberg table changed "
            "outside dv-mirror?)",
            table=delta_root,
            version=change.version,
            file=missing[0],
        )
    return CommitRequest(
        delta_version=change.version,
        summary={
            DELTA_OPERATION_SUMMARY: change.operation or "",
            DELTA_TIMESTAMP_SUMMARY: str(change.commit_info.get("timestamp", "")),
        },
        add_data_files=tuple(_data_file(f, metadata, new_schema or schema, io) for f in plan.add_data_files),
        remove_data_files=tuple(_removed_data_file(f, metadata, schema) for f in plan.remove_data_files),
        add_delete_files=tuple(added_deletes),
        # Every replaced delete goes explicitly, the DV of a removed data file too: Iceberg (v3) does not
        # always drop it itself, and a dangling DV comes back to life when RESTORE re-adds the file.
        remove_delete_files=tuple(deletes[loc] for loc in plan.drop_deletes_of),
        schema=new_schema,
        name_mapping=None if new_schema is None else _name_mapping(new_schema, metadata),
    )
