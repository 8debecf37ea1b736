"""setuptools' build backend, refusing to build a wheel without the JVM helper jar it must ship.

The wheel carries `dv_assets/mirror/jars/dvmirror-jvm.jar` (package data, git-ignored), which Maven builds
from jvm/src: `make wheel` builds and copies it first. A wheel without it would install a `dvmirror` that
cannot start Spark anywhere but a checkout, so its build stops here, saying what to run. Editable installs
(`make setup`) and sdists need no jar.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 (every hook setuptools defines, unchanged)

HELPER_JAR = Path("dv_assets") / "mirror" / "jars" / "dvmirror-jvm.jar"


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, str | list[str]] | None = None,
    metadata_directory: str | None = None,
) -> str:
    if not HELPER_JAR.is_file():
        raise SystemExit(
            f"dv-mirror: no {HELPER_JAR} to ship in the wheel: build wheels with `make wheel` (it runs "
            "Maven, jvm/pom.xml, and copies the jar there)"
        )
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)
