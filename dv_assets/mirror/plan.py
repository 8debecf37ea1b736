"""Translation: what one Delta version makes of the Iceberg mirror, as values. Pure: no storage, no Iceberg.

`plan_version(change, state, rows, paths)` turns a `VersionChange` and the mirror's `MirrorState` into a
`VersionPlan`: the `NewTable` to create for the first mirrored version, the `DeleteFileJob` that converts
the version's new DVs into delete files, and the version's `CommitRequest` (schema, name mapping, data
files with their metrics, the delete files it replaces, summary, properties, base snapshot), built whole
by `plan.commit_request(written)` once the job has written its delete files, the one part that cannot
exist before. `plan_version` refuses what the version's metadata, DV locations and replaced delete files
make impossible, before anything is written; `commit_request` translates the data files' partition
values and stats.

What needs storage is read before and passed in as values: `rows`, the row count of every data file the
version adds or gives a new DV (the files `files_to_count(change)` names; `sync.py` reads them, once it
has checked that the files the version adds are allowed and present). The job runs in
`iceberg/delete_files.py` (`run_delete_job`), on the driver or in Spark tasks. Once the commit has
landed, `state.after(...)` is the state the next version is planned on.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import repeat

from dv_assets.mirror.delta.actions import AddFile, Metadata
from dv_assets.mirror.delta.column_mapping import check_field_ids_readable, mapping_id
from dv_assets.mirror.delta.paths import PathPolicy
from dv_assets.mirror.delta.replay import VersionChange
from dv_assets.mirror.dv.reader import DVTask, resolve_dv_location
from dv_assets.mirror.errors import InvalidDeletionVectorError, MirrorInputError, UnsupportedFeatureError
from dv_assets.mirror.iceberg import metrics as iceberg_metrics
from dv_assets.mirror.iceberg import schema as iceberg_schema
from dv_assets.mirror.iceberg.content_files import DataFile, DeleteFile
from dv_assets.mirror.iceberg.delete_files import DeleteFileJob
from dv_assets.mirror.iceberg.layout import MirrorLayout
from dv_assets.mirror.iceberg.mirror_table import (
    DELTA_OPERATION_SUMMARY,
    DELTA_PARTITION_COLUMNS_PROPERTY,
    DELTA_TABLE_ID_PROPERTY,
    DELTA_TABLE_PROPERTY,
    DELTA_TIMESTAMP_SUMMARY,
    FIRST_READABLE_VERSION_PROPERTY,
    NAME_MAPPING_PROPERTY,
    SAFETY_PROPERTIES,
    URI_LOCATIONS_PROPERTY,
    URI_LOCATIONS_SUMMARY,
    CommitOutcome,
    CommitRequest,
    MirrorTable,
    NewTable,
)
from dv_assets.mirror.iceberg.name_mapping import (
    NameMapping,
    mapping_is_stale,
    merged_table_mapping,
    table_mapping,
)
from dv_assets.mirror.iceberg.types import Schema
from dv_assets.mirror.locations import comparable, iceberg_location


@dataclass(frozen=True)
class MirrorState:
    """The mirror as the next Delta version finds it. A value: the sync starts from the table it loaded
    (`of`) or from nothing (`new`), and advances it after each commit (`after`)."""

    delta_root: str  # the Delta table mirrored
    location: str  # the Iceberg table's folder (before it exists: where the catalog will put it)
    format_version: int
    exists: bool = False  # False until the first mirrored version creates the table
    schema: Schema | None = None  # the table's current schema (None before it exists)
    base_snapshot_id: int | None = None  # every commit goes on top of the snapshot it was planned on
    # The delete file of each data file, by the data file's `comparable` location.
    deletes: Mapping[str, DeleteFile] = field(default_factory=dict)
    # Live data files recorded in another form than `iceberg_location` (bare paths, by older mirrors), by
    # `comparable` location: Iceberg matches a data file by its exact string, so a DV on one of them, or
    # its removal, names it as it was recorded.
    recorded_paths: Mapping[str, str] = field(default_factory=dict)
    delta_table_id: str | None = None  # the mirrored table's metaData.id (None: not recorded)
    partition_columns: tuple[str, ...] | None = None  # as mirrored, in Delta's order (None: not recorded)
    # Set with the next commit: the safety properties an older mirror lacks.
    pending_properties: Mapping[str, str] = field(default_factory=dict)
    # The table's name mapping as stored (None: none yet, or unreadable) and every schema it had, oldest
    # first: the mapping keeps every id and name of the table's history (`iceberg/name_mapping.py`).
    name_mapping: NameMapping | None = None
    history: tuple[Schema, ...] = ()
    # The name mapping lacks a physical-only column or a field id of the table's history: the next commit
    # rewrites it.
    stale_mapping: bool = False
    # No table yet, and the versions before this one are not readable in Delta: the new table records it.
    first_readable_version: int | None = None

    @classmethod
    def new(
        cls, delta_root: str, location: str, format_version: int, first_readable_version: int | None = None
    ) -> MirrorState:
        """No table yet: the first version mirrored creates it at `location` (named by its URI); when
        `first_readable_version` is given, the versions before it are no longer readable in Delta."""
        return cls(
            delta_root,
            iceberg_location(location),
            format_version,
            first_readable_version=first_readable_version,
        )

    @classmethod
    def of(
        cls,
        table: MirrorTable,
        delta_root: str,
        deletes: Mapping[str, DeleteFile],
        recorded_paths: Collection[str] | None = None,
    ) -> MirrorState:
        """An existing mirror: `deletes` are its current snapshot's delete files by data file;
        `recorded_paths` its live data files recorded in another form than their URI (None: not read,
        the table says it has none)."""
        properties = table.properties
        mirrored_columns = properties.get(DELTA_PARTITION_COLUMNS_PROPERTY)
        stored_mapping = NameMapping.parse(properties.get(NAME_MAPPING_PROPERTY))
        history = tuple(schema for _, schema in sorted(table.schemas.items())) or (table.schema,)
        partition_columns = None if mirrored_columns is None else tuple(json.loads(mirrored_columns))
        pending = {k: v for k, v in SAFETY_PROPERTIES.items() if properties.get(k) != v}
        if recorded_paths is not None and not recorded_paths:
            # No bare path is left: later runs need not look for them.
            pending[URI_LOCATIONS_PROPERTY] = "true"
        return cls(
            delta_root=delta_root,
            location=table.location,
            format_version=table.format_version,
            exists=True,
            schema=table.schema,
            base_snapshot_id=table.current_snapshot_id,
            deletes={comparable(data_file): f for data_file, f in deletes.items()},
            recorded_paths={comparable(path): path for path in recorded_paths or ()},
            delta_table_id=properties.get(DELTA_TABLE_ID_PROPERTY),
            partition_columns=partition_columns,
            pending_properties=pending,
            name_mapping=stored_mapping,
            history=history,
            # A mirror made before a physical-only column was mapped, or before the mapping kept the
            # table's history, gets them with its next commit.
            stale_mapping=mapping_is_stale(stored_mapping, history, table.schema, partition_columns or ()),
        )

    def after(self, metadata: Metadata, request: CommitRequest, outcome: CommitOutcome) -> MirrorState:
        """The mirror once `request`, the commit of a version with `metadata`, has landed as `outcome`
        (the first one on a table this run created from that metadata)."""
        deletes = dict(self.deletes)
        for replaced in request.remove_delete_files:
            deletes.pop(comparable(replaced.referenced_data_file), None)
        for delete_file in request.add_delete_files:
            deletes[comparable(delete_file.referenced_data_file)] = delete_file
        recorded_paths = dict(self.recorded_paths)
        for removed in request.remove_data_files:
            recorded_paths.pop(comparable(removed.path), None)
        if self.exists:
            # A recorded id follows the table replaced within its log (`replaced_table_id`).
            table_id = None if self.delta_table_id is None else metadata.id
            partition_columns = self.partition_columns
            if partition_columns is not None:  # renamed under column mapping, if they differ
                partition_columns = tuple(metadata.partition_columns)
        else:
            table_id, partition_columns = metadata.id, tuple(metadata.partition_columns)
        mapping = self.name_mapping if request.name_mapping is None else request.name_mapping
        if not self.exists:  # the table was created with the mapping of its first schema
            mapping = _name_mapping(outcome.schema, metadata)
        history = self.history
        if all(outcome.schema.schema_id != s.schema_id for s in history):
            history = (*history, outcome.schema)
        return replace(
            self,
            exists=True,
            schema=outcome.schema,
            name_mapping=mapping,
            history=history,
            base_snapshot_id=outcome.snapshot_id,
            deletes=deletes,
            recorded_paths=recorded_paths,
            delta_table_id=table_id,
            partition_columns=partition_columns,
            pending_properties={},
            stale_mapping=False,
            first_readable_version=None,
        )

    def data_file_path(self, location: str) -> str:
        """A data file's path in Iceberg: as the mirror recorded it when it is live there in another
        form, else its URI (`iceberg_location`)."""
        recorded = self.recorded_paths.get(comparable(location)) if self.recorded_paths else None
        return recorded or iceberg_location(location)

    def delete_file_of(self, location: str) -> DeleteFile | None:
        """The current delete file of the data file at `location`, whichever form either was recorded in."""
        return self.deletes.get(comparable(location))


@dataclass(frozen=True)
class VersionPlan:
    """One Delta version translated: the table to create first (the first version only), the DV work,
    and everything its commit needs (`commit_request`)."""

    change: VersionChange
    state: MirrorState  # the state it was planned on
    schema: Schema  # the schema the version's files are described with: the table's, or the new table's
    new_schema: Schema | None  # the table's next schema, when the version changes it
    rows: Mapping[str, int]  # row counts by data file (see `files_to_count`)
    new_table: NewTable | None
    delete_job: DeleteFileJob
    name_mapping: NameMapping | None = None  # the table's next name mapping, when the version changes it
    # The version's Iceberg entries when they were made ahead, as its files were read (a new mirror's
    # whole first version, `sync.py`): its `change` then lists only the files with a DV, the DV job's.
    data_files: Collection[DataFile] | None = None

    def commit_request(self, written: Sequence[DeleteFile]) -> CommitRequest:
        """The version's commit, with `written`, the delete files the job wrote."""
        change, state, schema, new_schema = self.change, self.state, self.schema, self.new_schema
        metadata = change.metadata
        partition = Partitioner.of(metadata, schema)
        return CommitRequest(
            delta_version=change.version,
            summary={
                DELTA_OPERATION_SUMMARY: change.operation or "",
                DELTA_TIMESTAMP_SUMMARY: change.commit_info.timestamp_text,
                **({} if state.recorded_paths else {URI_LOCATIONS_SUMMARY: "true"}),
            },
            base_snapshot_id=state.base_snapshot_id,
            add_data_files=(
                self.data_files
                if self.data_files is not None
                else DataFiles.of(change.added, state, metadata, new_schema or schema, self.rows)
            ),
            remove_data_files=tuple(_removed_data_file(add, state, partition) for add in change.removed),
            add_delete_files=tuple(written),
            # Every replaced delete goes explicitly, the DV of a removed data file too: Iceberg (v3) does not
            # always drop it itself, and a dangling DV comes back to life when RESTORE re-adds the file.
            remove_delete_files=tuple(
                state.deletes[comparable(location)] for location in _replaced_deletes(change)
            ),
            schema=new_schema,
            name_mapping=self.name_mapping,
            properties=_properties(state, metadata),
        )


