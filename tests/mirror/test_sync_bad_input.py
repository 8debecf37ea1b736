"""Bad input is refused, precisely, and leaves the mirror exactly where it was.

Corrupted copies of `table-with-dv-small` (v1 adds a file-based DV to the only data file): a flipped
CRC byte, a wrong magic, a truncated DV file, a descriptor whose sizeInBytes is wrong, a missing DV
file. Each is refused at version 1 naming the table, the version, the file and the reason; the Iceberg
table keeps its current snapshot (v0) and no file is left behind; once the DV file (or the commit) is
repaired, the same sync completes. Both format versions.

Most cases call `sync_table` in-process (the shared Spark session); the CLI contract (exit code 2, one
stderr line, no traceback) and a crash injected through the Iceberg seam are checked with a few
subprocesses, each with its own catalog and warehouse.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dv_assets.mirror.errors import EXIT_STORAGE, InvalidDeletionVectorError, MirrorInputError
from dv_assets.mirror.locations import iceberg_location
from dv_assets.mirror.sync import sync_table
from tests.helpers.faults import (
    COMMIT_1,
    DATA_NAME,
    SMALL,
    flip_dv_byte,
    misstate_dv_size,
    remove_dv,
    repair_small,
    run_crash_before_commit,
    truncate_dv,
)
from tests.helpers.paths import DELTA_FIXTURES
from tests.helpers.processes import (
    catalog_flags,
    cli_catalog,
    free_port,
    no_java_env,
    one_error_line,
    run_dvmirror,
    sync_cli,
)
from tests.helpers.readers import first_column_values, pyiceberg_state, warehouse_data_files

pytestmark = pytest.mark.spark


# The DV file: version byte, BE32 size (36) at 1..4, the bitmap (magic first) at 5..40, BE32 CRC at 41..44.
CORRUPTIONS: dict[str, tuple[Callable[[Path], None], str]] = {
    "crc": (flip_dv_byte(44), "crc"),
    "magic": (flip_dv_byte(5), "magic"),
    "truncated": (truncate_dv, "truncated"),
    "size": (misstate_dv_size, "size"),
    "missing": (remove_dv, "cannot be opened"),
}


@pytest.mark.parametrize("fmt", [3, 2])
def test_corrupted_dv_refused_then_repaired(spark, catalog, copy_fixture, fmt: int) -> None:
    for case, (corrupt, reason_word) in CORRUPTIONS.items():
        root = copy_fixture(SMALL)
        (root.parent / f"{SMALL}-{case}").mkdir()
        root = root.rename(root.parent / f"{SMALL}-{case}" / SMALL)
        table_name = f"bad.{case}_v{fmt}"
        first = sync_table(spark, root, table_name, format_version=fmt, until_version=0)
        assert first.mirrored_versions == [0]
        before = pyiceberg_state(catalog, table_name)
        files_before = warehouse_data_files(catalog, table_name)
        corrupt(root)

        with pytest.raises(MirrorInputError) as raised:
            sync_table(spark, root, table_name, format_version=fmt)
        err = raised.value
        assert (err.table, err.version) == (str(root), 1), (case, err.one_line())
        assert err.file is not None and err.file.endswith(DATA_NAME), (case, err.one_line())
        assert reason_word in err.reason.lower(), (case, err.one_line())
        line = err.one_line()
        assert "\n" not in line and str(root) in line and "version 1" in line and DATA_NAME in line

        assert pyiceberg_state(catalog, table_name) == before, case
        assert warehouse_data_files(catalog, table_name) == files_before, case

        repair_small(root)
        done = sync_table(spark, root, table_name, format_version=fmt)
        assert done.mirrored_versions == [1], case
        assert first_column_values(spark, table_name) == list(range(1, 9)), case
        assert pyiceberg_state(catalog, table_name)[1:] == ("1", 2), case


def test_file_dv_without_offset_refused_at_its_version(spark, catalog, copy_fixture) -> None:
    """Without `offset`, Delta Spark reads the DV from byte 0 (and fails), delta-kernel-rs from byte 1:
    the mirror must not pick one."""
    root = copy_fixture(SMALL)
    text = (root / COMMIT_1).read_text()
    assert text.count('"offset":1,') == 1
    (root / COMMIT_1).write_text(text.replace('"offset":1,', ""))
    table_name = "bad.dv_without_offset"
    with pytest.raises(InvalidDeletionVectorError, match="has no offset") as refused:
        sync_table(spark, root, table_name)
    err = refused.value
    assert (err.table, err.version, err.file) == (str(root), 1, str(root / DATA_NAME)), err.one_line()
    assert pyiceberg_state(catalog, table_name)[1:] == ("0", 1)
    assert first_column_values(spark, table_name) == list(range(10))


def test_cli_refuses_corrupted_dv_format_2(copy_fixture, tmp_path: Path) -> None:
    root = copy_fixture(SMALL)
    flip_dv_byte(44)(root)
    proc = sync_cli(tmp_path, root, "bad.cli_crc", "--format-version", "2")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = one_error_line(proc)
    assert f"table {root}" in line and "version 1" in line and DATA_NAME in line and "CRC" in line.upper()
    catalog = cli_catalog(tmp_path)
    assert pyiceberg_state(catalog, "bad.cli_crc")[1:] == ("0", 1)
    table = catalog.pyiceberg_catalog().load_table("bad.cli_crc")
    assert table.format_version == 2
    assert warehouse_data_files(catalog, "bad.cli_crc") == set()


def test_cli_refuses_malformed_inline_dv(copy_fixture, tmp_path: Path) -> None:
    """cdf-table-with-dv v5: the inline DV's last Z85 group overflows; versions 0-4 are mirrored."""
    root = copy_fixture("cdf-table-with-dv")
    proc = sync_cli(tmp_path, root, "bad.cdf")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = one_error_line(proc)
    assert f"table {root}" in line and "version 5" in line and DATA_NAME in line, line
    assert [f"Delta version {v} " in proc.stdout for v in range(6)] == [True] * 5 + [False], proc.stdout
    assert pyiceberg_state(cli_catalog(tmp_path), "bad.cdf")[1:] == ("4", 5)


