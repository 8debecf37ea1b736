"""Delta reader features beyond deletion vectors, on tables Delta Spark writes (issue 19): each history
is mirrored in both formats and every version read back by Iceberg Java (Spark), DuckDB and pyiceberg.

Refusals of features the mirror does not read (catalogManaged, unknown ones) are unit tests on
hand-written logs in tests/delta/test_replay.py. The same features through the `dvmirror` CLI:
tests/cli/test_features.py; through the Dagster asset: tests/dagster/test_assets.py.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dv_assets.mirror.errors import UnsupportedFeatureError
from dv_assets.mirror.sync import sync_table
from tests.helpers.delta_histories import (
    assert_mirrors_match,
    delta_ref,
    fast_spark,
    latest_version,
    mirror,
    mirror_both,
    tblproperties,
)
from tests.helpers.delta_log import read_commit
from tests.helpers.readers import filtered_reads, snapshots_by_delta_version
from tests.helpers.rows import sorted_rows

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


@pytest.mark.extended  # half a minute: make test-extended (CI too)
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


# Filters on the widened columns, each matching rows of the file written before the widening (narrow
# Parquet types: int32, decimal(5,2) as int32, int8; manifest bounds written under the old type) and rows
# of files written after it. Before the widening only the int filter (the others select nothing there).
WIDENED_FILTERS = ["i > 3000000000", "i >= 15 AND i < 20", "d >= 38.25", "d > 12345680", "b >= 3 AND b < 6"]
NARROW_FILTERS = ["i >= 15 AND i < 20"]


@pytest.mark.extended  # half a minute: make test-extended (CI too)
def test_type_widening(spark, catalog, tmp_path: Path) -> None:
    """`typeWidening`: int → long, decimal(5,2) → decimal(10,2) and byte → short become Iceberg type
    promotions on the same field ids (byte → short: none, both are Iceberg int); old files keep their
    narrow Parquet types and manifest bounds. Every version of both formats is read back by Iceberg Java,
    DuckDB and pyiceberg, and filtered reads on the widened columns (pruned by those bounds) match
    Delta's. Then float → double, an Iceberg promotion that pyiceberg and DuckDB filter wrongly, is
    refused by name at its version, both mirrors left at the one before."""
    root = tmp_path / "widening"
    ref = delta_ref(root)
    spark.sql(
        f"CREATE TABLE {ref} (id INT, i INT, f FLOAT, d DECIMAL(5,2), b BYTE, s STRING) USING delta "
        f"TBLPROPERTIES ({tblproperties()})"
    )
    spark.sql(
        f"INSERT INTO {ref} SELECT /*+ REPARTITION(1) */ CAST(id AS INT), CAST(id AS INT), "
        "CAST(1.1 AS FLOAT) + CAST(id AS FLOAT) / 100, CAST(id AS DECIMAL(5,2)) + 0.25, CAST(id AS BYTE), "
        "concat('s', id) FROM range(0, 40) t(id)"
    )
    spark.sql(f"DELETE FROM {ref} WHERE id % 7 = 0")  # a DV on the narrow file
    spark.sql(f"ALTER TABLE {ref} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    for column, wide in [("i", "BIGINT"), ("d", "DECIMAL(10,2)"), ("b", "SMALLINT")]:
        spark.sql(f"ALTER TABLE {ref} CHANGE COLUMN {column} TYPE {wide}")
    spark.sql(
        f"INSERT INTO {ref} SELECT /*+ REPARTITION(1) */ CAST(id AS INT), 3000000000 + id, "
        "CAST(0.5 AS FLOAT), CAST(12345678.5 AS DECIMAL(10,2)) + id, CAST(id * 100 AS SMALLINT), "
        "concat('w', id) FROM range(100, 120) t(id)"
    )
    spark.sql(f"UPDATE {ref} SET s = concat(s, 'u'), i = i + 1 WHERE id % 5 = 1")  # old and new files
    spark.sql(f"DELETE FROM {ref} WHERE id % 4 = 2")
    latest = latest_version(root)
    assert latest == 9
    assert reader_features_by_version(root)[3] == ["deletionVectors", "typeWidening"]
    schema = spark.read.format("delta").load(str(root)).schema
    assert {f.name: f.dataType.simpleString() for f in schema.fields} == {
        "id": "int",
        "i": "bigint",
        "f": "float",
        "d": "decimal(10,2)",
        "b": "smallint",
        "s": "string",
    }
    mirrors = mirror_both(spark, root, "widening", split_at=[3, 5])
    compared = assert_mirrors_match(
        spark, catalog, root, mirrors, label="typeWidening", pyiceberg_every_version=True
    )
    assert compared == 2 * (latest + 1)
    for m in mirrors:
        table = catalog.pyiceberg_catalog().load_table(m.table_name)
        ids = {f.name: (f.field_id, str(f.field_type)) for f in table.schema().fields}
        assert ids == {
            "id": (1, "int"),
            "i": (2, "long"),
            "f": (3, "float"),
            "d": (4, "decimal(10, 2)"),
            "b": (5, "int"),
            "s": (6, "string"),
        }, m.table_name
        for version, filters in ((2, NARROW_FILTERS), (latest, WIDENED_FILTERS)):
            # Delta Spark's rows filtered after the read, so that no data skipping of Delta's decides.
            delta = spark.read.format("delta").option("versionAsOf", version).load(str(root))
            delta = delta.localCheckpoint(eager=True)
            for predicate in filters:
                want = sorted_rows(delta.where(predicate).toArrow().to_pylist())
                assert want, (predicate, version)
                for reader, rows in filtered_reads(
                    spark, catalog, m.table_name, m.snapshots[version], predicate
                ).items():
                    assert rows == want, (m.table_name, version, predicate, reader)

    spark.sql(f"ALTER TABLE {ref} CHANGE COLUMN f TYPE DOUBLE")
    for m in mirrors:
        with pytest.raises(UnsupportedFeatureError) as raised:
            sync_table(spark, root, m.table_name)
        err = raised.value
        assert (err.table, err.version) == (str(root), latest + 1), err.one_line()
        assert "column 'f' was widened from float to double (Iceberg float → double)" in err.reason
        assert "pyiceberg 0.12 and DuckDB 1.5.5 filter the old files' floats" in err.reason
        assert max(snapshots_by_delta_version(catalog, m.table_name)) == latest


def test_variant_mirrors_in_format_3(spark, catalog, tmp_path: Path) -> None:
    """A table with a VARIANT column (Delta Spark enables `variantType` for it), DML with DVs: every
    version of its format-3 mirror equals Delta Spark's rows through Iceberg Java and DuckDB, the variant
    values compared as JSON text (Spark's `to_json` on both Spark sides, DuckDB's `CAST(v AS JSON)`).
    pyiceberg 0.12 cannot read such a table at all (tests/iceberg/test_schema.py), so it is not asked;
    dv-mirror reads the mirror's metadata without it. Format 2 has no variant type: refused by name at
    version 0, no Iceberg table created."""
    root = tmp_path / "variant"
    ref = delta_ref(root)
    spark.sql(f"CREATE TABLE {ref} (id INT, v VARIANT) USING delta TBLPROPERTIES ({tblproperties()})")
    spark.sql(
        f"INSERT INTO {ref} SELECT /*+ REPARTITION(1) */ CAST(id AS INT), "
        'parse_json(concat(\'{"a": \', id, \', "c": [1, 2.5, null], "s": "x\', id, \'"}\')) '
        "FROM range(0, 20) t(id)"
    )
    spark.sql(f"DELETE FROM {ref} WHERE id % 3 = 0")
    spark.sql(
        f"UPDATE {ref} SET v = parse_json(concat('[', id, ', true, {{\"k\": \"\\\\u00e9\"}}]')) "
        "WHERE id % 4 = 1"
    )
    spark.sql(f"INSERT INTO {ref} VALUES (100, NULL), (101, parse_json('null')), (102, parse_json('1e300'))")
    spark.sql(f"DELETE FROM {ref} WHERE id = 2")
    latest = latest_version(root)
    assert reader_features_by_version(root)[0] == ["deletionVectors", "variantType"]
    m = mirror(spark, root, "gen.variant_v3", 3, split_at=[2])
    compared = assert_mirrors_match(spark, catalog, root, [m], label="variant", pyiceberg=False)
    assert compared == latest + 1
    with pytest.raises(UnsupportedFeatureError) as raised:
        sync_table(spark, root, "gen.variant_v2", format_version=2)
    err = raised.value
    assert (err.table, err.version) == (str(root), 0), err.one_line()
    assert err.reason.startswith("column 'v' is a variant, a type Iceberg format 2 does not have"), err.reason
    assert not catalog.pyiceberg_catalog().table_exists("gen.variant_v2")


# Filters on the widened partition column and struct field: each matches rows of the files written before
# the widenings (int partition values and bounds in their manifests) and of the files written after.
NESTED_FILTERS = ["p >= 1", "p > 3000000000", "s.x >= 15 AND s.x < 20", "s.x > 3000000000"]


@pytest.mark.slow
def test_widening_of_a_partition_column_and_nested_fields(spark, catalog, tmp_path: Path) -> None:
    """Delta Spark 4.4 widens a partition column (`p`), a struct field (`s.x`), a list element
    (`a.element`) and a map value (`m.value`) int → long: each an Iceberg promotion on its field id (the
    identity partition keeps its spec; old manifests hold int partition values), every version of both
    formats read back by Iceberg Java, DuckDB and pyiceberg, and filtered reads on `p` and `s.x` (pruned
    by the old files' int partition values and bounds) equal Delta's."""
    root = tmp_path / "nested widening"
    ref = delta_ref(root)
    widening = tblproperties(**{"delta.enableTypeWidening": "true"})
    spark.sql(
        f"CREATE TABLE {ref} (id INT, p INT, s STRUCT<x: INT, y: STRING>, a ARRAY<INT>, m MAP<STRING, INT>) "
        f"USING delta PARTITIONED BY (p) TBLPROPERTIES ({widening})"
    )
    spark.sql(
        f"INSERT INTO {ref} SELECT /*+ REPARTITION(1) */ CAST(id AS INT), CAST(id % 2 AS INT), "
        "named_struct('x', CAST(id AS INT), 'y', concat('y', id)), array(CAST(id AS INT), 7), "
        "map('k', CAST(id AS INT)) FROM range(0, 40) t(id)"
    )
    spark.sql(f"DELETE FROM {ref} WHERE id % 7 = 0")  # a DV in each partition
    for column in ("p", "s.x", "a.element", "m.value"):
        spark.sql(f"ALTER TABLE {ref} CHANGE COLUMN {column} TYPE BIGINT")
    spark.sql(
        f"INSERT INTO {ref} SELECT /*+ REPARTITION(1) */ CAST(id AS INT), 3000000000 + id % 2, "
        "named_struct('x', 3000000000 + id, 'y', concat('w', id)), array(3000000000 + id), "
        "map('k', 3000000000 + id) FROM range(100, 120) t(id)"
    )
    spark.sql(f"UPDATE {ref} SET s = named_struct('x', s.x + 1, 'y', s.y) WHERE id % 5 = 1")  # old and new
    spark.sql(f"DELETE FROM {ref} WHERE id % 4 = 2")
    latest = latest_version(root)
    assert latest == 9
    schema = spark.read.format("delta").load(str(root)).schema
    assert schema.simpleString() == (
        "struct<id:int,p:bigint,s:struct<x:bigint,y:string>,a:array<bigint>,m:map<string,bigint>>"
    )
    mirrors = mirror_both(spark, root, "nested_widening", split_at=[2, 4])
    compared = assert_mirrors_match(
        spark, catalog, root, mirrors, label="nested widening", pyiceberg_every_version=True
    )
    assert compared == 2 * (latest + 1)
    delta = (
        spark.read.format("delta").option("versionAsOf", latest).load(str(root)).localCheckpoint(eager=True)
    )
    for m in mirrors:
        table = catalog.pyiceberg_catalog().load_table(m.table_name)
        types = {f.name: str(f.field_type) for f in table.schema().fields}
        assert types == {
            "id": "int",
            "p": "long",
            "s": "struct<6: x: optional long, 7: y: optional string>",
            "a": "list<long>",
            "m": "map<string, long>",
        }, (m.table_name, types)
        assert [(f.source_id, str(f.transform)) for f in table.spec().fields] == [(2, "identity")]
        assert len(table.specs()) == 1
        for predicate in NESTED_FILTERS:
            want = sorted_rows(delta.where(predicate).toArrow().to_pylist())
            assert want, predicate
            for reader, rows in filtered_reads(
                spark, catalog, m.table_name, m.snapshots[latest], predicate
            ).items():
                assert rows == want, (m.table_name, predicate, reader)


def test_shredded_variant_is_refused_by_name(spark, catalog, tmp_path: Path) -> None:
    """Delta Spark 4.4 writes shredded variant files (`delta.enableVariantShredding`: the reader feature
    `variantShredding-preview`, Parquet `typed_value` groups beside `metadata`/`value`). It shreds
    `[1, 2.5, null]` as decimals: Iceberg Java reads `[1,2.5,null]` as Delta Spark does, DuckDB 1.5.5
    `[1.0,2.5,null]`. The mirror refuses the table by name at version 0, in both formats, and creates no
    Iceberg table."""
    root = tmp_path / "shredded"
    ref = delta_ref(root)
    spark.sql(
        f"CREATE TABLE {ref} (id INT, v VARIANT) USING delta "
        f"TBLPROPERTIES ({tblproperties(**{'delta.enableVariantShredding': 'true'})})"
    )
    spark.sql(
        f"INSERT INTO {ref} SELECT /*+ REPARTITION(1) */ CAST(id AS INT), "
        "parse_json(concat('{\"a\": ', id, ', \"c\": [1, 2.5, null]}')) FROM range(0, 20) t(id)"
    )
    assert reader_features_by_version(root)[0] == [
        "deletionVectors",
        "variantShredding-preview",
        "variantType",
    ]
    (data_file,) = root.glob("*.parquet")
    variant = pq.ParquetFile(data_file).schema_arrow.field("v").type
    assert [variant.field(i).name for i in range(variant.num_fields)] == ["metadata", "value", "typed_value"]
    for fmt in (3, 2):
        name = f"gen.shredded_v{fmt}"
        with pytest.raises(UnsupportedFeatureError) as raised:
            sync_table(spark, root, name, format_version=fmt)
        err = raised.value
        assert (err.table, err.version) == (str(root), 0), err.one_line()
        assert "variantShredding-preview (shredded VARIANT files are not mirrored: DuckDB 1.5.5" in err.reason
        assert "variantType (" not in err.reason, err.reason
        assert not catalog.pyiceberg_catalog().table_exists(name)
