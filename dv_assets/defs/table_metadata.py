"""Dagster's standard table metadata (`dagster/row_count`, `dagster/column_schema`, `dagster/table_name`,
and for the mirror `dagster/uri`)
for both sides of a mirror, from metadata only (never a data scan):

* Iceberg: the snapshot summary's `total-records` minus `total-position-deletes` (Iceberg v3 deletion
  vectors are counted there too, as are v2 position deletes), and the snapshot's own schema;
* Delta: the version's live rows as the log replay gives them, and the version's schema.

Nested types are rendered as one type string (`struct<a: int, b: list<string>>`), as the UI shows them:
the typed schemas' own text (`str` of an Iceberg or a Delta type).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import dagster as dg
from dagster._core.definitions.metadata import TableMetadataSet  # the dagster/* table keys; not dg.*
from dagster._core.definitions.metadata.metadata_set import UriMetadataSet  # dagster/uri; not dg.*

if TYPE_CHECKING:
    from dv_assets.mirror.delta.schema import StructType
    from dv_assets.mirror.iceberg.mirror_table import MirrorTable
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


def iceberg_snapshot_metadata(mirror: MirrorTable, snapshot_id: int, table_name: str) -> dict[str, Any]:
    """The dagster/* table metadata of one snapshot of the mirror table: its rows (when the summary can
    tell, `SnapshotTotals.live_rows`), its own schema (a version mirrored before a schema change keeps
    the old columns), and the table's location as `dagster/uri` (the metadata file changes with every
    commit and cleanup; the table's location does not)."""
    uri = dict(UriMetadataSet(uri=mirror.location))
    snapshot = mirror.snapshot(snapshot_id)
    if snapshot is None:
        return dict(TableMetadataSet(table_name=table_name)) | uri
    return (
        dict(
            TableMetadataSet(
                row_count=snapshot.totals.live_rows,
                column_schema=iceberg_column_schema(mirror.schema_of(snapshot)),
                table_name=table_name,
            )
        )
        | uri
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
