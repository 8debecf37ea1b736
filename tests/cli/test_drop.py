"""`dvmirror drop`, through the installed console script, on a real mirror of 16 Delta versions: the drop
removes exactly the files dv-mirror wrote (delete files, checkpoint index, manifests, manifest lists,
metadata files) and the catalog entry, and not one byte of the Delta table; its dry run (no JVM) lists
exactly that and deletes nothing; a sync afterwards makes the mirror again, exact. Tables dv-mirror did
not write (one Iceberg Java created through Spark SQL, a mirror another writer appended to) are refused
and left as they were."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dv_assets.mirror.iceberg.layout import MirrorLayout
from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table
from dv_assets.mirror.settings import ICEBERG_CATALOG_NAME, CatalogConfig
from tests.helpers.dagster import hash_tree
from tests.helpers.paths import DELTA_FIXTURES, expected_rows, expected_versions
from tests.helpers.processes import (
    catalog_args,
    cli_catalog,
    no_java_env,
    one_error_line,
    run_dvmirror,
    sync_cli,
)
from tests.helpers.readers import pyiceberg_rows, snapshots_by_delta_version

TABLE = "dv-partitioned-with-checkpoint"  # 16 versions, 26 DVs, a checkpoint at v10 (so an index)
MIRROR = "ops.events"
KINDS = (
    "delete_files",
    "orphan_delete_files",
    "checkpoint_index_files",
    "manifests",
    "manifest_lists",
    "metadata_files",
    "checksum_files",
)


def drop_cli(tmp: Path, *args: str, catalog: CatalogConfig | None = None, env: dict[str, str] | None = None):
    where = catalog_args(catalog or cli_catalog(tmp))
    return run_dvmirror("drop", *args, *where, cwd=tmp, env=env)


def local(location: str) -> Path:
    return Path(location.removeprefix("file:"))


def files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def dropped(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A mirror of TABLE, its dry run and its drop (both --json), then a sync of the same Delta table."""
    tmp = tmp_path_factory.mktemp("drop")
    delta = tmp / TABLE
    shutil.copytree(DELTA_FIXTURES / TABLE, delta)
    synced = sync_cli(tmp, delta, MIRROR)
    assert synced.returncode == 0, synced.stderr
    catalog = cli_catalog(tmp)
    mirror = read_mirror_table(catalog, MIRROR)
    assert mirror is not None
    folder = local(mirror.location)
    not_ours = local(MirrorLayout(mirror.location).delete_dir) / "someone-elses.parquet"
    not_ours.write_bytes(b"x" * 100)  # in the mirror's folder, without the mirror's name
    state: dict = {
        "tmp": tmp,
        "catalog": catalog,
        "folder": folder,
        "not_ours": not_ours,
        "delta": hash_tree(delta),
        "files": files_under(folder),
        "versions": snapshots_by_delta_version(catalog, MIRROR),
    }
    dry = drop_cli(tmp, MIRROR, "--dry-run", "--json", env=no_java_env())
    assert dry.returncode == 0, dry.stderr
    state["dry_run"] = json.loads(dry.stdout)
    dry_text = drop_cli(tmp, MIRROR, "--dry-run", env=no_java_env())
    assert dry_text.returncode == 0, dry_text.stderr
    state["dry_run_text"] = dry_text.stdout
    state["after_dry_run"] = (files_under(folder), read_mirror_table(catalog, MIRROR) is not None)

    done = drop_cli(tmp, MIRROR, "--json")
    assert done.returncode == 0, done.stderr
    state["drop"] = json.loads(done.stdout)
    state["after_drop"] = (files_under(folder), read_mirror_table(catalog, MIRROR), hash_tree(delta))

    again = sync_cli(tmp, delta, MIRROR)
    assert again.returncode == 0, again.stderr
    state["after_sync"] = hash_tree(delta)
    return state


def test_the_dry_run_lists_what_would_go_and_deletes_nothing(dropped) -> None:
    dry = dropped["dry_run"]
    assert dry["ok"] and dry["dry_run"] and dry["read_with"] == "pyiceberg"  # answered without a JVM
    assert dry["would_unregister"] is True
    assert "deleted_files" not in dry and "unregistered" not in dry  # names that say it did not happen
    assert dropped["after_dry_run"] == (dropped["files"], True)
    by_kind = [f for kind in KINDS for f in dry["would_delete_by_kind"][kind]]
    assert sorted(dry["would_delete_files"]) == sorted(by_kind) and len(set(by_kind)) == len(by_kind)
    for location in dry["would_delete_by_kind"]["checksum_files"]:  # Hadoop's, beside a file that goes
        folder, _, name = location.rpartition("/")
        assert name.startswith(".") and f"{folder}/{name[1:].removesuffix('.crc')}" in by_kind, location
    assert dry["delta_versions"] == list(range(16)) and dry["snapshots"] == 16
    text = dropped["dry_run_text"].splitlines()
    assert text[0].startswith(f"{MIRROR}: would drop the mirror of "), text
    assert text[1].startswith(f"would delete {len(dry['would_delete_files'])} files, "), text
    assert any(line.startswith(f"would then unregister {MIRROR} from the jdbc catalog") for line in text)
    print("\n".join(text))


