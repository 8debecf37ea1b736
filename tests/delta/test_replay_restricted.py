"""The O(change) path against the full replay, without Spark: `DeltaTable.changes` after a checkpoint reads
only the checkpoint rows and commits the change can need (`_restricted_replay`), through the mirror's index
of the checkpoint when it has a usable one (`checkpoint_index.py`), and a sync run lists `_delta_log` once,
from the mirrored version's checkpoint on (`listed_once`). Every version's change, and every refusal, must
be the full replay's."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from dv_assets.mirror.delta import checkpoint_index
from dv_assets.mirror.delta import replay as delta_replay
from dv_assets.mirror.delta.actions import AddFile
from dv_assets.mirror.delta.checkpoint_index import CheckpointIndexes
from dv_assets.mirror.delta.log import DeltaLog
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.io import FileIO
from tests.helpers.delta_log import (
    add,
    base_commit,
    changes_outcome,
    dv,
    info,
    random_log,
    remove,
    write_checkpoint,
    write_log,
)
from tests.helpers.paths import DELTA_FIXTURES, fixture_tables


@pytest.fixture
def full_replays(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The start versions the restricted table handed to the full replay (a spy: the replay still runs)."""
    calls: list[int] = []
    full = DeltaTable._full_replay_changes

    def recorded(self: DeltaTable, listing, start: int, end: int, oldest: int, *, whole_first: bool = False):
        if self.restricted_replay:
            calls.append(start)
        return full(self, listing, start, end, oldest, whole_first=whole_first)

    monkeypatch.setattr(DeltaTable, "_full_replay_changes", recorded)
    return calls


@pytest.fixture
def index_reads(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each read of a checkpoint's index: whether it answered (a spy: the read still runs)."""
    reads: list[bool] = []
    read = CheckpointIndexes.read

    def recorded(self: CheckpointIndexes, index, candidates):
        actions = read(self, index, candidates)
        reads.append(actions is not None)
        return actions

    monkeypatch.setattr(CheckpointIndexes, "read", recorded)
    return reads


def index_every_checkpoint(root: Path, folder: Path) -> tuple[CheckpointIndexes, int]:
    """An index of each complete checkpoint of the log in `folder`; the number built (a checkpoint whose
    always-read adds already make the replay refuse, or an invalid log, has none)."""
    indexes = CheckpointIndexes(str(folder))
    log = DeltaLog(str(root))
    try:
        listing = log.list()
    except MirrorInputError:
        return indexes, 0
    built = 0
    for candidates in listing.checkpoints.values():
        built += indexes.build(log, candidates[0], listing.infos) is not None
    return indexes, built


def assert_same_changes(root: Path, full_replays: list[int], indexes: CheckpointIndexes | None = None) -> int:
    """For every start and several ends, the restricted changes (through `indexes` when given) are the
    full replay's; the number of ranges the restricted replay answered (it must answer every one after a
    checkpoint)."""
    full = DeltaTable(root, restricted_replay=False)
    restricted = DeltaTable(root, checkpoint_indexes=indexes)
    try:
        latest = full.latest_version()
    except MirrorInputError:
        return 0
    answered = 0
    for start in range(1, latest + 1):
        for end in sorted({start, min(start + 2, latest), latest}):
            before = len(full_replays)
            expected = changes_outcome(full, start, end)
            assert changes_outcome(restricted, start, end) == expected, f"{root.name}: [{start}, {end}]"
            answered += len(full_replays) == before
    return answered


def has_checkpoint_before_latest(root: Path) -> bool:
    """Whether some range [start, end] starts after a checkpoint (the restricted replay's ranges)."""
    versions = [int(p.name[:20]) for p in (root / "_delta_log").iterdir() if p.name[:20].isdigit()]
    return any(
        p.name[21:].startswith("checkpoint") and int(p.name[:20]) < max(versions)
        for p in (root / "_delta_log").iterdir()
    )


@pytest.mark.parametrize("table", fixture_tables())
def test_conformance_fixtures(table: str, full_replays: list[int]) -> None:
    root = DELTA_FIXTURES / table
    answered = assert_same_changes(root, full_replays)
    assert (answered > 0) == has_checkpoint_before_latest(root)


@pytest.mark.parametrize("table", fixture_tables())
def test_conformance_fixtures_through_the_index(
    tmp_path: Path, table: str, full_replays: list[int], index_reads: list[bool]
) -> None:
    """Delta Spark's own checkpoints, indexed: every restricted range is answered through the index."""
    root = DELTA_FIXTURES / table
    indexes, built = index_every_checkpoint(root, tmp_path / "index")
    answered = assert_same_changes(root, full_replays, indexes)
    assert (answered > 0) == has_checkpoint_before_latest(root) == (built > 0)
    assert len(index_reads) >= answered and all(index_reads)


@pytest.mark.parametrize("seed", range(12))
def test_random_valid_histories(tmp_path: Path, seed: int, full_replays: list[int]) -> None:
    random_log(tmp_path, seed)
    assert assert_same_changes(tmp_path, full_replays) > 0 or not has_checkpoint_before_latest(tmp_path)


@pytest.mark.parametrize("seed", range(16))
def test_random_invalid_histories(tmp_path: Path, seed: int, full_replays: list[int]) -> None:
    random_log(tmp_path, seed, invalid=True)
    assert_same_changes(tmp_path, full_replays)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12, 212))
