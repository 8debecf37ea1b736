"""Delta reader features beyond deletion vectors, on tables Delta Spark writes (issue 19): each history
is mirrored in both formats and every version read back by Iceberg Java (Spark), DuckDB and pyiceberg.

Refusals of features the mirror does not read (catalogManaged, unknown ones) are unit tests on
hand-written logs in tests/test_delta_replay.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.delta_histories import (
    assert_mirrors_match,
    delta_ref,
    fast_spark,
    latest_version,
    mirror_both,
    tblproperties,
)
from tests.helpers.delta_log import read_commit

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True, scope="module")
def _fast(spark):
    with fast_spark(spark):
        yield


def reader_features_by_version(root: Path) -> dict[int, list[str]]:
    """The readerFeatures of each commit that has a protocol action."""
    found = {}
    for version in range(latest_version(root) + 1):
        for action in read_commit(root, version):
            if "protocol" in action:
                found[version] = sorted(action["protocol"].get("readerFeatures") or [])
    return found


def test_vacuum_protocol_check(spark, catalog, tmp_path: Path) -> None:
    """`vacuumProtocolCheck` enabled through a table property mid-history, DML with DVs before and after:
    every version mirrors exactly in both formats (the feature only constrains VACUUM)."""
    root = tmp_path / "vacuum check"
    ref = delta_ref(root)
    spark.sql(f"CREATE TABLE {ref} (id INT, s STRING) USING delta TBLPROPERTIES ({tblproperties()})")
    spark.sql(f"INSERT INTO {ref} SELECT /*+ REPARTITION(1) */ id, concat('s', id) FROM range(0, 40) t(id)")
    spark.sql(f"DELETE FROM {ref} WHERE id % 7 = 0")
    spark.sql(f"ALTER TABLE {ref} SET TBLPROPERTIES ('delta.feature.vacuumProtocolCheck' = 'supported')")
    spark.sql(f"UPDATE {ref} SET s = concat(s, 'u') WHERE id % 5 = 1")
    spark.sql(
        f"MERGE INTO {ref} t USING (SELECT CAST(id AS INT) AS id FROM range(30, 50)) src ON t.id = src.id "
        "WHEN MATCHED AND src.id % 2 = 0 THEN DELETE "
        "WHEN NOT MATCHED THEN INSERT (id, s) VALUES (src.id, 'new')"
    )
    spark.sql(f"DELETE FROM {ref} WHERE id % 11 = 3")
    latest = latest_version(root)
    assert latest == 6
    features = reader_features_by_version(root)
    assert "vacuumProtocolCheck" not in features[0]
    assert features[3] == ["deletionVectors", "vacuumProtocolCheck"], features
    mirrors = mirror_both(spark, root, "vacuum_check", split_at=[2, 3])
    compared = assert_mirrors_match(
        spark, catalog, root, mirrors, label="vacuumProtocolCheck", pyiceberg_every_version=True
    )
    assert compared == 2 * (latest + 1)
