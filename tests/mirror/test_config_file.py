"""One configuration model (issue 36): the configuration file (`--config`, DVMIRROR_CONFIG) and the tables
file (`dvmirror sync --tables`, DVMIRROR_SOURCES) are read by one parser (`dv_assets.mirror.config_file`)
with the same `${VAR}` substitution and value types, every bad file is one line naming the file, the line
and the key, and the precedence is flags > file > environment > defaults for the CLI and the code
location. No JVM: the CLI's own loading (`load_tables` over its parsed flags) and the code location's
`load_definitions`."""

from __future__ import annotations

from pathlib import Path

import pytest

from dv_assets.components.delta_mirror import MirrorConfigError, TablesFileError, load_mirrors_file
from dv_assets.definitions import load_definitions
from dv_assets.defs.factory import sources_of, spark_resource_of
from dv_assets.mirror.cli import build_parser
from dv_assets.mirror.cli.fleet import load_tables
from dv_assets.mirror.config_file import ConfigFileError, load_config_file
from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.iceberg.maintenance import DEFAULT_RETENTION, Retention, retention_due
from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from dv_assets.mirror.table_spec import _renders_as_itself

COMPONENT = "dv_assets.components.DeltaMirrorComponent"
HOUR_MS = 3600 * 1000


def tables_file(path: Path, catalog: str | None = None, **attributes: str) -> Path:
    """One table `a` (Delta folder `a`, Iceberg table ns.a), the `catalog:` block given (YAML lines)."""
    given = {"name": "a", "delta_path": "a", "iceberg_table": "ns.a", **attributes}
    lines = [f"type: {COMPONENT}", "attributes:", *(f"  {k}: {v}" for k, v in given.items())]
    if catalog is not None:
        lines += ["  catalog:", *(f"    {line}" for line in catalog.strip().splitlines())]
    path.write_text("\n".join(lines) + "\n")
    return path


CATALOG = """
type: jdbc
uri: jdbc:sqlite:${CATALOG_DIR}/catalog.db
warehouse: ${CATALOG_DIR}/wh
s3.path-style-access: true
client.retries: 3
literal: "a$${b}"
"""


def test_both_files_substitute_and_type_values_alike(tmp_path: Path) -> None:
    env = {"CATALOG_DIR": str(tmp_path)}
    config = tmp_path / "dvmirror.yaml"
    config.write_text("catalog:\n" + "".join(f"  {line}\n" for line in CATALOG.strip().splitlines()))
    tables = tables_file(tmp_path / "tables.yaml", CATALOG)
    expected = {
        "type": "jdbc",
        "uri": f"jdbc:sqlite:{tmp_path}/catalog.db",
        "warehouse": f"{tmp_path}/wh",
        "s3.path-style-access": "true",  # a YAML boolean, as Iceberg spells it
        "client.retries": "3",
        "literal": "a${b}",  # `$${` is a literal `${`
    }
    assert load_config_file(config, env)["catalog"] == expected
    ((_, catalog),) = load_mirrors_file(tables, CatalogConfig.under(tmp_path / "other"), env)
    assert catalog == CatalogConfig(expected)
    # Any string of the tables file, not only the catalog's.
    tables_file(tables, delta_path="${DATA}/events")
    ((source, _),) = load_mirrors_file(tables, CatalogConfig.under(tmp_path), {"DATA": "/data"})
    assert source.delta_path == "/data/events"


BAD_CONFIG = {
    "not YAML": ("catalog:\n  type: rest\n  uri: [http://a\n", "line 4: not YAML: while parsing a flow"),
    "unknown key": (
        "catalog:\n  type: rest\ncatalgo: {}\n",
        "line 3, key catalgo: unknown key (known: catalog)",
    ),
    "a key twice": (
        "catalog:\n  type: rest\n  type: jdbc\n",
        "line 3, key type: given twice (first on line 2)",
    ),
    "wrong type": (
        "catalog:\n  type: rest\n  uri: [a, b]\n",
        "line 3, key catalog.uri: a catalog property is",
    ),
    "not a map": ("catalog: rest\n", "line 1, key catalog: must be a mapping of catalog properties"),
    "unset variable": (
        "catalog:\n  token: ${NOT_SET}\n",
        "line 2, key catalog.token: environment variable NOT_SET",
    ),
    "bad reference": ("catalog:\n  token: ${1X}\n", "line 2, key catalog.token: `${` must name"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIG))
