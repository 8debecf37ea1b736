"""Shared test fixtures. Spark starts once per test session, with one Iceberg catalog for all tests."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from resources.spark import CatalogLocation, get_or_create_spark

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = REPO_ROOT.parent / "shared"
FIXTURES = SHARED / "fixtures"
DELTA_FIXTURES = FIXTURES / "delta"
EXPECTED = FIXTURES / "expected"
ICEBERG_DV_BLOBS = FIXTURES / "iceberg-dv-blobs"


def expected_rows(table: str, version: int) -> list[dict]:
    """Rows delta-rs computed for a fixture version (the fixtures' own oracle), sorted canonically."""
    lines = (EXPECTED / table / f"v{version}.jsonl").read_text().splitlines()
    return sorted((json.loads(line) for line in lines if line.strip()), key=canonical)


def canonical(row: dict) -> str:
    return json.dumps(row, sort_keys=True, default=str)


@pytest.fixture(scope="session")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> CatalogLocation:
    return CatalogLocation.under(tmp_path_factory.mktemp("iceberg"))


@pytest.fixture(scope="session")
def spark(catalog: CatalogLocation) -> Iterator:
    session = get_or_create_spark(catalog)
    yield session
    session.stop()


@pytest.fixture
def copy_fixture(tmp_path: Path):
    """Copy a read-only fixture table to a writable temporary directory and return its path."""

    def _copy(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(DELTA_FIXTURES / name, dest)
        for p in dest.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        dest.chmod(0o755)
        return dest

    return _copy
