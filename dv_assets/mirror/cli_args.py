"""The flags every `dvmirror` subcommand that reaches a catalog shares, declared once."""

from __future__ import annotations

import argparse

from dv_assets.mirror.settings import MirrorSettings, parse_property

S3_SCHEMES = ("s3://", "s3a://", "s3n://")


def add_catalog_arguments(parser: argparse.ArgumentParser) -> None:
    """--catalog-uri, --catalog-property, --config, --warehouse: resolved by `MirrorSettings.resolve`."""
    parser.add_argument("--catalog-uri", help="sqlite:///PATH/catalog.db (default: ./.dvmirror/catalog.db)")
    parser.add_argument(
        "--catalog-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an Iceberg catalog property (type, catalog-impl, uri, warehouse, io-impl, s3.endpoint, …); "
        "repeatable",
    )
    parser.add_argument("--config", help="YAML file with a `catalog:` map of catalog properties")
    parser.add_argument(
        "--warehouse", help="Iceberg warehouse folder or URI (default: ./.dvmirror/warehouse)"
    )


def settings_from(args: argparse.Namespace, delta_location: str | None = None) -> MirrorSettings:
    """The settings the catalog flags name (ValueError: bad flags); S3 jars when the Delta table is on S3."""
    return MirrorSettings.resolve(
        catalog_uri=args.catalog_uri,
        catalog_properties=dict(parse_property(p) for p in args.catalog_property),
        config_file=args.config,
        warehouse=args.warehouse,
        s3=(delta_location or "").startswith(S3_SCHEMES),
    )


def pyiceberg_reads(settings: MirrorSettings) -> bool:
    """Whether pyiceberg has a counterpart of the catalog's kind (it reads the table without a JVM)."""
    try:
        settings.catalog.pyiceberg_properties()
    except ValueError:
        return False
    return True


def internal_error_line(err: Exception, spark_log: str | None) -> str:
    """An unexpected error as one line, naming Spark's log when there is one."""
    line = f"internal error: {type(err).__name__}: {str(err).splitlines()[0][:500]}"
    return line if spark_log is None else f"{line} (Spark's log: {spark_log})"
