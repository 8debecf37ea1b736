"""Delta logs written by hand, without Spark, and checks of log replay against itself.

* actions and commits (`add`, `remove`, `dv`, `info`, `base_commit`, `write_log`, `read_commit`) and
  `SyntheticTable`, from `testkit.synthetic` (the benchmarks build their tables with it too);
* checkpoints (classic, multi-part, V2 with sidecars): CHECKPOINT_SCHEMA, `checkpoint_rows`,
  `write_parquet`, `checkpointed_log`;
* replay checks: a range of VersionChanges, applied in order, must give the same file sets as replaying
  each version from scratch (`assert_changes_match_states`); states against delta-rs.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import random
import shutil
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from dv_assets.mirror.delta.actions import AddFile, DeletionVectorDescriptor
from dv_assets.mirror.delta.replay import DeltaTable, TableState, VersionChange
from dv_assets.mirror.errors import MirrorInputError
from testkit.synthetic import (
    DELTA_SPARK_CHECKPOINT_SCHEMA as DELTA_SPARK_CHECKPOINT_SCHEMA,
)
from testkit.synthetic import (
    DV_TYPE as DV_TYPE,
)
from testkit.synthetic import (
    METADATA as METADATA,
)
from testkit.synthetic import (  # the hand-written tables tests and benchmarks share
    PROTOCOL as PROTOCOL,
)
from testkit.synthetic import (
    SCHEMA as SCHEMA,
)
from testkit.synthetic import (
    SyntheticTable as SyntheticTable,
)
from testkit.synthetic import (
    add as add,
)
from testkit.synthetic import (
    base_commit as base_commit,
)
from testkit.synthetic import (
    dv as dv,
)
from testkit.synthetic import (
    info as info,
)
from testkit.synthetic import (
    read_commit as read_commit,
)
from testkit.synthetic import (
    remove as remove,
)
from testkit.synthetic import (
    set_commit_time as set_commit_time,
)
from testkit.synthetic import (
    write_commit as write_commit,
)
from testkit.synthetic import (
    write_log as write_log,
)
from tests.helpers.readers import delta_rs_deleted_rows, delta_rs_files

# --- checkpoints -----------------------------------------------------------------------------------------

CHECKPOINT_SCHEMA = pa.schema(
    [
        ("txn", pa.struct([("appId", pa.string()), ("version", pa.int64())])),
        (
            "add",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("partitionValues", pa.map_(pa.string(), pa.string())),
                    ("size", pa.int64()),
                    ("modificationTime", pa.int64()),
                    ("dataChange", pa.bool_()),
                    ("tags", pa.map_(pa.string(), pa.string())),
                    ("deletionVector", DV_TYPE),
                    ("stats", pa.string()),
                    (
                        "stats_parsed",
                        pa.struct(
                            [
                                ("numRecords", pa.int64()),
                                (
                                    "minValues",
                                    pa.struct([("id", pa.int64()), ("ts", pa.timestamp("us", "UTC"))]),
                                ),
                            ]
                        ),
                    ),
                ]
            ),
        ),
        (
            "remove",
            pa.struct([("path", pa.string()), ("dataChange", pa.bool_()), ("deletionVector", DV_TYPE)]),
        ),
        (
            "metaData",
            pa.struct(
                [
                    ("id", pa.string()),
                    (
                        "format",
                        pa.struct(
                            [("provider", pa.string()), ("options", pa.map_(pa.string(), pa.string()))]
                        ),
                    ),
                    ("schemaString", pa.string()),
                    ("partitionColumns", pa.list_(pa.string())),
                    ("configuration", pa.map_(pa.string(), pa.string())),
                    ("createdTime", pa.int64()),
                ]
            ),
        ),
        (
            "protocol",
            pa.struct(
                [
                    ("minReaderVersion", pa.int32()),
                    ("minWriterVersion", pa.int32()),
                    ("readerFeatures", pa.list_(pa.string())),
                    ("writerFeatures", pa.list_(pa.string())),
                ]
            ),
        ),
    ]
)


def checkpoint_add(path: str, dv_: dict | None, rows: int) -> dict:
    return {
        "add": {
            "path": path,
            "partitionValues": [],
            "size": 100,
            "modificationTime": 1,
            "dataChange": False,
            "deletionVector": None if dv_ is None else {**dv_, "maxRowIndex": 5},
            "stats": None,  # writeStatsAsJson=false: only stats_parsed
            "stats_parsed": {
                "numRecords": rows,
                "minValues": {"id": 0, "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)},
            },
        }
    }


def checkpoint_rows() -> list[dict]:
    meta = {
        **METADATA,
        "format": {"provider": "parquet", "options": []},
        "configuration": list(METADATA["configuration"].items()),
    }
    return [
        {"protocol": PROTOCOL},
        {"metaData": meta},
        {"txn": {"appId": "x", "version": 1}},
        checkpoint_add("a.parquet", dv("dv1", 2), 10),
        checkpoint_add("b%20c.parquet", None, 5),
        {"remove": {"path": "gone.parquet", "dataChange": True, "deletionVector": None}},
    ]


def write_parquet(path: Path, rows: list[dict], schema: pa.Schema = CHECKPOINT_SCHEMA) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def checkpointed_log(tmp_path: Path) -> Path:
    """Commits 0..1 deleted; checkpoint at 1 (written by the test); commit 2 on top."""
    return write_log(
        tmp_path,
        [[info("DELETE"), remove("a.parquet", dv("dv1", 2)), add("a.parquet", dv("dv9", 3))]],
        first=2,
    )


def assert_checkpoint_state(root: Path) -> None:
    table = DeltaTable(root)
    assert (table.oldest_version(), table.latest_version()) == (1, 2)
    state = table.state(1)
    files = {Path(loc).name: f for loc, f in state.files.items()}
    assert sorted(files) == ["a.parquet", "b c.parquet"]
    assert files["a.parquet"].deletion_vector == DeletionVectorDescriptor("u", "dv1", 1, 34, 2)
    assert files["b c.parquet"].num_records == 5
    assert json.loads(files["a.parquet"].stats or "null") == {
        "numRecords": 10,
        "minValues": {"id": 0, "ts": "2024-01-02T03:04:05.678Z"},
    }
    assert state.metadata.configuration == METADATA["configuration"] and state.protocol.reader_features == {
        "deletionVectors"
    }
    first, second = table.changes(1, 2)
    assert names(first.added) == ["a.parquet", "b c.parquet"] and first.commit_info == {}
    assert [(b.dv_unique_id, a.dv_unique_id) for b, a in second.dv_changed] == [("udv1@1", "udv9@1")]


# --- replay checks -----------------------------------------------------------------------------------


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


def names(files) -> list[str]:
    return sorted(Path(f.location).name for f in files)


def live_rows_per_file(state: TableState) -> dict[str, int]:
    """Data file → rows left by its DV (files with none left are absent), from the log alone."""
    rows = {
        loc: f.num_records - (f.deletion_vector.cardinality if f.deletion_vector else 0)
        for loc, f in state.files.items()
    }
    return {loc: n for loc, n in rows.items() if n > 0}


def without_early_commits(root: Path, dest: Path, oldest: int) -> Path:
    """A copy of the table whose commits before `oldest` (and their checksums) were cleaned up."""
    shutil.copytree(root, dest)
    for v in range(oldest):
        for name in (f"{v:020d}.json", f".{v:020d}.json.crc", f"{v:020d}.crc", f".{v:020d}.crc.crc"):
            (dest / "_delta_log" / name).unlink(missing_ok=True)
    return dest


def assert_matches_delta_rs(table: DeltaTable, root: Path | str, version: int) -> TableState:
    """The state at `version` has delta-rs's files and, per file with a DV, its deleted-row count."""
    state = table.state(version)
    assert state.version == version
    assert set(state.files) == delta_rs_files(root, version)
    ours = {loc: f.deletion_vector.cardinality for loc, f in state.files.items() if f.deletion_vector}
    assert ours == delta_rs_deleted_rows(root, version)
    return state


