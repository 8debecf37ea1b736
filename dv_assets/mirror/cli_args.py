"""The flags every `dvmirror` subcommand that reaches a catalog shares, declared once."""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table
from dv_assets.mirror.identity import mirror_position
from dv_assets.mirror.settings import CatalogConfig, MirrorSettings, parse_property

S3_SCHEMES = ("s3://", "s3a://", "s3n://")


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


def kept_log(spark_log: str | None) -> str | None:
    """Spark's log when it holds something; an empty one (nothing started, or it said nothing) is
    removed and never named as the place to look."""
    if spark_log is None:
        return None
    try:
        if os.path.getsize(spark_log) > 0:
            return spark_log
    except OSError:
        return None
    os.unlink(spark_log)
    return None


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
    if not pyiceberg_reads(settings):
        return None
    # Its sqlite catalog logs a warning on a catalog Iceberg Java created: stderr holds one line.
    logging.getLogger("pyiceberg").setLevel(logging.ERROR)
    table = read_mirror_table(settings.catalog, table_name)
    if table is None:
        return None
    last_mirrored, start = mirror_position(delta, table, format_version, latest, target)
    return Position(table.format_version, last_mirrored, start)


def internal_error_line(err: Exception, spark_log: str | None) -> str:
    """An unexpected error as one line, naming Spark's log when there is one and it is not empty."""
    line = f"internal error: {type(err).__name__}: {str(err).splitlines()[0][:500]}"
    spark_log = kept_log(spark_log)
    return line if spark_log is None else f"{line} (Spark's log: {spark_log})"


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


def child_stderr_to_log() -> str:
    """Send what the Spark JVM (a child process, inheriting fd 2) prints to a log file; its path.

    The JVM and Spark's default log4j profile write a few lines to stderr; the contract is one line on
    stderr for bad input. Python's own `sys.stderr` keeps the original stream. The caller removes the file
    after a success and names it in the message of a failure.
    """
    log = tempfile.NamedTemporaryFile(prefix="dvmirror-spark-", suffix=".log", delete=False)  # noqa: SIM115
    sys.stderr.flush()
    original = os.dup(2)
    os.dup2(log.fileno(), 2)
    log.close()
    sys.stderr = os.fdopen(original, "w", buffering=1)
    return log.name


def report_failure(args: argparse.Namespace, code: int, line: str, **report: object) -> int:
    """One line on stderr; with --json the same failure, and `report`'s fields, as one JSON document on
    stdout. Returns the exit code."""
    print(f"dvmirror: {line}", file=sys.stderr)
    if "spark_log" in report:
        report["spark_log"] = kept_log(report["spark_log"])  # type: ignore[arg-type]
    if getattr(args, "json", False):
        print(json.dumps({"ok": False, "exit_code": code, "error": line, **report}, indent=2))
    return code
