"""`dvmirror sync --tables FILE [--follow]`: many tables in one process and one Spark session (`fleet.py`).

FILE holds `DeltaMirrorComponent` documents, the format the Dagster code location reads
(`dv_assets/defs/tables/defs.yaml`, DVMIRROR_SOURCES; read by the engine's `load_tables_file`, no Dagster
loaded): per table `name`, `delta_path` (relative: to FILE's folder), `iceberg_table`,
`format_version`, `allowed_roots`, `retention` and the shared `catalog` (the catalog flags go over it:
flags > file > environment > defaults); the Dagster-only attributes (cleanup_cron, freshness,
start_running) are read and not used here. A bad file (missing, not YAML, an unknown key, a wrong type, a
duplicate name) is exit 2 and one line naming the file, the line and the key, before anything starts.

Each table's `retention:` (else `DEFAULT_RETENTION`) is applied as the Dagster cleanup applies it, after
its pass reaches Delta's latest version (once: at the end; following: after the catch-up, then at most
every 10 minutes): snapshots past it expired, the mirror's own files only they used deleted
(`RetentionKeeper`). A table up to date whose snapshots are past retention is not answered without a
JVM: its expiry needs Iceberg Java.

Once (no --follow): each table is checked without a JVM first (its path, its mirror read through pyiceberg:
a table already up to date, or refused, answers there), then the others are mirrored in one Spark session
(`cli/follow.run_in_one_session`, the one front end of `fleet.run_fleet`), the most behind first, at most
--concurrency at a time; a table refused or failing does not stop the others. --follow: after each table's
catch-up, it keeps mirroring each new version as it appears, polling every --interval seconds, until
SIGTERM/SIGINT (which ends the passes in flight between versions) or until every table has ended. What is
retried is `follow.py`'s one policy: a transient error with the table's own backoff (1 s doubling to 60 s;
once: 3 passes in all), a first lost race at once; a refusal, a second lost race in a row, a storage error
that is a definite answer or any other error ends the table.

Output, flushed line by line. Text: one line per event, naming the Iceberg table first:
  `NS.T: mirrored Delta version V (…)` (the single-table line; while following `, lag X s` is added),
  `NS.T is up to date with DELTA at version V`, `NS.T: mirrored up to Delta version V (K versions)`,
  `NS.T: following DELTA every N s (mirrored up to version V)`,
  `NS.T: expired K snapshots past its retention (…; Delta versions …); deleted F of the mirror's files, B
  bytes`, a failure on stderr as
  `dvmirror: NS.T: <the one error line>; retrying in D s` (or `; not retried`), and last
  `synced|stopped following N tables: A mirrored, R refused, E failed, C conflicts[, S not reached]`.
With --json, JSON Lines on stdout instead, one object per event, each with `event` and, per table,
`table` (the document's name), `iceberg_table` and `delta_table`:
  {"event": "session", "tables", "concurrency", "spark_application", "jvm_pid"}   once Spark started
  {"event": "version", …table, **the version's fields (as `sync --json`'s `versions`), "lag_seconds"}
  {"event": "synced", …table, "mirrored_version", "latest_delta_version", "versions_mirrored",
   "start_note"}                         a table up to date (once; also a following table's catch-up)
  {"event": "following", …table, "interval_seconds", "mirrored_version"}
  {"event": "expired", …table, "snapshots_expired", "expired_snapshot_ids", "expired_delta_versions",
   "snapshots_retained", "deleted_files", "files_reclaimed", "bytes_reclaimed"}
  {"event": "failed", …table, "exit_code", "error", "retry_in_seconds" (null: not retried)}
  {"event": "summary", "ok", "exit_code", "stopped", "spark_application", "jvm_pid" (null: no JVM was
   needed), "spark_log", "tables": [{…table, "state", "exit_code", "mirrored_version",
   "versions_mirrored"}]}     last; `state`: mirrored, refused, error, conflict, storage error or not reached
The failure lines go to stderr in both modes.

Exit code: the worst of the tables' (3 internal error > 2 refused > 5 storage error > 4 conflict > 0), as
their last pass left them: 0 every table mirrored; a bad tables file or flags: 2 before anything starts; a
Spark session that is gone ends the run with 3. After SIGTERM/SIGINT the same sum: 0 when every table's
last pass succeeded.
"""

