"""The jars an earlier Ivy resolution gave are remembered only to start faster: `spark.resolved_jars`
uses the record when it is whole (every jar a file of the Ivy cache, of the size recorded, and one for
every package asked for) and otherwise resolves again. A damaged record never fails a run."""

from __future__ import annotations

from pathlib import Path

import pytest

from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from dv_assets.mirror.spark import SPARK_PACKAGES, _classpath_record, resolved_jars


@pytest.fixture
def remembered(tmp_path: Path) -> tuple[MirrorSettings, list[str]]:
    """Settings whose Ivy folder holds a jar for every package (and one dependency) and their record."""
    settings = MirrorSettings(
        catalog=CatalogConfig.under(tmp_path / "iceberg"),
        jars_dir=None,
        spark_packages=True,
        ivy_dir=tmp_path,
    )
    (tmp_path / "jars").mkdir()
    jars = []
    for number, package in enumerate([*SPARK_PACKAGES, "org.example:dependency:1.0"]):
        group, artifact, version = package.split(":")
        jar = tmp_path / "jars" / f"{group}_{artifact}-{version}.jar"
        jar.write_bytes(b"PK" * (number + 1))
        jars.append(str(jar))
    _classpath_record(settings).write_text("".join(f"{Path(j).stat().st_size}\t{j}\n" for j in jars))
    return settings, jars


def test_a_whole_record_is_used(remembered) -> None:
    settings, jars = remembered
    assert resolved_jars(settings) == jars


@pytest.mark.parametrize(
    "damage",
    [
        "a package's jar left out",
        "a jar of another size",
        "a jar gone",
        "a jar outside the cache",
        "a line without a size",
        "bytes that are not UTF-8",
        "empty",
    ],
)
def test_a_damaged_record_is_not_used(remembered, tmp_path: Path, damage: str) -> None:
    settings, jars = remembered
    record = _classpath_record(settings)
    lines = record.read_text().splitlines()
    if damage == "a package's jar left out":
        record.write_text("\n".join(lines[1:]) + "\n")
    elif damage == "a jar of another size":
        Path(jars[0]).write_bytes(b"PK" * 100)
    elif damage == "a jar gone":
        Path(jars[-1]).unlink()
    elif damage == "a jar outside the cache":
        outside = tmp_path / "elsewhere.jar"
        outside.write_bytes(b"PK")
        dotted = f"{tmp_path}/jars/../elsewhere.jar"
        record.write_text("\n".join([*lines, f"2\t{dotted}"]) + "\n")
    elif damage == "a line without a size":
        record.write_text("\n".join([*lines, jars[0]]) + "\n")
    elif damage == "bytes that are not UTF-8":
        record.write_bytes(record.read_bytes() + b"\xff\xfe\n")
    else:
        record.write_text("")
    assert resolved_jars(settings) is None
