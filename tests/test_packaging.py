"""The engine stands alone and the package installs like any other.

* `dv_assets.mirror` (the CLI, the sync entry point and every other engine module) imports in a fresh
  interpreter without importing Dagster;
* a non-editable `pip install .` into a fresh virtual environment runs `dvmirror sync` and loads the
  Dagster definitions from another directory, the jars found through `DVMIRROR_JARS`;
* requirements.lock pins every dependency within pyproject.toml's ranges (`make lock` after a range change);
* the deployment files (Dockerfile, dagster_cloud.yaml, the Dagster+ workflow) name the code location that
  pyproject.toml declares.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.helpers.paths import DELTA_FIXTURES, REPO_ROOT, locked_versions
from tests.helpers.processes import jars_dir, outside_env, run

IMPORT_THE_ENGINE = """
import json, pkgutil, sys
import dv_assets.mirror
from dv_assets.mirror.cli import main
from dv_assets.mirror.settings import MirrorSettings
from dv_assets.mirror.sync import sync_table
names = [m.name for m in pkgutil.walk_packages(dv_assets.mirror.__path__, "dv_assets.mirror.")
         if not m.name.endswith(".__main__")]  # `python -m`'s entry: importing it runs the CLI
for name in names:
    __import__(name)
dagster = sorted(m for m in sys.modules if m.split(".")[0] in ("dagster", "dagster_pyspark"))
print(json.dumps({"modules": names, "dagster": dagster}))
"""


def test_engine_imports_without_dagster() -> None:
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_THE_ENGINE],
        cwd=REPO_ROOT,
        env=outside_env(),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    imported = json.loads(done.stdout)
    assert {"dv_assets.mirror.cli", "dv_assets.mirror.sync", "dv_assets.mirror.iceberg.java"} <= set(
        imported["modules"]
    )
    assert imported["dagster"] == []


@pytest.mark.spark
@pytest.mark.system  # a fresh virtual environment and a wheel built and installed into it
def test_non_editable_install_runs_the_cli_and_loads_the_definitions_elsewhere(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    # The dependencies come from the test environment's site-packages; the project itself is installed
    # as a built wheel (not editable) into the new environment.
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            str(REPO_ROOT),
        ],
        env=outside_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stdout + install.stderr

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = outside_env(DVMIRROR_JARS=jars_dir(), DAGSTER_HOME=str(elsewhere))
    where = subprocess.run(
        [str(python), "-c", "import dv_assets, resources; print(dv_assets.__file__, resources.__file__)"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(REPO_ROOT) not in where and str(venv) in where, where

    table = elsewhere / "table-with-dv-small"
    shutil.copytree(DELTA_FIXTURES / "table-with-dv-small", table)
    synced = run(
        [venv / "bin" / "dvmirror", "sync", str(table), "--table", "pkg.t", "--json"], cwd=elsewhere, env=env
    )
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert json.loads(synced.stdout)["mirrored_versions"] == [0, 1]
    assert (elsewhere / ".dvmirror" / "catalog.db").is_file()  # defaults under the working directory

    # The operator's own table list (DeltaMirrorComponent documents) in the working directory.
    (elsewhere / "sources.yaml").write_text(
        "type: dv_assets.components.DeltaMirrorComponent\n"
        "attributes: {name: pkg, delta_path: table-with-dv-small, iceberg_table: pkg.t}\n"
    )
    listed = run(
        [
            python,
            "-W",
            "ignore",
            "-c",
            "from dv_assets.definitions import load_definitions; r = load_definitions().get_repository_def();"
            "print(sorted(j.name for j in r.get_all_jobs() if not j.name.startswith('__')))",
        ],
        cwd=elsewhere,
        env=env,
    )
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip() == str(["checks_pkg", "cleanup_pkg", "mirror_pkg"])
    validated = run(
        [python, "-m", "dagster", "definitions", "validate", "-m", "dv_assets.definitions"],
        cwd=elsewhere,
        env=env,
    )
    assert validated.returncode == 0, validated.stdout + validated.stderr


def test_the_lock_pins_every_dependency_within_its_range() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    pins = locked_versions()
    declared = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]]
    outside = {
        str(req): pins.get(canonicalize_name(req.name))
        for req in declared
        if not pins.get(canonicalize_name(req.name))
        or not all(req.specifier.contains(v) for v in pins[canonicalize_name(req.name)])
    }
    assert outside == {}, f"run `make lock`: {outside}"
    # Extras resolve to packages: pyiceberg[sql-postgres] brings a binary psycopg2, moto[server] flask.
    assert {"psycopg2-binary", "sqlalchemy", "flask"} <= set(pins)
    # dagster-pyspark 0.29.N goes with dagster 1.13.N.
    assert pins["dagster-pyspark"][0].split(".")[2] == pins["dagster"][0].split(".")[2]


def test_the_deployment_files_name_the_code_location_of_pyproject() -> None:
    dagster = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["dagster"]
    module, location = dagster["module_name"], dagster["code_location_name"]
    [cloud] = yaml.safe_load((REPO_ROOT / "dagster_cloud.yaml").read_text())["locations"]
    assert (cloud["location_name"], cloud["code_source"]["module_name"]) == (location, module)
    assert cloud["build"]["directory"] == "."
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    [cmd] = [line for line in dockerfile.splitlines() if line.startswith("CMD ")]
    assert json.loads(cmd[len("CMD ") :]) == [
        "dagster",
        "code-server",
        "start",
        "-h",
        "0.0.0.0",
        "-p",
        "4000",
        "-m",
        module,
        "--location-name",
        location,
    ]
    assert "-c /tmp/dvmirror/requirements.lock /tmp/dvmirror" in dockerfile
    assert "DVMIRROR_JARS=/opt/dvmirror/jars" in dockerfile
    workflow = (REPO_ROOT / ".github" / "workflows" / "dagster-plus-deploy.yml").read_text()
    assert f"--location-name={location}" in workflow
