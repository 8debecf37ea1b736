"""The one CLI front end of `fleet.run_fleet`: `dvmirror sync DELTA --table T [--follow]` (a fleet of one)
and `dvmirror sync --tables FILE [--follow]` (cli/fleet.py) start one Spark session, run the one loop in
it and print what it reports through an output of their own (`SessionOutput`): the tables file's lines
name their table (`FleetOutput`), one table's keep the single-table contract: following
(`OneTableOutput`, here), once (`cli/sync.OnceOutput`: the lines and the one JSON document it always
printed).

One table following, stdout, flushed line by line: once the catch-up is done, `following DELTA into TABLE
every N s (mirrored up to version V)`; then one line per mirrored version (the line `dvmirror sync` prints,
plus `lag X s`: now minus the Delta commit's timestamp); `TABLE: expired K snapshots past its retention (…)`
when the table's retention (`DEFAULT_RETENTION`), looked at after the catch-up and then at most every 10
minutes, expired some (`RetentionKeeper`); `stopped following …` after SIGTERM/SIGINT. With --json, JSON Lines
instead: one object per line, each with an `event` ("following", "version", "expired", "stopped"), a failure
as `{"ok": false, "exit_code", "error", "mirrored_versions", "spark_log"}`. An error retried is one line on
stderr (`dvmirror: retrying in D s after: …`); what is retried and what ends the run is `follow.py`'s policy.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import traceback
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dv_assets.mirror.cli.output import (
    EXIT_CONFLICT,
    EXIT_INTERNAL_ERROR,
    child_stderr_to_log,
    internal_error_line,
)
from dv_assets.mirror.cli.retention import expiry_json, expiry_text
from dv_assets.mirror.errors import MirrorConflictError, MirrorInputError, StorageError
from dv_assets.mirror.settings import MirrorSettings

if TYPE_CHECKING:  # fleet.py imports pyspark: not for `--help`
    from pyspark.sql import SparkSession

    from dv_assets.mirror.fleet import FleetResult, FleetTable
    from dv_assets.mirror.iceberg.java import IcebergJava
    from dv_assets.mirror.iceberg.maintenance import MaintenanceReport, Retention
    from dv_assets.mirror.results import SyncResult, VersionResult

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


def lag_text(lag: float | None) -> str:
    return "lag unknown (no commit timestamp)" if lag is None else f"lag {lag:.1f} s"


def error_line(error: BaseException, spark_log: str | None) -> str:
    """A pass's error as one line: its own for a refusal, a lost race or a storage error."""
    if isinstance(error, MirrorInputError | MirrorConflictError | StorageError):
        return error.one_line()
    return internal_error_line(error, spark_log)  # type: ignore[arg-type]


def retrying_line(error: BaseException, delay: float) -> None:
    """An error about to be retried: one line on stderr (one table's sync, once or following)."""
    first = str(error).splitlines()[0][:300] if str(error) else ""
    print(
        f"dvmirror: retrying in {delay:.0f} s after: {type(error).__name__}: {first}",
        file=sys.stderr,
        flush=True,
    )


class SessionOutput:
    """What a run in one session prints: `fleet.FleetListener`'s events (`version` from the passes'
    threads, hence the lock), and the run's own. Subclasses say how."""

    # SIGTERM/SIGINT end the run between versions (`follow.stop_on_signals`); False: the signal's default.
    stops_on_signals = True

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.json = bool(args.json)
        self.follow = bool(args.follow)
        self.interval: float = args.interval or DEFAULT_INTERVAL_SECONDS
        self.spark_log: str | None = None  # where the JVM's stderr goes, once the run made it
        self.debug = False  # the settings' `debug`, once the run has them
        self._lock = threading.Lock()

    def emit(self, text: str, event: dict[str, Any], *, error: bool = False) -> None:
        """`text` (an `error`: on stderr), or with --json `event` as one line on stdout."""
        with self._lock:
            if error:
                print(f"dvmirror: {text}", file=sys.stderr, flush=True)
            if self.json:
                print(json.dumps(event), flush=True)
            elif not error:
                print(text, flush=True)

    def session(self, spark: SparkSession, tables: int) -> None:
        """Spark started, for `tables` tables."""

    def version(self, table: FleetTable, result: VersionResult, lag_seconds: float | None) -> None:
        raise NotImplementedError

    def caught_up(self, table: FleetTable, result: SyncResult, first: bool, versions: int) -> None:
        raise NotImplementedError

    def failed(self, table: FleetTable, code: int, error: BaseException, retry_in: float | None) -> None:
        raise NotImplementedError

    def expired(self, table: FleetTable, report: MaintenanceReport, retention: Retention) -> None:
        raise NotImplementedError

    def crashed(self, code: int, line: str) -> int:
        """The run ended by an error of no one table (the session gone, a bug): reported; its exit code."""
        raise NotImplementedError

    def ended(self, result: FleetResult) -> int:
        """The run's last line (or object), and its exit code."""
        raise NotImplementedError


