"""The driver JVM's class-data-sharing archive (`class_archive.py`): mapped only when complete, never a
reason for a JVM not to start, and mapped by the suite's own sessions (`make setup` writes it)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from dv_assets.mirror.spark import CDS_QUIET, CLASS_ARCHIVE, CLASS_ARCHIVE_RECORD, class_archive_options
from tests.helpers.paths import REPO_ROOT


def settings_with_jars(folder: Path) -> MirrorSettings:
    return MirrorSettings.resolve(catalog=CatalogConfig.under(folder / "iceberg"), jars_dir=folder)


def test_only_a_complete_archive_is_mapped(tmp_path: Path) -> None:
    settings = settings_with_jars(tmp_path)
    assert class_archive_options(settings) == ""  # none written
    (tmp_path / CLASS_ARCHIVE).write_bytes(b"x" * 100)
    assert class_archive_options(settings) == ""  # no record: still being written, or replaced
    (tmp_path / CLASS_ARCHIVE_RECORD).write_text(json.dumps({"bytes": 101}))
    assert class_archive_options(settings) == ""  # not the size recorded: truncated
    (tmp_path / CLASS_ARCHIVE_RECORD).write_text("not json")
    assert class_archive_options(settings) == ""
    (tmp_path / CLASS_ARCHIVE_RECORD).write_text(json.dumps({"bytes": 100}))
    assert class_archive_options(settings) == f" -XX:SharedArchiveFile={tmp_path / CLASS_ARCHIVE} {CDS_QUIET}"


@pytest.mark.spark  # a JVM: not part of `make test-unit`
def test_an_archive_the_jvm_cannot_use_is_ignored_silently(tmp_path: Path) -> None:
    """Another Java's archive, or bytes that are none: the JVM starts as without it, and says nothing
    (a CLI's stdout is its own). A truncated one would crash it: hence the recorded size."""
    junk = tmp_path / CLASS_ARCHIVE
    junk.write_bytes(bytes(range(256)) * 64)
    done = subprocess.run(
        ["java", f"-XX:SharedArchiveFile={junk}", *CDS_QUIET.split(), "-version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "cds" not in done.stderr.lower() and "archive" not in done.stderr.lower(), done.stderr


@pytest.mark.spark
def test_the_suites_sessions_map_the_setup_archive(spark) -> None:
    settings = MirrorSettings.resolve(cwd=REPO_ROOT)
    options = class_archive_options(settings)
    assert options, f"`make setup` wrote no complete {CLASS_ARCHIVE} into {settings.jars_dir}"
    jvm = spark.sparkContext._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert options.split()[0] in arguments
