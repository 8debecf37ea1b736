"""Faults for the tests: damaged input (the small DV fixture's DV file and commits, bytes patched), and
failures injected through the engine's seams (`IcebergJava` and `FileIO` subclasses), never through its
production path.

`python -m tests.helpers.faults crash-before-commit VERSION DELTA_TABLE TABLE CATALOG_URI WAREHOUSE`
mirrors like `dvmirror sync`, with an Iceberg seam whose commit of Delta version VERSION kills the process
(`os._exit`: no cleanup, no exception handler runs) after the delete files are written: how the tests
prove that a crash leaves no half-written commit (`run_crash_before_commit`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from dv_assets.mirror.iceberg.content_file_lines import SpooledDataFiles
from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.iceberg.mirror_table import CommitOutcome, CommitRequest
from dv_assets.mirror.io import FileInfo, FileIO, FolderListing
from dv_assets.mirror.settings import MirrorSettings
from dv_assets.mirror.spark import get_or_create_spark
from dv_assets.mirror.sync import sync_table
from tests.helpers.paths import DELTA_FIXTURES
from tests.helpers.processes import catalog_uri, cli_catalog, run

CRASH_EXIT_CODE = 99

# --- damaged input ---------------------------------------------------------------------------------------

# The small DV fixture: v0 adds one data file of 10 rows; v1 gives it a file-based DV deleting 2.
SMALL = "table-with-dv-small"
DV_NAME = "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin"
DATA_NAME = "part-00000-fae5310a-a37d-4e51-827b-c3d5516560ca-c000.snappy.parquet"
COMMIT_0 = "_delta_log/00000000000000000000.json"
COMMIT_1 = "_delta_log/00000000000000000001.json"


def patch_bytes(path: Path, offset: int, new: bytes) -> None:
    """Overwrite the file's bytes at `offset` with `new`."""
    data = bytearray(path.read_bytes())
    data[offset : offset + len(new)] = new
    path.write_bytes(bytes(data))


# The DV file: version byte, BE32 size (36) at 1..4, the bitmap (magic first) at 5..40, BE32 CRC at 41..44.
def flip_dv_byte(offset: int) -> Callable[[Path], None]:
    """A damage to a copy of SMALL: its DV file's byte at `offset` flipped."""

    def corrupt(root: Path) -> None:
        content = bytearray((root / DV_NAME).read_bytes())
        content[offset] ^= 0xFF
        (root / DV_NAME).write_bytes(bytes(content))

    return corrupt


def truncate_dv(root: Path) -> None:
    (root / DV_NAME).write_bytes((root / DV_NAME).read_bytes()[:30])


def remove_dv(root: Path) -> None:
    (root / DV_NAME).unlink()


def misstate_dv_size(root: Path) -> None:
    """Commit 1's DV descriptor says 35 bytes; the DV has 36."""
    commit = root / COMMIT_1
    text = commit.read_text()
    assert text.count('"sizeInBytes":36') == 1
    commit.write_text(text.replace('"sizeInBytes":36', '"sizeInBytes":35'))


def repair_small(root: Path) -> None:
    """The DV file and commit 1 of a damaged copy of SMALL back as the fixture has them."""
    shutil.copy2(DELTA_FIXTURES / SMALL / DV_NAME, root / DV_NAME)
    shutil.copy2(DELTA_FIXTURES / SMALL / COMMIT_1, root / COMMIT_1)


def edit_commit(root: Path, commit: str, old: str, new: str) -> None:
    """Replace `old` (which must be there) with `new` in a commit file."""
    text = (root / commit).read_text()
    assert old in text, (commit, old)
    (root / commit).write_text(text.replace(old, new))


def point_dv_at(root: Path, location: str) -> None:
    """Make commit 1 of a copy of SMALL give its DV as an absolute-path (`p`) DV at `location`."""
    edit_commit(
        root,
        COMMIT_1,
        '"storageType":"u","pathOrInlineDv":"vBn[lx{q8@P<9BNH/isA"',
        f'"storageType":"p","pathOrInlineDv":"{location}"',
    )


