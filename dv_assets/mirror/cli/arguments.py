"""What every `dvmirror` subcommand that reaches a catalog shares, declared once: the catalog flags and the
settings they resolve to, and the checks made before any JVM starts (the catalog answers, the Delta path
is a table, the mirror's position as pyiceberg reads it, Java and the jars)."""

from __future__ import annotations

import argparse
import logging
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table
from dv_assets.mirror.identity import mirror_position
from dv_assets.mirror.settings import CatalogConfig, MirrorSettings, parse_property
from dv_assets.mirror.vacuum import vacuum_pending


def documented_subcommand(
    commands: argparse._SubParsersAction, name: str, *, help: str, doc: str
) -> argparse.ArgumentParser:
    """A subcommand whose `--help` is its module's docstring: the first paragraph before the options,
    the rest after them."""
    first, *rest = doc.split("\n\n")
    return commands.add_parser(
        name,
        help=help,
        description=first,
        epilog="\n\n".join(rest),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def mirror_subcommand(
    commands: argparse._SubParsersAction, name: str, *, help: str, doc: str
) -> argparse.ArgumentParser:
    """A subcommand of one mirror (verify, expire, drop): `documented_subcommand`, the mirror's Iceberg
    table its first argument."""
    parser = documented_subcommand(commands, name, help=help, doc=doc)
    parser.add_argument("table", help="the mirror's Iceberg table, NAMESPACE.NAME")
    return parser


def add_catalog_arguments(parser: argparse.ArgumentParser) -> None:
    """--catalog-uri, --catalog-property, --config, --warehouse: resolved by `MirrorSettings.resolve`."""
    parser.add_argument(
        "--catalog-uri",
        help="sqlite:///PATH/catalog.db (default: ./.dvmirror/catalog.db, created by the first sync)",
    )
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
        "--warehouse",
        help="Iceberg warehouse folder or URI (default: ./.dvmirror/warehouse, created by the first sync)",
    )


def settings_from(
    args: argparse.Namespace,
    delta_location: str | None = None,
    file_catalog: Mapping[str, str] | None = None,
) -> MirrorSettings:
    """The settings the catalog flags name (ValueError: bad flags, a bad --config file); the S3, GCS or
    Azure jars when the Delta table is there. `file_catalog`: a tables file's `catalog:`, the file the
    flags go over (instead of --config's)."""
    settings = MirrorSettings.resolve(
        catalog_uri=args.catalog_uri,
        catalog_properties=dict(parse_property(p) for p in args.catalog_property),
        file_catalog=file_catalog,
        config_file=args.config,
        warehouse=args.warehouse,
    )
    return settings.for_location(delta_location or "")


def not_a_local_delta_table(location: str) -> str | None:
    """Why a local Delta table location cannot be one, answered before any JVM (None: it may be; a URI
    is left to the sync)."""
    if "://" in location:
        return None
    if not Path(location).exists():
        return f"table {location}: no such path"
    if not (Path(location) / "_delta_log").is_dir():
        return f"table {location}: no _delta_log folder: not a Delta table"
    return None


class Position(NamedTuple):
    format_version: int  # the mirror's
    last_mirrored: int | None  # the Delta version the mirror shows (None: none yet)
    start: int  # the first version to mirror (> target: nothing to do)
    snapshot_times_ms: tuple[int, ...] = ()  # its snapshots' (whether any is past retention)


def position_without_jvm(
    settings: MirrorSettings,
    delta: DeltaTable,
    table_name: str,
    format_version: int | None,
    latest: int,
    target: int,
) -> Position | None:
    """Where an existing mirror stands, read without a JVM (pyiceberg and the Delta log) through the
    checks a sync itself makes (`mirror_position`: the same refusals, MirrorInputError); None when Spark
    is needed to tell: no mirror yet, or a catalog pyiceberg cannot read."""
    if not settings.catalog.pyiceberg_reads():
        return None
    # Its sqlite catalog logs a warning on a catalog Iceberg Java created: stderr holds one line.
    logging.getLogger("pyiceberg").setLevel(logging.ERROR)
    table = read_mirror_table(settings.catalog, table_name)
    if table is None:
        return None
    last_mirrored, start = mirror_position(delta, table, format_version, latest, target)
    if start > target and vacuum_pending(delta, table, target, latest):
        return None  # up to date, but a Delta VACUUM to follow: Iceberg Java expires (sync.py)
    return Position(
        table.format_version, last_mirrored, start, tuple(s.timestamp_ms for s in table.snapshots)
    )


# Long enough for a catalog across a slow network, short enough that a typo answers before a JVM would.
CATALOG_CONNECT_TIMEOUT_S = 10.0


def check_catalog_reachable(catalog: CatalogConfig, timeout: float = CATALOG_CONNECT_TIMEOUT_S) -> None:
    """A catalog server that does not accept a connection is bad input (MirrorInputError naming the
    catalog and its property), answered in at most `timeout` seconds instead of by a JVM's retries."""
    endpoint = catalog.endpoint
    if endpoint is None:
        return
    prop, host, port = endpoint
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as err:
        reason = "no answer" if isinstance(err, TimeoutError) else (err.strerror or type(err).__name__)
        raise MirrorInputError(
            f"the catalog cannot be reached: {catalog.describe()}: property {prop} names {host}:{port}: "
            f"{reason}"
        ) from None


def check_spark_can_start(settings: MirrorSettings) -> None:
    """SparkSetupError (a MirrorInputError: exit 2, one line) when Spark cannot start here: Java and the
    jars, checked before Spark's log or the catalog's folders exist. Imports pyspark only when called, so
    that `--help` and the paths without a JVM stay fast."""
    from dv_assets.mirror.spark import check_spark_can_start as check

    check(settings)
