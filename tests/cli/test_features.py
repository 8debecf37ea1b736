"""Delta reader features through the installed `dvmirror` console script (issue 19), on tables Delta Spark
writes with DVs: `vacuumProtocolCheck` and type widening (int → long, a decimal precision increase) are
mirrored by `dvmirror sync --json` in both formats, every version read back by Iceberg Java, DuckDB and
pyiceberg, and `dvmirror verify` passes; a VARIANT column is mirrored in format 3 (Iceberg Java and
DuckDB compared; `dvmirror status` and `verify` read it) and refused by name in format 2; a float →
double widening and a catalog-managed table are refused by name (exit 2), the mirror left at its last
good version.

The CLI mirrors into the session's catalog, so that the session's Spark (Iceberg Java) reads what it wrote.
The tests of the widened table run in file order: the refusal adds a version to the table mirrored first.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from pyiceberg.exceptions import ValidationError
from pyspark.sql import SparkSession

from dv_assets.mirror.settings import CatalogConfig
from tests.helpers.delta_histories import (
    Mirrored,
    assert_mirrors_match,
    delta_ref,
    fast_spark,
    latest_version,
    tblproperties,
)
from tests.helpers.delta_log import read_commit, write_commit
from tests.helpers.paths import DELTA_FIXTURES
from tests.helpers.processes import catalog_args, one_error_line, run_dvmirror, sync_cli
from tests.helpers.readers import snapshots_by_delta_version

WIDENED_LATEST = 8  # the widened table's last version before the float → double widening


def sync(
    tmp: Path, catalog: CatalogConfig, delta: Path, table: str, *args: str
) -> subprocess.CompletedProcess:
    """`dvmirror sync DELTA --table TABLE ARGS --json` into the session's catalog."""
    return sync_cli(tmp, delta, table, *args, "--json", catalog=catalog)


def synced_versions(done: subprocess.CompletedProcess) -> list[int]:
    """The versions a successful `dvmirror sync --json` committed."""
    assert (done.returncode, done.stderr) == (0, ""), done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is True, report
    return report["mirrored_versions"]


def refused(done: subprocess.CompletedProcess) -> tuple[str, dict]:
    """A refused `dvmirror sync --json`: exit 2, one stderr line (returned without its prefix) and the
    JSON report on stdout, which names the same error."""
    assert done.returncode == 2, done.stdout + done.stderr
    line = one_error_line(done).removeprefix("dvmirror: ")
    report = json.loads(done.stdout)
    assert (report["ok"], report["exit_code"], report["error"]) == (False, 2, line), report
    return line, report


def status_json(tmp: Path, catalog: CatalogConfig, table: str) -> dict:
    where = catalog_args(catalog)
    done = run_dvmirror("status", table, *where, "--json", cwd=tmp)
    assert done.returncode == 0, done.stdout + done.stderr
    (one,) = json.loads(done.stdout)["tables"]
    return one