def test_the_drop_removes_exactly_the_mirrors_files_and_its_catalog_entry(dropped) -> None:
    report, dry = dropped["drop"], dropped["dry_run"]
    after, table, delta = dropped["after_drop"]
    assert report["ok"] and not report["dry_run"] and report["unregistered"] is True
    assert table is None  # gone from the catalog
    assert delta == dropped["delta"]  # not one byte of the Delta table changed (data, DVs, _delta_log)
    assert report["deleted_files"] == dry["would_delete_files"]  # what the dry run said, every file
    assert report["deleted_by_kind"] == dry["would_delete_by_kind"]
    assert report["missing_files"] == []
    assert [local(f) for f in report["left_in_place"]] == [dropped["not_ours"]]
    deleted = {local(f) for f in report["deleted_files"]}
    assert len(deleted) == len(report["deleted_files"])
    assert dropped["files"] - after == deleted  # exactly these went
    assert after == {dropped["not_ours"]}  # and everything else under the mirror's folder was its own
    for kind in ("delete_files", "checkpoint_index_files", "manifests", "manifest_lists", "metadata_files"):
        assert report["deleted_by_kind"][kind], kind
    layout = MirrorLayout(dry["location"])
    for path in report["deleted_by_kind"]["delete_files"]:
        assert layout.is_owned(path), path
    assert report["deleted_by_kind"]["metadata_files"][-1] == report["metadata_location"]
    assert report["metadata_location"] in report["deleted_files"][-2:]  # after the catalog entry


def test_a_sync_after_the_drop_makes_the_mirror_again_exact(dropped) -> None:
    catalog = dropped["catalog"]
    assert dropped["after_sync"] == dropped["delta"]
    versions = snapshots_by_delta_version(catalog, MIRROR)
    assert sorted(versions) == expected_versions(TABLE) == list(range(16))
    assert not set(versions.values()) & set(dropped["versions"].values())  # a new table's snapshots
    for version, snapshot_id in versions.items():
        assert pyiceberg_rows(catalog, MIRROR, snapshot_id) == expected_rows(TABLE, version), version
    assert dropped["not_ours"].exists()
    verify = run_dvmirror("verify", MIRROR, *catalog_args(catalog), cwd=dropped["tmp"], env=no_java_env())
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_tables_dv_mirror_did_not_write_are_refused_and_untouched(spark, catalog, tmp_path) -> None:
    # A table Iceberg Java created and wrote (through Spark SQL): not a mirror.
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ICEBERG_CATALOG_NAME}.other")
    spark.sql(f"CREATE TABLE {ICEBERG_CATALOG_NAME}.other.plain (id BIGINT, name STRING) USING iceberg")
    spark.sql(f"INSERT INTO {ICEBERG_CATALOG_NAME}.other.plain VALUES (1, 'a'), (2, 'b')")
    plain = read_mirror_table(catalog, "other.plain")
    assert plain is not None
    before = hash_tree(local(plain.location))
    for extra in ((), ("--dry-run",)):
        refused = drop_cli(tmp_path, "other.plain", *extra, catalog=catalog, env=no_java_env())
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "table other.plain: not a dv-mirror mirror" in one_error_line(refused)
    assert hash_tree(local(plain.location)) == before
    assert read_mirror_table(catalog, "other.plain") is not None

    # A mirror another writer then appended to: the files of that snapshot are not the mirror's.
    delta = tmp_path / "small"
    shutil.copytree(DELTA_FIXTURES / "table-with-dv-small", delta)
    synced = sync_cli(tmp_path, delta, "other.small", catalog=catalog)
    assert synced.returncode == 0, synced.stderr
    small = f"{ICEBERG_CATALOG_NAME}.other.small"
    spark.sql(f"REFRESH TABLE {small}")
    spark.sql(f"INSERT INTO {small} SELECT * FROM {small} LIMIT 1")
    mirror = read_mirror_table(catalog, "other.small")
    assert mirror is not None
    before, delta_before = hash_tree(local(mirror.location)), hash_tree(delta)
    refused = drop_cli(tmp_path, "other.small", "--json", catalog=catalog, env=no_java_env())
    assert refused.returncode == 2
    line = one_error_line(refused)
    assert "table other.small: snapshot" in line and "(append) was not committed by dv-mirror" in line, line
    assert json.loads(refused.stdout)["ok"] is False
    assert hash_tree(local(mirror.location)) == before and hash_tree(delta) == delta_before
    assert read_mirror_table(catalog, "other.small") is not None

    missing = drop_cli(tmp_path, "other.nosuch", catalog=catalog, env=no_java_env())
    assert missing.returncode == 2 and "other.nosuch: no such Iceberg table" in one_error_line(missing)


def test_a_catalog_whose_drop_deletes_folders_is_refused_before_any_jvm(tmp_path) -> None:
    hadoop = run_dvmirror(
        "drop",
        "ops.events",
        "--catalog-property",
        "type=hadoop",
        "--catalog-property",
        f"warehouse={tmp_path / 'wh'}",
        cwd=tmp_path,
        env=no_java_env(),
    )
    assert hadoop.returncode == 2
    assert "hadoop catalog's dropTable deletes the table's whole folder" in one_error_line(hadoop)
    assert not (tmp_path / "wh").exists()
