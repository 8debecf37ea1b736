"""The asset checks of the NEWEST mirrored version of every table, for CI against a deployment's catalog:

```bash
python -m dv_assets.ci_checks [--table NAME ...]     # or: dvmirror-checks; make ci-checks
```

Tables and catalog are the code location's (`dv_assets.definitions`: dv_assets/defs/tables/defs.yaml, or
the file DVMIRROR_SOURCES names; the catalog from their `catalog`, else DVMIRROR_CONFIG's, else
DVMIRROR_CATALOG_URI / DVMIRROR_WAREHOUSE). For each table it reads the newest mirrored Delta version
from the catalog (pyiceberg), adds that version's partition to the Dagster instance when it lacks it (a
fresh instance; `$DAGSTER_HOME`'s when set, else a temporary one), and executes the table's
`checks_<name>` job on it: every check, blocking or not, and the lag check on the table as it is now
(`mirror_lag_within_freshness`, no version: is the mirror behind Delta beyond its freshness window?).
One line per check on stdout:

    PASS demo_events v15 metadata_row_count_matches
    WARN demo_events - mirror_lag_within_freshness: 2 version(s) behind (Delta 16..17 not mirrored); ...
    FAIL demo_events v15 row_count_matches: Delta v15: 35 rows (log), 35 (Delta read); Iceberg ...

Exit codes: 0 every check passed (or failed with WARN severity only); 1 a check failed, a table has no
mirrored version, or a checks run failed without evaluating; 2 the configuration could not be loaded.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import dagster as dg

from dv_assets.definitions import load_definitions
from dv_assets.defs.delta.assets import partition_key
from dv_assets.defs.factory import sources_of, spark_resource_of
from dv_assets.defs.iceberg.checks import CHECK_NAMES
from dv_assets.defs.iceberg.freshness import MIRROR_LAG_CHECK
from dv_assets.defs.sources import DeltaSource
from dv_assets.mirror.iceberg.pyiceberg_reader import last_mirrored_version

# Step logs stay in the instance; the command prints its own lines.
QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


@dataclass(frozen=True)
class CheckLine:
    table: str
    version: int | None
    check: str
    passed: bool
    detail: str = ""
    warning: bool = False  # failed with WARN severity: shown, but does not fail the command

    @property
    def ok(self) -> bool:
        return self.passed or self.warning

    def __str__(self) -> str:
        version = "-" if self.version is None else f"v{self.version}"
        status = "PASS" if self.passed else "WARN" if self.warning else "FAIL"
        text = f"{status} {self.table} {version} {self.check}"
        return f"{text}: {self.detail}" if self.detail else text


# The error of a step whose blocking checks failed (their evaluations say which and why).
BLOCKING_CHECKS_FAILED = "DagsterAssetCheckFailedError"


def check_newest_version(
    defs: dg.Definitions, source: DeltaSource, instance: dg.DagsterInstance
) -> list[CheckLine]:
    """Run `checks_<name>` on the table's newest mirrored version; one line per check."""
    catalog = spark_resource_of(defs).settings.catalog
    version = last_mirrored_version(catalog, source.iceberg_table)
    if version is None:
        return [
            CheckLine(source.name, None, "mirrored", False, f"{source.iceberg_table} has no mirrored version")
        ]
    key = partition_key(version)
    # A fresh instance knows no partitions: the sensor adds them as it finds Delta versions.
    if not instance.has_dynamic_partition(source.partitions_name, key):
        instance.add_dynamic_partitions(source.partitions_name, [key])
    result = defs.resolve_job_def(source.checks_job_name).execute_in_process(
        instance=instance, tags={"dagster/partition": key}, run_config=QUIET, raise_on_error=False
    )
    lines = [
        CheckLine(
            source.name,
            None if e.partition is None else version,  # the lag check: the table now, no version
            e.check_name,
            e.passed,
            "" if e.passed else (e.description or ""),
            warning=e.severity == dg.AssetCheckSeverity.WARN,
        )
        for e in sorted(result.get_asset_check_evaluations(), key=lambda e: e.check_name)
    ]
    evaluated = {line.check for line in lines}
    for failure in result.get_step_failure_events():
        # A check step that failed before evaluating (an error, not a failed check) is a failure too; a
        # step failed by its blocking checks' evaluations (the version checks' one step) is reported by them.
        step = failure.step_key or "?"
        error = failure.step_failure_data.error
        if error is not None and error.cls_name == BLOCKING_CHECKS_FAILED:
            continue
        named = max((n for n in (*CHECK_NAMES, MIRROR_LAG_CHECK) if step.endswith(n)), key=len, default=step)
        if named not in evaluated:
            lines.append(
                CheckLine(source.name, version, step, False, error.message.strip() if error else "failed")
            )
    if not lines:
        lines.append(CheckLine(source.name, version, source.checks_job_name, False, "no check was evaluated"))
    return lines


def run(table_names: Sequence[str] = ()) -> tuple[int, list[CheckLine]]:
    defs = load_definitions()
    sources = sources_of(defs)
    unknown = sorted(set(table_names) - {s.name for s in sources})
    if unknown:
        raise ValueError(f"unknown tables {unknown}; configured: {[s.name for s in sources]}")
    chosen = [s for s in sources if not table_names or s.name in table_names]
    lines: list[CheckLine] = []
    with _instance() as instance:
        for source in chosen:
            for line in check_newest_version(defs, source, instance):
                print(line, flush=True)
                lines.append(line)
    return (0 if lines and all(line.ok for line in lines) else 1), lines


def _instance() -> dg.DagsterInstance:
    # $DAGSTER_HOME's instance records the checks where the deployment's UI shows them; without it the
    # checks run on a temporary instance that is thrown away.
    return dg.DagsterInstance.get() if os.environ.get("DAGSTER_HOME") else dg.DagsterInstance.ephemeral()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="dvmirror-checks",
        description="Run every asset check on the newest mirrored version of each table; "
        "exit 1 when one fails.",
    )
    parser.add_argument("--table", action="append", default=[], help="only this table (repeatable)")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=dg.PreviewWarning)  # partitioned asset checks
    warnings.filterwarnings("ignore", category=dg.BetaWarning)
    logging.getLogger("pyiceberg").setLevel(logging.ERROR)
    try:
        code, lines = run(args.table)
    except (ValueError, OSError) as err:
        print(f"dvmirror-checks: {err}", file=sys.stderr)
        return 2
    failed = sum(not line.ok for line in lines)
    warned = sum(line.warning and not line.passed for line in lines)
    print(f"{len(lines) - failed - warned} passed, {warned} warned, {failed} failed", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
