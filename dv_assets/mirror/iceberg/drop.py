"""Dropping a mirror so that it can be made again from scratch (`dvmirror drop`): the files dv-mirror wrote
for it, then its catalog entry; never a Delta file, never a file another writer put there.

What goes, and only that, each named by the table's own metadata or by the mirror's own name in its own
folders (`plan_drop`; a folder is never deleted blindly):

* its delete files (Puffin DV files, position-delete files): those its manifests name, each one the
  mirror's by `MirrorLayout.is_owned` (`<location>/data/dvmirror-*`), and the mirror's delete files no
  snapshot names (a crashed run's), found by that name in that folder;
* its checkpoint indexes (`MirrorLayout.checkpoint_index_dir`): the index files (`manifest.json`,
  `adds.parquet`) of the folders named `dvmirror-checkpoint-*` in it;
* the Iceberg metadata of the table: every snapshot's manifests and manifest list, the metadata files of
  its metadata log, and its current metadata file, each under `<location>/metadata/`.
* on a local file system, the checksum file `.NAME.crc` Hadoop's file system wrote beside any of those
  (Iceberg Java writes through it), by that name only.

A table is refused (MirrorInputError, nothing deleted) unless it is certainly dv-mirror's: it carries the
`dvmirror.delta-table` property the mirror sets when it creates a table, every snapshot it holds carries
the Delta version the mirror writes into each of its commits (a snapshot of another writer, even a
metadata-only one, wrote files that are not the mirror's), it has no statistics files (the mirror writes
none), and every file it names that would go is where and what the mirror writes. The data files are
Delta's, referenced in place: none is ever deleted (Iceberg's `dropTable(purge=true)` would delete them;
it is never called), and none may be among the files planned (checked against every data file the
manifests name under the table's folder).

The order makes a drop that stops half-way one a rerun finishes: the delete files first (the manifests
that name them are still there), then the checkpoint indexes, the manifests, the manifest lists (a
manifest list gone means its manifests went before it), the metadata files of the metadata log; then,
only if the catalog still points at the metadata file the plan was made of (else another writer
committed: `MirrorConflictError`, the catalog entry kept), the catalog entry is removed (`dropTable`
without purge); the current metadata file goes last. Until then the catalog entry and that file are
there: a rerun reads the same table, finds what is left (`missing_files` lists what already went) and
ends the work. Stopped between the last two steps, the table is gone from the catalog and one file
remains: its last metadata file, which nothing reads.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

from dv_assets.mirror.delta.checkpoint_index import ADDS, FOLDER_PREFIX, MANIFEST
from dv_assets.mirror.errors import MirrorConflictError, MirrorInputError
from dv_assets.mirror.iceberg.layout import MirrorLayout
from dv_assets.mirror.iceberg.mirror_table import DELTA_TABLE_PROPERTY, delta_version_of
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.locations import comparable

# The kinds of file a drop deletes, in the order it deletes them (a checksum file just before its file;
# the current metadata file, the last of `metadata_files`, after the catalog entry).
DELETE_FILES = "delete_files"
ORPHAN_DELETE_FILES = "orphan_delete_files"
CHECKPOINT_INDEX_FILES = "checkpoint_index_files"
MANIFESTS = "manifests"
MANIFEST_LISTS = "manifest_lists"
METADATA_FILES = "metadata_files"
# Hadoop's local file system (Iceberg Java's FileIO on local paths) writes a checksum `.NAME.crc` beside
# each file NAME it writes: deleted just before its file, so a rerun still finds it through its file.
CHECKSUM_FILES = "checksum_files"
KINDS = (
    DELETE_FILES,
    ORPHAN_DELETE_FILES,
    CHECKPOINT_INDEX_FILES,
    MANIFESTS,
    MANIFEST_LISTS,
    METADATA_FILES,
    CHECKSUM_FILES,
)

# Catalogs whose `dropTable(identifier, purge=false)` removes the entry and deletes no file (Iceberg's
# JdbcCatalog, RESTCatalog (the server is asked not to purge), HiveCatalog, GlueCatalog, NessieCatalog).
# HadoopCatalog's deletes the table's whole folder whatever `purge` says; of any other we cannot be sure.
CATALOGS_DROPPING_NO_FILE = frozenset({"jdbc", "rest", "hive", "glue", "nessie"})

_DATA_CONTENT = 0  # a manifest entry's data_file.content: 0 data, 1 position deletes (and DVs), 2 equality
_DELETED_ENTRY = 2  # a manifest entry's status: 2 deleted (not in the snapshot)


@dataclass(frozen=True)
class DropFile:
    location: str
    kind: str  # one of KINDS
    size: int
    last: bool = False  # the current metadata file (and its checksum): deleted after the catalog entry


@dataclass
class DropPlan:
    """What dropping the mirror deletes, read from its metadata: every file in the order it goes."""

    table: str
    location: str
    metadata_location: str  # the current metadata file: deleted last, after the catalog entry
    delta_table: str
    snapshot_ids: list[int]
    delta_versions: list[int]
    files: list[DropFile]
    # Files the table's metadata names that are already gone (a drop that stopped half-way).
    missing_files: list[str] = field(default_factory=list)
    # Files under the table's location that are not the mirror's to delete (another writer's, or
    # named by nothing): never deleted. None: the location could not be listed.
    left_in_place: list[str] | None = None

    def of_kind(self, kind: str) -> list[str]:
        return [f.location for f in self.files if f.kind == kind]

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


@dataclass
class DropOutcome:
    """What the drop did: the files deleted (in order) and whether it removed the catalog entry."""

    deleted: list[DropFile] = field(default_factory=list)
    missing_files: list[str] = field(default_factory=list)  # planned, but gone before their turn
    unregistered: bool = False


def check_catalog_drops_no_file(catalog_kind: str, table_name: str) -> None:
    """Refuse a catalog whose dropping of a table may delete files (MirrorInputError)."""
    if catalog_kind == "hadoop":
        raise MirrorInputError(
            "a hadoop catalog's dropTable deletes the table's whole folder, whatever it holds: dvmirror "
            "drop refuses it (nothing deleted)",
            table=table_name,
        )
    if catalog_kind not in CATALOGS_DROPPING_NO_FILE:
        raise MirrorInputError(
            f"dvmirror drop does not know whether the {catalog_kind} catalog deletes files when it drops a "
            f"table; it drops only from a {', '.join(sorted(CATALOGS_DROPPING_NO_FILE))} catalog "
            "(nothing deleted)",
            table=table_name,
        )


def _refuse(table_name: str, reason: str) -> MirrorInputError:
    return MirrorInputError(f"{reason}; refusing to drop it (nothing deleted)", table=table_name)


def check_is_own_mirror(table_name: str, metadata: Mapping[str, Any]) -> None:
    """Refuse a table dv-mirror did not write, or one another writer committed to: its files are not
    all the mirror's."""
    properties = metadata.get("properties") or {}
    if DELTA_TABLE_PROPERTY not in properties:
        raise _refuse(
            table_name, f"not a dv-mirror mirror (no {DELTA_TABLE_PROPERTY} property): its files are not ours"
        )
    for snapshot in metadata.get("snapshots") or ():
        summary = snapshot.get("summary") or {}
        if delta_version_of(summary) is None:
            raise _refuse(
                table_name,
                f"snapshot {snapshot['snapshot-id']} ({summary.get('operation', 'unknown operation')}) was "
                "not committed by dv-mirror: the files it wrote are another writer's",
            )
    for key in ("statistics", "partition-statistics"):
        if metadata.get(key):
            raise _refuse(table_name, f"it has {key} files, which dv-mirror never writes: another writer's")
    delta_root = str(properties[DELTA_TABLE_PROPERTY])
    mirror, delta = comparable(str(metadata["location"])).rstrip("/"), comparable(delta_root).rstrip("/")
    if mirror == delta or mirror.startswith(delta + "/") or delta.startswith(mirror + "/"):
        raise _refuse(
            table_name, f"its location {metadata['location']} overlaps its Delta table {delta_root}"
        )


