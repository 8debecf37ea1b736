"""The one seam to Iceberg Java: every py4j call of the project is in this module.

Iceberg Java runs in the Spark JVM, behind the Spark session's catalog `dvmirror` (the catalog pyiceberg
opens too). What crosses the seam is Python values: a `MirrorTable` (location, format version,
properties, schema, snapshots with their Delta versions), `DeleteFile`s by data file, the files each
snapshot references; and typed requests in (`NewTable`, `CommitRequest`). Content files cross py4j as
the JSON of Iceberg's own `ContentFileParser`, so Iceberg Java builds its `DataFile`/`DeleteFile`
objects itself (py4j would otherwise box longs as Integers inside metrics maps and partition tuples),
and they cross in bulk: one call per version stages all of them and one call per run reads the table's
delete files back, through the project's helper `dev.dvmirror.ContentFileBatch` (jvm/src, built by
`make jars`), never a round trip per file, in one line format (`iceberg/content_file_lines.py`). The
lines go through a private local file, streamed on both sides: the driver's Python and its JVM share a
machine, and a large version never becomes one string. Results come back the one same way: a helper
method writes JSON lines (content files, or locations as JSON strings) to such a file, which the driver
reads (`_json_lines_written`).

Each Delta version becomes one Iceberg transaction: optional schema/property updates and one row-delta
snapshot, committed together or not at all.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from dv_assets.mirror.errors import MirrorConflictError
from dv_assets.mirror.iceberg.content_file_lines import (
    SpooledDataFiles,
    lines_file,
    write_content_files,
    write_data_files,
)
from dv_assets.mirror.iceberg.content_files import DeleteFile
from dv_assets.mirror.iceberg.mirror_table import (
    DELTA_VERSION_SUMMARY,
    GC_ENABLED_PROPERTY,
    NAME_MAPPING_PROPERTY,
    CommitOutcome,
    CommitRequest,
    MirrorTable,
    NewTable,
    ReferencedFiles,
    TableHistory,
)
from dv_assets.mirror.iceberg.types import Schema
from dv_assets.mirror.locations import iceberg_location
from dv_assets.mirror.settings import ICEBERG_CATALOG_NAME, STORAGE_PREFIXES

# Iceberg Java exceptions that mean "someone else committed first": the plan is stale, nothing landed.
_CONFLICTS = (
    "org.apache.iceberg.exceptions.CommitFailedException",
    "org.apache.iceberg.exceptions.ValidationException",
    "org.apache.iceberg.exceptions.AlreadyExistsException",
)
_UNKNOWN_OUTCOME = "org.apache.iceberg.exceptions.CommitStateUnknownException"
_NO_SUCH_TABLE = "org.apache.iceberg.exceptions.NoSuchTableException"
# The project's JVM helper (jvm/src/main/java/dev/dvmirror/ContentFileBatch.java).
CONTENT_FILE_BATCH = "dev.dvmirror.ContentFileBatch"
# Its one door into Iceberg's private members (`_stage_data_manifests`), checked when the catalog starts.
ICEBERG_INTERNALS = "dev.dvmirror.IcebergInternals"


# Java exceptions (anywhere in the cause chain) that mean the catalog or storage could not be reached or
# did not answer in time: network failures, an unavailable REST service, a JDBC connection that failed or
# was lost, a busy sqlite file. Every other Java exception (a bad request, a missing table, a bug) is not.
_TRANSIENT_JAVA_EXCEPTIONS = frozenset(
    {
        "java.net.ConnectException",
        "java.net.SocketException",
        "java.net.SocketTimeoutException",
        "java.net.UnknownHostException",
        "java.net.http.HttpConnectTimeoutException",
        "java.net.http.HttpTimeoutException",
        "org.apache.hc.client5.http.HttpHostConnectException",
        "org.apache.hc.core5.http.NoHttpResponseException",
        "org.apache.iceberg.exceptions.ServiceUnavailableException",
        "org.apache.iceberg.exceptions.ServiceFailureException",
        "java.sql.SQLTransientException",
        "java.sql.SQLTransientConnectionException",
        "java.sql.SQLRecoverableException",
        "java.sql.SQLTimeoutException",
    }
)
_TRANSIENT_JAVA_MESSAGES = ("SQLITE_BUSY", "database is locked")


def is_transient_java_error(err: BaseException) -> bool:
    """Whether `err` is a Java exception (anywhere in its Java cause chain) of the catalog or storage not
    answering, which trying again later may get past (`follow.is_transient`)."""
    if not isinstance(err, Py4JJavaError):
        return False
    exception, depth = err.java_exception, 0
    while exception is not None and depth < 20:
        if str(exception.getClass().getName()) in _TRANSIENT_JAVA_EXCEPTIONS:
            return True
        message = str(exception.getMessage() or "")
        if any(text in message for text in _TRANSIENT_JAVA_MESSAGES):
            return True
        exception, depth = exception.getCause(), depth + 1
    return False


class IcebergJava:
    """Iceberg Java through the Spark session's `dvmirror` catalog."""

    def __init__(
        self, spark: SparkSession, *, data_manifests: bool = True, manifest_target_bytes: int = 0
    ) -> None:
        """`data_manifests`: a first version's data files go straight into manifests
        (`_stage_data_manifests`), each closed at `manifest_target_bytes` (0: the table's
        `commit.manifest.target-size-bytes`, as Iceberg's own writer); without, they are staged in the
        row delta like every later version's (the tests compare the two)."""
        self._spark = spark
        self._data_manifests = data_manifests
        self._manifest_target_bytes = manifest_target_bytes
        self._jvm = spark._jvm
        self._iceberg = self._jvm.org.apache.iceberg
        spark_catalog = spark._jsparkSession.sessionState().catalogManager().catalog(ICEBERG_CATALOG_NAME)
        self._catalog = spark_catalog.icebergCatalog()
        self._batch = _helper_class(self._jvm, CONTENT_FILE_BATCH)
        if data_manifests:  # fails naming what moved, on an Iceberg other than the one jvm/pom.xml pins
            _helper_class(self._jvm, ICEBERG_INTERNALS).check()
        self._staged: dict[str, Any] = {}
        # The table `load` last read, by name: a snapshot id names immutable content, so reading a snapshot
        # of it right after (a pass's delete files) needs no second load.
        self._loaded: tuple[str, Any] | None = None
        # The data manifests `_stage_data_manifests` wrote for the commit under way (deleted if it fails).
        self._written_manifests: list[str] = []

    # -- reading -----------------------------------------------------------------------------------
    def _identifier(self, table_name: str):
        return self._iceberg.catalog.TableIdentifier.parse(table_name)

    def _java_table(self, table_name: str):
        """The Java table, or None when the catalog has no such table. One load: `tableExists` first
        would be a second (most catalogs answer it by loading the table)."""
        try:
            return self._catalog.loadTable(self._identifier(table_name))
        except Py4JJavaError as err:
            if _java_exception(err) == _NO_SUCH_TABLE:
                return None
            raise

    def _require(self, table_name: str):
        table = self._java_table(table_name)
        if table is None:
            raise LookupError(f"Iceberg table {table_name} does not exist in catalog {ICEBERG_CATALOG_NAME}")
        return table

    def storage_properties(self) -> dict[str, str]:
        """The catalog's object-storage properties (`s3.*`, `client.*`, `gcs.*`, `adls.*`): the mirror's
        own FileIO uses the same endpoint and credentials as Iceberg Java."""
        prefix = f"spark.sql.catalog.{ICEBERG_CATALOG_NAME}."
        return {
            key[len(prefix) :]: value
            for key, value in self._spark.sparkContext.getConf().getAll()
            if key.startswith(tuple(prefix + p for p in STORAGE_PREFIXES))
        }

    def load(self, table_name: str) -> MirrorTable | None:
        table = self._java_table(table_name)
        self._loaded = None if table is None else (table_name, table)
        return None if table is None else self._mirror_table(table_name, table)

    def _with_snapshot(self, table_name: str, snapshot_id: int | None):
        """The Java table, the one `load` last read when it holds snapshot `snapshot_id` (its content
        cannot have changed), else loaded again (always for the current snapshot, None)."""
        if snapshot_id is not None and self._loaded is not None and self._loaded[0] == table_name:
            table = self._loaded[1]
            if table.snapshot(snapshot_id) is not None:
                return table
        return self._require(table_name)

    def _mirror_table(self, table_name: str, table) -> MirrorTable:
        # The metadata as one JSON string: one py4j call, not several per snapshot (a table of 300
        # snapshots took 10.8 s to read field by field, and every sync and follow pass reads it).
        metadata = table.operations().current()
        return MirrorTable.from_metadata(
            table_name,
            json.loads(self._iceberg.TableMetadataParser.toJson(metadata)),
            str(metadata.metadataFileLocation()),
        )

    def table_state(self, table_name: str) -> TableHistory:
        """What expiry needs of the table (`mirror_table.TableHistory`): refs, snapshots, metadata log."""
        metadata = self._require(table_name).operations().current()
        return TableHistory.of(
            json.loads(self._iceberg.TableMetadataParser.toJson(metadata)),
            str(metadata.metadataFileLocation()),
        )

    def metadata(self, table_name: str) -> tuple[str, dict[str, Any]] | None:
        """The table's current metadata file: its location and its JSON (Iceberg's table spec), read by
        the catalog as it is now; None: no such table."""
        table = self._java_table(table_name)
        if table is None:
            return None
        metadata = table.operations().current()
        return (
            str(metadata.metadataFileLocation()),
            json.loads(self._iceberg.TableMetadataParser.toJson(metadata)),
        )

    def _schema(self, schema) -> Schema:
        return Schema.from_json(json.loads(self._iceberg.SchemaParser.toJson(schema)))

    def default_location(self, table_name: str) -> str:
        """Where the catalog puts a new table: asked, never assumed (a REST catalog decides itself)."""
        return str(self._staged_table(table_name).location()).rstrip("/")

    def _staged_table(self, table_name: str):
        """The not-yet-created table as the catalog stages it (its location and FileIO); nothing is
        committed. The namespace is created first when missing (a REST catalog stages only in one)."""
        if table_name not in self._staged:
            ident = self._identifier(table_name)
            if not self._catalog.namespaceExists(ident.namespace()):
                with contextlib.suppress(Py4JJavaError):  # created meanwhile by another sync
                    self._catalog.createNamespace(ident.namespace())
            empty = self._iceberg.Schema(self._jvm.java.util.ArrayList())
            builder = self._catalog.buildTable(ident, empty)
            self._staged[table_name] = builder.createTransaction().table()
        return self._staged[table_name]

    def delete_files_by_data_file(
        self, table_name: str, snapshot_id: int | None = None
    ) -> dict[str, DeleteFile]:
        """A snapshot's delete files (the current one's by default), keyed by the data file each one
        references."""
        table = self._with_snapshot(table_name, snapshot_id)
        snapshot = table.currentSnapshot() if snapshot_id is None else table.snapshot(snapshot_id)
        if snapshot is None:
            return {}
        found: dict[str, DeleteFile] = {}
        for entry in _json_lines_written(self._batch.writeDeleteFiles, table, snapshot.snapshotId()):
            parsed = DeleteFile.from_json(entry)
            found[parsed.referenced_data_file] = parsed
        return found

    def data_files_not_named_by_uri(self, table_name: str, snapshot_id: int | None) -> list[str]:
        """The snapshot's data files recorded as a bare local path or a `file://` URI rather than the
        URI the mirror writes (`locations.iceberg_location`): what mirrors made before that recorded. One
        read of the snapshot's data manifests."""
        if snapshot_id is None:
            return []
        return [
            path
            for path in self._data_file_locations(table_name, snapshot_id)
            if path.startswith(("/", "file://")) and path != iceberg_location(path)
        ]

    def snapshot_files(self, table_name: str, snapshot_ids: Iterable[int]) -> dict[int, ReferencedFiles]:
        """Manifest list, manifests and delete files of each snapshot; every manifest is read once."""
        table = self._require(table_name)
        io = table.io()
        wanted = set(snapshot_ids)
        deletes_of_manifest: dict[str, frozenset[str]] = {}
        out: dict[int, ReferencedFiles] = {}
        for snapshot in table.snapshots():
            snapshot_id = int(snapshot.snapshotId())
            if snapshot_id not in wanted:
                continue
            metadata = {str(m.path()) for m in snapshot.allManifests(io)}
            if snapshot.manifestListLocation() is not None:
                metadata.add(str(snapshot.manifestListLocation()))
            deletes: set[str] = set()
            for manifest in snapshot.deleteManifests(io):
                path = str(manifest.path())
                if path not in deletes_of_manifest:
                    locations = _json_lines_written(self._batch.writeDeleteFileLocations, table, manifest)
                    deletes_of_manifest[path] = frozenset(locations)
                deletes |= deletes_of_manifest[path]
            out[snapshot_id] = ReferencedFiles(frozenset(metadata), frozenset(deletes))
        return out

    # -- writing -----------------------------------------------------------------------------------
    def create(self, table_name: str, new_table: NewTable, location: str) -> MirrorTable:
        """Create the (empty) mirror table with the schema's field ids exactly as given.

        `Catalog.createTable` would renumber every field; Delta's column-mapping ids must survive, since
        Parquet files written with field ids are read by id. So the metadata is built here, written as the
        table's first metadata file, and registered with the catalog.
        """
        iceberg = self._iceberg
        schema = iceberg.SchemaParser.fromJson(json.dumps(new_table.schema.to_json()))
        spec = iceberg.PartitionSpecParser.fromJson(schema, json.dumps(new_table.partition_spec_json))
        props = self._jvm.java.util.HashMap()
        for key, value in new_table.properties.items():
            props.put(key, value)
        metadata = (
            iceberg.TableMetadata.buildFromEmpty(int(new_table.properties.get("format-version", "2")))
            .assignUUID()
            .setLocation(location)
            .setCurrentSchema(schema, schema.highestFieldId())
            .setDefaultPartitionSpec(spec)
            .setDefaultSortOrder(iceberg.SortOrder.unsorted())
            .setProperties(props)
            .build()
        )
        # Written with the catalog's own FileIO (a REST catalog may vend credentials for it).
        io = self._staged_table(table_name).io()
        metadata_file = f"{location}/metadata/00000-{self._jvm.java.util.UUID.randomUUID()}.metadata.json"
        iceberg.TableMetadataParser.write(metadata, io.newOutputFile(metadata_file))
        ident = self._identifier(table_name)
        try:
            registered = self._catalog.registerTable(ident, metadata_file)
        except Py4JJavaError as err:
            if _java_exception(err) in _CONFLICTS:
                raise MirrorConflictError(
                    "another sync created the table at the same time; rerun", table=table_name
                ) from None
            raise
        return self._mirror_table(table_name, registered)

    def commit(self, table_name: str, request: CommitRequest) -> CommitOutcome:
        """Commit one Delta version as one snapshot, all or nothing, on top of `base_snapshot_id` only.

        A stale plan (another writer committed first) raises MirrorConflictError and commits nothing.
        An unknown outcome (the catalog did not answer) is resolved by reading the table back.
        """
        txn = self._require(table_name).newTransaction()
        current = txn.table().currentSnapshot()
        current_id = None if current is None else int(current.snapshotId())
        if current_id != request.base_snapshot_id:
            raise MirrorConflictError(
                f"the table changed since this sync planned Delta version {request.delta_version} "
                f"(snapshot {current_id}, planned on {request.base_snapshot_id}): another sync committed; "
                "rerun",
                table=table_name,
                version=request.delta_version,
            )
        committing = False
        try:
            self._stage(txn, request)
            committing = True
            txn.commitTransaction()
        except BaseException as err:
            # The data manifests of a commit that did not land are deleted: failed before the commit, or
            # Iceberg Java said it failed. They stay when it may have landed: an unknown outcome, or the
            # driver interrupted while the JVM was committing (unreferenced then, if it did not).
            failed = isinstance(err, Py4JJavaError) and _java_exception(err) != _UNKNOWN_OUTCOME
            if not committing or failed:
                self._delete_written_manifests(txn.table())
            if not isinstance(err, Py4JJavaError):
                raise
            name = _java_exception(err)
            if name in _CONFLICTS:
                raise MirrorConflictError(
                    f"another writer committed while Delta version {request.delta_version} was being "
                    f"committed ({name.rsplit('.', 1)[-1]}); nothing of this sync was committed; rerun",
                    table=table_name,
                    version=request.delta_version,
                ) from None
            if name != _UNKNOWN_OUTCOME:
                raise
            return self._resolve_unknown_outcome(table_name, request, err)
        finally:
            self._written_manifests = []
        table = txn.table()
        return CommitOutcome(
            snapshot_id=int(table.currentSnapshot().snapshotId()),
            schema=self._schema(table.schema()),
        )

    def _stage(self, txn, request: CommitRequest) -> None:
        """Every change of the request, inside the transaction (nothing is visible before it commits)."""
        if request.schema is not None:
            self._set_schema(txn, request.schema)
        properties = dict(request.properties)
        if request.name_mapping is not None:
            properties[NAME_MAPPING_PROPERTY] = request.name_mapping.to_text()
        if properties:
            update = txn.updateProperties()
            for key, value in properties.items():
                update = update.set(key, value)
            update.commit()

        spec = txn.table().spec()
        row_delta = txn.newRowDelta()
        if request.base_snapshot_id is not None:
            # Conflicting deletes and removed files are checked against the snapshot the plan was made
            # on; a file that had a DV earlier in history (then removed, e.g. before a RESTORE) may get
            # one again.
            row_delta = (
                row_delta.validateFromSnapshot(request.base_snapshot_id)
                .validateDeletedFiles()
                .validateNoConflictingDeleteFiles()
            )
        # A first version (no snapshot to validate against) may add a million data files: they go
        # straight into manifests, never all held by the row delta (`_stage_data_manifests`).
        data_apart = (
            self._data_manifests and request.base_snapshot_id is None and bool(request.add_data_files)
        )
        with lines_file() as path:
            with path.open("w", encoding="utf-8", buffering=1 << 20) as out:
                expected = write_content_files(out, request, data_files=not data_apart)
            staged = self._batch.stage(row_delta, str(path), spec)
        if data_apart:
            expected += len(request.add_data_files)
            staged += self._stage_data_manifests(row_delta, txn.table(), request, spec)
        if staged != expected:
            raise RuntimeError(f"staged {staged} content files of {expected} for {request.delta_version}")
        row_delta = row_delta.set(DELTA_VERSION_SUMMARY, str(request.delta_version))
        for key, value in request.summary.items():
            row_delta = row_delta.set(key, value)
        row_delta.commit()
        if request.schema is not None:
            planned = self._iceberg.SchemaParser.fromJson(json.dumps(request.schema.to_json()))
            if not txn.table().schema().sameSchema(planned):
                raise RuntimeError(f"the staged schema is not the planned one for {request.delta_version}")

    def _stage_data_manifests(self, row_delta, table, request: CommitRequest, spec) -> int:
        """The request's data files written into new manifests under the table's metadata folder and
        appended to `row_delta` (`ContentFileBatch.stageDataManifests`); how many files they hold, as
        the manifest writer counted them. Their lines are staged in a file like every other line: a FIFO
        the JVM read while this side wrote it made the first version of 1,000,000 files only 2% faster
        (`benchmarks/million.py`, issue 30), not worth a second route."""
        expected = len(request.add_data_files)
        with contextlib.ExitStack() as stack:
            files = request.add_data_files
            if isinstance(files, SpooledDataFiles):
                path = files.path  # written as the version's files were read: handed over as it is
            else:
                path = stack.enter_context(lines_file())
                with path.open("w", encoding="utf-8", buffering=1 << 20) as out:
                    write_data_files(out, files)
            manifests = list(
                self._batch.stageDataManifests(
                    row_delta, table, str(path), spec, self._manifest_target_bytes, expected
                )
            )
        self._written_manifests = [str(m.path()) for m in manifests]
        return sum(int(m.addedFilesCount()) for m in manifests)

    def _delete_written_manifests(self, table) -> None:
        """The data manifests of a commit that did not land: the mirror's own, referenced by nothing."""
        io = table.io()
        for location in self._written_manifests:
            with contextlib.suppress(Py4JJavaError):
                io.deleteFile(location)

    def _resolve_unknown_outcome(
        self, table_name: str, request: CommitRequest, err: Py4JJavaError
    ) -> CommitOutcome:
        """The catalog may or may not have taken the commit: the table, read back, says which."""
        table = self.load(table_name)
        current = None if table is None else table.current_snapshot
        if (
            table is not None
            and current is not None
            and current.delta_version == request.delta_version
            and current.parent_id == request.base_snapshot_id
        ):
            return CommitOutcome(snapshot_id=current.snapshot_id, schema=table.schema)
        raise MirrorConflictError(
            f"the commit of Delta version {request.delta_version} did not land (its outcome was unknown: "
            f"{str(err.java_exception)[:200]}); rerun",
            table=table_name,
            version=request.delta_version,
        )

    def _set_schema(self, txn, new_schema: Schema) -> None:
        """Make `new_schema` the current schema inside the transaction, keeping its field ids.

        `UpdateSchema` would number new columns itself; Delta's column-mapping ids must survive, so the
        transaction's own table operations get the new metadata (committed with the snapshot).
        """
        iceberg = self._iceberg
        ops = txn.table().operations()
        base = ops.current()
        schema = iceberg.SchemaParser.fromJson(json.dumps(new_schema.to_json()))
        last_column_id = max(base.lastColumnId(), schema.highestFieldId())
        ops.commit(
            base, iceberg.TableMetadata.buildFrom(base).setCurrentSchema(schema, last_column_id).build()
        )

    # -- maintenance -------------------------------------------------------------------------------
    def expire_snapshots(
        self, table_name: str, *, older_than_ms: int, retain_last: int, dry_run: bool = False
    ) -> list[int]:
        """Expire snapshots older than `older_than_ms` beyond the newest `retain_last`; the expired ids.

        Mirror tables carry `gc.enabled=false`, so that no Iceberg procedure and no `DROP ... PURGE`
        deletes their data files, which are Delta's. Iceberg's own expiry refuses such a table; here
        GC is switched on and off again inside one transaction around an expiry whose file cleanup is
        off, so the committed table never has GC on. What the expired snapshots alone referenced is
        reclaimed by `iceberg.maintenance`, the mirror's own files only.
        """
        txn = self._require(table_name).newTransaction()
        txn.updateProperties().set(GC_ENABLED_PROPERTY, "true").commit()
        expire = (
            txn.expireSnapshots()
            .expireOlderThan(older_than_ms)
            .retainLast(retain_last)
            .cleanExpiredFiles(False)
        )
        expired = sorted(int(s.snapshotId()) for s in expire.apply())
        if not expired or dry_run:
            return expired
        expire.commit()
        txn.updateProperties().set(GC_ENABLED_PROPERTY, "false").commit()
        txn.commitTransaction()
        return expired

    def expire_snapshot_ids(
        self, table_name: str, snapshot_ids: Iterable[int], *, properties: Mapping[str, str]
    ) -> list[int]:
        """Expire exactly `snapshot_ids` (none when empty) and set `properties`, in one transaction; the
        expired ids. As `expire_snapshots`: GC on and off again inside the transaction, Iceberg's file
        cleanup off. Iceberg's `expireSnapshotId` also applies the table's default age and count
        retention; the cutoff is set to 0 so that nothing else goes, and the expiry is refused,
        nothing committed, should Iceberg plan to remove any other snapshot."""
        wanted = sorted(set(snapshot_ids))
        txn = self._require(table_name).newTransaction()
        expired: list[int] = []
        if wanted:
            txn.updateProperties().set(GC_ENABLED_PROPERTY, "true").commit()
            expire = txn.expireSnapshots().expireOlderThan(0).cleanExpiredFiles(False)
            for snapshot_id in wanted:
                expire = expire.expireSnapshotId(snapshot_id)
            expired = sorted(int(s.snapshotId()) for s in expire.apply())
            if expired != wanted:
                raise RuntimeError(
                    f"Iceberg would expire snapshots {expired} of {table_name}, asked {wanted}: nothing "
                    "expired"
                )
            expire.commit()
        update = txn.updateProperties()
        for key, value in {**properties, **({GC_ENABLED_PROPERTY: "false"} if wanted else {})}.items():
            update = update.set(key, value)
        update.commit()
        txn.commitTransaction()
        return expired

    def data_files(self, table_name: str, snapshot_id: int) -> frozenset[str]:
        """The data files a snapshot names (what Iceberg's `data_files` metadata table lists at it)."""
        return frozenset(self._data_file_locations(table_name, snapshot_id))

    def _data_file_locations(self, table_name: str, snapshot_id: int) -> Iterator[str]:
        """The locations of a snapshot's live data files, read from its data manifests by the helper."""
        table = self._with_snapshot(table_name, snapshot_id)
        return _json_lines_written(self._batch.writeDataFileLocations, table, snapshot_id)

    def unregister(self, table_name: str) -> bool:
        """Remove the table from the catalog without deleting any file (never a purge: the data files
        are Delta's). False when there was no such table."""
        return bool(self._catalog.dropTable(self._identifier(table_name), False))


