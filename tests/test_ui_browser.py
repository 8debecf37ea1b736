"""The Dagster UI in a real browser: dagster-webserver on workspace.yaml, over an instance where a
range of partitions (Delta versions 0..1) was materialized in one run with its checks, rendered by
headless Chromium (the UI is a React app, so
the test reads the rendered DOM). A screenshot goes to .screenshots/ (git-ignored)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from dv_assets.defs.sensors import mirror_range_request
from tests.helpers.dagster import (
    add_partitions,
    build_source,
    checks_passed,
    make_source,
    resources,
    source_attributes,
    tables_file,
)
from tests.helpers.processes import CHROMIUM, chromium, free_port, rendered_text

REPO = Path(__file__).resolve().parent.parent
SCREENSHOTS = REPO / ".screenshots"

pytestmark = [
    pytest.mark.spark,
    pytest.mark.system,  # a webserver and a browser of its own
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="chromium is not installed (apt-get install -y chromium; .ci/run installs it first)",
    ),
]


@pytest.fixture
def webserver(spark, catalog, copy_fixture, tmp_path) -> Iterator[tuple[str, str]]:
    """A webserver over an instance holding a mirror's versions 0..1, materialized (with checks) in one
    range run, as the sensor requests a backlog."""
    table = copy_fixture("table-with-dv-small")
    source = make_source(table)
    sources = tables_file(tmp_path / "tables.yaml", source_attributes(source))
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        built = build_source(source)
        add_partitions(instance, built, [0, 1])
        result = dg.materialize(
            [*built.assets, *built.checks],
            instance=instance,
            resources=resources(catalog),
            tags=mirror_range_request(source, 0, 1).tags,
        )
        assert checks_passed(result) == {
            "metadata_row_count_matches": True,
            "row_count_matches": True,
            "one_dv_per_data_file": True,
        }

    port = free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "DVMIRROR_SOURCES": str(sources),
        "DVMIRROR_CATALOG_URI": catalog.sqlalchemy_uri,
        "DVMIRROR_WAREHOUSE": str(catalog.warehouse),
    }
    webserver_bin = Path(sys.executable).parent / "dagster-webserver"
    server = subprocess.Popen(
        [str(webserver_bin), "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/server_info", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail("dagster-webserver did not come up")
                time.sleep(0.5)
        # The community sign-up modal (shown once per instance on localhost) would cover the screenshot.
        request = urllib.request.Request(
            f"{url}/graphql",
            data=json.dumps({"query": "mutation SetNuxSeen { setNuxSeen }"}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert json.loads(response.read())["data"]["setNuxSeen"] is True
        yield url, source.name
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def shown_value(text: str, key: str) -> str | None:
    """The value the overview's metadata table shows for `key` (rendered as: key, timestamp, value)."""
    found = re.search(rf"(?<![\w/]){re.escape(key)} \w+ \d+, [\d:]+ [AP]M (\S+)", text)
    return found.group(1) if found else None


def test_ui_shows_assets_metadata_and_checks(webserver, tmp_path) -> None:
    url, name = webserver
    profile = tmp_path / "chromium"

    catalog = rendered_text(f"{url}/assets", profile)
    assert f"delta / {name}" in catalog and f"iceberg / {name}" in catalog

    delta = rendered_text(f"{url}/assets/delta/{name}?view=events&partition=1", profile)
    assert "Partition 1 materialized" in delta
    for shown in ("live_rows", "rows_deleted_by_dvs", "DVs added", "DELETE"):
        assert shown in delta, shown

    mirror = rendered_text(f"{url}/assets/iceberg/{name}?view=events&partition=1", profile)
    for shown in ("snapshot_id", "dvs_copied", "bytes_written", "puffin_files", "mirrored_versions"):
        assert shown in mirror, shown

    # The overview shows the latest materialization: the newest version (1, with 8 of its 10 rows live
    # after its DV), with the mirror's current state.
    overview = rendered_text(f"{url}/assets/iceberg/{name}", profile)
    assert "Row count 8" in overview, overview[-3000:]
    shown = {
        key: shown_value(overview, key) for key in ("delta_version", "mirrored_delta_version", "live_rows")
    }
    assert shown == {"delta_version": "1", "mirrored_delta_version": "1", "live_rows": "8"}, overview[-3000:]
    for key in ("current_snapshot_id", "dvmirror/lag_versions", "live_dvs", "metadata_location"):
        assert key in overview, key

    checks = rendered_text(f"{url}/assets/iceberg/{name}?view=checks", profile)
    assert "row_count_matches" in checks and "one_dv_per_data_file" in checks
    assert "Succeeded" in checks or "Passed" in checks

    SCREENSHOTS.mkdir(exist_ok=True)
    shot = SCREENSHOTS / "ui-iceberg-mirror.png"
    shot.unlink(missing_ok=True)
    chromium(
        f"{url}/assets/iceberg/{name}?view=events&partition=1",
        profile,
        f"--screenshot={shot}",
        "--window-size=1400,1000",
    )
    assert shot.exists() and shot.stat().st_size > 10_000