@pytest.fixture(scope="module")
def widened(
    spark: SparkSession, catalog: CatalogConfig, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path, list[Mirrored]]:
    """A Delta table with DVs whose v3 enables `vacuumProtocolCheck` and type widening, v4 widens `i`
    int → long, v5 `d` decimal(5,2) → decimal(10,2), with DML before and after; mirrored by `dvmirror
    sync` in format 3 in two runs (up to v2, then the rest: the features arrive in an incremental run)
    and in format 2 in one."""
    tmp = tmp_path_factory.mktemp("cli-features")
    root = tmp / "widened"
    ref = delta_ref(root)
    with fast_spark(spark):
        spark.sql(
            f"CREATE TABLE {ref} (id INT, i INT, d DECIMAL(5,2), f FLOAT, s STRING) USING delta "
            f"TBLPROPERTIES ({tblproperties()})"
        )
        spark.sql(
            f"INSERT INTO {ref} SELECT /*+ REPARTITION(1) */ CAST(id AS INT), CAST(id AS INT), "
            "CAST(id AS DECIMAL(5,2)) + 0.25, CAST(id AS FLOAT) / 4, concat('s', id) FROM range(0, 40) t(id)"
        )
        spark.sql(f"DELETE FROM {ref} WHERE id % 7 = 0")
        spark.sql(
            f"ALTER TABLE {ref} SET TBLPROPERTIES ('delta.feature.vacuumProtocolCheck' = 'supported', "
            "'delta.enableTypeWidening' = 'true')"
        )
        spark.sql(f"ALTER TABLE {ref} CHANGE COLUMN i TYPE BIGINT")
        spark.sql(f"ALTER TABLE {ref} CHANGE COLUMN d TYPE DECIMAL(10,2)")
        spark.sql(
            f"INSERT INTO {ref} SELECT /*+ REPARTITION(1) */ CAST(id AS INT), 3000000000 + id, "
            "CAST(12345678.5 AS DECIMAL(10,2)) + id, CAST(0.5 AS FLOAT), concat('w', id) "
            "FROM range(100, 120) t(id)"
        )
        spark.sql(f"UPDATE {ref} SET s = concat(s, 'u'), i = i + 1 WHERE id % 5 = 1")  # old and new files
        spark.sql(f"DELETE FROM {ref} WHERE id % 4 = 2")
    assert latest_version(root) == WIDENED_LATEST
    (protocol,) = [a["protocol"] for a in read_commit(root, 3) if "protocol" in a]
    assert sorted(protocol["readerFeatures"]) == ["deletionVectors", "typeWidening", "vacuumProtocolCheck"]

    v3 = Mirrored("cli_features.widened_v3", 3)
    first = sync(tmp, catalog, root, v3.table_name, "--format-version", "3", "--until-version", "2")
    rest = sync(tmp, catalog, root, v3.table_name)
    assert synced_versions(first) == [0, 1, 2]
    assert synced_versions(rest) == list(range(3, WIDENED_LATEST + 1))
    v2 = Mirrored("cli_features.widened_v2", 2)
    assert synced_versions(sync(tmp, catalog, root, v2.table_name, "--format-version", "2")) == list(
        range(WIDENED_LATEST + 1)
    )
    for m in (v3, v2):
        m.snapshots = snapshots_by_delta_version(catalog, m.table_name)
    return tmp, root, [v3, v2]


def test_widening_and_vacuum_check_mirror_exactly(spark, catalog, widened) -> None:
    """Every version of both mirrors equals Delta Spark's rows through Iceberg Java, DuckDB and pyiceberg;
    the widened columns are Iceberg promotions on their field ids; `dvmirror verify` passes."""
    tmp, root, mirrors = widened
    compared = assert_mirrors_match(
        spark, catalog, root, mirrors, label="CLI widening", pyiceberg_every_version=True
    )
    assert compared == 2 * (WIDENED_LATEST + 1)
    where = catalog_args(catalog)
    for m in mirrors:
        table = catalog.pyiceberg_catalog().load_table(m.table_name)
        assert table.format_version == m.format_version
        fields = {f.name: (f.field_id, str(f.field_type)) for f in table.schema().fields}
        assert fields == {
            "id": (1, "int"),
            "i": (2, "long"),
            "d": (3, "decimal(10, 2)"),
            "f": (4, "float"),
            "s": (5, "string"),
        }, m.table_name
        done = run_dvmirror("verify", m.table_name, *where, "--json", cwd=tmp)
        assert (done.returncode, done.stderr) == (0, ""), done.stdout + done.stderr
        report = json.loads(done.stdout)
        assert (report["ok"], report["delta_version"]) == (True, WIDENED_LATEST), report
        assert report["snapshot_id"] == m.snapshots[WIDENED_LATEST]
        assert all(c["passed"] for c in report["checks"]), report["checks"]


def test_float_to_double_is_refused_by_name(spark, catalog, widened) -> None:
    """float → double (an Iceberg promotion that pyiceberg and DuckDB filter wrongly on the old files) is
    refused at its version in both formats: exit 2 naming the column, both types and the reason; both
    mirrors stay at the version before, as `dvmirror status` shows."""
    tmp, root, mirrors = widened
    with fast_spark(spark):
        spark.sql(f"ALTER TABLE {delta_ref(root)} CHANGE COLUMN f TYPE DOUBLE")
    widening = WIDENED_LATEST + 1
    assert latest_version(root) == widening
    for m in mirrors:
        line, report = refused(sync(tmp, catalog, root, m.table_name))
        assert line.startswith(f"table {root}, version {widening}: "), line
        assert "column 'f' was widened from float to double (Iceberg float → double)" in line, line
        assert "pyiceberg 0.12 and DuckDB 1.5.5 filter the old files' floats" in line, line
        assert report["mirrored_versions"] == []
        assert max(snapshots_by_delta_version(catalog, m.table_name)) == WIDENED_LATEST
        status = status_json(tmp, catalog, m.table_name)
        assert (status["mirrored_version"], status["delta_latest_version"], status["lag_versions"]) == (
            WIDENED_LATEST,
            widening,
            1,
        ), status
        assert status["snapshot_id"] == m.snapshots[WIDENED_LATEST]