def plan_drop(
    table_name: str, metadata_location: str, metadata: Mapping[str, Any], *, avro_io: Any, io: FileIO
) -> DropPlan:
    """What dropping the mirror deletes, from its current metadata file (`metadata_location`, its JSON
    `metadata`); MirrorInputError when it is not certainly all the mirror's. `avro_io` is the pyiceberg
    FileIO the manifests are read with, `io` the mirror's (stat, list). Reads every manifest once; a file
    already gone is listed in `missing_files`, not read."""
    check_is_own_mirror(table_name, metadata)
    layout = MirrorLayout(str(metadata["location"]))
    current = metadata_location
    previous = [str(e["metadata-file"]) for e in metadata.get("metadata-log") or ()]
    _check_in_metadata_dir(table_name, layout, "metadata file", [current, *previous])
    snapshots = list(metadata.get("snapshots") or ())
    if any(not s.get("manifest-list") for s in snapshots):
        raise _refuse(table_name, "a snapshot has no manifest list (format version 1): dv-mirror writes none")
    manifest_lists = list(dict.fromkeys(str(s["manifest-list"]) for s in snapshots))
    _check_in_metadata_dir(table_name, layout, "manifest list", manifest_lists)
    missing: list[str] = []
    present_lists = _existing(io, manifest_lists, missing)
    manifests: dict[str, None] = {}  # each once, in the order the manifest lists name them
    for manifest_list in present_lists:
        listed = _manifests_of(avro_io, manifest_list)
        _check_in_metadata_dir(table_name, layout, "manifest", listed)
        manifests.update(dict.fromkeys(listed))
    present_manifests = _existing(io, list(manifests), missing)
    delete_files, data_in_folder = _delete_files_and_data_in_folder(
        table_name, layout, avro_io, present_manifests
    )
    by_kind = (
        (DELETE_FILES, delete_files),
        (ORPHAN_DELETE_FILES, _orphan_delete_files(io, layout, delete_files)),
        (CHECKPOINT_INDEX_FILES, _checkpoint_index_files(io, layout)),
        (MANIFESTS, present_manifests),
        (MANIFEST_LISTS, present_lists),
        (METADATA_FILES, [*previous, current]),
    )
    planned = _present_files(table_name, io, by_kind, current, missing)
    for file in planned:  # the last guard: each file the mirror's by where and what it is, never a data file
        if comparable(file.location) in data_in_folder or not _is_the_mirrors(layout, file):
            raise _refuse(table_name, f"{file.location} is not certainly a file dv-mirror wrote")
    planned = _with_checksums(io, planned, current, data_in_folder)
    versions = sorted({v for s in snapshots if (v := delta_version_of(s.get("summary"))) is not None})
    plan = DropPlan(
        table=table_name,
        location=layout.table_location,
        metadata_location=current,
        delta_table=str(metadata["properties"][DELTA_TABLE_PROPERTY]),
        snapshot_ids=[int(s["snapshot-id"]) for s in snapshots],
        delta_versions=versions,
        files=planned,
        missing_files=missing,
    )
    plan.left_in_place = _left_in_place(io, layout.table_location, planned)
    return plan


