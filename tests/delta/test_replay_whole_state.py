"""`DeltaTable.whole_state`: a version's whole state streamed from its checkpoint in batches (a new
mirror's first version at ten million files), the same files as the in-memory replay's `state`, and the
same refusal of a checkpoint that lists a file twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from dv_assets.mirror.delta import replay
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.errors import MirrorInputError
from testkit.synthetic import SyntheticTable, info, remove

BATCH = 4


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay, "WHOLE_STATE_BATCH", BATCH)


def _table(root: Path) -> SyntheticTable:
    """30 files, DVs on 5, a checkpoint at version 2; then a DV update, a removal, an append and a
    re-add of the removed file with a DV (versions 3-6)."""
    table = SyntheticTable(root, rows_per_file=10)
    table.create(30)
    table.delete(table.files[:5], lambda i: range(i + 1))
    table.append(3)
    table.write_checkpoint()
    table.delete(table.files[3:8], lambda _i: range(6))
    gone = table.files[10]
    table._commit([info("DELETE"), remove(gone, size=len(table.content))])
    table.append(2)
    table.delete([gone], lambda _i: [1, 2])
    return table


def _streamed(delta: DeltaTable, version: int) -> tuple[dict[str, tuple], list[int]]:
    whole = delta.whole_state(version)
    files, sizes = {}, []
    for batch in whole.batches():
        sizes.append(len(batch))
        for add in batch:
            assert add.stats is not None  # every file comes with its stats: its Iceberg metrics
            files[add.location] = (add.dv_unique_id, add.size, add.num_records)
    return files, sizes


@pytest.mark.parametrize("version", [2, 3, 4, 5, 6])
def test_the_streamed_state_is_the_replayed_one(tmp_path: Path, version: int) -> None:
    _table(tmp_path)
    delta = DeltaTable(tmp_path)
    files, sizes = _streamed(delta, version)
    state = delta.state(version)
    assert sum(sizes) == len(files)  # each file once
    assert files == {loc: (a.dv_unique_id, a.size, a.num_records) for loc, a in state.files.items()}
    assert max(sizes) <= BATCH and len(sizes) >= len(files) // BATCH
    whole = delta.whole_state(version)
    assert whole.change.version == version and whole.change.added == []
    assert (whole.change.protocol, whole.change.metadata) == (state.protocol, state.metadata)


def test_a_state_without_a_checkpoint_comes_in_batches_too(tmp_path: Path) -> None:
    table = SyntheticTable(tmp_path, rows_per_file=10)
    table.create(9)
    table.delete(table.files[:2], lambda _i: [0])
    delta = DeltaTable(tmp_path)
    files, sizes = _streamed(delta, 1)
    assert set(files) == set(delta.state(1).files) and sizes == [4, 4, 1]


@pytest.mark.parametrize("touched_later", [False, True], ids=["streamed part", "replayed part"])
def test_a_checkpoint_listing_a_file_twice_is_refused(tmp_path: Path, touched_later: bool) -> None:
    """Found by the hashes of the streamed adds, or, for a file a later commit touches, exactly."""
    table = SyntheticTable(tmp_path, rows_per_file=10)
    table.create(12)
    table.files.append(table.files[7])
    table.write_checkpoint()
    table.files.pop()
    if touched_later:
        table.delete([table.files[7]], lambda _i: [0])
    else:
        table.append(1)
    with pytest.raises(MirrorInputError, match="the checkpoint lists the data file twice") as refused:
        _streamed(DeltaTable(tmp_path), table.version)
    assert refused.value.version == 0 and refused.value.file == str(tmp_path / table.files[7])