def run_in_one_session(
    settings: MirrorSettings,
    tables: list[FleetTable],
    retentions: dict[str, Retention],
    output: SessionOutput,
) -> int:
    """Mirror `tables` (once, or following) in one Spark session with `fleet.run_fleet`, each table's
    retention applied after its passes that reach Delta's latest version (`RetentionKeeper`), reported
    through `output`; the exit code. Java and the jars are checked by the caller."""
    spark_log = output.spark_log = None if settings.debug else child_stderr_to_log()
    output.debug = settings.debug
    try:
        # Imported here so that `--help` and argument errors answer without starting a JVM.
        from dv_assets.mirror.fleet import run_fleet
        from dv_assets.mirror.follow import stop_on_signals
        from dv_assets.mirror.iceberg.maintenance import RetentionKeeper
        from dv_assets.mirror.spark import get_or_create_spark

        keeper = RetentionKeeper(retentions)

        def keep_retention(table: FleetTable, iceberg: IcebergJava) -> None:
            report = keeper.after_pass(iceberg, table.iceberg_table)
            if report is not None:
                output.expired(table, report, keeper.retention(table.iceberg_table))

        stopping = stop_on_signals() if output.stops_on_signals else nullcontext(threading.Event())
        with stopping as stop:
            spark = get_or_create_spark(settings)
            output.session(spark, len(tables))
            result = run_fleet(
                spark,
                tables,
                stop=stop,
                listener=output,  # type: ignore[arg-type]  # FleetListener's methods, without the import
                follow=output.follow,
                interval=output.interval,
                concurrency=getattr(output.args, "concurrency", None) or 1,
                executors=settings.executors,
                after_pass=keep_retention,
            )
    except Exception as err:  # the one place a traceback is turned into a line (the session gone too)
        if settings.debug:
            traceback.print_exc()
        return output.crashed(EXIT_INTERNAL_ERROR, internal_error_line(err, spark_log))
    return output.ended(result)


class OneTableOutput(SessionOutput):
    """`dvmirror sync DELTA --table T --follow`'s output (the module docstring)."""

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.mirrored: list[int] = []
        self.final: tuple[int, str] | None = None  # the error that ended the table: its code and line

    def version(self, table: FleetTable, result: VersionResult, lag_seconds: float | None) -> None:
        self.mirrored.append(result.delta_version)
        lag = None if lag_seconds is None else round(lag_seconds, 3)
        event = {"event": "version", **asdict(result), "lag_seconds": lag}
        self.emit(f"{version_line(result)}, {lag_text(lag_seconds)}", event)

    def caught_up(self, table: FleetTable, result: SyncResult, first: bool, versions: int) -> None:
        if not first:
            return
        version = result.latest_delta_version
        where = f"{table.delta_path} into {table.iceberg_table} every {self.interval} s"
        event = {"event": "following", "delta_table": table.delta_path, "iceberg_table": table.iceberg_table}
        self.emit(
            f"following {where} (mirrored up to version {version})",
            {**event, "interval_seconds": self.interval, "mirrored_version": version},
        )

    def failed(self, table: FleetTable, code: int, error: BaseException, retry_in: float | None) -> None:
        if retry_in is None:
            line = error_line(error, self.spark_log)
            if code == EXIT_CONFLICT:
                line += " (again after a fresh start: another writer keeps committing)"
            self.final = (code, line)
            return
        retrying_line(error, retry_in)

    def expired(self, table: FleetTable, report: MaintenanceReport, retention: Retention) -> None:
        self.emit(
            expiry_text(table.iceberg_table, report, retention),
            {"event": "expired", "iceberg_table": table.iceberg_table, **(expiry_json(report) or {})},
        )

    def crashed(self, code: int, line: str) -> int:
        print(f"dvmirror: {line}", file=sys.stderr, flush=True)
        if self.json:
            report = {"ok": False, "exit_code": code, "error": line, "mirrored_versions": self.mirrored}
            print(json.dumps({**report, "spark_log": self.spark_log}), flush=True)
        return code

    def ended(self, result: FleetResult) -> int:
        if self.final is not None:  # the table ended by an error: the run's
            return self.crashed(*self.final)
        if self.spark_log is not None:
            Path(self.spark_log).unlink(missing_ok=True)  # kept only when it may explain a failure
        (state,) = result.tables
        version = state.mirrored_version
        self.emit(
            f"stopped following {self.args.delta_table} into {self.args.table} at version {version}",
            {"event": "stopped", "mirrored_version": version, "mirrored_versions": self.mirrored},
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
