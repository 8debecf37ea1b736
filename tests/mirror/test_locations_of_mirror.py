"""How a mirror names files in Iceberg: by URI (`locations.iceberg_location`, `file:/…` plus the path as it is
on disk locally), read back exactly by Iceberg Java, pyiceberg and iceberg-rust whatever characters the
paths hold; and a mirror made before, whose entries are bare local paths, keeps syncing exactly.

The old entries are what the old code really wrote: its versions are mirrored by the `dvmirror` CLI of
commit OLD_CODE_COMMIT, unpacked from this repository's history (`git archive`) and run in a process of
its own, into the same catalog the new code then continues.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.dv_findings import dv_findings
from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.iceberg.maintenance import Retention, expire_and_reclaim
from dv_assets.mirror.iceberg.mirror_table import URI_LOCATIONS_PROPERTY, URI_LOCATIONS_SUMMARY
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.locations import comparable
from dv_assets.mirror.placement import ExecutorPolicy
from dv_assets.mirror.settings import CatalogConfig
from dv_assets.mirror.sync import sync_table
from tests.helpers.delta_histories import (
    Mirrored,
    VersionRows,
    assert_mirrors_match,
    delta_versions,
    fast_spark,
    latest_version,
    mirror,
    mirror_both,
    partitioned_history,
)
from tests.helpers.paths import REPO_ROOT
from tests.helpers.processes import catalog_uri, clean_env, jars_dir, run
from tests.helpers.readers import (
    iceberg_rust_rows,
    pyiceberg_columns,
    pyiceberg_rows,
    snapshots_by_delta_version,
)
from tests.helpers.rows import as_tuples

# The last commit whose mirrors record local files as bare paths.
OLD_CODE_COMMIT = "520161e"


@pytest.fixture(scope="module")
def old_code(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package `dv_assets` as of OLD_CODE_COMMIT, in a folder of its own."""
    folder = tmp_path_factory.mktemp("old-code")
    archive = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", OLD_CODE_COMMIT, "dv_assets"], capture_output=True
    )
    assert archive.returncode == 0, f"this test needs the repository's history: {archive.stderr!r}"
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return folder


def old_sync(old_code: Path, catalog: CatalogConfig, delta: Path, table: str, fmt: int, until: int) -> None:
    """`dvmirror sync` of OLD_CODE_COMMIT, up to Delta version `until`, into `catalog`."""
    command = [
        sys.executable,
        "-c",
        "import sys; from dv_assets.mirror.cli import main; sys.exit(main())",
        "sync",
        str(delta),
        "--table",
        table,
        "--catalog-uri",
        catalog_uri(catalog),
        "--warehouse",
        str(catalog.warehouse),
        "--format-version",
        str(fmt),
        "--until-version",
        str(until),
    ]
    env = clean_env("DVMIRROR_", "DAGSTER_", DVMIRROR_JARS=jars_dir(), PYTHONPATH=str(old_code))
    done = run(command, cwd=old_code, env=env, timeout=None)
    assert done.returncode == 0, (
        f"old dvmirror exited {done.returncode}:\n{done.stdout}\n{done.stderr[-3000:]}"
    )


def files_of(spark, table: str, snapshot_id: int) -> tuple[set[str], dict[str, str]]:
    """Iceberg Java's data file paths of a snapshot, and its delete files' paths by referenced data file."""
    full = f"dvmirror.{table}"
    data = spark.sql(f"SELECT file_path FROM {full}.data_files VERSION AS OF {snapshot_id}").collect()
    deletes = spark.sql(
        f"SELECT file_path, referenced_data_file FROM {full}.delete_files VERSION AS OF {snapshot_id}"
    ).collect()
    return {r.file_path for r in data}, {r.referenced_data_file: r.file_path for r in deletes}


