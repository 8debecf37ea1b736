"""The mirror follows Delta Spark's own VACUUM (issue 36, "readable means readable").

A Delta Spark table with DVs: v0 CREATE, v1 INSERT, v2 INSERT, v3 DELETE (DVs), v4 UPDATE (DVs and new
files), v5 OPTIMIZE (every file rewritten), v6 INSERT; mirrored; then `VACUUM RETAIN 0 HOURS` (v7 START,
v8 END) deletes every file only v1..v4 named. Delta Spark itself can read 0, 5.. only. Before the mirror
has followed, `dvmirror status` already lists exactly those and `dvmirror verify --full` names a missing
file; the next sync expires the snapshots of 1..4 (the mirror's own delete files with them, no Delta
file), and every retained snapshot is read by Iceberg Java, pyiceberg and DuckDB as Delta Spark reads
that version. A VACUUM of a file the mirror's current version names is a refusal naming the file.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import dagster as dg
import pytest

from dv_assets.defs.iceberg.assets import VACUUMED
from dv_assets.defs.sensors import mirror_range_request
from dv_assets.defs.status_metadata import READABLE_VERSIONS, TIME_TRAVEL
from dv_assets.mirror.cli.verify import check_retained_snapshots_readable
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.iceberg.layout import MirrorLayout
from dv_assets.mirror.iceberg.mirror_table import VACUUM_CHECKED_PROPERTY
from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table, read_snapshot_files
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.status import mirror_status
from dv_assets.mirror.sync import sync_table
from dv_assets.mirror.vacuum import VACUUM_END
from tests.helpers.dagster import (
    add_partitions,
    build_source,
    definitions,
    execute_run_request,
    make_source,
    recorded_materializations,
)
from tests.helpers.delta_histories import fast_spark, vacuum_now
from tests.helpers.processes import catalog_args, no_java_env, run_dvmirror
from tests.helpers.readers import (
    delta_spark_rows,
    duckdb_rows,
    iceberg_java_rows,
    pyiceberg_rows,
    snapshots_by_delta_version,
)

# `extended`: Delta Spark's table, two VACUUMs and a `verify --full` take about two minutes.
pytestmark = [pytest.mark.spark, pytest.mark.extended]


def files_under(root: Path) -> dict[str, int]:
    """Every file under `root` with its size: what the mirror must never delete or change."""
    return {str(p): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def delta_readable(spark, root: Path, versions: range) -> dict[int, list[dict]]:
    """The versions Delta Spark itself can still read, with their rows."""
    readable = {}
    for version in versions:
        try:
            readable[version] = delta_spark_rows(spark, str(root), version)
        except Exception as err:  # a data file VACUUM deleted: Spark's FileNotFound, wrapped
            assert "does not exist" in str(err) or "FileNotFound" in str(err) or "not found" in str(err), err
    return readable


def build(spark, root: Path) -> str:
    ref = f"delta.`{root}`"
    with fast_spark(spark):
        spark.sql(
            f"CREATE TABLE {ref} (id BIGINT, p STRING) USING delta PARTITIONED BY (p) "
            "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
        )
        spark.sql(f"INSERT INTO {ref} SELECT id, CAST(id % 3 AS STRING) FROM range(0, 300)")
        spark.sql(f"INSERT INTO {ref} SELECT id, CAST(id % 3 AS STRING) FROM range(300, 400)")
        spark.sql(f"DELETE FROM {ref} WHERE id % 7 = 0")
        spark.sql(f"UPDATE {ref} SET id = id + 1000 WHERE id % 11 = 0")
        spark.sql(f"OPTIMIZE {ref}")
        spark.sql(f"INSERT INTO {ref} VALUES (5000, '0'), (5001, '1')")
    return ref


@pytest.fixture(scope="module")
def built_source(spark, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("vacuum_follow") / "source"
    build(spark, root)
    return root


@pytest.fixture
def built(built_source: Path, tmp_path: Path) -> Path:
    """A copy of the built table (v0..v6, not vacuumed) of its own."""
    root = tmp_path / "vacuumed"
    shutil.copytree(built_source, root)
    return root


def test_vacuum_is_followed_and_every_retained_version_is_readable(
    spark, catalog, built: Path, tmp_path: Path
) -> None:
    root = built
    table = "vac.follow"
    ref = f"delta.`{root}`"
    sync_table(spark, root, table)
    assert sorted(snapshots_by_delta_version(catalog, table)) == list(range(7))
    vacuum_now(spark, ref)
    latest = DeltaTable(root).latest_version()
    assert latest == 8 and DeltaTable(root).commit_info(8).operation == VACUUM_END
    readable = delta_readable(spark, root, range(latest + 1))
    assert sorted(readable) == [0, 5, 6, 7, 8], sorted(readable)

    # Before the mirror has followed: `status` (no JVM) lists exactly what can be read...
    where = catalog_args(catalog)
    shown = run_dvmirror("status", table, *where, "--json", cwd=tmp_path, env=no_java_env())
    assert shown.returncode == 0, shown.stderr
    (status,) = json.loads(shown.stdout)["tables"]
    assert status["readable_versions"] == [0, 5, 6]
    assert sorted(int(v) for v in status["unreadable_versions"]) == [1, 2, 3, 4]
    text = run_dvmirror("status", table, *where, cwd=tmp_path, env=no_java_env()).stdout
    assert re.search(r"\n  readable versions: +0, 5\.\.6\n", text), text
    assert re.search(r"\n  unreadable versions: +1\.\.4 \(Delta's VACUUM deleted", text), text
    # ... and `verify --full` finds a retained snapshot that names a missing file.
    verified = run_dvmirror("verify", table, "--full", "--json", *where, cwd=tmp_path)
    assert verified.returncode == 1, verified.stdout + verified.stderr
    check = {c["name"]: c for c in json.loads(verified.stdout)["checks"]}["retained_snapshots_readable"]
    assert not check["passed"] and "Delta versions 1..4" in check["summary"], check
    missing = check["details"]["problems"]["data file missing"]
    assert all(Path(line.rsplit(": ", 1)[1].removeprefix("file:")).exists() is False for line in missing)

    # The sync mirrors VACUUM START / END and follows it.
    mirror_before = read_mirror_table(catalog, table)
    assert mirror_before is not None
    delta_files = files_under(root)
    layout = MirrorLayout(mirror_before.location)
    began = time.monotonic()
    result = sync_table(spark, root, table)
    seconds = time.monotonic() - began
    assert result.mirrored_versions == [7, 8]
    followed = result.vacuum
    assert followed is not None and followed.vacuum_version == 8
    assert followed.expired_versions == [1, 2, 3, 4]
    # The cost follows the files removed: the tombstones after the oldest retained version, not the table.
    removed = {
        json.loads(line)["remove"]["path"]
        for version in range(1, latest + 1)
        for line in (root / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
        if '"remove"' in line
    }
    assert followed.commits_read == (1, 8) and followed.candidates == len(removed)
    assert len(followed.gone) == followed.candidates  # VACUUM RETAIN 0 HOURS took every one
    print(
        f"\nfollowed VACUUM: {followed.candidates} tombstoned files stat'ed, {len(followed.gone)} gone, "
        f"commits {followed.commits_read}, {followed.seconds} s of the sync's {seconds:.1f} s; "
        f"{len(followed.deleted_files)} mirror files reclaimed"
    )
    # Only the mirror's own files went: its delete files and Iceberg metadata, never a Delta file.
    assert files_under(root) == delta_files
    assert followed.deleted_files
    assert all(layout.is_owned(f) or layout.is_metadata(f) for f in followed.deleted_files)
    assert any(layout.is_owned(f) for f in followed.deleted_files)  # v3/v4's DVs, only they named

    mirror = read_mirror_table(catalog, table)
    assert mirror is not None and mirror.properties[VACUUM_CHECKED_PROPERTY] == "8"
    by_version = snapshots_by_delta_version(catalog, table)
    assert sorted(by_version) == sorted(readable)
    status_after = mirror_status(DeltaTable(root), mirror, table, vacuum_io=FileIO())
    assert list(status_after.readable_versions) == sorted(readable)
    assert not status_after.unreadable_versions
    files_of = lambda sid: read_snapshot_files(catalog, table, sid)  # noqa: E731
    assert check_retained_snapshots_readable(mirror, files_of, FileIO()).passed
    # Every retained snapshot, read by three readers, is what Delta Spark reads at that version.
    assert mirror.metadata_location is not None
    for version, snapshot_id in sorted(by_version.items()):
        expected = readable[version]
        assert iceberg_java_rows(spark, table, snapshot_id) == expected, f"Iceberg Java, v{version}"
        assert pyiceberg_rows(catalog, table, snapshot_id) == expected, f"pyiceberg, v{version}"
        assert duckdb_rows(mirror.metadata_location, snapshot_id) == expected, f"DuckDB, v{version}"

    # Followed once: the next sync (nothing new) reads nothing and expires nothing.
    again = sync_table(spark, root, table)
    assert again.vacuum is None and sorted(snapshots_by_delta_version(catalog, table)) == sorted(readable)


def test_a_vacuum_of_the_current_versions_files_is_refused(spark, catalog, tmp_path: Path) -> None:
    """The mirror at v2 (sync --until-version 2); Delta's OPTIMIZE (v3) and VACUUM (v4, v5) delete the
    files v1 and v2 name. A sync that stays at v2 refuses, naming a file of v2 (v1 is expired); one that
    mirrors on to Delta's latest expires v2 too."""
    root = tmp_path / "current"
    table = "vac.current"
    ref = f"delta.`{root}`"
    with fast_spark(spark):
        spark.sql(
            f"CREATE TABLE {ref} (id BIGINT) USING delta "
            "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
        )
        spark.sql(f"INSERT INTO {ref} SELECT id FROM range(0, 100)")
        spark.sql(f"INSERT INTO {ref} SELECT id FROM range(100, 200)")
    sync_table(spark, root, table)
    with fast_spark(spark):
        spark.sql(f"OPTIMIZE {ref}")
    vacuum_now(spark, ref)
    assert DeltaTable(root).latest_version() == 5
    with pytest.raises(MirrorInputError, match="VACUUM deleted a data file") as refused:
        sync_table(spark, root, table, until_version=2)
    assert refused.value.version == 2 and refused.value.file is not None
    assert not Path(refused.value.file).exists()
    assert str(root) in refused.value.one_line() and refused.value.file in refused.value.one_line()
    assert sorted(snapshots_by_delta_version(catalog, table)) == [0, 2]  # v1 expired, v2 is current
    mirror = read_mirror_table(catalog, table)
    assert mirror is not None and VACUUM_CHECKED_PROPERTY not in mirror.properties

    result = sync_table(spark, root, table)
    assert result.mirrored_versions == [3, 4, 5]
    assert result.vacuum is not None and result.vacuum.expired_versions == [2]
    by_version = snapshots_by_delta_version(catalog, table)
    assert sorted(by_version) == [0, 3, 4, 5]
    expected = delta_spark_rows(spark, str(root), 5)
    assert iceberg_java_rows(spark, table, by_version[3]) == expected
    assert pyiceberg_rows(catalog, table, by_version[3]) == expected