@dataclass(frozen=True)
class DataFiles(Collection[DataFile]):
    """The Iceberg entries of the data files a version adds, each made as it is iterated (its metrics
    from its stats) and left to the consumer: a first version of a million files never holds a million
    entries with their metrics (`iceberg/java.py` streams them to the JVM). Their partition values are
    translated, and so checked, when it is made (`of`): a bad one is refused before the commit."""

    adds: Sequence[AddFile]
    state: MirrorState
    metadata: Metadata
    schema: Schema
    rows: Mapping[str, int]
    partitions: Sequence[tuple] | None  # by file, in order; None: the table is not partitioned

    @classmethod
    def of(
        cls,
        adds: Sequence[AddFile],
        state: MirrorState,
        metadata: Metadata,
        schema: Schema,
        rows: Mapping[str, int],
    ) -> DataFiles:
        partitions = None
        if metadata.partition_columns:
            partition = Partitioner.of(metadata, schema)
            for add in adds:
                partition.check_added(add)
            partitions = [partition(add) for add in adds]
        return cls(adds, state, metadata, schema, rows, partitions)

    def __len__(self) -> int:
        return len(self.adds)

    def __iter__(self) -> Iterator[DataFile]:
        partitions = repeat(()) if self.partitions is None else self.partitions
        metrics = iceberg_metrics.StatsConverter.for_table(self.schema, self.metadata)
        for add, partition in zip(self.adds, partitions, strict=False):  # repeat(()) is endless
            yield DataFile(
                path=self.state.data_file_path(add.location),
                partition=partition,
                file_size_in_bytes=add.size,
                record_count=self.rows[add.location],
                metrics=metrics(add.stats),
            )

    def __contains__(self, item: object) -> bool:
        return any(item == data_file for data_file in self)


