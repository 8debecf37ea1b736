"""Dagster's standard table metadata (`dagster/row_count`, `dagster/column_schema`, `dagster/table_name`)
for both sides of a mirror, from metadata only (never a data scan):

* Iceberg: the snapshot summary's `total-records` minus `total-position-deletes` (Iceberg v3 deletion
  vectors are counted there too, as are v2 position deletes), and the snapshot's own schema;
* Delta: the version's live rows as the log replay gives them, and the version's schema.

Nested types are rendered as one type string (`struct<a: int, b: list<string>>`), as the UI shows them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg
from dagster._core.definitions.metadata import TableMetadataSet  # the dagster/* table keys; not dg.* in 1.13

from dv_assets.mirror import MirrorTable

# -- Iceberg ----------------------------------------------------------------------------------------


def iceberg_type_text(type_json: str | Mapping[str, Any]) -> str:
    """An Iceberg schema JSON type as one string: primitives as Iceberg names them, nested types spelled
    out (`list<string>`, `map<string, long>`, `struct<a: int>`)."""
    if isinstance(type_json, str):
        return type_json
    kind = type_json["type"]
    if kind == "struct":
        fields = ", ".join(f"{f['name']}: {iceberg_type_text(f['type'])}" for f in type_json["fields"])
        return f"struct<{fields}>"
    if kind == "list":
        return f"list<{iceberg_type_text(type_json['element'])}>"
    if kind == "map":
        return f"map<{iceberg_type_text(type_json['key'])}, {iceberg_type_text(type_json['value'])}>"
    return str(kind)


def iceberg_column_schema(schema_json: Mapping[str, Any]) -> dg.TableSchema:
    """The top-level columns of an Iceberg schema (JSON as Iceberg's SchemaParser / pyiceberg write it)."""
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                name=field["name"],
                type=iceberg_type_text(field["type"]),
                description=field.get("doc"),
                constraints=dg.TableColumnConstraints(nullable=not field.get("required", False)),
            )
            for field in schema_json["fields"]
        ]
    )


def iceberg_snapshot_metadata(mirror: MirrorTable, snapshot_id: int, table_name: str) -> dict[str, Any]:
    """The dagster/* table metadata of one snapshot of the mirror table: its rows (when the summary can
    tell, `SnapshotTotals.live_rows`) and its own schema (a version mirrored before a schema change keeps
    the old columns)."""
    snapshot = mirror.snapshot(snapshot_id)
    if snapshot is None:
        return dict(TableMetadataSet(table_name=table_name))
    return dict(
        TableMetadataSet(
            row_count=snapshot.totals.live_rows,
            column_schema=iceberg_column_schema(mirror.schema_of(snapshot)),
            table_name=table_name,
        )
    )


# -- Delta ------------------------------------------------------------------------------------------


def delta_type_text(type_json: str | Mapping[str, Any]) -> str:
    """A Delta schema JSON type as one string (`array<string>`, `map<string, long>`, `struct<a: integer>`)."""
    if isinstance(type_json, str):
        return type_json
    kind = type_json["type"]
    if kind == "struct":
        fields = ", ".join(f"{f['name']}: {delta_type_text(f['type'])}" for f in type_json["fields"])
        return f"struct<{fields}>"
    if kind == "array":
        return f"array<{delta_type_text(type_json['elementType'])}>"
    if kind == "map":
        return f"map<{delta_type_text(type_json['keyType'])}, {delta_type_text(type_json['valueType'])}>"
    return str(kind)


def delta_column_schema(schema_json: Mapping[str, Any]) -> dg.TableSchema:
    """The top-level columns of a Delta schema (metaData.schemaString, parsed), by logical name."""
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                name=field["name"],
                type=delta_type_text(field["type"]),
                description=(field.get("metadata") or {}).get("comment"),
                constraints=dg.TableColumnConstraints(nullable=bool(field.get("nullable", True))),
            )
            for field in schema_json.get("fields", [])
        ]
    )


def delta_version_metadata(live_rows: int, schema_json: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(
        TableMetadataSet(
            row_count=live_rows,
            column_schema=delta_column_schema(schema_json) if schema_json else None,
        )
    )
