"""Where the tests find the repository, the shared fixtures and the installed CLI, and what the fixtures
(and the lock) say: the fixture tables, their versions and expected rows, the pinned versions."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from packaging.utils import canonicalize_name

from tests.helpers.rows import sorted_rows

REPO_ROOT = Path(__file__).resolve().parents[2]


def _shared(repo: Path) -> Path:
    """The shared fixtures' folder `shared/`, next to the repository; in a git worktree (`.git` is a
    file naming the main repository's git directory) it may instead be next to the main checkout."""
    beside = repo.parent / "shared"
    git = repo / ".git"
    if beside.is_dir() or not git.is_file():
        return beside
    gitdir = Path(git.read_text().split(":", 1)[1].strip())
    commondir = gitdir / "commondir"
    common = (gitdir / commondir.read_text().strip()).resolve() if commondir.is_file() else gitdir
    return common.parent.parent / "shared"


SHARED = _shared(REPO_ROOT)
FIXTURES = SHARED / "fixtures"
DELTA_FIXTURES = FIXTURES / "delta"
EXPECTED = FIXTURES / "expected"
ICEBERG_DV_BLOBS = FIXTURES / "iceberg-dv-blobs"
# The CLI installed in the environment running the tests (`.venv/bin/dvmirror` under `make test`).
DVMIRROR = Path(sys.executable).parent / "dvmirror"


def expected_rows(table: str, version: int) -> list[dict]:
    """Rows delta-rs computed for a fixture version (the fixtures' own oracle), canonical and sorted."""
    lines = (EXPECTED / table / f"v{version}.jsonl").read_text().splitlines()
    return sorted_rows([json.loads(line) for line in lines if line.strip()])


def all_expected_rows(table: str) -> dict[int, list[dict]]:
    """`expected_rows` of every version the fixture has rows for (v0.jsonl, v1.jsonl, …)."""
    versions = len(list((EXPECTED / table).glob("v*.jsonl")))
    return {v: expected_rows(table, v) for v in range(versions)}


def fixture_tables() -> list[str]:
    """The Delta fixture tables, by name."""
    return sorted(p.name for p in DELTA_FIXTURES.iterdir() if (p / "_delta_log").is_dir())


def _summary(table: str) -> dict[str, dict]:
    return json.loads((EXPECTED / table / "summary.json").read_text())


def fixture_versions() -> list[tuple[str, int]]:
    """(table, version) for every version of every fixture table the fixtures' summaries list."""
    return [(table, int(v)) for table in fixture_tables() for v in _summary(table)]


def expected_versions(table: str) -> list[int]:
    """The versions of a fixture table that have expected rows (delta-rs could read them)."""
    return sorted(int(v) for v, facts in _summary(table).items() if facts.get("rows") is not None)


def conformance_table(table: str, format_version: int) -> str:
    """The Iceberg table the conformance tests mirror a fixture table to."""
    return f"conformance_v{format_version}.{table.replace('-', '_')}"


def locked_versions() -> dict[str, list[str]]:
    """Package name -> the versions requirements.lock pins (one per environment-marker branch)."""
    pins: dict[str, list[str]] = {}
    for line in (REPO_ROOT / "requirements.lock").read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line)
        if match:
            pins.setdefault(canonicalize_name(match[1]), []).append(match[2])
    return pins
