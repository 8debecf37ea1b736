"""The Maven coordinates the package ships (dv_assets/mirror/maven.json: what Spark resolves through Ivy
when there is no jars folder) are jvm/pom.xml's and jvm/{s3,gcs,azure}/pom.xml's: one set of jars
whichever way Spark gets them (tests/cli/test_install.py compares the jars Ivy resolved with those Maven
copied)."""

from __future__ import annotations

import json

from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from dv_assets.mirror.spark import (
    AZURE_PACKAGES,
    EXCLUDED_GROUPS,
    GCS_PACKAGES,
    S3_PACKAGES,
    SPARK_PACKAGES,
    spark_config,
)
from tests.helpers.maven import coordinates_file, pom_dependencies
from tests.helpers.paths import REPO_ROOT


def test_the_coordinates_file_is_generated_from_the_poms() -> None:
    shipped = json.loads((REPO_ROOT / "dv_assets" / "mirror" / "maven.json").read_text())
    assert shipped == coordinates_file(), (
        "run `make coordinates` after changing jvm/pom.xml or jvm/{s3,gcs,azure}/pom.xml"
    )


def test_spark_packages_are_the_pom_dependencies() -> None:
    assert set(pom_dependencies(REPO_ROOT / "jvm" / "pom.xml")) <= set(SPARK_PACKAGES)
    assert sorted(S3_PACKAGES) == pom_dependencies(REPO_ROOT / "jvm" / "s3" / "pom.xml")
    assert sorted(GCS_PACKAGES) == pom_dependencies(REPO_ROOT / "jvm" / "gcs" / "pom.xml")
    assert sorted(AZURE_PACKAGES) == pom_dependencies(REPO_ROOT / "jvm" / "azure" / "pom.xml")
    assert "org.apache.hadoop" in EXCLUDED_GROUPS  # pyspark's own


def test_without_a_jars_folder_spark_resolves_the_coordinates(tmp_path) -> None:
    settings = MirrorSettings.resolve(
        catalog=CatalogConfig.under(tmp_path), environ={"DVMIRROR_IVY": str(tmp_path / "ivy")}, cwd=tmp_path
    )
    assert settings.jars_dir is None and settings.spark_packages
    conf = spark_config(settings)
    assert conf["spark.jars.packages"].split(",") == list(SPARK_PACKAGES)
    assert conf["spark.jars"].endswith("/dv_assets/mirror/jars/dvmirror-jvm.jar")
    assert conf["spark.jars.ivy"] == str(tmp_path / "ivy")
    assert "org.apache.hadoop:*" in conf["spark.jars.excludes"].split(",")
    # S3 asks for hadoop-aws: its group is then not excluded.
    s3 = MirrorSettings.resolve(catalog=CatalogConfig.under(tmp_path), s3=True, environ={}, cwd=tmp_path)
    assert "org.apache.hadoop:*" not in spark_config(s3)["spark.jars.excludes"].split(",")
    # A gs:// Delta table asks for the GCS coordinates, an abfs:// one for Azure's, each only then.
    # Its own Ivy folder: a remembered classpath in the user's cache (any earlier run's) replaces packages.
    ivy = {"DVMIRROR_IVY": str(tmp_path / "ivy")}
    plain = MirrorSettings.resolve(catalog=CatalogConfig.under(tmp_path), environ=ivy, cwd=tmp_path)
    for location, wanted, unwanted in (
        ("gs://b/t", GCS_PACKAGES, AZURE_PACKAGES),
        ("abfs://c@a.dfs.core.windows.net/t", AZURE_PACKAGES, GCS_PACKAGES),
    ):
        packages = set(spark_config(plain.for_location(location))["spark.jars.packages"].split(","))
        assert set(wanted) <= packages and not set(unwanted) & packages, (location, packages)
    assert spark_config(plain)["spark.jars.packages"].split(",") == list(SPARK_PACKAGES)
    # A checkout's ./.jars, when `make jars` filled it, is the jars folder.
    (tmp_path / ".jars").mkdir()
    (tmp_path / ".jars" / "dvmirror-jvm.jar").write_bytes(b"")
    local = MirrorSettings.resolve(catalog=CatalogConfig.under(tmp_path), environ={}, cwd=tmp_path)
    assert local.jars_dir == (tmp_path / ".jars").resolve() and not local.spark_packages
