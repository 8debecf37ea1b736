"""Writing one Delta version's delete files: each DV read and verified, then framed into a Puffin file (v3)
or expanded into a position-delete Parquet file (v2) in the mirror's own folder.

The same function runs on the driver (small versions) or inside Spark tasks (`write_on_executors`): the
DVs are grouped by the file they live in, so each DV file is read by one task, and every task writes its
own delete files straight into the table's data folder and returns only their entries. Work travels as
plain picklable values (`DeleteFileJob` out, `TaskResult` back); executors import the installed `dv_assets`
package. `run_delete_job` runs a version's job where `placement.py` says it pays.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace

from pyspark.sql import SparkSession

from dv_assets.mirror.collector import collector_paused
from dv_assets.mirror.dv.codec import FRAME_OVERHEAD
from dv_assets.mirror.dv.reader import FIRST_DV_OFFSET, DVTask, convert_dv_batch, resolve_dv_location
from dv_assets.mirror.errors import InvalidDeletionVectorError, MirrorInputError, UnsupportedFeatureError
from dv_assets.mirror.iceberg.content_files import DeleteFile, PartitionJson
from dv_assets.mirror.iceberg.layout import MirrorLayout
from dv_assets.mirror.iceberg.position_deletes import write_position_delete_file
from dv_assets.mirror.iceberg.puffin import build_puffin
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.placement import ExecutorPolicy, Placement

# Errors a task reports back by name (`Refusal`), so the driver raises the same refusal, naming the same file.
_INPUT_ERRORS: dict[str, type[MirrorInputError]] = {
    cls.__name__: cls for cls in (MirrorInputError, InvalidDeletionVectorError, UnsupportedFeatureError)
}


@dataclass(frozen=True)
class DeleteFileJob:
    """The DVs of one version (or a share of them) and what their delete files need."""

    tasks: tuple[DVTask, ...]
    partitions: Mapping[str, PartitionJson]  # by data file
    # By data file: its path in Iceberg, as each DV names it (`referenced_data_file`, v2 `file_path` values).
    data_file_paths: Mapping[str, str]
    format_version: int
    layout: MirrorLayout
    delta_version: int


def write_delete_files(job: DeleteFileJob, io: FileIO, written: list[DeleteFile]) -> list[DeleteFile]:
    """Convert the job's DVs and write them; each delete file is appended to `written` as soon as it
    exists (so a caller can remove what a failed version wrote). Returns `written`."""
    if not job.tasks:
        return written
    # The work makes a few objects per DV and no reference cycle: collections of it find nothing
    # (measured: 124-264 ms of them in a sync of 10,000-DV versions, against 270 ms of the work).
    with collector_paused():
        return _write_delete_files(job, io, written)


def _write_delete_files(job: DeleteFileJob, io: FileIO, written: list[DeleteFile]) -> list[DeleteFile]:
    # Each DV is written naming its data file as Iceberg does (refusals while reading name its location).
    blobs = convert_dv_batch(job.tasks, io, names=job.data_file_paths)
    partitions = {job.data_file_paths[location]: p for location, p in job.partitions.items()}
    layout = job.layout
    if job.format_version >= 3:
        puffin = build_puffin(blobs)
        path = layout.puffin_path(job.delta_version)
        try:
            io.write(path, puffin.content)
        except BaseException:
            io.delete_quietly([path])
            raise
        written += DeleteFile.puffin_dvs(
            path,
            len(puffin.content),
            (
                (
                    e.referenced_data_file,
                    partitions[e.referenced_data_file],
                    e.cardinality,
                    e.offset,
                    e.length,
                )
                for e in puffin.entries
            ),
        )
        return written
    io.makedirs(layout.delete_dir)
    for dv in blobs:
        path = layout.position_deletes_path(job.delta_version)
        try:
            written.append(
                write_position_delete_file(
                    path, dv.data_file, dv.positions(), partition=partitions[dv.data_file], io=io
                )
            )
        except BaseException:
            io.delete_quietly([path])
            raise
    return written


def run_delete_job(
    spark: SparkSession,
    job: DeleteFileJob,
    io: FileIO,
    executors: ExecutorPolicy,
    written: list[DeleteFile],
) -> tuple[str, Placement]:
    """Run the job on the driver, or as Spark tasks where `executors` says they pay (`placement.py`: on a
    cluster master, from a number of DVs or DV bytes); its delete files go into `written` (on the driver,
    each as soon as it exists). Returns where the work ran, for the version's report ("none", "driver" or
    the `SparkRun`), and the choice with its reason."""
    dv_bytes = sum(task.size_in_bytes for task in job.tasks) + FRAME_OVERHEAD * len(job.tasks)
    placement = executors.place(len(job.tasks), dv_bytes, spark.sparkContext.master)
    if not job.tasks:
        return "none", placement
    if placement.on_executors:
        on_executors, run = write_on_executors(spark, job, io)
        written += on_executors
        return str(run), placement
    write_delete_files(job, io, written)
    return "driver", placement


def by_dv_file(tasks: Iterable[DVTask], max_share: int | None = None) -> list[tuple[DVTask, ...]]:
    """Tasks grouped by the DV file they read (an inline DV is a group of its own), largest first.

    A DV file holding more than `max_share` DVs is cut into consecutive offset ranges of at most that
    many, so that one large DV file (a DELETE over many data files writes one) still spreads over the
    cores; every byte of it is still read once, by the share whose range holds it.
    """
    groups: dict[str, list[DVTask]] = defaultdict(list)
    for index, task in enumerate(tasks):
        location = resolve_dv_location(task.table_root, task.storage_type, task.path_or_inline_dv)
        groups[location or f"inline:{index}"].append(task)
    shares: list[tuple[DVTask, ...]] = []
    for group in groups.values():
        if max_share is None or len(group) <= max_share:
            shares.append(tuple(group))
            continue
        group.sort(key=lambda t: FIRST_DV_OFFSET if t.offset is None else t.offset)
        shares += [tuple(group[i : i + max_share]) for i in range(0, len(group), max_share)]
    return sorted(shares, key=len, reverse=True)


@dataclass(frozen=True)
class Refusal:
    """A MirrorInputError a Spark task met, by its class name: the driver raises the same refusal."""

    kind: str
    reason: str
    file: str | None

    @classmethod
    def of(cls, err: MirrorInputError) -> Refusal:
        return cls(type(err).__name__, err.reason, err.file)

    def error(self) -> MirrorInputError:
        return _INPUT_ERRORS.get(self.kind, MirrorInputError)(self.reason, file=self.file)


@dataclass(frozen=True)
class TaskResult:
    """What one Spark task sends back: the delete files it wrote, or the refusal that stopped it (having
    removed its own files), and the executor it ran on."""

    written: tuple[DeleteFile, ...]
    refused: Refusal | None
    executor: str


@dataclass(frozen=True)
class SparkRun:
    """Where a version's DV work ran: how many tasks, on which executors (`driver` in local mode)."""

    tasks: int
    executors: frozenset[str]

    def __str__(self) -> str:
        return f"spark ({self.tasks} tasks on executor(s) {', '.join(sorted(self.executors))})"