def _json_lines_written(write: Callable[..., Any], *args: Any) -> Iterator[Any]:
    """The values the helper method `write` writes, called with `args` and a local file last, one JSON
    value a line: the one way results come back from the JVM (streamed on both sides, never one large
    py4j string; the driver and its JVM share a machine; a location with a line break stays one line)."""
    with lines_file() as path:
        write(*args, str(path))
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                yield json.loads(line)


def _helper_class(jvm: Any, name: str) -> Any:
    """A class of the project's JVM helper; a clear error when its jar is not on Spark's classpath."""
    found = jvm
    for part in name.split("."):
        found = getattr(found, part)
    if type(found).__name__ != "JavaClass":
        raise RuntimeError(
            f"{name} is not on the Spark driver's classpath: build the project's JVM helper with `make jars` "
            "(jvm/pom.xml) and point DVMIRROR_JARS at the folder holding dvmirror-jvm.jar"
        )
    return found


def _java_exception(err: Py4JJavaError) -> str:
    """The class name of the Java exception behind a py4j error (or of its first Iceberg cause)."""
    exception = err.java_exception
    seen = 0
    while exception is not None and seen < 10:
        name = str(exception.getClass().getName())
        if name.startswith("org.apache.iceberg.exceptions."):
            return name
        exception = exception.getCause()
        seen += 1
    return str(err.java_exception.getClass().getName())