def test_cli_json_reports_a_refusal_with_the_versions_mirrored_before_it(
    copy_fixture, tmp_path: Path
) -> None:
    root = copy_fixture("cdf-table-with-dv")
    proc = sync_cli(tmp_path, root, "bad.cdf_json", "--json")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = one_error_line(proc)
    report = json.loads(proc.stdout)
    assert report["ok"] is False and report["exit_code"] == 2
    assert f"dvmirror: {report['error']}" == line and "version 5" in report["error"]
    assert report["mirrored_versions"] == [0, 1, 2, 3, 4]
    assert Path(report["spark_log"]).is_file()
    missing = sync_cli(tmp_path, tmp_path / "no-such-table", "bad.none", "--json")
    assert missing.returncode == 2 and json.loads(missing.stdout)["mirrored_versions"] == []


def test_crash_before_commit_then_rerun_converges(copy_fixture, tmp_path: Path) -> None:
    root = copy_fixture(SMALL)
    crashed = run_crash_before_commit(tmp_path, root, "crash.small", 1)
    assert crashed.returncode == 99, crashed.stdout + crashed.stderr
    catalog = cli_catalog(tmp_path)
    assert pyiceberg_state(catalog, "crash.small")[1:] == ("0", 1)

    rerun = sync_cli(tmp_path, root, "crash.small", "--json")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    table = catalog.pyiceberg_catalog().load_table("crash.small")
    versions = [s.summary.additional_properties["dvmirror.delta-version"] for s in table.snapshots()]
    assert versions == ["0", "1"]
    rows = sorted(table.scan().to_arrow().column("value").to_pylist())
    assert rows == list(range(1, 9))
    # One data file with exactly one DV (the rerun's; the crashed run's Puffin file is not referenced).
    tasks = list(table.scan().plan_files())
    data_file = iceberg_location(str(root / DATA_NAME))  # named by URI (`file:/…`)
    assert [(t.file.file_path, len(t.delete_files)) for t in tasks] == [(data_file, 1)]


@pytest.mark.parametrize("damage", ["missing", "wrong size"])
def test_missing_data_file_refused_before_the_table_exists(spark, catalog, copy_fixture, damage: str) -> None:
    """A data file the log adds must exist with the logged size; refused means no table at all. A first
    sync starts at the first version Delta can read: with the file missing at every version, none is, and
    the refusal names the newest (1); a file of the wrong size is refused at the version that adds it."""
    root = copy_fixture(SMALL)
    table_name = f"bad_input.data_file_{damage.replace(' ', '_')}"
    if damage == "missing":
        (root / DATA_NAME).unlink()
    else:
        (root / DATA_NAME).write_bytes((root / DATA_NAME).read_bytes() + b"\0")
    with pytest.raises(MirrorInputError) as refused:
        sync_table(spark, root, table_name)
    expected_version = 1 if damage == "missing" else 0
    assert (refused.value.version, refused.value.file) == (expected_version, str(root / DATA_NAME))
    assert refused.value.table == str(root)
    assert not catalog.pyiceberg_catalog().table_exists(table_name)
    assert warehouse_data_files(catalog, table_name) == set()

    shutil.copy2(DELTA_FIXTURES / SMALL / DATA_NAME, root / DATA_NAME)
    assert sync_table(spark, root, table_name).mirrored_versions == [0, 1]
    assert first_column_values(spark, table_name) == [1, 2, 3, 4, 5, 6, 7, 8]


