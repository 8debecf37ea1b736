"""`dvmirror sync --follow`: the CLI side of `follow.py` (its output, its exit codes).

stdout, flushed line by line: once the catch-up is done, `following DELTA into TABLE every N s (mirrored
up to version V)`; then one line per mirrored version (the line `dvmirror sync` prints, plus `lag X s`:
now minus the Delta commit's timestamp); `TABLE: expired K snapshots past its retention (…)` when the
table's retention (`DEFAULT_RETENTION`), looked at after the catch-up and then at most every 10 minutes,
expired some (`RetentionKeeper`); `stopped following …` after SIGTERM/SIGINT. With --json, JSON Lines
instead: one object per line, each with an `event` ("following", "version", "expired", "stopped"), a failure
as `{"ok": false, "exit_code", "error", "mirrored_versions", "spark_log"}`. A transient error retried is
one line on stderr (`dvmirror: retrying in D s after: …`).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from dv_assets.mirror.cli.output import (
    EXIT_BAD_INPUT,
    EXIT_CONFLICT,
    EXIT_INTERNAL_ERROR,
    internal_error_line,
)
from dv_assets.mirror.cli.retention import expiry_json, expiry_text
from dv_assets.mirror.errors import MirrorConflictError, MirrorInputError
from dv_assets.mirror.settings import MirrorSettings

if TYPE_CHECKING:  # sync.py imports pyspark: not for `--help`
    from dv_assets.mirror.iceberg.java import IcebergJava
    from dv_assets.mirror.results import VersionResult

DEFAULT_INTERVAL_SECONDS = 5.0


def version_line(result: VersionResult) -> str:
    """The line `dvmirror sync` prints for a mirrored version."""
    return (
        f"mirrored Delta version {result.delta_version} ({result.operation or 'unknown'}) as "
        f"snapshot {result.snapshot_id}: +{result.data_files_added}/-{result.data_files_removed} "
        f"data files, {result.dvs_written} DVs ({_dv_work(result)}), "
        f"{result.bytes_written} bytes in {result.seconds:.2f} s"
    )


def _dv_work(result: VersionResult) -> str:
    """Where the version's DVs were converted and why; the Spark run too when in tasks."""
    if result.dvs_converted_on.startswith("spark"):
        return f"{result.dv_placement}; {result.dvs_converted_on}"
    return result.dv_placement


def _emit(args: argparse.Namespace, text: str, event: dict) -> None:
    print(json.dumps(event) if args.json else text, flush=True)


def _lag_text(lag: float | None) -> str:
    return "lag unknown (no commit timestamp)" if lag is None else f"lag {lag:.1f} s"


def run(args: argparse.Namespace, settings: MirrorSettings, spark_log: str | None) -> int:
    """Follow `args.delta_table` into `args.table` until SIGTERM/SIGINT (0), a refusal (2), an internal
    error (3) or lost races in a row (4). `spark_log`: where the JVM's stderr goes (None: debug)."""
    mirrored: list[int] = []
    interval = args.interval or DEFAULT_INTERVAL_SECONDS

    def fail(code: int, line: str) -> int:
        print(f"dvmirror: {line}", file=sys.stderr, flush=True)
        if args.json:
            report = {"ok": False, "exit_code": code, "error": line, "mirrored_versions": mirrored}
            print(json.dumps({**report, "spark_log": spark_log}), flush=True)
        return code

    def following(version: int | None) -> None:
        where = f"{args.delta_table} into {args.table} every {interval} s"
        event = {"event": "following", "delta_table": args.delta_table, "iceberg_table": args.table}
        _emit(
            args,
            f"following {where} (mirrored up to version {version})",
            {**event, "interval_seconds": interval, "mirrored_version": version},
        )

    def committed(result: VersionResult, lag: float | None) -> None:
        mirrored.append(result.delta_version)
        event = {"event": "version", **asdict(result), "lag_seconds": None if lag is None else round(lag, 3)}
        _emit(args, f"{version_line(result)}, {_lag_text(lag)}", event)

    def retrying(err: BaseException, delay: float) -> None:
        first = str(err).splitlines()[0][:300] if str(err) else ""
        print(
            f"dvmirror: retrying in {delay:.0f} s after: {type(err).__name__}: {first}",
            file=sys.stderr,
            flush=True,
        )

    try:
        # Imported here so that `--help` and argument errors answer without starting a JVM.
        from dv_assets.mirror.follow import follow_table, stop_on_signals
        from dv_assets.mirror.iceberg.maintenance import DEFAULT_RETENTION, RetentionKeeper
        from dv_assets.mirror.spark import get_or_create_spark

        keeper = RetentionKeeper()

        def keep_retention(iceberg: IcebergJava) -> None:
            """The table's retention after the catch-up and then at most every 10 minutes."""
            report = keeper.after_pass(iceberg, args.table)
            if report is not None:
                _emit(
                    args,
                    expiry_text(args.table, report, DEFAULT_RETENTION),
                    {"event": "expired", "iceberg_table": args.table, **(expiry_json(report) or {})},
                )

        with stop_on_signals() as stop:
            spark = get_or_create_spark(settings)
            result = follow_table(
                spark,
                args.delta_table,
                args.table,
                interval=interval,
                stop=stop,
                format_version=args.format_version,
                allowed_roots=args.allow_root,
                executors=settings.executors,
                on_following=following,
                on_version=committed,
                on_retry=retrying,
                after_pass=keep_retention,
            )
    except MirrorInputError as err:
        return fail(EXIT_BAD_INPUT, err.one_line())
    except MirrorConflictError as err:
        return fail(
            EXIT_CONFLICT, f"{err.one_line()} (again after a fresh start: another writer keeps committing)"
        )
    except Exception as err:  # the one place a traceback is turned into a line
        if settings.debug:
            traceback.print_exc()
        return fail(EXIT_INTERNAL_ERROR, internal_error_line(err, spark_log))
    if spark_log is not None:
        Path(spark_log).unlink(missing_ok=True)  # kept only when it may explain a failure
    _emit(
        args,
        f"stopped following {args.delta_table} into {args.table} at version {result.mirrored_version}",
        {"event": "stopped", "mirrored_version": result.mirrored_version, "mirrored_versions": mirrored},
    )
    return 0


def positive_seconds(text: str) -> float:
    """argparse type of --interval: a number of seconds > 0."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not seconds > 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be > 0 seconds, got {text!r}")
    return seconds
