"""The code location loads through workspace.yaml and through dg (in subprocesses, as `dagster dev` and
`dg dev` would), and its tables are `DeltaMirrorComponent` documents: the dg defs folder's
(dv_assets/defs/tables/defs.yaml) or a file of the same documents named by DVMIRROR_SOURCES."""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path

import dagster as dg
import pytest
import yaml

from dv_assets.components.delta_mirror import DeltaMirrorComponent, MirrorConfigError, load_mirrors_file
from dv_assets.definitions import load_definitions, project_definitions
from dv_assets.defs.factory import sources_of, spark_resource_of
from dv_assets.defs.sources import DeltaSource, spread_cleanup_cron
from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from dv_assets.mirror.table_spec import load_tables_file
from tests.helpers.dagster import settings_of, tables_file
from tests.helpers.processes import dvmirror_env, run
from tests.helpers.settings import leaky_environment

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_definitions_validate_through_workspace_yaml(tmp_path) -> None:
    sources = tables_file(
        tmp_path / "tables.yaml",
        "{name: alpha, delta_path: alpha, iceberg_table: ns.alpha}",
        "{name: beta, delta_path: /data/beta, iceberg_table: ns.beta, format_version: 2,\n"
        "  retention: {retain_last: 2, max_snapshot_age_hours: 24}}",
    )
    env = dvmirror_env(DVMIRROR_SOURCES=str(sources), DAGSTER_HOME=str(tmp_path))
    done = run(
        [BIN / "dagster", "definitions", "validate", "-w", "workspace.yaml"], cwd=REPO, env=env, timeout=180
    )
    assert done.returncode == 0, done.stdout + done.stderr
    listed = run(
        [
            sys.executable,
            "-c",
            "from dv_assets.definitions import load_definitions; r = load_definitions().get_repository_def();"
            "print(sorted(j.name for j in r.get_all_jobs() if not j.name.startswith('__')));"
            "print(sorted(s.name for s in r.sensor_defs));"
            "print(sorted(s.name for s in r.schedule_defs));"
            "print(sorted(k.to_user_string() for k in r.asset_graph.get_all_asset_keys()))",
        ],
        cwd=REPO,
        env=env,
        timeout=180,
    )
    assert listed.returncode == 0, listed.stderr
    jobs, sensors, schedules, assets = listed.stdout.strip().splitlines()
    assert jobs == str(
        ["checks_alpha", "checks_beta", "cleanup_alpha", "cleanup_beta", "mirror_alpha", "mirror_beta"]
    )
    assert sensors == str(["compacted_deletes_sensor", "delta_version_sensor"])  # one pair, all tables
    assert schedules == str(["cleanup_schedule_alpha", "cleanup_schedule_beta"])
    assert assets == str(["delta/alpha", "delta/beta", "iceberg/alpha", "iceberg/beta"])


