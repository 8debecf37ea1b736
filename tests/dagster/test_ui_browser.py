"""The Dagster UI in a real browser (headless Chromium; the UI is a React app, so the tests read the
rendered DOM), screenshots in .screenshots/ (git-ignored):

* dagster-webserver on workspace.yaml, over an instance where a range of partitions (Delta versions 0..1)
  was materialized in one run with its checks;
* the first hour (issue 28): `make demo`'s program, then `make ui`'s (webserver and daemon) over its
  instance, the version sensor switched on as the UI's toggle does it, a new Delta commit, and the UI:
  the asset green at the new version, the sensor's ticks (the demo's among them), the runs launched by
  the sensor, the expired partitions marked.
"""

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
from dv_assets.defs.sources import VERSIONS_TAG
from dv_assets.mirror.settings import CatalogConfig
from tests.helpers.dagster import (
    add_partitions,
    build_source,
    checks_passed,
    make_source,
    resources,
    source_attributes,
    tables_file,
)
from tests.helpers.processes import (
    CHROMIUM,
    catalog_uri,
    chromium,
    dvmirror_env,
    free_port,
    rendered_text,
    wait_for_text,
)

REPO = Path(__file__).resolve().parents[2]
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
        "DVMIRROR_CATALOG_URI": catalog_uri(catalog),
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


DEMO = "demo_events"
VERSION_SENSOR = f"delta_version_sensor_{DEMO}"
SENSOR_SELECTOR = {"repositoryLocationName": "dv_mirror", "repositoryName": "__repository__"}