def files_to_count(change: VersionChange) -> list[AddFile]:
    """The data files whose row count the plan needs: every file the version adds (its Iceberg entry) and
    every file it gives a new DV (the bound its positions are checked against)."""
    return [*change.added, *(after for _, after in change.dv_changed if after.deletion_vector is not None)]


def plan_version(
    change: VersionChange, state: MirrorState, rows: Mapping[str, int], paths: PathPolicy
) -> VersionPlan:
    """The version as Iceberg changes; refuses (MirrorInputError) what cannot be mirrored exactly."""
    metadata = change.metadata
    new_table = None
    if not state.exists:
        new_table = _new_table(metadata, state.delta_root, state.format_version, state.first_readable_version)
    elif change.metadata_changed:
        _check_partitioning_unchanged(metadata, state.partition_columns, state.schema)
    if new_table is not None or change.metadata_changed:
        check_field_ids_readable(metadata.schema, metadata.column_mapping_mode)
    schema = new_table.schema if new_table is not None else state.schema
    assert schema is not None
    delete_job = _delete_job(change, state, schema, rows, paths)
    missing = [location for location in _replaced_deletes(change) if state.delete_file_of(location) is None]
    if missing:
        raise MirrorInputError(
            "the mirror has no delete file for a Delta DV it should replace (was the Iceberg table changed "
            "outside dv-mirror?)",
            table=state.delta_root,
            version=change.version,
            file=missing[0],
        )
    new_schema = None
    if change.metadata_changed and new_table is None:
        history = tuple(s for s in state.history if s.schema_id != schema.schema_id)
        evolved = iceberg_schema.evolve(
            schema, metadata.schema, metadata.column_mapping_mode, history=history
        )
        if evolved.fields != schema.fields:
            iceberg_schema.check_format_version(evolved, state.format_version)
            new_schema = evolved
    mapping = None
    if state.exists and (change.metadata_changed or state.stale_mapping):
        merged = merged_table_mapping(
            state.name_mapping,
            state.history,
            new_schema or schema,
            metadata.schema,
            metadata.column_mapping_mode,
            metadata.partition_columns,
        )
        stored = state.name_mapping
        if stored is None or merged != stored or stored.respelled:
            mapping = merged
    return VersionPlan(change, state, schema, new_schema, rows, new_table, delete_job, mapping)