def test_a_bad_configuration_file_is_one_line_naming_file_line_and_key(case: str, tmp_path: Path) -> None:
    text, said = BAD_CONFIG[case]
    config = tmp_path / "dvmirror.yaml"
    config.write_text(text)
    with pytest.raises(ConfigFileError) as raised:
        MirrorSettings.resolve(config_file=config, environ={}, cwd=tmp_path)
    line = raised.value.one_line()
    assert line.startswith(f"configuration file {config}, {said}"), line
    assert "\n" not in line and str(raised.value) == line
    assert isinstance(raised.value, ValueError | MirrorInputError)  # exit 2 in every subcommand


def test_a_missing_configuration_or_tables_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError, match=r"^configuration file .*nope\.yaml: no such file$"):
        MirrorSettings.resolve(config_file=tmp_path / "nope.yaml", environ={}, cwd=tmp_path)
    with pytest.raises(TablesFileError, match=r"^tables file .*nope\.yaml: no such file$"):
        load_mirrors_file(tmp_path / "nope.yaml", CatalogConfig.under(tmp_path))


def test_a_bad_tables_file_names_its_line_and_key(tmp_path: Path) -> None:
    path = tables_file(tmp_path / "tables.yaml", "type: rest\nuri: http://a\ns3.path-style-access: [x]")
    with pytest.raises(TablesFileError) as raised:
        load_mirrors_file(path, CatalogConfig.under(tmp_path))
    assert str(raised.value) == (
        f"tables file {path}, line 9, key attributes.catalog.s3.path-style-access: a catalog property is a "
        "string, a boolean or a number, got a list"
    )
    assert isinstance(raised.value, MirrorConfigError)  # the code location's error type, too
    tables_file(path, formt_version="2")
    with pytest.raises(
        TablesFileError, match=r"line 6, key attributes\.formt_version: unknown key \(known: name"
    ):
        load_mirrors_file(path, CatalogConfig.under(tmp_path))
    path.write_text(f"type: {COMPONENT}\nattributes:\n  name: a\nextra: 1\n")
    with pytest.raises(TablesFileError, match=r"line 4, key extra: unknown key \(known: type, attributes\)"):
        load_mirrors_file(path, CatalogConfig.under(tmp_path))


def cli_args(*argv: str):
    return build_parser().parse_args(["sync", *argv])


