"""`make demo`: the whole platform on embedded defaults, recorded in a real Dagster instance through
Dagster's own daemon code (machinery.py), so that `make ui` shows what the demo did.

1. Starts fresh: removes the demo's Delta table (.dvmirror/demo/), unregisters the demo's Iceberg table
   from the catalog (no purge: its data files are Delta's) and removes its warehouse folder, and
   recreates the Dagster instance in .dagster_home/ (dagster.yaml: telemetry off, one run per table at
   a time). Other tables in the catalog are left alone. So re-running `make demo` always works.
2. Builds the sample Delta table with Delta Spark, deletion vectors on (sample_table.py).
3. Ticks `delta_version_sensor_demo_events` once with the sensor daemon: the tick, its cursor, the
   partitions it adds and its run request (one run over the whole backlog, a partition range) are
   recorded on the instance.
4. The run queue's daemon launches that run (in this process, sharing its Spark session): it
   materializes delta/<name> and iceberg/<name> for every version, each on its own partition, plus the
   checks on every version.
5. Launches the checks-only job on the latest version from the code location; ticks
   `compacted_deletes_sensor_demo_events` once (its first sight of the mirror: it starts at the mirror's
   current version and requests nothing), then launches the cleanup job, as `cleanup_schedule_<name>`
   would.
6. Reads the mirror's newest version with DuckDB from its metadata file alone (no catalog; the extensions
   come from their packages, never downloaded: duckdb_read.py) and checks the row count against what the
   mirror says; prints where the metadata file is and a line that reads it the same way, offline.
7. Prints a summary, and what switching the sensors on does (the demo's component declares them stopped;
   each is left stopped after its tick). Exits 1 when a check or the DuckDB read failed.

The demo runs the code location's own definitions (`dv_assets.definitions`: the table `demo_events` of
dv_assets/defs/tables/defs.yaml) under its own name, so `make ui` shows the same jobs, sensors and runs.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

from dv_assets.dagster_warnings import silence_dagster_maturity_warnings
from dv_assets.demo.ui import write_instance_settings

if TYPE_CHECKING:
    from dv_assets.defs.sources import DeltaSource
    from dv_assets.demo.machinery import DemoMachinery
    from dv_assets.mirror.delta.replay import DeltaTable
    from dv_assets.mirror.settings import CatalogConfig

DAGSTER_HOME = Path.cwd() / ".dagster_home"
DEMO_SOURCE = "demo_events"


def quiet_output() -> None:
    """The demo's console shows its own progress (and the sensors' own log lines, on stderr): Dagster's
    maturity warnings are silenced, pyiceberg's below ERROR left out."""
    silence_dagster_maturity_warnings()
    logging.getLogger("pyiceberg").setLevel(logging.ERROR)


def say(message: str) -> None:
    print(message, flush=True)


def reset_instance() -> None:
    shutil.rmtree(DAGSTER_HOME, ignore_errors=True)
    write_instance_settings(DAGSTER_HOME, replace=True)
    os.environ["DAGSTER_HOME"] = str(DAGSTER_HOME)


