"""The first sync of a table whose old log was cleaned and whose old files were vacuumed (issue 27).

One Delta Spark table, built once and copied per test: v0 CREATE, v1 INSERT, v2 DELETE (DVs;
checkpoint), v3 REORG ... APPLY (PURGE) (the DV'd files rewritten), v4 DELETE (DVs; checkpoint), v5
INSERT, then VACUUM RETAIN 0 HOURS (its START / END commits). Commits 0 and 1 are then removed, as log
cleanup does: the log reconstructs v2 onwards, but v2's data and DV files are gone, so Delta reads v3..
latest only. A first sync starts at v3, says so, and records it; a file gone later is still refused.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import unquote

import pytest

from dv_assets.defs.status_metadata import current_state_metadata
from dv_assets.mirror.cli.status import status_text
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.iceberg.mirror_table import FIRST_READABLE_VERSION_PROPERTY
from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table
from dv_assets.mirror.status import mirror_status
from dv_assets.mirror.sync import sync_table
from tests.helpers.delta_histories import (
    delta_versions,
    fast_spark,
    iceberg_versions,
    latest_version,
    vacuum_now,
)
from tests.helpers.readers import delta_spark_rows, duckdb_rows, pyiceberg_rows, snapshots_by_delta_version

# `extended`: its Delta Spark table takes a minute to build; make test-extended runs it (CI too).
pytestmark = [pytest.mark.spark, pytest.mark.extended]

NOTE = (
    "mirrored from Delta version 3: versions 0..2 are no longer readable in Delta "
    "(their data files were removed)"
)


@pytest.fixture(scope="module")
def vacuumed_source(spark, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("vacuumed_start") / "source"
    ref = f"delta.`{root}`"
    with fast_spark(spark):
        spark.sql(
            f"CREATE TABLE {ref} (id BIGINT, p STRING) USING delta PARTITIONED BY (p) TBLPROPERTIES "
            "('delta.enableDeletionVectors' = 'true', 'delta.checkpointInterval' = '2')"
        )
        spark.sql(f"INSERT INTO {ref} SELECT id, CAST(id % 3 AS STRING) FROM range(0, 300)")
        spark.sql(f"DELETE FROM {ref} WHERE id % 7 = 0")
        spark.sql(f"REORG TABLE {ref} APPLY (PURGE)")
        spark.sql(f"DELETE FROM {ref} WHERE id % 5 = 0")
        spark.sql(f"INSERT INTO {ref} VALUES (1000, '0'), (1001, '1')")
        vacuum_now(spark, ref)
    log = root / "_delta_log"
    assert (log / f"{2:020d}.checkpoint.parquet").exists()
    for version in (0, 1):  # what log cleanup does once a later checkpoint exists
        for name in (f"{version:020d}.json", f"{version:020d}.crc"):
            (log / name).unlink(missing_ok=True)
    return root


@pytest.fixture
def vacuumed(vacuumed_source: Path, tmp_path: Path) -> Path:
    root = tmp_path / "vacuumed table"
    shutil.copytree(vacuumed_source, root)
    return root


def added_paths(root: Path, version: int) -> list[Path]:
    """The data files a commit adds, as local paths."""
    lines = (root / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    actions = [json.loads(line) for line in lines if line.strip()]
    return [root / unquote(action["add"]["path"]) for action in actions if "add" in action]


def test_first_sync_starts_at_the_first_readable_version(spark, catalog, vacuumed: Path) -> None:
    latest = latest_version(vacuumed)
    assert latest >= 6  # VACUUM START / END committed after v5
    with pytest.raises(Exception, match=r"(?i)not.?exist|FileNotFound"):
        delta_spark_rows(spark, str(vacuumed), 2)  # Delta Spark itself cannot read v2

    result = sync_table(spark, vacuumed, "vs.first")

    assert result.start_note == NOTE
    assert result.first_readable_version == 3
    assert result.mirrored_versions == list(range(3, latest + 1))
    assert result.to_json()["start_note"] == NOTE
    mirror = read_mirror_table(catalog, "vs.first")
    assert mirror is not None
    assert mirror.properties[FIRST_READABLE_VERSION_PROPERTY] == "3"
    snapshots = snapshots_by_delta_version(catalog, "vs.first")
    assert sorted(snapshots) == list(range(3, latest + 1))
    expected = delta_versions(spark, vacuumed, sorted(snapshots))
    java = iceberg_versions(spark, "vs.first", snapshots)
    for version, snapshot_id in snapshots.items():
        rows = expected.rows[version]
        assert rows and java.rows[version] == rows, version
        columns = expected.union_columns
        by_pyiceberg = [
            tuple(r[c] for c in columns) for r in pyiceberg_rows(catalog, "vs.first", snapshot_id)
        ]
        by_duckdb = [tuple(r[c] for c in columns) for r in duckdb_rows(mirror.metadata_location, snapshot_id)]
        assert sorted(by_pyiceberg) == sorted(by_duckdb) == sorted(rows), version

    status = mirror_status(DeltaTable(vacuumed), mirror, "vs.first")
    assert (status.first_readable_version, status.mirrored_version, status.lag_versions) == (3, latest, 0)
    assert "first readable version: 3 (versions 0..2 are no longer readable in Delta)" in status_text(status)
    assert current_state_metadata(status)["details"].value["first_readable_delta_version"] == 3
    # Nothing new: the next sync is a no-op, and says nothing of the start again.
    again = sync_table(spark, vacuumed, "vs.first")
    assert again.mirrored_versions == [] and again.start_note is None


def test_until_version_then_a_file_gone_mid_range_is_refused(spark, catalog, vacuumed: Path) -> None:
    with pytest.raises(MirrorInputError, match=r"no Delta version from 2 .* to 2 is readable") as none:
        sync_table(spark, vacuumed, "vs.until", until_version=2)
    assert none.value.version == 2 and none.value.file is not None
    assert "sync up to a later one" in none.value.reason
    assert read_mirror_table(catalog, "vs.until") is None  # nothing created

    first = sync_table(spark, vacuumed, "vs.until", until_version=4)
    assert (first.mirrored_versions, first.start_note) == ([3, 4], NOTE)

    # Once the mirror exists, a version whose file is gone is refused, never skipped over.
    (gone,) = added_paths(vacuumed, 5)[:1]
    gone.unlink()
    with pytest.raises(MirrorInputError, match="does not exist") as refused:
        sync_table(spark, vacuumed, "vs.until")
    assert refused.value.version == 5 and refused.value.file == str(gone)
    assert sorted(snapshots_by_delta_version(catalog, "vs.until")) == [3, 4]


def test_no_readable_version_is_refused(spark, catalog, vacuumed: Path) -> None:
    latest = latest_version(vacuumed)
    rewritten = added_paths(vacuumed, 3)  # REORG's files: live from v3 to the latest version
    assert rewritten
    rewritten[0].unlink()
    with pytest.raises(MirrorInputError, match=rf"no Delta version from 2 .* to {latest} is readable") as err:
        sync_table(spark, vacuumed, "vs.none")
    assert err.value.version == latest and err.value.file == str(rewritten[0])
    assert "sync up to a later one" not in err.value.reason
    assert read_mirror_table(catalog, "vs.none") is None
