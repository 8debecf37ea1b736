"""`dvmirror verify NAMESPACE.NAME [--version N] [--full] [--delta PATH] [--json]`: the checks that a
mirrored Delta version is exact, for any mirror, outside Dagster: the Dagster asset checks' own
(`exactness_checks`), one `PASS name: summary` / `FAIL name: summary` line each on stdout.

Always `metadata_row_count_matches` (Delta's live rows from its log vs. the snapshot summary's) and
`one_dv_per_data_file` (the snapshot's delete files against Delta's DVs: at most one per data file, each
on a live data file, the same cardinalities): no JVM when pyiceberg reads the catalog. With --full also
`row_count_matches`, the full row-count scan of both tables through Spark, and
`retained_snapshots_readable`: every data file each retained snapshot names exists (a Delta VACUUM the
mirror has not followed, or a file deleted by hand, fails it, naming the snapshot and the file). The
version: --version N, default the newest mirrored one. The Delta table: the one the mirror records, or
--delta (which the mirror must record).

Exit codes: 0 every check passed, 1 a check failed, 2 bad input (no such table, not a dv-mirror mirror,
a version never mirrored or expired, a bad catalog flag: one line on stderr), 3 internal error (the line
names Spark's log when Spark ran; removed after any other outcome). --json: {"ok", "table",
"delta_version", "snapshot_id", "checks": [{"name", "passed", "summary", "details"}]}; bad input or an
internal error: {"ok": false, "exit_code", "error", "spark_log"}.
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
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
    EXIT_CHECK_FAILED,
    EXIT_INTERNAL_ERROR,
    EXIT_STORAGE,
    child_stderr_to_log,
    internal_error_line,
    print_json,
    report_failure,
)
from dv_assets.mirror.errors import MirrorInputError, StorageError

if TYPE_CHECKING:  # pyspark and the checks: not for `dvmirror --help`
    from pyspark.sql import SparkSession

    from dv_assets.mirror.exactness_checks import CheckOutcome
    from dv_assets.mirror.iceberg.mirror_table import MirrorTable, SnapshotFiles
    from dv_assets.mirror.settings import MirrorSettings


def add_parser(commands: argparse._SubParsersAction) -> None:
    verify = mirror_subcommand(
        commands,
        "verify",
        help="check that a mirrored Delta version is exact (the asset checks, outside Dagster)",
        doc=__doc__,
    )
    verify.add_argument(
        "--version",
        type=int,
        dest="delta_version",
        metavar="N",
        help="the Delta version to verify (default: the newest mirrored one)",
    )
    verify.add_argument("--full", action="store_true", help="also scan every row of both tables (Spark)")
    verify.add_argument(
        "--delta", metavar="PATH", help="the Delta table (path or URI); default: the one the mirror records"
    )
    add_catalog_arguments(verify)
    verify.add_argument("--json", action="store_true", help="print one JSON document")
    verify.set_defaults(run=run)


@dataclass(frozen=True)
class Verification:
    table: str
    delta_version: int
    snapshot_id: int
    checks: list[CheckOutcome]

    @property
    def ok(self) -> bool:
        return all(check.passed for check in self.checks)


class _Spark:
    """The Spark session, started once and only when a check needs it, with the JVM's stderr sent to a
    log file (stderr holds one line)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self._args = args
        self._session: SparkSession | None = None
        self.log: str | None = None

    def session(self, delta_location: str | None) -> SparkSession:
        if self._session is None:
            from dv_assets.mirror.spark import check_spark_can_start, get_or_create_spark

            settings = settings_from(self._args, delta_location)  # S3 jars for a Delta table on S3
            check_spark_can_start(settings)  # Java and the jars: one line (exit 2) before Spark's log
            if not settings.debug:
                self.log = child_stderr_to_log()
            self._session = get_or_create_spark(settings)
        return self._session

    def remove_log(self) -> None:
        if self.log is not None:
            Path(self.log).unlink(missing_ok=True)


def verify_mirror(args: argparse.Namespace, settings: MirrorSettings, spark: _Spark) -> Verification:
    """The checks of the version asked for (MirrorInputError: nothing to verify as asked)."""
    from dv_assets.mirror.cli.status import mirrored_delta_root
    from dv_assets.mirror.delta.replay import DeltaTable
    from dv_assets.mirror.exactness_checks import (
        check_metadata_row_count,
        check_one_dv_per_data_file,
        check_row_count_scan,
    )
    from dv_assets.mirror.io import FileIO

    mirror, files_of = _reader(args, settings, spark)
    if mirror is None:
        raise MirrorInputError(f"the catalog has no Iceberg table {args.table}")
    delta_root = mirrored_delta_root(mirror, args.table, args.delta)
    mirrored = sorted({s.delta_version for s in mirror.snapshots if s.delta_version is not None})
    if not mirrored:
        raise MirrorInputError(f"Iceberg table {args.table} holds no mirrored Delta version yet")
    version = mirror.last_mirrored_version if args.delta_version is None else args.delta_version
    snapshot = None if version is None else mirror.snapshot_for_version(version)
    if version is None or snapshot is None:
        raise MirrorInputError(
            f"Iceberg table {args.table} has no snapshot for Delta version {version}: never mirrored, or "
            f"expired (its snapshots hold Delta versions {_ranges(mirrored)})"
        )
    delta = DeltaTable(delta_root, io=FileIO(settings.catalog.storage_properties()))
    checks = [
        check_metadata_row_count(delta, version, args.table, snapshot),
        check_one_dv_per_data_file(delta, version, args.table, snapshot, files_of),
    ]
    if args.full:
        session = spark.session(delta_root)
        checks.append(check_row_count_scan(session, delta, delta_root, version, args.table, snapshot))
        io = FileIO(settings.catalog.storage_properties())
        checks.append(check_retained_snapshots_readable(mirror, files_of, io))
    return Verification(args.table, version, snapshot.snapshot_id, checks)


