"""Reading the mirror back with readers dv-mirror did not write: Iceberg Java (Spark), pyiceberg, DuckDB
(its iceberg extension, on the metadata file alone), and Delta Spark and delta-rs for the source side.
Every reader's rows go through Arrow and `tests.helpers.rows`."""

from __future__ import annotations

import functools
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

import datafusion
import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.expressions import BooleanExpression
from pyiceberg_core.datafusion import IcebergDataFusionTable
from pyspark.sql import SparkSession

from dv_assets.demo.duckdb_read import offline_duckdb, read_snapshot
from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.iceberg.mirror_table import DELTA_VERSION_SUMMARY
from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.settings import ICEBERG_CATALOG_NAME, CatalogConfig
from tests.helpers.paths import expected_rows
from tests.helpers.processes import spark_job
from tests.helpers.rows import sorted_rows

# Delta Spark may write timestamps as Parquet INT96 (nanoseconds). Iceberg Java reads those as
# timestamptz; pyiceberg does so for v3 tables only with this switch (it is on by default for v2).
PYICEBERG_INT96_SWITCH = "PYICEBERG_DOWNCAST_NS_TIMESTAMP_TO_US_ON_WRITE"


def let_pyiceberg_read_int96() -> None:
    """Turn the switch on in this process (and its children) unless the environment says otherwise;
    pyiceberg reads it on each scan. The `pyiceberg_int96` fixture (tests/conftest.py) does it for the
    whole session, `pyiceberg_rows` for a process of its own."""
    os.environ.setdefault(PYICEBERG_INT96_SWITCH, "true")


# --- the Iceberg side -----------------------------------------------------------------------------------


def snapshots_by_delta_version(catalog: CatalogConfig, table_name: str) -> dict[int, int]:
    """Delta version → Iceberg snapshot id, from the snapshot summaries, as pyiceberg sees them
    (snapshots other writers added, such as rewrite_manifests's, carry no Delta version)."""
    table = read_mirror_table(catalog, table_name)  # not pyiceberg's parser: a variant column fails it
    assert table is not None, table_name
    found: dict[int, int] = {}
    for snapshot in table.snapshots:
        value = snapshot.summary.get(DELTA_VERSION_SUMMARY)
        if value is None:
            continue
        version = int(value)
        assert version not in found, f"two snapshots for Delta version {version}"
        found[version] = snapshot.snapshot_id
    return found


def iceberg_java_rows(spark: SparkSession, table_name: str, snapshot_id: int) -> list[dict]:
    df = spark.read.option("versionAsOf", snapshot_id).table(f"{ICEBERG_CATALOG_NAME}.{table_name}")
    return sorted_rows(df.toArrow().to_pylist())


def pyiceberg_rows(catalog: CatalogConfig, table_name: str, snapshot_id: int) -> list[dict]:
    """pyiceberg's rows of a snapshot, as dicts, canonical and sorted."""
    let_pyiceberg_read_int96()
    table = catalog.pyiceberg_catalog().load_table(table_name)
    return sorted_rows(table.scan(snapshot_id=snapshot_id).to_arrow().to_pylist())


# One connection for the session: loading the two extensions takes a fifth of a second, a read milliseconds.
shared_duckdb = functools.cache(offline_duckdb)


def duckdb_rows(
    metadata_location: str, snapshot_id: int, *, variants_as_json: Sequence[str] = ()
) -> list[dict]:
    """DuckDB's rows of a snapshot, read from the table's metadata file (no catalog), canonical and sorted.

    DuckDB 1.5.5 has no Arrow form of its VARIANT: the top-level columns `variants_as_json` are read as
    DuckDB's JSON text of the value (`CAST(v AS JSON)`), in `variant_json`'s one form (NULL stays NULL)."""
    if not variants_as_json:
        return sorted_rows(read_snapshot(shared_duckdb(), metadata_location, snapshot_id).to_pylist())
    from tests.helpers.delta_histories import variant_json

    # DuckDB casts a SQL NULL variant to the JSON text 'null': kept NULL (DuckDB's VARIANT has a single
    # null, a variant null IS NULL too: `delta_histories._variant_nulls_as_null`).
    replaced = ", ".join(
        f'CASE WHEN "{c}" IS NULL THEN NULL ELSE CAST("{c}" AS JSON) END AS "{c}"' for c in variants_as_json
    )
    rows = (
        shared_duckdb()
        .execute(
            f"SELECT * REPLACE ({replaced}) FROM iceberg_scan(?, snapshot_from_id := ?)",
            [metadata_location, snapshot_id],
        )
        .to_arrow_table()
        .to_pylist()
    )
    return sorted_rows(
        {c: variant_json(value) if c in variants_as_json else value for c, value in row.items()}
        for row in rows
    )


