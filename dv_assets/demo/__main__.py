"""`make demo`: the whole platform on embedded defaults, recorded in a real Dagster instance.

1. Starts fresh: removes the demo's Delta table (.dvmirror/demo/), unregisters the demo's Iceberg table
   from the catalog (no purge: its data files are Delta's) and removes its warehouse folder, and
   recreates the Dagster instance in .dagster_home/ (dagster.yaml: telemetry off, one run per table at
   a time). Other tables in the catalog are left alone. So re-running `make demo` always works.
2. Builds the sample Delta table with Delta Spark, deletion vectors on (sample_table.py).
3. Evaluates `delta_version_sensor_demo_events`, adds the partitions it asks for, and executes its run
   request: one run over the whole backlog (a partition range) that materializes delta/<name> and
   iceberg/<name> for every version, each on its own partition, plus the checks on every version.
4. Runs the checks-only job on the latest version, evaluates `compacted_deletes_sensor_demo_events` and
   runs the cleanup job it requests.
5. Reads the mirror's newest version with DuckDB from its metadata file alone (no catalog; the extensions
   come from their packages, never downloaded: duckdb_read.py) and checks the row count against what the
   mirror says; prints where the metadata file is and a DuckDB line that reads it.
6. Prints a summary. Exits 1 when a check or the DuckDB read failed. `make ui` then shows every run.

The demo runs the code location's own definitions (`dv_assets.definitions`: the table `demo_events` of
dv_assets/defs/tables/defs.yaml), so `make ui` shows the same jobs and sensors.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

if TYPE_CHECKING:
    from dv_assets.mirror import CatalogConfig, DeltaTable

DAGSTER_HOME = Path.cwd() / ".dagster_home"
DEMO_SOURCE = "demo_events"
DAGSTER_YAML = """\
# Written by `make demo` (dv_assets/demo.py); used by `make ui`.
telemetry:
  enabled: false
concurrency:
  pools:
    # Steps that write one mirror table (its asset and checks) share the pool dvmirror_<source>.
    default_limit: 1
  runs:
    # Mirror runs of one table go one at a time, in the order they were queued.
    tag_concurrency_limits:
      - key: dvmirror/table
        value:
          applyLimitPerUniqueValue: true
        limit: 1
"""


# Step logs go to the instance (see them in `make ui`); the console shows the demo's own progress.
QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


def quiet_warnings() -> None:
    warnings.filterwarnings("ignore", category=dg.PreviewWarning)  # partitioned asset checks
    warnings.filterwarnings("ignore", category=dg.BetaWarning)
    logging.getLogger("pyiceberg").setLevel(logging.ERROR)


def say(message: str) -> None:
    print(message, flush=True)


def reset_instance() -> dg.DagsterInstance:
    shutil.rmtree(DAGSTER_HOME, ignore_errors=True)
    DAGSTER_HOME.mkdir(parents=True)
    (DAGSTER_HOME / "dagster.yaml").write_text(DAGSTER_YAML)
    os.environ["DAGSTER_HOME"] = str(DAGSTER_HOME)
    return dg.DagsterInstance.get()


def drop_mirror(spark, table_name: str) -> None:
    """Unregister the demo's Iceberg table (never purge: Iceberg would delete Delta's data files) and
    remove its folder, which holds only Iceberg metadata and the mirror's own delete files."""
    from dv_assets.mirror import IcebergJava

    iceberg = IcebergJava(spark)
    table = iceberg.load(table_name)
    if table is None:
        return
    iceberg.unregister(table_name)
    shutil.rmtree(table.location.removeprefix("file:"), ignore_errors=True)


def read_with_duckdb(catalog: CatalogConfig, table_name: str, delta: DeltaTable) -> tuple[int, int] | None:
    """DuckDB reads the mirror's newest version from its metadata file, which it prints (where a reader
    without the catalog finds it) with a line to paste into the DuckDB CLI: (rows DuckDB read, rows the
    mirror's snapshot says). None when there is nothing to read, or DuckDB or its extension packages (the
    dev extras) are not installed."""
    from dv_assets.mirror import mirror_status, read_mirror_table

    status = mirror_status(delta, read_mirror_table(catalog, table_name), table_name)
    if status.metadata_location is None or status.snapshot_id is None or status.live_rows is None:
        say(f"  skipped: {table_name} has no mirrored snapshot")
        return None
    try:
        import duckdb

        from dv_assets.demo.duckdb_read import count_sql, offline_duckdb, read_snapshot

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
    say(f"  in the DuckDB CLI: {count_sql(status.metadata_location, status.snapshot_id)}")
    return rows, status.live_rows