def assert_every_version_reads_back(
    catalog: CatalogConfig, expected: VersionRows, mirrored: Mirrored, *, iceberg_rust: bool
) -> None:
    """pyiceberg (and iceberg-rust) read every version of the mirror as Delta Spark does."""
    for version, snapshot_id in mirrored.snapshots.items():
        columns = expected.columns[version]
        where = f"{mirrored.table_name} v{version}"
        assert sorted(pyiceberg_columns(catalog, mirrored.table_name, snapshot_id)) == columns, where
        want = expected.project(version, columns)
        assert as_tuples(pyiceberg_rows(catalog, mirrored.table_name, snapshot_id), columns) == want, where
        if iceberg_rust:
            rows = iceberg_rust_rows(catalog, mirrored.table_name, snapshot_id)
            assert as_tuples(rows, columns) == want, f"{where} [iceberg-rust]"


@pytest.mark.extended  # about 80 s: a mirror made by the old code, then synced on by every reader
def test_an_older_mirror_with_bare_paths_keeps_syncing_exactly(
    spark, catalog, tmp_path: Path, old_code
) -> None:
    """Versions 0-1 (insert, DVs) mirrored by the old code; then, by this code in three runs, DVs replaced
    on its files (v2 update, v3 merge: converted in Spark tasks), new files, its files removed (v5
    optimize), restored (v7), and so on to the end. Every version reads back as Delta's through Iceberg
    Java and pyiceberg; every DV names its data file exactly as recorded; the cleanup keeps what retained
    snapshots reference. No column mapping: the old code's paths hold the partition folders `p=a b`,
    `p=x%3Dy`, `p=a%2520b%3Dc&d`."""
    root = tmp_path / "older mirror"
    with fast_spark(spark):
        partitioned_history(spark, root, "none", v2_checkpoints=True)
    latest = latest_version(root)
    mirrors = []
    for fmt in (3, 2):
        name = f"locations.older_v{fmt}"
        old_sync(old_code, catalog, root, name, fmt, until=1)
        old_data, old_deletes = files_of(spark, name, snapshots_by_delta_version(catalog, name)[1])
        # What the old code wrote: bare paths, DVs naming them so.
        assert old_data and old_deletes and all(f.startswith("/") for f in old_data | set(old_deletes))
        assert all(path.startswith("/") for path in old_deletes.values())
        # Partition values `x=y`, `a%20b=c&d`, `a b` as Delta escapes them on disk (`50%` is gone at v1).
        assert all(any(f"/p={value}/" in f for f in old_data) for value in ("x%3Dy", "a%2520b%3Dc&d", "a b"))

        # The new DVs on the old code's files are written by Spark tasks (the executor path), the rest on
        # the driver.
        in_tasks = sync_table(
            spark,
            root,
            name,
            format_version=fmt,
            until_version=3,
            executors=ExecutorPolicy(min_dvs=1, on_local_master=True),
        )
        assert {v.dvs_converted_on.split(" ")[0] for v in in_tasks.versions if v.dvs_written} == {"spark"}
        mirror(spark, root, name, fmt, split_at=[7])
        mirrored = Mirrored(name, fmt, snapshots_by_delta_version(catalog, name))
        mirrors.append(mirrored)

        named_as_recorded = named_in_tasks = 0
        for version in range(2, latest + 1):
            data, deletes = files_of(spark, name, mirrored.snapshots[version])
            # A file is named as it was recorded (a bare path the old code wrote), or by its URI.
            assert all(f.startswith("file:/") or f in old_data for f in data), version
            assert all(path.startswith("file:/") or path in old_deletes.values() for path in deletes.values())
            assert set(deletes) <= data, f"v{version}: a DV names no live data file exactly"
            new_dvs_on_old_files = {
                f for f, path in deletes.items() if f in old_data and path.startswith("file:")
            }
            named_as_recorded += len(new_dvs_on_old_files)
            if version <= 3:
                named_in_tasks += len(new_dvs_on_old_files)
            if fmt == 2:  # a position-delete file's rows name the data file as recorded too
                for data_file in new_dvs_on_old_files:
                    rows = pq.read_table(comparable(deletes[data_file]), columns=["file_path"])
                    assert set(rows.column("file_path").to_pylist()) == {data_file}
            findings = dv_findings(spark, DeltaTable(str(root)), version, name, mirrored.snapshots[version])
            assert findings.passed, (version, findings.found)
        assert named_as_recorded > 0  # new DVs on the old code's files happened, named as recorded
        assert named_in_tasks > 0  # some of them written by Spark tasks
        final_data, _ = files_of(spark, name, mirrored.snapshots[latest])
        assert len(old_data - final_data) > 0  # some of the old code's files were removed
        properties = IcebergJava(spark).load(name).properties
        bare_left = any(f.startswith("/") for f in final_data)
        # Marked only by a run that starts with no bare path left (test_plan covers the marking itself).
        assert properties.get(URI_LOCATIONS_PROPERTY) != "true" or not bare_left
        # No snapshot says "no bare path" while one is live: the next run would not look for them.
        summary = IcebergJava(spark).load(name).current_snapshot.summary
        assert summary.get(URI_LOCATIONS_SUMMARY) != "true" or not bare_left

    assert assert_mirrors_match(spark, catalog, root, mirrors, label="older mirror") == 2 * (latest + 1)
    expected = delta_versions(spark, root, list(range(latest + 1)))
    for mirrored in mirrors:
        assert_every_version_reads_back(catalog, expected, mirrored, iceberg_rust=False)

    # The cleanup recognises the mirror's own files in either spelling and never takes a live one.
    delta_files = sorted(p for p in root.rglob("*") if p.is_file())
    for mirrored in mirrors:
        iceberg = IcebergJava(spark)
        report = expire_and_reclaim(
            iceberg,
            mirrored.table_name,
            Retention(retain_last=3),
            now_ms=2**62 // 1000,  # every orphan old enough
        )
        assert report.expired_snapshot_ids
        table = iceberg.load(mirrored.table_name)
        kept = iceberg.snapshot_files(mirrored.table_name, [s.snapshot_id for s in table.snapshots])
        io = FileIO()
        for files in kept.values():
            assert all(io.stat(f).exists for f in files.delete_files | files.metadata_files)
    assert sorted(p for p in root.rglob("*") if p.is_file()) == delta_files  # nothing of Delta's touched