def test_dg_checks_and_lists_the_project_from_the_repository_root(tmp_path) -> None:
    env = dvmirror_env(DAGSTER_HOME=str(tmp_path))
    checked = run([BIN / "dg", "check", "defs"], cwd=REPO, env=env, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "All definitions loaded successfully" in checked.stdout + checked.stderr
    listed = run([BIN / "dg", "list", "defs", "--json"], cwd=REPO, env=env, timeout=300)
    assert listed.returncode == 0, listed.stderr
    defs = json.loads(listed.stdout)
    assert {a["asset_key"] for a in defs["assets"]} == {"delta/demo_events", "iceberg/demo_events"}
    mirror = next(a for a in defs["assets"] if a["asset_key"] == "iceberg/demo_events")
    assert mirror["source"].startswith("dv_assets/defs/tables/defs.yaml")  # dg links the asset to its YAML
    assert {c["name"] for c in defs["asset_checks"]} == {
        "metadata_row_count_matches",
        "mirror_lag_within_freshness",
        "one_dv_per_data_file",
        "row_count_matches",
    }
    assert {j["name"] for j in defs["jobs"]} >= {
        "mirror_demo_events",
        "checks_demo_events",
        "cleanup_demo_events",
    }
    assert {s["name"] for s in defs["sensors"]} == {
        "delta_version_sensor_demo_events",
        "compacted_deletes_sensor_demo_events",
    }
    assert {s["name"] for s in defs["schedules"]} == {"cleanup_schedule_demo_events"}


def test_workspace_and_dagster_cloud_yaml_name_the_same_code_location() -> None:
    workspace = yaml.safe_load((REPO / "workspace.yaml").read_text())
    cloud = yaml.safe_load((REPO / "dagster_cloud.yaml").read_text())
    (entry,) = workspace["load_from"]
    (location,) = cloud["locations"]
    assert entry["python_module"]["module_name"] == location["code_source"]["module_name"]
    assert entry["python_module"]["location_name"] == location["location_name"] == "dv_mirror"


def test_tables_file_resolution_and_validation(tmp_path, monkeypatch) -> None:
    path = tables_file(tmp_path / "tables.yaml", "{name: a, delta_path: sub/t, iceberg_table: ns.a}")
    monkeypatch.setenv("DVMIRROR_SOURCES", str(path))
    ((source, catalog),) = load_mirrors_file(path, MirrorSettings.resolve().catalog)
    assert source.delta_path == str(tmp_path / "sub" / "t")
    assert (source.format_version, source.retention.retain_last) == (3, 10)
    assert catalog == MirrorSettings.resolve().catalog  # no `catalog`: the environment's
    assert [s.name for s in sources_of(load_definitions())] == ["a"]  # the file replaces the packaged list

    bad = tmp_path / "bad.yaml"
    tables_file(bad, "{name: a, delta_path: t, iceberg_table: nonamespace}")
    # One line naming the file, the line and the key (issue 36: a multi-line pydantic dump).
    with pytest.raises(
        MirrorConfigError, match=r"^tables file .*, line 2, key attributes\.iceberg_table: .*NAMESPACE"
    ):
        load_mirrors_file(bad, MirrorSettings.resolve().catalog)
    tables_file(bad, "{name: a, delta_path: t, iceberg_table: n.a, format_version: 4}")
    with pytest.raises(MirrorConfigError, match="format_version"):
        load_mirrors_file(bad, MirrorSettings.resolve().catalog)
    tables_file(
        bad, "{name: a, delta_path: t, iceberg_table: n.a}", "{name: a, delta_path: u, iceberg_table: n.b}"
    )
    with pytest.raises(
        MirrorConfigError, match=r"key attributes\.name: 'a' is also the name of the table on line 2"
    ):
        load_mirrors_file(bad, MirrorSettings.resolve().catalog)
    # The old `sources:` list is refused with the way to the new form.
    bad.write_text("sources:\n  - {name: a, delta_path: t, iceberg_table: n.a}\n")
    with pytest.raises(MirrorConfigError, match="old format: write one document per table"):
        load_mirrors_file(bad, MirrorSettings.resolve().catalog)

    # Catalog properties (Iceberg's names); one catalog per code location, however it is spelled.
    one = f"{{type: jdbc, uri: 'jdbc:sqlite:{tmp_path}/c.db', warehouse: '{tmp_path}/wh'}}"
    same = f"{{warehouse: '{tmp_path}/sub/../wh', uri: 'jdbc:sqlite:{tmp_path}/c.db', type: jdbc}}"
    other = f"{{type: jdbc, uri: 'jdbc:sqlite:{tmp_path}/other.db', warehouse: '{tmp_path}/wh'}}"
    tables_file(
        bad,
        f"{{name: a, delta_path: t, iceberg_table: n.a, catalog: {one}}}",
        f"{{name: b, delta_path: u, iceberg_table: n.b, catalog: {same}}}",
    )
    assert [c for _, c in load_mirrors_file(bad, MirrorSettings.resolve().catalog)] == [
        CatalogConfig.sqlite(tmp_path / "c.db", tmp_path / "wh")
    ] * 2
    tables_file(
        bad,
        f"{{name: a, delta_path: t, iceberg_table: n.a, catalog: {one}}}",
        f"{{name: b, delta_path: u, iceberg_table: n.b, catalog: {other}}}",
    )
    with pytest.raises(MirrorConfigError, match=r"must share one Iceberg catalog .*other\.db.*: b"):
        load_mirrors_file(bad, MirrorSettings.resolve().catalog)

    # Without the variable (and no sources.yaml in the working directory): the dg defs folder's tables,
    # the catalog defaulting under .dvmirror/.
    monkeypatch.delenv("DVMIRROR_SOURCES")
    monkeypatch.delenv("DVMIRROR_CATALOG_URI", raising=False)
    monkeypatch.chdir(REPO)
    defs = load_definitions()
    assert [s.name for s in sources_of(defs)] == ["demo_events"]
    assert sources_of(defs)[0].delta_path == str(REPO / ".dvmirror" / "demo" / "events")
    assert spark_resource_of(defs).settings.catalog.sqlite_path == REPO / ".dvmirror" / "catalog.db"
    # `make demo` evaluates the demo's sensors itself: in `make ui` they and its schedule start stopped.
    repository = defs.get_repository_def()
    assert {s.name: s.default_status for s in repository.sensor_defs} == {
        "delta_version_sensor_demo_events": dg.DefaultSensorStatus.STOPPED,
        "compacted_deletes_sensor_demo_events": dg.DefaultSensorStatus.STOPPED,
    }
    (schedule,) = repository.schedule_defs
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED


def test_the_component_yaml_sets_freshness_running_status_and_the_cleanup_schedule(
    tmp_path, monkeypatch
) -> None:
    """Through the loaded code location: the defaults (a 24-hour freshness window, sensors and schedule
    running, cleanup daily at 03:00 UTC, a week's retention) and each attribute set."""
    path = tables_file(
        tmp_path / "tables.yaml",
        "{name: plain, delta_path: p, iceberg_table: ns.plain}",
        "{name: tuned, delta_path: t, iceberg_table: ns.tuned, start_running: false,\n"
        "  cleanup_cron: '30 */6 * * *', freshness: {fail_window_hours: 6, warn_window_hours: 2},\n"
        "  retention: {retain_last: 4, max_snapshot_age_hours: null}}",
        "{name: deadline, delta_path: d, iceberg_table: ns.deadline,\n"
        "  freshness: {deadline_cron: '0 9 * * 1-5', lower_bound_hours: 2, timezone: Europe/Paris}}",
        "{name: unwatched, delta_path: u, iceberg_table: ns.unwatched, freshness: null}",
    )
    monkeypatch.setenv("DVMIRROR_SOURCES", str(path))
    repository = load_definitions().get_repository_def()
    graph = repository.asset_graph

    def freshness(name: str) -> dg.FreshnessPolicy | None:
        return graph.get(dg.AssetKey(["iceberg", name])).freshness_policy

    assert freshness("plain") == dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=24))
    assert freshness("tuned") == dg.FreshnessPolicy.time_window(
        fail_window=timedelta(hours=6), warn_window=timedelta(hours=2)
    )
    assert freshness("deadline") == dg.FreshnessPolicy.cron(
        deadline_cron="0 9 * * 1-5", lower_bound_delta=timedelta(hours=2), timezone="Europe/Paris"
    )
    assert freshness("unwatched") is None
    assert graph.get(dg.AssetKey(["delta", "plain"])).freshness_policy is None  # the mirror's only
    # The lag check judges the mirror's lag against the same settings; none without them.
    lag_checks = {
        k.asset_key.path[-1] for k in graph.asset_check_keys if k.name == "mirror_lag_within_freshness"
    }
    assert lag_checks == {"plain", "tuned", "deadline"}

    sensors = {s.name: s.default_status for s in repository.sensor_defs}
    schedules = {s.name: s for s in repository.schedule_defs}
    running, stopped = dg.DefaultSensorStatus.RUNNING, dg.DefaultSensorStatus.STOPPED
    # The tables that start running share the code location's pair; the one that starts stopped has its
    # own pair, stopped, and is in no other sensor.
    assert sensors == {
        "delta_version_sensor": running,
        "compacted_deletes_sensor": running,
        "delta_version_sensor_tuned": stopped,
        "compacted_deletes_sensor_tuned": stopped,
    }
    for name in ("plain", "deadline", "unwatched"):
        assert schedules[f"cleanup_schedule_{name}"].default_status == dg.DefaultScheduleStatus.RUNNING
    assert schedules["cleanup_schedule_tuned"].default_status == dg.DefaultScheduleStatus.STOPPED
    shared = repository.get_sensor_def("delta_version_sensor")
    assert {t.job_def.name for t in shared.targets} == {
        f"{kind}_{name}" for kind in ("mirror", "checks") for name in ("plain", "deadline", "unwatched")
    }

    plain, tuned = schedules["cleanup_schedule_plain"], schedules["cleanup_schedule_tuned"]
    assert (plain.cron_schedule, plain.execution_timezone, plain.job_name) == (
        spread_cleanup_cron("plain"),  # no cleanup_cron: its minute of 01:00-05:00 UTC
        "UTC",
        "cleanup_plain",
    )
    assert (tuned.cron_schedule, tuned.job_name) == ("30 */6 * * *", "cleanup_tuned")
    by_name = {s.name: s for s in sources_of(load_definitions())}
    assert (by_name["plain"].retention.retain_last, by_name["plain"].retention.max_snapshot_age_hours) == (
        10,
        168,
    )
    assert (by_name["tuned"].retention.retain_last, by_name["tuned"].retention.max_snapshot_age_hours) == (
        4,
        None,
    )

    # Dagster's own rules for a policy, and a cron string, are refused by document.
    for bad, reason in (
        (
            "freshness: {fail_window_hours: 2, warn_window_hours: 3}",
            "warn_window must be less than fail_window",
        ),
        ("freshness: {deadline_cron: '0 9 * * *'}", "deadline_cron needs lower_bound_hours"),
        ("freshness: {fail_window_hours: 6, deadline_cron: '0 9 * * *', lower_bound_hours: 1}", "not both"),
        ("cleanup_cron: daily", "cleanup_cron must be a cron string"),
    ):
        tables_file(
            path,
            "{name: a, delta_path: a, iceberg_table: n.a}",
            f"{{name: b, delta_path: b, iceberg_table: n.b, {bad}}}",
        )
        with pytest.raises(MirrorConfigError, match=f"line 5, key attributes\\.[a-z_]+: .*{reason}"):
            load_mirrors_file(path, MirrorSettings.resolve().catalog)


