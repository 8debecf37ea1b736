"""One mirrored Delta table as the Dagster platform takes it (`DeltaSource`), and every Dagster name
derived from it (asset keys, partitions, jobs, sensors, schedules, tags, pool), and the table's
automation settings (freshness policy, cleanup schedule, whether its sensors and schedule start running),
in one place.

Tables are configured as `DeltaMirrorComponent` documents (dv_assets/components/delta_mirror.py:
`dv_assets/defs/tables/defs.yaml`, or a file named by DVMIRROR_SOURCES); each is the engine's `TableSpec`
(dv_assets/mirror/table_spec.py), which becomes one DeltaSource (`DeltaSource.of`).
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

import dagster as dg
from dagster._check import CheckError  # what FreshnessPolicy's own checks raise; not dg.*
from dagster._utils.schedules import is_valid_cron_string  # what ScheduleDefinition checks; not dg.*
from pydantic import BaseModel, Field, field_validator, model_validator

from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.iceberg.maintenance import DEFAULT_RETENTION, Retention
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.locations import TableLocation
from dv_assets.mirror.settings import ICEBERG_CATALOG_NAME
from dv_assets.mirror.table_spec import (
    FormatVersion,
    FreshnessSpec,
    IcebergTableName,
    TableName,
    TableSpec,
)

TABLE_TAG = "dvmirror/table"
# The Delta versions a mirror run covers ("7" or "7-12"); shown in the UI's run list, unlike the
# dagster/asset_partition_range_* tags that define them.
VERSIONS_TAG = "dvmirror/delta-versions"


# A table without its own `cleanup_cron` is cleaned daily at a minute of this window (UTC hours
# [first, end)), derived from its name (`spread_cleanup_cron`): hours few pipelines write, and 300
# tables' cleanups spread over 240 minutes instead of firing together.
CLEANUP_WINDOW_HOURS = (1, 5)
# The code location's sensors over all its tables that start running (a table with `start_running: false`
# has a pair of its own, stopped: sensors.py).
FLEET_VERSION_SENSOR = "delta_version_sensor"
FLEET_COMPACTED_SENSOR = "compacted_deletes_sensor"


def spread_cleanup_cron(name: str) -> str:
    """A daily cron at a minute within `CLEANUP_WINDOW_HOURS` (UTC), the same for a name in every process
    and deployment (SHA-256 of the name, not Python's salted `hash`)."""
    first, end = CLEANUP_WINDOW_HOURS
    minute = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") % ((end - first) * 60)
    return f"{minute % 60} {first + minute // 60} * * *"


class Freshness(FreshnessSpec):
    """The freshness policy of `iceberg/<name>` (Dagster's `FreshnessPolicy`): the table's `FreshnessSpec`
    (a time window, or a cron deadline) held to Dagster's own rules. Dagster measures the time since the
    last materialization: a Delta table that commits less often than the window shows FAIL although its
    mirror is current (the lag metadata, `dvmirror/lag_versions`, says which)."""

    @model_validator(mode="after")
    def _dagster_rules(self) -> Freshness:
        try:
            self.policy()  # Dagster's own rules: windows of a minute or more, warn < fail, a valid cron
        except CheckError as err:
            raise ValueError(f"freshness: {err}") from None
        return self

    def policy(self) -> dg.FreshnessPolicy:
        if self.deadline_cron is not None:
            assert self.lower_bound_hours is not None
            return dg.FreshnessPolicy.cron(
                deadline_cron=self.deadline_cron,
                lower_bound_delta=timedelta(hours=self.lower_bound_hours),
                timezone=self.timezone,
            )
        assert self.fail_window_hours is not None
        return dg.FreshnessPolicy.time_window(
            fail_window=timedelta(hours=self.fail_window_hours),
            warn_window=None if self.warn_window_hours is None else timedelta(hours=self.warn_window_hours),
        )


class DeltaSource(BaseModel):
    """One Delta table to mirror, as the platform takes it: the engine's `TableSpec` (`of`) with the
    Dagster names derived from it and Dagster's rules for its cron and freshness policy."""

    name: TableName
    delta_path: str
    iceberg_table: IcebergTableName
    format_version: FormatVersion = 3
    retention: Retention = Field(default_factory=lambda: DEFAULT_RETENTION.model_copy())
    # Folders outside the Delta table whose files its log may name (shallow clones, `p` DVs).
    allowed_roots: list[str] = Field(default_factory=list)
    # The object-storage properties (`s3.*`, `client.*`, `gcs.*`, `adls.*`) the Delta log is read with: the
    # catalog's, set by the factory. Never dumped or shown: they may hold credentials.
    storage_properties: dict[str, str] = Field(default_factory=dict, exclude=True, repr=False)
    # The freshness policy of iceberg/<name>; None: none.
    freshness: Freshness | None = Field(default_factory=Freshness)
    # When cleanup_<name> runs whether or not anything was compacted (cron, UTC); None: daily at a minute
    # derived from the name within CLEANUP_WINDOW_HOURS (`cleanup_schedule_cron`).
    cleanup_cron: str | None = None
    # Whether the table is followed by the code location's sensors (running) and its cleanup schedule
    # starts running; False: the table has its own pair of sensors, and they and the schedule start
    # stopped (Dagster's default status: it holds until someone switches them in the UI, which the
    # instance then remembers).
    start_running: bool = True

    @classmethod
    def of(cls, spec: TableSpec) -> DeltaSource:
        """The platform's view of the engine's table (ValidationError: a cron or freshness policy Dagster
        refuses)."""
        return cls(
            name=spec.name,
            delta_path=spec.delta_path,
            iceberg_table=spec.iceberg_table,
            format_version=spec.format_version,
            retention=spec.retention,
            allowed_roots=list(spec.allowed_roots),
            freshness=None
            if spec.freshness is None
            else Freshness.model_validate(spec.freshness.model_dump()),
            cleanup_cron=spec.cleanup_cron,
            start_running=spec.start_running,
        )

    @property
    def location(self) -> TableLocation:
        """The Delta table's root, typed: what the engine's calls take."""
        return TableLocation.of(self.delta_path)

    def delta_table(self, *, enforce_protocol: bool = True) -> DeltaTable:
        """The Delta table, read through storage configured as the mirror's writes are."""
        return DeltaTable(
            self.location, enforce_protocol=enforce_protocol, io=FileIO(self.storage_properties)
        )

    @field_validator("cleanup_cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is not None and not is_valid_cron_string(value):
            raise ValueError(f"cleanup_cron must be a cron string, got {value!r}")
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
        """The sensor that follows the table's commits: the code location's (`delta_version_sensor`) for
        a table that starts running, its own (`delta_version_sensor_<name>`, stopped) otherwise."""
        return FLEET_VERSION_SENSOR if self.start_running else f"{FLEET_VERSION_SENSOR}_{self.name}"

    @property
    def compacted_sensor_name(self) -> str:
        """`compacted_deletes_sensor`, or `compacted_deletes_sensor_<name>` (as `version_sensor_name`)."""
        return FLEET_COMPACTED_SENSOR if self.start_running else f"{FLEET_COMPACTED_SENSOR}_{self.name}"

    @property
    def cleanup_schedule_cron(self) -> str:
        """The table's `cleanup_cron`, else its minute of the night (`spread_cleanup_cron`)."""
        return self.cleanup_cron or spread_cleanup_cron(self.name)

    @property
    def cleanup_schedule_name(self) -> str:
        return f"cleanup_schedule_{self.name}"

    @property
    def schedule_status(self) -> dg.DefaultScheduleStatus:
        return dg.DefaultScheduleStatus.RUNNING if self.start_running else dg.DefaultScheduleStatus.STOPPED

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
