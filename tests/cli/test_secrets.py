"""Secrets stay secret: canary secrets given by flag, by a `--config` file (`${VAR}` from the environment),
by a tables file, inside catalog URIs (userinfo, `password=` / `token=` query parameters) and in the
environment never reach stdout, stderr, `--json`, Spark's log or any file the command leaves behind, on
success and on each kind of failure (a catalog that cannot be reached, a catalog server that answers with
an error quoting the password, a Delta table refused once Spark runs, a table of a tables file refused).
Every output goes through one function, `dv_assets.mirror.secrets.masked`. Dagster's side (event log,
metadata, run config): `test_dagster_secrets` below."""

from __future__ import annotations

import base64
import http.server
import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dv_assets.mirror.settings import CatalogConfig
from tests.helpers.paths import DELTA_FIXTURES, REPO_ROOT
from tests.helpers.processes import dvmirror_env, free_port, one_error_line, run, run_dvmirror

TABLE = "table-with-dv-small"  # version 0: 10 rows in one file; version 1: a DELETE as one DV (8 rows)
CANARIES = {
    "flag": "canaryFLAG7301",
    "uri_password": "canaryURIPW7302",
    "uri_userinfo": "canaryUSERINFO7303",
    "file": "canaryFILE7304",
    "env": "canaryENV7305",
    "tables": "canaryTABLES7306",
}


def _leaks(*texts: str) -> list[str]:
    return [name for name, canary in CANARIES.items() if any(canary in t for t in texts)]


def _files_text(folder: Path) -> str:
    """Every file under `folder` (Spark's logs the run left behind, the catalog, …) as text."""
    return "\n".join(
        p.read_bytes().decode("utf-8", errors="replace") for p in sorted(folder.rglob("*")) if p.is_file()
    )


def _env(tmp: Path) -> dict[str, str]:
    """The CLI's environment: Spark's log and every temporary file in `tmp/t` (searched afterwards), and a
    secret in a variable whose name says so."""
    (tmp / "t").mkdir(exist_ok=True)
    return dvmirror_env(TMPDIR=str(tmp / "t"), MY_CATALOG_TOKEN=CANARIES["env"], CANARY_FILE=CANARIES["file"])


def _assert_nothing_leaks(done: subprocess.CompletedProcess, tmp: Path, what: str) -> None:
    leaked = _leaks(done.stdout, done.stderr, _files_text(tmp / "t"))
    assert not leaked, (
        f"{what}: {leaked} shown:\nstdout: {done.stdout[-3000:]}\nstderr: {done.stderr[-3000:]}"
    )


