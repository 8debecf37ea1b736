"""Which retained versions a Delta VACUUM made unreadable, from the log's tombstones (`mirror/vacuum.py`),
on logs written by hand: no JVM. Delta Spark's own VACUUM, the expiry and every reader:
tests/mirror/test_vacuum_follow.py."""

from __future__ import annotations

from pathlib import Path

from dv_assets.mirror.cli.sync import vacuum_line
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.iceberg.mirror_table import (
    DELTA_OPERATION_SUMMARY,
    DELTA_TABLE_PROPERTY,
    DELTA_VERSION_SUMMARY,
    VACUUM_CHECKED_PROPERTY,
    MirrorTable,
    Snapshot,
)
from dv_assets.mirror.iceberg.types import Schema
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.status import mirror_status
from dv_assets.mirror.vacuum import (
    VACUUM_END,
    VacuumFollowed,
    vacuum_pending,
    vacuum_to_follow,
    vacuumed_versions,
)
from testkit.synthetic import add, base_commit, dv, info, remove, write_log


class CountingIO(FileIO):
    """The real local FileIO, counting the files it is asked about."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def file_sizes(self, locations, *, listing=None):  # type: ignore[no-untyped-def]
        self.asked.extend(locations)
        return super().file_sizes(locations, listing=listing)


def vacuumed_log(root: Path) -> Path:
    """v0 a, b, e; v1 + c; v2 OPTIMIZE a → d; v3 b's DV (remove b, add b with a DV); v4 c removed; v5 c
    added back (RESTORE); v6 VACUUM START; v7 VACUUM END. On disk: every file but a (VACUUM took it)."""
    write_log(
        root,
        [
            base_commit(add("a.parquet"), add("b.parquet"), add("e.parquet")),
            [info("WRITE"), add("c.parquet")],
            [info("OPTIMIZE"), remove("a.parquet", data_change=False), add("d.parquet", data_change=False)],
            [info("DELETE"), remove("b.parquet"), add("b.parquet", dv("dv1.bin"))],
            [info("DELETE"), remove("c.parquet")],
            [info("RESTORE"), add("c.parquet")],
            [info("VACUUM START")],
            [info(VACUUM_END)],
        ],
    )
    for name in ("b", "c", "d", "e"):
        (root / f"{name}.parquet").write_bytes(b"x" * 100)
    return root


def test_the_versions_that_name_a_vacuumed_file(tmp_path: Path) -> None:
    root = vacuumed_log(tmp_path / "t")
    io = CountingIO()
    found = vacuumed_versions(DeltaTable(root), range(8), io)
    assert found.unreadable == {0: str(root / "a.parquet"), 1: str(root / "a.parquet")}
    assert found.versions == [0, 1]
    assert found.gone == (str(root / "a.parquet"),)
    # Only the tombstones were stat'ed (a, b, c), never the live files d and e.
    assert sorted(Path(p).name for p in io.asked) == ["a.parquet", "b.parquet", "c.parquet"]
    assert found.candidates == 3 and found.commits_read == (1, 7)


def test_a_file_removed_restored_and_removed_again(tmp_path: Path) -> None:
    """x live at 0, removed at 1, back at 2 (RESTORE), removed at 3, then vacuumed: 0 and 2 name it."""
    root = tmp_path / "t"
    write_log(
        root,
        [
            base_commit(add("x.parquet"), add("y.parquet")),
            [info("DELETE"), remove("x.parquet")],
            [info("RESTORE"), add("x.parquet")],
            [info("DELETE"), remove("x.parquet")],
            [info(VACUUM_END)],
        ],
    )
    (root / "y.parquet").write_bytes(b"y")
    found = vacuumed_versions(DeltaTable(root), [0, 1, 2, 3, 4], FileIO())
    assert sorted(found.unreadable) == [0, 2]
    # From a later oldest retained version, the commits before it are not read.
    later = vacuumed_versions(DeltaTable(root), [2, 3, 4], FileIO())
    assert sorted(later.unreadable) == [2] and later.commits_read == (3, 4)


def test_versions_older_than_the_log_are_answered_by_their_snapshot(tmp_path: Path) -> None:
    root = vacuumed_log(tmp_path / "t")
    for version in (0, 1):  # log cleanup
        (root / "_delta_log" / f"{version:020d}.json").unlink()
    delta = DeltaTable(root)
    unplaced = vacuumed_versions(delta, range(8), FileIO())
    # Version 1 is placed by the commits from 2 on (a removed at 2 was live at 1); 0 is not.
    assert unplaced.unreadable == {1: str(root / "a.parquet")} and unplaced.unchecked == (0,)
    snapshot_files = {0: [f"file:{root}/a.parquet", f"file:{root}/b.parquet"]}
    answered = vacuumed_versions(delta, range(8), FileIO(), files_of=snapshot_files.__getitem__)
    assert sorted(answered.unreadable) == [0, 1] and answered.unchecked == ()


def test_nothing_to_read_when_the_oldest_retained_version_is_the_latest(tmp_path: Path) -> None:
    root = vacuumed_log(tmp_path / "t")
    io = CountingIO()
    assert vacuumed_versions(DeltaTable(root), [7], io).unreadable == {}
    assert io.asked == []


def mirror_of(root: Path, versions: dict[int, str], properties: dict[str, str] | None = None) -> MirrorTable:
    snapshots = tuple(
        Snapshot(
            snapshot_id=100 + v,
            parent_id=None if i == 0 else 100 + list(versions)[i - 1],
            timestamp_ms=1000 + v,
            summary={DELTA_VERSION_SUMMARY: str(v), DELTA_OPERATION_SUMMARY: operation},
        )
        for i, (v, operation) in enumerate(versions.items())
    )
    return MirrorTable(
        name="ns.t",
        location=str(root / "mirror"),
        format_version=3,
        properties={DELTA_TABLE_PROPERTY: str(root), **(properties or {})},
        schema=Schema.from_json({"type": "struct", "schema-id": 0, "fields": []}),
        current_snapshot_id=snapshots[-1].snapshot_id,
        snapshots=snapshots,
    )


def test_status_lists_only_versions_whose_files_exist(tmp_path: Path) -> None:
    root = vacuumed_log(tmp_path / "t")
    delta = DeltaTable(root)
    operations = {0: "WRITE", 1: "WRITE", 2: "OPTIMIZE", 3: "DELETE", 4: "DELETE", 5: "RESTORE"}
    # Mirrored up to 5: the VACUUM is Delta's, not yet mirrored.
    behind = mirror_of(root, operations)
    assert vacuum_to_follow(behind) is None and vacuum_pending(delta, behind, 5, 7)
    status = mirror_status(delta, behind, "ns.t", vacuum_io=FileIO())
    assert status.readable_versions == (2, 3, 4, 5)
    assert status.unreadable_versions == {0: str(root / "a.parquet"), 1: str(root / "a.parquet")}
    # Without vacuum_io (the sensors), nothing is stat'ed: the retained snapshots as they are.
    assert mirror_status(delta, behind, "ns.t").readable_versions == (0, 1, 2, 3, 4, 5)
    # Mirrored through the VACUUM END, not yet followed (a crash before the expiry): still found.
    through = mirror_of(root, operations | {6: "VACUUM START", 7: VACUUM_END})
    assert vacuum_to_follow(through) == 7
    assert mirror_status(delta, through, "ns.t", vacuum_io=FileIO()).readable_versions == (2, 3, 4, 5, 6, 7)
    # Followed: the sync expired 0 and 1 and marked it; nothing is read again.
    followed = mirror_of(
        root,
        {v: o for v, o in (operations | {6: "VACUUM START", 7: VACUUM_END}).items() if v >= 2},
        {VACUUM_CHECKED_PROPERTY: "7"},
    )
    assert not vacuum_pending(delta, followed, 7, 7)
    io = CountingIO()
    assert mirror_status(delta, followed, "ns.t", vacuum_io=io).readable_versions == (2, 3, 4, 5, 6, 7)
    assert io.asked == []


def test_the_sync_line_says_what_was_expired() -> None:
    followed = VacuumFollowed(
        vacuum_version=8,
        commits_read=(1, 8),
        candidates=12,
        gone=[f"/t/f{i}.parquet" for i in range(12)],
        expired_versions=[1, 2, 3, 4],
        expired_snapshot_ids=[11, 12, 13, 14],
        deleted_files=["/w/data/dvmirror-a.puffin", "/w/metadata/m.avro"],
        seconds=0.4,
    )
    assert vacuum_line(followed) == (
        "followed Delta's VACUUM (version 8): 12 of 12 removed data files gone; expired the snapshots of "
        "Delta versions 1..4 (a data file they name is gone), 2 mirror files reclaimed"
    )
