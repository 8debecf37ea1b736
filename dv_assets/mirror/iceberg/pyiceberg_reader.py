"""The mirror table read through pyiceberg, for callers that must not start a JVM (the Dagster sensors,
the metadata-only checks, `dvmirror status`): the same `MirrorTable` value `IcebergJava.load` returns,
so "where the mirror stands" (`MirrorTable.mirrored_base`) has one answer whichever adapter read it."""

from __future__ import annotations

import json
from typing import Any

from dv_assets.mirror.iceberg.mirror_table import MirrorTable, Snapshot
from dv_assets.mirror.iceberg.types import Schema
from dv_assets.mirror.settings import CatalogConfig


def read_mirror_table(catalog: CatalogConfig, table_name: str) -> MirrorTable | None:
    """The table as a `MirrorTable`, None when the catalog has no such table."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        table = catalog.pyiceberg_catalog().load_table(table_name)
    except NoSuchTableError:
        return None
    return mirror_table_of(table_name, table)


def last_mirrored_version(catalog: CatalogConfig, table_name: str) -> int | None:
    """The Delta version the mirror shows (None: no table, or nothing mirrored yet). A snapshot another
    writer added on top that changed content is refused (`MirrorInputError`), as the sync refuses it."""
    table = read_mirror_table(catalog, table_name)
    return None if table is None else table.last_mirrored_version


def mirror_table_of(table_name: str, table: Any) -> MirrorTable:
    """A pyiceberg `Table` as a `MirrorTable`."""
    metadata = table.metadata
    return MirrorTable(
        name=table_name,
        location=table.location(),
        format_version=int(metadata.format_version),
        properties=dict(table.properties),
        schema=schema_of(table.schema()),
        current_snapshot_id=metadata.current_snapshot_id,
        snapshots=tuple(
            Snapshot(
                snapshot_id=s.snapshot_id,
                parent_id=s.parent_snapshot_id,
                timestamp_ms=s.timestamp_ms,
                summary={}
                if s.summary is None
                else {"operation": s.summary.operation.value, **s.summary.additional_properties},
                schema_id=s.schema_id,
            )
            for s in metadata.snapshots
        ),
        schemas={s.schema_id: schema_of(s) for s in metadata.schemas},
        metadata_location=table.metadata_location,
    )


def schema_of(pyiceberg_schema: Any) -> Schema:
    """A pyiceberg `Schema` as a `Schema` (through its JSON: the same keys as Iceberg Java's)."""
    return Schema.from_json(json.loads(pyiceberg_schema.model_dump_json()))