@pytest.mark.parametrize(
    "attributes",
    [
        {"name": "a", "delta_path": "t", "iceberg_table": "n.a"},
        {
            "name": "a",
            "delta_path": "/x/t",
            "iceberg_table": "n.a",
            "format_version": 2,
            "retention": {"retain_last": 3, "max_snapshot_age_hours": None, "orphan_min_age_hours": 2},
            "cleanup_cron": "0 3 * * *",
            "freshness": None,
            "start_running": False,
            "allowed_roots": ["../r"],
            "catalog": {"type": "jdbc", "uri": "jdbc:sqlite:/c.db"},
        },
        {"name": "a", "delta_path": "t", "iceberg_table": "n.a", "freshness": {"fail_window_hours": 6}},
        {
            "name": "a",
            "delta_path": "t",
            "iceberg_table": "n.a",
            "freshness": {"deadline_cron": "0 9 * * *", "lower_bound_hours": 1, "timezone": "Europe/Paris"},
        },
        # Strings Jinja's native rendering changes: templates, Python literals, line breaks.
        {"name": "a", "delta_path": "{{ 'sub' }}/t", "iceberg_table": "n.a"},
        {"name": "a", "delta_path": "t", "iceberg_table": "n.a", "format_version": "2"},
        {"name": "a", "delta_path": "t\n", "iceberg_table": "n.a"},
        {"name": "a", "delta_path": "{{ env.DVMIRROR_TEST_ROOT }}/t", "iceberg_table": "n.a"},
        {"name": "a", "delta_path": "{{ env('DVMIRROR_TEST_UNSET', '/d') }}", "iceberg_table": "n.a"},
        {
            "name": "a",
            "delta_path": "t",
            "iceberg_table": "n.a",
            "retention": {
                "retain_last": "{{ 2 + 1 }}",
                "max_snapshot_age_hours": "{{ env.DVMIRROR_TEST_HOURS }}",
            },
            "freshness": {"fail_window_hours": "{{ datetime.timedelta(hours=6).total_seconds() / 3600 }}"},
        },
    ],
)
def test_the_engines_tables_file_resolves_as_dg_resolves_a_component(
    attributes, tmp_path, monkeypatch
) -> None:
    """The engine's loader (`load_tables_file`, no Dagster) renders a document's strings as dg resolves
    the component's attributes (`resolve_from_dict`: its YAML round trip and Jinja templates): the same
    table."""
    monkeypatch.setenv("DVMIRROR_TEST_ROOT", "/data")
    monkeypatch.setenv("DVMIRROR_TEST_HOURS", "48")
    path = tmp_path / "tables.yaml"
    path.write_text(
        yaml.safe_dump({"type": "dv_assets.components.DeltaMirrorComponent", "attributes": attributes})
    )
    ((spec, _),) = load_tables_file(path, CatalogConfig.under(tmp_path))
    dg_resolved = DeltaMirrorComponent.resolve_from_dict(attributes)
    assert spec == dg_resolved.spec(tmp_path)
    assert DeltaSource.of(spec) == dg_resolved.source(tmp_path)


