"""Log replay: the table state at a version, and the change from one version to the next.

A logical file is keyed on (path, DV unique id) (PROTOCOL.md, "Action Reconciliation"): a `remove`
ends only the logical file with its own DV id, so `remove(p, dv1)` + `add(p, dv2)` in one commit is a
DV update of the live file `p`. A valid snapshot holds at most one logical file per path, so the live
set is a dict keyed on the decoded location.

That key is only safe because replay refuses the logs where it would pick an answer: an `add` of a
file already live under another DV id or another spelling of its path (`part-0` and `file:///t/part-0`,
`a%2Db` and `a-b`) that the same commit does not remove, a checkpoint that lists one file twice. Delta
Spark and delta-rs key log replay on the path as written: they keep both entries of such a file (its
rows twice, which one Iceberg entry per data file cannot hold) and apply its DVs differently. An
identical re-add (same path as written, same DV id) is harmless. A `remove` that names the live file
under another spelling ends nothing to both readers alike when one of the two spellings is relative
(tests/mirror/test_locations_spellings.py): replay ignores it, as it ignores a remove with a stale DV id. Two
absolute spellings (`/t/x`, `file:///t/x`) are one file to Delta Spark and two to delta-rs: refused.

Memory: the live set is what a replay keeps, so it keeps each file compactly (actions.py) and keeps
the stats text only of files someone may still read it from: a VersionChange's added files (the
mirror's Iceberg metrics come from it) and a TableState asked for with stats. Once a change has been
handed out, its files stay live without their stats text; `removed` and `dv_changed` therefore hand
out files *without* stats text, but with every other field and their num_records (a DV update keeps
the data file's Iceberg entry and metrics; it needs only the row count, the bound of DV positions).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from dv_assets.mirror.delta import column_mapping
from dv_assets.mirror.delta.actions import (
    AddFile,
    CommitActions,
    CommitInfo,
    Metadata,
    Protocol,
    ValuePool,
    parse_actions,
)
from dv_assets.mirror.delta.add_candidates import AddCandidates
from dv_assets.mirror.delta.checkpoint_index import CheckpointIndex, CheckpointIndexes
from dv_assets.mirror.delta.log import DeltaLog
from dv_assets.mirror.delta.log_files import LogListing
from dv_assets.mirror.delta.paths import readers_keep_apart
from dv_assets.mirror.delta.protocol import check_column_mapping, check_protocol
from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.locations import TableLocation

# Bounds of the restricted replay (`DeltaTable._restricted_replay`): the commits it holds parsed at once,
# and the locations K it keeps; past them the full replay, which streams, is used.
RESTRICTED_MAX_COMMITS = 1000
RESTRICTED_MAX_LOCATIONS = 100_000
# A whole state is handed out this many files at a time (`DeltaTable.whole_state`).
WHOLE_STATE_BATCH = 10_000


@dataclass(frozen=True)
class TableState:
    version: int
    protocol: Protocol
    metadata: Metadata
    files: dict[str, AddFile]  # keyed by AddFile.location; stats text only if asked for


@dataclass(frozen=True)
class VersionChange:
    """What version `version` changed relative to `version - 1`, reconciled on location and DV id."""

    version: int
    commit_info: CommitInfo  # an empty CommitInfo when the commit has none
    protocol: Protocol  # current after the commit
    metadata: Metadata  # current after the commit
    metadata_changed: bool
    protocol_changed: bool
    added: list[AddFile]  # live after, not before (with stats)
    removed: list[AddFile]  # live before, not after (as it was live before, without stats text)
    # (before, after): same location, different DV id; both without stats text
    dv_changed: list[tuple[AddFile, AddFile]]
    data_change: bool  # any add/remove of the commit has dataChange=true
    operation: str | None
    # metaData.id at `version - 1` (None: nothing before it was replayed). Another id in `metadata` is a
    # table replaced within its log (CREATE OR REPLACE TABLE), not another table in the folder.
    previous_metadata_id: str | None = None


@dataclass(frozen=True)
class WholeState:
    """A version's whole state, added to nothing (a new mirror's first version), read as it is consumed:
    `change` is the version's change without its files (`added` empty: protocol, metadata, commit info);
    `batches()` hands out every live file, with stats, WHOLE_STATE_BATCH at a time, and raises once they
    are through if the checkpoint lists a file twice (so before anything is committed of them)."""

    change: VersionChange
    batches: Callable[[], Iterator[list[AddFile]]]


@dataclass
class _Replay:
    """The mutable state replay carries from commit to commit."""

    version: int
    protocol: Protocol | None
    metadata: Metadata | None
    files: dict[str, AddFile]


def apply_commit(
    files: dict[str, AddFile], commit: CommitActions
) -> tuple[list[AddFile], list[AddFile], list[tuple[AddFile, AddFile]]]:
    """Apply a commit's removes and adds to `files` in place; return (added, removed, dv_changed).

    Cost is proportional to the commit: only the locations the commit touches are compared.
    """
    touched = dict.fromkeys([r.location for r in commit.removes] + [a.location for a in commit.adds])
    before = {loc: files[loc] for loc in touched if loc in files}
    # Removes that name a live file under another spelling, by location: they end nothing (below).
    respelled: dict[str, str] = {}
    for remove in commit.removes:
        live = files.get(remove.location)
        # A remove ends the logical file (path as written, its DV id) only: a stale DV id, or the path
        # spelled otherwise (`/t/x`, `file:///t/x`, `p%3Da/x` for the live `p=a/x`), leaves the live
        # file alone, to Delta Spark and delta-rs alike (tests/mirror/test_locations_spellings.py), but for
        # two absolute spellings, one file to Delta Spark and two to delta-rs.
        if live is not None and live.dv_unique_id == remove.dv_unique_id:
            if live.path != remove.path:
                if not readers_keep_apart(live.path, remove.path):
                    raise _readers_disagree(remove.path, live, remove.location)
                respelled[remove.location] = remove.path
                continue
            del files[remove.location]
    for add in commit.adds:
        live = files.get(add.location)
        # Still live here: not removed by this commit (removes went first), or added twice by it.
        if live is not None and (live.path, live.dv_unique_id) != (add.path, add.dv_unique_id):
            raise _conflict(
                f"add of {add.path!r} with DV {add.dv_unique_id}",
                live,
                add.location,
                respelled.get(add.location),
            )
        files[add.location] = add
    added: list[AddFile] = []
    removed: list[AddFile] = []
    dv_changed: list[tuple[AddFile, AddFile]] = []
    for loc in touched:
        old, new = before.get(loc), files.get(loc)
        if old is None and new is not None:
            added.append(new)
        elif old is not None and new is None:
            removed.append(old)
        elif old is not None and new is not None and old.dv_unique_id != new.dv_unique_id:
            dv_changed.append((old, new))
    return added, removed, dv_changed


def _readers_disagree(path: str, live: AddFile, location: str) -> MirrorInputError:
    return MirrorInputError(
        f"remove of {path!r} while the same data file is live as {live.path!r} with DV "
        f"{live.dv_unique_id}: Delta Spark may take the two spellings for one file and remove it (it "
        "qualifies an absolute path to one URI), delta-rs keeps it live (it keys on the path as "
        "written); readers disagree, refused",
        file=location,
    )


def _conflict(
    action: str, live: AddFile, location: str, respelled_remove: str | None = None
) -> MirrorInputError:
    removed_otherwise = (
        ""
        if respelled_remove is None
        else f" (its remove of {respelled_remove!r} spells the path otherwise, which ends nothing)"
    )
    return MirrorInputError(
        f"{action} while the same data file is live as {live.path!r} with DV {live.dv_unique_id}, "
        f"and the commit does not remove that entry{removed_otherwise}: Delta readers would keep both "
        "entries (duplicate rows, which one Iceberg entry per data file cannot hold) or disagree on the "
        "file and its DV (a path spelled differently is another entry to Delta Spark and delta-rs, which "
        "apply DVs to them differently); the log is invalid, refused",
        file=location,
    )


class DeltaTable:
    """A Delta table read from its log alone (no Spark). Every call lists `_delta_log` afresh, but on a
    table made by `listed_once`, which answers every call from one listing (one sync run).

    With `enforce_protocol` (the default) every state and change is checked against the supported
    reader features, so nothing is ever derived from a table the mirror cannot read exactly.
    """

    def __init__(
        self,
        table_root: str | Path | TableLocation,
        *,
        enforce_protocol: bool = True,
        io: FileIO | None = None,
        restricted_replay: bool = True,
        checkpoint_indexes: CheckpointIndexes | None = None,
    ) -> None:
        self.location = TableLocation.of(table_root)  # typed once: a TableLocation is taken as it is
        self.table_root = self.location.uri
        self.enforce_protocol = enforce_protocol
        # `changes` after a checkpoint may read only the files its commits touch (`_restricted_replay`).
        # False only in tests: the full replay from the same checkpoint is the oracle the restricted one
        # must equal, and no shape of the same log reaches it for every range.
        self.restricted_replay = restricted_replay
        # Where the restricted replay looks for an index of its checkpoint (`checkpoint_index.py`).
        self.checkpoint_indexes = checkpoint_indexes
        self._log = DeltaLog(self.table_root, io)
        self._listing: LogListing | None = None

    def listed_once(self, mirrored_version: int | None = None) -> DeltaTable:
        """This table answering every call from one listing of `_delta_log`, made now: only the files from
        the newest checkpoint at or before `mirrored_version` on when `_last_checkpoint` names one and
        that listing answers every question of a run continuing it (a complete checkpoint <= it followed
        by every later commit); else the whole folder (first sync, no hint, a gap, a lag past log cleanup:
        the answers, and refusals, the full listing gives)."""
        pinned = DeltaTable(
            self.table_root,
            enforce_protocol=self.enforce_protocol,
            restricted_replay=self.restricted_replay,
            checkpoint_indexes=self.checkpoint_indexes,
        )
        pinned._log = self._log
        hint = self._log.read_last_checkpoint()
        hinted = hint.get("version") if hint is not None else None
        if (
            mirrored_version is not None
            and isinstance(hinted, int)
            and not isinstance(hinted, bool)
            and 0 < hinted <= mirrored_version
        ):
            bounded = self._log.list(from_version=hinted, last_checkpoint=hint)
            oldest = _oldest_reconstructable(bounded)
            if oldest is not None and oldest <= mirrored_version <= max(bounded.versions):
                pinned._listing = bounded
                return pinned
        pinned._listing = self._log.list(last_checkpoint=hint)
        return pinned

    def _list(self) -> LogListing:
        return self._listing if self._listing is not None else self._log.list()

    # --- versions -------------------------------------------------------------------------------

    def latest_version(self) -> int:
        return max(self._list().versions)

    def has_version_after(self, version: int) -> bool:
        """Whether the log has a version after `version` (a listing from its name on; what a sensor asks
        of a table it last saw settled at `version`)."""
        return self._log.has_version_after(version)

    def oldest_version(self) -> int:
        """The oldest version the log can reconstruct, with every later commit still present (on a
        bounded listing, `listed_once`: one at or before the mirrored version, which is all a run
        continuing it asks)."""
        return _oldest_version(self._list(), self.table_root)

    def commit_info(self, version: int) -> CommitInfo | None:
        """The commitInfo of a version's commit, or None when the log no longer holds that commit."""
        listing = self._list()
        if version not in listing.commits:
            return None
        return self._commit_info(listing, version)

    # --- state ----------------------------------------------------------------------------------

    def state(self, version: int, *, with_stats: bool = True) -> TableState:
        """The live files at `version`. Without `with_stats` their stats text is dropped while reading
        (num_records stays): what row counts and DV checks need, in a fraction of the memory."""
        listing = self._list()
        replay = self._replay_to(listing, version, ValuePool(), keep_stats=with_stats)
        return self._table_state(replay)

    def live_files(self, start: int, end: int) -> Iterator[tuple[int, list[AddFile], list[str]]]:
        """Per version in [start, end], what a reader of it needs present, as it changes: (version, files,
        gone). At `start` every file live there; at each later version the files that became live or got
        another DV; `gone`, the locations no longer live. Without stats text, and without protocol
        checks: the files only, to find the first version whose files are all still there."""
        listing = self._list()
        pool = ValuePool()
        replay = self._replay_to(listing, start, pool, keep_stats=False)
        yield start, list(replay.files.values()), []
        self._read_ahead(listing, start + 1, end)
        for version in range(start + 1, end + 1):
            commit = self._read_commit(listing, version, pool, keep_stats=False)
            added, removed, dv_changed = self._apply_commit(replay.files, commit, version)
            yield version, [*added, *(after for _, after in dv_changed)], [r.location for r in removed]

    def commit_actions(self, start: int, end: int) -> Iterator[tuple[int, CommitActions]]:
        """The file actions of each commit in [start, end] the log holds, in order, as written (nothing
        replayed, no stats text, no protocol check): what a commit added and removed. A commit the log
        no longer holds is skipped; `held_from` says from which version on it holds them all."""
        listing = self._list()
        pool = ValuePool()
        self._read_ahead(listing, start, end)
        for version in range(start, end + 1):
            if version in listing.commits:
                yield version, self._read_commit(listing, version, pool, keep_stats=False)

    def held_from(self, end: int) -> int:
        """The oldest version v such that the log holds every commit v..`end` (`end` + 1: not `end`'s)."""
        commits = self._list().commits
        version = end
        while version in commits:
            version -= 1
        return version + 1

    def changes(self, start: int, end: int, *, whole_first: bool = False) -> Iterator[VersionChange]:
        """One VersionChange per version in [start, end], from a single replay over the range. With
        `whole_first`, the first one is the whole state at `start`, added to nothing (what a new mirror
        starting there needs), as it always is when `start` is the oldest version the log holds."""
        listing = self._list()
        latest, oldest = max(listing.versions), _oldest_version(listing, self.table_root)
        if not oldest <= start <= end <= latest:
            raise MirrorInputError(
                f"version range [{start}, {end}] is outside the reconstructable range [{oldest}, {latest}]",
                table=self.table_root,
                version=start if start < oldest or start > latest else end,
            )
        if self.restricted_replay and start > 0 and start != oldest and not whole_first:
            restricted = self._restricted_replay(listing, start, end)
            if restricted is not None:
                yield from restricted
                return
        yield from self._full_replay_changes(listing, start, end, oldest, whole_first=whole_first)

    def _full_replay_changes(
        self, listing: LogListing, start: int, end: int, oldest: int, *, whole_first: bool = False
    ) -> Iterator[VersionChange]:
        pool = ValuePool()
        if start == 0:  # version 0's change is its whole state
            replay = _Replay(-1, None, None, {})
            first = start
        elif start == oldest or whole_first:
            # Nothing before `start` survives: its change is "the whole state added", with stats.
            replay = self._replay_to(listing, start, pool, keep_stats=True)
            yield self._whole_state_change(listing, replay)
            if end == start:
                return  # nothing follows to keep the files live for: their stats go with the replay
            _drop_stats(replay.files, list(replay.files.values()))
            first = start + 1
        else:
            # No file live before `start` is ever handed out as added: no stats text needed.
            replay = self._replay_to(listing, start - 1, pool, keep_stats=False)
            first = start
        self._read_ahead(listing, first, end)
        for version in range(first, end + 1):
            change = self._advance(
                replay, self._read_commit(listing, version, pool, keep_stats=True), version
            )
            yield change
            # Handed out: the files stay live for later versions, which need their stats no more.
            _drop_stats(replay.files, change.added)

    def whole_state(self, version: int) -> WholeState:
        """The whole state at `version` as a WholeState. Streamed from the newest checkpoint at or before
        it: the files its later commits touch (K) are replayed apart, a few, and every other file goes
        from the checkpoint's Arrow batches to the consumer as read, so memory is bounded by a batch and
        by K, not by the table (a duplicate is found from a 64-bit hash per file, 8 bytes each). Without
        such a checkpoint, the commits are replayed whole first and handed out from memory."""
        listing = self._list()
        checkpoint = _replay_start(listing, version)
        if checkpoint is None or checkpoint < 0:
            change = next(self.changes(version, version, whole_first=True))
            files = change.added
            return WholeState(
                dataclasses.replace(change, added=[]),
                lambda: (files[i : i + WHOLE_STATE_BATCH] for i in range(0, len(files), WHOLE_STATE_BATCH)),
            )
        pool = ValuePool()
        self._read_ahead(listing, checkpoint + 1, version)
        commits = [
            self._read_commit(listing, v, pool, keep_stats=True) for v in range(checkpoint + 1, version + 1)
        ]
        touched = {f.location for c in commits for f in (*c.removes, *c.adds)}
        replay = self._checkpoint_apart(listing, checkpoint, touched)
        for v, commit in enumerate(commits, start=checkpoint + 1):
            self._replay_commit(replay, commit, v)
        del commits
        commit_info = self._commit_info(listing, version) if version in listing.commits else CommitInfo()
        whole = CommitActions(commit_info, replay.protocol, replay.metadata, [])
        change = self._advance(_Replay(version - 1, None, None, {}), whole, version)
        replayed = list(replay.files.values())

        def batches() -> Iterator[list[AddFile]]:
            hashes = array("q")
            for actions in self._checkpoint_chunks(listing, checkpoint):
                hashes.extend(hash(add.location) for add in actions.adds)
                batch = [add for add in actions.adds if add.location not in touched]
                if batch:
                    yield batch
            self._refuse_listed_twice(listing, checkpoint, hashes)
            for first in range(0, len(replayed), WHOLE_STATE_BATCH):
                yield replayed[first : first + WHOLE_STATE_BATCH]

        return WholeState(dataclasses.replace(change, data_change=True), batches)

    def _checkpoint_apart(self, listing: LogListing, checkpoint: int, touched: set[str]) -> _Replay:
        """The checkpoint's protocol and metadata and its files of K (`touched`), read in a first pass
        over only the adds that may be K's, chosen in Arrow by base name (`AddCandidates`)."""
        basenames = frozenset(location.rsplit("/", 1)[-1] for location in touched)
        candidates = AddCandidates(basenames, keeps_passed_over=False)
        replay = _Replay(checkpoint, None, None, {})
        # Without K (the version is the checkpoint's), only the protocol and metadata are wanted of it.
        for actions in self._checkpoint_chunks(
            listing, checkpoint, keep_stats=bool(touched), candidates=candidates
        ):
            replay.protocol = actions.protocol or replay.protocol
            replay.metadata = actions.metadata or replay.metadata
            for add in actions.adds:
                if add.location in touched:
                    if add.location in replay.files:
                        raise _listed_twice(replay.files[add.location], add, self.table_root, checkpoint)
                    replay.files[add.location] = add
        return replay

    def _checkpoint_chunks(
        self,
        listing: LogListing,
        checkpoint: int,
        *,
        keep_stats: bool = True,
        candidates: AddCandidates | None = None,
    ) -> Iterator[CommitActions]:
        """The checkpoint's actions WHOLE_STATE_BATCH at a time, parsed as read (with `candidates`, of
        the adds it admits only)."""
        pool = ValuePool()
        first = listing.checkpoints[checkpoint][0]
        file = self._log.file_path(first.files[0].name)
        raw = self._log.read_checkpoint(first, stats=keep_stats, candidates=candidates)
        while chunk := list(itertools.islice(raw, WHOLE_STATE_BATCH)):
            try:
                yield parse_actions(
                    chunk, self.table_root, include_removes=False, pool=pool, keep_stats=keep_stats
                )
            except MirrorInputError as exc:
                raise exc.at(table=self.table_root, version=checkpoint, file=file) from exc

    def _refuse_listed_twice(self, listing: LogListing, checkpoint: int, hashes: array) -> None:
        """Refuse a checkpoint that lists a data file twice (as `_checkpoint_state` does), found among
        the hashes of its adds' locations: only when two hashes are equal is the checkpoint read again,
        for the locations behind them (equal hashes of two locations are no duplicate)."""
        values = pa.Array.from_buffers(pa.int64(), len(hashes), [None, pa.py_buffer(hashes)])
        ordered = pc.take(values, pc.sort_indices(values))
        if len(ordered) < 2:
            return
        repeated = pc.equal(ordered.slice(1), ordered.slice(0, len(ordered) - 1))
        equal = set(ordered.slice(1).filter(repeated).to_pylist())
        if not equal:
            return
        seen: dict[str, AddFile] = {}
        for actions in self._checkpoint_chunks(listing, checkpoint, keep_stats=False):
            for add in actions.adds:
                if hash(add.location) not in equal:
                    continue
                if add.location in seen:
                    raise _listed_twice(seen[add.location], add, self.table_root, checkpoint)
                seen[add.location] = add

    def _restricted_replay(self, listing: LogListing, start: int, end: int) -> Iterator[VersionChange] | None:
        """The changes of versions start..end from the live state at `start - 1` of only the locations
        they can need: K, every location a commit after the checkpoint replay starts from touches
        (through `end`). `apply_commit` compares only the locations a commit touches, so replaying the
        checkpoint restricted to K and those commits gives every version the same change, and the same
        refusals, as the full replay (a duplicate in the checkpoint is refused when it names a file of K
        or a file that merely shares a base name with one). None when the full replay is the better (or
        the only) way: no checkpoint to start from, a backlog too large to hold, any error while
        reading ahead (the full replay then raises it where it arises, after the versions before it).
        """
        checkpoint = _replay_start(listing, start - 1)
        # Without a checkpoint the full replay reads only commits too; a long backlog is held here whole
        # (every commit parsed, with stats), where the full replay streams it: above these bounds the
        # restricted replay saves little and may hold much.
        if checkpoint is None or checkpoint < 0 or end - checkpoint > RESTRICTED_MAX_COMMITS:
            return None
        pool = ValuePool()
        self._read_ahead(listing, checkpoint + 1, end)
        try:
            commits = {
                v: self._read_commit(listing, v, pool, keep_stats=v >= start)
                for v in range(checkpoint + 1, end + 1)
            }
        except MirrorInputError:
            return None
        touched = {f.location for c in commits.values() for f in (*c.removes, *c.adds)}
        if len(touched) > RESTRICTED_MAX_LOCATIONS:
            return None
        return self._restricted_changes(listing, checkpoint, commits, touched, pool, start)

    def _restricted_changes(
        self,
        listing: LogListing,
        checkpoint: int,
        commits: dict[int, CommitActions],
        touched: set[str],
        pool: ValuePool,
        start: int,
    ) -> Iterator[VersionChange]:
        basenames = frozenset(location.rsplit("/", 1)[-1] for location in touched)
        replay = self._indexed_checkpoint(listing, checkpoint, pool, basenames)
        if replay is None:
            candidates = AddCandidates(basenames)
            replay = self._load_checkpoint(listing, checkpoint, pool, keep_stats=False, candidates=candidates)
            repeated = candidates.repeated([loc.rsplit("/", 1)[-1] for loc in replay.files]) - basenames
            if repeated:
                # A base name passed over twice may be one file listed twice, which the full replay
                # refuses: read those adds too (rare: Delta names data files by a UUID).
                wider = AddCandidates(basenames | repeated)
                replay = self._load_checkpoint(listing, checkpoint, pool, keep_stats=False, candidates=wider)
        replay.files = {loc: f for loc, f in replay.files.items() if loc in touched}
        for version in list(commits):
            commit = commits.pop(version)  # once applied or handed out, not held here
            if version < start:
                self._replay_commit(replay, commit, version)
                continue
            change = self._advance(replay, commit, version)
            del commit
            yield change
            _drop_stats(replay.files, change.added)

    def _indexed_checkpoint(
        self, listing: LogListing, checkpoint: int, pool: ValuePool, basenames: frozenset[str]
    ) -> _Replay | None:
        """`_restricted_changes`'s read of the checkpoint through its index, the same rows in the same
        order (`checkpoint_index.py`); None when there is no usable index or it cannot be read."""
        index = self._checkpoint_index(listing, checkpoint)
        if index is None:
            return None
        assert self.checkpoint_indexes is not None
        actions = self.checkpoint_indexes.read(index, AddCandidates(basenames))
        if actions is None:
            return None
        replay = self._checkpoint_state(listing, checkpoint, actions, pool)
        # What `AddCandidates.repeated` would find: for a name outside K, its count over the checkpoint.
        repeated = index.repeated - basenames
        if repeated:
            actions = self.checkpoint_indexes.read(index, AddCandidates(basenames | repeated))
            if actions is None:
                return None
            replay = self._checkpoint_state(listing, checkpoint, actions, pool)
        return replay

    def _checkpoint_index(self, listing: LogListing, checkpoint: int) -> CheckpointIndex | None:
        if self.checkpoint_indexes is None:
            return None
        return self.checkpoint_indexes.find(self._log, listing.checkpoints[checkpoint][0], listing.infos)

    def index_checkpoint(self, indexes: CheckpointIndexes, version: int) -> CheckpointIndex | None:
        """Make sure `indexes` holds an index of the checkpoint a run continuing after `version` starts
        from (the newest at or before it, when every later commit is there): found, or built now; then
        its older indexes are removed. None when there is no such checkpoint or it cannot be indexed."""
        listing = self._list()
        start = _replay_start(listing, version)
        if start is None or start < 0:
            return None
        checkpoint = listing.checkpoints[start][0]
        index = indexes.find(self._log, checkpoint, listing.infos)
        if index is None:
            index = indexes.build(self._log, checkpoint, listing.infos)
        if index is not None:
            indexes.remove_older(start)
        return index

    # --- internals ------------------------------------------------------------------------------

    def _replay_to(self, listing: LogListing, version: int, pool: ValuePool, *, keep_stats: bool) -> _Replay:
        """Newest usable checkpoint <= version, then the JSON commits after it."""
        if version < 0 or version > max(listing.versions):
            raise MirrorInputError(
                f"version does not exist (latest is {max(listing.versions)})",
                table=self.table_root,
                version=version,
            )
        start = _replay_start(listing, version)
        if start is None:
            missing = max(v for v in range(version + 1) if v not in listing.commits)
            oldest = _oldest_reconstructable(listing)
            raise MirrorInputError(
                f"version cannot be reconstructed: commit {missing} is missing and no checkpoint at or "
                f"after it precedes this version (oldest reconstructable: {oldest})",
                table=self.table_root,
                version=version,
                file=self._log.file_path(f"{missing:020d}.json"),
            )
        if start < 0:
            replay = _Replay(-1, None, None, {})
        else:
            replay = self._load_checkpoint(listing, start, pool, keep_stats=keep_stats)
        self._read_ahead(listing, start + 1, version)
        for v in range(start + 1, version + 1):
            self._replay_commit(replay, self._read_commit(listing, v, pool, keep_stats=keep_stats), v)
        return replay

    def _replay_commit(self, replay: _Replay, commit: CommitActions, version: int) -> None:
        """Advance `replay` over a commit nobody asks the change of (replaying up to a version)."""
        self._apply_commit(replay.files, commit, version)
        replay.protocol = commit.protocol or replay.protocol
        replay.metadata = commit.metadata or replay.metadata
        replay.version = version

    def _load_checkpoint(
        self,
        listing: LogListing,
        version: int,
        pool: ValuePool,
        *,
        keep_stats: bool,
        candidates: AddCandidates | None = None,
    ) -> _Replay:
        """The checkpoint's state; with `candidates`, of the files it admits only
        (`DeltaLog.read_checkpoint`)."""
        checkpoint = listing.checkpoints[version][0]
        # Streamed part by part, batch by batch; without stats, their columns are not even read.
        raw = self._log.read_checkpoint(checkpoint, stats=keep_stats, candidates=candidates)
        return self._checkpoint_state(listing, version, raw, pool, keep_stats=keep_stats)

    def _checkpoint_state(
        self,
        listing: LogListing,
        version: int,
        raw: Iterable[dict],
        pool: ValuePool,
        *,
        keep_stats: bool = False,
    ) -> _Replay:
        """The state a checkpoint's raw actions make (read from it, or from its index)."""
        file = self._log.file_path(listing.checkpoints[version][0].files[0].name)
        try:
            actions = parse_actions(
                raw, self.table_root, include_removes=False, pool=pool, keep_stats=keep_stats
            )
        except MirrorInputError as exc:
            raise exc.at(table=self.table_root, version=version, file=file) from exc
        files: dict[str, AddFile] = {}
        for add in actions.adds:
            if add.location in files:
                raise _listed_twice(files[add.location], add, self.table_root, version)
            files[add.location] = add
        return _Replay(version, actions.protocol, actions.metadata, files)

    def _read_ahead(self, listing: LogListing, first: int, last: int) -> None:
        """The commits of versions first..last, about to be read in order (`DeltaLog.read_ahead`)."""
        self._log.read_ahead(
            [listing.commits[v] for v in range(first, last + 1) if v in listing.commits], listing
        )

    def _commit_info(self, listing: LogListing, version: int) -> CommitInfo:
        """The commitInfo of a version's commit (empty when it has none), read up to it and no further: a
        commit holds at most one, writers put it first, and the commit of a table's first version may
        hold a million adds."""
        commit = listing.commits[version]
        try:
            with contextlib.closing(self._log.iter_commit(commit)) as actions:
                for action in actions:
                    if (raw := action.get("commitInfo")) is not None:
                        return CommitInfo.from_action(raw)
        except MirrorInputError as exc:
            raise exc.at(
                table=self.table_root, version=version, file=self._log.file_path(commit.name)
            ) from exc
        return CommitInfo()

    def _read_commit(
        self, listing: LogListing, version: int, pool: ValuePool, *, keep_stats: bool
    ) -> CommitActions:
        commit = listing.commits.get(version)
        if commit is None:
            raise MirrorInputError(
                "commit file is missing from the Delta log",
                table=self.table_root,
                version=version,
                file=self._log.file_path(f"{version:020d}.json"),
            )
        try:
            return parse_actions(
                self._log.iter_commit(commit), self.table_root, pool=pool, keep_stats=keep_stats
            )
        except MirrorInputError as exc:
            raise exc.at(
                table=self.table_root, version=version, file=self._log.file_path(commit.name)
            ) from exc

    def _apply_commit(
        self, files: dict[str, AddFile], commit: CommitActions, version: int
    ) -> tuple[list[AddFile], list[AddFile], list[tuple[AddFile, AddFile]]]:
        try:
            return apply_commit(files, commit)
        except MirrorInputError as exc:
            raise exc.at(table=self.table_root, version=version) from exc

    def _advance(self, replay: _Replay, commit: CommitActions, version: int) -> VersionChange:
        added, removed, dv_changed = self._apply_commit(replay.files, commit, version)
        # Only the added files take their stats text out of this commit (and the commit, not kept, takes
        # the originals along): what else it added stays live without it, DV updates included.
        handed_out = {id(add) for add in added}
        _drop_stats(replay.files, [add for add in commit.adds if id(add) not in handed_out])
        dv_changed = [(before, replay.files[after.location]) for before, after in dv_changed]
        protocol_changed = commit.protocol is not None and commit.protocol != replay.protocol
        metadata_changed = commit.metadata is not None and commit.metadata != replay.metadata
        before = replay.protocol
        previous_metadata_id = None if replay.metadata is None else replay.metadata.id
        replay.protocol = commit.protocol or replay.protocol
        replay.metadata = commit.metadata or replay.metadata
        replay.version = version
        protocol, metadata = self._checked(replay)
        # A protocol change alone can switch the column mapping mode readers apply: a schema change too.
        metadata_changed = metadata_changed or _mapping_switched(before, protocol, metadata)
        return VersionChange(
            version=version,
            commit_info=commit.commit_info,
            protocol=protocol,
            metadata=metadata,
            metadata_changed=metadata_changed,
            protocol_changed=protocol_changed,
            added=added,
            removed=removed,
            dv_changed=dv_changed,
            data_change=commit.data_change,
            operation=commit.commit_info.operation,
            previous_metadata_id=previous_metadata_id,
        )

    def _whole_state_change(self, listing: LogListing, replay: _Replay) -> VersionChange:
        """The change of a version nothing before survives of: its whole state, added to nothing."""
        commit_info = CommitInfo()
        if replay.version in listing.commits:
            commit_info = self._commit_info(listing, replay.version)
        whole = CommitActions(commit_info, replay.protocol, replay.metadata, list(replay.files.values()))
        change = self._advance(_Replay(replay.version - 1, None, None, {}), whole, replay.version)
        return dataclasses.replace(change, data_change=bool(change.added))

    def _table_state(self, replay: _Replay) -> TableState:
        protocol, metadata = self._checked(replay)
        # The replay was made for this state alone: its dict is handed over, not copied.
        return TableState(replay.version, protocol, metadata, replay.files)

    def _checked(self, replay: _Replay) -> tuple[Protocol, Metadata]:
        pairs = (("protocol", replay.protocol), ("metaData", replay.metadata))
        missing = [name for name, value in pairs if value is None]
        if missing:
            raise MirrorInputError(
                f"no {' or '.join(missing)} action at or before this version",
                table=self.table_root,
                version=replay.version,
            )
        assert replay.protocol is not None and replay.metadata is not None
        # Kept on the replay: later versions under the same protocol hand out this very object.
        replay.metadata = replay.metadata.with_protocol(replay.protocol)
        if self.enforce_protocol:
            check_protocol(replay.protocol, table=self.table_root, version=replay.version)
            check_column_mapping(
                replay.protocol, replay.metadata, table=self.table_root, version=replay.version
            )
        return replay.protocol, replay.metadata


