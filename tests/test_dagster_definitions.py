"""The code location loads through workspace.yaml (in a subprocess, as `dagster dev` would) and the
sources file is the one documented place tables are configured."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dv_assets.defs.sources import load_sources
from dv_assets.mirror.settings import MirrorSettings

REPO = Path(__file__).resolve().parent.parent


def test_definitions_validate_through_workspace_yaml(tmp_path) -> None:
    sources = tmp_path / "sources.yaml"
    sources.write_text(
        "sources:\n"
        "  - {name: alpha, delta_path: alpha, iceberg_table: ns.alpha}\n"
        "  - {name: beta, delta_path: /data/beta, iceberg_table: ns.beta, format_version: 2,\n"
        "     retention: {retain_last: 2, max_snapshot_age_hours: 24}}\n"
    )
    env = {**os.environ, "DVMIRROR_SOURCES": str(sources), "DAGSTER_HOME": str(tmp_path)}
    dagster = Path(sys.executable).parent / "dagster"
    done = subprocess.run(
        [str(dagster), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    listed = subprocess.run(
        [
            sys.executable,
            "-c",
            "from dv_assets.definitions import defs; r = defs.get_repository_def();"
            "print(sorted(j.name for j in r.get_all_jobs() if not j.name.startswith('__')));"
            "print(sorted(s.name for s in r.sensor_defs));"
            "print(sorted(k.to_user_string() for k in r.asset_graph.get_all_asset_keys()))",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert listed.returncode == 0, listed.stderr
    jobs, sensors, assets = listed.stdout.strip().splitlines()
    assert jobs == str(["checks_alpha", "checks_beta", "cleanup", "mirror_alpha", "mirror_beta"])
    assert sensors == str(["compacted_deletes_sensor", "delta_version_sensor"])
    assert assets == str(["delta/alpha", "delta/beta", "iceberg/alpha", "iceberg/beta"])


def test_workspace_and_dagster_cloud_yaml_name_the_same_code_location() -> None:
    workspace = yaml.safe_load((REPO / "workspace.yaml").read_text())
    cloud = yaml.safe_load((REPO / "dagster_cloud.yaml").read_text())
    (entry,) = workspace["load_from"]
    (location,) = cloud["locations"]
    assert entry["python_module"]["module_name"] == location["code_source"]["module_name"]
    assert entry["python_module"]["location_name"] == location["location_name"] == "dv_mirror"


def test_sources_file_resolution_and_validation(tmp_path, monkeypatch) -> None:
    (tmp_path / "sources.yaml").write_text(
        "sources:\n  - {name: a, delta_path: sub/t, iceberg_table: ns.a}\n"
    )
    monkeypatch.setenv("DVMIRROR_SOURCES", str(tmp_path / "sources.yaml"))
    (source,) = load_sources()
    assert source.delta_path == str(tmp_path / "sub" / "t")
    assert (source.format_version, source.retention.retain_last) == (3, 10)

    bad = tmp_path / "bad.yaml"
    bad.write_text("sources:\n  - {name: a, delta_path: t, iceberg_table: nonamespace}\n")
    with pytest.raises(ValueError, match=r"NAMESPACE\.NAME"):
        load_sources(bad)
    bad.write_text("sources:\n  - {name: a, delta_path: t, iceberg_table: n.a, format_version: 4}\n")
    with pytest.raises(ValueError, match="format_version"):
        load_sources(bad)

    # The repository's own sources.yaml holds the demo's table; the catalog defaults under .dvmirror/.
    monkeypatch.delenv("DVMIRROR_SOURCES")
    monkeypatch.delenv("DVMIRROR_CATALOG_URI", raising=False)
    assert [s.name for s in load_sources()] == ["demo_events"]
    assert MirrorSettings.resolve().catalog.sqlite_path == REPO / ".dvmirror" / "catalog.db"