def test_a_bad_template_names_its_line_and_key(tmp_path) -> None:
    path = tables_file(
        tmp_path / "tables.yaml",
        "{name: a, delta_path: t, iceberg_table: n.a}",
        "{name: b, iceberg_table: n.b,\n  delta_path: '{{ nothing.here }}'}",
    )
    with pytest.raises(
        MirrorConfigError,
        match=r"line 6, key attributes\.delta_path: template '\{\{ nothing\.here \}\}': 'nothing' is "
        r"undefined \(a template knows env, datetime\)$",
    ):
        load_mirrors_file(path, CatalogConfig.under(tmp_path))
    tables_file(path, "{name: a, iceberg_table: n.a, delta_path: \"{{ env('DVMIRROR_TEST_UNSET') }}\"}")
    with pytest.raises(
        MirrorConfigError,
        match=r"line 2, key attributes\.delta_path: .*Environment variable DVMIRROR_TEST_UNSET",
    ):
        load_mirrors_file(path, CatalogConfig.under(tmp_path))


def test_components_of_a_defs_folder_share_one_catalog(tmp_path, monkeypatch) -> None:
    """Several defs.yaml files (or documents) in one defs folder: merged into one code location with one
    `spark` resource when they name the same catalog, refused by name when they do not."""
    package = tmp_path / "mirror_project_defs"
    for folder, catalog in (("first", "c.db"), ("second", "c.db")):
        (package / folder).mkdir(parents=True)
        tables_file(
            package / folder / "defs.yaml",
            f"{{name: {folder}, delta_path: t, iceberg_table: n.{folder}, "
            f"catalog: {{type: jdbc, uri: 'jdbc:sqlite:{tmp_path}/{catalog}', warehouse: '{tmp_path}/wh'}}}}",
        )
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    import mirror_project_defs

    defs = project_definitions(MirrorSettings.resolve(), mirror_project_defs, tmp_path)
    assert [s.name for s in sources_of(defs)] == ["first", "second"]
    assert spark_resource_of(defs).settings.catalog.sqlite_path == tmp_path / "c.db"
    # One pair over both components' tables, targeting the jobs the components built.
    repository = defs.get_repository_def()
    assert sorted(s.name for s in repository.sensor_defs) == [
        "compacted_deletes_sensor",
        "delta_version_sensor",
    ]
    assert {t.job_def.name for t in repository.get_sensor_def("compacted_deletes_sensor").targets} == {
        "cleanup_first",
        "cleanup_second",
    }

    tables_file(
        package / "second" / "defs.yaml",
        f"{{name: second, delta_path: t, iceberg_table: n.second, "
        f"catalog: {{type: jdbc, uri: 'jdbc:sqlite:{tmp_path}/elsewhere.db', warehouse: '{tmp_path}/wh'}}}}",
    )
    with pytest.raises(MirrorConfigError, match=r"must share one Iceberg catalog.*elsewhere\.db.*: second"):
        project_definitions(MirrorSettings.resolve(), mirror_project_defs, tmp_path)


