"""`dvmirror status NAMESPACE.NAME… [--delta PATH] [--json]`: where each mirror stands against its Delta
table, without a JVM (the Delta log and pyiceberg, through `mirror_status`).

A mirror names its Delta table itself (the `dvmirror.delta-table` property every sync checks), so the
Iceberg table names are enough; `--delta PATH` (one table) names the Delta table as `sync` does, and is
held to the same check: an existing table must be dv-mirror's mirror of that path. A table the catalog
does not have is bad input (exit 2) unless `--delta` names its Delta table (then: nothing mirrored yet).

Each table named is reported on its own: a table that cannot be (unknown, not a mirror, its Delta table
unreadable) is one line on stderr naming the catalog asked, and the others are still reported. The exit
code sums them up (`worst_exit_code`: 3 internal error > 2 refused > 5 storage error > 0); bad flags or a
catalog that cannot be reached are one line for the whole command.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import traceback
from collections.abc import Callable
from dataclasses import asdict

from dv_assets.mirror.cli.arguments import add_catalog_arguments, check_catalog_reachable, settings_from
from dv_assets.mirror.cli.output import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL_ERROR,
    EXIT_STORAGE,
    internal_error_line,
    report_failure,
)
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.errors import MirrorInputError, StorageError, worst_exit_code
from dv_assets.mirror.iceberg.mirror_table import DELTA_TABLE_PROPERTY, MirrorTable
from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table, read_snapshot_files
from dv_assets.mirror.identity import check_is_mirror_of
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.locations import table_root_of
from dv_assets.mirror.settings import CatalogConfig
from dv_assets.mirror.status import MirrorStatus, mirror_status, version_ranges


def add_parser(commands: argparse._SubParsersAction) -> None:
    status = commands.add_parser(
        "status",
        help="where each mirror stands: mirrored version, Delta's latest, lag, snapshot (no JVM)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    status.add_argument("tables", nargs="+", metavar="NAMESPACE.NAME", help="Iceberg table(s) to report")
    status.add_argument(
        "--delta",
        metavar="PATH",
        help="the Delta table (path or URI) of the one table named; default: the one the mirror records",
    )
    add_catalog_arguments(status)
    status.add_argument("--json", action="store_true", help="print one JSON document")
    status.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # pyiceberg warns on stderr (e.g. about an older sqlite catalog schema); stderr is for the one error line.
    logging.getLogger("pyiceberg").setLevel(logging.ERROR)
    try:
        if args.delta is not None and len(args.tables) != 1:
            raise MirrorInputError("--delta names the Delta table of one Iceberg table; name only one")
        for name in args.tables:
            if "." not in name:
                raise MirrorInputError(f"an Iceberg table is NAMESPACE.NAME, got {name!r}")
        try:
            settings = settings_from(args, args.delta)
        except ValueError as err:
            raise MirrorInputError(str(err).splitlines()[0]) from None
        check_catalog_reachable(settings.catalog)
    except MirrorInputError as err:
        return report_failure(args, EXIT_BAD_INPUT, err.one_line())
    statuses: list[MirrorStatus] = []
    failures: list[tuple[str, int, str]] = []  # (table, exit code, its line)
    for name in args.tables:
        try:
            statuses.append(table_status(settings.catalog, name, args.delta))
        except MirrorInputError as err:
            failures.append((name, EXIT_BAD_INPUT, err.one_line()))
        except StorageError as err:  # its Delta log could not be read: no verdict on the table
            failures.append((name, EXIT_STORAGE, err.one_line()))
        except Exception as err:  # a catalog or storage failure: the table's line, the traceback if debugging
            if settings.debug:
                traceback.print_exc()
            failures.append((name, EXIT_INTERNAL_ERROR, internal_error_line(err, None)))
    for _, _, line in failures:
        print(f"dvmirror: {line}", file=sys.stderr, flush=True)
    exit_code = worst_exit_code([code for _, code, _ in failures])
    if args.json:
        # readable_versions: the Delta versions whose snapshots the mirror retains (time travel).
        tables = [{**asdict(s), "up_to_date": s.up_to_date} for s in statuses]
        report: dict[str, object] = {"ok": not failures, "tables": tables}
        if failures:  # `error`: the first failure's line, as a one-table failure reports it
            failed = [{"iceberg_table": t, "exit_code": c, "error": line} for t, c, line in failures]
            report |= {"exit_code": exit_code, "error": failures[0][2], "failed": failed}
        print(json.dumps(report, indent=2))
    elif statuses:
        print("\n\n".join(status_text(s) for s in statuses))
    return exit_code


def table_status(catalog: CatalogConfig, table_name: str, delta_path: str | None) -> MirrorStatus:
    """The status of one mirror; its Delta table is `delta_path`, else the one the mirror records."""
    mirror = read_mirror_table(catalog, table_name)
    if mirror is None and delta_path is None:
        raise MirrorInputError(
            f"the catalog has no Iceberg table {table_name}: asked the {catalog.describe()} (name its Delta "
            "table with --delta to see what a first sync would mirror)"
        )
    delta_root = mirrored_delta_root(mirror, table_name, delta_path)
    io = FileIO(catalog.storage_properties())
    delta = DeltaTable(delta_root, enforce_protocol=False, io=io)
    return mirror_status(
        delta, mirror, table_name, vacuum_io=io, files_of=_files_of(catalog, mirror, table_name)
    )


def _files_of(
    catalog: CatalogConfig, mirror: MirrorTable | None, table_name: str
) -> Callable[[int], list[str]]:
    """The data files the snapshot of a Delta version names, read with pyiceberg: what a Delta VACUUM is
    checked against for a version older than the commits the log holds (`vacuum.vacuumed_versions`)."""

    def files_of(version: int) -> list[str]:
        snapshot = None if mirror is None else mirror.snapshot_for_version(version)
        if snapshot is None:
            return []
        return sorted(read_snapshot_files(catalog, table_name, snapshot.snapshot_id).data_files)

    return files_of


def mirrored_delta_root(mirror: MirrorTable | None, table_name: str, delta_path: str | None) -> str:
    """The Delta table `table_name` mirrors: `delta_path` (which an existing mirror must record, as a
    sync checks), else the one the mirror records (MirrorInputError: it records none)."""
    if delta_path is not None:
        delta_root = table_root_of(delta_path)
        if mirror is not None:
            check_is_mirror_of(mirror, delta_root, None)
        return delta_root
    assert mirror is not None
    recorded = mirror.properties.get(DELTA_TABLE_PROPERTY)
    if recorded is None:
        raise MirrorInputError(
            f"Iceberg table {table_name} is not a dv-mirror mirror (no {DELTA_TABLE_PROPERTY} property)"
        )
    return recorded


def status_text(status: MirrorStatus) -> str:
    """The status as aligned `label: value` lines under the table's name."""
    fmt = status.format_version
    deletes = "live DVs" if fmt is None or fmt >= 3 else "live position-delete files"
    if status.lag_seconds is None:
        waited = "unknown (the first missing commit has no timestamp)"
    else:
        waited = f"{status.lag_seconds:.1f} s"
    rows = [
        ("Delta table", status.delta_path),
        ("mirrored version", _or_none(status.mirrored_version)),
        ("Delta latest version", str(status.delta_latest_version)),
        ("lag", f"{status.lag_versions} versions, {waited}" + (" (up to date)" if status.up_to_date else "")),
        ("readable versions", _readable(status)),  # by time travel: retained, every data file there
        ("snapshot id", _or_none(status.snapshot_id)),
        ("metadata file", _or_none(status.metadata_location)),
        ("format version", _or_none(fmt)),
        ("live rows", _or_none(status.live_rows)),
        ("live data files", _or_none(status.live_data_files)),
        (deletes, _or_none(status.live_delete_files)),
    ]
    if status.unreadable_versions:
        rows.insert(
            5,
            (
                "unreadable versions",
                f"{version_ranges(status.unreadable_versions)} (Delta's VACUUM deleted data files their "
                "snapshots name; the next sync expires them)",
            ),
        )
    if status.first_readable_version is not None:
        first = status.first_readable_version
        before = "version 0 is" if first == 1 else f"versions 0..{first - 1} are"
        rows.append(("first readable version", f"{first} ({before} no longer readable in Delta)"))
    width = max(len(label) for label, _ in rows) + 1
    return "\n".join([status.iceberg_table, *(f"  {label + ':':<{width}} {value}" for label, value in rows)])


def _readable(status: MirrorStatus) -> str:
    """The Delta versions a reader can still time-travel to in the mirror (their snapshots retained)."""
    return version_ranges(status.readable_versions)


def _or_none(value: object) -> str:
    return "none" if value is None else str(value)