# --- failures through the Iceberg seam ----------------------------------------------------------------------


class CrashBeforeCommit(IcebergJava):
    def __init__(self, spark: SparkSession, delta_version: int) -> None:
        super().__init__(spark)
        self.delta_version = delta_version

    def commit(self, table_name: str, request: CommitRequest) -> CommitOutcome:
        if request.delta_version == self.delta_version:
            os._exit(CRASH_EXIT_CODE)
        return super().commit(table_name, request)


class RaceBeforeCommit(IcebergJava):
    """Just before this sync commits a version, another sync of the same table commits it first."""

    def __init__(self, spark: SparkSession, root: Path) -> None:
        super().__init__(spark)
        self.root = root
        self.raced = False

    def commit(self, table_name: str, request: CommitRequest) -> CommitOutcome:
        if not self.raced:
            self.raced = True
            sync_table(self._spark, self.root, table_name, until_version=request.delta_version)
        return super().commit(table_name, request)


class RaceAt(IcebergJava):
    """When this sync is about to commit `version`, another sync commits up to `until` first."""

    def __init__(self, spark: SparkSession, root: Path, version: int, until: int) -> None:
        super().__init__(spark)
        self.root, self.version, self.until = root, version, until

    def commit(self, table_name: str, request: CommitRequest) -> CommitOutcome:
        if request.delta_version == self.version:
            sync_table(self._spark, self.root, table_name, until_version=self.until)
        return super().commit(table_name, request)


class RaceEveryCommit(IcebergJava):
    """Before each commit of this sync, another sync commits that very version first: a race it loses
    every time."""

    def __init__(self, spark: SparkSession, root: Path) -> None:
        super().__init__(spark)
        self.root = root

    def commit(self, table_name: str, request: CommitRequest) -> CommitOutcome:
        sync_table(self._spark, self.root, table_name, until_version=request.delta_version)
        return super().commit(table_name, request)


class RaceAfterStaging(IcebergJava):
    """Once its first version is staged (its data manifests written, `IcebergJava._stage_data_manifests`),
    another sync commits that version first: this commit then fails on Iceberg's own check, and the
    manifests it wrote (`staged`) are its to delete."""

    def __init__(self, spark: SparkSession, root: Path, table: str, *, until_version: int) -> None:
        super().__init__(spark, manifest_target_bytes=1)
        self.root, self.table, self.until_version = root, table, until_version
        self.staged: list[str] = []

    def _stage(self, txn: Any, request: CommitRequest) -> None:
        super()._stage(txn, request)
        self.staged = list(self._written_manifests)
        sync_table(self._spark, self.root, self.table, until_version=self.until_version)


class FailWhileStaging(IcebergJava):
    """Its first version's data files fail after `after` of them (as building one's metrics might),
    while they are staged for the JVM (`IcebergJava._stage_data_manifests`)."""

    def __init__(self, spark: SparkSession, *, after: int) -> None:
        super().__init__(spark, manifest_target_bytes=1)
        self.after = after

    def commit(self, table_name: str, request: CommitRequest) -> CommitOutcome:
        failing = _FailingAfter(request.add_data_files, self.after)
        return super().commit(table_name, replace(request, add_data_files=failing))


class _FailingAfter(Collection):
    def __init__(self, files: Collection, after: int) -> None:
        self.files, self.after = files, after

    def __len__(self) -> int:
        return len(self.files)

    def __contains__(self, item: object) -> bool:
        return item in self.files

    def __iter__(self) -> Iterator:
        files = self.files
        if isinstance(files, SpooledDataFiles):  # a whole first version: its entries are lines already
            files = _spooled_lines(files)
        for index, data_file in enumerate(files):
            if index == self.after:
                raise RuntimeError(f"injected: data file {index} failed")
            yield data_file