def drop_mirror(spark, table_name: str) -> None:
    """Unregister the demo's Iceberg table (never purge: Iceberg would delete Delta's data files) and
    remove its folder, which holds only Iceberg metadata and the mirror's own delete files."""
    from dv_assets.mirror.iceberg.java import IcebergJava

    iceberg = IcebergJava(spark)
    table = iceberg.load(table_name)
    if table is None:
        return
    iceberg.unregister(table_name)
    shutil.rmtree(table.location.removeprefix("file:"), ignore_errors=True)


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def read_with_duckdb(catalog: CatalogConfig, table_name: str, delta: DeltaTable) -> tuple[int, int] | None:
    """DuckDB reads the mirror's newest version from its metadata file, which it prints (where a reader
    without the catalog finds it) with a line that reads it the same way, offline: (rows DuckDB read,
    rows the mirror's snapshot says). None when there is nothing to read, or DuckDB or its extension
    packages (the dev extras) are not installed."""
    from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table
    from dv_assets.mirror.status import mirror_status

    status = mirror_status(delta, read_mirror_table(catalog, table_name), table_name)
    if status.metadata_location is None or status.snapshot_id is None or status.live_rows is None:
        say(f"  skipped: {table_name} has no mirrored snapshot")
        return None
    try:
        import duckdb

        from dv_assets.demo.duckdb_read import offline_duckdb, offline_read_command, read_snapshot

        connection = offline_duckdb()
    except (ImportError, RuntimeError) as missing:
        say(f"  skipped: {missing} (`make setup` installs the dev extras)")
        return None
    rows = read_snapshot(connection, status.metadata_location, status.snapshot_id).num_rows
    say(
        f"  DuckDB {duckdb.__version__} read {rows} rows of v{status.mirrored_version} "
        f"(snapshot {status.snapshot_id}); the mirror says {status.live_rows}"
    )
    say(f"  metadata file: {status.metadata_location}")
    say(
        "  the same read, offline (DuckDB's avro and iceberg extensions loaded from their PyPI packages,"
        " duckdb-extension-avro/-iceberg, never INSTALLed):"
    )
    say(f"    {offline_read_command(status.metadata_location, status.snapshot_id)}")
    return rows, status.live_rows


def metadata_text(metadata: Mapping[str, dg.MetadataValue], key: str) -> str:
    value = metadata.get(key)
    return "?" if value is None else str(value.value)


@dataclass
class Tally:
    """What the demo's runs did, for the summary; `failed` names whatever did not pass."""

    versions_mirrored: int = 0
    dvs_copied: int = 0
    checks_total: int = 0
    checks_passed: int = 0
    failed: list[str] = field(default_factory=list)

    def count_checks(
        self, evaluations: list[dg.AssetCheckEvaluation], checks_job_on: int | None = None
    ) -> None:
        self.checks_total += len(evaluations)
        self.checks_passed += sum(e.passed for e in evaluations)
        for e in evaluations:
            if not e.passed:
                where = f"v{e.partition}" if checks_job_on is None else f"v{checks_job_on}"
                self.failed.append(
                    f"{where} {e.check_name}" + ("" if checks_job_on is None else " (checks job)")
                )


def main() -> int:
    began = time.monotonic()
    quiet_output()
    from dv_assets.definitions import load_definitions
    from dv_assets.defs.factory import sources_of, spark_resource_of
    from dv_assets.defs.sources import VERSIONS_TAG
    from dv_assets.demo.machinery import demo_machinery, open_instance
    from dv_assets.demo.sample_table import build_sample_table
    from dv_assets.mirror.cli.output import child_stderr_to_log
    from dv_assets.mirror.delta.replay import DeltaTable
    from dv_assets.mirror.spark import get_or_create_spark

    defs = load_definitions()
    demo = next((s for s in sources_of(defs) if s.name == DEMO_SOURCE), None)
    if demo is None:
        say(f"demo: the code location has no table `{DEMO_SOURCE}` (see dv_assets/defs/tables/defs.yaml)")
        return 2
    settings = spark_resource_of(defs).settings  # the code location's, resolved once
    catalog = settings.catalog
    say(
        f"dv-mirror demo: Delta {demo.delta_path} -> Iceberg {demo.iceberg_table} "
        f"(format v{demo.format_version})"
    )
    say(f"  {catalog.describe()}, Dagster home {DAGSTER_HOME}")

    say("[1/7] starting Spark (Delta + Iceberg) and resetting the demo's state")
    # The JVM's own lines (its banner, Spark's log) go to a file, named if the demo fails, as the CLI does.
    spark_log = child_stderr_to_log()
    spark = get_or_create_spark(settings)
    drop_mirror(spark, demo.iceberg_table)
    shutil.rmtree(demo.delta_path, ignore_errors=True)
    reset_instance()

    say("[2/7] building the sample Delta table with Delta Spark (deletion vectors on)")
    latest = build_sample_table(spark, Path(demo.delta_path), progress=say)

    tally = Tally()
    delta = DeltaTable(demo.delta_path)
    with open_instance(DAGSTER_HOME) as instance, demo_machinery(instance) as machinery:
        say(f"[3/7] {demo.version_sensor_name}: one tick by Dagster's sensor daemon")
        tick = machinery.tick_sensor(demo.version_sensor_name)
        runs = [machinery.outcome(run_id).run for run_id in tick.run_ids]
        found = ", ".join(r.tags.get(VERSIONS_TAG, "?") for r in runs)
        say(
            f"  tick {tick.status}: versions {found or 'none'}, {plural(len(runs), 'run')} requested, "
            f"cursor {tick.cursor}" + (f"; error: {tick.error}" if tick.error else "")
        )
        say("[4/7] the run queue launches it: every version materialized, each its own partition")
        mirror_the_backlog(machinery, demo, runs, delta, tally)
        say(f"[5/7] the checks-only job on the latest version ({latest}), then {demo.compacted_sensor_name}")
        cleanup_totals = check_then_clean_up(machinery, demo, latest, tally)

    say("[6/7] DuckDB reads the newest mirrored version from the metadata file alone (no catalog)")
    duckdb_read = read_with_duckdb(catalog, demo.iceberg_table, delta)
    say("")
    say("[7/7] Summary")
    summarize(demo, delta, latest, len(runs), tally, duckdb_read, cleanup_totals, time.monotonic() - began)
    if tally.failed:
        say(f"FAILED: {', '.join(tally.failed)} (the runs' logs: make ui; Spark's: {spark_log})")
        return 1
    Path(spark_log).unlink(missing_ok=True)
    return 0


