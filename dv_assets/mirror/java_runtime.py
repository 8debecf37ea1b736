"""The Java Spark needs, found as pyspark's launcher finds it (`$JAVA_HOME/bin/java`, else `java` on the
PATH) and checked before any Spark start: a missing or too old Java is one line saying what is needed
(`SparkSetupError`, exit 2), not a Spark launcher's error in a log."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from dv_assets.mirror.errors import SparkSetupError

MIN_JAVA = 17  # Spark 4.1 runs on Java 17 and 21
NEEDED = f"Spark needs Java {MIN_JAVA} or newer"
_RELEASE_VERSION = re.compile(r'^JAVA_VERSION="([^"]+)"', re.MULTILINE)
_VERSION_OUTPUT = re.compile(r'version "([^"]+)"')


def java_major(version: str) -> int | None:
    """The feature release of a Java version string: `17.0.15` → 17, `21` → 21, `1.8.0_292` → 8."""
    match = re.match(r"(\d+)(?:\.(\d+))?", version)
    if match is None:
        return None
    major = int(match[1])
    return int(match[2] or 0) if major == 1 else major


def java_executable(environ: Mapping[str, str] | None = None) -> Path:
    """The `java` Spark's launcher would run; SparkSetupError when there is none."""
    env = os.environ if environ is None else environ
    home = env.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        if not (java.is_file() and os.access(java, os.X_OK)):
            raise SparkSetupError(
                f"{NEEDED}: JAVA_HOME={home} has no bin/java (point JAVA_HOME at a JDK or JRE {MIN_JAVA}+, "
                "or unset it to use the java on the PATH)"
            )
        return java
    found = shutil.which("java", path=env.get("PATH", os.defpath))
    if found is None:
        raise SparkSetupError(
            f"{NEEDED}: no `java` on the PATH and JAVA_HOME is not set (install one, e.g. "
            f"`apt-get install openjdk-{MIN_JAVA}-jre-headless`, or set JAVA_HOME)"
        )
    return Path(found)


def java_version(java: Path) -> str | None:
    """The version of `java`: from the `release` file of its installation (no process), else from
    `java -version`; None when neither says."""
    release = java.resolve().parent.parent / "release"
    try:
        match = _RELEASE_VERSION.search(release.read_text(errors="replace"))
    except OSError:
        match = None
    if match:
        return match[1]
    try:
        done = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = _VERSION_OUTPUT.search(done.stderr + done.stdout)
    return match[1] if match else None


def check_java(environ: Mapping[str, str] | None = None) -> Path:
    """The usable `java` (version >= MIN_JAVA), or SparkSetupError saying what is needed."""
    java = java_executable(environ)
    version = java_version(java)
    major = None if version is None else java_major(version)
    if major is None:
        raise SparkSetupError(f"{NEEDED}: {java} does not run or does not say its version (`java -version`)")
    if major < MIN_JAVA:
        raise SparkSetupError(
            f"{NEEDED}: {java} is Java {version} (install Java {MIN_JAVA}+ and put it on the PATH or in "
            "JAVA_HOME)"
        )
    return java