class _ErrorServer(http.server.BaseHTTPRequestHandler):
    """A catalog server that answers every request with a 500 whose message quotes the request's path
    and the credentials it got (a Bearer token, a Basic user:password)."""

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def _answer(self) -> None:
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            auth = base64.b64decode(auth.removeprefix("Basic ")).decode()
        body = json.dumps(
            {
                "error": {
                    "message": f"refused {self.path} with credentials {auth!r}",
                    "type": "ServerError",
                    "code": 500,
                }
            }
        ).encode()
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def error_server() -> Iterator[str]:
    """`host:port` of a catalog server that answers 500 to everything."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), _ErrorServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _unreachable_jdbc() -> list[str]:
    return [
        "--catalog-property",
        "type=jdbc",
        "--catalog-property",
        f"uri=jdbc:postgresql://127.0.0.1:1/db?user=u&password={CANARIES['uri_password']}",
        "--catalog-property",
        f"jdbc.password={CANARIES['flag']}",
    ]


def _rest(where: str) -> list[str]:
    return [
        "--catalog-property",
        "type=rest",
        "--catalog-property",
        f"uri=http://admin:{CANARIES['uri_userinfo']}@{where}/api?token={CANARIES['uri_password']}",
        "--catalog-property",
        f"token={CANARIES['flag']}",
    ]


@pytest.mark.parametrize("command", ["status", "sync"])
@pytest.mark.parametrize("catalog", ["jdbc", "rest"])
def test_an_unreachable_catalog_is_named_without_its_secrets(
    tmp_path: Path, command: str, catalog: str
) -> None:
    """The issue's repro: a one-line refusal (exit 2, before any JVM) naming the catalog, its URI's
    secrets masked, in text and in --json."""
    flags = _unreachable_jdbc() if catalog == "jdbc" else _rest("127.0.0.1:1")
    target = ["x.y"] if command == "status" else [str(DELTA_FIXTURES / TABLE), "--table", "x.y"]
    for json_flag in ([], ["--json"]):
        done = run_dvmirror(command, *target, *flags, *json_flag, cwd=tmp_path, env=_env(tmp_path))
        assert done.returncode == 2, done.stderr
        line = one_error_line(done)
        assert "the catalog cannot be reached" in line and "***" in line, line
        if catalog == "rest":
            assert "http://admin:***@127.0.0.1:1/api?token=***" in line, line
        else:
            assert "jdbc:postgresql://127.0.0.1:1/db?user=u&password=***" in line, line
        if json_flag:
            assert json.loads(done.stdout)["error"] == line.removeprefix("dvmirror: ")
        _assert_nothing_leaks(done, tmp_path, f"{command} {catalog} {json_flag}")


def test_a_catalog_server_quoting_the_password_is_masked(tmp_path: Path, error_server: str) -> None:
    """The catalog answers, with an error that quotes the password: an internal error (exit 3), masked;
    with the secrets given by a `--config` file whose `${VAR}`s come from the environment too."""
    for command in (["status", "x.y"], ["sync", str(DELTA_FIXTURES / TABLE), "--table", "x.y"]):
        done = run_dvmirror(*command, *_rest(error_server), "--json", cwd=tmp_path, env=_env(tmp_path))
        assert done.returncode in (2, 3), done.stderr
        one_error_line(done)
        _assert_nothing_leaks(done, tmp_path, f"{command[0]} on a server that quotes the password")
    config = tmp_path / "catalog.yaml"
    config.write_text(
        "catalog:\n  type: rest\n"
        f"  uri: http://admin:{CANARIES['uri_userinfo']}@{error_server}/api\n"
        "  credential: client:${CANARY_FILE}\n"
    )
    done = run_dvmirror("status", "x.y", "--config", str(config), "--json", cwd=tmp_path, env=_env(tmp_path))
    assert done.returncode in (2, 3), done.stderr
    one_error_line(done)
    _assert_nothing_leaks(done, tmp_path, "status --config")


@pytest.mark.spark  # `dvmirror sync` starts Spark in its process
def test_a_sync_and_a_refusal_after_spark_started_show_no_secret(tmp_path: Path) -> None:
    """A sync that succeeds (text and --json), then one Spark refuses (Spark's log kept and named): the
    secret properties of a working catalog (a token it does not use, a URI with a password in another
    property) appear nowhere, nor in Spark's log."""
    delta = tmp_path / TABLE
    shutil.copytree(DELTA_FIXTURES / TABLE, delta)
    catalog = CatalogConfig.under(tmp_path / "catalog")
    flags = [
        *(a for k, v in catalog.properties.items() for a in ("--catalog-property", f"{k}={v}")),
        "--catalog-property",
        f"token={CANARIES['flag']}",
        "--catalog-property",
        f"oauth2-server-uri=http://admin:{CANARIES['uri_userinfo']}@127.0.0.1:1/token?secret="
        f"{CANARIES['uri_password']}",
    ]
    env = _env(tmp_path)
    done = run_dvmirror(
        "sync", str(delta), "--table", "s.t", *flags, "--until-version", "0", cwd=tmp_path, env=env
    )
    assert done.returncode == 0, done.stderr
    _assert_nothing_leaks(done, tmp_path, "sync")
    done = run_dvmirror("sync", str(delta), "--table", "s.t", *flags, "--json", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["mirrored_versions"] == [1]
    _assert_nothing_leaks(done, tmp_path, "sync --json")
    for command in (["status", "s.t"], ["verify", "s.t"]):
        done = run_dvmirror(*command, *flags, "--json", cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
        _assert_nothing_leaks(done, tmp_path, command[0])

    # Another Delta table into the same Iceberg table: refused once Spark runs (exit 2).
    other = tmp_path / "other"
    shutil.copytree(DELTA_FIXTURES / "basic-dv-no-checkpoint", other)
    done = run_dvmirror("sync", str(other), "--table", "s.t", *flags, "--json", cwd=tmp_path, env=env)
    assert done.returncode == 2, done.stderr
    one_error_line(done)
    _assert_nothing_leaks(done, tmp_path, "refused sync")


@pytest.mark.spark  # `dvmirror sync --tables` starts Spark in its process
def test_a_tables_file_with_secrets_in_its_catalog(tmp_path: Path) -> None:
    """A tables file whose catalog carries secrets (a token, a URI with a password): the good table
    mirrored and the refused one reported, in text and JSON Lines, without them."""
    good = tmp_path / "good"
    shutil.copytree(DELTA_FIXTURES / TABLE, good)
    (tmp_path / "broken").mkdir()
    catalog = dict(CatalogConfig.under(tmp_path / "catalog").properties)
    catalog["token"] = CANARIES["tables"]
    catalog["oauth2-server-uri"] = f"http://admin:{CANARIES['uri_userinfo']}@127.0.0.1:1/token"
    documents = [
        f"type: dv_assets.components.DeltaMirrorComponent\nattributes:\n  name: {name}\n"
        f"  delta_path: {tmp_path / name}\n  iceberg_table: secrets.{name}\n"
        f"  catalog: {json.dumps(catalog)}\n"
        for name in ("good", "broken")
    ]
    tables = tmp_path / "tables.yaml"
    tables.write_text("---\n".join(documents))
    env = _env(tmp_path)
    for json_flag in ([], ["--json"]):
        done = run_dvmirror("sync", "--tables", str(tables), *json_flag, cwd=tmp_path, env=env)
        assert done.returncode == 2, done.stderr
        assert "broken" in done.stdout + done.stderr
        leaked = _leaks(done.stdout, done.stderr, _files_text(tmp_path / "t"))
        assert not leaked, f"--tables {json_flag}: {leaked}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


DAGSTER_RUN = """
import json, sys
from pathlib import Path
import dagster as dg
from dv_assets.defs.factory import build_source
from dv_assets.mirror.settings import CatalogConfig
from tests.helpers.dagster import add_partitions, make_source, resources

delta, catalog_root, home, token, uri = sys.argv[1:6]
properties = {**CatalogConfig.under(catalog_root).properties, "token": token, "oauth2-server-uri": uri}
catalog = CatalogConfig(properties)
instance = dg.DagsterInstance.local_temp(home)
built = build_source(make_source(Path(delta)), catalog)
add_partitions(instance, built, [0, 1, 7])
texts = []
for version in (0, 1, 7):
    result = dg.materialize(
        [*built.assets, *built.checks], instance=instance, partition_key=str(version),
        resources=resources(catalog), raise_on_error=False,
    )
    run = instance.get_run_by_id(result.run_id)
    texts.append(json.dumps(run.run_config, default=str))
    texts.append(json.dumps(dict(run.tags), default=str))
    for entry in instance.all_logs(result.run_id):
        texts.append(str(entry))
        texts.append(repr(entry.dagster_event))
    print(f"version {version}: success={result.success}", file=sys.stderr)
Path(home, "event-log.txt").write_text("\\n".join(texts))
"""


@pytest.mark.spark  # the Dagster run starts Spark in its process
def test_dagster_secrets(tmp_path: Path) -> None:
    """A code location's catalog with secrets: a run that mirrors versions 0 and 1 and a run that fails
    (version 7 does not exist): the runs' event logs (every event: materializations and their metadata,
    check results, the failure), their run config and tags, and the process's output hold none of them."""
    delta = tmp_path / TABLE
    shutil.copytree(DELTA_FIXTURES / TABLE, delta)
    home = tmp_path / "dagster"
    home.mkdir()
    uri = f"http://admin:{CANARIES['uri_userinfo']}@127.0.0.1:1/token?password={CANARIES['uri_password']}"
    done = run(
        [
            sys.executable,
            "-c",
            DAGSTER_RUN,
            str(delta),
            str(tmp_path / "catalog"),
            str(home),
            CANARIES["flag"],
            uri,
        ],
        cwd=REPO_ROOT,
        env=_env(tmp_path),
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "version 0: success=True" in done.stderr and "version 1: success=True" in done.stderr, done.stderr
    assert "version 7: success=False" in done.stderr, done.stderr[-3000:]
    events = (home / "event-log.txt").read_text()
    assert "ASSET_MATERIALIZATION" in events and "STEP_FAILURE" in events, events[-2000:]
    leaked = _leaks(events, done.stdout, done.stderr, _files_text(home))
    assert not leaked, f"Dagster: {leaked}"