def mirror_the_backlog(
    machinery: DemoMachinery, demo: DeltaSource, runs: list[dg.DagsterRun], delta: DeltaTable, tally: Tally
) -> None:
    """The queue drained: each requested run's versions, one line each, and their checks."""
    from dv_assets.defs.sources import VERSIONS_TAG
    from dv_assets.mirror.delta.facts import commit_facts

    say(
        "  DVs +added/~replaced/-removed: deletion vectors the Delta commit put on files that had none,"
        " replaced by"
    )
    say(
        "  larger ones, or dropped (with their files, e.g. OPTIMIZE); copied: DVs the mirror wrote into"
        " Iceberg"
    )
    machinery.drain_queue()
    for requested in runs:
        result = machinery.outcome(requested.run_id)
        tally.count_checks(result.evaluations)
        checks_of: dict[str, list[bool]] = {}
        for e in result.evaluations:
            checks_of.setdefault(e.partition or "", []).append(e.passed)
        mirrored = {
            m.partition: m.metadata
            for m in result.materializations
            if m.asset_key == dg.AssetKey(demo.mirror_asset_key)
        }
        for key in sorted((k for k in mirrored if k is not None), key=int):
            copied_text = metadata_text(mirrored[key], "dvs_copied")
            tally.dvs_copied += int(copied_text) if copied_text.isdigit() else 0
            tally.versions_mirrored += 1
            facts = commit_facts(delta, int(key))
            passed = checks_of.get(key, [])
            say(
                f"  v{key:>2} {facts.operation:<9} live rows {facts.live_rows:>4}, "
                f"DVs +{facts.dvs_added}/~{facts.dvs_updated}/-{facts.dvs_removed} -> snapshot "
                f"{metadata_text(mirrored[key], 'snapshot_id')}, {copied_text} copied, "
                f"checks {'passed' if passed and all(passed) else 'FAILED'}"
            )
        if not result.success:
            say(f"  run for versions {requested.tags.get(VERSIONS_TAG)}: {result.run.status.value}")
            tally.failed.append(f"run for versions {requested.tags.get(VERSIONS_TAG)}")


