"""`dvmirror expire TABLE [--retain-last N] [--older-than DURATION] [--tables FILE]`: the cleanup job's
expiry and reclaim (`expire_and_reclaim`, the same `Retention` and ownership rules) from the command line.

The retention: --retain-last and/or --older-than when given (--older-than alone keeps the newest 10;
--retain-last alone expires every snapshot beyond the newest N, whatever its age); else the table's own:
its `retention:` in the tables file --tables names (whose `catalog:` is then the catalog, as for `sync
--tables`), else the default every table has (`DEFAULT_RETENTION`: the newest 10 kept, the others once
older than 7 days), the one `dvmirror sync` and the Dagster cleanup apply.

Iceberg's own `expire_snapshots` refuses a mirror (`gc.enabled=false`, rightly: its data files are
Delta's), so this is how a CLI-only user expires one. Only the mirror's own delete files and Iceberg's
metadata files that no retained snapshot references are deleted (and the metadata files Iceberg drops
from the table's metadata log when the expiry commits); Delta's files never. Every file deleted is
listed (beyond 50, how many of each kind and where; --json lists every one). --dry-run answers without
a JVM when pyiceberg reads the catalog, and says what it *would* do under names that say so: in --json
`would_expire_snapshot_ids`, `would_delete_files`, `would_reclaim_files`, `would_reclaim_bytes`, ...
(the real run's `expired_snapshot_ids`, `deleted_files`, `files_reclaimed`, `bytes_reclaimed`).

Exit codes: 0 done (also when nothing was expired), 2 bad input (no such table, not a dv-mirror table, a
bad duration or catalog), 3 internal error.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from dv_assets.mirror.cli.arguments import (
    add_catalog_arguments,
    check_catalog_reachable,
    mirror_subcommand,
    settings_from,
)
from dv_assets.mirror.cli.output import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL_ERROR,
    child_stderr_to_log,
    internal_error_line,
    refusal_line,
    report_failure,
)
from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.settings import MirrorSettings

if TYPE_CHECKING:  # the maintenance module imports pyspark: not for `dvmirror --help`
    from dv_assets.mirror.iceberg.maintenance import MaintenanceReport, Retention
    from dv_assets.mirror.iceberg.mirror_table import MirrorTable

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_HOURS_PER_UNIT = {"s": 1 / 3600, "m": 1 / 60, "h": 1.0, "d": 24.0, "w": 168.0}


def duration_hours(text: str) -> float:
    """`90m`, `36h`, `7d`, `2w`, `3600s` in hours; ValueError for anything else or a zero duration."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"--older-than must be a number and a unit (s, m, h, d, w), e.g. 7d; got {text!r}")
    hours = float(match.group(1)) * _HOURS_PER_UNIT[match.group(2)]
    if hours <= 0:
        raise ValueError(f"--older-than must be longer than zero, got {text!r}")
    return hours


def add_parser(commands: argparse._SubParsersAction) -> None:
    expire = mirror_subcommand(
        commands,
        "expire",
        help="expire a mirror's old snapshots and delete only the mirror's own files they alone used",
        doc=__doc__,
    )
    expire.add_argument(
        "--retain-last",
        type=int,
        metavar="N",
        help="keep at least the newest N snapshots (default: the table's retention, else 10)",
    )
    expire.add_argument(
        "--older-than",
        metavar="DURATION",
        help="expire only snapshots older than this (e.g. 36h, 7d; never the newest N). Default: with "
        "--retain-last, every snapshot beyond the newest N; without it, the table's retention, else 7d",
    )
    expire.add_argument(
        "--tables",
        metavar="FILE",
        help="a tables file (DeltaMirrorComponent documents) naming the table: its `retention:` and its "
        "`catalog:` (the catalog flags over it)",
    )
    expire.add_argument("--dry-run", action="store_true", help="report what would be removed, remove nothing")
    add_catalog_arguments(expire)
    expire.add_argument("--json", action="store_true", help="print a machine-readable report")
    expire.set_defaults(run=run)


# Up to this many files the text lists each one; beyond it, how many of each kind and in which folder
# (`--json` always lists every one).
MAX_LISTED = 50


def _kind(location: str, key: str) -> str:
    """What a deleted file is, for the text report."""
    name = location.rsplit("/", 1)[-1]
    if key == "deleted_metadata_json":
        return "metadata file"
    if key == "deleted_metadata_files":
        return "manifest list" if name.startswith("snap-") else "manifest"
    kind = "DV file (Puffin)" if name.endswith(".puffin") else "position-delete file"
    return f"orphan {kind}" if key == "deleted_orphans" else kind