from __future__ import annotations

import argparse
import traceback
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dv_assets.mirror.cli.arguments import (
    check_catalog_reachable,
    not_a_local_delta_table,
    position_without_jvm,
    settings_from,
)
from dv_assets.mirror.cli.follow import SessionOutput, error_line, lag_text, run_in_one_session, version_line
from dv_assets.mirror.cli.output import (
    EXIT_BAD_INPUT,
    EXIT_CONFLICT,
    EXIT_INTERNAL_ERROR,
    EXIT_STORAGE,
    refusal_line,
    report_failure,
)
from dv_assets.mirror.cli.retention import expiry_json, expiry_text
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.errors import MirrorInputError, StorageError, worst_exit_code
from dv_assets.mirror.iceberg.maintenance import DEFAULT_RETENTION, Retention, retention_due
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from dv_assets.mirror.table_spec import FleetTable, load_tables_file

if TYPE_CHECKING:  # fleet.py imports pyspark: not for `--help` nor a run answered without a JVM
    from pyspark.sql import SparkSession

    from dv_assets.mirror.fleet import FleetResult
    from dv_assets.mirror.iceberg.maintenance import MaintenanceReport
    from dv_assets.mirror.results import SyncResult, VersionResult

STATES = {
    0: "mirrored",
    EXIT_BAD_INPUT: "refused",
    EXIT_INTERNAL_ERROR: "error",
    EXIT_CONFLICT: "conflict",
    EXIT_STORAGE: "storage error",
}


