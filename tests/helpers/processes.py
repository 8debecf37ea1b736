"""Processes the tests start: the `dvmirror` CLI (one runner, `run_dvmirror` / `sync_cli`), Python and
Dagster children, headless Chromium; the environments they get, free ports, waiting on a log line."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from dv_assets.mirror.settings import CatalogConfig
from tests.helpers.paths import DVMIRROR, REPO_ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def jars_dir() -> str:
    """The jars the test session's Spark uses: DVMIRROR_JARS (`make test JARS_DIR=…`), else `.jars/`."""
    return os.environ.get("DVMIRROR_JARS") or str(REPO_ROOT / ".jars")


def clean_env(*drop_prefixes: str, **extra: str) -> dict[str, str]:
    """This process's environment without the variables whose names start with one of `drop_prefixes`,
    plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop_prefixes)}
    return {**env, **extra}


def outside_env(**extra: str) -> dict[str, str]:
    """An environment that names nothing of this checkout or the test session (no DVMIRROR_*, PYTHON*
    or DAGSTER_* settings), plus `extra`: what an installed package must make do with."""
    return clean_env("DVMIRROR_", "PYTHON", "DAGSTER_", **extra)


def dvmirror_env(**extra: str) -> dict[str, str]:
    """The environment of a dv-mirror child (the CLI, a Spark session, Dagster): none of the caller's
    DVMIRROR_* or DAGSTER_* settings, the session's jars, this checkout's packages first."""
    return clean_env("DVMIRROR_", "DAGSTER_", DVMIRROR_JARS=jars_dir(), PYTHONPATH=str(REPO_ROOT), **extra)


def run(
    command: Sequence[str | Path],
    *,
    cwd: Path | str,
    env: dict[str, str] | None = None,
    timeout: float | None = 300,
) -> subprocess.CompletedProcess:
    """Run `command` to its end (output captured as text), in `dvmirror_env()` unless `env` is given."""
    return subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=dvmirror_env() if env is None else env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_dvmirror(
    *args: str, cwd: Path | str, timeout: float | None = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """The one way the tests run the `dvmirror` CLI: the installed command (`DVMIRROR`), in
    `dvmirror_env()` unless `env` is given. (test_faults_long starts two at once with Popen, from the
    same command and env.)"""
    return run([DVMIRROR, *args], cwd=cwd, env=env, timeout=timeout)


def spawn_dvmirror(
    *args: str, cwd: Path | str, stdout: Path, stderr: Path, env: dict[str, str] | None = None
) -> subprocess.Popen:
    """The `dvmirror` CLI started as `run_dvmirror` runs it, but in the background (a long-running
    `sync --follow`): its stdout and stderr go to files, which can be read while it runs."""
    with stdout.open("w") as out, stderr.open("w") as err:
        return subprocess.Popen(
            [str(DVMIRROR), *args],
            cwd=cwd,
            env=dvmirror_env() if env is None else env,
            stdout=out,
            stderr=err,
        )


def no_java_env() -> dict[str, str]:
    """`dvmirror_env()` in which no JVM can start: no JAVA_HOME or SPARK_HOME, and a PATH of the
    virtual environment's `bin/` alone (no `java`). A command that needs no JVM must still work in it."""
    env = dvmirror_env(PATH=str(DVMIRROR.parent))
    for name in ("JAVA_HOME", "SPARK_HOME"):
        env.pop(name, None)
    return env


def cli_catalog(tmp: Path) -> CatalogConfig:
    """The catalog `sync_cli` mirrors into unless told otherwise: its own, under `tmp/cli`."""
    return CatalogConfig.under(tmp / "cli")


def catalog_uri(catalog: CatalogConfig) -> str:
    """An embedded sqlite catalog as `--catalog-uri` and DVMIRROR_CATALOG_URI name it (`sqlite:///…`)."""
    assert catalog.sqlite_path is not None, "only an embedded sqlite catalog has a --catalog-uri"
    return f"sqlite:///{catalog.sqlite_path}"


def catalog_args(catalog: CatalogConfig) -> list[str]:
    """The `dvmirror` flags naming `catalog` (an embedded sqlite catalog): `--catalog-uri`, `--warehouse`."""
    return ["--catalog-uri", catalog_uri(catalog), "--warehouse", str(catalog.warehouse)]


def sync_cli(
    tmp: Path, delta: Path | str, table: str, *extra: str, catalog: CatalogConfig | None = None
) -> subprocess.CompletedProcess:
    """`dvmirror sync DELTA --table TABLE` run in `tmp`, into `catalog` (default `cli_catalog(tmp)`)."""
    catalog = catalog or cli_catalog(tmp)
    return run_dvmirror("sync", str(delta), "--table", table, *catalog_args(catalog), *extra, cwd=tmp)


def catalog_flags(properties: Mapping[str, str]) -> list[str]:
    """`--catalog-property KEY=VALUE` for each catalog property (the CLI's and the Spark jobs')."""
    return [arg for key, value in properties.items() for arg in ("--catalog-property", f"{key}={value}")]


def sync_json(delta: str, table: str, args: list[str]) -> dict:
    """`dvmirror sync DELTA --table TABLE ARGS --json` in the repository, which must succeed; its report."""
    done = run_dvmirror("sync", delta, "--table", table, *args, "--json", cwd=REPO_ROOT, timeout=None)
    assert done.returncode == 0, f"dvmirror exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)


def spark_job(job: str, target: str, properties: Mapping[str, str]) -> dict[int, list[dict]]:
    """A job of `tests.integration.spark_jobs` in a Spark process of its own; its rows per version."""
    command = [sys.executable, "-m", "tests.integration.spark_jobs", job, target]
    done = run([*command, *catalog_flags(properties)], cwd=REPO_ROOT, timeout=None)
    assert done.returncode == 0, (
        f"{job} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return {int(k): v for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The stderr of a refused run: exactly one line, `dvmirror: ...`, and no traceback."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("dvmirror: ") and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_text(log: Path, text: str, process: subprocess.Popen, seconds: float = 120) -> None:
    """Until `text` is in the log `process` writes (failing if the process ends first)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        assert process.poll() is None, log.read_text(errors="replace")[-3000:]
        time.sleep(0.5)
    raise AssertionError(f"{text!r} not in {log} after {seconds} s")


def chromium(url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    """Headless Chromium on `url` (with a virtual-time budget for the page's scripts)."""
    assert CHROMIUM is not None
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=15000",
            *extra,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def rendered_text(url: str, profile: Path) -> str:
    """The text of the page as rendered (the DOM after the page's scripts ran), whitespace collapsed."""
    dom = chromium(url, profile, "--dump-dom").stdout
    text = re.sub(r"<script.*?</script>|<style.*?</style>", " ", dom, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", text)))
