"""`dvmirror sync DELTA_TABLE --table NAMESPACE.NAME`: mirror every Delta version not yet mirrored, one
Iceberg snapshot each; `--follow` keeps doing it (follow.py), `--tables FILE` does it for every table of a
file in one process (fleet.py). A mirror already up to date, and every refusal of bad input, answer
without a JVM.

After the sync, the table's retention is applied as the Dagster cleanup applies it (`RetentionKeeper`:
here `DEFAULT_RETENTION`, the newest 10 snapshots kept and the others once a week old; a tables file's
`retention:` for `--tables`): snapshots past it are expired and the mirror's own files only they used
deleted, one line (`expiry` in --json). A mirror up to date with nothing past retention answers without a
JVM; one with snapshots past retention starts Spark for the expiry."""

from __future__ import annotations

import argparse
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from dv_assets.mirror.cli import fleet
from dv_assets.mirror.cli.arguments import (
    add_catalog_arguments,
    check_catalog_reachable,
    check_spark_can_start,
    not_a_local_delta_table,
    position_without_jvm,
    settings_from,
)
from dv_assets.mirror.cli.follow import (
    DEFAULT_INTERVAL_SECONDS,
    OneTableOutput,
    positive_seconds,
    retrying_line,
    run_in_one_session,
    version_line,
)
from dv_assets.mirror.cli.output import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_STORAGE,
    print_json,
    report_failure,
)
from dv_assets.mirror.cli.retention import expiry_json, expiry_text
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.errors import MirrorConflictError, MirrorInputError, StorageError
from dv_assets.mirror.follow import retrying_transient
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.results import SyncResult, VersionResult
from dv_assets.mirror.settings import MirrorSettings
from dv_assets.mirror.status import version_ranges
from dv_assets.mirror.table_spec import FleetTable
from dv_assets.mirror.vacuum import VacuumFollowed

if TYPE_CHECKING:  # imported when Spark runs
    from dv_assets.mirror.fleet import FleetResult
    from dv_assets.mirror.iceberg.maintenance import MaintenanceReport, Retention