def write_on_executors(
    spark: SparkSession, job: DeleteFileJob, io: FileIO
) -> tuple[list[DeleteFile], SparkRun]:
    """`write_delete_files` as Spark tasks, one or more DV files per task: the delete files and where
    they were written. A refused DV raises the same MirrorInputError as on the driver, after the files
    the other tasks wrote are removed."""
    parallelism = spark.sparkContext.defaultParallelism
    groups = by_dv_file(job.tasks, max_share=-(-len(job.tasks) // (parallelism * 2)))
    slices = max(1, min(len(groups), parallelism * 4))
    # Each share carries the partitions of its own data files only, not the whole version's.
    shares = [
        replace(
            job,
            tasks=group,
            partitions={t.data_file: job.partitions[t.data_file] for t in group},
            data_file_paths={t.data_file: job.data_file_paths[t.data_file] for t in group},
        )
        for group in groups
    ]
    rdd = spark.sparkContext.parallelize(shares, slices).mapPartitions(_task(io))
    results: list[TaskResult] = rdd.collect()
    written = [delete_file for result in results for delete_file in result.written]
    refused = next((r.refused for r in results if r.refused is not None), None)
    if refused is not None:
        io.delete_quietly(f.path for f in written if job.layout.is_owned(f.path))
        raise refused.error()
    return written, SparkRun(slices, frozenset(r.executor for r in results))


def _executor_id() -> str:
    """The executor a Python task runs for, as the executor's own environment tells it (a standalone
    or YARN executor exports its log URLs, which name it); `driver` in local mode."""
    url = os.environ.get("SPARK_LOG_URL_STDERR", "")
    found = re.search(r"executorId=([^&]+)", url)
    return found.group(1) if found else "driver"


def _task(io: FileIO) -> Callable[[Iterator[DeleteFileJob]], Iterator[TaskResult]]:
    def run(shares: Iterator[DeleteFileJob]) -> Iterator[TaskResult]:
        written: list[DeleteFile] = []
        mine = list(shares)
        if not mine:
            return
        # One task's DV files make one Puffin file (v3).
        merged = replace(
            mine[0],
            tasks=tuple(t for share in mine for t in share.tasks),
            partitions={k: v for share in mine for k, v in share.partitions.items()},
            data_file_paths={k: v for share in mine for k, v in share.data_file_paths.items()},
        )
        try:
            write_delete_files(merged, io, written)
        except MirrorInputError as err:
            io.delete_quietly(f.path for f in written)
            yield TaskResult(written=(), refused=Refusal.of(err), executor=_executor_id())
            return
        yield TaskResult(written=tuple(written), refused=None, executor=_executor_id())

    return run
