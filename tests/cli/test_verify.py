"""`dvmirror verify` through the installed console script, on real mirrors: one made by `dvmirror sync`
of a fixture with 16 versions (DVs added, widened and dropped, a checkpoint), checked without a JVM, and
with --full through Spark; one damaged through Iceberg Java (a DV dropped), which every check fails; one in
a catalog pyiceberg cannot read (Hadoop), verified through Spark. The JVM-free DV check reads the manifests
with pyiceberg: the same rows as Spark's `files` table, for every snapshot of a v3 and a v2 mirror."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from dv_assets.mirror.dv_findings import snapshot_files_with_spark
from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.iceberg.mirror_table import DELTA_TABLE_PROPERTY, CommitRequest
from dv_assets.mirror.iceberg.pyiceberg_reader import read_snapshot_files
from dv_assets.mirror.settings import CatalogConfig
from dv_assets.mirror.sync import sync_table
from tests.helpers.paths import DELTA_FIXTURES, expected_rows
from tests.helpers.processes import (
    catalog_args,
    catalog_flags,
    cli_catalog,
    dvmirror_env,
    no_java_env,
    one_error_line,
    run_dvmirror,
    sync_cli,
)
from tests.helpers.readers import snapshots_by_delta_version

TABLE = "dv-partitioned-with-checkpoint"  # 16 versions; v15: 35 rows, 2 DVs
MIRROR = "ops.events"
ALWAYS = ["metadata_row_count_matches", "one_dv_per_data_file"]
# --full: the row-count scan, and every retained snapshot's data files stat'ed
# (tests/mirror/test_vacuum_follow.py).
FULL = [*ALWAYS, "row_count_matches", "retained_snapshots_readable"]


def verify(catalog: CatalogConfig, *args: str, cwd: Path, env: dict[str, str] | None = None):
    where = catalog_args(catalog)
    return run_dvmirror("verify", *args, *where, cwd=cwd, env=env)


def no_java(tmp: Path) -> dict[str, str]:
    """Where no JVM can start, and temporary files go to a folder of the test's own."""
    env = no_java_env()
    assert shutil.which("java", path=env["PATH"]) is None
    return {**env, "TMPDIR": str(tmp)}


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A mirror of every version of the fixture, made by `dvmirror sync`."""
    tmp = tmp_path_factory.mktemp("verify")
    delta = tmp / TABLE
    shutil.copytree(DELTA_FIXTURES / TABLE, delta)
    synced = sync_cli(tmp, delta, MIRROR)
    assert synced.returncode == 0, synced.stderr
    return tmp, delta


@pytest.mark.spark  # the fixture's `dvmirror sync` starts Spark in its process
def test_the_newest_version_passes_without_a_jvm(mirrored, tmp_path: Path) -> None:
    tmp, _ = mirrored
    catalog = cli_catalog(tmp)
    snapshot_id = snapshots_by_delta_version(catalog, MIRROR)[15]

    text = verify(catalog, MIRROR, cwd=tmp, env=no_java(tmp_path))
    assert (text.returncode, text.stderr) == (0, ""), text.stderr
    lines = text.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == [f"PASS {name}" for name in ALWAYS]
    assert lines[0] == (
        "PASS metadata_row_count_matches: Delta v15: 35 rows from the log (37 numRecords - 2 deleted by "
        f"DVs); Iceberg snapshot {snapshot_id}: 35 from its summary (37 total-records - 2 "
        "total-position-deletes)"
    )

    as_json = verify(catalog, MIRROR, "--json", cwd=tmp, env=no_java(tmp_path))
    assert (as_json.returncode, as_json.stderr) == (0, ""), as_json.stderr
    report = json.loads(as_json.stdout)
    assert {k: report[k] for k in ("ok", "table", "delta_version", "snapshot_id")} == {
        "ok": True,
        "table": MIRROR,
        "delta_version": 15,
        "snapshot_id": snapshot_id,
    }
    checks = {c["name"]: c for c in report["checks"]}
    assert list(checks) == ALWAYS and all(c["passed"] for c in checks.values())
    rows = checks["metadata_row_count_matches"]["details"]
    assert rows["delta_rows_from_log"] == rows["iceberg_rows_from_summary"] == len(expected_rows(TABLE, 15))
    dvs = checks["one_dv_per_data_file"]["details"]
    assert (dvs["delta_dvs"], dvs["iceberg_delete_files"], dvs["problems"]) == (2, 2, {})
    assert dvs["snapshot_id"] == snapshot_id
    assert list(tmp_path.iterdir()) == []  # no Spark log: no Spark


@pytest.mark.spark
def test_every_older_version_passes(mirrored, tmp_path: Path) -> None:
    tmp, _ = mirrored
    catalog = cli_catalog(tmp)
    snapshots = snapshots_by_delta_version(catalog, MIRROR)
    for version in (0, 8, 9, 12):  # the first, a DV widened, the checkpoint's neighbour, a file removed
        done = verify(catalog, MIRROR, "--version", str(version), "--json", cwd=tmp, env=no_java(tmp_path))
        assert done.returncode == 0, done.stdout + done.stderr
        report = json.loads(done.stdout)
        assert (report["delta_version"], report["snapshot_id"]) == (version, snapshots[version])
        rows = report["checks"][0]["details"]
        assert rows["iceberg_rows_from_summary"] == len(expected_rows(TABLE, version)), version


@pytest.mark.spark
def test_full_scans_the_rows_through_spark_and_removes_its_log(mirrored, tmp_path: Path) -> None:
    tmp, _ = mirrored
    catalog = cli_catalog(tmp)
    done = verify(
        catalog, MIRROR, "--version", "9", "--full", cwd=tmp, env=dvmirror_env(TMPDIR=str(tmp_path))
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == [f"PASS {name}" for name in FULL]
    rows = len(expected_rows(TABLE, 9))
    snapshot_id = snapshots_by_delta_version(catalog, MIRROR)[9]
    assert lines[2] == (
        f"PASS row_count_matches: Delta v9: {rows} rows (log), {rows} (Delta read); Iceberg snapshot "
        f"{snapshot_id}: {rows}"
    )
    assert not list(tmp_path.glob("dvmirror-spark-*.log"))  # removed after a run that verified


@pytest.mark.spark
def test_bad_input_is_exit_2_with_one_line(mirrored, tmp_path: Path) -> None:
    tmp, delta = mirrored
    catalog = cli_catalog(tmp)
    env = no_java(tmp_path)
    never = verify(catalog, MIRROR, "--version", "16", cwd=tmp, env=env)
    assert never.returncode == 2 and never.stdout == ""
    assert one_error_line(never) == (
        f"dvmirror: Iceberg table {MIRROR} has no snapshot for Delta version 16: never mirrored, or expired "
        "(its snapshots hold Delta versions 0..15)"
    )
    as_json = verify(catalog, MIRROR, "--version", "16", "--json", cwd=tmp, env=env)
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout) == {
        "ok": False,
        "exit_code": 2,
        "error": one_error_line(never).removeprefix("dvmirror: "),
        "spark_log": None,
    }
    other = verify(catalog, MIRROR, "--delta", str(tmp_path), cwd=tmp, env=env)
    assert other.returncode == 2
    assert one_error_line(other) == (
        f"dvmirror: table {tmp_path}: Iceberg table {MIRROR} mirrors {delta}, not this table"
    )


def test_an_internal_error_is_exit_3_with_one_line(mirrored, tmp_path: Path) -> None:
    """A metadata file that is no longer JSON (storage gone bad under the catalog): not the user's input,
    so exit 3 and one line, not a traceback (a TypeError in the report once hid this path)."""
    tmp, _ = mirrored
    catalog = cli_catalog(tmp)
    newest = max((tmp / "cli").rglob("*.metadata.json"), key=lambda p: p.stat().st_mtime_ns)
    saved = newest.read_bytes()
    try:
        newest.write_bytes(saved[: len(saved) // 2])
        broken = verify(catalog, MIRROR, "--json", cwd=tmp, env=no_java(tmp_path))
    finally:
        newest.write_bytes(saved)
    assert broken.returncode == 3, broken.stderr
    line = one_error_line(broken)
    assert line.startswith("dvmirror: internal error: "), line
    assert json.loads(broken.stdout) == {
        "ok": False,
        "exit_code": 3,
        "error": line.removeprefix("dvmirror: "),
        "spark_log": None,
    }
    assert verify(catalog, MIRROR, cwd=tmp, env=no_java(tmp_path)).returncode == 0


def test_an_unknown_table_and_a_table_that_is_not_a_mirror_are_bad_input(tmp_path: Path) -> None:
    catalog = cli_catalog(tmp_path)
    unknown = verify(catalog, "ops.nope", cwd=tmp_path, env=no_java(tmp_path))
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert one_error_line(unknown) == "dvmirror: the catalog has no Iceberg table ops.nope"

    iceberg = catalog.pyiceberg_catalog()
    iceberg.create_namespace("ops")
    iceberg.create_table("ops.plain", Schema(NestedField(1, "id", LongType(), required=False)))
    plain = verify(catalog, "ops.plain", "--json", cwd=tmp_path, env=no_java(tmp_path))
    assert plain.returncode == 2
    assert json.loads(plain.stdout)["error"] == (
        "Iceberg table ops.plain is not a dv-mirror mirror (no dvmirror.delta-table property)"
    )
    # Created by a first sync that committed nothing: it names its Delta table, holds no version yet.
    properties = {DELTA_TABLE_PROPERTY: str(DELTA_FIXTURES / TABLE)}
    iceberg.create_table(
        "ops.empty", Schema(NestedField(1, "id", LongType(), required=False)), properties=properties
    )
    empty = verify(catalog, "ops.empty", cwd=tmp_path, env=no_java(tmp_path))
    assert empty.returncode == 2
    assert one_error_line(empty) == "dvmirror: Iceberg table ops.empty holds no mirrored Delta version yet"
    unnamed = verify(catalog, "nonamespace", cwd=tmp_path, env=no_java(tmp_path))
    assert unnamed.returncode == 2
    assert one_error_line(unnamed) == "dvmirror: an Iceberg table is NAMESPACE.NAME, got 'nonamespace'"


@pytest.mark.spark
def test_a_mirror_that_lost_a_dv_fails_every_check(spark, catalog, copy_fixture, tmp_path: Path) -> None:
    delta = copy_fixture("table-with-dv-small")  # v0: 10 rows; v1: a DELETE as one DV (8 rows)
    sync_table(spark, str(delta), "verify.damaged")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    healthy = verify(catalog, "verify.damaged", cwd=cwd)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr

    # Damage, as a foreign Iceberg Java commit would: Delta version 1's snapshot again, without its DV.
    iceberg = IcebergJava(spark)
    (dv,) = iceberg.delete_files_by_data_file("verify.damaged").values()
    current = iceberg.load("verify.damaged").current_snapshot_id
    iceberg.commit("verify.damaged", CommitRequest(1, {}, current, remove_delete_files=(dv,)))

    text = verify(catalog, "verify.damaged", cwd=cwd, env=no_java(tmp_path))
    assert text.returncode == 1 and text.stderr == "", text.stderr
    assert [line.split(":")[0] for line in text.stdout.splitlines()] == [f"FAIL {name}" for name in ALWAYS]
    assert "Delta DVs missing in Iceberg: 1" in text.stdout

    full = verify(catalog, "verify.damaged", "--full", "--json", cwd=cwd)
    assert full.returncode == 1, full.stdout + full.stderr
    report = json.loads(full.stdout)
    assert report["ok"] is False and report["delta_version"] == 1
    checks = {c["name"]: c for c in report["checks"]}
    assert list(checks) == FULL
    # Its data files are all there: only the exactness checks fail.
    assert [name for name, c in checks.items() if c["passed"]] == ["retained_snapshots_readable"]
    metadata = checks["metadata_row_count_matches"]["details"]
    assert (metadata["delta_rows_from_log"], metadata["iceberg_rows_from_summary"]) == (8, 10)
    problems = checks["one_dv_per_data_file"]["details"]["problems"]
    (missing,) = problems["Delta DVs missing in Iceberg"]
    assert Path(missing).name == Path(dv.referenced_data_file.removeprefix("file:")).name
    scan = checks["row_count_matches"]["details"]
    assert (scan["delta_rows_from_log"], scan["delta_rows_read"], scan["iceberg_rows_read"]) == (8, 8, 10)


@pytest.mark.spark
@pytest.mark.parametrize("format_version", [3, 2])
def test_pyiceberg_reads_the_content_files_spark_does(spark, catalog, copy_fixture, format_version) -> None:
    """The JVM-free DV check is as strict as the Dagster one: for every snapshot, the same data files and
    the same delete files (path, referenced data file, record count) from the manifests."""
    name = f"verify.files_v{format_version}"
    sync_table(spark, str(copy_fixture(TABLE)), name, format_version=format_version)
    snapshots = snapshots_by_delta_version(catalog, name)
    assert len(snapshots) == 16
    for version, snapshot_id in snapshots.items():
        from_spark = snapshot_files_with_spark(spark, name, snapshot_id)
        from_manifests = read_snapshot_files(catalog, name, snapshot_id)
        assert from_manifests.data_files == from_spark.data_files, version
        assert sorted(from_manifests.deletes, key=repr) == sorted(from_spark.deletes, key=repr), version
        assert all(row.referenced_data_file for row in from_spark.deletes)  # what the check compares


def test_help_names_the_checks_and_the_exit_codes(tmp_path: Path) -> None:
    done = run_dvmirror("verify", "--help", cwd=tmp_path, env=no_java(tmp_path))
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "Exit codes: 0 every check passed, 1 a check failed, 2 bad input" in text
    assert all(name in text for name in FULL)


@pytest.mark.spark
def test_a_catalog_only_iceberg_java_reads_is_verified_through_spark(tmp_path: Path) -> None:
    """pyiceberg has no Hadoop catalog: the mirror and its content files are read through Spark."""
    delta = tmp_path / "delta"
    shutil.copytree(DELTA_FIXTURES / "table-with-dv-small", delta)
    hadoop = catalog_flags({"type": "hadoop", "warehouse": str(tmp_path / "warehouse")})
    synced = run_dvmirror("sync", str(delta), "--table", "h.t", *hadoop, cwd=tmp_path)
    assert synced.returncode == 0, synced.stderr
    logs = tmp_path / "tmp"
    logs.mkdir()
    env = dvmirror_env(TMPDIR=str(logs))
    done = run_dvmirror("verify", "h.t", *hadoop, "--json", cwd=tmp_path, env=env)
    assert (done.returncode, done.stderr) == (0, ""), done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and report["delta_version"] == 1
    assert [c["name"] for c in report["checks"] if c["passed"]] == ALWAYS
    dvs = report["checks"][1]["details"]
    assert (dvs["delta_dvs"], dvs["iceberg_delete_files"], dvs["iceberg_data_files"]) == (1, 1, 1)
    unknown = run_dvmirror("verify", "h.nope", *hadoop, cwd=tmp_path, env=env)
    assert unknown.returncode == 2
    assert one_error_line(unknown) == "dvmirror: the catalog has no Iceberg table h.nope"
    assert list(logs.iterdir()) == []  # Spark's log removed: nothing failed inside
