"""`dvmirror status` and `dvmirror --version` through the installed console script: a real mirror made by
`dvmirror sync` (Spark), then read with no JVM able to start (no java on PATH, no JAVA_HOME)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from importlib.metadata import version
from pathlib import Path

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from dv_assets.mirror.settings import CatalogConfig
from tests.helpers.paths import DELTA_FIXTURES
from tests.helpers.processes import (
    catalog_args,
    cli_catalog,
    no_java_env,
    one_error_line,
    run_dvmirror,
    sync_cli,
)
from tests.helpers.readers import snapshots_by_delta_version

TABLE = "table-with-dv-small"  # version 0: 10 rows in one file; version 1: a DELETE as one DV (8 rows)


def status(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    """`dvmirror status ARGS` on `cli_catalog(tmp)`, where no JVM can start."""
    catalog = cli_catalog(tmp)
    where = catalog_args(catalog)
    env = no_java_env()
    assert shutil.which("java", path=env["PATH"]) is None
    return run_dvmirror("status", *args, *where, cwd=tmp, env=env)


@pytest.fixture(scope="module")
def behind(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    """A mirror of the fixture at version 0 while the Delta table is at 1; its `status --json` report."""
    tmp = tmp_path_factory.mktemp("status")
    delta = tmp / TABLE
    shutil.copytree(DELTA_FIXTURES / TABLE, delta)
    synced = sync_cli(tmp, delta, "st.t", "--until-version", "0")
    assert synced.returncode == 0, synced.stderr
    began = time.monotonic()
    done = status(tmp, "st.t", "--json")
    print(f"dvmirror status --json: {time.monotonic() - began:.2f} s")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return tmp, delta, json.loads(done.stdout)


@pytest.mark.spark  # the fixture's `dvmirror sync` starts Spark in its process
def test_status_json_of_a_mirror_behind_its_delta_table(behind) -> None:
    tmp, delta, report = behind
    catalog = cli_catalog(tmp)
    table = catalog.pyiceberg_catalog().load_table("st.t")
    (one,) = report["tables"]
    assert report["ok"] is True
    assert one["iceberg_table"] == "st.t" and one["delta_path"] == str(delta)
    assert (one["mirrored_version"], one["delta_latest_version"], one["lag_versions"]) == (0, 1, 1)
    assert one["up_to_date"] is False
    assert one["lag_seconds"] > 0  # the fixture's version 1 was committed long ago
    assert one["snapshot_id"] == snapshots_by_delta_version(catalog, "st.t")[0]
    assert one["metadata_location"] == table.metadata_location
    assert one["format_version"] == 3
    assert one["readable_versions"] == [0]  # time travel: the versions whose snapshots are retained
    assert (one["live_rows"], one["live_data_files"], one["live_delete_files"]) == (10, 1, 0)


@pytest.mark.spark
def test_status_text_once_up_to_date(behind) -> None:
    tmp, delta, _ = behind
    synced = sync_cli(tmp, delta, "st.t")
    assert synced.returncode == 0, synced.stderr
    done = status(tmp, "st.t")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    snapshot_id = snapshots_by_delta_version(cli_catalog(tmp), "st.t")[1]
    metadata = cli_catalog(tmp).pyiceberg_catalog().load_table("st.t").metadata_location
    lines = done.stdout.splitlines()
    assert lines[0] == "st.t"
    fields = dict(line.strip().split(": ", 1) for line in lines[1:])
    assert {k: v.strip() for k, v in fields.items()} == {
        "Delta table": str(delta),
        "mirrored version": "1",
        "Delta latest version": "1",
        "lag": "0 versions, 0.0 s (up to date)",
        "readable versions": "0..1",
        "snapshot id": str(snapshot_id),
        "metadata file": metadata,
        "format version": "3",
        "live rows": "8",
        "live data files": "1",
        "live DVs": "1",
    }


@pytest.mark.spark  # the fixture's (and this test's first) `dvmirror sync` starts Spark in its process
def test_a_no_op_sync_answers_without_a_jvm(behind, tmp_path: Path) -> None:
    """Up to date: `dvmirror sync` says so where no JVM can start, and refuses as the sync itself would."""
    tmp, delta, _ = behind
    assert sync_cli(tmp, delta, "st.t").returncode == 0
    catalog = cli_catalog(tmp)
    where = catalog_args(catalog)

    def sync_without_java(source: Path, *extra: str) -> subprocess.CompletedProcess:
        args = ("sync", str(source), "--table", "st.t", *where, *extra)
        return run_dvmirror(*args, cwd=tmp, env=no_java_env())

    began = time.monotonic()
    text = sync_without_java(delta)
    print(f"no-op dvmirror sync: {time.monotonic() - began:.2f} s")
    assert text.returncode == 0 and text.stderr == "", text.stderr
    assert text.stdout.strip() == f"st.t is up to date with {delta} at version 1"
    report = json.loads(sync_without_java(delta, "--json").stdout)
    assert report["ok"] is True and report["mirrored_versions"] == []
    assert (report["previously_mirrored"], report["latest_delta_version"]) == (1, 1)
    assert "spark_log" not in report
    at_zero = sync_without_java(delta, "--until-version", "0")  # behind the mirror: nothing to do either
    assert at_zero.returncode == 0, at_zero.stderr
    wrong_format = sync_without_java(delta, "--format-version", "2")
    assert wrong_format.returncode == 2
    assert one_error_line(wrong_format) == (
        f"dvmirror: table {delta}: the Iceberg table is format version 3, not 2"
    )
    # Another Delta table at a path the mirror does not record: refused, no JVM either.
    other = tmp_path / "other"
    shutil.copytree(delta, other)
    refused = sync_without_java(other)
    assert refused.returncode == 2
    mirrors_another = f"table {other}: Iceberg table st.t mirrors {delta}, not this table"
    assert one_error_line(refused) == f"dvmirror: {mirrors_another}"


@pytest.mark.spark
def test_status_with_delta_holds_the_mirror_to_it(behind, tmp_path: Path) -> None:
    tmp, delta, _ = behind
    same = status(tmp, "st.t", "--delta", str(delta), "--json")
    assert same.returncode == 0, same.stderr
    assert json.loads(same.stdout)["tables"][0]["delta_path"] == str(delta)
    other = status(tmp, "st.t", "--delta", str(tmp_path))
    assert other.returncode == 2 and other.stdout == ""
    mismatch = f"table {tmp_path}: Iceberg table st.t mirrors {delta}, not this table"
    assert one_error_line(other) == f"dvmirror: {mismatch}"


def test_unknown_table_is_bad_input(tmp_path: Path) -> None:
    text = status(tmp_path, "st.nope")
    assert text.returncode == 2 and text.stdout == ""
    assert one_error_line(text).startswith("dvmirror: the catalog has no Iceberg table st.nope")
    as_json = status(tmp_path, "st.nope", "--json")
    assert as_json.returncode == 2
    report = json.loads(as_json.stdout)
    assert report["ok"] is False and report["exit_code"] == 2
    assert report["error"].startswith("the catalog has no Iceberg table st.nope")


@pytest.mark.spark
def test_status_of_several_tables_reports_each(behind) -> None:
    """An unknown table is its own line, naming the catalog asked; the mirror beside it is reported;
    the exit code sums them up (issue 36: `status demo.events nope.t` printed nothing and exited 2)."""
    tmp, delta, _ = behind
    catalog = cli_catalog(tmp)
    text = status(tmp, "st.t", "st.nope")
    assert text.returncode == 2
    assert text.stdout.startswith("st.t\n") and "Delta table:" in text.stdout and str(delta) in text.stdout
    line = one_error_line(text)
    assert line.startswith("dvmirror: the catalog has no Iceberg table st.nope: asked the jdbc catalog (")
    assert f"uri=jdbc:sqlite:{catalog.sqlite_path}" in line and f"warehouse={catalog.warehouse}" in line
    as_json = status(tmp, "st.nope", "st.t", "--json")
    assert as_json.returncode == 2
    report = json.loads(as_json.stdout)
    assert (report["ok"], report["exit_code"]) == (False, 2)
    assert [t["iceberg_table"] for t in report["tables"]] == ["st.t"]
    assert [(f["iceberg_table"], f["exit_code"]) for f in report["failed"]] == [("st.nope", 2)]
    assert report["error"] == report["failed"][0]["error"]
    both = status(tmp, "st.t", "st.t", "--json")
    assert both.returncode == 0 and json.loads(both.stdout)["ok"] is True


def test_several_unknown_tables_are_a_line_each(tmp_path: Path) -> None:
    done = status(tmp_path, "st.nope", "st.gone")
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert [line.split(":")[1].strip() for line in lines] == [
        "the catalog has no Iceberg table st.nope",
        "the catalog has no Iceberg table st.gone",
    ]
    assert "Traceback" not in done.stderr


def test_a_first_sync_to_come_with_delta(tmp_path: Path) -> None:
    """No Iceberg table yet, the Delta table named: every version is still to mirror."""
    delta = DELTA_FIXTURES / TABLE
    done = status(tmp_path, "st.new", "--delta", str(delta), "--json")
    assert done.returncode == 0, done.stderr
    (one,) = json.loads(done.stdout)["tables"]
    assert (one["mirrored_version"], one["delta_latest_version"], one["lag_versions"]) == (None, 1, 2)
    assert one["snapshot_id"] is None and one["metadata_location"] is None


def test_a_table_that_is_not_a_mirror_is_bad_input(tmp_path: Path) -> None:
    catalog: CatalogConfig = cli_catalog(tmp_path)
    iceberg = catalog.pyiceberg_catalog()
    iceberg.create_namespace("st")
    iceberg.create_table("st.plain", Schema(NestedField(1, "id", LongType(), required=False)))
    done = status(tmp_path, "st.plain")
    assert done.returncode == 2
    assert one_error_line(done) == (
        "dvmirror: Iceberg table st.plain is not a dv-mirror mirror (no dvmirror.delta-table property)"
    )


def test_version(tmp_path: Path) -> None:
    done = run_dvmirror("--version", cwd=tmp_path, env=no_java_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"dvmirror {version('dv-mirror')}"


def test_flags_win_over_the_configuration_file_which_reads_the_environment(tmp_path: Path) -> None:
    """flags > file > environment > defaults, through the console script: the unknown table's line names
    the catalog asked, the flag's `uri` over the file's, the file's `${VAR}` and YAML boolean read."""
    config = tmp_path / "dvmirror.yaml"
    config.write_text(
        "catalog:\n  type: jdbc\n  uri: jdbc:sqlite:${CATALOG_DIR}/file.db\n  warehouse: ${CATALOG_DIR}/wh\n"
        "  s3.path-style-access: true\n"
    )
    env = {**no_java_env(), "CATALOG_DIR": str(tmp_path)}
    flag = f"uri=jdbc:sqlite:{tmp_path}/flag.db"
    done = run_dvmirror(
        "status", "st.nope", "--config", str(config), "--catalog-property", flag, cwd=tmp_path, env=env
    )
    assert done.returncode == 2
    line = one_error_line(done)
    assert f"uri=jdbc:sqlite:{tmp_path}/flag.db" in line and "file.db" not in line, line
    assert f"warehouse={tmp_path}/wh" in line and "s3.path-style-access=true" in line, line
    bad = tmp_path / "bad.yaml"
    bad.write_text("catalog:\n  type: jdbc\n  uri: x\ncatalgo:\n  type: rest\n")
    refused = run_dvmirror("status", "st.nope", "--config", str(bad), cwd=tmp_path, env=env)
    assert refused.returncode == 2
    assert one_error_line(refused) == (
        f"dvmirror: configuration file {bad}, line 4, key catalgo: unknown key (known: catalog)"
    )