def _new_dvs(change: VersionChange) -> list[AddFile]:
    """Live data files (after the version) whose DV is new: files added with a DV, files whose DV changed."""
    return [
        *(add for add in change.added if add.deletion_vector is not None),
        *(after for _, after in change.dv_changed if after.deletion_vector is not None),
    ]


def _replaced_deletes(change: VersionChange) -> list[str]:
    """Data files whose current Iceberg delete file goes with this version: a replaced or dropped DV, or a
    removed data file that had one."""
    return [
        *(removed.location for removed in change.removed if removed.deletion_vector is not None),
        *(before.location for before, _ in change.dv_changed if before.deletion_vector is not None),
    ]


def _delete_job(
    change: VersionChange, state: MirrorState, schema: Schema, rows: Mapping[str, int], paths: PathPolicy
) -> DeleteFileJob:
    """The version's new DVs, each checked against its data file's row count, to convert and write as
    Puffin (v3) or position deletes (v2); a DV file outside the allowed roots is refused."""
    new_dvs = _new_dvs(change)
    tasks = tuple(
        DVTask.of(
            state.delta_root, add.deletion_vector, data_file=add.location, num_records=rows[add.location]
        )
        for add in new_dvs
        if add.deletion_vector is not None
    )
    checked: set[str] = set()  # a DELETE's thousands of DVs share a few DV files: each is checked once
    for task in tasks:
        if task.num_records is not None and task.cardinality > task.num_records:
            raise InvalidDeletionVectorError(
                f"deletionVector.cardinality is {task.cardinality}, more than the data file's "
                f"{task.num_records} rows (its stats' numRecords, else its Parquet footer)",
                file=task.data_file,
            )
        location = resolve_dv_location(task.table_root, task.storage_type, task.path_or_inline_dv)
        if location is not None and location not in checked:
            try:
                paths.check(location, what="deletion vector file")
            except MirrorInputError as err:
                raise InvalidDeletionVectorError(err.reason, file=task.data_file) from None
            checked.add(location)
    partition = Partitioner.of(change.metadata, schema)
    return DeleteFileJob(
        tasks=tasks,
        partitions={add.location: partition(add) for add in new_dvs},
        data_file_paths={add.location: state.data_file_path(add.location) for add in new_dvs},
        format_version=state.format_version,
        layout=MirrorLayout(state.location),
        delta_version=change.version,
    )


