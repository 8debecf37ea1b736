"""`dvmirror sync --tables FILE [--follow]` through the installed console script (issue 29): a file of
component documents (the Dagster code location's format) mirrored in one process and one Spark session,
a refused table reported on its own while the others mirror, the exit code summing up the set; a follower
over several tables that keeps mirroring new commits while one is refused (its following ended: a
refusal is not retried), and stops on SIGTERM between versions, its exit code the refused table's.
Tables: copies of the fixtures, and tables written without Spark (`SyntheticTable`)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from dv_assets.mirror.errors import EXIT_BAD_INPUT
from dv_assets.mirror.settings import CatalogConfig
from tests.helpers.delta_log import SyntheticTable
from tests.helpers.faults import flip_dv_byte
from tests.helpers.paths import all_expected_rows
from tests.helpers.processes import (
    catalog_args,
    cli_catalog,
    dvmirror_env,
    no_java_env,
    run_dvmirror,
    spawn_dvmirror,
)
from tests.helpers.readers import pyiceberg_rows, pyiceberg_state, snapshots_by_delta_version

pytestmark = pytest.mark.spark  # the CLI starts a JVM of its own

COMPONENT = "dv_assets.components.DeltaMirrorComponent"


def tables_file(path: Path, tables: dict[str, str]) -> Path:
    """A file of component documents: name -> Delta folder (relative to the file), Iceberg table
    fleet.<name>."""
    documents = [
        f"type: {COMPONENT}\nattributes:\n  name: {name}\n  delta_path: {delta}\n"
        f"  iceberg_table: fleet.{name}\n"
        for name, delta in tables.items()
    ]
    path.write_text("---\n".join(documents))
    return path


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_sync_tables_mirrors_all_in_one_session_and_reports_the_refused_one(copy_fixture, tmp_path) -> None:
    fixtures = {
        "small": "table-with-dv-small",
        "basic": "basic-dv-no-checkpoint",
        "keys": "log-replay-dv-key-cases",
    }
    for name, fixture in fixtures.items():
        copy_fixture(fixture).rename(tmp_path / name)
    broken = copy_fixture("table-with-dv-small")
    flip_dv_byte(44)(broken)  # version 1's DV fails its CRC
    broken.rename(tmp_path / "broken")
    good = tables_file(tmp_path / "good.yaml", {name: name for name in fixtures})
    every = tables_file(
        tmp_path / "tables.yaml", {"small": "small", "broken": "broken", **{k: k for k in fixtures}}
    )
    catalog = cli_catalog(tmp_path)

    began = time.monotonic()
    done = run_dvmirror("sync", "--tables", str(every), *catalog_args(catalog), "--json", cwd=tmp_path)
    seconds = time.monotonic() - began
    assert done.returncode == EXIT_BAD_INPUT, done.stdout + done.stderr
    events = json_lines(done.stdout)
    sessions = [e for e in events if e["event"] == "session"]
    assert len(sessions) == 1 and sessions[0]["tables"] == 4, events  # four tables, one Spark session
    summary = events[-1]
    assert summary["event"] == "summary" and summary["exit_code"] == EXIT_BAD_INPUT and not summary["ok"]
    assert summary["spark_application"] == sessions[0]["spark_application"]
    assert summary["jvm_pid"] == sessions[0]["jvm_pid"]
    assert {t["table"]: t["state"] for t in summary["tables"]} == {
        "small": "mirrored",
        "broken": "refused",
        "basic": "mirrored",
        "keys": "mirrored",
    }

    # The refusal: its own event and one line on stderr, naming the table, the version and the DV file.
    failed = [e for e in events if e["event"] == "failed"]
    assert len(failed) == 1 and failed[0]["table"] == "broken" and failed[0]["exit_code"] == EXIT_BAD_INPUT
    assert failed[0]["retry_in_seconds"] is None
    assert failed[0]["error"].startswith(f"table {tmp_path / 'broken'}, version 1, file "), failed
    assert done.stderr.splitlines() == [f"dvmirror: fleet.broken: {failed[0]['error']}; not retried"]
    assert pyiceberg_state(catalog, "fleet.broken")[1] == "0"  # the last good version

    # The others: every version, each snapshot's rows as the fixtures' oracle (delta-rs) has them.
    for name, fixture in fixtures.items():
        expected = all_expected_rows(fixture)
        snapshots = snapshots_by_delta_version(catalog, f"fleet.{name}")
        assert sorted(snapshots) == sorted(expected), name
        for version, rows in expected.items():
            assert pyiceberg_rows(catalog, f"fleet.{name}", snapshots[version]) == rows, (name, version)
        versions = [e["delta_version"] for e in events if e["event"] == "version" and e["table"] == name]
        assert versions == sorted(expected), (name, versions)
        [synced] = [e for e in events if e["event"] == "synced" and e["table"] == name]
        assert synced["mirrored_version"] == max(expected) and synced["versions_mirrored"] == len(expected)
    assert not list(tmp_path.glob("dvmirror-spark-*.log"))

    # Again, the three good tables only: up to date, answered without a JVM; text lines.
    again = run_dvmirror(
        "sync", "--tables", str(good), *catalog_args(catalog), cwd=tmp_path, env=no_java_env()
    )
    assert (again.returncode, again.stderr) == (0, ""), again.stdout + again.stderr
    lines = again.stdout.splitlines()
    for name, fixture in fixtures.items():
        latest = max(all_expected_rows(fixture))
        assert f"fleet.{name} is up to date with {tmp_path / name} at version {latest}" in lines, lines
    assert lines[-1] == "synced 3 tables: 3 mirrored, 0 refused; exit 0"
    print(f"sync --tables of 4 tables: {seconds:.1f} s")


def test_sync_tables_refuses_a_bad_file_and_mixed_flags_without_a_jvm(tmp_path) -> None:
    (tmp_path / "old.yaml").write_text("sources:\n  - name: a\n")
    cases = {
        ("--tables", str(tmp_path / "missing.yaml")): "no such file",
        ("--tables", str(tmp_path / "old.yaml")): "not a component document",
        ("--tables", str(tmp_path / "old.yaml"), "--table", "ns.t"): "cannot be combined with --table",
        ("--tables", str(tmp_path / "old.yaml"), "--interval", "1"): "--interval applies to --follow only",
    }
    for flags, reason in cases.items():
        done = run_dvmirror("sync", *flags, cwd=tmp_path, env=no_java_env())
        assert done.returncode == EXIT_BAD_INPUT, done.stderr
        assert reason in done.stderr and "Traceback" not in done.stderr, done.stderr
    single = run_dvmirror("sync", str(tmp_path), cwd=tmp_path, env=no_java_env())
    assert single.returncode == 2 and "required: --table" in single.stderr, single.stderr


# Every bad tables file (issue 36): one line naming the file, the line and the key, exit 2, no JVM. Each
# case replaces a line of GOOD (its line numbers: 1 type, 2 attributes, 3 name, 4 delta_path, 5
# iceberg_table, 6 retention, 7 retain_last).
GOOD = (
    f"type: {COMPONENT}\nattributes:\n  name: a\n  delta_path: a\n  iceberg_table: fleet.a\n"
    "  retention:\n    retain_last: 3\n"
)
BAD_FILES = {
    "not YAML": (
        ("  name: a", "  name: [a"),
        "line 4: not YAML: while parsing a flow sequence (line 3)",
    ),
    "unknown key": (
        ("    retain_last: 3", "    retian_last: 3"),
        "line 7, key attributes.retention.retian_last: unknown key",
    ),
    "wrong type": (
        ("    retain_last: 3", "    retain_last: many"),
        "line 7, key attributes.retention.retain_last: Input should be a valid integer",
    ),
    "a key twice": (
        ("  delta_path: a", "  delta_path: a\n  delta_path: b"),
        "line 5, key delta_path: given twice (first on line 4)",
    ),
    "unset variable": (
        ("  delta_path: a", "  delta_path: ${DVMIRROR_TEST_UNSET}/a"),
        "line 4, key attributes.delta_path: environment variable DVMIRROR_TEST_UNSET is not set",
    ),
    "missing key": (
        ("  iceberg_table: fleet.a", ""),
        "line 3, key attributes.iceberg_table: required, missing",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_tables_file_is_one_line_naming_file_line_and_key(case: str, tmp_path: Path) -> None:
    (old, new), said = BAD_FILES[case]
    path = tmp_path / "tables.yaml"
    path.write_text(GOOD.replace(old, new))
    done = run_dvmirror("sync", "--tables", str(path), cwd=tmp_path, env=no_java_env())
    assert done.returncode == EXIT_BAD_INPUT, done.stdout + done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"dvmirror: tables file {path}, {said}"), done.stderr


def test_a_duplicate_name_is_one_line_naming_both(tmp_path: Path) -> None:
    path = tmp_path / "tables.yaml"
    path.write_text(GOOD + "---\n" + GOOD.replace("fleet.a", "fleet.b"))
    done = run_dvmirror("sync", "--tables", str(path), cwd=tmp_path, env=no_java_env())
    assert done.returncode == EXIT_BAD_INPUT, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        f"dvmirror: tables file {path}, line 11, key attributes.name: 'a' is also the name of the table on "
        "line 3"
    ]


def test_sync_tables_applies_each_tables_retention(copy_fixture, tmp_path: Path) -> None:
    """The file's `retention:` is applied by the sync as Dagster's cleanup applies it (issue 36: the CLI
    ignored it); a table without one has the default (the newest 10, a week), which keeps these."""
    for name in ("kept", "trimmed"):
        copy_fixture("table-with-dv-small").rename(tmp_path / name)  # versions 0 and 1
    path = tables_file(tmp_path / "tables.yaml", {"kept": "kept", "trimmed": "trimmed"})
    path.write_text(
        path.read_text() + "  retention: {retain_last: 1, max_snapshot_age_hours: null}\n"
    )  # the last document's: trimmed
    catalog = cli_catalog(tmp_path)
    done = run_dvmirror("sync", "--tables", str(path), *catalog_args(catalog), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    expired = [e for e in json_lines(done.stdout) if e["event"] == "expired"]
    assert [(e["table"], e["expired_delta_versions"], e["snapshots_retained"]) for e in expired] == [
        ("trimmed", [0], 1)
    ]
    assert sorted(snapshots_by_delta_version(catalog, "fleet.trimmed")) == [1]
    assert sorted(snapshots_by_delta_version(catalog, "fleet.kept")) == [0, 1]
    # `expire`'s default is the table's retention, from the same file: nothing more to expire.
    dry = run_dvmirror(
        "expire",
        "fleet.trimmed",
        "--tables",
        str(path),
        *catalog_args(catalog),
        "--dry-run",
        "--json",
        cwd=tmp_path,
        env=no_java_env(),
    )
    assert dry.returncode == 0, dry.stdout + dry.stderr
    planned = json.loads(dry.stdout)
    assert planned["retention"]["retain_last"] == 1 and planned["retention"]["max_snapshot_age_hours"] is None
    assert planned["would_expire_snapshots"] == 0


class FleetFollower:
    """`dvmirror sync --tables FILE --follow --interval 1 --json`, its output in files."""

    def __init__(self, tmp: Path, tables: Path, catalog: CatalogConfig) -> None:
        self.out, self.err = tmp / "follow.out", tmp / "follow.err"
        self.spark_logs = tmp / "follow-tmp"
        self.spark_logs.mkdir()
        self.process = spawn_dvmirror(
            *(
                "sync",
                "--tables",
                str(tables),
                *catalog_args(catalog),
                "--follow",
                "--interval",
                "1",
                "--json",
            ),
            cwd=tmp,
            stdout=self.out,
            stderr=self.err,
            env=dvmirror_env(TMPDIR=str(self.spark_logs)),
        )

    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.out.read_text().splitlines() if line.endswith("}")]

    def report(self) -> str:
        return f"stdout:\n{self.out.read_text()[-4000:]}\nstderr:\n{self.err.read_text()[-3000:]}"

    def wait_for(self, check, what: str, seconds: float = 240) -> list[dict]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            events = self.events()
            if check(events):
                return events
            assert self.process.poll() is None, f"exited {self.process.returncode}: {self.report()}"
            time.sleep(0.2)
        raise AssertionError(f"not {what} after {seconds} s: {self.report()}")


def mirrored_up_to(events: list[dict], name: str) -> int | None:
    versions = [e["delta_version"] for e in events if e["event"] == "version" and e["table"] == name]
    return max(versions, default=None)


def live_rows(table: SyntheticTable) -> int:
    return len(table.files) * table.rows - sum(dv["cardinality"] for dv in table.dvs.values())


def test_follow_tables_keeps_mirroring_while_one_is_refused_then_stops_on_sigterm(tmp_path) -> None:
    tables = {name: SyntheticTable(tmp_path / name, rows_per_file=20) for name in ("a", "b", "c", "d")}
    for table in tables.values():
        table.create(2)
        table.delete(table.files[:1], lambda i: range(0, 20, 3))  # version 1: a DV
    d_dv = next((tmp_path / "d").glob("deletion_vector_*.bin"))
    good_dv = d_dv.read_bytes()
    d_dv.write_bytes(good_dv[:5] + bytes([good_dv[5] ^ 0xFF]) + good_dv[6:])  # its magic broken
    catalog = cli_catalog(tmp_path)
    follower = FleetFollower(tmp_path, tables_file(tmp_path / "tables.yaml", {n: n for n in tables}), catalog)
    try:

        def following(events: list[dict], names: str = "abc") -> bool:
            return {e["table"] for e in events if e["event"] == "following"} >= set(names)

        follower.wait_for(following, "following a, b and c")
        # d refused at version 1: its following ends (not retried), the others follow.
        refusals = follower.wait_for(
            lambda ev: any(e["event"] == "failed" and e["table"] == "d" for e in ev), "d refused"
        )
        (d_failure,) = [e for e in refusals if e["event"] == "failed"]
        assert d_failure["table"] == "d" and d_failure["exit_code"] == EXIT_BAD_INPUT, d_failure
        assert ", version 1, file " in d_failure["error"] and d_failure["retry_in_seconds"] is None

        for name in "abc":  # new commits while d stays refused
            tables[name].append(1)
            tables[name].delete(tables[name].files[1:2], lambda i: range(1, 20, 4))
        follower.wait_for(lambda ev: all(mirrored_up_to(ev, n) == 3 for n in "abc"), "a, b, c at version 3")
        assert pyiceberg_state(catalog, "fleet.d")[1] == "0"  # the last good version
        for name in "abc":
            snapshots = snapshots_by_delta_version(catalog, f"fleet.{name}")
            assert sorted(snapshots) == [0, 1, 2, 3], name
            assert len(pyiceberg_rows(catalog, f"fleet.{name}", snapshots[3])) == live_rows(tables[name])

        d_dv.write_bytes(good_dv)  # repaired: not looked at again by this run (a refusal's verdict stands)
        tables["a"].append(2)  # version 4, then SIGTERM at once: stopped between versions, whatever in flight
        time.sleep(1.5)
        follower.process.send_signal(signal.SIGTERM)
        assert follower.process.wait(timeout=120) == EXIT_BAD_INPUT, follower.report()
    finally:
        if follower.process.poll() is None:
            follower.process.kill()
            follower.process.wait()
    events = follower.events()
    assert len([e for e in events if e["event"] == "failed"]) == 1, events
    summary = events[-1]
    assert summary["event"] == "summary" and summary["stopped"], summary
    assert summary["exit_code"] == EXIT_BAD_INPUT, summary
    assert len([e for e in events if e["event"] == "session"]) == 1
    assert [row["state"] for row in summary["tables"]] == ["mirrored", "mirrored", "mirrored", "refused"]
    for row in summary["tables"]:
        # What it reports is what the mirror shows: no half-written version.
        assert pyiceberg_state(catalog, f"fleet.{row['table']}")[1] == str(row["mirrored_version"]), row
    assert [r["mirrored_version"] for r in summary["tables"]][1:] == [3, 3, 0]
    assert summary["tables"][0]["mirrored_version"] in (3, 4)
    assert Path(summary["spark_log"]).is_file()  # kept: the run did not end clean
