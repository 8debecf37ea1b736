"""Maintenance touches only mirrors: a table the mirror did not write, named by mistake (in a cleanup
job's sources or to the engine), is refused by the engine itself, its snapshots and files left as they
were, whether the plan is read with pyiceberg or made by Iceberg Java."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.iceberg.maintenance import Retention, expire_and_reclaim, plan_without_jvm
from dv_assets.mirror.settings import CatalogConfig

pytestmark = pytest.mark.spark


def _files_under(location: str) -> dict[str, int]:
    root = Path(location.removeprefix("file:"))
    return {str(p): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def test_a_table_the_mirror_did_not_write_is_neither_expired_nor_reclaimed(
    spark, catalog: CatalogConfig
) -> None:
    catalog.pyiceberg_catalog().create_namespace_if_not_exists("foreign")
    plain = catalog.pyiceberg_catalog().create_table("foreign.plain", schema=pa.schema([("id", pa.int64())]))
    for batch in ([1, 2], [3], [4, 5]):
        plain.append(pa.table({"id": batch}))
    plain = catalog.pyiceberg_catalog().load_table("foreign.plain")
    snapshots = [s.snapshot_id for s in plain.snapshots()]
    files = _files_under(plain.location())
    assert len(snapshots) == 3 and any(name.endswith(".avro") for name in files)
    retention = Retention(retain_last=1, orphan_min_age_hours=1)

    with pytest.raises(MirrorInputError, match=r"foreign\.plain is not a dv-mirror mirror"):
        plan_without_jvm(catalog, "foreign.plain", retention)
    for dry_run in (True, False):
        with pytest.raises(MirrorInputError, match="nothing expired or deleted"):
            expire_and_reclaim(IcebergJava(spark), "foreign.plain", retention, dry_run=dry_run)

    after = catalog.pyiceberg_catalog().load_table("foreign.plain")
    assert [s.snapshot_id for s in after.snapshots()] == snapshots
    assert _files_under(after.location()) == files
    assert after.scan().to_arrow().num_rows == 5
