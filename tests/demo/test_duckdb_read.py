"""DuckDB, the third Iceberg reader (dv_assets/demo/duckdb_read.py): its extensions come from the installed
packages, and nothing it is asked can make it download one.

The proof uses an HTTP proxy of our own: DuckDB sends its extension downloads through `HTTP_PROXY`, so a
local server that records every request (and answers 404) sees any download DuckDB attempts, and no
request leaves the machine. A plain DuckDB, told to install, is seen asking the proxy (so the check can
fail); the reader's connection, told the same and more, is refused before any request.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import duckdb
import pytest

from dv_assets.demo.duckdb_read import EXTENSIONS, NO_EXTENSION_FOLDER, extension_file, offline_duckdb

# The URL the installs name: a reserved top-level domain, so even a DuckDB ignoring the proxy could not
# download anything from it.
NOWHERE = "http://extensions.invalid"


class _Recorder(BaseHTTPRequestHandler):
    requests: list[str]

    def do_GET(self) -> None:
        self.requests.append(self.path)
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def proxy_requests(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every URL DuckDB asks for while the test runs: a recording proxy named by HTTP_PROXY."""
    requests: list[str] = []
    handler = type("Recorder", (_Recorder,), {"requests": requests})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    monkeypatch.setenv("HTTP_PROXY", f"127.0.0.1:{server.server_address[1]}")
    try:
        yield requests
    finally:
        server.shutdown()
        server.server_close()


def test_a_plain_duckdb_downloads_through_the_proxy(proxy_requests: list[str], tmp_path: Path) -> None:
    """The control: DuckDB's extension downloads go through HTTP_PROXY, so the recorder sees them."""
    plain = duckdb.connect(config={"extension_directory": str(tmp_path)})
    (platform,) = plain.execute("PRAGMA platform").fetchone() or ("?",)
    with pytest.raises(duckdb.Error, match="404"):
        plain.execute(f"INSTALL httpfs FROM '{NOWHERE}'")
    assert proxy_requests == [f"{NOWHERE}/v{duckdb.__version__}/{platform}/httpfs.duckdb_extension.gz"]


def test_the_reader_loads_the_packaged_extensions_and_never_downloads(proxy_requests: list[str]) -> None:
    connection = offline_duckdb()
    loaded = dict(
        connection.execute(
            "SELECT extension_name, install_mode FROM duckdb_extensions() WHERE loaded"
        ).fetchall()
    )
    # Loaded from the packages' files, not installed anywhere (and signed: unsigned ones are refused).
    assert {name: loaded.get(name) for name in EXTENSIONS} == dict.fromkeys(EXTENSIONS, "NOT_INSTALLED")
    assert all(extension_file(name).is_file() for name in EXTENSIONS)
    settings = dict(connection.execute("SELECT name, value FROM duckdb_settings()").fetchall())
    assert {k: settings[k] for k in ("autoinstall_known_extensions", "autoload_known_extensions")} == {
        "autoinstall_known_extensions": "false",
        "autoload_known_extensions": "false",
    }
    assert settings["allow_community_extensions"] == settings["allow_unsigned_extensions"] == "false"
    assert settings["extension_directory"] == NO_EXTENSION_FOLDER
    assert settings["lock_configuration"] == "true"

    attempts = {
        "INSTALL httpfs": "Failed to create directory",
        "INSTALL httpfs FROM core": "Failed to create directory",
        f"FORCE INSTALL iceberg FROM '{NOWHERE}'": "Failed to create directory",
        "LOAD httpfs": "not found",
        # A query that needs a known extension: autoinstall and autoload are off, so it is refused.
        "SELECT * FROM read_parquet('https://example.invalid/x.parquet')": "requires the extension httpfs",
        "SET autoinstall_known_extensions = true": "the configuration has been locked",
        "SET extension_directory = '/tmp'": "the configuration has been locked",
    }
    for statement, refusal in attempts.items():
        with pytest.raises(duckdb.Error, match=refusal):
            connection.execute(statement)
    assert proxy_requests == [], "the reader's connection asked for a download"
    httpfs = connection.execute(
        "SELECT loaded, installed FROM duckdb_extensions() WHERE extension_name = 'httpfs'"
    ).fetchall()
    assert httpfs == [(False, False)]
