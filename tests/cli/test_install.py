"""Install anywhere (issue 28).

* The wheel (`make wheel`: the package with the JVM helper jar inside), installed (not editable) into a
  fresh virtual environment in a temporary folder outside the checkout, at the versions requirements.lock
  pins, runs `dvmirror sync`, `status`, `verify --full` and `expire` on a copy of a fixture table from
  that folder with no jars folder given (no DVMIRROR_JARS, no ./.jars): Delta, Iceberg and the JDBC
  drivers come from Maven Central through Spark's Ivy (the same jars jvm/pom.xml copies), and nothing is
  created in the folder before the input is checked.
* With no Java, or a JAVA_HOME pointing nowhere, a command that needs Spark exits 2 with one line saying
  what is needed, before Spark starts or anything is created.

Every test here is marked `cli` (file name) and `system` (a fresh virtual environment): `make test-cli`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dv_assets.mirror.java_runtime import MIN_JAVA, check_java, java_major, java_version
from dv_assets.mirror.spark import PACKAGED_HELPER
from tests.helpers.paths import REPO_ROOT
from tests.helpers.processes import (
    clean_env,
    jars_dir,
    no_java_env,
    one_error_line,
    outside_env,
    run,
    run_dvmirror,
)

pytestmark = pytest.mark.system
TABLE = "table-with-dv-small"


def _ivy_jar_name(path: str) -> str:
    """Ivy's `group_artifact-version.jar` as Maven names the file (`artifact-version.jar`)."""
    return Path(path).name.split("_", 1)[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment holding the built wheel and its dependencies at the lock's versions."""
    tmp = tmp_path_factory.mktemp("install")
    assert PACKAGED_HELPER.is_file(), f"no {PACKAGED_HELPER}: `make setup` (or `make wheel`) puts it there"
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--wheel-dir",
            tmp / "dist",
            REPO_ROOT,
        ],
        env=outside_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = (tmp / "dist").glob("dv_mirror-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    install = subprocess.run(
        [venv / "bin" / "pip", "install", "--quiet", "-c", REPO_ROOT / "requirements.lock", wheel],
        env=outside_env(PIP_DISABLE_PIP_VERSION_CHECK="1"),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    return venv


def test_the_wheel_mirrors_verifies_and_expires_from_any_folder(
    installed: Path, tmp_path: Path, copy_fixture
) -> None:
    table = copy_fixture(TABLE, f"elsewhere/{TABLE}")
    elsewhere = table.parent
    dvmirror = installed / "bin" / "dvmirror"
    env = outside_env()  # no DVMIRROR_JARS, no PYTHONPATH: the installed package alone
    where = run(
        [installed / "bin" / "python", "-c", "import dv_assets; print(dv_assets.__file__)"],
        cwd=elsewhere,
        env=env,
    )
    assert str(installed) in where.stdout and str(REPO_ROOT) not in where.stdout, where.stdout

    # Bad input first: one line, exit 2, nothing created in the working directory.
    missing = run([dvmirror, "sync", "no-such-table", "--table", "mine.t"], cwd=elsewhere, env=env)
    assert missing.returncode == 2, missing.stderr
    assert one_error_line(missing) == "dvmirror: table no-such-table: no such path"
    assert sorted(p.name for p in elsewhere.iterdir()) == [TABLE]

    synced = run(
        [dvmirror, "sync", TABLE, "--table", "mine.t", "--json"], cwd=elsewhere, env=env, timeout=900
    )
    assert synced.returncode == 0, synced.stdout + synced.stderr
    report = json.loads(synced.stdout)  # stdout is the JSON alone (Ivy's report went to Spark's log)
    assert report["mirrored_versions"] == [0, 1]
    assert (elsewhere / ".dvmirror" / "catalog.db").is_file()  # the default catalog, in the working folder
    assert not (elsewhere / ".jars").exists()

    # The jars came from Maven Central through Ivy: the packaged helper and the same jars as jvm/pom.xml's.
    [record] = (Path.home() / ".cache" / "dvmirror" / "ivy").glob("dvmirror-classpath-*.txt")
    resolved = [line.split("\t", 1)[1] for line in record.read_text().splitlines()]  # `<size> TAB <jar>`
    assert {_ivy_jar_name(j) for j in resolved} == {
        p.name for p in Path(jars_dir()).glob("*.jar") if p.name != "dvmirror-jvm.jar"
    }

    status = run([dvmirror, "status", "mine.t", "--json"], cwd=elsewhere, env=env)
    assert status.returncode == 0, status.stderr
    [shown] = json.loads(status.stdout)["tables"]
    assert (shown["mirrored_version"], shown["up_to_date"]) == (1, True), status.stdout

    verified = run([dvmirror, "verify", "mine.t", "--full", "--json"], cwd=elsewhere, env=env, timeout=900)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["ok"] is True

    expired = run(
        [dvmirror, "expire", "mine.t", "--retain-last", "1", "--json"], cwd=elsewhere, env=env, timeout=900
    )
    assert expired.returncode == 0, expired.stdout + expired.stderr
    assert json.loads(expired.stdout)["snapshots_expired"] == 1
    assert sorted(p.name for p in elsewhere.iterdir()) == [".dvmirror", TABLE]


@pytest.mark.parametrize("java", ["none on the PATH", "JAVA_HOME nowhere"])
def test_no_usable_java_is_one_line_before_anything_starts(java: str, tmp_path: Path, copy_fixture) -> None:
    copy_fixture(TABLE)
    env = (
        no_java_env()
        if java == "none on the PATH"
        else {**os.environ, "JAVA_HOME": str(tmp_path / "nowhere")}
    )
    for command in (["sync", TABLE, "--table", "mine.t"], ["expire", "mine.t", "--retain-last", "1"]):
        done = run_dvmirror(*command, cwd=tmp_path, env=env)
        line = one_error_line(done)
        assert done.returncode == 2, done.stderr
        expected = (
            "no `java` on the PATH and JAVA_HOME is not set"
            if java == "none on the PATH"
            else f"JAVA_HOME={tmp_path / 'nowhere'} has no bin/java"
        )
        if command[0] == "sync":
            assert line.startswith(f"dvmirror: Spark needs Java {MIN_JAVA} or newer: {expected}"), line
        else:  # no table yet: the catalog is read first (no JVM), and says so
            assert line == "dvmirror: table mine.t: no such Iceberg table", line
        assert "Spark's log" not in line
        assert sorted(p.name for p in tmp_path.iterdir()) == [TABLE]  # no ./.dvmirror


def test_java_versions_are_read_as_their_feature_release() -> None:
    assert [java_major(v) for v in ("1.8.0_292", "11.0.2", "17.0.15", "21", "25-ea")] == [8, 11, 17, 21, 25]
    assert java_major("unknown") is None
    # The Java on this machine (the suite's own Spark runs on it) passes, as the Java it is.
    found = check_java()
    assert found.is_file()
    assert (java_major(java_version(found) or "") or 0) >= MIN_JAVA


def test_an_unwritable_ivy_cache_is_one_line_before_anything_starts(tmp_path: Path, copy_fixture) -> None:
    """Ivy waits forever for a lock it cannot create: the CLI says so instead (no jars folder given)."""
    copy_fixture(TABLE)
    (tmp_path / "a-file").write_text("")
    ivy = tmp_path / "a-file" / "ivy"
    env = clean_env("DVMIRROR_", "DAGSTER_", PYTHONPATH=str(REPO_ROOT), DVMIRROR_IVY=str(ivy))
    done = run_dvmirror("sync", TABLE, "--table", "mine.t", cwd=tmp_path, env=env)
    assert done.returncode == 2, done.stderr
    assert one_error_line(done).startswith(f"dvmirror: the Ivy cache {ivy} (DVMIRROR_IVY) is not a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", TABLE]
