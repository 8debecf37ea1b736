"""One mirrored table as the tables file describes it (`TableSpec`: a Delta table mirrored into an Iceberg
table with these settings), and the one loader of the tables file (`load_tables_file`). The CLI
(`dvmirror sync --tables`, `dvmirror expire --tables`), the fleet and the Dagster platform (the
`DeltaMirrorComponent`, whose attributes are `TableAttributes`; `DeltaSource`) are built on it. No Dagster
here: the platform checks its own rules (a cron Dagster takes, its freshness policy's) with `check`.

The tables file is a YAML file of component documents, one per table (the format of the dg defs folder's
`defs.yaml`):

```yaml
type: dv_assets.components.DeltaMirrorComponent
attributes: {name: events, delta_path: /data/delta/events, iceberg_table: analytics.events, ...}
---
type: dv_assets.components.DeltaMirrorComponent
attributes: ...
```

Read by the engine's one parser (`config_file.py`: `${VAR}` from the environment, a catalog property's
boolean or number as its text, strict keys), then every string rendered as dg renders a component's
attributes: a Jinja template evaluated natively (`{{ env.VAR }}`, `{{ env('VAR', 'default') }}`,
`{{ datetime.timedelta(...) }}`; `_render`). Every bad file is a `TablesFileError`: one line naming the
file, the line and the key.
"""

from __future__ import annotations

import ast
import datetime as dt
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Protocol, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from dv_assets.mirror.config_file import (
    TABLES_FILE,
    ConfigFileError,
    Located,
    Source,
    catalog_properties,
    line_of,
    map_strings,
    read_documents,
    substitute,
)
from dv_assets.mirror.iceberg.maintenance import DEFAULT_RETENTION, Retention
from dv_assets.mirror.locations import TableLocation
from dv_assets.mirror.settings import CatalogConfig

COMPONENT_TYPE = "dv_assets.components.DeltaMirrorComponent"
DEFAULT_FAIL_WINDOW_HOURS = 24.0

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_TABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$")


def check_name(value: str) -> str:
    if not _NAME.match(value):
        raise ValueError(f"source name must match {_NAME.pattern}, got {value!r}")
    return value


def check_iceberg_table(value: str) -> str:
    if not _TABLE.match(value):
        raise ValueError(f"iceberg_table must be NAMESPACE.NAME, got {value!r}")
    return value


def check_format_version(value: int) -> int:
    if value not in (2, 3):
        raise ValueError(f"format_version must be 2 or 3, got {value}")
    return value


# The checked fields of a table, as the engine's spec and the platform's source both type them.
TableName = Annotated[str, AfterValidator(check_name)]
IcebergTableName = Annotated[str, AfterValidator(check_iceberg_table)]
FormatVersion = Annotated[int, AfterValidator(check_format_version)]


class FreshnessSpec(BaseModel):
    """When the mirror of a table counts as fresh: a time window (FAIL when nothing was mirrored for
    `fail_window_hours`, WARN after `warn_window_hours`) or, with `deadline_cron`, a cron deadline (FAIL
    when no version was mirrored within `lower_bound_hours` before the last deadline). The platform adds
    its scheduler's own rules (`dv_assets.defs.sources.Freshness`)."""

    fail_window_hours: float | None = None  # DEFAULT_FAIL_WINDOW_HOURS unless deadline_cron is given
    warn_window_hours: float | None = None
    deadline_cron: str | None = None
    lower_bound_hours: float | None = None
    timezone: str = "UTC"

    @model_validator(mode="before")
    @classmethod
    def _default_window(cls, data: Any) -> Any:
        if (
            isinstance(data, dict)
            and data.get("deadline_cron") is None
            and data.get("fail_window_hours") is None
        ):
            return {**data, "fail_window_hours": DEFAULT_FAIL_WINDOW_HOURS}
        return data

    @model_validator(mode="after")
    def _one_kind(self) -> FreshnessSpec:
        if self.deadline_cron is not None:
            if self.fail_window_hours is not None or self.warn_window_hours is not None:
                raise ValueError(
                    "freshness: give either a time window (fail_window_hours, warn_window_hours) or a cron "
                    "deadline (deadline_cron, lower_bound_hours), not both"
                )
            if self.lower_bound_hours is None:
                raise ValueError("freshness: deadline_cron needs lower_bound_hours")
        elif self.lower_bound_hours is not None:
            raise ValueError("freshness: lower_bound_hours belongs to deadline_cron")
        return self