def graphql(url: str, query: str, variables: dict | None = None) -> dict:
    request = urllib.request.Request(
        f"{url}/graphql",
        data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        answer = json.loads(response.read())
    assert "errors" not in answer, answer
    return answer["data"]


ASSET_STATE = """
query ($path: [String!]!) {
  assetNodeOrError(assetKey: {path: $path}) {
    ... on AssetNode {
      assetMaterializations(limit: 1) { partition runId }
      assetPartitionStatuses {
        ... on DefaultPartitionStatuses {
          materializedPartitions failedPartitions unmaterializedPartitions materializingPartitions
        }
      }
      assetChecksOrError {
        ... on AssetChecks { checks { name executionForLatestMaterialization { status } } }
      }
    }
  }
}"""
SENSOR_STATE = """
query ($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) {
    ... on Sensor { sensorState { status ticks(limit: 20) { status runIds cursor timestamp } } }
  }
}"""
RUNS = """
query {
  runsOrError { ... on Runs { results { runId jobName status tags { key value }
    repositoryOrigin { repositoryLocationName repositoryName } } } }
}"""


def screenshot(url: str, profile: Path, name: str) -> Path:
    SCREENSHOTS.mkdir(exist_ok=True)
    shot = SCREENSHOTS / name
    shot.unlink(missing_ok=True)
    chromium(url, profile, f"--screenshot={shot}", "--window-size=1400,1000")
    assert shot.exists() and shot.stat().st_size > 10_000, shot
    return shot


@pytest.fixture
def demo_then_ui(spark, tmp_path) -> Iterator[tuple[str, Path, subprocess.Popen]]:
    """`make demo`'s program in a folder of its own (the demo's table, catalog and instance there, named by
    a sources file as an installed package reads it), then `make ui`'s command over that instance: the UI
    of the first hour. Yields the UI's address, the demo's Delta table and the UI process."""
    work = tmp_path / "work"
    work.mkdir()
    delta = work / "events"
    catalog = dict(CatalogConfig.under(work / "iceberg").properties)
    sources = tables_file(
        work / "sources.yaml",
        f"{{name: {DEMO}, delta_path: '{delta}', iceberg_table: demo.events, format_version: 3, "
        "retention: {retain_last: 3, max_snapshot_age_hours: null, orphan_min_age_hours: 1}, "
        f"start_running: false, catalog: {json.dumps(catalog)}}}",
    )
    env = dvmirror_env(DVMIRROR_SOURCES=str(sources))
    began = time.monotonic()
    demo = subprocess.run(
        [sys.executable, "-m", "dv_assets.demo"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    (tmp_path / "demo.out").write_text(demo.stdout + demo.stderr)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "tick SUCCESS: versions 0-8, 1 run requested" in demo.stdout, demo.stdout
    print(f"demo: {time.monotonic() - began:.0f} s, {len(demo.stdout.splitlines())} lines")

    port = free_port()
    log = tmp_path / "ui.log"
    with log.open("w") as out:
        ui = subprocess.Popen(
            [sys.executable, "-m", "dv_assets.demo.ui", "--host", "127.0.0.1", "--port", str(port)],
            cwd=REPO,  # the dg project (pyproject.toml), as `make ui` runs it
            env={**env, "DAGSTER_HOME": str(work / ".dagster_home")},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_text(log, "Serving dagster-webserver", ui, seconds=240)
        assert graphql(url, "mutation { setNuxSeen }")["setNuxSeen"] is True  # the sign-up modal
        yield url, delta, ui
    finally:
        os.killpg(ui.pid, signal.SIGTERM)
        try:
            ui.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(ui.pid, signal.SIGKILL)
        (tmp_path / "ui.log.kept").write_text(log.read_text(errors="replace"))


def test_the_first_hour_demo_then_ui_with_the_sensor_on(demo_then_ui, spark, tmp_path) -> None:
    url, delta, ui = demo_then_ui
    profile = tmp_path / "chromium"
    selector = {**SENSOR_SELECTOR, "sensorName": VERSION_SENSOR}

    # What the demo did is what the UI shows: the sensor's tick (stopped again after it, with its
    # cursor), its run launched from the code location and tagged with the sensor, no manual launches.
    state = graphql(url, SENSOR_STATE, {"selector": selector})["sensorOrError"]["sensorState"]
    assert state["status"] == "STOPPED", state
    demo_ticks = state["ticks"]
    assert [t["status"] for t in demo_ticks] == ["SUCCESS"], demo_ticks
    assert json.loads(demo_ticks[0]["cursor"])[DEMO] == 8, demo_ticks
    runs = graphql(url, RUNS)["runsOrError"]["results"]
    # mirror (the sensor's), checks (the demo's), cleanup (the demo's: the compacted-deletes sensor's first
    # sight of a mirror starts at its current version and requests nothing, sensors.py)
    assert len(runs) == 3, runs
    for run in runs:
        assert run["status"] == "SUCCESS", run
        assert run["repositoryOrigin"] == {
            "repositoryLocationName": "dv_mirror",
            "repositoryName": "__repository__",
        }
    by_sensor = {
        tag["value"]: run["jobName"]
        for run in runs
        for tag in run["tags"]
        if tag["key"] == "dagster/sensor_name"
    }
    assert by_sensor == {
        VERSION_SENSOR: f"mirror_{DEMO}",
    }
    sensor_page = rendered_text(f"{url}/locations/dv_mirror/sensors/{VERSION_SENSOR}", profile)
    assert "never run" not in sensor_page.lower(), sensor_page[-3000:]
    mirror_run = next(r for r in runs if r["jobName"] == f"mirror_{DEMO}")
    run_page = rendered_text(f"{url}/runs/{mirror_run['runId']}", profile)
    assert "Manually launched" not in run_page and VERSION_SENSOR in run_page, run_page[-3000:]
    screenshot(f"{url}/runs/{mirror_run['runId']}", profile, "first-hour-1-demo-run.png")

    # Switched on, as the UI's toggle does it (the same mutation), then a new Delta commit: version 9.
    started = graphql(
        url,
        "mutation ($selector: SensorSelector!) { startSensor(sensorSelector: $selector) { "
        "... on Sensor { sensorState { status } } } }",
        {"selector": selector},
    )
    assert started["startSensor"]["sensorState"]["status"] == "RUNNING", started
    spark.sql(f"INSERT INTO delta.`{delta}` VALUES (5000, 'n', 1.0), (5001, 'n', 2.0)")

    # The daemon ticks the sensor (every 30 s) and launches the run for version 9 alone; it ends.
    iceberg = ["iceberg", DEMO]
    deadline = time.monotonic() + 900
    while True:
        runs = graphql(url, RUNS)["runsOrError"]["results"]
        new = [r for r in runs if {"key": VERSIONS_TAG, "value": "9"} in r["tags"]]
        if new and new[0]["status"] in ("SUCCESS", "FAILURE", "CANCELED"):
            break
        assert ui.poll() is None, "the UI stopped"
        assert time.monotonic() < deadline, f"version 9's run not done after 900 s: {runs}"
        time.sleep(5)
    assert len(new) == 1 and new[0]["status"] == "SUCCESS", runs
    asset = graphql(url, ASSET_STATE, {"path": iceberg})["assetNodeOrError"]
    assert asset["assetMaterializations"][0]["partition"] == "9", asset
    ticks = graphql(url, SENSOR_STATE, {"selector": selector})["sensorOrError"]["sensorState"]["ticks"]
    requested = [t for t in ticks if t["runIds"]]
    assert len(requested) == 2, ticks  # the demo's (0-8) and 9's: nothing mirrored twice
    assert not [t for t in ticks if t["status"] == "FAILURE"], ticks
    runs = graphql(url, RUNS)["runsOrError"]["results"]
    assert all(r["status"] == "SUCCESS" for r in runs), runs

    # The asset page: green at version 9, its checks passed.
    checks = asset["assetChecksOrError"]["checks"]
    assert checks and all(
        (c["executionForLatestMaterialization"] or {}).get("status") == "SUCCEEDED"
        for c in checks
        if c["name"] != "mirror_lag_within_freshness"
    ), checks
    overview = rendered_text(f"{url}/assets/iceberg/{DEMO}", profile)
    assert "Failed" not in overview, overview[-3000:]
    screenshot(f"{url}/assets/iceberg/{DEMO}", profile, "first-hour-2-asset-v9.png")
    screenshot(
        f"{url}/locations/dv_mirror/sensors/{VERSION_SENSOR}", profile, "first-hour-3-sensor-ticks.png"
    )
    screenshot(f"{url}/assets/iceberg/{DEMO}?view=partitions", profile, "first-hour-4-partitions.png")

    # The expired partitions (the demo's cleanup kept the newest 3 snapshots: versions 6..8) are not shown
    # as plain materialized versions. [Depends on wt-sensors: expired partitions marked.]
    statuses = graphql(url, ASSET_STATE, {"path": iceberg})["assetNodeOrError"]["assetPartitionStatuses"]
    materialized = set(statuses["materializedPartitions"])
    assert {"6", "7", "8", "9"} <= materialized, statuses
    assert not materialized & {str(v) for v in range(6)}, statuses