def test_dagster_retires_the_partitions_vacuum_made_unreadable(spark, catalog, built: Path) -> None:
    """The mirror asset's run that mirrors VACUUM START / END follows it: an expired observation on the
    partitions of 1..4, which leave the Partitions view; the overview lists the readable versions."""
    source = make_source(built)
    built_defs = build_source(source)
    defs = definitions([source], catalog)
    key = dg.AssetKey(source.mirror_asset_key)
    with dg.instance_for_test() as instance:
        add_partitions(instance, built_defs, list(range(7)))
        assert execute_run_request(defs, instance, mirror_range_request(source, 0, 6)).success
        vacuum_now(spark, f"delta.`{built}`")
        add_partitions(instance, built_defs, [7, 8])
        run = execute_run_request(defs, instance, mirror_range_request(source, 7, 8))
        assert run.success
        observations = [
            e.event_specific_data.asset_observation
            for e in run.all_events
            if e.event_type_value == "ASSET_OBSERVATION"
        ]
        observed = {o.partition: o.metadata for o in observations}
        assert sorted(p for p in observed if p is not None) == ["1", "2", "3", "4"]
        for partition in ("1", "2", "3", "4"):
            assert observed[partition]["status"].value == VACUUMED
            assert observed[partition][TIME_TRAVEL].value == "expired"
        assert instance.get_dynamic_partitions(source.partitions_name) == ["0", "5", "6", "7", "8"]
        newest = recorded_materializations(instance, source.mirror_asset_key, ["8"])["8"]
        assert newest[READABLE_VERSIONS] == "0, 5..8", newest
        assert sorted(snapshots_by_delta_version(catalog, source.iceberg_table)) == [0, 5, 6, 7, 8]
        # Every record of the retired partitions stays in the event log.
        kept = instance.fetch_observations(
            dg.AssetRecordsFilter(asset_key=key, asset_partitions=["2"]), limit=1
        )
        assert kept.records[0].asset_observation.metadata["status"].value == VACUUMED
