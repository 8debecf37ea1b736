"""Which Delta version an Iceberg snapshot mirrors: the `dvmirror.delta-version` summary property, and
the mirror's last mirrored version (its current snapshot's), read without a JVM through pyiceberg for
callers that must not start Spark (the Dagster sensors)."""

from __future__ import annotations

from collections.abc import Mapping

from dv_assets.mirror.settings import CatalogConfig

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