@dataclass(frozen=True)
class _SpooledLine:
    """One entry of SpooledDataFiles, as `write_data_files` writes a DataFile (`json_line`)."""

    text: str

    def json_line(self) -> str:
        return self.text


def _spooled_lines(files: SpooledDataFiles) -> Iterator[_SpooledLine]:
    with files.path.open(encoding="utf-8") as lines:
        for line in lines:
            yield _SpooledLine(line.rstrip("\n").split("\t", 1)[1])


class InterruptAfterCommit(IcebergJava):
    """The commit lands, then the process is interrupted (Ctrl-C, a Dagster run terminated)."""

    def commit(self, table_name: str, request: CommitRequest) -> CommitOutcome:
        super().commit(table_name, request)
        raise KeyboardInterrupt


class FailAroundCommit(IcebergJava):
    """The sync stops (as a crash would stop it) right before or right after its first commit."""

    def __init__(self, spark: SparkSession, *, before: bool) -> None:
        super().__init__(spark)
        self.before = before

    def commit(self, table_name: str, request: CommitRequest) -> CommitOutcome:
        if self.before:
            raise SystemExit("injected crash before the commit")
        super().commit(table_name, request)
        raise SystemExit("injected crash after the commit")


# --- failures through the storage seam ------------------------------------------------------------------


class FailAfterWrites(FileIO):
    """Storage that fails the sync (as a crash would stop it) after `writes` delete files exist."""

    def __init__(self, writes: int) -> None:
        super().__init__()
        self.writes = writes

    def _count(self) -> None:
        self.writes -= 1
        if self.writes < 0:
            raise SystemExit("injected crash")

    def write(self, location: str, content: bytes) -> None:
        self._count()
        super().write(location, content)

    def parquet_writer(self, location: str, schema: pa.Schema, **options: Any) -> pq.ParquetWriter:
        self._count()
        return super().parquet_writer(location, schema, **options)

    def open_output(self, location: str) -> pa.NativeFile:
        self._count()
        return super().open_output(location)


class UnreachableStatsStorage(FileIO):
    """Storage whose stat calls fail `failures` times, once armed, as an unreachable object store's do
    (pyarrow raises a plain OSError for S3 network errors), then work again."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.armed = False

    def stat_many(self, locations: Sequence[str]) -> list[FileInfo]:
        self._fail_while_armed()
        return super().stat_many(locations)

    def exists_many(self, locations: Sequence[str]) -> list[bool]:
        self._fail_while_armed()
        return super().exists_many(locations)

    def file_sizes(
        self, locations: Sequence[str], *, listing: FolderListing | None = None
    ) -> list[int | None]:
        self._fail_while_armed()
        return super().file_sizes(locations, listing=listing)

    def _fail_while_armed(self) -> None:
        if self.armed and self.failures > 0:
            self.failures -= 1
            raise OSError("injected: AWS Error NETWORK_CONNECTION during HeadObject operation")


# --- a crash in a process of its own ---------------------------------------------------------------------


def run_crash_before_commit(tmp: Path, delta: Path, table: str, version: int) -> subprocess.CompletedProcess:
    """A sync (into `cli_catalog(tmp)`) whose process dies right before committing `version`."""
    catalog = cli_catalog(tmp)
    command = [sys.executable, "-m", "tests.helpers.faults", "crash-before-commit", str(version)]
    return run([*command, str(delta), table, catalog_uri(catalog), str(catalog.warehouse)], cwd=tmp)


def main(argv: list[str]) -> int:
    command, version, delta_table, table, catalog_uri, warehouse = argv
    assert command == "crash-before-commit", command
    spark = get_or_create_spark(MirrorSettings.resolve(catalog_uri=catalog_uri, warehouse=warehouse))
    sync_table(spark, delta_table, table, iceberg=CrashBeforeCommit(spark, int(version)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