def _check_in_metadata_dir(table_name: str, layout: MirrorLayout, kind: str, paths: Sequence[str]) -> None:
    """Refuse a metadata file, manifest list or manifest outside the table's metadata folder."""
    for path in paths:
        if not layout.is_metadata(path):
            reason = f"its {kind} {path} is not under {layout.metadata_dir}: not where dv-mirror writes"
            raise _refuse(table_name, reason)


def _delete_files_and_data_in_folder(
    table_name: str, layout: MirrorLayout, avro_io: Any, manifests: Sequence[str]
) -> tuple[list[str], set[str]]:
    """The live delete files the manifests name (each once, refused unless dv-mirror wrote it), and the
    `comparable` locations of the data files under the table's folder: never among the files deleted."""
    in_folder = comparable(layout.table_location) + "/"
    delete_files: list[str] = []
    data_in_folder: set[str] = set()
    for manifest in manifests:
        for path, is_data, live in _content_files_of(avro_io, manifest):
            if is_data:
                if comparable(path).startswith(in_folder):
                    data_in_folder.add(comparable(path))
            elif not layout.is_owned(path):
                raise _refuse(
                    table_name,
                    f"its delete file {path} is not one dv-mirror writes ({layout.delete_dir}/dvmirror-*)",
                )
            elif live:  # one a snapshot removed is live in an older one's manifests, or an orphan below
                delete_files.append(path)
    return list(dict.fromkeys(delete_files)), data_in_folder


