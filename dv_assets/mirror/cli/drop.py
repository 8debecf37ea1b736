"""`dvmirror drop TABLE`: remove a mirror so that it can be made again from scratch: the files dv-mirror
wrote for it, then its catalog entry. Delta's files are never touched.

Only these go, each named by the table's own metadata or by the mirror's name in its own folders: its
delete files (`<location>/data/dvmirror-*`), its checkpoint indexes (`<location>/dvmirror-delta-index/`),
its manifests, manifest lists and metadata files (`<location>/metadata/`); then its catalog entry, without
purge. Refused (nothing deleted): a table dv-mirror did not create, one with a snapshot another writer
committed, a file it names that is not where and what dv-mirror writes, a catalog whose drop may delete
files (hadoop). A drop that stopped half-way is finished by running it again. --dry-run lists what would
go and deletes nothing (no JVM when pyiceberg reads the catalog).

Exit codes: 0 done, 2 refused or bad input (nothing deleted), 3 internal error, 4 another writer committed
to the table during the drop (its catalog entry kept; stop it and run drop again).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dv_assets.mirror.cli.arguments import (
    add_catalog_arguments,
    check_catalog_reachable,
    mirror_subcommand,
    settings_from,
)
from dv_assets.mirror.cli.output import (
    EXIT_BAD_INPUT,
    EXIT_CONFLICT,
    EXIT_INTERNAL_ERROR,
    child_stderr_to_log,
    internal_error_line,
    refusal_line,
    report_failure,
)
from dv_assets.mirror.errors import MirrorConflictError, MirrorInputError
from dv_assets.mirror.iceberg.drop import (
    CHECKPOINT_INDEX_FILES,
    CHECKSUM_FILES,
    DELETE_FILES,
    KINDS,
    MANIFEST_LISTS,
    MANIFESTS,
    METADATA_FILES,
    ORPHAN_DELETE_FILES,
    DropOutcome,
    DropPlan,
    check_catalog_drops_no_file,
    execute_drop,
    plan_drop,
)
from dv_assets.mirror.locations import comparable

if TYPE_CHECKING:
    from dv_assets.mirror.iceberg.java import IcebergJava
    from dv_assets.mirror.io import FileIO
    from dv_assets.mirror.settings import MirrorSettings

# Up to this many files the text lists each one; beyond it, how many of each kind (--json lists every one).
MAX_LISTED = 50


def add_parser(commands: argparse._SubParsersAction) -> None:
    drop = mirror_subcommand(
        commands,
        "drop",
        help="remove a mirror (only the files dv-mirror wrote, then its catalog entry) to start it again",
        doc=__doc__,
    )
    drop.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    add_catalog_arguments(drop)
    drop.add_argument("--json", action="store_true", help="print a machine-readable report")
    drop.set_defaults(run=run)


def _kind(location: str, kind: str) -> str:
    """What a file is, for the text report."""
    if kind in (DELETE_FILES, ORPHAN_DELETE_FILES):
        what = "DV file (Puffin)" if location.endswith(".puffin") else "position-delete file"
        return f"orphan {what}" if kind == ORPHAN_DELETE_FILES else what
    return {
        CHECKPOINT_INDEX_FILES: "checkpoint index file",
        CHECKSUM_FILES: "checksum file",
        MANIFESTS: "manifest",
        MANIFEST_LISTS: "manifest list",
        METADATA_FILES: "metadata file",
    }[kind]


def drop_report(
    plan: DropPlan, outcome: DropOutcome | None, *, catalog: str, read_with: str
) -> dict[str, Any]:
    """The report as plain values: with no `outcome` (a dry run) every key says what *would* happen."""
    if outcome is None:
        files, gone, verb = plan.files, plan.missing_files, "would_delete"
        unregistered_key, unregistered = "would_unregister", True
    else:
        files, gone, verb = outcome.deleted, [*plan.missing_files, *outcome.missing_files], "deleted"
        unregistered_key, unregistered = "unregistered", outcome.unregistered
    return {
        "table": plan.table,
        "dry_run": outcome is None,
        "read_with": read_with,
        "catalog": catalog,
        "location": plan.location,
        "metadata_location": plan.metadata_location,
        "delta_table": plan.delta_table,
        "snapshots": len(plan.snapshot_ids),
        "delta_versions": plan.delta_versions,
        f"{verb}_files": [f.location for f in files],
        f"{verb}_by_kind": {kind: [f.location for f in files if f.kind == kind] for kind in KINDS},
        f"{verb}_bytes": sum(f.size for f in files),
        unregistered_key: unregistered,
        "missing_files": gone,
        "left_in_place": plan.left_in_place,
    }


def _counted(count: int, kind: str) -> str:
    """`1 manifest`, `2 manifests`, `3 DV files (Puffin)`."""
    if count == 1:
        return f"1 {kind}"
    noun, parenthesis, rest = kind.partition(" (")
    return f"{count} {noun}s{parenthesis}{rest}"


def _text(report: dict[str, Any]) -> str:
    dry = report["dry_run"]
    verb = "would_delete" if dry else "deleted"
    files = report[f"{verb}_by_kind"]
    kinds: dict[str, list[str]] = {}
    for kind in KINDS:
        for location in files[kind]:
            kinds.setdefault(_kind(location, kind), []).append(location)
    counts = ", ".join(_counted(len(found), kind) for kind, found in kinds.items())
    versions = report["delta_versions"]
    shown = f"Delta versions {versions[0]}-{versions[-1]}" if versions else "no Delta version"
    total = len(report[f"{verb}_files"])
    lines = [
        f"{report['table']}: {'would drop' if dry else 'dropped'} the mirror of {report['delta_table']} "
        f"({report['snapshots']} snapshots, {shown}) at {report['location']}",
        f"{'would delete' if dry else 'deleted'} {total} files, {report[f'{verb}_bytes']} bytes"
        f"{': ' + counts if counts else ''}",
    ]
    if total <= MAX_LISTED:
        lines += [f"  {kind}: {location}" for kind, found in kinds.items() for location in found]
    else:
        lines.append("  (--json lists every file)")
    if dry:
        lines.append(f"would then unregister {report['table']} from the {report['catalog']} (no purge)")
    elif report["unregistered"]:
        lines.append(f"unregistered {report['table']} from the {report['catalog']} (no purge)")
    else:
        lines.append(f"{report['table']} was already gone from the {report['catalog']}")
    if report["missing_files"]:
        gone = _counted(len(report["missing_files"]), "file")
        lines.append(f"already gone: {gone} the table's metadata names (a drop that stopped half-way)")
    left = report["left_in_place"]
    if left:
        lines.append(
            f"left in place, not dv-mirror's to delete: {_counted(len(left), 'file')} under "
            f"{report['location']}"
        )
        lines += [f"  {location}" for location in left[:MAX_LISTED]]
    lines.append("Delta's files are not touched.")
    return "\n".join(lines)


def _fail(args: argparse.Namespace, code: int, line: str, spark_log: str | None = None) -> int:
    return report_failure(args, code, line, spark_log=spark_log)


def _no_such_table(table_name: str, settings: MirrorSettings) -> str:
    return f"table {table_name}: no such Iceberg table in the {settings.catalog.describe()}"


def run(args: argparse.Namespace) -> int:
    if "." not in args.table:
        return _fail(args, EXIT_BAD_INPUT, f"the table must be NAMESPACE.NAME, got {args.table!r}")
    try:
        settings = settings_from(args)
        check_catalog_drops_no_file(settings.catalog.kind, args.table)
        check_catalog_reachable(settings.catalog)
    except (MirrorInputError, ValueError) as err:
        return _fail(args, EXIT_BAD_INPUT, refusal_line(err))
    spark_log: str | None = None
    try:
        from dv_assets.mirror.io import FileIO

        io = FileIO(settings.catalog.storage_properties())
        plan: DropPlan | None = None
        catalog = settings.catalog.describe()
        if settings.catalog.pyiceberg_reads():  # refused, or a dry run answered, before any JVM
            plan = _plan_read_with_pyiceberg(args.table, settings, io)
            if plan is None:
                return _fail(args, EXIT_BAD_INPUT, _no_such_table(args.table, settings))
            if args.dry_run:
                return _print(args, drop_report(plan, None, catalog=catalog, read_with="pyiceberg"))

        from dv_assets.mirror.iceberg.java import IcebergJava
        from dv_assets.mirror.spark import check_spark_can_start, get_or_create_spark

        check_spark_can_start(settings)  # Java and the jars, before Spark's log or a folder
        if not settings.debug:
            spark_log = child_stderr_to_log()
        iceberg = IcebergJava(get_or_create_spark(settings))
        java_found = iceberg.metadata(args.table)
        if java_found is None:
            return _fail(args, EXIT_BAD_INPUT, _no_such_table(args.table, settings), spark_log)
        plan = _plan_read_with_java(args.table, settings, io, java_found, plan)
        outcome = None if args.dry_run else _execute(plan, io, iceberg, args.table)
        report = drop_report(plan, outcome, catalog=catalog, read_with="iceberg-java")
    except MirrorInputError as err:
        return _fail(args, EXIT_BAD_INPUT, err.one_line(), spark_log)
    except MirrorConflictError as err:
        return _fail(args, EXIT_CONFLICT, err.one_line(), spark_log)
    except Exception as err:  # the one place a traceback is turned into a line
        if settings.debug:
            traceback.print_exc()
        return _fail(args, EXIT_INTERNAL_ERROR, internal_error_line(err, spark_log), spark_log)
    if spark_log is not None:
        Path(spark_log).unlink(missing_ok=True)  # kept only when it may explain a failure
    return _print(args, report)


def _plan_read_with_pyiceberg(table: str, settings: MirrorSettings, io: FileIO) -> DropPlan | None:
    """The drop plan of `table` read through pyiceberg, no JVM (None: the catalog has no such table)."""
    from dv_assets.mirror.iceberg.pyiceberg_reader import table_metadata

    # Its sqlite catalog logs a warning on a catalog Iceberg Java created: stderr holds one line.
    logging.getLogger("pyiceberg").setLevel(logging.ERROR)
    found = table_metadata(settings.catalog, table)
    if found is None:
        return None
    metadata_location, metadata, avro_io = found
    return plan_drop(table, metadata_location, metadata, avro_io=avro_io, io=io)


def _plan_read_with_java(
    table: str,
    settings: MirrorSettings,
    io: FileIO,
    java_found: tuple[str, dict[str, Any]],
    plan: DropPlan | None,
) -> DropPlan:
    """The drop plan of the table Iceberg Java found (its metadata file, its JSON): made from it, or the
    `plan` pyiceberg made, when Iceberg Java sees the same metadata file (MirrorConflictError if not)."""
    if plan is None:
        from pyiceberg.io import load_file_io

        metadata_location, metadata = java_found
        properties = {**settings.catalog.storage_properties(), **(metadata.get("properties") or {})}
        avro_io = load_file_io(properties, metadata_location)
        return plan_drop(table, metadata_location, metadata, avro_io=avro_io, io=io)
    if comparable(java_found[0]) != comparable(plan.metadata_location):
        raise MirrorConflictError(
            f"the table changed while it was read (its metadata file is now {java_found[0]}, not "
            f"{plan.metadata_location}): another writer committed; nothing deleted: stop every sync of "
            "it and run dvmirror drop again",
            table=table,
        )
    return plan


def _execute(plan: DropPlan, io: FileIO, iceberg: IcebergJava, table: str) -> DropOutcome:
    """Delete the plan's files and unregister the table, checking before that no one committed since."""

    def current() -> str | None:
        now = iceberg.metadata(table)
        return None if now is None else now[0]

    return execute_drop(plan, io, current_metadata=current, unregister=lambda: iceberg.unregister(table))


def _print(args: argparse.Namespace, values: dict[str, Any]) -> int:
    if args.json:
        print(json.dumps({"ok": True, **values}, indent=2))
    else:
        print(_text(values))
    sys.stdout.flush()
    return 0