class TableSpec(BaseModel):
    """One Delta table mirrored into one Iceberg table, with its settings: what a tables file's document
    says, relative locations resolved against the file's folder."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: TableName  # [a-z][a-z0-9_]*: the table's name in the file, Dagster's names, the CLI's reports
    delta_path: str  # the Delta table as written (relative: resolved); its typed form is `location`
    iceberg_table: IcebergTableName  # NAMESPACE.NAME
    # None (the one-table CLI without --format-version only; a tables file says 2 or 3): the mirror's own,
    # 3 for a new one.
    format_version: FormatVersion | None = 3
    retention: Retention = Field(default_factory=lambda: DEFAULT_RETENTION.model_copy())
    # Folders outside the Delta table whose files its log may name (shallow clones, `p` DVs).
    allowed_roots: tuple[str, ...] = ()
    catalog: CatalogConfig | None = None  # the table's own catalog; None: the environment's
    cleanup_cron: str | None = None  # when the platform's cleanup runs (cron, UTC); None: its default
    freshness: FreshnessSpec | None = Field(default_factory=FreshnessSpec)  # None: no freshness policy
    start_running: bool = True  # whether the platform's sensors and schedule start running

    @property
    def location(self) -> TableLocation:
        """The Delta table's root, typed (when asked: a bad `file:` URI is the sync's refusal, not the
        file's)."""
        return TableLocation.of(self.delta_path)


@dataclass(frozen=True)
class FleetTable:
    """One table of a fleet (`fleet.run_fleet`): its `TableSpec`, and where its mirror stands when known."""

    spec: TableSpec
    # The last mirrored Delta version when the caller knows it (read without a JVM): the first turn's
    # place in the queue. None: not known (a new mirror, or not read).
    mirrored_hint: int | None = None
    # The newest Delta version this run mirrors (`dvmirror sync --until-version`); None: the latest.
    until_version: int | None = None

    @classmethod
    def one(
        cls,
        delta_path: str,
        iceberg_table: str,
        format_version: int | None = None,
        allowed_roots: tuple[str, ...] = (),
        until_version: int | None = None,
    ) -> FleetTable:
        """The table of a one-table `dvmirror sync` (a fleet of one), named after its Iceberg table."""
        name = "table_" + re.sub(r"[^a-z0-9_]", "_", iceberg_table.lower())
        spec = TableSpec(
            name=name,
            delta_path=delta_path,
            iceberg_table=iceberg_table,
            format_version=format_version,
            allowed_roots=allowed_roots,
        )
        return cls(spec, until_version=until_version)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def delta_path(self) -> str:
        return self.spec.delta_path

    @property
    def location(self) -> TableLocation:
        return self.spec.location

    @property
    def iceberg_table(self) -> str:
        return self.spec.iceberg_table

    @property
    def format_version(self) -> int | None:
        return self.spec.format_version

    @property
    def allowed_roots(self) -> tuple[str, ...]:
        return self.spec.allowed_roots


class _Attributes(BaseModel):
    model_config = ConfigDict(extra="forbid")  # an unknown key is an error naming it


class RetentionAttributes(_Attributes):
    """`Retention` as YAML attributes (`Retention` validates the values)."""

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


class FreshnessAttributes(_Attributes):
    """`FreshnessSpec` as YAML attributes: a time window, or a cron deadline (`FreshnessSpec` validates)."""

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

    def freshness(self) -> FreshnessSpec:
        return FreshnessSpec.model_validate(self.model_dump())


class TableAttributes(_Attributes):
    """A tables file document's `attributes:` (the `DeltaMirrorComponent`'s fields, which are these)."""

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

    def spec(self, base: Path) -> TableSpec:
        """The table, relative locations resolved against `base` (the YAML's folder). ValidationError:
        a value its model refuses (names, table, format version, retention, freshness)."""

        def beside(location: str) -> str:
            if "://" in location or Path(location).is_absolute():
                return location
            return str((base / location).resolve())

        return TableSpec(
            name=self.name,
            delta_path=beside(self.delta_path),
            iceberg_table=self.iceberg_table,
            format_version=self.format_version,
            retention=self.retention.retention(),
            allowed_roots=tuple(beside(r) for r in self.allowed_roots),
            catalog=self.own_catalog(),
            cleanup_cron=self.cleanup_cron,
            freshness=None if self.freshness is None else self.freshness.freshness(),
            start_running=self.start_running,
        )

    def own_catalog(self) -> CatalogConfig | None:
        """The catalog the table's `catalog` properties name (None: none given)."""
        if not self.catalog:
            return None
        # A YAML boolean as Iceberg spells it (`true`), as the configuration file takes it.
        return CatalogConfig(
            {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in self.catalog.items()}
        )