def filtered_reads(
    spark: SparkSession,
    catalog: CatalogConfig,
    table_name: str,
    snapshot_id: int,
    predicate: str,
    *,
    duckdb_predicate: str | None = None,
    pyiceberg_filter: str | BooleanExpression | None = None,
    with_pyiceberg: bool = True,
) -> dict[str, list[dict]]:
    """Each Iceberg reader's rows of a snapshot that match `predicate` (text that Spark SQL, DuckDB and
    pyiceberg's row filter all parse, e.g. `f > 1.1`), canonical and sorted. The filter goes to each
    reader's own scan, so the manifests' column bounds decide which data files it reads at all.

    Where the readers' literal syntax differs (a binary or timestamp literal, NaN), `duckdb_predicate`
    and `pyiceberg_filter` (text, or a pyiceberg expression where its parser has no syntax for the
    literal) say the same predicate to DuckDB and pyiceberg; `with_pyiceberg=False` leaves pyiceberg out."""
    table = catalog.pyiceberg_catalog().load_table(table_name)
    full_name = f"{ICEBERG_CATALOG_NAME}.{table_name}"
    java = spark.read.option("versionAsOf", snapshot_id).table(full_name).where(predicate)
    duckdb = shared_duckdb().execute(
        f"SELECT * FROM iceberg_scan(?, snapshot_from_id := ?) WHERE {duckdb_predicate or predicate}",
        [table.metadata_location, snapshot_id],
    )
    let_pyiceberg_read_int96()
    reads = {
        "Iceberg Java": sorted_rows(java.toArrow().to_pylist()),
        "DuckDB": sorted_rows(duckdb.to_arrow_table().to_pylist()),
    }
    if with_pyiceberg:
        row_filter = predicate if pyiceberg_filter is None else pyiceberg_filter
        scan = table.scan(row_filter=row_filter, snapshot_id=snapshot_id)
        reads["pyiceberg"] = sorted_rows(scan.to_arrow().to_pylist())
    return reads


def duckdb_column_types(metadata_location: str, snapshot_id: int) -> dict[str, str]:
    """Column → the SQL type DuckDB reads it as, in a snapshot's schema."""
    described = shared_duckdb().execute(
        "DESCRIBE SELECT * FROM iceberg_scan(?, snapshot_from_id := ?)", [metadata_location, snapshot_id]
    )
    return {name: type_ for name, type_, *_ in described.fetchall()}


def pyiceberg_columns(catalog: CatalogConfig, table_name: str, snapshot_id: int) -> list[str]:
    """The top-level columns pyiceberg reads a snapshot with (its schema's), in schema order."""
    table = catalog.pyiceberg_catalog().load_table(table_name)
    return [f.name for f in table.scan(snapshot_id=snapshot_id).projection().fields]


def pyiceberg_state(catalog: CatalogConfig, table_name: str) -> tuple[int | None, str | None, int]:
    """(current snapshot id, its Delta version, number of snapshots), as pyiceberg sees the table."""
    table = catalog.pyiceberg_catalog().load_table(table_name)
    snapshot = table.current_snapshot()
    if snapshot is None:
        return None, None, 0
    version = (
        snapshot.summary.additional_properties.get("dvmirror.delta-version") if snapshot.summary else None
    )
    return snapshot.snapshot_id, version, len(table.snapshots())


def iceberg_rust_rows(catalog: CatalogConfig, table_name: str, snapshot_id: int | None = None) -> list[dict]:
    """iceberg-rust's rows of a snapshot of the mirror (the current one by default), as dicts, canonical
    and sorted: pyiceberg-core's DataFusion table provider over the table's metadata file, queried by a
    DataFusion session. The provider reads a metadata file's current snapshot only; for another one it
    reads a copy of the metadata file, written outside the table, whose current snapshot (and schema) is
    that one."""
    metadata_location = catalog.pyiceberg_catalog().load_table(table_name).metadata_location
    with tempfile.TemporaryDirectory(prefix="iceberg-rust-") as folder:
        if snapshot_id is not None:
            metadata = json.loads(FileIO(catalog.storage_properties()).read(metadata_location))
            (snapshot,) = [s for s in metadata["snapshots"] if s["snapshot-id"] == snapshot_id]
            metadata["current-snapshot-id"] = snapshot_id
            metadata["current-schema-id"] = snapshot.get("schema-id", metadata["current-schema-id"])
            metadata["refs"] = {"main": {"snapshot-id": snapshot_id, "type": "branch"}}
            copy = Path(folder) / "snapshot.metadata.json"
            copy.write_text(json.dumps(metadata))
            metadata_location = f"file:{copy}"
        provider = IcebergDataFusionTable(
            table_name.split("."), metadata_location, catalog.storage_properties()
        )
        context = datafusion.SessionContext()
        context.register_table("mirror", provider)
        return sorted_rows(context.sql("SELECT * FROM mirror").to_arrow_table().to_pylist())


def int96_columns(table_root: Path) -> set[str]:
    """The top-level columns a Delta table's data files store as Parquet INT96 (Delta Spark's default for
    timestamps). iceberg-rust (pyiceberg-core 0.11) reads them as NULL in a `timestamptz` column: it reads
    INT96 as a timestamp without zone, which its projection does not accept for `timestamptz`."""
    return {
        column.name
        for data_file in table_root.rglob("*.parquet")
        for column in pq.ParquetFile(data_file).schema
        if column.physical_type == "INT96"
    }