def _orphan_delete_files(io: FileIO, layout: MirrorLayout, delete_files: Sequence[str]) -> list[str]:
    """The delete files dv-mirror wrote in the table's delete folder that no manifest names."""
    referenced = {comparable(p) for p in delete_files}
    return sorted(
        info.location
        for info in io.list_dir(layout.delete_dir)
        if info.is_file and layout.is_owned(info.location) and comparable(info.location) not in referenced
    )


def _present_files(
    table_name: str,
    io: FileIO,
    by_kind: Sequence[tuple[str, Sequence[str]]],
    current: str,
    missing: list[str],
) -> list[DropFile]:
    """Each file of `by_kind` that exists, with its kind and size; the others added to `missing` (the
    current metadata file gone: refused)."""
    planned: list[DropFile] = []
    for kind, locations in by_kind:
        for info in io.stat_many(locations):
            if not info.exists or not info.is_file:
                if comparable(info.location) == comparable(current):
                    raise MirrorInputError(f"its current metadata file {current} is gone", table=table_name)
                if info.location not in missing:
                    missing.append(info.location)
                continue
            planned.append(DropFile(info.location, kind, info.size or 0))
    return planned


def _is_the_mirrors(layout: MirrorLayout, file: DropFile) -> bool:
    if file.kind in (DELETE_FILES, ORPHAN_DELETE_FILES):
        return layout.is_owned(file.location)
    if file.kind == CHECKPOINT_INDEX_FILES:
        folder, _, name = file.location.rpartition("/")
        parent, _, folder_name = folder.rpartition("/")
        return (
            comparable(parent) == comparable(layout.checkpoint_index_dir)
            and folder_name.startswith(FOLDER_PREFIX)
            and name in (MANIFEST, ADDS)
        )
    return layout.is_metadata(file.location) and not layout.is_owned(file.location)


def checksum_of(location: str) -> str:
    """The checksum file Hadoop's local file system writes beside `location`: `.NAME.crc`."""
    folder, _, name = location.rpartition("/")
    return f"{folder}/.{name}.crc"


def _with_checksums(
    io: FileIO, planned: list[DropFile], current: str, data_in_folder: set[str]
) -> list[DropFile]:
    """`planned` with, just before each file on a local file system, its Hadoop checksum file when there
    is one (only that name, derived from a file that goes; never a data file's)."""
    local = [f for f in planned if isinstance(io.resolve(f.location)[0], pafs.LocalFileSystem)]
    found = {
        info.location: info
        for info in io.stat_many([checksum_of(f.location) for f in local])
        if info.exists and info.is_file and comparable(info.location) not in data_in_folder
    }
    out = []
    for file in planned:
        last = comparable(file.location) == comparable(current)
        checksum = found.get(checksum_of(file.location))
        if checksum is not None:
            out.append(DropFile(checksum.location, CHECKSUM_FILES, checksum.size or 0, last))
        out.append(DropFile(file.location, file.kind, file.size, last))
    return out


def _existing(io: FileIO, locations: list[str], missing: list[str]) -> list[str]:
    """The locations that are files; the others go to `missing`."""
    found = []
    for info in io.stat_many(locations):
        if info.exists and info.is_file:
            found.append(info.location)
        else:
            missing.append(info.location)
    return found


def _manifests_of(avro_io: Any, manifest_list: str) -> list[str]:
    """Each manifest a manifest list names, data and delete manifests alike (every one is read: a data
    file's path is checked against the files to delete)."""
    from pyiceberg.manifest import read_manifest_list

    return [str(m.manifest_path) for m in read_manifest_list(avro_io.new_input(manifest_list))]