_FILE_KEYS = ("deleted_delete_files", "deleted_orphans", "deleted_metadata_files", "deleted_metadata_json")


# A dry run's names for what the real run reports as done.
DRY_RUN_NAMES = {
    "snapshots_expired": "would_expire_snapshots",
    "snapshots_retained": "would_retain_snapshots",
    "expired_snapshot_ids": "would_expire_snapshot_ids",
    "expired_delta_versions": "would_expire_delta_versions",
    "retained_delta_versions": "would_retain_delta_versions",
    "deleted_delete_files": "would_delete_delete_files",
    "deleted_metadata_files": "would_delete_metadata_files",
    "deleted_orphans": "would_delete_orphans",
    "deleted_metadata_json": "would_delete_metadata_json",
    "deleted_files": "would_delete_files",
    "files_reclaimed": "would_reclaim_files",
    "bytes_reclaimed": "would_reclaim_bytes",
}


def as_json(values: dict) -> dict:
    """The report's JSON: a dry run's under names that say it did nothing (`DRY_RUN_NAMES`)."""
    if values["dry_run"]:
        return {DRY_RUN_NAMES.get(k, k): v for k, v in values.items()}
    return values


def expire_report(report: MaintenanceReport, before: MirrorTable, retention: Retention) -> dict:
    """The report as plain values, with the Delta versions expired and still readable in the mirror and
    the retention applied."""
    versions = {s.snapshot_id: s.delta_version for s in before.snapshots}
    expired = set(report.expired_snapshot_ids)
    return {
        "table": report.iceberg_table,
        "dry_run": report.dry_run,
        "read_with": report.read_with,
        "snapshots_before": report.snapshots_before,
        "snapshots_expired": len(report.expired_snapshot_ids),
        "snapshots_retained": report.retained_snapshots,
        "expired_snapshot_ids": report.expired_snapshot_ids,
        "expired_delta_versions": sorted(v for sid in expired if (v := versions.get(sid)) is not None),
        "retained_delta_versions": sorted(
            v for sid, v in versions.items() if v is not None and sid not in expired
        ),
        "deleted_delete_files": report.deleted_delete_files,
        "deleted_metadata_files": report.deleted_metadata_files,
        "deleted_orphans": report.deleted_orphans,
        "deleted_metadata_json": report.deleted_metadata_json,
        "deleted_files": report.deleted_files,
        "files_reclaimed": report.files_reclaimed,
        "bytes_reclaimed": report.bytes_reclaimed,
        "retention": retention.model_dump(),
    }


def _text(report: dict) -> str:
    dry = report["dry_run"]
    verb = "would expire" if dry else "expired"
    kinds: dict[str, list[str]] = {}
    for key in _FILE_KEYS:
        for location in report[key]:
            kinds.setdefault(_kind(location, key), []).append(location)
    counts = ", ".join(
        f"{len(found)} {kind}{'s' if len(found) != 1 else ''}" for kind, found in kinds.items()
    )
    lines = [
        f"{report['table']}: {verb} {report['snapshots_expired']} of {report['snapshots_before']} snapshots "
        f"(Delta versions {report['expired_delta_versions'] or 'none'}); "
        f"{report['snapshots_retained']} retained (Delta versions {report['retained_delta_versions']})",
        f"{'would delete' if dry else 'deleted'} {report['files_reclaimed']} files, "
        f"{report['bytes_reclaimed']} bytes{': ' + counts if counts else ''}",
    ]
    if report["files_reclaimed"] <= MAX_LISTED:
        lines += [f"  {kind}: {location}" for kind, found in kinds.items() for location in found]
    else:
        for kind, found in kinds.items():
            folders = sorted({location.rsplit("/", 1)[0] for location in found})
            lines.append(f"  {len(found)} {kind}{'s' if len(found) != 1 else ''} in {', '.join(folders)}")
        lines.append("  (--json lists every file)")
    return "\n".join(lines)


def _refusal(table_name: str, table: MirrorTable | None) -> str | None:
    """Why `table` is not expired here: missing, or not written by the mirror (its files may be its own
    data, which only its owner's tools may expire). None: it is a mirror."""
    if table is None:
        return f"table {table_name}: no such Iceberg table"
    if not any(s.delta_version is not None for s in table.snapshots):
        return f"table {table_name}: not a dv-mirror table (no snapshot carries a Delta version)"
    return None