def test_cli_precedence_flags_over_the_tables_file_over_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """flags > file > environment > defaults (issue 36: the tables file's `catalog:` silently won over
    explicit --catalog-property flags)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CATALOG_DIR", str(tmp_path))
    monkeypatch.setenv("DVMIRROR_WAREHOUSE", str(tmp_path / "env-wh"))
    tables = tables_file(tmp_path / "tables.yaml", CATALOG)
    flag_uri = f"jdbc:sqlite:{tmp_path}/flag.db"
    settings, (table,), retentions = load_tables(
        cli_args("--tables", str(tables), "--catalog-property", f"uri={flag_uri}", "--warehouse", "/flag-wh")
    )
    assert settings.catalog.properties["uri"] == flag_uri  # the flag, over the file
    assert settings.catalog.properties["warehouse"] == "/flag-wh"  # the flag, over the file
    assert settings.catalog.properties["s3.path-style-access"] == "true"  # the file, where no flag says
    assert table.iceberg_table == "ns.a" and retentions == {"ns.a": DEFAULT_RETENTION}

    # The file's catalog over --config's and the environment's (nothing of them merged under it).
    config = tmp_path / "dvmirror.yaml"
    config.write_text("catalog:\n  type: rest\n  uri: http://config:8181\n  token: from-config\n")
    settings, _, _ = load_tables(cli_args("--tables", str(tables), "--config", str(config)))
    assert settings.catalog.properties["uri"] == f"jdbc:sqlite:{tmp_path}/catalog.db"
    assert "token" not in settings.catalog.properties
    assert settings.catalog.properties["warehouse"] == f"{tmp_path}/wh"

    # A tables file without `catalog:`: --config's (the environment's warehouse filling a missing one),
    # the flags over it.
    plain = tables_file(tmp_path / "plain.yaml", retention="{retain_last: 2}")
    settings, _, retentions = load_tables(
        cli_args("--tables", str(plain), "--config", str(config), "--catalog-property", "token=flag")
    )
    assert settings.catalog.properties == {
        "type": "rest",
        "uri": "http://config:8181",
        "token": "flag",
        "warehouse": str(tmp_path / "env-wh"),
    }
    assert retentions["ns.a"].retain_last == 2
    # No file at all: the environment, then the defaults.
    monkeypatch.setenv("DVMIRROR_CATALOG_URI", f"sqlite:///{tmp_path}/env.db")
    settings, _, _ = load_tables(cli_args("--tables", str(plain)))
    assert settings.catalog.sqlite_path == tmp_path / "env.db"
    assert settings.catalog.warehouse == str(tmp_path / "env-wh")
    # --catalog-uri is a flag: it wins over the file's catalog.
    settings, _, _ = load_tables(
        cli_args("--tables", str(tables), "--catalog-uri", f"sqlite:///{tmp_path}/u.db")
    )
    assert settings.catalog.sqlite_path == tmp_path / "u.db"


def test_code_location_precedence_and_the_same_parser(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The code location reads DVMIRROR_SOURCES with the same parser: `${VAR}` and YAML booleans in its
    `catalog:`, which wins over DVMIRROR_CONFIG; without one, DVMIRROR_CONFIG's catalog."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CATALOG_DIR", str(tmp_path))
    config = tmp_path / "dvmirror.yaml"
    config.write_text(
        f"catalog:\n  type: jdbc\n  uri: jdbc:sqlite:{tmp_path}/config.db\n  warehouse: /cfg-wh\n"
    )
    monkeypatch.setenv("DVMIRROR_CONFIG", str(config))
    tables = tables_file(tmp_path / "tables.yaml", CATALOG)
    monkeypatch.setenv("DVMIRROR_SOURCES", str(tables))
    defs = load_definitions()
    assert [s.name for s in sources_of(defs)] == ["a"]
    catalog = spark_resource_of(defs).settings.catalog
    assert catalog.sqlite_path == tmp_path / "catalog.db"
    assert catalog.properties["s3.path-style-access"] == "true"
    assert sources_of(defs)[0].retention == DEFAULT_RETENTION
    tables_file(tables)  # no `catalog:`: DVMIRROR_CONFIG's
    assert spark_resource_of(load_definitions()).settings.catalog.sqlite_path == tmp_path / "config.db"


def test_code_location_fails_to_load_on_a_bad_or_missing_tables_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36: DVMIRROR_SOURCES naming no file loaded the packaged demo table."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DVMIRROR_SOURCES", str(tmp_path / "tabels.yaml"))
    with pytest.raises(
        TablesFileError, match=r"^tables file .*tabels\.yaml: no such file \(named by DVMIRROR"
    ):
        load_definitions()
    bad = tables_file(tmp_path / "tables.yaml", retention="{retain_last: 0}")
    monkeypatch.setenv("DVMIRROR_SOURCES", str(bad))
    with pytest.raises(
        TablesFileError, match=r"line 6, key attributes\.retention\.retain_last: Input should"
    ):
        load_definitions()


def test_retention_is_due_past_the_newest_n_and_the_age() -> None:
    now = 1000 * HOUR_MS
    week = Retention(retain_last=2, max_snapshot_age_hours=168)
    fresh = [now - h * HOUR_MS for h in (1, 2, 3, 4)]
    assert not retention_due(fresh, week, now)  # beyond the newest 2, but none a week old
    assert retention_due([*fresh, now - 200 * HOUR_MS], week, now)
    assert not retention_due([now - 300 * HOUR_MS, now - 400 * HOUR_MS], week, now)  # the newest 2 stay
    assert retention_due(fresh, Retention(retain_last=2), now)  # no age: every snapshot beyond the newest 2
    assert Retention(retain_last=10, max_snapshot_age_hours=168) == DEFAULT_RETENTION


@pytest.mark.parametrize(
    "text",
    ["t", "/data/t", "2", "2.5", "True", "None", "'a'", "[1]", " 1", "1 ", "a b", "s3://b/t", "-1", "1_0"],
)
def test_a_plain_string_renders_as_jinja_renders_it(text: str) -> None:
    """The tables file's loader skips Jinja for strings it leaves as they are (`_renders_as_itself`): the
    same answer as Jinja's native rendering gives."""
    from jinja2.nativetypes import NativeTemplate

    assert _renders_as_itself(text) == (NativeTemplate(text).render() == text)
