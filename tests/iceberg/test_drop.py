"""`iceberg/drop.py` without a JVM: what a drop plans, in which order it deletes, how a drop that stopped
half-way is finished by a rerun, and what it refuses. The tables are written by pyiceberg (its appends
carry the mirror's properties and summaries where a test says so); the end-to-end command, on real
mirrors made by Iceberg Java, is tests/cli/test_drop.py."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from dv_assets.mirror.errors import MirrorConflictError, MirrorInputError
from dv_assets.mirror.iceberg.drop import (
    CHECKPOINT_INDEX_FILES,
    DELETE_FILES,
    MANIFEST_LISTS,
    MANIFESTS,
    METADATA_FILES,
    ORPHAN_DELETE_FILES,
    DropPlan,
    check_catalog_drops_no_file,
    execute_drop,
    plan_drop,
)
from dv_assets.mirror.iceberg.layout import MirrorLayout
from dv_assets.mirror.iceberg.mirror_table import DELTA_TABLE_PROPERTY, DELTA_VERSION_SUMMARY
from dv_assets.mirror.iceberg.pyiceberg_reader import table_metadata
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.settings import CatalogConfig

TABLE = "ops.fake"


def local(location: str) -> Path:
    return Path(location.removeprefix("file:"))


def files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def fake_mirror(tmp_path: Path) -> tuple[CatalogConfig, Path, Path]:
    """A table with the mirror's property and three snapshots carrying Delta versions (pyiceberg's
    appends: their data files are under the table's `data/`, which a drop must leave alone), an orphan
    mirror-owned delete file, a checkpoint index and a file of someone else's in the mirror's folders;
    the catalog, the table's folder, the Delta folder its property names."""
    catalog = CatalogConfig.under(tmp_path / "iceberg")
    delta = tmp_path / "delta"
    delta.mkdir()
    py = catalog.pyiceberg_catalog()
    py.create_namespace("ops")
    table = py.create_table(
        TABLE, schema=pa.schema([("id", pa.int64())]), properties={DELTA_TABLE_PROPERTY: str(delta)}
    )
    for version in range(3):
        table.append(pa.table({"id": [version]}), snapshot_properties={DELTA_VERSION_SUMMARY: str(version)})
    layout = MirrorLayout(table.location())
    orphan = local(layout.delete_dir) / "dvmirror-v00000000000000000002-crashed.puffin"
    orphan.write_bytes(b"PFA1")
    index = local(layout.checkpoint_index_dir) / "dvmirror-checkpoint-00000000000000000010-abc"
    index.mkdir(parents=True)
    (index / "manifest.json").write_text("{}")
    (index / "adds.parquet").write_bytes(b"PAR1")
    (index / "notes.txt").write_text("not the index's")  # in the index's folder, not an index file
    (local(layout.delete_dir) / "someone-elses.parquet").write_bytes(b"x")
    return catalog, local(table.location()), delta


def plan_of(catalog: CatalogConfig, table: str = TABLE) -> DropPlan:
    found = table_metadata(catalog, table)
    assert found is not None
    location, metadata, avro_io = found
    return plan_drop(table, location, metadata, avro_io=avro_io, io=FileIO())


def drop(catalog: CatalogConfig, plan: DropPlan, io: FileIO | None = None):
    def current() -> str | None:
        found = table_metadata(catalog, TABLE)
        return None if found is None else found[0]

    def unregister() -> bool:
        catalog.pyiceberg_catalog().drop_table(TABLE)  # pyiceberg's drop: the entry only, no purge
        return True

    return execute_drop(plan, io or FileIO(), current_metadata=current, unregister=unregister)


def test_the_plan_names_only_the_mirrors_files_in_the_order_they_go(fake_mirror) -> None:
    catalog, folder, _ = fake_mirror
    plan = plan_of(catalog)
    assert plan.delta_versions == [0, 1, 2] and len(plan.snapshot_ids) == 3
    kinds = [f.kind for f in plan.files]
    order = [ORPHAN_DELETE_FILES, CHECKPOINT_INDEX_FILES, MANIFESTS, MANIFEST_LISTS, METADATA_FILES]
    assert [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k] == order
    assert plan.of_kind(DELETE_FILES) == []  # pyiceberg wrote no delete file
    assert [local(f).name for f in plan.of_kind(ORPHAN_DELETE_FILES)] == [
        "dvmirror-v00000000000000000002-crashed.puffin"
    ]
    assert [local(f).name for f in plan.of_kind(CHECKPOINT_INDEX_FILES)] == ["manifest.json", "adds.parquet"]
    assert len(plan.of_kind(MANIFEST_LISTS)) == 3
    assert plan.files[-1].location == plan.metadata_location  # the current metadata file goes last
    assert len(plan.of_kind(METADATA_FILES)) == 4  # created, then three appends
    # Left in place: pyiceberg's data files, someone else's file, the note in the index's folder.
    left = {local(f).name for f in plan.left_in_place or []}
    assert "someone-elses.parquet" in left and "notes.txt" in left
    assert sum(name.endswith(".parquet") and name != "someone-elses.parquet" for name in left) == 3
    assert {local(f.location) for f in plan.files} | {local(f) for f in plan.left_in_place or []} == (
        files_under(folder)
    )


