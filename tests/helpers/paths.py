"""Where the tests find the repository, the shared fixtures and the installed CLI."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.rows import sorted_rows

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED = REPO_ROOT.parent / "shared"
FIXTURES = SHARED / "fixtures"
DELTA_FIXTURES = FIXTURES / "delta"
EXPECTED = FIXTURES / "expected"
ICEBERG_DV_BLOBS = FIXTURES / "iceberg-dv-blobs"
DVMIRROR = REPO_ROOT / ".venv" / "bin" / "dvmirror"


def expected_rows(table: str, version: int) -> list[dict]:
    """Rows delta-rs computed for a fixture version (the fixtures' own oracle), canonical and sorted."""
    lines = (EXPECTED / table / f"v{version}.jsonl").read_text().splitlines()
    return sorted_rows([json.loads(line) for line in lines if line.strip()])