def test_random_histories_long(tmp_path: Path, seed: int, full_replays: list[int]) -> None:
    random_log(tmp_path, seed, commits=30, invalid=seed % 2 == 1)
    assert_same_changes(tmp_path, full_replays)


@pytest.mark.parametrize("invalid", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_random_histories_through_the_index(
    tmp_path: Path,
    seed: int,
    invalid: bool,
    full_replays: list[int],
    index_reads: list[bool],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Classic, multi-part and V2 (sidecar) checkpoints of random histories, valid and not (a file listed
    twice, conflicting spellings, a gap), indexed in buckets of 2 rows (so that a lookup reads some
    buckets, not all): the same changes and refusals as the full replay, the index read where it exists."""
    monkeypatch.setattr(checkpoint_index, "BUCKET_ROWS", 2)
    monkeypatch.setattr(checkpoint_index, "BLOCK_ROWS", 3)  # copied into index order a few rows at a time
    root = tmp_path / "table"
    random_log(root, seed, invalid=invalid)
    indexes, built = index_every_checkpoint(root, tmp_path / "index")
    answered = assert_same_changes(root, full_replays, indexes)
    assert all(index_reads)
    if not invalid:
        assert (built > 0) == has_checkpoint_before_latest(root)
        assert len(index_reads) >= answered


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12, 112))
def test_random_histories_through_the_index_long(
    tmp_path: Path, seed: int, full_replays: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoint_index, "BUCKET_ROWS", 1 + seed % 3)
    root = tmp_path / "table"
    random_log(root, seed, commits=30, invalid=seed % 2 == 1)
    indexes, _built = index_every_checkpoint(root, tmp_path / "index")
    assert_same_changes(root, full_replays, indexes)


def test_only_candidate_checkpoint_rows_become_python_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1,000 files in the checkpoint, one DELETE after it: of the checkpoint's adds only the files that
    share a base name with a file the commit touches are parsed (and the escaped ones, which may)."""
    files = [add(f"part-{i}.parquet") for i in range(1000)] + [
        add("p=1/part-7.parquet"),
        add("a%2Db.parquet"),
    ]
    root = write_log(tmp_path, [base_commit(*files)])
    write_checkpoint(root, 0, "classic", random.Random(0))
    write_log(root, [[info("DELETE"), remove("part-7.parquet"), add("part-7.parquet", dv("d", 2))]], first=1)
    parsed: list[str] = []
    from_action = AddFile.from_action.__func__  # type: ignore[attr-defined]

    def counted(cls, raw, table_root, **kwargs):
        parsed.append(raw["path"])
        return from_action(cls, raw, table_root, **kwargs)

    monkeypatch.setattr(AddFile, "from_action", classmethod(counted))
    (change,) = DeltaTable(root).changes(1, 1)
    assert sorted(parsed) == ["a%2Db.parquet", "p=1/part-7.parquet", "part-7.parquet", "part-7.parquet"]
    assert [(b.dv_unique_id, a.dv_unique_id) for b, a in change.dv_changed] == [(None, "ud@1")]


def test_duplicate_checkpoint_entry_of_a_touched_file_is_refused(tmp_path: Path) -> None:
    root = write_log(tmp_path, [base_commit(add("a-b.parquet"), add("c.parquet"))])
    write_checkpoint(root, 0, "classic", random.Random(0), twice=True)
    write_log(root, [[info("DELETE"), remove("a-b.parquet"), remove("c.parquet")]], first=1)
    expected = changes_outcome(DeltaTable(root, restricted_replay=False), 1, 1)
    assert expected[1] is not None and "lists the data file twice" in expected[1][1]
    assert changes_outcome(DeltaTable(root), 1, 1) == expected


def test_duplicate_checkpoint_entry_of_an_untouched_file_is_refused_through_the_index(
    tmp_path: Path, index_reads: list[bool]
) -> None:
    """`x.parquet` listed twice (as written and by its absolute path), the commit touches `c.parquet`
    only: the index's repeated base names make the replay read `x.parquet`'s bucket too, and refuse."""
    root = write_log(tmp_path / "table", [base_commit(add("x.parquet"), add("c.parquet"))])
    write_checkpoint(root, 0, "classic", random.Random(0), twice=True)
    write_log(root, [[info("DELETE"), remove("c.parquet")]], first=1)
    expected = changes_outcome(DeltaTable(root, restricted_replay=False), 1, 1)
    assert expected[1] is not None and "lists the data file twice" in expected[1][1]
    indexes, built = index_every_checkpoint(root, tmp_path / "index")
    assert built == 1
    assert changes_outcome(DeltaTable(root, checkpoint_indexes=indexes), 1, 1) == expected
    assert index_reads == [True, True]  # K's buckets, then K's and the repeated name's


# --- an index that cannot be trusted is not used ------------------------------------------------------


def _edit_manifest(folder: Path, **changes: object) -> None:
    """The manifest changed and sealed again (its digest recomputed): what the checks after the digest's
    must find (tests/delta/test_checkpoint_index.py alters it without resealing)."""
    manifest = folder / checkpoint_index.MANIFEST
    manifest.write_bytes(checkpoint_index._sealed(json.loads(manifest.read_text()) | changes))


DAMAGES = {
    "manifest not JSON": lambda folder, _log: (folder / checkpoint_index.MANIFEST).write_text("{"),
    "manifest missing": lambda folder, _log: (folder / checkpoint_index.MANIFEST).unlink(),
    "adds file missing": lambda folder, _log: (folder / checkpoint_index.ADDS).unlink(),
    "adds file truncated": lambda folder, _log: (folder / checkpoint_index.ADDS).write_bytes(
        (folder / checkpoint_index.ADDS).read_bytes()[:-100]
    ),
    "shards not holding its rows": lambda folder, _log: _edit_manifest(folder, rows=3),
    "another format version": lambda folder, _log: _edit_manifest(folder, format_version=99),
    "another table's index": lambda folder, _log: _edit_manifest(folder, table_root="/elsewhere"),
    "checkpoint rewritten (new mtime)": lambda _folder, log: os.utime(
        log / f"{0:020d}.checkpoint.parquet", (1, 1)
    ),
    "checkpoint replaced (other size)": lambda _folder, log: (
        log / f"{0:020d}.checkpoint.parquet"
    ).write_bytes((log / f"{0:020d}.checkpoint.parquet").read_bytes() + b"\0"),
}


@pytest.mark.parametrize("damage", [None, *DAMAGES])
def test_an_index_that_does_not_check_out_is_not_used(
    tmp_path: Path, damage: str | None, index_reads: list[bool]
) -> None:
    """A damaged, stale or foreign index: the run reads the checkpoint as before, same changes and
    refusals; an intact one answers."""
    files = [add(f"part-{i}.parquet") for i in range(40)] + [add("a%2Db.parquet")]
    root = write_log(tmp_path / "table", [base_commit(*files)])
    write_checkpoint(root, 0, "classic", random.Random(0))
    write_log(root, [[info("DELETE"), remove("part-7.parquet"), add("part-7.parquet", dv("d", 2))]], first=1)
    _indexes, built = index_every_checkpoint(root, tmp_path / "index")
    assert built == 1
    (folder,) = (tmp_path / "index").iterdir()
    if damage is not None:
        DAMAGES[damage](folder, root / "_delta_log")
    expected = changes_outcome(DeltaTable(root, restricted_replay=False), 1, 1)
    indexed = DeltaTable(root, checkpoint_indexes=CheckpointIndexes(str(tmp_path / "index")))
    assert changes_outcome(indexed, 1, 1) == expected
    # Found unusable from its manifest (not read), or on reading its adds file (read, unanswered).
    read_fails = damage is not None and damage.startswith("adds")
    assert index_reads == ([True] if damage is None else [False] if read_fails else [])


# --- one listing per run -----------------------------------------------------------------------------


class CountingIO(FileIO):
    """Counts listings of folders and the names each returned."""

    def __init__(self) -> None:
        super().__init__()
        self.listed: list[list[str]] = []

    def list_dir(self, location: str, *, from_name: str = ""):
        infos = super().list_dir(location, from_name=from_name)
        self.listed.append([i.location.rsplit("/", 1)[-1] for i in infos])
        return infos


def checkpointed_history(root: Path, commits: int, checkpoint: int) -> None:
    write_log(
        root,
        [base_commit(add("f0.parquet"))] + [[info("WRITE"), add(f"f{v}.parquet")] for v in range(1, commits)],
    )
    write_checkpoint(root, checkpoint, "classic", random.Random(0))
    (root / "_delta_log" / "_last_checkpoint").write_text(f'{{"version": {checkpoint}, "size": 1}}')


def test_listed_once_lists_from_the_checkpoint_before_the_mirrored_version(tmp_path: Path) -> None:
    checkpointed_history(tmp_path, 30, 20)
    io = CountingIO()
    table = DeltaTable(tmp_path, io=io).listed_once(25)
    assert (table.latest_version(), table.oldest_version()) == (29, 20)
    assert table.commit_info(25) is not None
    assert [c.version for c in table.changes(26, 29)] == [26, 27, 28, 29]
    (names,) = io.listed  # one listing for every question of the run
    assert min(names) == f"{20:020d}.checkpoint.parquet"


@pytest.mark.parametrize(
    ("mirrored", "hint", "why"),
    [
        (15, 20, "the newest checkpoint is after the mirrored version"),
        (25, None, "no _last_checkpoint"),
        (25, 99, "a stale hint"),
        (None, 20, "no mirrored version (first sync)"),
    ],
)
def test_listed_once_falls_back_to_the_full_listing(
    tmp_path: Path, mirrored: int | None, hint: int | None, why: str
) -> None:
    checkpointed_history(tmp_path, 30, 20)
    last = tmp_path / "_delta_log" / "_last_checkpoint"
    last.unlink()
    if hint is not None:
        last.write_text(f'{{"version": {hint}, "size": 1}}')
    io = CountingIO()
    table = DeltaTable(tmp_path, io=io).listed_once(mirrored)
    assert table.oldest_version() == 0, why
    (names,) = io.listed
    assert f"{0:020d}.json" in names


def test_a_gap_after_the_checkpoint_keeps_the_full_listings_refusal(tmp_path: Path) -> None:
    checkpointed_history(tmp_path, 30, 20)
    (tmp_path / "_delta_log" / f"{23:020d}.json").unlink()
    expected = changes_outcome(DeltaTable(tmp_path, restricted_replay=False), 26, 29)
    assert expected[1] is not None and "commit 23 is missing" in expected[1][1]
    assert changes_outcome(DeltaTable(tmp_path).listed_once(25), 26, 29) == expected


def test_restricted_replay_bounds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, full_replays: list[int]
) -> None:
    """Past its bounds (commits held, locations kept) the full replay answers, with the same changes."""
    checkpointed_history(tmp_path, 30, 20)
    monkeypatch.setattr(delta_replay, "RESTRICTED_MAX_COMMITS", 5)
    assert assert_same_changes(tmp_path, full_replays) > 0
    # [22, 22] is 2 commits past the checkpoint at 20: restricted; [27, 29] is 9: the full replay.
    assert 27 in full_replays and 22 in full_replays