def test_cli_tells_a_missing_path_from_a_folder_that_is_not_delta_and_a_version_past_the_latest(
    copy_fixture, tmp_path: Path
) -> None:
    """Refused before a JVM starts (exit 2, one line): each with its own reason."""
    missing = sync_cli(tmp_path, tmp_path / "no-such-table", "bad.missing")
    assert missing.returncode == 2 and one_error_line(missing).endswith(": no such path"), missing.stderr
    plain = tmp_path / "plain-folder"
    plain.mkdir()
    not_delta = sync_cli(tmp_path, plain, "bad.plain")
    assert not_delta.returncode == 2, not_delta.stderr
    assert one_error_line(not_delta).endswith("no _delta_log folder: not a Delta table")
    root = copy_fixture(SMALL)  # versions 0 and 1
    past = sync_cli(tmp_path, root, "bad.past", "--until-version", "99")
    assert past.returncode == 2, past.stdout + past.stderr
    assert one_error_line(past) == (
        f"dvmirror: table {root}: --until-version 99 is past the latest Delta version 1"
    )
    assert not cli_catalog(tmp_path).pyiceberg_catalog().table_exists("bad.past")


def test_cli_a_storage_error_is_retried_then_exit_5_not_a_refusal(copy_fixture, tmp_path: Path) -> None:
    """A real read error, not an injected one: version 1's commit file is a symlink to /proc/self/mem,
    whose reads the kernel answers with EIO (as a failing disk would). Not bad input: retried twice
    with a backoff (a line on stderr each), then exit 5 (a storage error) naming the file; version 0 is
    mirrored, nothing of version 1 committed."""
    root = copy_fixture(SMALL)
    commit = root / COMMIT_1
    commit.unlink()
    commit.symlink_to("/proc/self/mem")
    began = time.monotonic()
    proc = sync_cli(tmp_path, root, "storage.eio", "--json")
    assert proc.returncode == EXIT_STORAGE, proc.stdout + proc.stderr
    assert time.monotonic() - began > 3  # the backoff: 1 s, then 2 s
    report = json.loads(proc.stdout)
    assert report["ok"] is False and report["exit_code"] == EXIT_STORAGE
    assert report["mirrored_versions"] == [0]
    assert f"storage unavailable: {commit}: cannot read log file" in report["error"], report
    assert "Input/output error" in report["error"] and "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert [line.split(" after: ")[0] for line in lines[:-1]] == [
        "dvmirror: retrying in 1 s",
        "dvmirror: retrying in 2 s",
    ], proc.stderr
    assert lines[-1] == f"dvmirror: {report['error']}"
    assert pyiceberg_state(cli_catalog(tmp_path), "storage.eio")[1:] == ("0", 1)


def test_cli_removes_sparks_log_after_a_successful_run(copy_fixture, tmp_path: Path) -> None:
    logs_before = set(Path(tempfile.gettempdir()).glob("dvmirror-spark-*.log"))
    done = sync_cli(tmp_path, copy_fixture(SMALL), "ok.logs", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "spark_log" not in json.loads(done.stdout)
    assert set(Path(tempfile.gettempdir()).glob("dvmirror-spark-*.log")) <= logs_before


@pytest.mark.parametrize("command", ["sync", "status", "expire", "verify"])
def test_cli_an_unknown_or_unreachable_catalog_is_bad_input(
    command: str, copy_fixture, tmp_path: Path
) -> None:
    """Answered before a JVM starts, in seconds: one line naming the catalog property."""
    args = {
        "sync": ["sync", str(copy_fixture(SMALL)), "--table", "bad.catalog"],
        "status": ["status", "bad.catalog"],
        "expire": ["expire", "bad.catalog", "--retain-last", "1"],
        "verify": ["verify", "bad.catalog"],
    }[command]
    unknown = run_dvmirror(*args, "--catalog-property", "type=nosuch", cwd=tmp_path, env=no_java_env())
    assert unknown.returncode == 2, unknown.stdout + unknown.stderr
    known = "dvmirror: catalog property type=nosuch: Iceberg knows the types"
    assert one_error_line(unknown).startswith(known)
    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    began = time.monotonic()
    unreachable = run_dvmirror(
        *args, *catalog_flags({"type": "rest", "uri": uri}), "--json", cwd=tmp_path, env=no_java_env()
    )
    assert time.monotonic() - began < 15
    assert unreachable.returncode == 2, unreachable.stdout + unreachable.stderr
    line = one_error_line(unreachable)
    assert line.startswith(f"dvmirror: the catalog cannot be reached: rest catalog (uri={uri}): property uri")
    assert json.loads(unreachable.stdout)["exit_code"] == 2
