"""Where the tests find the repository, the shared fixtures and the installed CLI."""

from __future__ import annotations

import json
from pathlib import Path

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
DVMIRROR = REPO_ROOT / ".venv" / "bin" / "dvmirror"


def expected_rows(table: str, version: int) -> list[dict]:
    """Rows delta-rs computed for a fixture version (the fixtures' own oracle), canonical and sorted."""
    lines = (EXPECTED / table / f"v{version}.jsonl").read_text().splitlines()
    return sorted_rows([json.loads(line) for line in lines if line.strip()])