# --- random hand-written logs (valid and invalid), and the restricted replay against the full one ---------

SPELLINGS = ("relative", "absolute", "file-uri", "escaped")


def spelled(root: Path, name: str, spelling: str) -> str:
    """`name` (relative to the table root) as the log may write it."""
    if spelling == "absolute":
        return f"{root}/{name}"
    if spelling == "file-uri":
        return f"file://{root}/{name}"
    if spelling == "escaped":  # `-` as %2D and ` ` as %20: decoded, the same file
        return name.replace("-", "%2D").replace(" ", "%20")
    return name.replace(" ", "%20")


def random_log(root: Path, seed: int, commits: int = 14, *, invalid: bool = False) -> None:
    """A random history of appends, DELETEs (DV updates), removes, stale removes and identical re-adds over
    files spelled in every way the log may spell them, some sharing a base name in other folders, with
    checkpoints of every kind (classic, multi-part, V2 with Parquet sidecars) at random versions. With
    `invalid`, one thing replay must refuse: an add or remove of a live file under another spelling, a
    checkpoint listing a file twice, or a missing commit."""
    rng = random.Random(seed)
    live: dict[str, tuple[str, dict | None]] = {}  # name -> (its raw path, its DV)
    counter = 0
    flaw = rng.choice(["add-respelled", "remove-respelled", "checkpoint-twice", "missing-commit"])
    flaw_at = rng.randrange(2, commits)

    def new_name() -> str:
        nonlocal counter
        counter += 1
        folder = rng.choice(["", "", "p=1/", "p=2/"])
        stem = rng.choice([f"part-{counter}", f"b c-{counter}", "same"])  # "same": one base name, 3 folders
        return f"{folder}{stem}.parquet"

    for version in range(commits):
        actions: list[dict] = [info("WRITE")] if version else base_commit()
        if version and invalid and version == flaw_at and flaw.endswith("respelled") and live:
            name, (raw, dv_) = rng.choice(sorted(live.items()))
            other = next(spelled(root, name, s) for s in SPELLINGS if spelled(root, name, s) != raw)
            actions.append(add(other, dv("x", 1)) if flaw == "add-respelled" else remove(other, dv_))
        for _ in range(rng.randint(1, 4)):
            op = (
                rng.choice(["append", "append", "dv", "dv", "remove", "stale", "readd"]) if live else "append"
            )
            if op == "append":
                name = new_name()
                if name in live or any(a.get("add", {}).get("path") == name for a in actions):
                    continue
                raw = spelled(root, name, rng.choice(SPELLINGS))
                live[name] = (raw, None)
                actions.append(add(raw, None, rows=10))
                continue
            name = rng.choice(sorted(live))
            raw, dv_ = live[name]
            if any(a.get("add", a.get("remove", {})).get("path") == raw for a in actions[1:]):
                continue  # one action per file and commit keeps the history valid
            if op == "dv":
                new = dv(f"dv{version}-{rng.randrange(1000)}", rng.randint(1, 9))
                actions += [remove(raw, dv_), add(raw, new, rows=10)]
                live[name] = (raw, new)
            elif op == "remove":
                actions.append(remove(raw, dv_))
                del live[name]
            elif op == "stale":
                actions.append(remove(raw, dv("stale", 1)))
            else:
                actions.append(add(raw, dv_, rows=10, data_change=False))
        write_commit(root, version, actions)
        if version and rng.random() < 0.35:
            twice = invalid and flaw == "checkpoint-twice" and version >= flaw_at
            write_checkpoint(root, version, rng.choice(["classic", "multipart", "v2"]), rng, twice=twice)
    if invalid and flaw == "missing-commit":
        (root / "_delta_log" / f"{flaw_at:020d}.json").unlink()