def check_then_clean_up(
    machinery: DemoMachinery, demo: DeltaSource, latest: int, tally: Tally
) -> Mapping[str, dg.MetadataValue]:
    """The checks-only job on the latest version, one tick of the compacted-deletes sensor, and the
    cleanup job (requested by that tick, or launched as its schedule would); the cleanup's totals."""
    from dv_assets.defs.maintenance import cleanup_run_config

    checks_run = machinery.launch_job(demo.checks_job_name, tags={"dagster/partition": str(latest)})
    machinery.drain_queue()
    checks = machinery.outcome(checks_run)
    tally.count_checks(checks.evaluations, checks_job_on=latest)
    for evaluation in checks.evaluations:
        say(f"  {evaluation.check_name}: {'passed' if evaluation.passed else 'FAILED'}")
    if not checks.success:
        tally.failed.append(f"checks job {checks.run.status.value}")
    compacted = machinery.tick_sensor(demo.compacted_sensor_name)
    cleanup_runs = list(compacted.run_ids)
    for run_id in cleanup_runs:
        versions = machinery.outcome(run_id).run.tags.get("dvmirror/compacted-versions")
        say(f"  tick {compacted.status}: versions {versions} dropped DVs, cleanup requested")
    if not cleanup_runs:  # the retention applies anyway, as cleanup_schedule_<name> would
        cleanup_runs = [machinery.launch_job(demo.cleanup_job_name, run_config=cleanup_run_config(demo))]
    machinery.drain_queue()
    cleanup = machinery.outcome(cleanup_runs[0])
    if not cleanup.success:
        tally.failed.append(f"cleanup job {cleanup.run.status.value}")
    return cleanup.output_metadata.get(demo.cleanup_op_name, {})


def summarize(
    demo: DeltaSource,
    delta: DeltaTable,
    latest: int,
    runs: int,
    tally: Tally,
    duckdb_read: tuple[int, int] | None,
    cleanup_totals: Mapping[str, dg.MetadataValue],
    elapsed: float,
) -> None:
    """The summary, and what switching the sensors on does; a DuckDB read that disagrees fails."""
    from dv_assets.mirror.delta.facts import commit_facts

    final = commit_facts(delta, latest)
    if duckdb_read is not None and not duckdb_read[0] == duckdb_read[1] == final.live_rows:
        tally.failed.append(
            f"DuckDB read {duckdb_read[0]} rows, the mirror says {duckdb_read[1]}, Delta {final.live_rows}"
        )
    say(
        f"  Delta versions mirrored : {tally.versions_mirrored} (0..{latest}) in {plural(runs, 'run')}, "
        "one Iceberg snapshot each"
    )
    say(f"  live rows at v{latest:<10}: {final.live_rows} in {plural(final.live_data_files, 'data file')}")
    say(
        f"  DVs                     : {final.live_dvs} live in Delta at v{latest}, "
        f"{tally.dvs_copied} copied in all"
    )
    say(f"  checks passed           : {tally.checks_passed}/{tally.checks_total}")
    say(f"  read by DuckDB          : {'skipped' if duckdb_read is None else f'{duckdb_read[0]} rows'}")
    totals = cleanup_totals
    say(
        f"  cleanup                 : {metadata_text(totals, 'snapshots_expired')} snapshots expired, "
        f"{metadata_text(totals, 'files_reclaimed')} files / {metadata_text(totals, 'bytes_reclaimed')} "
        "bytes reclaimed"
    )
    say(f"  took                    : {elapsed:.0f}s; runs, sensor ticks and cursors are in {DAGSTER_HOME}")
    say("")
    say("Next: `make ui` (http://127.0.0.1:3000) shows these runs, launched by the sensors, and their ticks.")
    say(f"  The sensors start stopped. Switched on (Automation, the toggle), {demo.version_sensor_name}")
    say("  reads the Delta log every 30 s and requests one mirror run for the versions after the newest one")
    say(
        f"  the mirror holds (v{latest} now), so a new Delta commit is mirrored within a minute or so;"
        f" {demo.compacted_sensor_name}"
    )
    say("  requests the cleanup job after mirrored commits that dropped DVs (OPTIMIZE, REORG, DV updates).")


if __name__ == "__main__":
    sys.exit(main())