def _content_files_of(avro_io: Any, manifest: str) -> Iterable[tuple[str, bool, bool]]:
    """Each content file a manifest names, whether it is a data file, and whether the entry is live (not
    of the status `deleted`, which names a file the snapshot removed)."""
    from pyiceberg.avro.file import AvroFile
    from pyiceberg.manifest import DATA_FILE_TYPE, MANIFEST_ENTRY_SCHEMAS
    from pyiceberg.typedef import Record

    entry_schema = MANIFEST_ENTRY_SCHEMAS[3]
    status_at, file_at = ([f.name for f in entry_schema.fields].index(n) for n in ("status", "data_file"))
    fields = [f.name for f in DATA_FILE_TYPE[3].fields]
    content_at, path_at = fields.index("content"), fields.index("file_path")
    with AvroFile[Record](avro_io.new_input(manifest), entry_schema) as entries:
        for entry in entries:
            content_file = entry[file_at]
            is_data = int(content_file[content_at]) == _DATA_CONTENT
            yield str(content_file[path_at]), is_data, int(entry[status_at]) != _DELETED_ENTRY


def _checkpoint_index_files(io: FileIO, layout: MirrorLayout) -> list[str]:
    """The files of the mirror's checkpoint indexes, each index's manifest first (an index without one
    is never read)."""
    found = []
    for info in io.list_dir(layout.checkpoint_index_dir):
        name = info.location.rsplit("/", 1)[-1]
        if info.exists and not info.is_file and name.startswith(FOLDER_PREFIX):
            found += [f"{info.location}/{MANIFEST}", f"{info.location}/{ADDS}"]
    return found


def _left_in_place(io: FileIO, location: str, planned: list[DropFile]) -> list[str] | None:
    """Every file under `location` that is not planned (listed, never deleted); None when the location
    cannot be listed."""
    try:
        filesystem, path = io.resolve(location)
        base = path.rstrip("/")
        infos = filesystem.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    except OSError:
        return None
    going = {comparable(f.location) for f in planned}
    left = []
    for info in infos:
        found = f"{location}{info.path[len(base) :]}"
        if info.type == pafs.FileType.File and comparable(found) not in going:
            left.append(found)
    return sorted(left)


def execute_drop(
    plan: DropPlan,
    io: FileIO,
    *,
    current_metadata: Callable[[], str | None],
    unregister: Callable[[], bool],
) -> DropOutcome:
    """Delete the plan's files in order, then the catalog entry, then the current metadata file.

    `current_metadata` reads the catalog's metadata file of the table now (None: no such table any more),
    `unregister` removes its entry without deleting any file. The entry is removed only while the catalog
    still points at the metadata file the plan was read from (else MirrorConflictError: another writer
    committed, and a rerun plans again)."""
    outcome = DropOutcome()
    for file in plan.files:
        if not file.last:
            _delete(io, file, outcome)
    now = current_metadata()
    if now is not None and comparable(now) != comparable(plan.metadata_location):
        raise MirrorConflictError(
            f"the table changed during the drop (the catalog now points at {now}, not "
            f"{plan.metadata_location}): another writer committed; its catalog entry is kept: stop every "
            "sync of it and run dvmirror drop again",
            table=plan.table,
        )
    outcome.unregistered = now is not None and unregister()
    for file in plan.files:
        if file.last:
            _delete(io, file, outcome)
    _remove_empty_folders(io, plan)
    return outcome


def _delete(io: FileIO, file: DropFile, outcome: DropOutcome) -> None:
    try:
        io.delete(file.location)
    except FileNotFoundError:
        outcome.missing_files.append(file.location)
        return
    outcome.deleted.append(file)


def _remove_empty_folders(io: FileIO, plan: DropPlan) -> None:
    """On a local file system, the folders the mirror's files were in, each only when empty (`rmdir`):
    an object store has no folders to leave behind."""
    layout = MirrorLayout(plan.location)
    index_folders = {f.location.rsplit("/", 1)[0] for f in plan.files if f.kind == CHECKPOINT_INDEX_FILES}
    for folder in [
        *sorted(index_folders),
        layout.checkpoint_index_dir,
        layout.delete_dir,
        layout.metadata_dir,
        layout.table_location,
    ]:
        filesystem, path = io.resolve(folder)
        if isinstance(filesystem, pafs.LocalFileSystem):
            with contextlib.suppress(OSError):
                os.rmdir(path)
