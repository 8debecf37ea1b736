"""The flags every `dvmirror` subcommand that reaches a catalog shares, declared once."""

from __future__ import annotations

import argparse


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