def _listed_twice(first: AddFile, second: AddFile, table_root: str, checkpoint: int) -> MirrorInputError:
    return MirrorInputError(
        f"the checkpoint lists the data file twice, as {first.path!r} and {second.path!r}: readers would "
        "read its rows twice or disagree on it; refused",
        table=table_root,
        version=checkpoint,
        file=second.location,
    )


def _mapping_switched(before: Protocol | None, after: Protocol, metadata: Metadata) -> bool:
    """Whether the protocol change from `before` to `after` switched the configuration's column mapping
    mode on or off (a mode string even unknown counts: reading it refuses it later)."""
    if before is None or metadata.configuration.get(column_mapping.MODE_KEY, "none") == "none":
        return False
    return before.supports_column_mapping != after.supports_column_mapping


def _drop_stats(files: dict[str, AddFile], handed_out: Iterable[AddFile]) -> None:
    """Replace the files just handed out, where still live, by copies without their stats text (the
    consumer's own references keep it as long as it needs)."""
    for add in handed_out:
        if add.stats is not None and files.get(add.location) is add:
            files[add.location] = add.without_stats()


def _contiguous_from(listing: LogListing) -> int:
    """The smallest s such that the commits s..latest all exist (latest + 1 when the newest is a checkpoint
    without its commit)."""
    latest = max(listing.versions)
    s = latest + 1
    while s - 1 in listing.commits:
        s -= 1
    return s


def _replay_start(listing: LogListing, version: int) -> int | None:
    """Where replay for `version` starts: a checkpoint version, -1 for "from commit 0", None if impossible."""
    # Only the newest checkpoint matters: an older one (or commit 0) needs a superset of its commits.
    newest = max((v for v in listing.checkpoints if v <= version), default=None)
    if newest is not None:
        return newest if all(v in listing.commits for v in range(newest + 1, version + 1)) else None
    if all(v in listing.commits for v in range(version + 1)):
        return -1
    return None


def _oldest_reconstructable(listing: LogListing) -> int | None:
    """The oldest version with a checkpoint (or commit 0) followed by every commit up to the latest."""
    s = _contiguous_from(listing)
    if s == 0:
        return 0
    return min((v for v in listing.checkpoints if v >= s - 1), default=None)


def _oldest_version(listing: LogListing, table_root: str) -> int:
    oldest = _oldest_reconstructable(listing)
    if oldest is None:
        s = _contiguous_from(listing)
        raise MirrorInputError(
            f"the latest version cannot be reconstructed: commit {s - 1} is missing and no checkpoint "
            "at or after it is followed by every later commit",
            table=table_root,
            version=s - 1,
        )
    return oldest
