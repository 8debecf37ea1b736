"""`delta/<source>`: one partition per Delta version, recording what that commit did (no Spark).

A run materializes a range of partitions (`BackfillPolicy.single_run()`: the sensor's backlog is one
run); each version in it gets its own materialization with its own commit's facts, logged in version
order so that the newest version is the asset's latest materialization (partition_events.py).

Partition keys are the Delta versions as plain decimal strings ("0", "1", …, "10"): the sensor adds
them in ascending order, so Dagster's partition order (insertion order) is numeric order, and every
place in this package that sorts keys sorts them with `int()`.
"""

import datetime as dt
from collections.abc import Iterator
from typing import Any

import dagster as dg

from dv_assets.defs.partition_events import (
    RECORDED_AGAIN,
    newest_materialized_version,
    no_derived_materializations,
)
from dv_assets.defs.signatures import evaluated
from dv_assets.defs.sources import DeltaSource
from dv_assets.defs.table_metadata import delta_version_metadata
from dv_assets.mirror.delta.facts import CommitFacts, commit_facts, operation_parameters_text


def partition_key(version: int) -> str:
    return str(version)


def version_of(key: str) -> int:
    return int(key)


def commit_markdown(facts: CommitFacts) -> str:
    when = (
        dt.datetime.fromtimestamp(facts.timestamp_ms / 1000, tz=dt.UTC).isoformat(timespec="seconds")
        if facts.timestamp_ms
        else "unknown"
    )
    return "\n".join(
        [
            f"### Delta version {facts.version}: `{facts.operation}`",
            "",
            f"Committed {when}. Parameters: `{operation_parameters_text(facts)[:300]}`",
            "",
            "| | count |",
            "|---|---:|",
            f"| data files added | {facts.data_files_added} |",
            f"| data files removed | {facts.data_files_removed} |",
            f"| … of which carried a DV | {facts.data_files_with_dv_removed} |",
            f"| DVs added | {facts.dvs_added} |",
            f"| DVs updated | {facts.dvs_updated} |",
            f"| DVs removed | {facts.dvs_removed} |",
            f"| rows deleted by DVs | {facts.rows_deleted_by_dvs} |",
            f"| rows in added files | {facts.rows_added} |",
            f"| rows in removed files | {facts.rows_removed} |",
            f"| **live rows after the commit** | **{facts.live_rows}** |",
            f"| live data files / with a DV | {facts.live_data_files} / {facts.live_dvs} |",
        ]
    )


FILES_SCHEMA = dg.TableSchema(
    columns=[
        dg.TableColumn("file", "string", description="data file, relative to the table root"),
        dg.TableColumn("change", "string", description="added, removed, DV added/updated/removed"),
        dg.TableColumn("dv_cardinality", "int", description="rows its DV deletes (after the change)"),
    ]
)
MAX_FILE_ROWS = 50


def facts_metadata(facts: CommitFacts, delta_path: str) -> dict[str, Any]:
    return {
        # dagster/row_count and dagster/column_schema: the table at this version, from its log.
        **delta_version_metadata(facts.live_rows, facts.schema),
        "summary": dg.MetadataValue.md(commit_markdown(facts)),
        "delta_version": dg.MetadataValue.int(facts.version),
        "operation": dg.MetadataValue.text(facts.operation),
        "data_files_added": dg.MetadataValue.int(facts.data_files_added),
        "data_files_removed": dg.MetadataValue.int(facts.data_files_removed),
        "dvs_added": dg.MetadataValue.int(facts.dvs_added),
        "dvs_updated": dg.MetadataValue.int(facts.dvs_updated),
        "dvs_removed": dg.MetadataValue.int(facts.dvs_removed),
        "rows_deleted_by_dvs": dg.MetadataValue.int(facts.rows_deleted_by_dvs),
        "live_rows": dg.MetadataValue.int(facts.live_rows),
        "live_data_files": dg.MetadataValue.int(facts.live_data_files),
        "files": dg.MetadataValue.table(
            records=[dg.TableRecord(row) for row in facts.files[:MAX_FILE_ROWS]], schema=FILES_SCHEMA
        ),
        "delta_table": dg.MetadataValue.path(delta_path),
    }


def build_delta_versions_asset(
    source: DeltaSource, partitions_def: dg.DynamicPartitionsDefinition
) -> dg.AssetsDefinition:
    @dg.asset(
        key=source.delta_asset_key,
        partitions_def=partitions_def,
        group_name="delta",
        kinds={"delta"},
        description=f"Commits of the Delta table {source.delta_path}: one partition per Delta version, "
        "with what the commit did (files, deletion vectors, rows).",
        metadata={"delta_table": dg.MetadataValue.path(source.delta_path)},
        tags=source.tags,
        backfill_policy=dg.BackfillPolicy.single_run(),
    )
    @evaluated
    def delta_versions(
        context: dg.AssetExecutionContext,
    ) -> Iterator[dg.AssetMaterialization | dg.MaterializeResult]:
        delta = source.delta_table()
        versions = sorted(version_of(k) for k in context.partition_keys)
        newest_requested = versions[-1]
        newest = newest_materialized_version(context.instance, context.asset_key)
        if newest is not None and newest > versions[-1]:
            versions.append(newest)
        for version in versions:
            facts = commit_facts(delta, version)
            context.log.info(
                f"{source.name} v{facts.version} {facts.operation}: +{facts.data_files_added}/-"
                f"{facts.data_files_removed} files, DVs +{facts.dvs_added}/~{facts.dvs_updated}/-"
                f"{facts.dvs_removed}, {facts.rows_deleted_by_dvs} rows deleted by DVs, "
                f"{facts.live_rows} live rows"
            )
            # Logged as each version is read, in ascending order: the newest is the asset's latest.
            yield dg.AssetMaterialization(
                asset_key=context.asset_key,
                partition=partition_key(version),
                description=RECORDED_AGAIN if version > newest_requested else None,
                metadata=facts_metadata(facts, source.delta_path),
            )
        yield no_derived_materializations()

    return delta_versions