def test_a_drop_deletes_the_plan_and_the_catalog_entry_only(fake_mirror) -> None:
    catalog, folder, _ = fake_mirror
    plan = plan_of(catalog)
    outcome = drop(catalog, plan)
    assert outcome.unregistered and outcome.missing_files == []
    assert [f.location for f in outcome.deleted] == [f.location for f in plan.files]
    assert table_metadata(catalog, TABLE) is None
    assert files_under(folder) == {local(f) for f in plan.left_in_place or []}
    # The index's own folder stays (a file of someone else's is in it); the empty metadata folder goes.
    assert not (folder / "metadata").exists() and (folder / "dvmirror-delta-index").is_dir()


class CrashingIO(FileIO):
    """Deletes `allowed` files, then fails as a crash would."""

    def __init__(self, allowed: int) -> None:
        super().__init__()
        self.allowed = allowed

    def delete(self, location: str) -> None:
        if self.allowed == 0:
            raise RuntimeError("crash")
        self.allowed -= 1
        super().delete(location)


@pytest.mark.parametrize("crash_after", [1, 3, 6, 8])
def test_a_drop_stopped_half_way_is_finished_by_a_rerun(fake_mirror, crash_after: int) -> None:
    catalog, folder, _ = fake_mirror
    first = plan_of(catalog)
    with pytest.raises(RuntimeError):
        drop(catalog, first, CrashingIO(crash_after))
    assert table_metadata(catalog, TABLE) is not None  # the catalog entry is the last thing to go
    again = plan_of(catalog)  # the same table, read again: what is left of it
    assert {f.location for f in again.files} <= {f.location for f in first.files}
    assert len(again.files) + len(again.missing_files) >= len(first.files) - crash_after
    outcome = drop(catalog, again)
    assert outcome.unregistered and table_metadata(catalog, TABLE) is None
    assert files_under(folder) == {local(f) for f in first.left_in_place or []}


def test_a_commit_during_the_drop_keeps_the_catalog_entry(fake_mirror) -> None:
    catalog, _, _ = fake_mirror
    plan = plan_of(catalog)
    unregistered = []
    with pytest.raises(MirrorConflictError, match="another writer committed"):
        execute_drop(
            plan,
            FileIO(),
            current_metadata=lambda: plan.metadata_location + ".other",
            unregister=lambda: unregistered.append(True) or True,
        )
    assert unregistered == [] and local(plan.metadata_location).exists()


def test_a_table_the_mirror_did_not_write_is_refused(tmp_path: Path) -> None:
    catalog = CatalogConfig.under(tmp_path / "iceberg")
    py = catalog.pyiceberg_catalog()
    py.create_namespace("ops")
    plain = py.create_table("ops.plain", schema=pa.schema([("id", pa.int64())]))
    plain.append(pa.table({"id": [1]}))
    before = files_under(local(plain.location()))
    with pytest.raises(MirrorInputError, match=r"table ops.plain: not a dv-mirror mirror"):
        plan_of(catalog, "ops.plain")
    assert files_under(local(plain.location())) == before


def test_a_snapshot_of_another_writer_is_refused(fake_mirror) -> None:
    catalog, folder, _ = fake_mirror
    catalog.pyiceberg_catalog().load_table(TABLE).append(pa.table({"id": [9]}))  # no Delta version
    before = files_under(folder)
    with pytest.raises(MirrorInputError, match=r"snapshot \d+ \(append\) was not committed by dv-mirror"):
        plan_of(catalog)
    assert files_under(folder) == before


def test_a_table_inside_its_delta_folder_is_refused(tmp_path: Path) -> None:
    catalog = CatalogConfig.under(tmp_path / "iceberg")
    py = catalog.pyiceberg_catalog()
    py.create_namespace("ops")
    # The property names a folder that holds the table's own location.
    py.create_table(
        TABLE, schema=pa.schema([("id", pa.int64())]), properties={DELTA_TABLE_PROPERTY: str(tmp_path)}
    )
    with pytest.raises(MirrorInputError, match="overlaps its Delta table"):
        plan_of(catalog)


@pytest.mark.parametrize(
    ("kind", "reason"),
    [("hadoop", "deletes the table's whole folder"), ("com.example.Catalog", "does not know whether")],
)
def test_catalogs_whose_drop_may_delete_files_are_refused(kind: str, reason: str) -> None:
    with pytest.raises(MirrorInputError, match=reason):
        check_catalog_drops_no_file(kind, TABLE)
    for kind in ("jdbc", "rest", "hive", "glue", "nessie"):
        check_catalog_drops_no_file(kind, TABLE)


def test_hadoops_checksum_files_go_just_before_their_file(fake_mirror) -> None:
    catalog, folder, _ = fake_mirror
    plan = plan_of(catalog)
    manifest, current = local(plan.of_kind(MANIFESTS)[0]), local(plan.metadata_location)
    for written in (manifest, current):
        (written.parent / f".{written.name}.crc").write_bytes(b"crc")
    stray = folder / "metadata" / ".gone.avro.crc"  # beside no file that goes: not the drop's to delete
    stray.write_bytes(b"crc")
    plan = plan_of(catalog)
    going = [local(f.location) for f in plan.files]
    for written in (manifest, current):
        checksum = written.parent / f".{written.name}.crc"
        assert going.index(checksum) == going.index(written) - 1
    assert [f.last for f in plan.files[-2:]] == [True, True] and not any(f.last for f in plan.files[:-2])
    assert stray in {local(f) for f in plan.left_in_place or []}
    drop(catalog, plan)
    assert stray.exists() and not any(p.name.endswith(".crc") and p != stray for p in files_under(folder))