def _new_table(metadata: Metadata, delta_root: str, fmt: int, first_readable: int | None = None) -> NewTable:
    mode = metadata.column_mapping_mode
    schema = iceberg_schema.to_iceberg_schema(metadata.schema, mode)
    iceberg_schema.check_format_version(schema, fmt)
    return NewTable(
        schema=schema,
        partition_spec_json=iceberg_schema.partition_spec(schema, metadata.partition_columns),
        properties={
            "format-version": str(fmt),
            DELTA_TABLE_PROPERTY: delta_root,
            DELTA_TABLE_ID_PROPERTY: metadata.id,
            DELTA_PARTITION_COLUMNS_PROPERTY: json.dumps(list(metadata.partition_columns)),
            **SAFETY_PROPERTIES,
            URI_LOCATIONS_PROPERTY: "true",
            **iceberg_metrics.MIRROR_TABLE_PROPERTIES,
            NAME_MAPPING_PROPERTY: _name_mapping(schema, metadata).to_text(),
            **({} if first_readable is None else {FIRST_READABLE_VERSION_PROPERTY: str(first_readable)}),
        },
    )


def replaced_table_id(state: MirrorState, metadata: Metadata) -> str | None:
    """The new metaData.id of a Delta table replaced within its log (CREATE OR REPLACE TABLE) since the
    mirror recorded one, else None. `identity.check_same_delta_table` has told it from another table."""
    if state.exists and state.delta_table_id is not None and metadata.id != state.delta_table_id:
        return metadata.id
    return None


def _properties(state: MirrorState, metadata: Metadata) -> Mapping[str, str]:
    """The table properties a version's commit sets: those an older mirror lacks, and the new id of a
    replaced Delta table, recorded with the commit of the version that replaced it."""
    properties = dict(state.pending_properties)
    new_id = replaced_table_id(state, metadata)
    if new_id is not None:
        properties[DELTA_TABLE_ID_PROPERTY] = new_id
    if state.partition_columns is not None and list(state.partition_columns) != list(
        metadata.partition_columns
    ):
        # Renamed under column mapping (`_check_partitioning_unchanged` refuses any other change).
        properties[DELTA_PARTITION_COLUMNS_PROPERTY] = json.dumps(list(metadata.partition_columns))
    return properties


def _name_mapping(schema: Schema, metadata: Metadata) -> NameMapping:
    """The name mapping of a table with `schema` made from a version's `metadata`."""
    return table_mapping(schema, metadata.schema, metadata.column_mapping_mode, metadata.partition_columns)


def _check_partitioning_unchanged(
    metadata: Metadata, mirrored: tuple[str, ...] | None, schema: Schema | None
) -> None:
    """Delta can only change partition columns by rewriting the table; the mirror refuses to follow. A
    partition column renamed under column mapping is the same column (its id, which Iceberg's partition
    field follows as its source): followed."""
    if mirrored is None or list(mirrored) == list(metadata.partition_columns):
        return
    if _partition_columns_renamed(metadata, mirrored, schema):
        return
    raise UnsupportedFeatureError(
        f"the partition columns changed from {list(mirrored)} to "
        f"{list(metadata.partition_columns)}; mirror the rewritten table into a new Iceberg table"
    )


