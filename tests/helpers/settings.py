"""Environments that must not reach explicitly configured settings (tests/dagster/test_resource.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


def leaky_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DVMIRROR_CONFIG and DVMIRROR_WAREHOUSE naming another catalog, with S3 keys."""
    config = tmp_path / "leaky.yaml"
    config.write_text(
        "catalog:\n  type: rest\n  uri: http://leaked:8181\n  s3.endpoint: http://leaked:9000\n"
        "  s3.access-key-id: leaked\n"
    )
    monkeypatch.setenv("DVMIRROR_CONFIG", str(config))
    monkeypatch.setenv("DVMIRROR_WAREHOUSE", str(tmp_path / "leaked-warehouse"))