def write_checkpoint(root: Path, version: int, kind: str, rng: random.Random, *, twice: bool = False) -> None:
    """A checkpoint of `version` (its state as the full replay reads it), with stats_parsed only; with
    `twice`, one file listed a second time under another spelling. Nothing when the log is invalid there."""
    try:
        state = DeltaTable(root, restricted_replay=False).state(version)
    except MirrorInputError:
        return
    adds = [
        checkpoint_add(f.path, _dv_json(f.deletion_vector), f.num_records or 0) for f in state.files.values()
    ]
    if twice and adds:
        first = adds[0]["add"]["path"]
        name = unquote(first.split(str(root) + "/", 1)[-1])
        other = next(spelled(root, name, s) for s in SPELLINGS if spelled(root, name, s) != first)
        adds.insert(rng.randrange(len(adds) + 1), {"add": {**adds[0]["add"], "path": other}})
    rng.shuffle(adds)
    rows = [*checkpoint_rows()[:2], *adds]
    log = root / "_delta_log"
    if kind == "classic":
        write_parquet(log / f"{version:020d}.checkpoint.parquet", rows)
    elif kind == "multipart":
        parts = 3
        for part in range(parts):
            write_parquet(
                log / f"{version:020d}.checkpoint.{part + 1:010d}.{parts:010d}.parquet", rows[part::parts]
            )
    else:
        sidecars = []
        for index in range(2):
            write_parquet(log / "_sidecars" / f"v{version}-{index}.parquet", adds[index::2])
            sidecars.append(
                {"sidecar": {"path": f"v{version}-{index}.parquet", "sizeInBytes": 1, "modificationTime": 1}}
            )
        top = [
            {"checkpointMetadata": {"version": version}},
            {"protocol": PROTOCOL},
            {"metaData": METADATA},
            *sidecars,
        ]
        name = f"{version:020d}.checkpoint.{uuid.UUID(int=rng.getrandbits(128))}.json"
        (log / name).write_text("".join(json.dumps(a) + "\n" for a in top))


def _dv_json(descriptor: DeletionVectorDescriptor | None) -> dict | None:
    if descriptor is None:
        return None
    return {
        "storageType": descriptor.storage_type,
        "pathOrInlineDv": descriptor.path_or_inline_dv,
        "offset": descriptor.offset,
        "sizeInBytes": descriptor.size_in_bytes,
        "cardinality": descriptor.cardinality,
    }


Outcome = tuple[list[tuple[Any, ...]], tuple[type, str] | None]


def changes_outcome(table: DeltaTable, start: int, end: int) -> Outcome:
    """What `changes(start, end)` hands out before it ends or raises (every field, stats text too), and
    its error (class and message)."""
    handed_out: list[tuple[Any, ...]] = []
    try:
        for change in table.changes(start, end):
            handed_out.append(
                (
                    change,
                    [a.stats for a in change.added],
                    [r.stats for r in change.removed],
                    [(b.stats, a.stats) for b, a in change.dv_changed],
                )
            )
    except MirrorInputError as exc:
        return handed_out, (type(exc), str(exc))
    return handed_out, None