def _partition_columns_renamed(metadata: Metadata, mirrored: Sequence[str], schema: Schema | None) -> bool:
    """Whether the partition columns `mirrored` (names in the mirror's `schema`) are `metadata`'s under
    other names: the same field ids, in the same order, with column mapping."""
    if metadata.column_mapping_mode == "none" or schema is None:
        return False
    old_ids = {f.name: f.id for f in schema.fields}
    new_ids = {f.name: mapping_id(f) for f in metadata.schema.fields}
    before = [old_ids.get(column) for column in mirrored]
    after = [new_ids.get(column) for column in metadata.partition_columns]
    return None not in before and before == after


@dataclass(frozen=True)
class Partitioner:
    """A version's data files' partition tuples as Iceberg single-value JSON, in partition-spec order.

    Made once per version (`of`) and called once per file: each partition column's physical name (its key
    in `partitionValues`) and its name in `schema`, which under column mapping may be the schema before a
    version that renamed it (matched by field id), are found here, not per file."""

    schema: Schema
    columns: tuple[tuple[str, str, str], ...]  # (Delta name, physical name, name in `schema`)
    # Under column mapping, the binary partition columns (`check_added`).
    mapped_binary: tuple[tuple[str, str], ...] = ()  # (Delta name, physical name)

    @classmethod
    def of(cls, metadata: Metadata, schema: Schema) -> Partitioner:
        if not metadata.partition_columns:  # the common case: no name map
            return cls(schema, ())
        physical = metadata.physical_names
        names = list(metadata.partition_columns)
        sources = names
        mapped_binary: tuple[tuple[str, str], ...] = ()
        if metadata.column_mapping_mode != "none":
            by_id = {f.id: f.name for f in schema.fields}
            fields = {f.name: f for f in metadata.schema.fields}
            sources = [by_id.get(mapping_id(fields[c]), c) if c in fields else c for c in names]
            types = {f.name: str(f.type) for f in schema.fields}
            mapped_binary = tuple(
                (c, physical[c])
                for c, source in zip(names, sources, strict=True)
                if types.get(source) == "binary"
            )
        columns = tuple((c, physical[c], source) for c, source in zip(names, sources, strict=True))
        return cls(schema, columns, mapped_binary)

    def __call__(self, add: AddFile) -> tuple:
        return tuple(
            iceberg_schema.partition_value(add.partition_values.get(physical), self.schema, source)
            for _, physical, source in self.columns
        )

    def check_added(self, add: AddFile) -> None:
        """Refuse a binary partition value Iceberg readers would not all read as Delta does, under column
        mapping, on a file the version adds. Delta reads the log's value: null for an empty binary, U+FFFD
        for bytes that are not UTF-8. Delta Spark 4.4 also writes the column into the data file with its own
        bytes (`b''`, the raw bytes) under its field id; pyiceberg and DuckDB resolve columns by field id
        and read the file's, Iceberg Java takes the partition value. Without column mapping the file's
        column is mapped away (`_partition_columns_unmapped`); with it the file's field ids decide, so no
        mirror gives every reader one answer. A null is refused too: the log cannot tell it from an empty
        binary."""
        for column, physical in self.mapped_binary:
            raw = add.partition_values.get(physical)
            if raw is None or raw == "" or "\ufffd" in raw:
                shown = "null (or an empty binary)" if not raw else f"{raw!r} (bytes that are not UTF-8)"
                raise UnsupportedFeatureError(
                    f"binary partition column {column!r} is {shown} under column mapping: Delta reads the "
                    "log's value, but the data file holds the column's own bytes under its field id, which "
                    "pyiceberg and DuckDB read instead (Iceberg Java reads the log's); no Iceberg mirror "
                    "gives every reader Delta's rows",
                    file=add.location,
                )


def _removed_data_file(add: AddFile, state: MirrorState, partition: Partitioner) -> DataFile:
    """A data file to remove: Iceberg matches it by its path as recorded, so neither its rows nor its
    metrics are needed (VACUUM may have deleted the file already)."""
    return DataFile(
        path=state.data_file_path(add.location),
        partition=partition(add),
        file_size_in_bytes=add.size,
        record_count=add.num_records or 0,
    )
