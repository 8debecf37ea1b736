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
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dv_assets.mirror.errors import InvalidDeletionVectorError, MirrorInputError
from dv_assets.mirror.settings import ICEBERG_CATALOG_NAME, CatalogConfig
from dv_assets.mirror.sync import sync_table
from tests.helpers.paths import DELTA_FIXTURES, DVMIRROR, REPO_ROOT

pytestmark = pytest.mark.spark
SMALL = "table-with-dv-small"
DV_NAME = "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin"
DATA_NAME = "part-00000-fae5310a-a37d-4e51-827b-c3d5516560ca-c000.snappy.parquet"
COMMIT_1 = "_delta_log/00000000000000000001.json"


def _flip(offset: int) -> Callable[[Path], None]:
    def corrupt(root: Path) -> None:
        content = bytearray((root / DV_NAME).read_bytes())
        content[offset] ^= 0xFF
        (root / DV_NAME).write_bytes(bytes(content))

    return corrupt


def _truncate(root: Path) -> None:
    (root / DV_NAME).write_bytes((root / DV_NAME).read_bytes()[:30])


def _missing(root: Path) -> None:
    (root / DV_NAME).unlink()


def _wrong_size(root: Path) -> None:
    commit = root / COMMIT_1
    text = commit.read_text()
    assert text.count('"sizeInBytes":36') == 1
    commit.write_text(text.replace('"sizeInBytes":36', '"sizeInBytes":35'))


def _repair(root: Path) -> None:
    shutil.copy2(DELTA_FIXTURES / SMALL / DV_NAME, root / DV_NAME)
    shutil.copy2(DELTA_FIXTURES / SMALL / COMMIT_1, root / COMMIT_1)


# The DV file: version byte, BE32 size (36) at 1..4, the bitmap (magic first) at 5..40, BE32 CRC at 41..44.
CORRUPTIONS: dict[str, tuple[Callable[[Path], None], str]] = {
    "crc": (_flip(44), "crc"),
    "magic": (_flip(5), "magic"),
    "truncated": (_truncate, "truncated"),
    "size": (_wrong_size, "size"),
    "missing": (_missing, "cannot be opened"),
}


def _data_dir_files(catalog: CatalogConfig, table_name: str) -> set[str]:
    data = catalog.local_warehouse.joinpath(*table_name.split(".")) / "data"
    return {str(p) for p in data.rglob("*")} if data.exists() else set()


def _state(catalog: CatalogConfig, table_name: str) -> tuple[int | None, str | None, int]:
    """(current snapshot id, its Delta version, number of snapshots), as pyiceberg sees the table."""
    table = catalog.pyiceberg_catalog().load_table(table_name)
    snapshot = table.current_snapshot()
    if snapshot is None:
        return None, None, 0
    version = (
        snapshot.summary.additional_properties.get("dvmirror.delta-version") if snapshot.summary else None
    )
    return snapshot.snapshot_id, version, len(table.snapshots())


def _rows(spark, table_name: str) -> list[int]:
    return sorted(r[0] for r in spark.table(f"{ICEBERG_CATALOG_NAME}.{table_name}").collect())


@pytest.mark.parametrize("fmt", [3, 2])
def test_corrupted_dv_refused_then_repaired(spark, catalog, copy_fixture, fmt: int) -> None:
    for case, (corrupt, reason_word) in CORRUPTIONS.items():
        root = copy_fixture(SMALL)
        (root.parent / f"{SMALL}-{case}").mkdir()
        root = root.rename(root.parent / f"{SMALL}-{case}" / SMALL)
        table_name = f"bad.{case}_v{fmt}"
        first = sync_table(spark, root, table_name, format_version=fmt, until_version=0)
        assert first.mirrored_versions == [0]
        before = _state(catalog, table_name)
        files_before = _data_dir_files(catalog, table_name)
        corrupt(root)

        with pytest.raises(MirrorInputError) as raised:
            sync_table(spark, root, table_name, format_version=fmt)
        err = raised.value
        assert (err.table, err.version) == (str(root), 1), (case, err.one_line())
        assert err.file is not None and err.file.endswith(DATA_NAME), (case, err.one_line())
        assert reason_word in err.reason.lower(), (case, err.one_line())
        line = err.one_line()
        assert "\n" not in line and str(root) in line and "version 1" in line and DATA_NAME in line

        assert _state(catalog, table_name) == before, case
        assert _data_dir_files(catalog, table_name) == files_before, case

        _repair(root)
        done = sync_table(spark, root, table_name, format_version=fmt)
        assert done.mirrored_versions == [1], case
        assert _rows(spark, table_name) == list(range(1, 9)), case
        assert _state(catalog, table_name)[1:] == ("1", 2), case


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
    assert _state(catalog, table_name)[1:] == ("0", 1)
    assert _rows(spark, table_name) == list(range(10))


