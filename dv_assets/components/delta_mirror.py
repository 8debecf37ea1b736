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
the packaged tables (`dv_assets.definitions`). That file (and `dvmirror sync --tables`) is read by the
engine's one parser of the mirror's files (`dv_assets.mirror.config_file`, `--config`'s too): `${VAR}` in
any string value from the environment, a YAML boolean or number as a catalog property's text, and every
bad file (missing, not YAML, a key given twice, an unknown key, a wrong type, a duplicate name) one line
naming the file, the line and the key (`TablesFileError`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, get_args

import dagster as dg
from jinja2.nativetypes import native_concat
from pydantic import BaseModel, Field, PrivateAttr, ValidationError

from dv_assets.defs.factory import TableDefinitions, build_table, tables_definitions
from dv_assets.defs.sources import DEFAULT_FAIL_WINDOW_HOURS, DeltaSource, Freshness
from dv_assets.mirror import (
    DEFAULT_RETENTION,
    TABLES_FILE,
    CatalogConfig,
    ConfigFileError,
    Located,
    MirrorSettings,
    Retention,
    Source,
    catalog_properties,
    line_of,
    read_documents,
    substitute,
)

COMPONENT_TYPE = "dv_assets.components.DeltaMirrorComponent"


class RetentionAttributes(dg.Model, dg.Resolvable):
    """`Retention` as YAML attributes (dg resolves plain types; `Retention` validates the values)."""

    retain_last: int = Field(
        default=DEFAULT_RETENTION.retain_last, description="keep at least the newest N snapshots"
    )
    # A week (DEFAULT_RETENTION), as Iceberg's own default keeps days: the cleanup runs on every table,
    # and what a reader may still time-travel to should not go after a day of busy commits.
    max_snapshot_age_hours: float | None = Field(
        default=DEFAULT_RETENTION.max_snapshot_age_hours,
        description="expire snapshots older than this (never the newest retain_last); null: expire every "
        "snapshot beyond the newest retain_last",
    )
    orphan_min_age_hours: float = Field(
        default=DEFAULT_RETENTION.orphan_min_age_hours,
        description="age before a crashed run's leftovers go",
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
    catalog: dict[str, str | bool | int | float] | None = Field(
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
        return self.own_catalog() or environment

    def own_catalog(self) -> CatalogConfig | None:
        """The catalog the table's `catalog` properties name (None: none given)."""
        if not self.catalog:
            return None
        # A YAML boolean as Iceberg spells it (`true`), as the configuration file takes it.
        return CatalogConfig(
            {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in self.catalog.items()}
        )

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


class TablesFileError(ConfigFileError, MirrorConfigError):
    """A bad tables file: one line naming the file, the line and the key (`ConfigFileError`), raised before
    anything is built: `dvmirror` exits 2 with it, the code location fails to load with it."""


def load_mirrors_file(
    path: Path,
    environment: CatalogConfig | Callable[[], CatalogConfig],
    environ: Mapping[str, str] | None = None,
) -> list[tuple[DeltaSource, CatalogConfig]]:
    """The tables of a YAML file of component documents (the defs.yaml format), outside the package;
    relative locations are relative to the file's folder; a table without `catalog` has `environment`
    (a callable: asked only then). Read by the engine's parser (`dv_assets.mirror.config_file`): `${VAR}`
    from `environ` (default: the process's); TablesFileError for every bad file."""
    path = Path(path).absolute()
    environment_catalog: list[CatalogConfig] = []

    def default_catalog() -> CatalogConfig:
        if not environment_catalog:
            environment_catalog.append(environment() if callable(environment) else environment)
        return environment_catalog[0]

    env = os.environ if environ is None else environ
    source = Source(path, TABLES_FILE)
    out: list[tuple[DeltaSource, CatalogConfig]] = []
    seen: dict[tuple[str, str], int] = {}  # (name or iceberg_table, value) -> its line
    try:
        documents = read_documents(path, TABLES_FILE)
    except ConfigFileError as err:
        raise _error(source, err.reason, err.line, err.key) from None
    for document in documents:
        content = document.content
        if content is None:
            continue
        attributes = _attributes(document.number, document.line, content, source)
        try:
            attributes = substitute(attributes, source, env, line=attributes.line, key="attributes")
            if attributes.get("catalog") is not None:
                attributes["catalog"] = catalog_properties(
                    attributes["catalog"],
                    source,
                    line=attributes.line_of("catalog"),
                    key="attributes.catalog",
                )
        except ConfigFileError as err:
            raise _error(source, err.reason, err.line, err.key) from None
        try:
            mirror = resolve_attributes(attributes)
            table_source, own_catalog = mirror.source(path.parent), mirror.own_catalog()
        except ValidationError as err:
            raise _validation_error(err, attributes, source) from None
        except Exception as err:  # dg's resolution of a template, a catalog refused: the document's line
            reason = " ".join(str(err).split())[:500]
            raise _error(source, f"document {document.number}: {reason}", attributes.line) from None
        out.append((table_source, own_catalog or default_catalog()))
        for key in ("name", "iceberg_table"):
            value = str(attributes[key])
            line = attributes.line_of(key)
            if (key, value) in seen:
                raise _error(
                    source,
                    f"{value!r} is also the {key} of the table on line {seen[key, value]}",
                    line,
                    f"attributes.{key}",
                )
            seen[key, value] = line
    try:
        check_mirrors(out, str(path))
    except MirrorConfigError as err:  # more than one catalog
        raise _error(source, str(err).removeprefix(f"{path}: ")) from None
    return out


def _error(source: Source, reason: str, line: int | None = None, key: str | None = None) -> TablesFileError:
    return TablesFileError(reason, path=source.path, kind=source.kind, line=line, key=key)


# A component document's own keys (dg's `requirements`, `template_vars_module`, ... are not read here).
_DOCUMENT_KEYS = ("type", "attributes")


def _attributes(number: int, line: int, content: Any, source: Source) -> Located:
    """A document's `attributes` (TablesFileError: not a DeltaMirrorComponent document)."""
    if not isinstance(content, Located) or "type" not in content:
        hint = (
            " (the `sources:` list is the old format: write one document per table, "
            f"`type: {COMPONENT_TYPE}` and its `attributes:`, separated by `---`)"
            if isinstance(content, dict) and "sources" in content
            else f" (`type: {COMPONENT_TYPE}` and its `attributes:`)"
        )
        raise _error(source, f"document {number} is not a component document{hint}", line)
    if content["type"] != COMPONENT_TYPE:
        raise _error(
            source,
            f"document {number} has type {content['type']!r}, not {COMPONENT_TYPE}",
            content.line_of("type"),
            "type",
        )
    for key in content:
        if key not in _DOCUMENT_KEYS:
            raise _error(
                source, f"unknown key (known: {', '.join(_DOCUMENT_KEYS)})", content.line_of(key), str(key)
            )
    attributes = content.get("attributes")
    if not isinstance(attributes, Located):
        got = "nothing" if attributes is None else type(attributes).__name__
        raise _error(
            source,
            f"document {number} needs `attributes:`, a mapping (name, delta_path, iceberg_table, ...), "
            f"got {got}",
            content.line_of("attributes"),
            "attributes",
        )
    return attributes


# Where a model's validation error points, relative to the document's attributes.
_PREFIX = {"Freshness": ("freshness",), "Retention": ("retention",)}


def _validation_error(err: ValidationError, attributes: Located, source: Source) -> TablesFileError:
    """The first error of a model's validation as one line: its key, its line and pydantic's message."""
    first = err.errors(include_url=False)[0]
    location = (*_PREFIX.get(err.title, ()), *first["loc"])
    key = ".".join(str(part) for part in ("attributes", *location))
    line = line_of(attributes, location, attributes.line)
    if first["type"] == "extra_forbidden":
        known = _known_keys(location[:-1])
        reason = "unknown key" + (f" (known: {', '.join(known)})" if known else "")
    elif first["type"] == "missing":
        reason = "required, missing"
    else:
        reason = " ".join(str(first["msg"]).split())
        shown = first.get("input")
        said = str(first["type"]).startswith("value_error")  # the model's own message names the value
        if not said and location[:1] != ("catalog",) and isinstance(shown, str | int | float | bool):
            reason += f", got {str(shown)[:80]!r}"
    return _error(source, reason, line, key)


def _known_keys(location: Sequence[Any]) -> list[str]:
    """The attribute names at `location` (the component's, or a nested model's)."""
    model: type[BaseModel] = DeltaMirrorComponent
    for part in location:
        field = model.model_fields.get(str(part))
        if field is None:
            return []
        nested = [t for t in (field.annotation, *get_args(field.annotation)) if _is_model(t)]
        if not nested:
            return []
        model = nested[0]
    return list(model.model_fields)


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def resolve_attributes(attributes: dict[str, Any]) -> DeltaMirrorComponent:
    """One document's attributes as dg resolves them (`resolve_from_dict`), for a file of hundreds.

    dg dumps the attributes to YAML, parses them again with source positions, and renders every string as
    a Jinja template (one template compiled per string): ~3 ms a table, ~1 s of a 300-table code
    location's load. When no string has anything for Jinja to do (`_renders_as_itself`), dg's resolution
    gives back the attributes as they are, validated by the component's model: that is taken directly.
    Anything else (a template, a value that does not validate) goes through dg, with dg's values and
    error messages."""
    if _plain(attributes):
        # A value that does not validate raises pydantic's error, which names the key (the file's line
        # is found from it: `load_mirrors_file`).
        return DeltaMirrorComponent.model_validate(attributes)
    return DeltaMirrorComponent.resolve_from_dict(_as_dicts(attributes))


def _as_dicts(value: Any) -> Any:
    """`value` with plain dicts for the parser's `Located` mappings (dg dumps the attributes to YAML)."""
    if isinstance(value, dict):
        return {k: _as_dicts(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_dicts(v) for v in value]
    return value


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