class MirrorConfigError(ValueError):
    """The mirrored tables of a code location (or a tables file) do not fit together."""


class TablesFileError(ConfigFileError, MirrorConfigError):
    """A bad tables file: one line naming the file, the line and the key (`ConfigFileError`), raised before
    anything is built: `dvmirror` exits 2 with it, the code location fails to load with it."""


class NamedTable(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def iceberg_table(self) -> str: ...


def check_tables_fit(mirrors: Sequence[tuple[NamedTable, CatalogConfig]], where: str) -> CatalogConfig | None:
    """Refuse tables that cannot share one process: duplicate names or Iceberg tables, and more than one
    catalog (a process holds one Spark session, whose `dvmirror` catalog is one catalog). The shared
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


def load_tables_file(
    path: str | Path,
    environment: CatalogConfig | Callable[[], CatalogConfig],
    environ: Mapping[str, str] | None = None,
    check: Callable[[TableSpec], object] | None = None,
) -> list[tuple[TableSpec, CatalogConfig]]:
    """The tables of a tables file, each with its catalog: its own, else `environment` (a callable: asked
    only then). `${VAR}` and templates read `environ` (default: the process's). `check`: the caller's own
    rules for a table (the platform's), whose pydantic error is reported as the file's. TablesFileError
    for every bad file, the tables not sharing one catalog included."""
    path = Path(path).absolute()
    source = Source(path, TABLES_FILE)
    env = os.environ if environ is None else environ
    environment_catalog: list[CatalogConfig] = []

    def default_catalog() -> CatalogConfig:
        if not environment_catalog:
            environment_catalog.append(environment() if callable(environment) else environment)
        return environment_catalog[0]

    try:
        documents = read_documents(path, TABLES_FILE)
    except ConfigFileError as err:
        raise _error(source, err.reason, err.line, err.key) from None
    out: list[tuple[TableSpec, CatalogConfig]] = []
    seen: dict[tuple[str, str], int] = {}  # (name or iceberg_table, value) -> its line
    for document in documents:
        if document.content is None:
            continue
        attributes = _attributes(document.number, document.line, document.content, source)
        spec = _table_spec(document.number, attributes, source, env, path.parent, check)
        out.append((spec, spec.catalog or default_catalog()))
        for key in ("name", "iceberg_table"):
            value = str(getattr(spec, key))
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
        check_tables_fit(out, str(path))
    except MirrorConfigError as err:  # more than one catalog
        raise _error(source, str(err).removeprefix(f"{path}: ")) from None
    return out


def _table_spec(
    number: int,
    attributes: Located,
    source: Source,
    env: Mapping[str, str],
    base: Path,
    check: Callable[[TableSpec], object] | None,
) -> TableSpec:
    """One document's table: substituted, typed, rendered, validated (TablesFileError: file, line, key)."""
    try:
        attributes = substitute(attributes, source, env, line=attributes.line, key="attributes")
        if attributes.get("catalog") is not None:
            attributes["catalog"] = catalog_properties(
                attributes["catalog"], source, line=attributes.line_of("catalog"), key="attributes.catalog"
            )
        attributes = render_templates(attributes, source, env)
    except ConfigFileError as err:
        raise _error(source, err.reason, err.line, err.key) from None
    try:
        spec = TableAttributes.model_validate(attributes).spec(base)
        if check is not None:
            check(spec)
    except ValidationError as err:
        raise _validation_error(err, attributes, source) from None
    except Exception as err:  # a catalog refused (CatalogConfig), a check's own error: the document's line
        reason = " ".join(str(err).split())[:500]
        raise _error(source, f"document {number}: {reason}", attributes.line) from None
    return spec


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


# Where a model's validation error points, relative to the document's attributes (by the model's name:
# the platform's `Freshness` is a FreshnessSpec with its scheduler's rules).
_PREFIX = {"FreshnessSpec": ("freshness",), "Freshness": ("freshness",), "Retention": ("retention",)}


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
    """The attribute names at `location` (the document's attributes, or a nested model's)."""
    model: type[BaseModel] = TableAttributes
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


# -- templates: every string of the attributes as dg renders a component's -------------------------------
def render_templates(attributes: Located, source: Source, environ: Mapping[str, str]) -> Located:
    """The attributes with every string rendered as dg's resolution renders it (`NativeTemplate(text)
    .render(**scope)`: a template evaluated to a value, a Python literal such as `2` to that value); a
    template's error is a ConfigFileError naming its line and key. The scope is dg's, Dagster's own
    objects aside: `env` (`env.VAR`, None when unset; `env('VAR')`, an error when unset unless a default
    is given) and `datetime` (`datetime.datetime`, `datetime.timedelta`)."""
    if _plain(attributes):
        return attributes  # as rendering gives it back, without a template per string (300 tables)
    scope = {"env": _EnvScope(environ), "datetime": _DatetimeScope()}

    def render(text: str, line: int, key: str) -> Any:
        return _render(text, scope, source, line=line, key=key)

    return map_strings(attributes, render, line=attributes.line, key="attributes")


def _render(text: str, scope: Mapping[str, Any], source: Source, *, line: int, key: str) -> Any:
    if not text:  # dg leaves an empty string as it is (rendered, it would be None)
        return text
    from jinja2 import Undefined
    from jinja2.exceptions import UndefinedError
    from jinja2.nativetypes import NativeTemplate

    try:
        value = NativeTemplate(text).render(**scope)
    except UndefinedError as err:
        reason = _undefined(str(err.message), scope)
        raise source.error(f"template {text!r}: {reason}", line=line, key=key) from None
    except Exception as err:
        reason = " ".join(f"{type(err).__name__}: {err}".split())[:300]
        raise source.error(f"template {text!r}: {reason}", line=line, key=key) from None
    if isinstance(value, Undefined):
        message = value._undefined_message
        raise source.error(f"template {text!r}: {_undefined(message, scope)}", line=line, key=key)
    return value


def _undefined(message: str, scope: Mapping[str, Any]) -> str:
    return f"{message} (a template knows {', '.join(scope)})"


class _EnvScope:
    """`env` in a template, as dg's: `env.VAR` (None when unset), `env('VAR'[, default])`."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ

    def __call__(self, key: str, default: Any = ...) -> Any:
        value = self._environ.get(key, default)
        if value is ...:
            raise ValueError(
                f"Environment variable {key} is not set and no default value was provided. To provide a "
                f"default value, use e.g. `env('{key}', 'default_value')`."
            )
        return value

    def __getattr__(self, key: str) -> str | None:
        if key.startswith(("jinja", "_")):  # Jinja's own probes of an object
            raise AttributeError(key)
        return self._environ.get(key)

    def __getitem__(self, key: str) -> None:
        raise ValueError(
            f"To access environment variables, use dot access or the `env` function, e.g. `env.{key}` or "
            f"`env('{key}')`"
        )


class _DatetimeScope:
    """`datetime` in a template, as dg's: its `datetime` and `timedelta`."""

    datetime = dt.datetime
    timedelta = dt.timedelta


def _plain(value: Any) -> bool:
    """Whether rendering leaves `value` as it is: no string in it that Jinja's native rendering would
    change."""
    if isinstance(value, str):
        return _renders_as_itself(value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return value is None or isinstance(value, bool | int | float)


def _renders_as_itself(text: str) -> bool:
    """A string `NativeTemplate(text).render()` returns unchanged: no template syntax (all of it starts
    with `{`), no line break (Jinja normalises them and drops a trailing one), and not a Python literal
    (native rendering ends in jinja2's `native_concat`, which turns `1`, `True` or `'a'` into a value: its
    `literal_eval(parse(text))`, here without importing Jinja for a file that has no template)."""
    if "{" in text or "\n" in text or "\r" in text:
        return False
    try:
        rendered = ast.literal_eval(ast.parse(text, mode="eval"))
    except (ValueError, SyntaxError, MemoryError):
        return True
    return isinstance(rendered, str) and rendered == text