def _run(tmp: Path, command: list[str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DVMIRROR_DEBUG"}
    env["DVMIRROR_JARS"] = str(REPO_ROOT / ".jars")
    env["PYTHONPATH"] = str(REPO_ROOT)
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, cwd=tmp)


def _cli(tmp: Path, table: Path, name: str, *extra: str) -> subprocess.CompletedProcess:
    catalog = [
        "--catalog-uri",
        f"sqlite:///{tmp / 'cli' / 'catalog.db'}",
        "--warehouse",
        str(tmp / "cli" / "warehouse"),
    ]
    return _run(tmp, [str(DVMIRROR), "sync", str(table), "--table", name, *catalog, *extra])


def _crash_before_commit(tmp: Path, table: Path, name: str, version: int) -> subprocess.CompletedProcess:
    """A sync whose process dies right before committing `version` (tests/helpers/faults.py)."""
    catalog = [f"sqlite:///{tmp / 'cli' / 'catalog.db'}", str(tmp / "cli" / "warehouse")]
    command = [sys.executable, "-m", "tests.helpers.faults", "crash-before-commit", str(version)]
    return _run(tmp, [*command, str(table), name, *catalog])


def _cli_catalog(tmp: Path) -> CatalogConfig:
    return CatalogConfig.under(tmp / "cli")


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The stderr of a refused run: exactly one line, `dvmirror: ...`, and no traceback."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("dvmirror: ") and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_cli_refuses_corrupted_dv_format_2(copy_fixture, tmp_path: Path) -> None:
    root = copy_fixture(SMALL)
    _flip(44)(root)
    proc = _cli(tmp_path, root, "bad.cli_crc", "--format-version", "2")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = _one_error_line(proc)
    assert f"table {root}" in line and "version 1" in line and DATA_NAME in line and "CRC" in line.upper()
    catalog = _cli_catalog(tmp_path)
    assert _state(catalog, "bad.cli_crc")[1:] == ("0", 1)
    table = catalog.pyiceberg_catalog().load_table("bad.cli_crc")
    assert table.format_version == 2
    assert _data_dir_files(catalog, "bad.cli_crc") == set()


def test_cli_refuses_malformed_inline_dv(copy_fixture, tmp_path: Path) -> None:
    """cdf-table-with-dv v5: the inline DV's last Z85 group overflows; versions 0-4 are mirrored."""
    root = copy_fixture("cdf-table-with-dv")
    proc = _cli(tmp_path, root, "bad.cdf")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = _one_error_line(proc)
    assert f"table {root}" in line and "version 5" in line and DATA_NAME in line, line
    assert [f"Delta version {v} " in proc.stdout for v in range(6)] == [True] * 5 + [False], proc.stdout
    assert _state(_cli_catalog(tmp_path), "bad.cdf")[1:] == ("4", 5)


def test_cli_json_reports_a_refusal_with_the_versions_mirrored_before_it(
    copy_fixture, tmp_path: Path
) -> None:
    root = copy_fixture("cdf-table-with-dv")
    proc = _cli(tmp_path, root, "bad.cdf_json", "--json")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = _one_error_line(proc)
    report = json.loads(proc.stdout)
    assert report["ok"] is False and report["exit_code"] == 2
    assert f"dvmirror: {report['error']}" == line and "version 5" in report["error"]
    assert report["mirrored_versions"] == [0, 1, 2, 3, 4]
    assert Path(report["spark_log"]).is_file()
    missing = _cli(tmp_path, tmp_path / "no-such-table", "bad.none", "--json")
    assert missing.returncode == 2 and json.loads(missing.stdout)["mirrored_versions"] == []


def test_crash_before_commit_then_rerun_converges(copy_fixture, tmp_path: Path) -> None:
    root = copy_fixture(SMALL)
    crashed = _crash_before_commit(tmp_path, root, "crash.small", 1)
    assert crashed.returncode == 99, crashed.stdout + crashed.stderr
    catalog = _cli_catalog(tmp_path)
    assert _state(catalog, "crash.small")[1:] == ("0", 1)

    rerun = _cli(tmp_path, root, "crash.small", "--json")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    table = catalog.pyiceberg_catalog().load_table("crash.small")
    versions = [s.summary.additional_properties["dvmirror.delta-version"] for s in table.snapshots()]
    assert versions == ["0", "1"]
    rows = sorted(table.scan().to_arrow().column("value").to_pylist())
    assert rows == list(range(1, 9))
    # One data file with exactly one DV (the rerun's; the crashed run's Puffin file is not referenced).
    tasks = list(table.scan().plan_files())
    assert [(t.file.file_path, len(t.delete_files)) for t in tasks] == [(str(root / DATA_NAME), 1)]


@pytest.mark.parametrize("damage", ["missing", "wrong size"])
def test_missing_data_file_refused_before_the_table_exists(spark, catalog, copy_fixture, damage: str) -> None:
    """A data file the log adds must exist with the logged size; v0 refused means no table at all."""
    root = copy_fixture(SMALL)
    table_name = f"bad_input.data_file_{damage.replace(' ', '_')}"
    if damage == "missing":
        (root / DATA_NAME).unlink()
    else:
        (root / DATA_NAME).write_bytes((root / DATA_NAME).read_bytes() + b"\0")
    with pytest.raises(MirrorInputError) as refused:
        sync_table(spark, root, table_name)
    assert (refused.value.version, refused.value.file) == (0, str(root / DATA_NAME))
    assert refused.value.table == str(root)
    assert not catalog.pyiceberg_catalog().table_exists(table_name)
    assert _data_dir_files(catalog, table_name) == set()

    shutil.copy2(DELTA_FIXTURES / SMALL / DATA_NAME, root / DATA_NAME)
    assert sync_table(spark, root, table_name).mirrored_versions == [0, 1]
    assert _rows(spark, table_name) == [1, 2, 3, 4, 5, 6, 7, 8]