def add_arguments(sync: argparse.ArgumentParser) -> None:
    sync.add_argument(
        "--tables",
        metavar="FILE",
        help="mirror every table of FILE (DeltaMirrorComponent documents, the format of the Dagster code "
        "location's defs.yaml / DVMIRROR_SOURCES) in one process and one Spark session, instead of "
        "DELTA_TABLE --table",
    )
    sync.add_argument(
        "--concurrency",
        type=_positive_int,
        metavar="N",
        help="with --tables: at most N tables mirrored at a time in the one session (default 1)",
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return value


class FleetOutput(SessionOutput):
    """A tables file's output (the module docstring), and its tally of the tables answered without a JVM."""

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        # Per table answered without a JVM: (table fields, exit code, mirrored version).
        self.answered: list[tuple[dict[str, Any], int, int | None]] = []
        self.application: str | None = None

    def session(self, spark: SparkSession, tables: int) -> None:
        self.application = str(spark.sparkContext.applicationId)
        self.emit(
            f"one Spark session ({self.application}) for {tables} tables",
            {
                "event": "session",
                "tables": tables,
                "concurrency": self.args.concurrency or 1,
                "spark_application": self.application,
                "jvm_pid": int(spark._jvm.java.lang.ProcessHandle.current().pid()),
            },
        )

    def version(self, table: FleetTable, result: VersionResult, lag_seconds: float | None) -> None:
        text = f"{table.iceberg_table}: {version_line(result)}"
        if self.follow:
            text += f", {lag_text(lag_seconds)}"
        lag = None if lag_seconds is None else round(lag_seconds, 3)
        self.emit(text, {"event": "version", **_fields(table), **asdict(result), "lag_seconds": lag})

    def caught_up(self, table: FleetTable, result: SyncResult, first: bool, versions: int) -> None:
        if not first:
            return
        if result.start_note is not None and not self.json:
            self.emit(f"{table.iceberg_table}: {result.start_note}", {})
        self.synced(table, result.latest_delta_version, result.latest_delta_version, versions)
        if self.follow:
            where = f"{table.delta_path} every {self.interval:g} s"
            self.emit(
                f"{table.iceberg_table}: following {where} (mirrored up to version "
                f"{result.latest_delta_version})",
                {
                    "event": "following",
                    **_fields(table),
                    "interval_seconds": self.interval,
                    "mirrored_version": result.latest_delta_version,
                },
            )

    def failed(self, table: FleetTable, code: int, error: BaseException, retry_in: float | None) -> None:
        line = error_line(error, None)
        then = "not retried" if retry_in is None else f"retrying in {retry_in:.0f} s"
        event = {"event": "failed", **_fields(table), "exit_code": code, "error": line}
        self.emit(
            f"{table.iceberg_table}: {line}; {then}", {**event, "retry_in_seconds": retry_in}, error=True
        )

    def synced(
        self, table: FleetTable, mirrored: int | None, latest: int, count: int, note: str | None = None
    ) -> None:
        if count == 0:
            text = f"{table.iceberg_table} is up to date with {table.delta_path} at version {latest}"
        else:
            text = f"{table.iceberg_table}: mirrored up to Delta version {mirrored} ({count} versions)"
        event = {
            "event": "synced",
            **_fields(table),
            "mirrored_version": mirrored,
            "latest_delta_version": latest,
            "versions_mirrored": count,
            "start_note": note,
        }
        self.emit(text, event)

    def expired(self, table: FleetTable, report: MaintenanceReport, retention: Retention) -> None:
        self.emit(
            expiry_text(table.iceberg_table, report, retention),
            {"event": "expired", **_fields(table), **(expiry_json(report) or {})},
        )

    def refused_without_jvm(self, table: FleetTable, code: int, line: str) -> None:
        self.answered.append((_fields(table), code, None))
        event = {"event": "failed", **_fields(table), "exit_code": code, "error": line}
        self.emit(
            f"{table.iceberg_table}: {line}; not retried", {**event, "retry_in_seconds": None}, error=True
        )

    def up_to_date_without_jvm(self, table: FleetTable, version: int | None, latest: int) -> None:
        self.answered.append((_fields(table), 0, version))
        self.synced(table, version, latest, 0)

    def crashed(self, code: int, line: str) -> int:
        return report_failure(self.args, code, line, spark_log=self.spark_log)

    def ended(self, result: FleetResult | None) -> int:
        return _summary(self, result)


def _fields(table: FleetTable) -> dict[str, Any]:
    return {"table": table.name, "iceberg_table": table.iceberg_table, "delta_table": table.delta_path}


def run(args: argparse.Namespace) -> int:
    """`dvmirror sync --tables FILE`: see the module docstring."""
    wrong = _flags_refused(args)
    if wrong is not None:
        return report_failure(args, EXIT_BAD_INPUT, wrong)
    try:
        settings, tables, retentions = load_tables(args)
        check_catalog_reachable(settings.catalog)
    except (MirrorInputError, ValueError) as err:
        return report_failure(args, EXIT_BAD_INPUT, refusal_line(err))
    output = FleetOutput(args)
    to_mirror = [
        t
        for t in (
            _checked(output, settings, t, retentions.get(t.iceberg_table, DEFAULT_RETENTION)) for t in tables
        )
        if t is not None
    ]
    if not to_mirror:  # every table answered without a JVM
        return output.ended(None)
    try:
        from dv_assets.mirror.spark import check_spark_can_start

        check_spark_can_start(settings)  # Java and the jars: one line (exit 2) before Spark's log
    except MirrorInputError as err:
        return report_failure(args, EXIT_BAD_INPUT, err.one_line())
    return run_in_one_session(settings, to_mirror, retentions, output)


def _flags_refused(args: argparse.Namespace) -> str | None:
    """The line refusing flags that cannot go with --tables; None when they all can."""
    wrong = [
        flag
        for flag, given in (
            ("DELTA_TABLE", args.delta_table),
            ("--table", args.table),
            ("--format-version", args.format_version),
            ("--until-version", args.until_version),
            ("--allow-root", args.allow_root),
        )
        if given
    ]
    if wrong:
        return f"--tables names every table and its settings: it cannot be combined with {', '.join(wrong)}"
    if args.interval is not None and not args.follow:
        return "--interval applies to --follow only"
    return None


def load_tables(args: argparse.Namespace) -> tuple[MirrorSettings, list[FleetTable], dict[str, Retention]]:
    """The settings, the tables of the file and each one's retention (by Iceberg table). The catalog:
    the flags over the tables' shared `catalog` (the file), else over --config / the environment, as
    `MirrorSettings.resolve` orders them. A bad file is a ConfigFileError (one line: file, line, key)."""
    path = Path(args.tables)
    without_file: list[MirrorSettings] = []

    def flags_catalog() -> CatalogConfig:
        """The catalog of the flags over --config, the environment, the defaults: asked only for a table
        without `catalog:`."""
        without_file.append(settings_from(args))
        return without_file[0].catalog

    mirrors = load_tables_file(path, flags_catalog)
    if not mirrors:
        raise MirrorInputError(f"tables file {path.absolute()}: no tables")
    shared = mirrors[0][1]  # one catalog for all (load_tables_file refuses two)
    if without_file and shared == without_file[0].catalog:
        settings = without_file[0]
    else:  # the file's catalog, the flags over it
        settings = settings_from(args, file_catalog=shared.properties)
    for spec, _ in mirrors:
        settings = settings.for_location(spec.location)
    tables = [FleetTable(spec) for spec, _ in mirrors]
    return settings, tables, {spec.iceberg_table: spec.retention for spec, _ in mirrors}


def _checked(
    fleet: FleetOutput, settings: MirrorSettings, table: FleetTable, retention: Retention
) -> FleetTable | None:
    """The table to mirror (with its mirrored version when read), or None when answered without a JVM:
    refused, or (once) up to date with no snapshot past `retention`. While following, a refusal is the
    engine's to report and retry."""
    problem = not_a_local_delta_table(table.delta_path)
    try:
        if problem is not None:
            raise MirrorInputError(
                problem.removeprefix(f"table {table.delta_path}: "), table=table.delta_path
            )
        delta = DeltaTable(table.location, io=FileIO(settings.catalog.storage_properties()))
        latest = delta.latest_version()
        position = position_without_jvm(
            settings, delta, table.iceberg_table, table.format_version, latest, latest
        )
    except MirrorInputError as err:
        return _refused(fleet, table, EXIT_BAD_INPUT, err.one_line())
    except StorageError:
        return table  # the storage did not answer here: the engine's passes retry it and report it
    except (OSError, ValueError) as err:
        return _refused(fleet, table, EXIT_BAD_INPUT, f"table {table.delta_path}: {err}")
    except Exception:  # pyiceberg could not answer: Iceberg Java, the sync's own reader, will
        if settings.debug:
            traceback.print_exc()
        return table
    if position is None:
        return table
    due = retention_due(position.snapshot_times_ms, retention)
    if position.start > latest and not fleet.follow and not due:
        fleet.up_to_date_without_jvm(table, position.last_mirrored, latest)
        return None
    return replace(table, mirrored_hint=position.last_mirrored)


def _refused(fleet: FleetOutput, table: FleetTable, code: int, line: str) -> FleetTable | None:
    fleet.refused_without_jvm(table, code, line)
    return None


def _summary(fleet: FleetOutput, result: FleetResult | None) -> int:
    """The last line (or object), and the exit code: the worst of the tables'."""
    rows: list[tuple[dict[str, Any], int | None, int | None, int]] = [
        (fields, code, version, 0) for fields, code, version in fleet.answered
    ]
    if result is not None:
        rows += [
            (_fields(s.table), s.outcome, s.mirrored_version, s.versions_mirrored) for s in result.tables
        ]
    exit_code = worst_exit_code([code or 0 for _, code, _, _ in rows])
    states = [STATES[code] if code is not None else "not reached" for _, code, _, _ in rows]
    spark_log = fleet.spark_log
    if spark_log is not None and exit_code == 0:
        Path(spark_log).unlink(missing_ok=True)  # kept only when it may explain a failure
        spark_log = None
    counts = {state: states.count(state) for state in (*STATES.values(), "not reached")}
    verb = "stopped following" if fleet.follow else "synced"
    tally = ", ".join(f"{n} {state}" for state, n in counts.items() if n or state in ("mirrored", "refused"))
    log = "" if spark_log is None else f" (Spark's log: {spark_log})"
    fleet.emit(
        f"{verb} {len(rows)} tables: {tally}; exit {exit_code}{log}",
        {
            "event": "summary",
            "ok": exit_code == 0,
            "exit_code": exit_code,
            "stopped": bool(result is not None and result.stopped),
            "spark_application": fleet.application,
            "jvm_pid": None if result is None else result.jvm_pid,
            "spark_log": spark_log,
            "tables": [
                {
                    **fields,
                    "state": state,
                    "exit_code": code or 0,
                    "mirrored_version": version,
                    "versions_mirrored": n,
                }
                for (fields, code, version, n), state in zip(rows, states, strict=True)
            ],
        },
    )
    return exit_code