@pytest.mark.extended  # about 50 s: every path spelling, every reader
def test_a_new_mirror_reads_back_with_every_reader_whatever_its_paths_hold(
    spark, catalog, tmp_path: Path
) -> None:
    """A table root with a space and `%25` in its name, partition values with spaces, `%`, `&`, `=` and
    `%20` (Delta escapes some of them once more on disk): every path is written as `file:` plus the path
    as on disk, and Iceberg Java, pyiceberg and iceberg-rust read every version, both formats, as Delta."""
    root = tmp_path / "new %25 mirror"
    with fast_spark(spark):
        # No column mapping: with it, Delta names data folders by random prefixes, not partition values.
        partitioned_history(spark, root, "none", v2_checkpoints=False)
    latest = latest_version(root)
    mirrors = mirror_both(spark, root, "locations_new", split_at=[4])
    assert assert_mirrors_match(spark, catalog, root, mirrors, label="new mirror") == 2 * (latest + 1)
    expected = delta_versions(spark, root, list(range(latest + 1)))
    for mirrored in mirrors:
        assert_every_version_reads_back(catalog, expected, mirrored, iceberg_rust=True)
        table = IcebergJava(spark).load(mirrored.table_name)
        assert table.location.startswith("file:/") and table.properties[URI_LOCATIONS_PROPERTY] == "true"
        data, deletes = files_of(spark, mirrored.table_name, mirrored.snapshots[latest])
        assert all(f.startswith(f"file:{root}/") for f in data | set(deletes)), data
        assert all(
            f.startswith(f"file:{table.location.removeprefix('file:')}/data/dvmirror-")
            for f in deletes.values()
        )
        # The characters as on disk: Delta put the partition value `50%` in the folder `p=50%25` (its rows
        # are gone after v1), `a%20b=c&d` in `p=a%2520b%3Dc&d`.
        first, _ = files_of(spark, mirrored.table_name, mirrored.snapshots[0])
        assert any("/p=50%25/" in f for f in first) and any("/p=a%2520b%3Dc&d/" in f for f in data)
        assert all(Path(comparable(f)).is_file() for f in data | first)
