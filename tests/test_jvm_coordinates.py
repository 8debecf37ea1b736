"""`dv_assets/mirror/spark.py`'s Maven coordinates (used with DVMIRROR_SPARK_PACKAGES=1) are the
dependencies `make jars` / `make jars-s3` build from jvm/pom.xml and jvm/s3/pom.xml: one set of jars
whichever way Spark gets them."""

from __future__ import annotations

from dv_assets.mirror.spark import S3_PACKAGES, SPARK_PACKAGES
from tests.helpers.maven import pom_dependencies
from tests.helpers.paths import REPO_ROOT


def test_spark_packages_are_the_pom_dependencies() -> None:
    assert sorted(SPARK_PACKAGES) == pom_dependencies(REPO_ROOT / "jvm" / "pom.xml")


def test_s3_packages_are_the_s3_pom_dependencies() -> None:
    assert sorted(S3_PACKAGES) == pom_dependencies(REPO_ROOT / "jvm" / "s3" / "pom.xml")