def _fail(args: argparse.Namespace, code: int, line: str, spark_log: str | None = None) -> int:
    """A failure as every subcommand reports it; its JSON keeps the sync's fields (no version mirrored)."""
    return report_failure(args, code, line, mirrored_versions=[], spark_log=spark_log)


def _retention_and_settings(args: argparse.Namespace) -> tuple[Retention, MirrorSettings]:
    """The retention (the flags, else the table's in --tables, else DEFAULT_RETENTION) and the settings
    (ValueError / MirrorInputError: bad flags or file, one line)."""
    from dv_assets.mirror.iceberg.maintenance import DEFAULT_RETENTION, Retention

    settings = None
    retention = DEFAULT_RETENTION
    if args.tables is not None:
        from dv_assets.mirror.cli.fleet import load_tables

        settings, _, retentions = load_tables(args)
        if args.table not in retentions:
            named = ", ".join(sorted(retentions))
            raise MirrorInputError(
                f"tables file {args.tables} names no table {args.table} (it names {named})"
            )
        retention = retentions[args.table]
    if args.retain_last is not None or args.older_than is not None:
        retention = Retention(
            retain_last=DEFAULT_RETENTION.retain_last if args.retain_last is None else args.retain_last,
            max_snapshot_age_hours=None if args.older_than is None else duration_hours(args.older_than),
        )
    return retention, settings or settings_from(args)


def run(args: argparse.Namespace) -> int:
    if "." not in args.table:
        return _fail(args, EXIT_BAD_INPUT, f"--table must be NAMESPACE.NAME, got {args.table!r}")
    if args.retain_last is not None and args.retain_last < 1:
        return _fail(args, EXIT_BAD_INPUT, f"--retain-last must be at least 1, got {args.retain_last}")
    try:
        retention, settings = _retention_and_settings(args)
        check_catalog_reachable(settings.catalog)
    except (MirrorInputError, ValueError) as err:
        return _fail(args, EXIT_BAD_INPUT, refusal_line(err))
    spark_log: str | None = None
    try:
        from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table

        # Refused before a JVM starts when pyiceberg can read the catalog (else after, by Iceberg Java).
        # Its sqlite catalog logs a warning on a catalog Iceberg Java created: stderr holds one line.
        logging.getLogger("pyiceberg.catalog.sql").setLevel(logging.ERROR)
        before = None
        if settings.catalog.pyiceberg_reads():
            before = read_mirror_table(settings.catalog, args.table)
            if (refusal := _refusal(args.table, before)) is not None:
                return _fail(args, EXIT_BAD_INPUT, refusal)
            if args.dry_run:  # what would go, read with pyiceberg: no JVM
                from dv_assets.mirror.iceberg.maintenance import plan_without_jvm

                plan = plan_without_jvm(settings.catalog, args.table, retention)
                return _print(args, expire_report(plan, before, retention))

        from dv_assets.mirror.iceberg.java import IcebergJava
        from dv_assets.mirror.iceberg.maintenance import expire_and_reclaim
        from dv_assets.mirror.spark import check_spark_can_start, get_or_create_spark

        try:
            check_spark_can_start(settings)  # Java and the jars, before Spark's log or a folder
        except MirrorInputError as err:
            return _fail(args, EXIT_BAD_INPUT, err.one_line())
        if not settings.debug:
            spark_log = child_stderr_to_log()
        iceberg = IcebergJava(get_or_create_spark(settings))
        if before is None:
            before = iceberg.load(args.table)
            if (refusal := _refusal(args.table, before)) is not None:
                return _fail(args, EXIT_BAD_INPUT, refusal, spark_log)
        assert before is not None
        report = expire_and_reclaim(iceberg, args.table, retention, dry_run=args.dry_run)
    except Exception as err:  # the one place a traceback is turned into a line
        if settings.debug:
            traceback.print_exc()
        return _fail(args, EXIT_INTERNAL_ERROR, internal_error_line(err, spark_log), spark_log)
    if spark_log is not None:
        # Kept only when it may explain a failure (its path is then in the error line).
        Path(spark_log).unlink(missing_ok=True)
    return _print(args, expire_report(report, before, retention))


def _print(args: argparse.Namespace, values: dict) -> int:
    if args.json:
        print(json.dumps({"ok": True, **as_json(values)}, indent=2))
    else:
        print(_text(values))
    sys.stdout.flush()
    return 0
