"""The private Iceberg members a first version's manifests rely on (`dev.dvmirror.IcebergInternals`,
the one place the JVM helper reaches into Iceberg) are where the adapter expects them in the Iceberg
the jars hold; an Iceberg that moved them fails, naming each member and the Iceberg version.

Through `java` on the classpath Spark gets (the session's jars and pyspark's), not a Spark session:
the check is the adapter's own, run as the mirror's catalog runs it at start-up."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pyspark
import pytest

from tests.helpers.maven import pom_dependencies
from tests.helpers.paths import REPO_ROOT
from tests.helpers.processes import jars_dir

ADAPTER = "dev.dvmirror.IcebergInternals"
MEMBERS = ("appendManifests", "addedDataFilesSummary")
JAVA = shutil.which("java")
JAVAC = shutil.which("javac")

pytestmark = pytest.mark.skipif(JAVA is None, reason="needs java (the JVM helper's runtime)")


def pinned_iceberg_version() -> str:
    [coordinate] = [
        c for c in pom_dependencies(REPO_ROOT / "jvm" / "pom.xml") if c.startswith("org.apache.iceberg:")
    ]
    return coordinate.rsplit(":", 1)[1]


def run_check(*first_on_classpath: Path) -> subprocess.CompletedProcess:
    pyspark_jars = Path(pyspark.__file__).parent / "jars"
    classpath = [*map(str, first_on_classpath), f"{jars_dir()}/*", f"{pyspark_jars}/*"]
    assert JAVA is not None
    return subprocess.run(
        [JAVA, "-cp", ":".join(classpath), ADAPTER], capture_output=True, text=True, timeout=120
    )


def test_the_members_are_where_the_adapter_expects_them() -> None:
    result = run_check()
    if result.returncode != 0:
        pytest.fail(
            f"{ADAPTER} failed its check against the jars in {jars_dir()}: Iceberg moved the private "
            f"members dv-mirror's first-version manifests rely on:\n{result.stderr}"
        )
    version = pinned_iceberg_version()
    assert result.stdout.strip() == (
        f"Iceberg {version}: MergingSnapshotProducer.appendManifests (java.util.List), "
        "MergingSnapshotProducer.addedDataFilesSummary (org.apache.iceberg.SnapshotSummary$Builder)"
    )


@pytest.mark.skipif(JAVAC is None, reason="needs javac to build an Iceberg without the members")
def test_an_iceberg_that_moved_them_fails_naming_each_and_the_version(tmp_path: Path) -> None:
    """A `MergingSnapshotProducer` without the members, first on the classpath, stands for an Iceberg
    upgrade that moved them."""
    source = tmp_path / "src" / "org" / "apache" / "iceberg" / "MergingSnapshotProducer.java"
    source.parent.mkdir(parents=True)
    source.write_text(
        "package org.apache.iceberg;\n"
        "abstract class MergingSnapshotProducer {\n"
        "  private final java.util.List<ManifestFile> manifestsToAppend = null;\n"
        "  private static final Object addedDataFilesSummary = null;\n"
        "}\n"
    )
    classes = tmp_path / "classes"
    assert JAVAC is not None
    subprocess.run(
        [JAVAC, "-d", str(classes), "-cp", f"{jars_dir()}/*", str(source)], check=True, timeout=120
    )
    result = run_check(classes)
    assert result.returncode != 0 and result.stdout == ""
    message = result.stderr
    assert f"Iceberg {pinned_iceberg_version()} moved the private members" in message
    assert "no field MergingSnapshotProducer.appendManifests" in message
    assert "MergingSnapshotProducer.addedDataFilesSummary is a java.lang.Object" in message
    assert "IcebergInternals.java" in message