RETAINED_READABLE = "retained_snapshots_readable"


def check_retained_snapshots_readable(
    mirror: MirrorTable, files_of: Callable[[int], SnapshotFiles], io: Any
) -> CheckOutcome:
    """Every data file each retained mirror snapshot names exists (`--full`: each snapshot's manifests
    read, each distinct file stat'ed once): a Delta VACUUM the mirror has not followed, or a file deleted
    by hand, makes a snapshot no reader can read."""
    from dv_assets.mirror.exactness_checks import CheckOutcome
    from dv_assets.mirror.locations import comparable

    snapshots = mirror.mirror_snapshots()
    named: dict[str, str] = {}  # comparable spelling → the location as the manifests name it
    by_snapshot: dict[int, list[str]] = {}
    for snapshot in snapshots:
        files = sorted(files_of(snapshot.snapshot_id).data_files)
        by_snapshot[snapshot.snapshot_id] = [comparable(f) for f in files]
        for f in files:
            named.setdefault(comparable(f), f)
    keys = list(named)
    sizes = io.file_sizes([named[k] for k in keys]) if keys else []
    gone = {k for k, size in zip(keys, sizes, strict=True) if size is None}
    problems = tuple(
        f"snapshot {s.snapshot_id} (Delta version {s.delta_version}): {named[k]}"
        for s in snapshots
        for k in by_snapshot[s.snapshot_id]
        if k in gone
    )
    unreadable = sorted({s.delta_version for s in snapshots if gone & set(by_snapshot[s.snapshot_id])})
    details: dict[str, Any] = {"snapshots": len(snapshots), "data_files": len(keys), "missing": len(gone)}
    if problems:
        details["problems"] = {"data file missing": problems}
        first = problems[0]
        summary = (
            f"{len(unreadable)} of {len(snapshots)} retained snapshots name a data file that does not exist "
            f"(Delta versions {_ranges(unreadable)}); first: {first}"
        )
        return CheckOutcome(RETAINED_READABLE, False, summary, details)
    summary = f"{len(snapshots)} retained snapshots: all {len(keys)} data files they name exist"
    return CheckOutcome(RETAINED_READABLE, True, summary, details)


def _reader(
    args: argparse.Namespace, settings: MirrorSettings, spark: _Spark
) -> tuple[MirrorTable | None, Callable[[int], SnapshotFiles]]:
    """The mirror table, and a reader of its snapshots' content files: pyiceberg when it reads the
    catalog (no JVM), else Iceberg Java through Spark. Both read the same manifests: the same rows."""
    if settings.catalog.pyiceberg_reads():
        from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table, read_snapshot_files

        return read_mirror_table(settings.catalog, args.table), lambda snapshot_id: read_snapshot_files(
            settings.catalog, args.table, snapshot_id
        )
    from dv_assets.mirror.dv_findings import snapshot_files_with_spark
    from dv_assets.mirror.iceberg.java import IcebergJava

    session = spark.session(args.delta)
    return IcebergJava(session).load(args.table), lambda snapshot_id: snapshot_files_with_spark(
        session, args.table, snapshot_id
    )


def _ranges(versions: list[int]) -> str:
    """Ascending versions as `0..3, 7, 9..12`."""
    runs: list[list[int]] = []
    for v in versions:
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in runs)


def run(args: argparse.Namespace) -> int:
    # pyiceberg warns on stderr (e.g. about an older sqlite catalog schema); stderr is for the one error line.
    logging.getLogger("pyiceberg").setLevel(logging.ERROR)
    spark = _Spark(args)
    debug = False
    try:
        if "." not in args.table:
            raise MirrorInputError(f"an Iceberg table is NAMESPACE.NAME, got {args.table!r}")
        try:
            settings = settings_from(args, args.delta)
        except ValueError as err:
            raise MirrorInputError(str(err).splitlines()[0]) from None
        debug = settings.debug
        check_catalog_reachable(settings.catalog)
        verification = verify_mirror(args, settings, spark)
    except MirrorInputError as err:
        spark.remove_log()  # the line says what is wrong with the input
        return report_failure(args, EXIT_BAD_INPUT, err.one_line(), spark_log=None)
    except StorageError as err:  # the Delta log could not be read: no verdict on the mirror
        spark.remove_log()
        return report_failure(args, EXIT_STORAGE, err.one_line(), spark_log=None)
    except Exception as err:  # a catalog, storage or Spark failure: one line, the traceback when debugging
        if debug:
            traceback.print_exc()
        line = internal_error_line(err, spark_log=spark.log)
        return report_failure(args, EXIT_INTERNAL_ERROR, line, spark_log=spark.log)
    spark.remove_log()  # kept (and named) only after an internal error, which it may explain
    if args.json:
        print_json(_report(verification))
    else:
        for check in verification.checks:
            print(f"{'PASS' if check.passed else 'FAIL'} {check.name}: {check.summary}")
    sys.stdout.flush()
    return 0 if verification.ok else EXIT_CHECK_FAILED


def _report(verification: Verification) -> dict[str, Any]:
    return {
        "ok": verification.ok,
        "table": verification.table,
        "delta_version": verification.delta_version,
        "snapshot_id": verification.snapshot_id,
        "checks": [asdict(check) for check in verification.checks],
    }
