"""Dagster's standard table metadata (`dagster/row_count`, `dagster/column_schema`, `dagster/table_name`)
for both sides of a mirror, from metadata only (never a data scan):

* Iceberg: the snapshot summary's `total-records` minus `total-position-deletes` (Iceberg v3 deletion
  vectors are counted there too, as are v2 position deletes), and the snapshot's own schema;
* Delta: the version's live rows as the log replay gives them, and the version's schema.

Nested types are rendered as one type string (`struct<a: int, b: list<string>>`), as the UI shows them:
the typed schemas' own text (`str` of an Iceberg or a Delta type).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg
from dagster._core.definitions.metadata import TableMetadataSet  # the dagster/* table keys; not dg.* in 1.13

from dv_assets.mirror.delta.schema import StructType
from dv_assets.mirror.iceberg.pyiceberg_reader import schema_of
from dv_assets.mirror.iceberg.types import Schema
from dv_assets.mirror.schema_visitor import SchemaNode


def column_schema(columns: Iterable[tuple[str, SchemaNode, str | None, bool]]) -> dg.TableSchema:
    """Dagster's column schema of (name, type, description, nullable) columns, each type as its text."""
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                name=name,
                type=str(type_),
                description=description,
                constraints=dg.TableColumnConstraints(nullable=nullable),
            )
            for name, type_, description, nullable in columns
        ]
    )


# -- Iceberg ----------------------------------------------------------------------------------------


def iceberg_column_schema(schema: Schema) -> dg.TableSchema:
    """The top-level columns of an Iceberg schema."""
    return column_schema((f.name, f.type, f.doc, not f.required) for f in schema.fields)


@dataclass(frozen=True)
class SummaryRowCount:
    """The live rows of an Iceberg snapshot from its summary, or why the summary cannot tell."""

    rows: int | None
    total_records: int | None
    position_deletes: int | None
    problem: str | None = None


def summary_row_count(summary: Mapping[str, str]) -> SummaryRowCount:
    """`total-records` - `total-position-deletes`: exact for the mirror, which writes one DV (or one set of
    position deletes) per data file and never two for one row. Refused (rows None) when the summary lacks
    a total (Iceberg drops totals it could not carry over) or holds equality deletes (not countable from
    metadata; the mirror never writes them)."""
    missing = [k for k in ("total-records", "total-position-deletes") if k not in summary]
    records = int(summary["total-records"]) if "total-records" in summary else None
    deletes = int(summary["total-position-deletes"]) if "total-position-deletes" in summary else None
    if missing:
        return SummaryRowCount(None, records, deletes, f"the snapshot summary has no {', '.join(missing)}")
    equality = int(summary.get("total-equality-deletes", "0") or 0)
    if equality:
        return SummaryRowCount(
            None, records, deletes, f"the snapshot has {equality} equality deletes; rows are not countable"
        )
    assert records is not None and deletes is not None
    return SummaryRowCount(records - deletes, records, deletes)


def iceberg_snapshot_metadata(table: Any, snapshot_id: int, table_name: str) -> dict[str, Any]:
    """The dagster/* table metadata of one snapshot of a pyiceberg `Table`: its rows (when the summary
    can tell) and its own schema (a version mirrored before a schema change keeps the old columns)."""
    snapshot = table.snapshot_by_id(snapshot_id)
    if snapshot is None:
        return dict(TableMetadataSet(table_name=table_name))
    summary = {} if snapshot.summary is None else dict(snapshot.summary.additional_properties)
    schemas = {s.schema_id: s for s in table.metadata.schemas}
    schema = schemas.get(snapshot.schema_id) if snapshot.schema_id is not None else None
    schema = schema or table.schema()
    return dict(
        TableMetadataSet(
            row_count=summary_row_count(summary).rows,
            column_schema=iceberg_column_schema(schema_of(schema)),
            table_name=table_name,
        )
    )


# -- Delta ------------------------------------------------------------------------------------------


def delta_column_schema(schema: StructType) -> dg.TableSchema:
    """The top-level columns of a Delta schema, by logical name."""
    return column_schema((f.name, f.type, f.metadata.get("comment"), f.nullable) for f in schema.fields)


def delta_version_metadata(live_rows: int, schema: StructType | None) -> dict[str, Any]:
    return dict(
        TableMetadataSet(
            row_count=live_rows,
            column_schema=delta_column_schema(schema) if schema is not None else None,
        )
    )
