"""Shared pytest fixtures (helpers live in tests/helpers). Spark starts once per test session, with one
Iceberg catalog for all tests; every test that uses it carries the `spark` marker."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from dv_assets.mirror.spark import get_or_create_spark
from tests.helpers.paths import DELTA_FIXTURES, REPO_ROOT
from tests.helpers.readers import let_pyiceberg_read_int96


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that uses the `spark` fixture (itself or through another fixture) starts the JVM: it is
    marked `spark`, so that `make test-unit` (-m "not spark ...") leaves it out. Every test of a
    tests/cli/ module is marked `cli` (`make test-cli`)."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
        if item.path.parent.name == "cli" and item.path.parent.parent.name == "tests":
            item.add_marker(pytest.mark.cli)


@pytest.fixture(scope="session", autouse=True)
def pyiceberg_int96() -> None:
    """pyiceberg reads Delta Spark's INT96 timestamps in every test (tests/helpers/readers.py)."""
    let_pyiceberg_read_int96()


@pytest.fixture(scope="session")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> CatalogConfig:
    return CatalogConfig.under(tmp_path_factory.mktemp("iceberg"))


@pytest.fixture(scope="session")
def spark(catalog: CatalogConfig) -> Iterator:
    session = get_or_create_spark(MirrorSettings.resolve(catalog=catalog, cwd=REPO_ROOT))
    yield session
    session.stop()


@pytest.fixture
def copy_fixture(tmp_path: Path):
    """Copy a read-only fixture table to a writable temporary directory (under `dest_name`, default its
    own name) and return its path."""

    def _copy(name: str, dest_name: str | None = None) -> Path:
        dest = tmp_path / (dest_name or name)
        shutil.copytree(DELTA_FIXTURES / name, dest)
        for p in dest.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        dest.chmod(0o755)
        return dest

    return _copy
