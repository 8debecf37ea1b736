"""One mirrored Delta table as the Dagster platform takes it (`DeltaSource`), and every Dagster name
derived from it (asset keys, partitions, jobs, sensors, tags, pool), in one place.

Tables are configured as `DeltaMirrorComponent` documents (dv_assets/components/delta_mirror.py:
`dv_assets/defs/tables/defs.yaml`, or a file named by DVMIRROR_SOURCES); each becomes one DeltaSource.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field, field_validator

from dv_assets.mirror import ICEBERG_CATALOG_NAME, DeltaTable, FileIO, Retention

TABLE_TAG = "dvmirror/table"
# The Delta versions a mirror run covers ("7" or "7-12"); shown in the UI's run list, unlike the
# dagster/asset_partition_range_* tags that define them.
VERSIONS_TAG = "dvmirror/delta-versions"

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_TABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$")


class DeltaSource(BaseModel):
    """One Delta table to mirror (a `DeltaMirrorComponent`'s attributes, locations resolved)."""

    name: str
    delta_path: str
    iceberg_table: str
    format_version: int = 3
    retention: Retention = Field(default_factory=Retention)
    # Folders outside the Delta table whose files its log may name (shallow clones, `p` DVs).
    allowed_roots: list[str] = Field(default_factory=list)
    # The object-storage properties (`s3.*`, `client.*`) the Delta log is read with: the catalog's, set by
    # the factory. Never dumped or shown: they may hold credentials.
    storage_properties: dict[str, str] = Field(default_factory=dict, exclude=True, repr=False)

    def delta_table(self, *, enforce_protocol: bool = True) -> DeltaTable:
        """The Delta table, read through storage configured as the mirror's writes are."""
        return DeltaTable(
            self.delta_path, enforce_protocol=enforce_protocol, io=FileIO(self.storage_properties)
        )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"source name must match {_NAME.pattern}, got {value!r}")
        return value

    @field_validator("iceberg_table")
    @classmethod
    def _table(cls, value: str) -> str:
        if not _TABLE.match(value):
            raise ValueError(f"iceberg_table must be NAMESPACE.NAME, got {value!r}")
        return value

    @field_validator("format_version")
    @classmethod
    def _format(cls, value: int) -> int:
        if value not in (2, 3):
            raise ValueError(f"format_version must be 2 or 3, got {value}")
        return value

    # -- names derived from the source -------------------------------------------------------------
    @property
    def delta_asset_key(self) -> list[str]:
        return ["delta", self.name]

    @property
    def mirror_asset_key(self) -> list[str]:
        return ["iceberg", self.name]

    @property
    def partitions_name(self) -> str:
        """The dynamic partitions definition's name: one per table, keys are Delta versions."""
        return f"delta_versions__{self.name}"

    @property
    def mirror_job_name(self) -> str:
        return f"mirror_{self.name}"

    @property
    def checks_job_name(self) -> str:
        return f"checks_{self.name}"

    @property
    def cleanup_job_name(self) -> str:
        return f"cleanup_{self.name}"

    @property
    def cleanup_op_name(self) -> str:
        return f"expire_and_clean_{self.name}"

    @property
    def version_sensor_name(self) -> str:
        return f"delta_version_sensor_{self.name}"

    @property
    def compacted_sensor_name(self) -> str:
        return f"compacted_deletes_sensor_{self.name}"

    @property
    def tags(self) -> dict[str, str]:
        """Tags of every run and asset of the source (runs of one table can be limited on the tag)."""
        return {TABLE_TAG: self.name}

    @property
    def pool(self) -> str:
        """The Dagster concurrency pool of the steps that write the mirror table."""
        return f"dvmirror_{self.name}"

    @property
    def spark_table(self) -> str:
        """The table as Spark SQL names it in the `dvmirror` catalog."""
        return f"{ICEBERG_CATALOG_NAME}.{self.iceberg_table}"