def add_parser(commands: argparse._SubParsersAction) -> None:
    sync = commands.add_parser(
        "sync",
        help="mirror every Delta version not yet mirrored, one snapshot each",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sync.add_argument(
        "delta_table", nargs="?", help="path of the Delta table (the folder holding _delta_log)"
    )
    sync.add_argument("--table", help="Iceberg table, NAMESPACE.NAME")
    fleet.add_arguments(sync)
    add_catalog_arguments(sync)
    sync.add_argument(
        "--format-version",
        type=int,
        choices=(2, 3),
        help="3: Puffin deletion vectors (default for new tables); 2: Parquet position deletes",
    )
    sync.add_argument("--until-version", type=int, help="mirror up to this Delta version (default: latest)")
    sync.add_argument(
        "--allow-root",
        action="append",
        default=[],
        metavar="PATH",
        help="a folder outside the Delta table whose files its log may name (shallow clones, `p` DVs); "
        "repeatable. Anything else outside the table root is refused",
    )
    sync.add_argument("--json", action="store_true", help="print a machine-readable summary")
    sync.add_argument(
        "--follow",
        action="store_true",
        help="after the catch-up, keep mirroring each new Delta version as it appears, in one Spark "
        "session, until SIGTERM/Ctrl-C (then exit 0, between versions); --json: JSON Lines",
    )
    sync.add_argument(
        "--interval",
        type=positive_seconds,
        metavar="SECONDS",
        help="with --follow: how often to look for a new Delta commit "
        f"(default {DEFAULT_INTERVAL_SECONDS:g})",
    )
    sync.set_defaults(sync_parser=sync, run=run)


def _fail(args: argparse.Namespace, code: int, line: str, mirrored: list[int], spark_log: str | None) -> int:
    """The sync's failure: with --json, what was committed before it and Spark's log too."""
    return report_failure(args, code, line, mirrored_versions=mirrored, spark_log=spark_log)


def run(args: argparse.Namespace) -> int:
    if args.tables is not None:
        return fleet.run(args)
    missing = [
        name for name, value in (("delta_table", args.delta_table), ("--table", args.table)) if not value
    ]
    if missing:  # what argparse says of a missing required argument (exit 2)
        args.sync_parser.error(
            f"the following arguments are required: {', '.join(missing)} (or --tables FILE)"
        )
    try:
        settings = _checked_settings(args)
        up_to_date = (
            None
            if args.follow
            else retrying_transient(lambda: _up_to_date(args, settings), on_retry=retrying_line)
        )
        if up_to_date is None:
            check_spark_can_start(settings)  # Java and the jars, before Spark's log or a folder
    except MirrorInputError as err:
        return _fail(args, EXIT_BAD_INPUT, err.one_line(), [], None)
    except StorageError as err:
        return _fail(args, EXIT_STORAGE, err.one_line(), [], None)
    if up_to_date is not None:
        return _report(args, up_to_date)
    # One table, once or following, is a fleet of one in one Spark session (cli/follow.py).
    table = FleetTable.one(
        args.delta_table, args.table, args.format_version, tuple(args.allow_root), args.until_version
    )
    return run_in_one_session(
        settings, [table], {}, OneTableOutput(args) if args.follow else OnceOutput(args)
    )


def _checked_settings(args: argparse.Namespace) -> MirrorSettings:
    """The run's settings once its flags, its Delta path and the catalog are checked, without a JVM;
    MirrorInputError (its one line, exit 2) for the first thing wrong."""
    if args.concurrency is not None:
        raise MirrorInputError("--concurrency applies to --tables only")
    if "." not in args.table:
        raise MirrorInputError(f"--table must be NAMESPACE.NAME, got {args.table!r}")
    problem = not_a_local_delta_table(args.delta_table)
    if problem is not None:
        raise MirrorInputError(problem)
    try:
        settings = settings_from(args, args.delta_table)
    except ValueError as err:
        raise MirrorInputError(str(err)) from None
    if args.interval is not None and not args.follow:
        raise MirrorInputError("--interval applies to --follow only")
    if args.follow and args.until_version is not None:
        raise MirrorInputError(
            "--follow mirrors every new version: it cannot be combined with --until-version"
        )
    check_catalog_reachable(settings.catalog)
    return settings


class OnceOutput(OneTableOutput):
    """A run-once `dvmirror sync DELTA --table T`'s output: a line per mirrored version as it commits (text),
    the expiry's line, then the report (`_report`: one JSON document with --json); a failure as
    `report_failure` puts it, with the versions committed before it and Spark's log."""

    stops_on_signals = False  # SIGTERM/SIGINT end it at once, as they always did: it is no follower

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.result: SyncResult | None = None
        self.expiry: MaintenanceReport | None = None

    def version(self, table: FleetTable, result: VersionResult, lag_seconds: float | None) -> None:
        self.mirrored.append(result.delta_version)
        if not self.json:
            print(version_line(result), flush=True)

    def caught_up(self, table: FleetTable, result: SyncResult, first: bool, versions: int) -> None:
        self.result = result

    def failed(self, table: FleetTable, code: int, error: BaseException, retry_in: float | None) -> None:
        if self.debug and not isinstance(error, MirrorInputError | MirrorConflictError):
            traceback.print_exception(error)  # DVMIRROR_DEBUG: where an error came from
        super().failed(table, code, error, retry_in)

    def expired(self, table: FleetTable, report: MaintenanceReport, retention: Retention) -> None:
        self.expiry = report
        if not self.json:
            print(expiry_text(table.iceberg_table, report, retention), flush=True)

    def crashed(self, code: int, line: str) -> int:
        return _fail(self.args, code, line, self.mirrored, self.spark_log)

    def ended(self, result: FleetResult) -> int:
        if self.final is not None:  # the table ended by an error: the run's
            return self.crashed(*self.final)
        assert self.result is not None  # a table that did not fail was caught up
        if self.spark_log is not None:
            Path(self.spark_log).unlink(missing_ok=True)  # kept only when it may explain a failure
        return _report(self.args, self.result, self.expiry)


def _up_to_date(args: argparse.Namespace, settings: MirrorSettings) -> SyncResult | None:
    """The run's result when the mirror already shows the version asked for (the latest, or
    --until-version), answered without a JVM (`position_without_jvm`); None when Spark is needed.
    MirrorInputError for a Delta table that cannot be read or a version past its latest."""
    try:
        io = FileIO(settings.catalog.storage_properties())
        # One listing answers every question below (each would list `_delta_log` again otherwise).
        delta = DeltaTable(args.delta_table, io=io).listed_once()
        latest = delta.latest_version()
    except StorageError:
        raise  # the storage did not answer, or denied access: no verdict on the table (exit 5)
    except (OSError, ValueError) as err:
        raise MirrorInputError(f"table {args.delta_table}: {err}") from None
    if args.until_version is not None and args.until_version > latest:
        # A version past the latest is a typo, not "up to date".
        raise MirrorInputError(
            f"--until-version {args.until_version} is past the latest Delta version {latest}",
            table=args.delta_table,
        )
    target = latest if args.until_version is None else args.until_version
    try:
        position = position_without_jvm(settings, delta, args.table, args.format_version, latest, target)
    except MirrorInputError:
        raise
    except Exception:  # pyiceberg could not answer: Iceberg Java, the sync's own reader, will
        if settings.debug:
            traceback.print_exc()
        return None
    if position is None or position.start <= target:
        return None
    from dv_assets.mirror.iceberg.maintenance import DEFAULT_RETENTION, retention_due

    if retention_due(position.snapshot_times_ms, DEFAULT_RETENTION):
        return None  # nothing to mirror, but snapshots to expire: through Spark (Iceberg Java)
    return SyncResult(delta.table_root, args.table, position.format_version, position.last_mirrored, latest)


def _report(args: argparse.Namespace, result: SyncResult, expiry: MaintenanceReport | None = None) -> int:
    if args.json:
        print_json({"ok": True, **result.to_json(), "expiry": expiry_json(expiry)})
        return EXIT_OK
    if result.start_note is not None:  # the versions before the first mirrored one: why not mirrored
        print(result.start_note)
    if not result.versions:
        print(f"{args.table} is up to date with {args.delta_table} at version {result.latest_delta_version}")
    if result.vacuum is not None:
        print(vacuum_line(result.vacuum))
    return EXIT_OK


def vacuum_line(followed: VacuumFollowed) -> str:
    """What following a Delta VACUUM did, in one line."""
    gone = f"{len(followed.gone)} of {followed.candidates} removed data files gone"
    if not followed.expired_versions:
        return (
            f"followed Delta's VACUUM (version {followed.vacuum_version}): {gone}; every retained version "
            "readable"
        )
    return (
        f"followed Delta's VACUUM (version {followed.vacuum_version}): {gone}; expired the snapshots of "
        f"Delta versions {version_ranges(followed.expired_versions)} (a data file they name is gone), "
        f"{len(followed.deleted_files)} mirror files reclaimed"
    )
