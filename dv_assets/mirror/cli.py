"""`dvmirror`: mirror a Delta table with deletion vectors into Iceberg from the command line.

    dvmirror sync DELTA_TABLE_PATH --table NAMESPACE.NAME [--catalog-uri sqlite:///PATH/catalog.db]
        [--catalog-property KEY=VALUE ...] [--config FILE] [--warehouse PATH|URI]
        [--format-version 3|2] [--until-version N] [--allow-root PATH ...] [--json]
        [--follow [--interval SECONDS]]      (--follow: mirror each new version as it appears, until SIGTERM)
    dvmirror sync --tables FILE [catalog flags] [--concurrency N] [--json] [--follow [--interval SECONDS]]
        (every table of a file of DeltaMirrorComponent documents, in one process and one Spark session)
    dvmirror status NAMESPACE.NAME ... [--delta PATH] [catalog flags] [--json]        (no JVM)
    dvmirror verify NAMESPACE.NAME [--version N] [--full] [--delta PATH] [catalog flags] [--json]
        (no JVM without --full; exit 1 when a check fails)
    dvmirror expire NAMESPACE.NAME --retain-last N [--older-than DURATION] [--dry-run] [catalog flags]
        [--json]
    dvmirror --version

The catalog: Iceberg's own catalog properties, e.g. `--catalog-property type=rest --catalog-property
uri=http://127.0.0.1:8181 --catalog-property warehouse=s3://bucket/wh --catalog-property
s3.endpoint=http://127.0.0.1:9000`, or the same keys under `catalog:` in a YAML file (--config FILE or
DVMIRROR_CONFIG; flags override it). Default: the embedded sqlite catalog ./.dvmirror/catalog.db and
warehouse ./.dvmirror/warehouse in the working directory, created by the first sync that mirrors a
version, once its input is checked (--catalog-uri and --warehouse put them anywhere else).
The Delta table may be a local path or an s3:// / s3a:// URI (the catalog's s3.* properties or the AWS
environment give the endpoint and credentials). Every setting and variable: `dv_assets.mirror.settings`.
Set DVMIRROR_DEBUG=1 to see the traceback of an internal error.

Spark (sync, verify --full, expire) needs Java 17 or newer (JAVA_HOME, else `java` on the PATH). Its jars:
the folder DVMIRROR_JARS names (offline; `make jars`), or ./.jars in a checkout, else the package's own
helper jar with Delta, Iceberg and the JDBC drivers downloaded once from Maven Central into the Ivy cache
DVMIRROR_IVY (default ~/.cache/dvmirror/ivy; later runs reuse it without resolving again).

Exit codes: 0 done (also when there was nothing new), 2 bad input (one line on stderr naming the table,
the version, the file and the reason; the mirror stays at its last good version), 3 internal error,
4 conflict (another writer committed to the Iceberg table meanwhile; nothing of this run was committed;
rerun). With --json a failure is reported on stdout too: {"ok": false, "exit_code", "error",
"mirrored_versions" (those committed before the failure), "spark_log"}.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from importlib.metadata import version
from pathlib import Path

from dv_assets.mirror.cli_args import (
    add_catalog_arguments,
    check_catalog_reachable,
    child_stderr_to_log,
    internal_error_line,
    not_a_local_delta_table,
    position_without_jvm,
    report_failure,
    settings_from,
)
from dv_assets.mirror.cli_expire import add_expire_parser
from dv_assets.mirror.cli_fleet import add_fleet_arguments, run_sync_tables
from dv_assets.mirror.cli_follow import DEFAULT_INTERVAL_SECONDS, positive_seconds, run_follow, version_line
from dv_assets.mirror.cli_status import add_status_command
from dv_assets.mirror.cli_verify import add_verify_parser
from dv_assets.mirror.delta.paths import table_root_of
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.errors import (
    EXIT_BAD_INPUT,
    EXIT_CONFLICT,
    EXIT_INTERNAL_ERROR,
    MirrorConflictError,
    MirrorInputError,
)
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.results import SyncResult
from dv_assets.mirror.settings import MirrorSettings


def check_spark_can_start(settings: MirrorSettings) -> None:
    """SparkSetupError (a MirrorInputError: exit 2, one line) when Spark cannot start here; imported
    when needed (pyspark), so that `--help` and the JVM-free paths stay fast."""
    from dv_assets.mirror.spark import check_spark_can_start as check

    check(settings)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dvmirror",
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[2:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('dv-mirror')}")
    commands = parser.add_subparsers(dest="command", required=True)
    add_status_command(commands)
    sync = commands.add_parser(
        "sync",
        help="mirror every Delta version not yet mirrored, one snapshot each",
        epilog=parser.epilog,  # the exit codes and the catalog, in `dvmirror sync --help` too
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sync.add_argument(
        "delta_table", nargs="?", help="path of the Delta table (the folder holding _delta_log)"
    )
    sync.add_argument("--table", help="Iceberg table, NAMESPACE.NAME")
    add_fleet_arguments(sync)
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
    sync.set_defaults(sync_parser=sync)
    add_expire_parser(commands)
    add_verify_parser(commands)
    return parser


def _fail(args: argparse.Namespace, code: int, line: str, mirrored: list[int], spark_log: str | None) -> int:
    """The sync's failure: with --json, what was committed before it and Spark's log too."""
    return report_failure(args, code, line, mirrored_versions=mirrored, spark_log=spark_log)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command != "sync":  # a subcommand of its own module (`run` set by its parser)
        return args.run(args)
    if args.tables is not None:
        return run_sync_tables(args)
    missing = [
        name for name, value in (("delta_table", args.delta_table), ("--table", args.table)) if not value
    ]
    if missing:  # what argparse says of a missing required argument (exit 2)
        args.sync_parser.error(
            f"the following arguments are required: {', '.join(missing)} (or --tables FILE)"
        )
    if args.concurrency is not None:
        return _fail(args, EXIT_BAD_INPUT, "--concurrency applies to --tables only", [], None)
    mirrored: list[int] = []  # versions committed by this run, for a failure report
    spark_log: str | None = None
    if "." not in args.table:
        return _fail(
            args, EXIT_BAD_INPUT, f"--table must be NAMESPACE.NAME, got {args.table!r}", mirrored, None
        )
    problem = not_a_local_delta_table(args.delta_table)
    if problem is not None:
        return _fail(args, EXIT_BAD_INPUT, problem, mirrored, None)
    try:
        settings = settings_from(args, args.delta_table)
    except ValueError as err:
        return _fail(args, EXIT_BAD_INPUT, str(err), mirrored, None)
    if args.interval is not None and not args.follow:
        return _fail(args, EXIT_BAD_INPUT, "--interval applies to --follow only", mirrored, None)
    if args.follow and args.until_version is not None:
        reason = "--follow mirrors every new version: it cannot be combined with --until-version"
        return _fail(args, EXIT_BAD_INPUT, reason, mirrored, None)
    try:
        check_catalog_reachable(settings.catalog)
    except MirrorInputError as err:
        return _fail(args, EXIT_BAD_INPUT, err.one_line(), mirrored, None)
    if args.follow:
        try:
            check_spark_can_start(settings)  # Java and the jars, before Spark's log or a folder
        except MirrorInputError as err:
            return _fail(args, EXIT_BAD_INPUT, err.one_line(), mirrored, None)
        return run_follow(args, settings, None if settings.debug else child_stderr_to_log())
    try:
        io = FileIO(settings.catalog.storage_properties())
        delta = DeltaTable(table_root_of(args.delta_table), io=io)
        latest = delta.latest_version()
        if args.until_version is not None and args.until_version > latest:
            # A version past the latest is a typo, not "up to date".
            raise MirrorInputError(
                f"--until-version {args.until_version} is past the latest Delta version {latest}",
                table=args.delta_table,
            )
    except MirrorInputError as err:
        return _fail(args, EXIT_BAD_INPUT, err.one_line(), mirrored, None)
    except (OSError, ValueError) as err:
        return _fail(args, EXIT_BAD_INPUT, f"table {args.delta_table}: {err}", mirrored, None)
    target = latest if args.until_version is None else args.until_version
    try:
        up_to_date = _up_to_date(settings, delta, args.table, args.format_version, latest, target)
    except MirrorInputError as err:
        return _fail(args, EXIT_BAD_INPUT, err.one_line(), mirrored, None)
    except Exception:  # pyiceberg could not answer: Iceberg Java, the sync's own reader, will
        if settings.debug:
            traceback.print_exc()
        up_to_date = None
    if up_to_date is not None:
        return _report(args, up_to_date)
    try:
        # Imported here so that `--help` and argument errors answer without starting a JVM.
        from dv_assets.mirror.spark import get_or_create_spark
        from dv_assets.mirror.sync import sync_table

        check_spark_can_start(settings)  # Java and the jars, before Spark's log or the catalog's folders
        if not settings.debug:
            spark_log = child_stderr_to_log()
        spark = get_or_create_spark(settings)

        def progress(result) -> None:
            mirrored.append(result.delta_version)
            if not args.json:
                print(version_line(result), flush=True)

        result = sync_table(
            spark,
            args.delta_table,
            args.table,
            format_version=args.format_version,
            until_version=args.until_version,
            allowed_roots=args.allow_root,
            executors=settings.executors,
            on_version=progress,
        )
    except MirrorInputError as err:
        return _fail(args, EXIT_BAD_INPUT, err.one_line(), mirrored, spark_log)
    except MirrorConflictError as err:
        return _fail(args, EXIT_CONFLICT, err.one_line(), mirrored, spark_log)
    except Exception as err:  # the one place a traceback is turned into a line
        if settings.debug:
            traceback.print_exc()
        return _fail(args, EXIT_INTERNAL_ERROR, internal_error_line(err, spark_log), mirrored, spark_log)
    if spark_log is not None:
        # Kept only when it may explain a failure (its path is then in the error line).
        Path(spark_log).unlink(missing_ok=True)
    return _report(args, result)


def _up_to_date(
    settings: MirrorSettings,
    delta: DeltaTable,
    table_name: str,
    format_version: int | None,
    latest: int,
    target: int,
) -> SyncResult | None:
    """The run's result when the mirror already shows `target`, answered without a JVM
    (`position_without_jvm`); None when Spark is needed."""
    position = position_without_jvm(settings, delta, table_name, format_version, latest, target)
    if position is None or position.start <= target:
        return None
    return SyncResult(delta.table_root, table_name, position.format_version, position.last_mirrored, latest)


def _report(args: argparse.Namespace, result: SyncResult) -> int:
    if args.json:
        print(json.dumps({"ok": True, **result.to_json()}, indent=2))
        return 0
    if result.start_note is not None:  # the versions before the first mirrored one: why not mirrored
        print(result.start_note)
    if not result.versions:
        print(f"{args.table} is up to date with {args.delta_table} at version {result.latest_delta_version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
