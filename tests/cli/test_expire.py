"""`dvmirror expire`, through the installed console script, on a real mirror of 16 Delta versions: the
snapshots are expired to N (the newest kept), only the mirror's own files are deleted, Delta's are
untouched, and the retained versions still read exactly. `--dry-run` answers without a JVM (run where no
Java is on the PATH) and lists exactly the files the real run then deletes; the text output names every
file deleted, or how many of each kind and where."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pytest

from dv_assets.mirror.cli.expire import DRY_RUN_NAMES
from dv_assets.mirror.iceberg.layout import MirrorLayout
from dv_assets.mirror.iceberg.maintenance import DEFAULT_RETENTION
from tests.helpers.dagster import hash_tree
from tests.helpers.paths import DELTA_FIXTURES, expected_rows
from tests.helpers.processes import (
    catalog_args,
    cli_catalog,
    no_java_env,
    one_error_line,
    run_dvmirror,
    sync_cli,
)
from tests.helpers.readers import pyiceberg_rows, snapshots_by_delta_version

TABLE = "dv-partitioned-with-checkpoint"  # 16 versions, DVs added, widened and dropped
MIRROR = "ops.events"


FILE_KEYS = ("deleted_delete_files", "deleted_orphans", "deleted_metadata_files", "deleted_metadata_json")


def expire_cli(tmp: Path, *args: str, env: dict[str, str] | None = None) -> object:
    catalog = cli_catalog(tmp)
    where = catalog_args(catalog)
    return run_dvmirror("expire", *args, *where, cwd=tmp, env=env)


def dry_run_without_java(tmp: Path, *args: str) -> tuple[object, float]:
    """`dvmirror expire ... --dry-run` where no JVM can start, and its wall time."""
    started = time.monotonic()
    done = expire_cli(tmp, *args, "--dry-run", env=no_java_env())
    return done, time.monotonic() - started


def listed_in_text(stdout: str) -> list[str]:
    """The files a text report lists, one `  KIND: LOCATION` line each."""
    return [line.split(": ", 1)[1] for line in stdout.splitlines()[2:] if line.startswith("  ")]


def local(location: str) -> Path:
    return Path(location.removeprefix("file:"))


@pytest.fixture(scope="module")
def expired(tmp_path_factory: pytest.TempPathFactory):
    """The mirror before and after `dvmirror expire ops.events --retain-last 3 --json`."""
    tmp = tmp_path_factory.mktemp("expire")
    delta = tmp / TABLE
    shutil.copytree(DELTA_FIXTURES / TABLE, delta)
    synced = sync_cli(tmp, delta, MIRROR)
    assert synced.returncode == 0, synced.stderr
    catalog = cli_catalog(tmp)
    table = catalog.pyiceberg_catalog().load_table(MIRROR)
    data_dir = local(MirrorLayout(table.location()).delete_dir)
    not_ours = data_dir / "someone-elses.parquet"  # in the mirror's folder, but not the mirror's name
    not_ours.write_bytes(b"x" * 100)
    before = {
        "delta": hash_tree(delta),
        "versions": snapshots_by_delta_version(catalog, MIRROR),
        "current": table.current_snapshot().snapshot_id,
        "owned": {p.name for p in data_dir.iterdir() if p.name.startswith("dvmirror-")},
    }
    before["metadata_json"] = {p.name for p in local(MirrorLayout(table.location()).metadata_dir).iterdir()}
    dry, before["dry_run_seconds"] = dry_run_without_java(tmp, MIRROR, "--retain-last", "3", "--json")
    assert dry.returncode == 0, dry.stderr
    before["dry_run"] = json.loads(dry.stdout)
    dry_text, _ = dry_run_without_java(tmp, MIRROR, "--retain-last", "3")
    assert dry_text.returncode == 0, dry_text.stderr
    before["dry_run_text"] = dry_text.stdout
    before["after_dry_run"] = {
        "snapshots": len(catalog.pyiceberg_catalog().load_table(MIRROR).snapshots()),
        "owned": {p.name for p in data_dir.iterdir() if p.name.startswith("dvmirror-")},
    }
    done = expire_cli(tmp, MIRROR, "--retain-last", "3", "--json")
    return tmp, delta, catalog, data_dir, not_ours, before, done


def test_dry_run_reports_and_removes_nothing(expired) -> None:
    _, _, _, _, _, before, done = expired
    dry, real = before["dry_run"], json.loads(done.stdout)
    assert dry["dry_run"] and before["after_dry_run"] == {"snapshots": 16, "owned": before["owned"]}
    assert dry["read_with"] == "pyiceberg" and real["read_with"] == "iceberg-java"
    print(f"dry run without a JVM: {before['dry_run_seconds']:.2f} s\n{before['dry_run_text']}")
    for key in (
        "expired_snapshot_ids",
        "expired_delta_versions",
        "retained_delta_versions",
        *FILE_KEYS,
        "deleted_files",
        "files_reclaimed",
        "bytes_reclaimed",
    ):
        # What it said would go is what went, every file of it; under names that say it did nothing.
        assert dry[DRY_RUN_NAMES[key]] == real[key], key
        assert key not in dry, key
    assert real["deleted_metadata_files"] and real["deleted_delete_files"]
    assert (
        dry["retention"]
        == real["retention"]
        == {
            "retain_last": 3,
            "max_snapshot_age_hours": None,
            "orphan_min_age_hours": 24.0,
        }
    )


def test_the_report_lists_every_file_deleted(expired) -> None:
    _, _, catalog, _, _, before, done = expired
    report = json.loads(done.stdout)
    assert report["deleted_files"] == [f for key in FILE_KEYS for f in report[key]]
    assert len(set(report["deleted_files"])) == report["files_reclaimed"]
    for path in report["deleted_files"]:
        assert not local(path).exists(), path
    # Every file that left the metadata folder is in the report: manifests, manifest lists, and the
    # metadata files Iceberg dropped from the metadata log when the expiry committed.
    metadata_dir = local(MirrorLayout(catalog.pyiceberg_catalog().load_table(MIRROR).location()).metadata_dir)
    gone = before["metadata_json"] - {p.name for p in metadata_dir.iterdir()}
    reported = {local(f).name for f in report["deleted_metadata_files"] + report["deleted_metadata_json"]}
    assert gone == reported
    assert any(n.startswith("snap-") for n in gone) and any(not n.startswith("snap-") for n in gone)
    # The text report (here the dry run's, the same report) names every file or, past 50, every kind.
    text = before["dry_run_text"]
    assert text.splitlines()[1].startswith(f"would delete {report['files_reclaimed']} files")
    if report["files_reclaimed"] <= 50:
        assert listed_in_text(text) == report["deleted_files"]
    else:
        assert "(--json lists every file)" in text
        assert "manifest" in text and ".puffin" not in text


def test_expire_keeps_the_newest_n_snapshots(expired) -> None:
    _, _, catalog, _, _, before, done = expired
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and not report["dry_run"]
    counts = (report["snapshots_before"], report["snapshots_expired"], report["snapshots_retained"])
    assert counts == (16, 13, 3)
    assert report["expired_delta_versions"] == list(range(13))
    assert report["retained_delta_versions"] == [13, 14, 15]
    table = catalog.pyiceberg_catalog().load_table(MIRROR)
    assert table.current_snapshot().snapshot_id == before["current"]  # the newest is kept, still current
    kept = {v: sid for v, sid in before["versions"].items() if v >= 13}
    assert snapshots_by_delta_version(catalog, MIRROR) == kept
    assert sorted(report["expired_snapshot_ids"]) == sorted(
        sid for v, sid in before["versions"].items() if v < 13
    )
    for version, snapshot_id in kept.items():  # the retained versions still read exactly
        assert pyiceberg_rows(catalog, MIRROR, snapshot_id) == expected_rows(TABLE, version)


def test_expire_deletes_only_the_mirrors_own_files(expired) -> None:
    _, delta, catalog, data_dir, not_ours, before, done = expired
    report = json.loads(done.stdout)
    assert hash_tree(delta) == before["delta"]  # not one Delta byte touched (data, DVs, _delta_log)
    assert not_ours.exists()
    owned_after = {p.name for p in data_dir.iterdir() if p.name.startswith("dvmirror-")}
    reclaimed = before["owned"] - owned_after
    assert reclaimed, "the expired versions' delete files were not reclaimed"
    assert {local(f).name for f in report["deleted_delete_files"]} == reclaimed
    assert report["deleted_metadata_files"], "the expired snapshots' manifests were not reclaimed"
    location = catalog.pyiceberg_catalog().load_table(MIRROR).location()
    layout = MirrorLayout(location)
    for path in report["deleted_delete_files"] + report["deleted_metadata_files"]:
        assert layout.is_owned(path) or layout.is_metadata(path), path
        assert not local(path).exists(), path
    total = sum(len(report[k]) for k in ("deleted_delete_files", "deleted_metadata_files", "deleted_orphans"))
    assert report["files_reclaimed"] == total
    assert report["bytes_reclaimed"] > 0


def test_expire_again_with_older_than_expires_nothing(expired) -> None:
    tmp, _, catalog, _, _, _, _ = expired
    # Every snapshot is minutes old: none is older than a week, whatever --retain-last says.
    again = expire_cli(tmp, MIRROR, "--retain-last", "1", "--older-than", "7d")
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(f"{MIRROR}: expired 0 of 3 snapshots"), again.stdout
    assert again.stdout.splitlines()[1] == "deleted 0 files, 0 bytes"
    assert len(catalog.pyiceberg_catalog().load_table(MIRROR).snapshots()) == 3


def test_expire_refusals_are_one_line_exit_2(expired) -> None:
    tmp, _, catalog, _, _, _, _ = expired
    missing = expire_cli(tmp, "ops.nosuch", "--retain-last", "2")
    assert missing.returncode == 2
    assert "ops.nosuch: no such Iceberg table" in one_error_line(missing)

    bad_duration = expire_cli(tmp, MIRROR, "--retain-last", "2", "--older-than", "soon", "--json")
    assert bad_duration.returncode == 2
    assert "--older-than" in one_error_line(bad_duration)
    assert json.loads(bad_duration.stdout)["ok"] is False

    zero = expire_cli(tmp, MIRROR, "--retain-last", "0")
    assert zero.returncode == 2 and "--retain-last" in one_error_line(zero)

    # A table the mirror did not write (no snapshot names a Delta version) is not expired.
    plain = catalog.pyiceberg_catalog().create_table("ops.plain", schema=pa.schema([("id", pa.int64())]))
    plain.append(pa.table({"id": [1, 2]}))
    refused = expire_cli(tmp, "ops.plain", "--retain-last", "1")
    assert refused.returncode == 2
    assert "not a dv-mirror table" in one_error_line(refused)
    assert len(catalog.pyiceberg_catalog().load_table("ops.plain").snapshots()) == 1


def test_text_run_lists_every_file_it_deletes(expired) -> None:
    tmp, _, catalog, _, _, _, _ = expired
    dry, _ = dry_run_without_java(tmp, MIRROR, "--retain-last", "1", "--json")
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)
    assert planned["would_expire_snapshots"] == 2 and planned["would_reclaim_files"] <= 50

    done = expire_cli(tmp, MIRROR, "--retain-last", "1")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"{MIRROR}: expired 2 of 3 snapshots"), done.stdout
    assert lines[1].startswith(
        f"deleted {planned['would_reclaim_files']} files, {planned['would_reclaim_bytes']} bytes"
    )
    assert listed_in_text(done.stdout) == planned["would_delete_files"]  # the dry run said exactly this
    kinds = {line.split(": ", 1)[0].strip() for line in lines[2:]}
    assert {"manifest", "manifest list"} <= kinds, done.stdout
    for path in planned["would_delete_files"]:
        assert not local(path).exists(), path
    assert len(catalog.pyiceberg_catalog().load_table(MIRROR).snapshots()) == 1


def test_without_retention_flags_the_default_retention_applies(expired) -> None:
    """No --retain-last (it was required): the table's retention, here the default every table has
    (`DEFAULT_RETENTION`: the newest 10 kept, the others once a week old): minutes-old snapshots stay."""
    tmp = expired[0]
    dry, _ = dry_run_without_java(tmp, MIRROR, "--json")
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)
    assert planned["retention"] == DEFAULT_RETENTION.model_dump()
    assert planned["would_expire_snapshots"] == 0 and planned["would_expire_snapshot_ids"] == []