def current_snapshot_id(spark: SparkSession, table_name: str) -> int | None:
    """The mirror's current snapshot, as Iceberg Java sees it."""
    table = IcebergJava(spark).load(table_name)
    assert table is not None
    return table.current_snapshot_id


def first_column_values(spark: SparkSession, table_name: str) -> list:
    """The first column of the table's current rows (Iceberg Java), sorted."""
    return sorted(r[0] for r in spark.table(f"{ICEBERG_CATALOG_NAME}.{table_name}").collect())


def warehouse_data_files(catalog: CatalogConfig, table_name: str) -> set[str]:
    """Every file and folder under the table's `data/` folder in a local warehouse."""
    data = catalog.local_warehouse.joinpath(*table_name.split(".")) / "data"
    return {str(p) for p in data.rglob("*")} if data.exists() else set()


def assert_mirror_exact(
    spark: SparkSession,
    catalog: CatalogConfig,
    name: str,
    fixture: str,
    versions: Sequence[int] | None = None,
) -> None:
    """Every mirrored version equals the fixture's expected rows, through Iceberg Java and pyiceberg
    (and, when `versions` is given, exactly those Delta versions are mirrored)."""
    snapshots = snapshots_by_delta_version(catalog, name)
    if versions is not None:
        assert sorted(snapshots) == list(versions), sorted(snapshots)
    for version, snapshot_id in snapshots.items():
        expected = sorted_rows(expected_rows(fixture, version))
        assert iceberg_java_rows(spark, name, snapshot_id) == expected, (name, version)
        assert pyiceberg_rows(catalog, name, snapshot_id) == expected, (name, version)


def pyiceberg_versions(catalog: CatalogConfig, table: str) -> dict[int, list[dict]]:
    """pyiceberg's rows of every mirrored Delta version."""
    return {
        v: pyiceberg_rows(catalog, table, sid)
        for v, sid in snapshots_by_delta_version(catalog, table).items()
    }


def assert_readers_exact(
    properties: Mapping[str, str], table: str, expected: Mapping[int, list[dict]]
) -> None:
    """Iceberg Java (a Spark job in a process of its own) and pyiceberg, each with the catalog
    `properties`, return exactly `expected` at every version."""
    java = spark_job("read-iceberg", table, properties)
    python = pyiceberg_versions(CatalogConfig(properties), table)
    assert sorted(java) == sorted(python) == sorted(expected)
    for version, rows in expected.items():
        assert java[version] == rows, f"Iceberg Java differs from Delta at version {version}"
        assert python[version] == rows, f"pyiceberg differs from Delta at version {version}"


# --- the Delta side -------------------------------------------------------------------------------------


def delta_spark_rows(spark: SparkSession, delta_path: str, version: int) -> list[dict]:
    df = spark.read.format("delta").option("versionAsOf", version).load(str(delta_path))
    return sorted_rows(df.toArrow().to_pylist())


def spark_live_rows_per_file(spark: SparkSession, root: Path, version: int) -> dict[str, int]:
    """Data file → rows Delta Spark reads from it at `version` (files with no live row are absent)."""
    from pyspark.sql.functions import input_file_name

    df = spark.read.format("delta").option("versionAsOf", version).load(str(root))
    counted = df.groupBy(input_file_name().alias("f")).count().collect()
    return {
        unquote(urlsplit(r["f"]).path) if r["f"].startswith("file:") else r["f"]: r["count"] for r in counted
    }


def local_path_of(uri: str) -> str:
    return unquote(urlsplit(uri).path) if uri.startswith("file:") else uri


def delta_rs_files(root: Path | str, version: int) -> set[str]:
    return set(deltalake.DeltaTable(str(root), version=version).file_uris())


def delta_rs_deleted_rows(root: Path | str, version: int) -> dict[str, int]:
    """Deleted-row count per data file that has a DV, as delta-rs materializes the DVs."""
    table = pa.table(deltalake.DeltaTable(str(root), version=version).deletion_vectors())
    return {local_path_of(row["filepath"]): row["selection_vector"].count(False) for row in table.to_pylist()}


def delta_rs_view(root: Path, version: int) -> tuple[set[str], dict[str, int]]:
    """delta-rs's data files at `version` (plain paths under `root`) and deleted rows per file with a DV."""
    table = deltalake.DeltaTable(str(root), version=version)
    dvs = pa.table(table.deletion_vectors()).to_pylist()
    deleted = {unquote(urlsplit(r["filepath"]).path): r["selection_vector"].count(False) for r in dvs}
    # delta-rs URL-encodes the table root (only) in file_uris(); undo that for the comparison.
    encoded_root = quote(str(root))
    files = {
        str(root) + uri[len(encoded_root) :] if uri.startswith(encoded_root) else uri
        for uri in table.file_uris()
    }
    return files, deleted
