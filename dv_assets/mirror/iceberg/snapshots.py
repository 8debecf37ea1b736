"""Which Delta version an Iceberg snapshot mirrors: the `dvmirror.delta-version` summary property, and
the mirror's last mirrored version (its current snapshot's), read without a JVM through pyiceberg for
callers that must not start Spark (the Dagster sensors)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dv_assets.mirror.settings import CatalogConfig

if TYPE_CHECKING:
    from dv_assets.mirror.iceberg.java import MirrorTable

DELTA_VERSION_PROPERTY = "dvmirror.delta-version"


def delta_version_of(summary: Mapping[str, str] | None) -> int | None:
    """The Delta version a snapshot summary records (None for a snapshot the mirror did not write)."""
    value = None if summary is None else summary.get(DELTA_VERSION_PROPERTY)
    return None if value is None else int(value)


def last_mirrored_version(catalog: CatalogConfig, table_name: str) -> int | None:
    """The Delta version the mirror shows, read with pyiceberg (no JVM): that of the newest snapshot in
    the current lineage that carries one (maintenance may have added snapshots on top)."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        table = catalog.pyiceberg_catalog().load_table(table_name)
    except NoSuchTableError:
        return None
    snapshot = table.current_snapshot()
    while snapshot is not None:
        version = (
            None if snapshot.summary is None else delta_version_of(snapshot.summary.additional_properties)
        )
        if version is not None:
            return version
        parent = snapshot.parent_snapshot_id
        snapshot = None if parent is None else table.snapshot_by_id(parent)
    return None


def mirror_table_of(table_name: str, table: Any) -> MirrorTable:
    """A pyiceberg `Table` as the engine's `MirrorTable` value (the one `IcebergJava.load` returns), for
    callers that must not start a JVM: the same snapshot lookups (`snapshot_for_version`, …) either way."""
    from dv_assets.mirror.iceberg.java import MirrorTable, Snapshot  # java.py imports this module

    metadata = table.metadata
    return MirrorTable(
        name=table_name,
        location=table.location(),
        format_version=int(metadata.format_version),
        properties=dict(table.properties),
        schema=json.loads(table.schema().model_dump_json()),
        current_snapshot_id=metadata.current_snapshot_id,
        snapshots=tuple(
            Snapshot(
                snapshot_id=s.snapshot_id,
                parent_id=s.parent_snapshot_id,
                timestamp_ms=s.timestamp_ms,
                summary={}
                if s.summary is None
                else {"operation": s.summary.operation.value, **s.summary.additional_properties},
            )
            for s in metadata.snapshots
        ),
    )
