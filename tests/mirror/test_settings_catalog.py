"""The catalog property map: how flags, a configuration file, the environment and the defaults combine,
and what each engine receives (Iceberg Java through Spark's settings, pyiceberg through load_catalog).
Pure: no JVM, no server (those are `make test-integration`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dv_assets.mirror.settings import CatalogConfig, MirrorSettings, parse_property
from dv_assets.mirror.spark import spark_config


def test_the_default_is_the_embedded_sqlite_catalog(tmp_path: Path) -> None:
    settings = MirrorSettings.resolve(environ={}, cwd=tmp_path)
    assert settings.catalog.properties == {
        "type": "jdbc",
        "uri": f"jdbc:sqlite:{tmp_path / '.dvmirror' / 'catalog.db'}",
        "warehouse": str(tmp_path / ".dvmirror" / "warehouse"),
    }
    assert settings.catalog.pyiceberg_properties() == {
        "type": "sql",
        "uri": f"sqlite:///{tmp_path / '.dvmirror' / 'catalog.db'}",
        "warehouse": f"file://{tmp_path / '.dvmirror' / 'warehouse'}",
    }
    assert not settings.s3


def test_flags_override_the_file_and_the_file_reads_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "dvmirror.yaml"
    config.write_text(
        "catalog:\n  type: rest\n  uri: http://a:8181\n  credential: ${SECRET}\n"
        "  s3.path-style-access: true\n"
    )
    settings = MirrorSettings.resolve(
        config_file=config,
        catalog_properties=dict(
            [parse_property("uri=http://b:8181"), parse_property("warehouse=s3://bkt/wh/")]
        ),
        environ={"SECRET": "id:pw"},
        cwd=tmp_path,
    )
    assert settings.catalog.properties == {
        "credential": "id:pw",
        "s3.path-style-access": "true",
        "type": "rest",
        "uri": "http://b:8181",
        "warehouse": "s3://bkt/wh",  # a URI is never passed through Path (s3:/bkt/wh)
    }
    assert settings.s3  # the warehouse is on S3: Spark gets the S3 jars
    assert "id:pw" not in settings.catalog.describe()


def test_an_unset_variable_in_the_file_is_an_error(tmp_path: Path) -> None:
    config = tmp_path / "dvmirror.yaml"
    config.write_text("catalog:\n  type: rest\n  token: ${NOT_SET}\n")
    with pytest.raises(ValueError, match="NOT_SET is not set"):
        MirrorSettings.resolve(config_file=config, environ={}, cwd=tmp_path)


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ({"uri": "http://a"}, "need `type`"),
        ({"catalog_uri": "postgres://x"}, "sqlite:///"),
        ({"catalog_uri": "sqlite:///x.db", "catalog_properties": {"type": "rest"}}, "not both"),
    ],
)
def test_bad_catalog_settings_are_refused_with_a_reason(tmp_path: Path, given: dict, problem: str) -> None:
    kwargs = given if "catalog_uri" in given else {"catalog_properties": given}
    with pytest.raises(ValueError, match=problem):
        MirrorSettings.resolve(environ={}, cwd=tmp_path, **kwargs)
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_property("no-equals-sign")


def test_a_postgresql_jdbc_catalog_for_pyiceberg() -> None:
    catalog = CatalogConfig(
        {
            "type": "jdbc",
            "uri": "jdbc:postgresql://db:5432/iceberg",
            "jdbc.user": "ice",
            "jdbc.password": "p@ss:word",
            "warehouse": "/data/wh",
            "io-impl": "org.apache.iceberg.hadoop.HadoopFileIO",
        }
    )
    assert catalog.pyiceberg_properties() == {
        "type": "sql",
        "uri": "postgresql+psycopg2://ice:p%40ss%3Aword@db:5432/iceberg",
        "warehouse": "file:///data/wh",
    }
    assert "p@ss" not in catalog.describe()


def test_spark_gets_every_property_and_s3a_the_s3_ones(tmp_path: Path) -> None:
    (tmp_path / "s3").mkdir()
    for jar in ("dvmirror-jvm.jar", "iceberg.jar", "s3/hadoop-aws.jar"):
        (tmp_path / jar).write_bytes(b"")
    properties = {
        "type": "rest",
        "uri": "http://127.0.0.1:8181",
        "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        "s3.endpoint": "http://127.0.0.1:9000",
        "s3.path-style-access": "true",
        "client.region": "eu-west-1",
    }
    settings = MirrorSettings.resolve(
        catalog_properties=properties, jars_dir=tmp_path, environ={}, cwd=tmp_path
    )
    conf = spark_config(settings)
    for key, value in properties.items():
        assert conf[f"spark.sql.catalog.dvmirror.{key}"] == value
    assert conf["spark.sql.catalog.dvmirror.cache-enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    assert conf["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert str(tmp_path / "s3" / "hadoop-aws.jar") in conf["spark.jars"].split(",")
    # Without S3 the 700 MB of S3 jars stay out of the session.
    local = MirrorSettings.resolve(jars_dir=tmp_path, environ={}, cwd=tmp_path)
    assert "hadoop-aws" not in spark_config(local)["spark.jars"]
    assert "spark.hadoop.fs.s3a.endpoint" not in spark_config(local)
