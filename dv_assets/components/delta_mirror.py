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
holds one Spark session, so all tables of a code location share one catalog (`check_mirrors` refuses a
conflict by name).

An installed package is pointed at another table list by a file of the same documents outside the
package: `$DVMIRROR_SOURCES`, or `sources.yaml` in the working directory (`load_mirrors_file`); it replaces
the packaged tables (`dv_assets.definitions`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import yaml
from jinja2.nativetypes import native_concat
from pydantic import Field, PrivateAttr

from dv_assets.defs.factory import TableDefinitions, build_table, tables_definitions
from dv_assets.defs.sources import DEFAULT_FAIL_WINDOW_HOURS, DeltaSource, Freshness
from dv_assets.mirror import CatalogConfig, MirrorSettings, Retention

COMPONENT_TYPE = "dv_assets.components.DeltaMirrorComponent"


class RetentionAttributes(dg.Model, dg.Resolvable):
    """`Retention` as YAML attributes (dg resolves plain types; `Retention` validates the values)."""

    retain_last: int = Field(
        default=Retention().retain_last, description="keep at least the newest N snapshots"
    )
    # A week, as Iceberg's own default keeps days: the cleanup schedule runs on every table, and what a
    # reader may still time-travel to should not go after a day of busy commits.
    max_snapshot_age_hours: float | None = Field(
        default=168,
        description="expire snapshots older than this (never the newest retain_last); null: keep the newest "
        "retain_last only",
    )
    orphan_min_age_hours: float = Field(
        default=Retention().orphan_min_age_hours, description="age before a crashed run's leftovers go"
    )

    def retention(self) -> Retention:
        return Retention(
            retain_last=self.retain_last,
            max_snapshot_age_hours=self.max_snapshot_age_hours,
            orphan_min_age_hours=self.orphan_min_age_hours,
        )


class FreshnessAttributes(dg.Model, dg.Resolvable):
    """`Freshness` as YAML attributes: a time window, or a cron deadline (`Freshness` validates)."""

    fail_window_hours: float | None = Field(
        default=None,
        description="FAIL when no Delta version was mirrored for this long (default "
        f"{DEFAULT_FAIL_WINDOW_HOURS:g} unless deadline_cron is given)",
    )
    warn_window_hours: float | None = Field(default=None, description="WARN after this long (< fail window)")
    deadline_cron: str | None = Field(
        default=None, description="instead of a window: a version must be mirrored before each deadline"
    )
    lower_bound_hours: float | None = Field(
        default=None, description="with deadline_cron: how long before a deadline a mirrored version counts"
    )
    timezone: str = Field(default="UTC", description="of deadline_cron (IANA)")

    def freshness(self) -> Freshness:
        return Freshness.model_validate(self.model_dump())


class DeltaMirrorComponent(dg.Component, dg.Model, dg.Resolvable):
    """Mirror one Delta table (deletion vectors included) into an Iceberg table: one partition per Delta
    version, the mirror asset, its checks, sensors and jobs."""

    name: str = Field(description="[a-z][a-z0-9_]*: asset keys delta/<name>, iceberg/<name>, job names")
    delta_path: str = Field(description="the Delta table's folder or URI; relative: to the YAML's folder")
    iceberg_table: str = Field(description="NAMESPACE.NAME in the Iceberg catalog")
    format_version: int = Field(default=3, description="3: Puffin DVs; 2: Parquet position deletes")
    retention: RetentionAttributes = Field(
        default_factory=RetentionAttributes, description="snapshot expiry of the cleanup job"
    )
    cleanup_cron: str | None = Field(
        default=None,
        description="when cleanup_<name> runs (cron, UTC), whether or not anything was compacted; omitted: "
        "daily at a minute within 01:00-05:00 UTC derived from the name (tables' cleanups spread out)",
    )
    freshness: FreshnessAttributes | None = Field(
        default_factory=FreshnessAttributes,
        description=f"freshness policy of iceberg/<name>; default: FAIL after {DEFAULT_FAIL_WINDOW_HOURS:g} "
        "hours without a mirrored version; null: none",
    )
    start_running: bool = Field(
        default=True,
        description="the code location's sensors (delta_version_sensor, compacted_deletes_sensor) follow "
        "the table and its cleanup schedule starts running; false: the table has a sensor pair of its own "
        "(delta_version_sensor_<name>, compacted_deletes_sensor_<name>), which and whose schedule start "
        "stopped until switched on in the UI (the instance remembers a switch)",
    )
    allowed_roots: list[str] = Field(
        default_factory=list, description="folders outside delta_path its log may name (shallow clones)"
    )
    catalog: dict[str, str] | None = Field(
        default=None,
        description="Iceberg catalog properties as Iceberg names them (type or catalog-impl, uri, warehouse, "
        "io-impl, s3.*); all tables of a code location share one catalog; omitted: the environment's "
        "(DVMIRROR_CONFIG, DVMIRROR_CATALOG_URI / DVMIRROR_WAREHOUSE, ./.dvmirror)",
    )
    # The code location's settings, resolved once and handed to every component before its definitions
    # are built (`dv_assets.definitions.project_definitions`).
    _settings: MirrorSettings | None = PrivateAttr(default=None)
    # The table's definitions once built: the code location's shared sensors target its jobs.
    _table: TableDefinitions | None = PrivateAttr(default=None)

    def source(self, base: Path) -> DeltaSource:
        """The table as the factory takes it, relative locations resolved against `base` (the YAML's
        folder). Validation (names, table, format version) is DeltaSource's."""

        def beside(location: str) -> str:
            if "://" in location or Path(location).is_absolute():
                return location
            return str((base / location).resolve())

        return DeltaSource(
            name=self.name,
            delta_path=beside(self.delta_path),
            iceberg_table=self.iceberg_table,
            format_version=self.format_version,
            retention=self.retention.retention(),
            allowed_roots=[beside(r) for r in self.allowed_roots],
            freshness=None if self.freshness is None else self.freshness.freshness(),
            cleanup_cron=self.cleanup_cron,
            start_running=self.start_running,
        )

    def catalog_config(self, environment: CatalogConfig) -> CatalogConfig:
        """The catalog the properties name, or `environment`: the environment's (the code location's
        settings: DVMIRROR_CONFIG, DVMIRROR_CATALOG_URI / DVMIRROR_WAREHOUSE, ./.dvmirror)."""
        return CatalogConfig(self.catalog) if self.catalog else environment

    def use_settings(self, settings: MirrorSettings) -> None:
        """The code location's settings, whose catalog is this table's (`check_mirrors`)."""
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


class MirrorConfigError(ValueError):
    """The mirrored tables of a code location do not fit together."""


def check_mirrors(mirrors: Sequence[tuple[DeltaSource, CatalogConfig]], where: str) -> CatalogConfig | None:
    """Refuse tables that cannot share one code location: duplicate names or Iceberg tables, and more than
    one catalog (a process holds one Spark session, whose `dvmirror` catalog is one catalog). The shared
    catalog, None without tables."""
    names = [s.name for s, _ in mirrors]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise MirrorConfigError(f"{where}: two tables are named {duplicates}")
    tables = [s.iceberg_table for s, _ in mirrors]
    twice = sorted({t for t in tables if tables.count(t) > 1})
    if twice:
        raise MirrorConfigError(f"{where}: two tables mirror into the same Iceberg table {twice}")
    catalogs: list[CatalogConfig] = []
    for _, catalog in mirrors:
        if catalog not in catalogs:
            catalogs.append(catalog)
    if len(catalogs) > 1:
        by_catalog = "; ".join(
            f"{c.describe()}: {', '.join(s.name for s, k in mirrors if k == c)}" for c in catalogs
        )
        raise MirrorConfigError(
            f"{where}: all tables of a code location must share one Iceberg catalog (one Spark session per "
            f"process); found {len(catalogs)}: {by_catalog}. Give every table the same `catalog`, or put "
            "the tables of another catalog in a code location of their own."
        )
    return catalogs[0] if catalogs else None


def load_mirrors_file(path: Path, environment: CatalogConfig) -> list[tuple[DeltaSource, CatalogConfig]]:
    """The tables of a YAML file of component documents (the defs.yaml format), outside the package;
    relative locations are relative to the file's folder; a table without `catalog` has `environment`."""
    path = path.resolve()
    out = []
    for number, document in enumerate(_documents(path.read_text()), start=1):
        if document is None:
            continue
        if not isinstance(document, dict) or "type" not in document:
            hint = (
                " (the `sources:` list is the old format: write one document per table, "
                f"`type: {COMPONENT_TYPE}` and its `attributes:`, separated by `---`)"
                if isinstance(document, dict) and "sources" in document
                else ""
            )
            raise MirrorConfigError(f"{path}: document {number} is not a component document{hint}")
        if document["type"] != COMPONENT_TYPE:
            raise MirrorConfigError(
                f"{path}: document {number} has type {document['type']!r}, not {COMPONENT_TYPE}"
            )
        try:
            mirror = resolve_attributes(document.get("attributes") or {})
            out.append((mirror.source(path.parent), mirror.catalog_config(environment)))
        except Exception as err:
            raise MirrorConfigError(f"{path}: document {number}: {err}") from err
    check_mirrors(out, str(path))
    return out


def _documents(text: str) -> list[Any]:
    """The YAML documents of `text`, parsed by libyaml when PyYAML has it (the same constructor as
    `yaml.safe_load_all`, ~10x faster); a malformed file is parsed again in Python for PyYAML's own error."""
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is not None:
        try:
            return list(yaml.load_all(text, Loader=loader))
        except yaml.YAMLError:
            pass
    return list(yaml.safe_load_all(text))


def resolve_attributes(attributes: dict[str, Any]) -> DeltaMirrorComponent:
    """One document's attributes as dg resolves them (`resolve_from_dict`), for a file of hundreds.

    dg dumps the attributes to YAML, parses them again with source positions, and renders every string as
    a Jinja template (one template compiled per string): ~3 ms a table, ~1 s of a 300-table code
    location's load. When no string has anything for Jinja to do (`_renders_as_itself`), dg's resolution
    gives back the attributes as they are, validated by the component's model: that is taken directly.
    Anything else (a template, a value that does not validate) goes through dg, with dg's values and
    error messages."""
    if _plain(attributes):
        try:
            return DeltaMirrorComponent.model_validate(attributes)
        except Exception:  # dg's resolution raises its own error, with the document's positions
            pass
    return DeltaMirrorComponent.resolve_from_dict(attributes)


def _plain(value: Any) -> bool:
    """Whether dg's resolution leaves `value` as it is: no string in it that Jinja's native rendering
    would change."""
    if isinstance(value, str):
        return _renders_as_itself(value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return value is None or isinstance(value, bool | int | float)


def _renders_as_itself(text: str) -> bool:
    """A string dg's `NativeTemplate(text).render()` returns unchanged: no template syntax (all of it
    starts with `{`), no line break (Jinja normalises them and drops a trailing one), and not a Python
    literal (native rendering ends in `native_concat`, which turns `1`, `True` or `'a'` into a value)."""
    if "{" in text or "\n" in text or "\r" in text:
        return False
    rendered = native_concat([text])
    return isinstance(rendered, str) and rendered == text
