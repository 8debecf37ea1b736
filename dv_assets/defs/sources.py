"""What the Dagster platform mirrors: the Delta sources listed in `sources.yaml`, and every Dagster name
derived from a source (asset keys, partitions, jobs, tags, pool), in one place.

The sources file is `sources.yaml` in the working directory, or the file `DVMIRROR_SOURCES` names
(`dv_assets.mirror.settings`):

```yaml
sources:
  - name: demo_events              # [a-z0-9_]+, unique: used in asset keys, job and partition names
    delta_path: .dvmirror/demo/events   # relative paths are relative to the YAML file's folder
    iceberg_table: demo.events     # NAMESPACE.NAME in the `dvmirror` catalog
    format_version: 3              # 3: Puffin deletion vectors, 2: Parquet position deletes
    retention:
      retain_last: 5               # keep at least the newest N snapshots
      max_snapshot_age_hours: 168  # expire older snapshots (beyond retain_last); null: count only
    allowed_roots: []              # folders outside delta_path the log may name (shallow clones)
```
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import BaseModel, Field, field_validator

from dv_assets.mirror.iceberg.maintenance import Retention
from dv_assets.mirror.settings import ICEBERG_CATALOG_NAME, MirrorSettings

TABLE_TAG = "dvmirror/table"
# The Delta versions a mirror run covers ("7" or "7-12"); shown in the UI's run list, unlike the
# dagster/asset_partition_range_* tags that define them.
VERSIONS_TAG = "dvmirror/delta-versions"

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_TABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$")


class DeltaSource(BaseModel):
    """One Delta table to mirror, as listed in sources.yaml."""

    name: str
    delta_path: str
    iceberg_table: str
    format_version: int = 3
    retention: Retention = Field(default_factory=Retention)
    # Folders outside the Delta table whose files its log may name (shallow clones, `p` DVs).
    allowed_roots: list[str] = Field(default_factory=list)

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


class SourcesFile(BaseModel):
    sources: list[DeltaSource]


def load_sources(path: str | Path | None = None) -> list[DeltaSource]:
    """The configured sources; relative Delta paths are resolved against the YAML file's folder."""
    path = Path(path).resolve() if path is not None else MirrorSettings.resolve().sources_file
    raw = yaml.safe_load(path.read_text()) or {}
    parsed = SourcesFile.model_validate(raw)
    names = [s.name for s in parsed.sources]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"{path}: duplicate source names {duplicates}")
    tables = [s.iceberg_table for s in parsed.sources]
    if len(set(tables)) != len(tables):
        raise ValueError(f"{path}: two sources mirror into the same Iceberg table")

    def beside_the_file(location: str) -> str:
        if "://" in location or Path(location).is_absolute():
            return location
        return str((path.parent / location).resolve())

    return [
        source.model_copy(
            update={
                "delta_path": beside_the_file(source.delta_path),
                "allowed_roots": [beside_the_file(r) for r in source.allowed_roots],
            }
        )
        for source in parsed.sources
    ]
