"""Checks of log replay against itself: a range of VersionChanges, applied in order, must give the same
file sets as replaying each version from scratch (used by the fixture and Delta Spark tests)."""

from __future__ import annotations

import dataclasses

from dv_assets.mirror.delta.actions import AddFile
from dv_assets.mirror.delta.replay import DeltaTable, VersionChange


def dv_ids(files: dict[str, AddFile]) -> dict[str, str | None]:
    return {loc: f.dv_unique_id for loc, f in files.items()}


def comparable(files: dict[str, AddFile]) -> dict[str, AddFile]:
    """Checkpoints rewrite dataChange to false; everything else about a live file must agree."""
    return {loc: dataclasses.replace(f, data_change=False) for loc, f in files.items()}


def replay_changes(changes: list[VersionChange], files: dict[str, AddFile]) -> dict[int, dict[str, AddFile]]:
    """Apply VersionChanges to a copy of `files`; the file set after each version."""
    files = dict(files)
    after: dict[int, dict[str, AddFile]] = {}
    for change in changes:
        for f in change.removed:
            assert files.pop(f.location) == f, "removed must be the file as it was live before"
        for before, new in change.dv_changed:
            assert files[before.location] == before
            files[before.location] = new
        for f in change.added:
            assert f.location not in files
            files[f.location] = f
        after[change.version] = dict(files)
    return after


def assert_changes_match_states(table: DeltaTable, start: int, end: int) -> list[VersionChange]:
    changes = list(table.changes(start, end))
    assert [c.version for c in changes] == list(range(start, end + 1))
    base = {} if start == table.oldest_version() else table.state(start - 1).files
    for version, files in replay_changes(changes, base).items():
        state = table.state(version)
        assert dv_ids(files) == dv_ids(state.files), f"version {version}"
        assert comparable(files) == comparable(state.files), f"version {version}"
    for change in changes:
        state = table.state(change.version)
        assert (change.protocol, change.metadata) == (state.protocol, state.metadata)
    return changes
