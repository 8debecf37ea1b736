"""A mirror nothing can corrupt (issue 8): ordinary operations on either side end in exact rows or a clear
refusal with the mirror at its last good version, and nothing deletes a file the mirror does not own.

Each case runs the real engine on a copy of a fixture in the session's Spark (Delta Spark, Iceberg Java)
and reads the mirror back with Iceberg Java and pyiceberg; faults go in through the Iceberg seam
(`IcebergJava` subclasses), never through the production path. docs/RELIABILITY.md lists every scenario.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from dv_assets.mirror.errors import InvalidDeletionVectorError, MirrorConflictError, MirrorInputError
from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.iceberg.layout import MirrorLayout
from dv_assets.mirror.iceberg.maintenance import Retention
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.locations import comparable, iceberg_location
from dv_assets.mirror.placement import ExecutorPolicy
from dv_assets.mirror.settings import ICEBERG_CATALOG_NAME
from dv_assets.mirror.sync import sync_table
from testkit.synthetic import encode_blob, z85_encode
from tests.helpers.dagster import hash_tree
from tests.helpers.delta_histories import delta_table_with_dvs, vacuum_now
from tests.helpers.delta_log import METADATA
from tests.helpers.faults import (
    COMMIT_0,
    COMMIT_1,
    DATA_NAME,
    DV_NAME,
    FailAfterWrites,
    FailAroundCommit,
    InterruptAfterCommit,
    RaceBeforeCommit,
    edit_commit,
    point_dv_at,
)
from tests.helpers.processes import sync_cli
from tests.helpers.readers import (
    assert_mirror_exact,
    current_snapshot_id,
    delta_spark_rows,
    iceberg_java_rows,
    pyiceberg_rows,
    snapshots_by_delta_version,
)

pytestmark = pytest.mark.spark

SMALL = "table-with-dv-small"  # v0: 10 rows; v1: a DV deletes 2
PARTITIONED = "dv-partitioned-with-checkpoint"  # 16 versions, a checkpoint at 10


# --- ownership: Iceberg's own file deletion never reaches Delta's files ------------------------------


def test_drop_table_purge_deletes_no_delta_file(spark, catalog, copy_fixture) -> None:
    root = copy_fixture(SMALL)
    sync_table(spark, root, "rel.purge")
    delta_before = hash_tree(root)
    with pytest.raises(Exception, match="GC is disabled"):
        spark.sql(f"DROP TABLE {ICEBERG_CATALOG_NAME}.rel.purge PURGE")
    assert hash_tree(root) == delta_before
    assert_mirror_exact(spark, catalog, "rel.purge", SMALL)
    # A plain DROP (no purge) only unregisters the table; the Delta table stays whole.
    spark.sql(f"DROP TABLE {ICEBERG_CATALOG_NAME}.rel.purge")
    assert hash_tree(root) == delta_before


@pytest.mark.parametrize("procedure", ["expire_snapshots", "remove_orphan_files"])
def test_icebergs_file_deleting_procedures_are_refused(spark, catalog, copy_fixture, procedure) -> None:
    root = copy_fixture(SMALL)
    sync_table(spark, root, f"rel.{procedure}")
    delta_before = hash_tree(root)
    with pytest.raises(Exception, match="GC is disabled"):
        spark.sql(f"CALL {ICEBERG_CATALOG_NAME}.system.{procedure}(table => 'rel.{procedure}')").collect()
    assert hash_tree(root) == delta_before
    assert_mirror_exact(spark, catalog, f"rel.{procedure}", SMALL)


def test_warehouse_inside_the_delta_table_is_refused(spark, copy_fixture, tmp_path: Path) -> None:
    class InsideDelta(IcebergJava):
        def default_location(self, table_name: str) -> str:
            return f"{root}/iceberg/{table_name.replace('.', '/')}"

    root = copy_fixture(SMALL)
    with pytest.raises(MirrorInputError, match="overlaps the Delta table"):
        sync_table(spark, root, "rel.inside", iceberg=InsideDelta(spark))
    assert IcebergJava(spark).load("rel.inside") is None


# --- identity ---------------------------------------------------------------------------------------


def test_an_existing_non_mirror_table_is_not_written(spark, copy_fixture) -> None:
    spark.sql(f"CREATE TABLE {ICEBERG_CATALOG_NAME}.rel.foreign (own STRING) USING iceberg")
    spark.sql(f"INSERT INTO {ICEBERG_CATALOG_NAME}.rel.foreign VALUES ('mine')")
    with pytest.raises(MirrorInputError, match="not a dv-mirror mirror"):
        sync_table(spark, copy_fixture(SMALL), "rel.foreign")
    rows = spark.table(f"{ICEBERG_CATALOG_NAME}.rel.foreign").collect()
    assert [r.asDict() for r in rows] == [{"own": "mine"}]


def test_another_delta_table_in_the_same_folder_is_refused(spark, catalog, copy_fixture) -> None:
    root = copy_fixture(SMALL)
    sync_table(spark, root, "rel.replaced")
    before = current_snapshot_id(spark, "rel.replaced")
    other = copy_fixture(PARTITIONED)  # more versions, another table id and other commits
    shutil.rmtree(root)
    shutil.copytree(other, root)
    with pytest.raises(MirrorInputError, match="another Delta table"):
        sync_table(spark, root, "rel.replaced")
    assert current_snapshot_id(spark, "rel.replaced") == before


def test_a_delta_table_behind_its_mirror_is_refused(spark, copy_fixture) -> None:
    root = copy_fixture(SMALL)
    sync_table(spark, root, "rel.behind")
    (root / "_delta_log" / "00000000000000000001.json").unlink()
    with pytest.raises(MirrorInputError, match="latest version is 0"):
        sync_table(spark, root, "rel.behind")


# --- the last mirrored version comes from the lineage ----------------------------------------------------


def test_rewrite_manifests_is_tolerated(spark, catalog, copy_fixture) -> None:
    root = copy_fixture(PARTITIONED)
    sync_table(spark, root, "rel.manifests", until_version=9)
    spark.sql(f"CALL {ICEBERG_CATALOG_NAME}.system.rewrite_manifests('rel.manifests')").collect()
    result = sync_table(spark, root, "rel.manifests")
    assert result.previously_mirrored == 9
    assert result.mirrored_versions == list(range(10, 16))
    assert_mirror_exact(spark, catalog, "rel.manifests", PARTITIONED)


def test_a_foreign_content_change_is_refused_not_mirrored_over(spark, copy_fixture) -> None:
    root = copy_fixture(PARTITIONED)
    sync_table(spark, root, "rel.tampered", until_version=9)
    spark.sql(f"DELETE FROM {ICEBERG_CATALOG_NAME}.rel.tampered WHERE col1 = 1")
    tampered = current_snapshot_id(spark, "rel.tampered")
    with pytest.raises(MirrorInputError, match="changed the table's content outside dv-mirror"):
        sync_table(spark, root, "rel.tampered")
    assert current_snapshot_id(spark, "rel.tampered") == tampered


# --- Delta log cleanup -----------------------------------------------------------------------------------


def test_commits_removed_by_log_cleanup_are_refused_not_guessed(spark, catalog, copy_fixture) -> None:
    root = copy_fixture(PARTITIONED)
    sync_table(spark, root, "rel.lagging", until_version=9)
    before = current_snapshot_id(spark, "rel.lagging")
    for version in range(10):  # what Delta's log retention does; the checkpoint at 10 stays
        (root / "_delta_log" / f"{version:020d}.json").unlink()
    with pytest.raises(MirrorInputError, match="no longer holds the commits after it") as refused:
        sync_table(spark, root, "rel.lagging")
    assert refused.value.version == 10
    assert current_snapshot_id(spark, "rel.lagging") == before
    assert_mirror_exact(spark, catalog, "rel.lagging", PARTITIONED)


# --- commits: races and interrupts ------------------------------------------------------------------------


def test_a_lost_race_commits_nothing_and_the_rerun_converges(spark, catalog, copy_fixture) -> None:
    root = copy_fixture(PARTITIONED)
    sync_table(spark, root, "rel.race", until_version=3)
    with pytest.raises(MirrorConflictError, match="another sync committed; rerun") as lost:
        sync_table(spark, root, "rel.race", iceberg=RaceBeforeCommit(spark, root))
    assert lost.value.version == 4
    assert sorted(snapshots_by_delta_version(catalog, "rel.race")) == [0, 1, 2, 3, 4]
    assert sync_table(spark, root, "rel.race").mirrored_versions == list(range(5, 16))
    assert_mirror_exact(spark, catalog, "rel.race", PARTITIONED)


@pytest.mark.parametrize("format_version", [3, 2])
def test_an_interrupt_after_the_commit_keeps_its_delete_files(spark, catalog, copy_fixture, format_version):
    root = copy_fixture(SMALL)
    name = f"rel.interrupted_v{format_version}"
    sync_table(spark, root, name, format_version=format_version, until_version=0)
    with pytest.raises(KeyboardInterrupt):
        sync_table(spark, root, name, iceberg=InterruptAfterCommit(spark))
    assert sorted(snapshots_by_delta_version(catalog, name)) == [0, 1]
    assert_mirror_exact(spark, catalog, name, SMALL)  # the committed delete file is there and read
    assert sync_table(spark, root, name).mirrored_versions == []


# --- path policy: a hostile log reaches no file outside the table -----------------------------------------


def test_a_data_file_outside_the_table_is_refused(spark, copy_fixture, tmp_path: Path) -> None:
    root = copy_fixture(SMALL)
    victim = tmp_path / "victim"
    victim.mkdir()
    shutil.copy2(root / DATA_NAME, victim / DATA_NAME)
    for commit in (COMMIT_0, COMMIT_1):
        edit_commit(root, commit, f'"path":"{DATA_NAME}"', f'"path":"../victim/{DATA_NAME}"')
    with pytest.raises(MirrorInputError, match="outside the table root") as refused:
        sync_table(spark, root, "rel.escape")
    assert (refused.value.version, refused.value.file) == (0, str(victim / DATA_NAME))
    assert IcebergJava(spark).load("rel.escape") is None


def test_dvs_outside_the_table_are_refused_unless_their_root_is_allowed(
    spark, catalog, copy_fixture, tmp_path: Path
) -> None:
    root = copy_fixture(SMALL)
    elsewhere = tmp_path / "shallow-clone-source"
    elsewhere.mkdir()
    shutil.copy2(root / DV_NAME, elsewhere / DV_NAME)
    point_dv_at(root, (elsewhere / DV_NAME).as_uri())
    with pytest.raises(MirrorInputError, match=r"deletion vector file .* outside the table root") as refused:
        sync_table(spark, root, "rel.p_dv")
    assert (refused.value.version, refused.value.file) == (1, str(root / DATA_NAME))
    assert sorted(snapshots_by_delta_version(catalog, "rel.p_dv")) == [0]
    # With the folder allowed, the same log is mirrored exactly.
    assert sync_table(spark, root, "rel.p_dv", allowed_roots=[str(elsewhere)]).mirrored_versions == [1]
    assert_mirror_exact(spark, catalog, "rel.p_dv", SMALL)


def test_a_relative_dv_whose_prefix_climbs_out_is_refused(spark, copy_fixture) -> None:
    root = copy_fixture(SMALL)
    # A `u` DV's prefix is the text before the 20-character encoded UUID: "../" leaves the table.
    edit_commit(
        root,
        COMMIT_1,
        '"pathOrInlineDv":"vBn[lx{q8@P<9BNH/isA"',
        '"pathOrInlineDv":"../vBn[lx{q8@P<9BNH/isA"',
    )
    with pytest.raises(MirrorInputError, match="outside the table root"):
        sync_table(spark, root, "rel.u_prefix")


def test_a_dv_that_is_not_a_regular_file_is_refused_without_reading(spark, copy_fixture) -> None:
    root = copy_fixture(SMALL)
    (root / DV_NAME).unlink()
    os.mkfifo(root / DV_NAME)  # opening it for reading would block forever
    with pytest.raises(MirrorInputError, match="not a regular file"):
        sync_table(spark, root, "rel.fifo")


def test_a_file_uri_with_a_query_string_is_refused(spark, copy_fixture) -> None:
    root = copy_fixture(SMALL)
    point_dv_at(root, f"{(root / DV_NAME).as_uri()}?endpoint_override=attacker.example")
    with pytest.raises(MirrorInputError, match="query string"):
        sync_table(spark, root, "rel.query")


# --- crashes at each step, and VACUUM between syncs -------------------------------------------------------


@pytest.mark.parametrize(
    "step", ["first delete file", "second delete file", "before the commit", "after the commit"]
)
def test_a_crash_at_each_step_converges(spark, catalog, copy_fixture, step: str) -> None:
    root = copy_fixture(PARTITIONED)
    name = f"rel.crash_{step.replace(' ', '_')}"
    sync_table(spark, root, name, format_version=2, until_version=5)
    # Format 2 writes one position-delete file per DV: v6 onwards replace several.
    io: FileIO = FailAfterWrites({"first delete file": 0, "second delete file": 1}.get(step, 99))
    iceberg = FailAroundCommit(spark, before=step == "before the commit") if "commit" in step else None
    with pytest.raises(SystemExit, match="injected crash"):
        sync_table(spark, root, name, io=io, iceberg=iceberg)
    mirrored = sorted(snapshots_by_delta_version(catalog, name))
    assert mirrored == list(range(len(mirrored))) and len(mirrored) >= 6
    if step == "before the commit":
        assert mirrored == list(range(6))
    if step == "after the commit":
        assert mirrored == list(range(7))
    sync_table(spark, root, name)
    assert_mirror_exact(spark, catalog, name, PARTITIONED)


@pytest.mark.extended  # about 35 s
def test_vacuum_between_syncs(spark, catalog, tmp_path: Path) -> None:
    root = tmp_path / "vacuumed"
    ref = delta_table_with_dvs(spark, root)
    sync_table(spark, root, "rel.vacuum", format_version=2)
    spark.sql(f"DELETE FROM {ref} WHERE id % 5 = 0")  # DVs replaced: the old ones become garbage
    spark.sql(f"OPTIMIZE {ref}")  # data files carrying DVs removed
    sync_table(spark, root, "rel.vacuum")
    mirrored = sorted(snapshots_by_delta_version(catalog, "rel.vacuum"))
    vacuum_now(spark, ref)  # deletes the files only older versions referenced, VACUUM's usual job
    spark.sql(f"DELETE FROM {ref} WHERE id % 11 = 0")
    result = sync_table(spark, root, "rel.vacuum")
    latest = result.latest_delta_version
    # VACUUM itself commits (VACUUM START / END); each version after the mirrored ones is mirrored.
    assert result.mirrored_versions == list(range(mirrored[-1] + 1, latest + 1))
    assert result.previously_mirrored == mirrored[-1]
    snapshot = snapshots_by_delta_version(catalog, "rel.vacuum")[latest]
    expected = delta_spark_rows(spark, str(root), latest)
    assert iceberg_java_rows(spark, "rel.vacuum", snapshot) == expected
    assert pyiceberg_rows(catalog, "rel.vacuum", snapshot) == expected


@pytest.mark.extended  # about 25 s
def test_vacuum_of_files_the_mirror_still_needs_is_refused(spark, catalog, tmp_path: Path) -> None:
    root = tmp_path / "vacuumed_early"
    ref = delta_table_with_dvs(spark, root)
    sync_table(spark, root, "rel.vacuum_early")
    mirrored = sorted(snapshots_by_delta_version(catalog, "rel.vacuum_early"))
    spark.sql(f"DELETE FROM {ref} WHERE id % 5 = 0")
    spark.sql(f"OPTIMIZE {ref}")
    vacuum_now(spark, ref)  # the DVs of the DELETE are gone before the mirror copied them
    with pytest.raises(MirrorInputError, match="does not exist") as refused:
        sync_table(spark, root, "rel.vacuum_early")
    assert refused.value.version == mirrored[-1] + 1
    assert sorted(snapshots_by_delta_version(catalog, "rel.vacuum_early")) == mirrored


# --- every reader reads every version ---------------------------------------------------------------------


def test_data_files_with_a_change_type_column_read_in_every_reader(spark, catalog, tmp_path: Path) -> None:
    """Databricks writes CDF's `_change_type` into data files of UPDATE/MERGE when change data feed is
    on: a physical column the table schema does not have, which every reader must skip."""
    root = tmp_path / "cdf_in_data_files"
    (root / "_delta_log").mkdir(parents=True)
    data = pa.table(
        {"id": pa.array([1, 2, 3], pa.int64()), "_change_type": ["insert", None, "update_postimage"]}
    )
    pq.write_table(data, root / "part-0.parquet")
    actions = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 4}},
        {
            "metaData": {
                **METADATA,
                "id": "cdf-in-data",
                "configuration": {"delta.enableChangeDataFeed": "true"},
            }
        },
        {
            "add": {
                "path": "part-0.parquet",
                "partitionValues": {},
                "size": (root / "part-0.parquet").stat().st_size,
                "modificationTime": 1,
                "dataChange": True,
                "stats": '{"numRecords":3}',
            }
        },
    ]
    (root / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    result = sync_table(spark, root, "rel.change_type")
    (snapshot,) = [v.snapshot_id for v in result.versions]
    expected = [{"id": 1}, {"id": 2}, {"id": 3}]
    assert iceberg_java_rows(spark, "rel.change_type", snapshot) == expected
    assert pyiceberg_rows(catalog, "rel.change_type", snapshot) == expected


def test_a_huge_dv_against_overstated_stats_is_refused_in_format_2(spark, tmp_path: Path) -> None:
    """Stats claim 2^40 rows, the file has 10, the DV 2^21 positions: expanding it would write millions
    of delete rows for a file of 10 rows; the Parquet footer says the DV cannot be right."""
    root = tmp_path / "overstated"
    (root / "_delta_log").mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array(range(10), pa.int64())}), root / "part-0.parquet")
    size = (root / "part-0.parquet").stat().st_size
    dv_id = uuid.uuid4()
    blob = encode_blob(range(1 << 21))
    (root / f"deletion_vector_{dv_id}.bin").write_bytes(b"\x01" + blob)
    stats = json.dumps({"numRecords": 1 << 40})
    add = {
        "path": "part-0.parquet",
        "partitionValues": {},
        "size": size,
        "modificationTime": 1,
        "dataChange": True,
    }
    dv = {
        "storageType": "u",
        "pathOrInlineDv": z85_encode(dv_id.bytes),
        "offset": 1,
        "sizeInBytes": len(blob) - 8,
        "cardinality": 1 << 21,
    }
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7}
    protocol |= {"readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors"]}
    commits = [
        [
            {"protocol": protocol},
            {"metaData": {**METADATA, "id": "overstated", "configuration": {}}},
            {"add": {**add, "stats": stats}},
        ],
        [
            {"remove": {"path": "part-0.parquet", "dataChange": True}},
            {"add": {**add, "stats": stats, "deletionVector": dv}},
        ],
    ]
    for version, actions in enumerate(commits):
        (root / "_delta_log" / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions))
    with pytest.raises(MirrorInputError, match="the data file has 10 rows but its stats say") as refused:
        sync_table(spark, root, "rel.overstated", format_version=2)
    assert refused.value.version == 1
    mirror = IcebergJava(spark).load("rel.overstated")
    assert mirror is not None and mirror.last_mirrored_version == 0


def test_a_removed_data_file_that_vacuum_deleted_needs_no_row_count(spark, catalog, tmp_path: Path) -> None:
    """A removed file without `numRecords` in its stats whose Parquet file is gone: nothing reads it."""
    root = tmp_path / "no_num_records"
    (root / "_delta_log").mkdir(parents=True)
    for name, ids in (("a.parquet", [1, 2]), ("b.parquet", [3])):
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), root / name)

    def add(name: str) -> dict:
        size = (root / name).stat().st_size
        return {
            "add": {
                "path": name,
                "partitionValues": {},
                "size": size,
                "modificationTime": 1,
                "dataChange": True,
            }
        }

    commits = [
        [
            {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
            {"metaData": {**METADATA, "id": "t", "configuration": {}}},
            add("a.parquet"),  # no stats: the row count comes from the footer while the file is there
        ],
        [{"remove": {"path": "a.parquet", "dataChange": True}}, add("b.parquet")],
    ]
    for version, actions in enumerate(commits):
        (root / "_delta_log" / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions))
    sync_table(spark, root, "rel.no_num_records", until_version=0)
    (root / "a.parquet").unlink()  # VACUUM
    assert sync_table(spark, root, "rel.no_num_records").mirrored_versions == [1]
    snapshot = snapshots_by_delta_version(catalog, "rel.no_num_records")[1]
    assert iceberg_java_rows(spark, "rel.no_num_records", snapshot) == [{"id": 3}]
    assert pyiceberg_rows(catalog, "rel.no_num_records", snapshot) == [{"id": 3}]


def test_every_location_written_to_iceberg_is_a_uri_kept_literally() -> None:
    """`file:/` and the path as on disk (Iceberg Java's own form, read literally by every reader); other
    URIs as they are; one comparison whatever the spelling."""
    assert iceberg_location("/d/p=50%25/a b.parquet") == "file:/d/p=50%25/a b.parquet"
    for spelling in ("file:/d/x", "file:///d/x", "file://localhost/d/x", "/d/x"):
        assert iceberg_location(spelling) == "file:/d/x" and comparable(spelling) == "/d/x"
    assert iceberg_location("s3://b/t/x") == "s3://b/t/x" and comparable("s3a://b/t/x") == "s3://b/t/x"
    with pytest.raises(ValueError):
        iceberg_location("relative/x")
    assert MirrorLayout("/wh/ns/t/").delete_dir == "file:/wh/ns/t/data"


def test_a_file_uri_names_its_file_literally(tmp_path: Path) -> None:
    """The mirror reads and writes its own files by the URI it records: `%25`, `#` and `?` are characters
    of the name (a URL parser would decode the one and cut the path at the others)."""
    folder = tmp_path / "t %25 #1 ?x"
    folder.mkdir()
    location = iceberg_location(str(folder / "dvmirror-a#b.puffin"))
    io = FileIO()
    io.write(location, b"blob")
    assert (folder / "dvmirror-a#b.puffin").read_bytes() == b"blob" and io.read(location) == b"blob"
    assert [info.location for info in io.list_dir(iceberg_location(str(folder)))] == [location]


def test_ownership_is_one_spelling_and_orphans_have_a_minimum_age() -> None:
    for table, deletes in (("file:/wh/ns/t", "/wh/ns/t/data"), ("/wh/ns/t", "file:///wh/ns/t/data")):
        layout = MirrorLayout(table)
        assert layout.is_owned(f"{deletes}/dvmirror-v1.puffin")
        assert not layout.is_owned(f"{deletes}/part-0.parquet")
        assert layout.is_metadata(f"{deletes.removesuffix('/data')}/metadata/snap-1.avro")
    with pytest.raises(ValidationError):
        Retention(orphan_min_age_hours=0)


def test_refusals_through_the_cli_are_one_line_and_exit_2(
    spark, catalog, copy_fixture, tmp_path: Path
) -> None:
    spark.sql(f"CREATE TABLE {ICEBERG_CATALOG_NAME}.rel.cli_foreign (own STRING) USING iceberg")
    lagging = copy_fixture(PARTITIONED)
    sync_table(spark, lagging, "rel.cli_lagging", until_version=9)
    for version in range(10):
        (lagging / "_delta_log" / f"{version:020d}.json").unlink()
    for table, root, reason in (
        ("rel.cli_foreign", copy_fixture(SMALL), "not a dv-mirror mirror"),
        ("rel.cli_lagging", lagging, "no longer holds the commits after it"),
    ):
        done = sync_cli(tmp_path, root, table, catalog=catalog)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("dvmirror: ") and reason in lines[0], done.stderr
    assert sorted(snapshots_by_delta_version(catalog, "rel.cli_lagging")) == list(range(10))


# --- legal logs made by Delta Spark -----------------------------------------------------------------------


def test_an_upgrade_to_column_mapping_keeps_reading_exactly(spark, catalog, tmp_path: Path) -> None:
    root = tmp_path / "upgraded"
    ref = f"delta.`{root}`"
    spark.sql(
        f"CREATE TABLE {ref} (id BIGINT, s STRING) USING delta "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    spark.sql(f"INSERT INTO {ref} SELECT id, CAST(id AS STRING) FROM range(0, 50)")
    spark.sql(f"DELETE FROM {ref} WHERE id % 7 = 0")
    sync_table(spark, root, "rel.upgraded")
    spark.sql(
        f"ALTER TABLE {ref} SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
        "'delta.minReaderVersion' = '3', 'delta.minWriterVersion' = '7')"
    )
    spark.sql(f"INSERT INTO {ref} SELECT id, CAST(id AS STRING) FROM range(50, 80)")  # files with field ids
    spark.sql(f"ALTER TABLE {ref} RENAME COLUMN s TO label")
    spark.sql(f"DELETE FROM {ref} WHERE id % 5 = 0")
    result = sync_table(spark, root, "rel.upgraded")
    snapshots = snapshots_by_delta_version(catalog, "rel.upgraded")
    for version in result.mirrored_versions:
        expected = delta_spark_rows(spark, str(root), version)
        assert iceberg_java_rows(spark, "rel.upgraded", snapshots[version]) == expected, version
    latest = result.latest_delta_version
    assert pyiceberg_rows(catalog, "rel.upgraded", snapshots[latest]) == delta_spark_rows(
        spark, str(root), latest
    )


# --- DV conversion in Spark tasks -------------------------------------------------------------------------


@pytest.mark.parametrize("format_version", [3, 2])
def test_dvs_converted_in_spark_tasks_mirror_exactly(spark, catalog, copy_fixture, format_version) -> None:
    root = copy_fixture(PARTITIONED)
    name = f"rel.executors_v{format_version}"
    result = sync_table(
        spark,
        root,
        name,
        format_version=format_version,
        executors=ExecutorPolicy(min_dvs=1, on_local_master=True),
    )
    converted = {v.dvs_converted_on.split(" ")[0] for v in result.versions if v.dvs_written}
    assert converted == {"spark"}
    # A local master uses the executor path only because the policy forces it, and the results say so.
    placements = [v.dv_placement for v in result.versions if v.dvs_written]
    master = spark.sparkContext.master
    assert master.startswith("local")
    assert all(p.startswith("executors: ") and p.endswith(f" on {master}") for p in placements)
    assert_mirror_exact(spark, catalog, name, PARTITIONED)


def test_a_bad_dv_in_a_spark_task_is_refused_like_on_the_driver(spark, catalog, copy_fixture) -> None:
    root = copy_fixture(SMALL)
    content = bytearray((root / DV_NAME).read_bytes())
    content[44] ^= 0xFF  # the CRC
    (root / DV_NAME).write_bytes(bytes(content))
    with pytest.raises(InvalidDeletionVectorError, match="CRC") as refused:
        sync_table(
            spark, root, "rel.executors_bad", executors=ExecutorPolicy(min_dvs=1, on_local_master=True)
        )
    assert (refused.value.version, refused.value.file) == (1, str(root / DATA_NAME))
    assert sorted(snapshots_by_delta_version(catalog, "rel.executors_bad")) == [0]
    data_dir = Path(IcebergJava(spark).load("rel.executors_bad").location) / "data"
    assert not list(data_dir.glob("dvmirror-*"))