def test_variant_mirrors_and_status_and_verify_read_it(spark, catalog, tmp_path: Path) -> None:
    """A VARIANT column (Delta Spark enables `variantType` for it), with DVs: `dvmirror sync
    --format-version 3` mirrors every version (Iceberg Java and DuckDB equal Delta Spark; pyiceberg 0.12
    cannot load the table), and `dvmirror status` and `dvmirror verify`, which read the mirror's
    metadata without pyiceberg's schema parser, answer; format 2 is refused by name (exit 2)."""
    root = tmp_path / "variant"
    ref = delta_ref(root)
    with fast_spark(spark):
        spark.sql(f"CREATE TABLE {ref} (id INT, v VARIANT) USING delta TBLPROPERTIES ({tblproperties()})")
        spark.sql(
            f"INSERT INTO {ref} SELECT /*+ REPARTITION(1) */ CAST(id AS INT), "
            "parse_json(concat('{\"a\": ', id, '}')) FROM range(0, 20) t(id)"
        )
        spark.sql(f"DELETE FROM {ref} WHERE id % 3 = 0")
    latest = latest_version(root)
    name = "cli_features.variant"
    versions = synced_versions(sync(tmp_path, catalog, root, name, "--format-version", "3"))
    assert versions == list(range(latest + 1))
    m = Mirrored(name, 3, snapshots_by_delta_version(catalog, name))
    with pytest.raises(ValidationError, match="Unsupported field type: 'variant'"):
        catalog.pyiceberg_catalog().load_table(name)
    with fast_spark(spark):
        assert assert_mirrors_match(spark, catalog, root, [m], label="CLI variant", pyiceberg=False) == (
            latest + 1
        )
    status = status_json(tmp_path, catalog, name)
    assert (status["mirrored_version"], status["delta_latest_version"], status["lag_versions"]) == (
        latest,
        latest,
        0,
    ), status
    assert status["snapshot_id"] == m.snapshots[latest]
    done = run_dvmirror("verify", name, *catalog_args(catalog), "--json", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, ""), done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert (report["ok"], report["delta_version"], report["snapshot_id"]) == (
        True,
        latest,
        m.snapshots[latest],
    ), report
    assert report["checks"] and all(c["passed"] for c in report["checks"]), report["checks"]

    line, report = refused(sync(tmp_path, catalog, root, "cli_features.variant_v2", "--format-version", "2"))
    assert line.startswith(f"table {root}, version 0: "), line
    assert "column 'v' is a variant, a type Iceberg format 2 does not have" in line, line
    assert report["mirrored_versions"] == []
    assert not catalog.pyiceberg_catalog().table_exists("cli_features.variant_v2")


def test_catalog_managed_is_refused_by_name(catalog, tmp_path: Path) -> None:
    """A Delta Spark table with a DV (2 versions) whose version 2, written by hand, makes it
    catalog-managed: versions 0 and 1 are mirrored, then the run stops at 2, naming the feature and why."""
    root = tmp_path / "managed"
    shutil.copytree(DELTA_FIXTURES / "table-with-dv-small", root)
    for p in root.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    assert latest_version(root) == 1
    features = {"readerFeatures": ["catalogManaged", "deletionVectors"]}
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        **features,
        "writerFeatures": features["readerFeatures"],
    }
    write_commit(root, 2, [{"commitInfo": {"operation": "ALTER"}}, {"protocol": protocol}])
    line, report = refused(sync(tmp_path, catalog, root, "cli_features.managed"))
    assert line.startswith(
        f"table {root}, version 2: unsupported Delta reader feature(s): catalogManaged ("
    ), line
    assert "keeps its newest commits in its catalog, not in _delta_log" in line, line
    assert report["mirrored_versions"] == [0, 1]
    status = status_json(tmp_path, catalog, "cli_features.managed")
    assert (status["mirrored_version"], status["delta_latest_version"]) == (1, 2), status
