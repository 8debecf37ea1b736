"""What the Dagster platform mirrors, and where: the configured Delta sources and the Iceberg catalog.

The one place users list the tables to mirror is a YAML file, `sources.yaml` at the repository root,
or the file named by the environment variable `DVMIRROR_SOURCES`:

```yaml
sources:
  - name: demo_events              # [a-z0-9_]+, unique: used in asset keys, job and partition names
    delta_path: .dvmirror/demo/events   # relative paths are relative to the YAML file's folder
    iceberg_table: demo.events     # NAMESPACE.NAME in the `dvmirror` catalog
    format_version: 3              # 3: Puffin deletion vectors, 2: Parquet position deletes
    retention:
      retain_last: 5               # keep at least the newest N snapshots
      max_snapshot_age_hours: 168  # expire older snapshots (beyond retain_last); null: count only
```

The Iceberg catalog comes from `DVMIRROR_CATALOG_URI` (sqlite:///PATH/catalog.db) and
`DVMIRROR_WAREHOUSE`, by default `.dvmirror/catalog.db` and `.dvmirror/warehouse` under the repository
(the same defaults as the `dvmirror` CLI run from the repository root).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml
from pydantic import BaseModel, Field, field_validator

from resources.spark import REPO_ROOT, CatalogLocation

SOURCES_ENV = "DVMIRROR_SOURCES"
CATALOG_URI_ENV = "DVMIRROR_CATALOG_URI"
WAREHOUSE_ENV = "DVMIRROR_WAREHOUSE"
DEFAULT_SOURCES_FILE = REPO_ROOT / "sources.yaml"
DEFAULT_STATE_DIR = REPO_ROOT / ".dvmirror"

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_TABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$")


class Retention(BaseModel):
    """How many Iceberg snapshots of a mirror the cleanup job keeps (Iceberg's own expire semantics)."""

    retain_last: int = Field(default=10, ge=1, description="keep at least the newest N snapshots")
    max_snapshot_age_hours: float | None = Field(
        default=None,
        gt=0,
        description="expire snapshots older than this (never the newest retain_last); None: by count only",
    )
    orphan_min_age_hours: float = Field(
        default=24.0,
        ge=0,
        description="mirror-owned delete files no snapshot ever referenced (a crashed run's) are deleted "
        "only when older than this, so an in-flight commit's files are never taken",
    )


class DeltaSource(BaseModel):
    """One Delta table to mirror, as listed in sources.yaml."""

    name: str
    delta_path: str
    iceberg_table: str
    format_version: int = 3
    retention: Retention = Field(default_factory=Retention)

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
    def spark_table(self) -> str:
        """The table as Spark SQL names it in the `dvmirror` catalog."""
        return f"dvmirror.{self.iceberg_table}"


class SourcesFile(BaseModel):
    sources: list[DeltaSource]


def sources_path() -> Path:
    return Path(os.environ.get(SOURCES_ENV) or DEFAULT_SOURCES_FILE).resolve()


def load_sources(path: str | Path | None = None) -> list[DeltaSource]:
    """The configured sources; relative Delta paths are resolved against the YAML file's folder."""
    path = Path(path).resolve() if path is not None else sources_path()
    raw = yaml.safe_load(path.read_text()) or {}
    parsed = SourcesFile.model_validate(raw)
    names = [s.name for s in parsed.sources]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"{path}: duplicate source names {duplicates}")
    tables = [s.iceberg_table for s in parsed.sources]
    if len(set(tables)) != len(tables):
        raise ValueError(f"{path}: two sources mirror into the same Iceberg table")
    out = []
    for source in parsed.sources:
        delta_path = source.delta_path
        if "://" not in delta_path and not Path(delta_path).is_absolute():
            delta_path = str((path.parent / delta_path).resolve())
        out.append(source.model_copy(update={"delta_path": delta_path}))
    return out


def catalog_location() -> CatalogLocation:
    """The Iceberg catalog from the environment, defaulting to `.dvmirror/` under the repository."""
    uri = os.environ.get(CATALOG_URI_ENV) or f"sqlite:///{DEFAULT_STATE_DIR / 'catalog.db'}"
    warehouse = os.environ.get(WAREHOUSE_ENV) or str(DEFAULT_STATE_DIR / "warehouse")
    return CatalogLocation.from_uri(uri, warehouse)
