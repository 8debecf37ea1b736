"""A mirrored snapshot's deletion vectors checked against Delta's, read independently of the sync: the
Iceberg side as the snapshot's live content files (`SnapshotFiles`: Spark's `files` metadata table here,
or the manifests through pyiceberg, `iceberg/pyiceberg_reader.read_snapshot_files`: the same rows), the Delta
side from the log replay. What the `one_dv_per_data_file` check reports (`version_checks`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dv_assets.mirror.delta.facts import dv_cardinalities
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.iceberg.mirror_table import DeleteFileRow, SnapshotFiles
from dv_assets.mirror.locations import comparable
from dv_assets.mirror.settings import ICEBERG_CATALOG_NAME

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class DvFindings:
    """Everything wrong with a snapshot's delete files, by kind (every kind listed; empty: all good),
    and what was compared."""

    problems: Mapping[str, tuple[str, ...]]
    iceberg_delete_files: int
    delta_dvs: int
    iceberg_data_files: int

    @property
    def found(self) -> dict[str, tuple[str, ...]]:
        """The kinds with problems."""
        return {kind: items for kind, items in self.problems.items() if items}

    @property
    def passed(self) -> bool:
        return not self.found


def compare_dvs(
    data_files: Collection[str], deletes: Sequence[DeleteFileRow], delta_dvs: Mapping[str, int]
) -> DvFindings:
    """The snapshot's data files and delete files against Delta's DVs (data file → cardinality): at most
    one DV per data file, each on a live data file (its exact path: readers match DVs by string), and the
    same DVs with the same cardinalities (by `comparable` location: Iceberg names a file by URI, Delta's
    log replay by path)."""
    per_file = Counter(row.referenced_data_file for row in deletes)
    # Two DVs on one file are two whatever their spellings (`/x`, `file:/x`).
    per_location = Counter(comparable(f) for f in per_file.elements() if f is not None)
    iceberg_cardinality: dict[str, int] = {}
    for row in deletes:
        if row.referenced_data_file is not None:
            data_file = comparable(row.referenced_data_file)
            iceberg_cardinality[data_file] = iceberg_cardinality.get(data_file, 0) + row.record_count
    delta_dvs = {comparable(f): n for f, n in delta_dvs.items()}
    problems = {
        "data files with more than one DV": sorted(f"{f} ({n})" for f, n in per_location.items() if n > 1),
        "delete files without a referenced data file": sorted(
            row.file_path for row in deletes if row.referenced_data_file is None
        ),
        "DVs of data files not live in the snapshot": sorted(
            f for f in per_file if f is not None and f not in data_files
        ),
        "Delta DVs missing in Iceberg": sorted(f for f in delta_dvs if f not in iceberg_cardinality),
        "Iceberg DVs Delta does not have": sorted(f for f in iceberg_cardinality if f not in delta_dvs),
        "cardinality differs from Delta's": sorted(
            f"{f}: Iceberg {n}, Delta {delta_dvs[f]}"
            for f, n in iceberg_cardinality.items()
            if f in delta_dvs and delta_dvs[f] != n
        ),
    }
    return DvFindings(
        problems={kind: tuple(items) for kind, items in problems.items()},
        iceberg_delete_files=len(deletes),
        delta_dvs=len(delta_dvs),
        iceberg_data_files=len(data_files),
    )


def findings_against_delta(delta: DeltaTable, delta_version: int, files: SnapshotFiles) -> DvFindings:
    """The snapshot's content files against Delta `delta_version`'s DVs."""
    delta_dvs = dv_cardinalities(delta.state(delta_version, with_stats=False))
    return compare_dvs(files.data_files, files.deletes, delta_dvs)


def snapshot_files_with_spark(spark: SparkSession, iceberg_table: str, snapshot_id: int) -> SnapshotFiles:
    """The snapshot `snapshot_id` of `iceberg_table` (NAMESPACE.NAME) from Spark's `files` metadata table."""
    table = f"{ICEBERG_CATALOG_NAME}.{iceberg_table}"
    # One query over `files` (every content file: 0 data, 1 position deletes and DVs, 2 equality deletes)
    # rather than one per kind: the check runs on every version of a backlog.
    rows = spark.sql(
        f"SELECT content, file_path, referenced_data_file, record_count "
        f"FROM {table}.files VERSION AS OF {snapshot_id}"
    ).collect()
    return SnapshotFiles(
        data_files=frozenset(row.file_path for row in rows if row.content == 0),
        deletes=tuple(
            DeleteFileRow(row.file_path, row.referenced_data_file, row.record_count)
            for row in rows
            if row.content != 0
        ),
    )


def dv_findings(
    spark: SparkSession, delta: DeltaTable, delta_version: int, iceberg_table: str, snapshot_id: int
) -> DvFindings:
    """The snapshot `snapshot_id` of `iceberg_table` (NAMESPACE.NAME) against Delta `delta_version`,
    read through Spark."""
    files = snapshot_files_with_spark(spark, iceberg_table, snapshot_id)
    return findings_against_delta(delta, delta_version, files)
