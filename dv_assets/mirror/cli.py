"""`dvmirror`: mirror a Delta table with deletion vectors into Iceberg from the command line.

    dvmirror sync DELTA_TABLE_PATH --table NAMESPACE.NAME [--catalog-uri sqlite:///PATH/catalog.db]
        [--catalog-property KEY=VALUE ...] [--config FILE] [--warehouse PATH|URI]
        [--format-version 3|2] [--until-version N] [--allow-root PATH ...] [--json]
    dvmirror status NAMESPACE.NAME ... [--delta PATH] [catalog flags] [--json]        (no JVM)
    dvmirror expire NAMESPACE.NAME --retain-last N [--older-than DURATION] [--dry-run] [catalog flags]
        [--json]
    dvmirror --version

The catalog: Iceberg's own catalog properties, e.g. `--catalog-property type=rest --catalog-property
uri=http://127.0.0.1:8181 --catalog-property warehouse=s3://bucket/wh --catalog-property
s3.endpoint=http://127.0.0.1:9000`, or the same keys under `catalog:` in a YAML file (--config FILE or
DVMIRROR_CONFIG; flags override it). Default: the embedded sqlite catalog ./.dvmirror/catalog.db.
The Delta table may be a local path or an s3:// / s3a:// URI (the catalog's s3.* properties or the AWS
environment give the endpoint and credentials). Every setting and variable: `dv_assets.mirror.settings`.
Set DVMIRROR_DEBUG=1 to see the traceback of an internal error.

Exit codes: 0 done (also when there was nothing new), 2 bad input (one line on stderr naming the table,
the version, the file and the reason; the mirror stays at its last good version), 3 internal error,
4 conflict (another writer committed to the Iceberg table meanwhile; nothing of this run was committed;
rerun). With --json a failure is reported on stdout too: {"ok": false, "exit_code", "error",
"mirrored_versions" (those committed before the failure), "spark_log"}.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import traceback
from importlib.metadata import version
from pathlib import Path

from dv_assets.mirror.cli_args import add_catalog_arguments, internal_error_line, settings_from
from dv_assets.mirror.cli_expire import add_expire_parser
from dv_assets.mirror.cli_status import add_status_command
from dv_assets.mirror.cli_verify import add_verify_parser
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.errors import (
    EXIT_BAD_INPUT,
    EXIT_CONFLICT,
    EXIT_INTERNAL_ERROR,
    MirrorConflictError,
    MirrorInputError,
)
from dv_assets.mirror.io import FileIO


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
    sync.add_argument("delta_table", help="path of the Delta table (the folder holding _delta_log)")
    sync.add_argument("--table", required=True, help="Iceberg table, NAMESPACE.NAME")
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
    add_expire_parser(commands)
    add_verify_parser(commands)
    return parser


def _child_stderr_to_log() -> str:
    """Send what the Spark JVM (a child process, inheriting fd 2) prints to a log file; its path.

    The JVM and Spark's default log4j profile write a few lines to stderr; the contract is one line on
    stderr for bad input. Python's own `sys.stderr` keeps the original stream.
    """
    log = tempfile.NamedTemporaryFile(prefix="dvmirror-spark-", suffix=".log", delete=False)  # noqa: SIM115
    sys.stderr.flush()
    original = os.dup(2)
    os.dup2(log.fileno(), 2)
    log.close()
    sys.stderr = os.fdopen(original, "w", buffering=1)
    return log.name


def _fail(args: argparse.Namespace, code: int, line: str, mirrored: list[int], spark_log: str | None) -> int:
    """One line on stderr; with --json the same failure, and what was committed before it, on stdout."""
    print(f"dvmirror: {line}", file=sys.stderr)
    if getattr(args, "json", False):
        report = {"ok": False, "exit_code": code, "error": line, "mirrored_versions": mirrored}
        print(json.dumps({**report, "spark_log": spark_log}, indent=2))
    return code


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command != "sync":  # a subcommand of its own module (`run` set by its parser)
        return args.run(args)
    mirrored: list[int] = []  # versions committed by this run, for a failure report
    spark_log: str | None = None
    if "." not in args.table:
        return _fail(
            args, EXIT_BAD_INPUT, f"--table must be NAMESPACE.NAME, got {args.table!r}", mirrored, None
        )
    if "://" not in args.delta_table:
        if not Path(args.delta_table).exists():
            reason = f"table {args.delta_table}: no such path"
            return _fail(args, EXIT_BAD_INPUT, reason, mirrored, None)
        if not (Path(args.delta_table) / "_delta_log").is_dir():
            reason = f"table {args.delta_table}: no _delta_log folder: not a Delta table"
            return _fail(args, EXIT_BAD_INPUT, reason, mirrored, None)
    try:
        settings = settings_from(args, args.delta_table)
    except ValueError as err:
        return _fail(args, EXIT_BAD_INPUT, str(err), mirrored, None)
    if args.until_version is not None:
        # Answered from the log before a JVM starts: a version past the latest is a typo, not "up to date".
        try:
            io = FileIO(settings.catalog.storage_properties())
            latest = DeltaTable(args.delta_table, enforce_protocol=False, io=io).latest_version()
        except (OSError, ValueError, MirrorInputError) as err:
            return _fail(args, EXIT_BAD_INPUT, f"table {args.delta_table}: {err}", mirrored, None)
        if args.until_version > latest:
            reason = (
                f"table {args.delta_table}: --until-version {args.until_version} is past the latest "
                f"Delta version {latest}"
            )
            return _fail(args, EXIT_BAD_INPUT, reason, mirrored, None)
    try:
        # Imported here so that `--help` and argument errors answer without starting a JVM.
        from dv_assets.mirror.spark import get_or_create_spark
        from dv_assets.mirror.sync import sync_table

        if not settings.debug:
            spark_log = _child_stderr_to_log()
        spark = get_or_create_spark(settings)

        def progress(result) -> None:
            mirrored.append(result.delta_version)
            if not args.json:
                print(
                    f"mirrored Delta version {result.delta_version} ({result.operation or 'unknown'}) as "
                    f"snapshot {result.snapshot_id}: +{result.data_files_added}/-{result.data_files_removed} "
                    f"data files, {result.dvs_written} DVs ({result.dvs_converted_on}), "
                    f"{result.bytes_written} bytes in {result.seconds:.2f} s",
                    flush=True,
                )

        result = sync_table(
            spark,
            args.delta_table,
            args.table,
            format_version=args.format_version,
            until_version=args.until_version,
            allowed_roots=args.allow_root,
            executor_threshold=settings.executor_threshold,
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
    if args.json:
        print(json.dumps({"ok": True, **result.to_json()}, indent=2))
    elif not result.versions:
        print(f"{args.table} is up to date with {args.delta_table} at version {result.latest_delta_version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