def test_the_delta_log_is_read_with_the_catalogs_storage_settings_which_stay_out_of_metadata() -> None:
    from dv_assets.defs.factory import build_definitions, build_source
    from dv_assets.defs.sources import DeltaSource

    catalog = CatalogConfig(
        {
            "type": "rest",
            "uri": "http://127.0.0.1:8181",
            "s3.endpoint": "http://127.0.0.1:9000",
            "s3.secret-access-key": "very-secret",
        }
    )
    source = DeltaSource(name="lake", delta_path="s3a://lake/delta/t", iceberg_table="ns.lake")
    defs = build_definitions([source], settings_of(catalog))
    # The sensors, checks and the Delta asset read the log through the built source's `delta_table()`.
    built = build_source(source, catalog).source
    assert built.delta_table()._log._io.properties == {
        "s3.endpoint": "http://127.0.0.1:9000",
        "s3.secret-access-key": "very-secret",
    }
    # Credentials never reach Dagster's metadata, a dump or a repr.
    assert sources_of(defs)[0].name == "lake"
    assert "very-secret" not in json.dumps({k: str(v) for k, v in (defs.metadata or {}).items()})
    assert "very-secret" not in repr(built) + json.dumps(built.model_dump(mode="json"))


def test_the_delta_log_readers_and_spark_share_the_code_locations_one_catalog(tmp_path, monkeypatch) -> None:
    """The tables' explicit catalog is the whole catalog: DVMIRROR_CONFIG's (other S3 keys) and
    DVMIRROR_WAREHOUSE do not leak in, and the sensors read the Delta log with exactly the storage
    settings Spark gets."""
    leaky_environment(tmp_path, monkeypatch)
    explicit = {
        "type": "jdbc",
        "uri": f"jdbc:sqlite:{tmp_path / 'c.db'}",
        "s3.endpoint": "http://minio:9000",
        "s3.path-style-access": "true",
    }
    table = (
        f"{{name: lake, delta_path: s3a://lake/t, iceberg_table: ns.lake, catalog: {json.dumps(explicit)}}}"
    )
    monkeypatch.setenv("DVMIRROR_SOURCES", str(tables_file(tmp_path / "tables.yaml", table)))
    defs = load_definitions()
    spark = spark_resource_of(defs).settings
    assert spark.catalog == CatalogConfig(explicit)
    assert "leaked" not in json.dumps(dict(spark.catalog.properties))

    read_with: list[dict[str, str]] = []

    def delta_table(source: DeltaSource, *, enforce_protocol: bool = True):
        read_with.append(dict(source.storage_properties))
        raise OSError("not listed in this test")

    monkeypatch.setattr(DeltaSource, "delta_table", delta_table)
    instance = dg.DagsterInstance.ephemeral()
    sensor = defs.resolve_sensor_def("delta_version_sensor")
    sensor(dg.build_sensor_context(instance=instance, definitions=defs))
    assert read_with == [spark.catalog.storage_properties()]
    assert read_with[0] == {"s3.endpoint": "http://minio:9000", "s3.path-style-access": "true"}