def main() -> int:
    began = time.monotonic()
    quiet_warnings()
    from dv_assets.definitions import load_definitions
    from dv_assets.defs.factory import sources_of, spark_resource_of
    from dv_assets.defs.maintenance import cleanup_run_config
    from dv_assets.defs.sources import VERSIONS_TAG
    from dv_assets.demo.sample_table import build_sample_table
    from dv_assets.mirror import DeltaTable, commit_facts, get_or_create_spark

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
    spark = get_or_create_spark(settings)
    drop_mirror(spark, demo.iceberg_table)
    shutil.rmtree(demo.delta_path, ignore_errors=True)
    instance = reset_instance()

    say("[2/7] building the sample Delta table with Delta Spark (deletion vectors on)")
    latest = build_sample_table(spark, Path(demo.delta_path), progress=say)

    say(f"[3/7] {demo.version_sensor_name}: looking for new Delta versions")
    tick = defs.resolve_sensor_def(demo.version_sensor_name)(
        dg.build_sensor_context(instance=instance, definitions=defs)
    )
    assert isinstance(tick, dg.SensorResult)
    for request in tick.dynamic_partitions_requests or []:
        assert isinstance(request, dg.AddDynamicPartitionsRequest)
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    runs = [r for r in tick.run_requests or [] if r.job_name == demo.mirror_job_name]
    found = ", ".join(r.tags.get(VERSIONS_TAG, "?") for r in runs)
    say(f"  found versions {found}: {len(runs)} run{'s' if len(runs) != 1 else ''} requested")

    say("[4/7] materializing every version, each its own partition, through the Dagster instance")
    mirror_job = defs.resolve_job_def(demo.mirror_job_name)
    delta = DeltaTable(demo.delta_path)
    checks_total = checks_passed = dvs_copied = versions_mirrored = 0
    failed: list[str] = []
    for request in runs:
        result = mirror_job.execute_in_process(
            instance=instance, tags=dict(request.tags), run_config=QUIET, raise_on_error=False
        )
        evaluations = result.get_asset_check_evaluations()
        checks_total += len(evaluations)
        checks_passed += sum(e.passed for e in evaluations)
        failed += [f"v{e.partition} {e.check_name}" for e in evaluations if not e.passed]
        checks_of: dict[str, list[bool]] = {}
        for e in evaluations:
            checks_of.setdefault(e.partition or "", []).append(e.passed)
        mirrored = {
            event.materialization.partition: event.materialization.metadata
            for event in result.get_asset_materialization_events()
            if event.materialization.asset_key == dg.AssetKey(demo.mirror_asset_key)
        }
        for key in sorted((k for k in mirrored if k is not None), key=int):
            snapshot = str(mirrored[key]["snapshot_id"].value)
            copied = int(mirrored[key]["dvs_copied"].value or 0)
            dvs_copied += copied
            versions_mirrored += 1
            facts = commit_facts(delta, int(key))
            passed = checks_of.get(key, [])
            say(
                f"  v{key:>2} {facts.operation:<22} live rows {facts.live_rows:>4}, DVs +{facts.dvs_added}"
                f"/~{facts.dvs_updated}/-{facts.dvs_removed} -> snapshot {snapshot}, {copied} DVs copied, "
                f"checks {'passed' if passed and all(passed) else 'FAILED'}"
            )
        if not result.success:
            say(f"  run for versions {request.tags.get(VERSIONS_TAG)} failed")
            if not failed:
                failed.append(f"run for versions {request.tags.get(VERSIONS_TAG)} failed")

    say(f"[5/7] checks-only job on the latest version ({latest})")
    checks = defs.resolve_job_def(demo.checks_job_name).execute_in_process(
        instance=instance, tags={"dagster/partition": str(latest)}, run_config=QUIET, raise_on_error=False
    )
    for evaluation in checks.get_asset_check_evaluations():
        checks_total += 1
        checks_passed += evaluation.passed
        if not evaluation.passed:
            failed.append(f"v{latest} {evaluation.check_name} (checks job)")
        say(f"  {evaluation.check_name}: {'passed' if evaluation.passed else 'FAILED'}")

    say(f"[6/7] {demo.compacted_sensor_name} and the cleanup job")
    compacted = defs.resolve_sensor_def(demo.compacted_sensor_name)(
        dg.build_sensor_context(instance=instance, definitions=defs)
    )
    assert isinstance(compacted, dg.SensorResult)
    requests = list(compacted.run_requests or [])
    for request in requests:
        say(f"  versions {request.tags.get('dvmirror/compacted-versions')} dropped DVs: cleanup requested")
    cleanup_config = requests[0].run_config if requests else cleanup_run_config(demo)
    cleanup = defs.resolve_job_def(demo.cleanup_job_name).execute_in_process(
        instance=instance,
        run_config={**cleanup_config, **QUIET},
        tags=dict(requests[0].tags) if requests else None,
        raise_on_error=False,
    )
    totals = cleanup.output_for_node(demo.cleanup_op_name) if cleanup.success else {}
    if not cleanup.success:
        failed.append("cleanup job failed")

    say("[7/7] DuckDB reads the newest mirrored version from the metadata file alone (no catalog)")
    duckdb_read = read_with_duckdb(catalog, demo.iceberg_table, delta)
    final = commit_facts(delta, latest)
    if duckdb_read is not None and not duckdb_read[0] == duckdb_read[1] == final.live_rows:
        failed.append(
            f"DuckDB read {duckdb_read[0]} rows, the mirror says {duckdb_read[1]}, Delta {final.live_rows}"
        )
    elapsed = time.monotonic() - began
    say("")
    say("Summary")
    say(
        f"  Delta versions mirrored : {versions_mirrored} (0..{latest}) in {len(runs)} run, "
        "one Iceberg snapshot each"
    )
    say(f"  live rows at v{latest:<10}: {final.live_rows} in {final.live_data_files} data files")
    say(
        f"  DVs                     : {final.live_dvs} live in Delta at v{latest}, "
        f"{dvs_copied} copied in total"
    )
    say(f"  checks passed           : {checks_passed}/{checks_total}")
    say(f"  read by DuckDB          : {'skipped' if duckdb_read is None else f'{duckdb_read[0]} rows'}")
    say(
        f"  cleanup                 : {totals.get('snapshots_expired', 0)} snapshots expired, "
        f"{totals.get('files_reclaimed', 0)} files / {totals.get('bytes_reclaimed', 0)} bytes reclaimed"
    )
    say(f"  took                    : {elapsed:.0f}s; runs are in {DAGSTER_HOME} (see them: make ui)")
    if failed:
        say(f"FAILED: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
