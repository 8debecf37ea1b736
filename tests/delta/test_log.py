"""dv_assets.mirror.delta against the conformance fixtures, with delta-rs as the independent oracle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dv_assets.mirror.delta.facts import live_rows
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.errors import MirrorInputError
from tests.helpers.delta_log import assert_changes_match_states, assert_matches_delta_rs, dv_ids
from tests.helpers.paths import DELTA_FIXTURES, EXPECTED, fixture_tables, fixture_versions
from tests.helpers.readers import delta_rs_files

FIXTURE_TABLES = fixture_tables()
# Its inline DV decodes to a position past the end of the file; readers disagree (fixtures/README.md).
MALFORMED_DV = ("cdf-table-with-dv", 5)


# --- the fixtures --------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "version"), fixture_versions())
def test_fixture_state_matches_delta_rs_and_expected_rows(name: str, version: int) -> None:
    root = DELTA_FIXTURES / name
    table = DeltaTable(root)
    expected = json.loads((EXPECTED / name / "summary.json").read_text())[str(version)]["rows"]
    if (name, version) == MALFORMED_DV:
        state = table.state(version)  # the log itself is fine; only the DV's content is not
        assert set(state.files) == delta_rs_files(root, version)
        assert expected is None
        return
    state = assert_matches_delta_rs(table, root, version)
    assert live_rows(state) == expected
    assert all(Path(loc).is_file() for loc in state.files)


@pytest.mark.parametrize("name", FIXTURE_TABLES)
def test_fixture_changes_replay_to_the_same_states(name: str) -> None:
    table = DeltaTable(DELTA_FIXTURES / name)
    latest = table.latest_version()
    assert table.oldest_version() == 0
    changes = assert_changes_match_states(table, 0, latest)
    assert changes[0].protocol_changed and changes[0].metadata_changed
    if latest >= 2:  # a range starting mid-log replays from the state before it
        assert_changes_match_states(table, latest // 2, latest)


@pytest.mark.parametrize(
    ("name", "versions"), [("log-replay-dv-key-cases", range(1, 4)), ("cdf-table-with-dv", range(1, 7))]
)
def test_dv_replacements_are_dv_changes_not_data_file_changes(name: str, versions: range) -> None:
    table = DeltaTable(DELTA_FIXTURES / name)
    for change in table.changes(versions.start, versions.stop - 1):
        assert (change.added, change.removed) == ([], []), change.version
        assert len(change.dv_changed) == 1, change.version
        before, after = change.dv_changed[0]
        assert before.location == after.location
        assert before.dv_unique_id != after.dv_unique_id
        assert change.data_change


def test_checkpointed_fixture_without_early_commits(copy_fixture) -> None:
    original = DeltaTable(DELTA_FIXTURES / "basic-dv-with-checkpoint")
    root = copy_fixture("basic-dv-with-checkpoint")
    for v in range(0, 21):  # commits 0..20 gone: v20's checkpoint is the oldest usable
        (root / "_delta_log" / f"{v:020d}.json").unlink()
    table = DeltaTable(root)
    assert (table.oldest_version(), table.latest_version()) == (20, 46)
    for v in (20, 21, 39, 40, 46):
        assert dv_ids(table.state(v).files) == {
            str(root / Path(loc).relative_to(original.table_root)): dv
            for loc, dv in dv_ids(original.state(v).files).items()
        }
    changes = assert_changes_match_states(table, 20, 23)
    assert changes[0].added and changes[0].commit_info == {}
    assert changes[1].operation == "DELETE"
    with pytest.raises(MirrorInputError) as err:
        table.state(19)
    assert err.value.version == 19 and err.value.table == str(root)
    with pytest.raises(MirrorInputError):
        list(table.changes(19, 22))


def test_missing_and_unreadable_commits_are_named(copy_fixture) -> None:
    root = copy_fixture("log-replay-dv-key-cases")
    commit2 = root / "_delta_log" / f"{2:020d}.json"
    commit2.write_text('{"add": {"path": "x.parquet"\n')
    with pytest.raises(MirrorInputError) as err:
        DeltaTable(root).state(3)
    assert (err.value.version, err.value.file) == (2, str(commit2))
    assert "not JSON" in err.value.reason
    commit2.unlink()
    with pytest.raises(MirrorInputError) as err:
        DeltaTable(root).state(3)
    assert err.value.version == 3 and err.value.file == str(commit2)  # names the commit that is gone
    with pytest.raises(MirrorInputError) as err:
        DeltaTable(root).state(7)
    assert err.value.version == 7 and "does not exist" in err.value.reason
