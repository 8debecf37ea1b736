"""`DeltaMirrorComponent`: one Delta table mirrored into Iceberg, configured in YAML, one document per
table (`dv_assets/defs/tables/defs.yaml`):

```yaml
type: dv_assets.components.DeltaMirrorComponent
attributes:
  name: events                      # [a-z][a-z0-9_]*, unique: asset keys, job, sensor and partition names
  delta_path: /data/delta/events    # relative paths: relative to the YAML file's folder
  iceberg_table: analytics.events   # NAMESPACE.NAME in the Iceberg catalog (`dvmirror` in Spark)
  format_version: 3                 # 3: Puffin deletion vectors; 2: Parquet position deletes
  retention: {retain_last: 10, max_snapshot_age_hours: 168, orphan_min_age_hours: 24}
  cleanup_cron: "0 3 * * *"         # cleanup_<name> on this cron (UTC), compacted or not; omitted: daily
                                    #   at a minute of 01:00-05:00 UTC derived from the name
  freshness: {fail_window_hours: 24, warn_window_hours: 12}   # or {deadline_cron, lower_bound_hours,
                                    #   timezone}; null: no freshness policy
  start_running: true               # followed by the code location's sensors, the cleanup schedule
                                    #   running (false: a stopped sensor pair of its own, schedule stopped)
  allowed_roots: []                 # folders outside delta_path the log may name (shallow clones)
  catalog:                          # Iceberg catalog properties (Iceberg Java's names); omit: the
    type: rest                      #   environment's (DVMIRROR_CONFIG, DVMIRROR_CATALOG_URI /
    uri: http://iceberg-rest:8181   #   DVMIRROR_WAREHOUSE) or ./.dvmirror
    warehouse: s3://bucket/warehouse
---
type: dv_assets.components.DeltaMirrorComponent
attributes: ...                     # the next table
```

Each table yields the factory's definitions for it (`dv_assets.defs.factory.build_table`):
assets `delta/<name>` and `iceberg/<name>`, their checks, jobs `mirror_<name>`, `checks_<name>`,
`cleanup_<name>`, schedule `cleanup_schedule_<name>`; `iceberg/<name>` carries the freshness policy. The
code location adds its two sensors over all tables that start running (`delta_version_sensor`,
`compacted_deletes_sensor`: `dv_assets.definitions.project_definitions`); a table with
`start_running: false` has its own stopped pair (`delta_version_sensor_<name>`, ...). A process
holds one Spark session, so all tables of a code location share one catalog (`check_tables_fit` refuses a
conflict by name).

The attributes and the table they describe are the engine's (`dv_assets.mirror.table_spec`:
`TableAttributes`, `TableSpec`); the component adds dg's templates and the Dagster definitions. An installed
package is pointed at another table list by a file of the same documents outside the package:
`$DVMIRROR_SOURCES`, or `sources.yaml` in the working directory (`load_mirrors_file`); it replaces the
packaged tables (`dv_assets.definitions`). That file (and `dvmirror sync --tables`) is read by the engine's
one loader of the tables file (`load_tables_file`, over the parser of `--config`'s file too): `${VAR}` in
any string value from the environment, a YAML boolean or number as a catalog property's text, dg's
templates, and every bad file (missing, not YAML, a key given twice, an unknown key, a wrong type, a
duplicate name) one line naming the file, the line and the key (`TablesFileError`); the platform's own
rules (a cron Dagster takes, its freshness policy) are checked by the same loader (`DeltaSource.of`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import dagster as dg
from pydantic import Field, PrivateAttr

from dv_assets.defs.factory import TableDefinitions, build_table, tables_definitions
from dv_assets.defs.sources import DeltaSource
from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from dv_assets.mirror.table_spec import FreshnessAttributes as EngineFreshnessAttributes
from dv_assets.mirror.table_spec import MirrorConfigError, TableAttributes, TablesFileError, load_tables_file
from dv_assets.mirror.table_spec import RetentionAttributes as EngineRetentionAttributes

__all__ = ["DeltaMirrorComponent", "MirrorConfigError", "TablesFileError", "load_mirrors_file"]


class RetentionAttributes(EngineRetentionAttributes, dg.Resolvable):
    """The engine's `retention:` attributes, resolved by dg (templates in its values too)."""


class FreshnessAttributes(EngineFreshnessAttributes, dg.Resolvable):
    """The engine's `freshness:` attributes, resolved by dg (templates in its values too)."""


def _described(name: str) -> str | None:
    return TableAttributes.model_fields[name].description


class DeltaMirrorComponent(dg.Component, TableAttributes, dg.Resolvable):
    """Mirror one Delta table (deletion vectors included) into an Iceberg table: one partition per Delta
    version, the mirror asset, its checks, sensors and jobs. Its attributes are the engine's
    `TableAttributes` (the nested ones dg-resolvable)."""

    retention: RetentionAttributes = Field(
        default_factory=RetentionAttributes, description=_described("retention")
    )
    freshness: FreshnessAttributes | None = Field(
        default_factory=FreshnessAttributes, description=_described("freshness")
    )
    # The code location's settings, resolved once and handed to every component before its definitions
    # are built (`dv_assets.definitions.project_definitions`).
    _settings: MirrorSettings | None = PrivateAttr(default=None)
    # The table's definitions once built: the code location's shared sensors target its jobs.
    _table: TableDefinitions | None = PrivateAttr(default=None)

    def source(self, base: Path) -> DeltaSource:
        """The table as the factory takes it, relative locations resolved against `base` (the YAML's
        folder): the engine's `TableSpec`, seen by the platform."""
        return DeltaSource.of(self.spec(base))

    def catalog_config(self, environment: CatalogConfig) -> CatalogConfig:
        """The catalog the properties name, or `environment`: the environment's (the code location's
        settings: DVMIRROR_CONFIG, DVMIRROR_CATALOG_URI / DVMIRROR_WAREHOUSE, ./.dvmirror)."""
        return self.own_catalog() or environment

    def use_settings(self, settings: MirrorSettings) -> None:
        """The code location's settings, whose catalog is this table's (`check_tables_fit`)."""
        self._settings = settings

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        if self._settings is None:
            raise MirrorConfigError(
                f"{self.name}: a DeltaMirrorComponent is built by the code location dv_assets.definitions "
                "(`project_definitions`), which resolves the settings of all its tables once"
            )
        self._table = build_table(self.source(context.path), self._settings)
        return tables_definitions([self._table], self._settings, with_shared_sensors=False)

    @property
    def table(self) -> TableDefinitions:
        """The table's definitions, as `build_defs` built them."""
        if self._table is None:
            raise MirrorConfigError(f"{self.name}: the component's definitions are not built yet")
        return self._table


def load_mirrors_file(
    path: Path,
    environment: CatalogConfig | Callable[[], CatalogConfig],
    environ: Mapping[str, str] | None = None,
) -> list[tuple[DeltaSource, CatalogConfig]]:
    """The tables of a tables file as the platform takes them: the engine's loader
    (`load_tables_file`) with the platform's rules checked per table, each error one line naming the
    file, the line and the key (TablesFileError)."""
    return [
        (DeltaSource.of(spec), catalog)
        for spec, catalog in load_tables_file(path, environment, environ, check=DeltaSource.of)
    ]
