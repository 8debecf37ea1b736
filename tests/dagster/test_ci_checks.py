"""`python -m dv_assets.ci_checks` (`dvmirror-checks`, `make ci-checks`): every asset check on the
newest mirrored version of each configured table, on a fresh Dagster instance; one line per check, exit 1
when one fails."""

from __future__ import annotations

import sys

import dagster as dg
import pytest

from dv_assets.ci_checks import main
from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.iceberg.mirror_table import CommitRequest
from dv_assets.mirror.sync import sync_table
from tests.helpers.dagster import make_source, recorded_check_status, sources_file
from tests.helpers.paths import REPO_ROOT
from tests.helpers.processes import dvmirror_env, run

CHECKS = ["metadata_row_count_matches", "one_dv_per_data_file", "row_count_matches"]
LAG_CHECK = "mirror_lag_within_freshness"  # the table now: no version


def in_order(version_lines: list[str], lag_line: str) -> list[str]:
    """The command's lines for one table: sorted by check name, the lag check's among them."""
    return [*version_lines[:1], lag_line, *version_lines[1:]]


@pytest.mark.spark
@pytest.mark.extended  # 35-70 s, a fresh process with its own JVM (make ci-checks runs the command too)
def test_ci_checks_pass_on_the_newest_version_in_a_fresh_process(
    spark, catalog, copy_fixture, tmp_path
) -> None:
    source = make_source(copy_fixture("table-with-dv-small"))
    sync_table(spark, source.delta_path, source.iceberg_table)
    env = dvmirror_env(DVMIRROR_SOURCES=sources_file(tmp_path / "tables.yaml", catalog, source))
    done = run([sys.executable, "-m", "dv_assets.ci_checks"], cwd=REPO_ROOT, env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert done.stdout.splitlines() == in_order(
        [f"PASS {source.name} v1 {check}" for check in CHECKS],
        f"PASS {source.name} - {LAG_CHECK}",
    )
    assert "4 passed, 0 warned, 0 failed" in done.stderr


@pytest.mark.spark
def test_ci_checks_fail_on_a_damaged_mirror_and_an_unmirrored_table(
    spark, catalog, copy_fixture, tmp_path, monkeypatch, capsys
) -> None:
    damaged = make_source(copy_fixture("table-with-dv-small"))
    missing = make_source(copy_fixture("table-without-dv-small"))
    sync_table(spark, damaged.delta_path, damaged.iceberg_table)
    # A snapshot for Delta version 1 that lost its DV: its 2 deleted rows come back.
    iceberg = IcebergJava(spark)
    (dv,) = iceberg.delete_files_by_data_file(damaged.iceberg_table).values()
    current = iceberg.load(damaged.iceberg_table).current_snapshot_id
    iceberg.commit(damaged.iceberg_table, CommitRequest(1, {}, current, remove_delete_files=(dv,)))

    monkeypatch.setenv("DVMIRROR_SOURCES", sources_file(tmp_path / "tables.yaml", catalog, damaged, missing))
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))  # the checks are recorded where the UI shows them
    assert main([]) == 1
    lines = capsys.readouterr().out.splitlines()
    # The damage is in the snapshot's content; the mirror is not behind Delta (the lag check passes).
    by_table = {
        damaged.name: in_order(
            [f"FAIL {damaged.name} v1 {check}" for check in CHECKS],
            f"PASS {damaged.name} - {LAG_CHECK}",
        ),
        missing.name: [f"FAIL {missing.name} - mirrored"],
    }
    # The tables in name order, as the definitions list them (`sources_of`).
    assert [line.split(":")[0] for line in lines] == [
        line for name in sorted(by_table) for line in by_table[name]
    ]
    of_damaged = [line for line in lines if line.split()[1] == damaged.name]
    assert "8 rows from the log" in of_damaged[0] and "10 from its summary" in of_damaged[0]
    assert "Delta DVs missing in Iceberg" in of_damaged[2]
    (of_missing,) = [line for line in lines if line.split()[1] == missing.name]
    assert f"{missing.iceberg_table} has no mirrored version" in of_missing
    with dg.DagsterInstance.from_config(str(home)) as instance:
        recorded = recorded_check_status(instance, damaged.mirror_asset_key, CHECKS, ["1"])
    assert recorded == {"1": dict.fromkeys(CHECKS, "FAILED")}

    # Only the named table; an unknown name is a usage error.
    assert main(["--table", missing.name]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"FAIL {missing.name} - mirrored: {missing.iceberg_table} has no mirrored version"
    ]
    assert main(["--table", "nope"]) == 2
