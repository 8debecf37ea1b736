"""A cache can never change an answer: a checkpoint index altered in any one place (every field of its
manifest, found by walking the written JSON, so that a field added later is covered too; one byte of its
adds file) gives the same changes and refusals as a replay without it, with ONE warning line when the
run notices, and the run's rebuild replaces it. Without Spark: 37-row tables written by hand
(tests/helpers/delta_log.py), indexed in buckets of 4 rows and verified in blocks of 1 KiB, so that a
lookup reads some buckets and some blocks, not all."""

from __future__ import annotations

import hashlib
import json
import logging
import random
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dv_assets.mirror.delta import checkpoint_index
from dv_assets.mirror.delta.checkpoint_index import CheckpointIndexes
from dv_assets.mirror.delta.log import DeltaLog
from dv_assets.mirror.delta.replay import DeltaTable
from tests.helpers.delta_log import (
    Outcome,
    add,
    base_commit,
    changes_outcome,
    dv,
    info,
    remove,
    write_checkpoint,
    write_log,
)

LATEST = 3
# The fields a resealed manifest (its digest recomputed) may not change unnoticed either: what the checks
# after the digest's cover. Not `actions` (the checkpoint's protocol and metaData, kept as read) nor
# `repeated`: only the digest guards those (checking them would read the whole checkpoint).
RESEAL_UNCOVERED = ("actions", "repeated", "digest")


@pytest.fixture(autouse=True)
def small_buckets_and_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoint_index, "BUCKET_ROWS", 4)
    monkeypatch.setattr(checkpoint_index, "SHARD_BUCKETS", 3)
    monkeypatch.setattr(checkpoint_index, "VERIFY_BLOCK_BYTES", 1024)


@pytest.fixture
def index_answers(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each read of an index: whether it answered (a spy: the read still runs)."""
    answers: list[bool] = []
    read = CheckpointIndexes.read

    def recorded(self: CheckpointIndexes, index, candidates):
        actions = read(self, index, candidates)
        answers.append(actions is not None)
        return actions

    monkeypatch.setattr(CheckpointIndexes, "read", recorded)
    return answers


# --- the tables -------------------------------------------------------------------------------------------


def table_of_37(root: Path, kind: str, more: int = 0) -> Path:
    """37 files (one escaped: always read), checkpointed at version 0 as `kind`; then a DELETE with a DV,
    a file removed, and one added and one removed: versions 1..3 touch files of several buckets. With
    "twice", the untouched `x.parquet` is listed twice in the checkpoint (refused through `repeated`);
    with `more`, that many files more (`more-*.parquet`)."""
    files = [add("x.parquet"), *(add(f"part-{i:02d}.parquet") for i in range(35)), add("a%2Db.parquet")]
    files += [add(f"more-{i}.parquet") for i in range(more)]
    write_log(root, [base_commit(*files)])
    twice = kind == "twice"
    write_checkpoint(root, 0, "classic" if twice else kind, random.Random(0), twice=twice)
    commits = [
        [info("DELETE"), remove("part-07.parquet"), add("part-07.parquet", dv("d", 2))],
        [info("DELETE"), remove("part-20.parquet")],
        [info("WRITE"), add("part-99.parquet"), remove("part-31.parquet")],
    ]
    return write_log(root, commits, first=1)


def no_index_outcome(root: Path) -> Outcome:
    """The answer without an index: the full replay's, which the restricted replay's must be."""
    expected = changes_outcome(DeltaTable(root, restricted_replay=False), 1, LATEST)
    assert changes_outcome(DeltaTable(root), 1, LATEST) == expected
    return expected


def pristine_index(root: Path, folder: Path) -> Path:
    """The table's index, built as a run builds it; its folder."""
    indexes = CheckpointIndexes(str(folder))
    assert DeltaTable(root).index_checkpoint(indexes, LATEST) is not None
    (built,) = folder.iterdir()
    return built


def outcome_with(root: Path, indexes: CheckpointIndexes) -> Outcome:
    return changes_outcome(DeltaTable(root, checkpoint_indexes=indexes), 1, LATEST)


# --- every one-field alteration of a JSON value ---------------------------------------------------------


def one_char_changed(text: str) -> str:
    """One bit of the middle character flipped (a string's one-character change)."""
    if not text:
        return "x"
    middle = len(text) // 2
    return text[:middle] + chr(ord(text[middle]) ^ 1) + text[middle + 1 :]


def alterations(value: Any) -> Iterator[tuple[str, Any]]:
    """(where, the whole value with that one place altered) for every place of a JSON value, recursively:
    numbers +1, strings one character changed, booleans flipped, null made 0, lists with an element
    dropped and one duplicated (an element added when empty), objects with a key dropped."""
    if isinstance(value, bool):
        yield "", not value
    elif isinstance(value, int | float):
        yield "", value + 1
    elif isinstance(value, str):
        yield "", one_char_changed(value)
    elif value is None:
        yield "", 0
    elif isinstance(value, list):
        yield from _list_alterations(value)
    else:
        assert isinstance(value, dict)
        for key, item in value.items():
            yield f".{key} dropped", {k: v for k, v in value.items() if k != key}
            for where, altered in alterations(item):
                yield f".{key}{where}", {**value, key: altered}


def _list_alterations(value: list[Any]) -> Iterator[tuple[str, Any]]:
    if not value:
        yield "[] + 'x'", ["x"]
        return
    yield "[-1] dropped", value[:-1]
    yield "[0] twice", [value[0], *value]
    for position, item in enumerate(value):
        for where, altered in alterations(item):
            yield f"[{position}]{where}", [*value[:position], altered, *value[position + 1 :]]


def test_alterations_reach_every_leaf() -> None:
    """The walk alters every leaf of a nested value, whatever its name (so a field added later is too)."""
    value = {"a": [1, {"b": "xyz", "c": None}], "d": True, "e": []}
    where = {w for w, _altered in alterations(value)}
    assert {".a[0]", ".a[1].b", ".a[1].c", ".d", ".e[] + 'x'", ".a[1].b dropped"} <= where
    assert all(altered != value for _w, altered in alterations(value))


# --- the manifest ---------------------------------------------------------------------------------------


def check_each(
    root: Path,
    pristine: Path,
    tmp_path: Path,
    cases: list[tuple[str, Callable[[Path], None]]],
    caplog: pytest.LogCaptureFixture,
) -> list[str]:
    """Each case applied to a copy of the pristine index: the outcome must be the no-index one, with at
    most one warning line. The cases whose outcome or warnings differ."""
    expected = no_index_outcome(root)
    failures: list[str] = []
    for number, (label, damage) in enumerate(cases):
        folder = tmp_path / f"case-{number}"
        shutil.copytree(pristine, folder / pristine.name)
        damage(folder / pristine.name)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=checkpoint_index.__name__):
            outcome = outcome_with(root, CheckpointIndexes(str(folder)))
        warnings = [r for r in caplog.records if r.name == checkpoint_index.__name__]
        if outcome != expected:
            failures.append(f"{label}: another outcome")
        if len(warnings) > 1:
            failures.append(f"{label}: {len(warnings)} warning lines")
        shutil.rmtree(folder)
    return failures


def manifest_cases(pristine: Path, *, reseal: bool) -> list[tuple[str, Callable[[Path], None]]]:
    """One case per alteration of the written manifest (resealed: its digest recomputed after it)."""
    manifest = json.loads((pristine / checkpoint_index.MANIFEST).read_text())
    cases: list[tuple[str, Callable[[Path], None]]] = []
    for where, altered in alterations(manifest):
        if reseal and where.lstrip(".").startswith(RESEAL_UNCOVERED):
            continue
        content = checkpoint_index._sealed(altered) if reseal else json.dumps(altered).encode()
        cases.append((where, lambda folder, content=content: _write_manifest(folder, content)))
    return cases


def _write_manifest(folder: Path, content: bytes) -> None:
    (folder / checkpoint_index.MANIFEST).write_bytes(content)


@pytest.mark.parametrize("kind", ["classic", "v2", "twice"])
def test_every_manifest_field_altered(tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture) -> None:
    """Each one-field alteration of the manifest (the digest itself too): found by its digest, so the
    index is not used (one warning), and the answer is the no-index one."""
    root = table_of_37(tmp_path / "table", kind)
    pristine = pristine_index(root, tmp_path / "pristine")
    cases = manifest_cases(pristine, reseal=False)
    assert len(cases) > 100
    assert check_each(root, pristine, tmp_path / "cases", cases, caplog) == []


@pytest.mark.parametrize("kind", ["classic", "twice"])
def test_every_manifest_field_altered_and_resealed(
    tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Defence in depth: the same alterations with the digest recomputed (a manifest written wrong, not
    rotted) of every field but the copies only the digest guards: the cross-checks against the adds file
    and the log find them, or they change nothing."""
    root = table_of_37(tmp_path / "table", kind)
    pristine = pristine_index(root, tmp_path / "pristine")
    cases = manifest_cases(pristine, reseal=True)
    assert len(cases) > 50
    assert check_each(root, pristine, tmp_path / "cases", cases, caplog) == []


def test_the_outside_suites_cases_are_not_trusted(tmp_path: Path, index_answers: list[bool]) -> None:
    """The reported ones (in this format's fields): the always-read shard's rows, a shard's first name, a
    bit of metaData.id or of a reader feature; each index is found unusable before it is read, and the
    answer is the no-index one."""
    root = table_of_37(tmp_path / "table", "classic")
    pristine = pristine_index(root, tmp_path / "pristine")
    expected = no_index_outcome(root)
    manifest = json.loads((pristine / checkpoint_index.MANIFEST).read_text())
    assert manifest["always"]["rows"] == 1  # `a%2Db.parquet`
    (protocol,) = [a["protocol"] for a in manifest["actions"] if "protocol" in a]
    (metadata,) = [a["metaData"] for a in manifest["actions"] if "metaData" in a]
    edits: list[Callable[[dict[str, Any]], None]] = [
        lambda m: m["always"].update(rows=m["always"]["rows"] + 1),
        lambda m: m["shard_first"].__setitem__(1, one_char_changed(m["shard_first"][1])),
        lambda _m: metadata.update(id=one_char_changed(metadata["id"])),
        lambda _m: protocol["readerFeatures"].__setitem__(0, one_char_changed(protocol["readerFeatures"][0])),
    ]
    for number, edit in enumerate(edits):
        altered = json.loads(json.dumps(manifest))
        protocol = next(a["protocol"] for a in altered["actions"] if "protocol" in a)
        metadata = next(a["metaData"] for a in altered["actions"] if "metaData" in a)
        edit(altered)
        folder = tmp_path / f"case-{number}"
        shutil.copytree(pristine, folder / pristine.name)
        _write_manifest(folder / pristine.name, json.dumps(altered).encode())
        index_answers.clear()
        assert outcome_with(root, CheckpointIndexes(str(folder))) == expected
        assert index_answers == []  # never read


@pytest.mark.parametrize("version", [1, 2, 3])
def test_an_old_format_index_is_replaced(
    tmp_path: Path, version: int, caplog: pytest.LogCaptureFixture
) -> None:
    """An index of format version 1 (no digest), 2 (one adds file, not in shards) or 3 (shards of
    Parquet, not Arrow IPC) is not used, and replaced by the run's rebuild."""
    root = table_of_37(tmp_path / "table", "classic")
    pristine = pristine_index(root, tmp_path / "index")
    manifest = json.loads((pristine / checkpoint_index.MANIFEST).read_text())
    del manifest["digest"]
    if version < 3:
        del manifest["shards"]
    old = manifest | {"format_version": version}
    _write_manifest(pristine, json.dumps(old).encode() if version == 1 else checkpoint_index._sealed(old))
    with caplog.at_level(logging.WARNING, logger=checkpoint_index.__name__):
        assert_one_warning_then_rebuilt(root, tmp_path / "index", pristine, caplog)


# --- the shard manifests --------------------------------------------------------------------------------


def shard_parts(folder: Path) -> tuple[dict[str, Any], list[tuple[bytes, dict[str, Any]]]]:
    """The manifest, and each shard of the adds file (the always-read one first) as its Arrow bytes and
    its shard manifest's fields."""
    manifest = json.loads((folder / checkpoint_index.MANIFEST).read_text())
    data = (folder / checkpoint_index.ADDS).read_bytes()
    parts = []
    for entry in [manifest["always"], *manifest["shards"]]:
        start, middle = entry["offset"], entry["offset"] + entry["arrow_bytes"]
        parts.append((data[start:middle], json.loads(data[middle : middle + entry["manifest_bytes"]])))
    return manifest, parts


def write_shards(
    folder: Path, manifest: dict[str, Any], parts: list[tuple[bytes, dict[str, Any]]], *, reseal: bool
) -> None:
    """The adds file of these shards; `reseal`: the manifest's entries (offsets, sizes, hashes) made its
    own and the manifest sealed again, as a build writing these shard manifests would."""
    contents = [(arrow, json.dumps(fields, sort_keys=True).encode()) for arrow, fields in parts]
    (folder / checkpoint_index.ADDS).write_bytes(b"".join(a + m for a, m in contents))
    if not reseal:
        return
    manifest = json.loads(json.dumps(manifest))
    offset = 0
    for entry, (arrow, content) in zip([manifest["always"], *manifest["shards"]], contents, strict=True):
        entry.update(
            offset=offset,
            arrow_bytes=len(arrow),
            manifest_bytes=len(content),
            manifest_sha256=hashlib.sha256(content).hexdigest(),
        )
        offset += len(arrow) + len(content)
    manifest["adds_bytes"] = offset
    _write_manifest(folder, checkpoint_index._sealed({k: v for k, v in manifest.items() if k != "digest"}))


def shard_manifest_cases(pristine: Path, *, reseal: bool) -> list[tuple[str, Callable[[Path], None]]]:
    """One case per alteration of one shard manifest (resealed: the manifest's entries and digest made
    to match it)."""
    manifest, parts = shard_parts(pristine)
    cases: list[tuple[str, Callable[[Path], None]]] = []
    for number, (arrow, fields) in enumerate(parts):
        for where, altered in alterations(fields):
            changed = [*parts[:number], (arrow, altered), *parts[number + 1 :]]
            cases.append(
                (
                    f"shard {number}{where}",
                    lambda folder, changed=changed: write_shards(folder, manifest, changed, reseal=reseal),
                )
            )
    return cases


@pytest.mark.parametrize("reseal", [False, True])
def test_every_shard_manifest_field_altered(
    tmp_path: Path, reseal: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Each one-field alteration of each shard manifest, its hash in the manifest left as written (found
    by it) or made to match (a shard written wrong, not rotted: its bounds, groups and block hashes
    are checked against the manifest and the Arrow bytes): the same answer, at most one warning."""
    root = table_of_37(tmp_path / "table", "classic")
    pristine = pristine_index(root, tmp_path / "pristine")
    manifest, parts = shard_parts(pristine)
    assert len(parts) == 4  # the always-read shard, then 36 adds in 9 buckets of 4, 3 a shard
    write_shards(tmp_path, manifest, parts, reseal=False)  # the helpers write what the build wrote
    assert (tmp_path / checkpoint_index.ADDS).read_bytes() == (pristine / checkpoint_index.ADDS).read_bytes()
    cases = shard_manifest_cases(pristine, reseal=reseal)
    assert len(cases) > 100
    assert check_each(root, pristine, tmp_path / "cases", cases, caplog) == []


def test_a_lookup_reads_only_the_shards_of_its_names(
    tmp_path: Path, index_answers: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a run reads of the adds file does not grow with the checkpoint: of 637 adds in 53 shards, a
    lookup reads the always-read shard and the shards of the names its commits touch, and answers."""
    root = table_of_37(tmp_path / "table", "classic", more=600)
    pristine = pristine_index(root, tmp_path / "index")
    read_shards: list[int | None] = []
    read_shard = checkpoint_index._read_shard

    def recorded(handle, index, number, names):
        read_shards.append(number)
        return read_shard(handle, index, number, names)

    monkeypatch.setattr(checkpoint_index, "_read_shard", recorded)
    _manifest, parts = shard_parts(pristine)
    assert outcome_with(root, CheckpointIndexes(str(tmp_path / "index"))) == no_index_outcome(root)
    assert index_answers and all(index_answers)
    assert None in read_shards and len(set(read_shards)) <= 4 < len(parts)


# --- the adds file --------------------------------------------------------------------------------------


def flipped_byte(offset: int) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        adds = folder / checkpoint_index.ADDS
        content = bytearray(adds.read_bytes())
        content[offset] ^= 0x01
        adds.write_bytes(bytes(content))

    return damage


@pytest.mark.parametrize("kind", ["classic", "twice"])
def test_one_byte_of_the_adds_file_flipped(
    tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """One bit flipped in each verified block (its middle byte), in its first and its last byte: the same
    answer, whether the lookup reads that block (the index is then not used) or not (then it answers)."""
    root = table_of_37(tmp_path / "table", kind)
    pristine = pristine_index(root, tmp_path / "pristine")
    size = (pristine / checkpoint_index.ADDS).stat().st_size
    block = checkpoint_index.VERIFY_BLOCK_BYTES
    offsets = sorted({0, size - 1, *range(block // 2, size, block)})
    assert len(offsets) > 5
    cases = [(f"byte {offset} of {size}", flipped_byte(offset)) for offset in offsets]
    assert check_each(root, pristine, tmp_path / "cases", cases, caplog) == []


def test_a_block_no_lookup_reads_does_not_stop_the_index(
    tmp_path: Path, index_answers: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the blocks a lookup reads are verified: a flipped byte elsewhere leaves the index answering
    (rightly: none of its bytes is used). Some flipped byte must be one (the index is not read whole):
    600 files more, so that the adds file holds shards no lookup of these names reads, and record
    batches of other buckets in the shards it reads, in blocks of 8 KiB."""
    monkeypatch.setattr(checkpoint_index, "VERIFY_BLOCK_BYTES", 8192)
    root = table_of_37(tmp_path / "table", "classic", more=600)
    pristine = pristine_index(root, tmp_path / "pristine")
    expected = no_index_outcome(root)
    size = (pristine / checkpoint_index.ADDS).stat().st_size
    answered = []
    for offset in range(checkpoint_index.VERIFY_BLOCK_BYTES // 2, size, checkpoint_index.VERIFY_BLOCK_BYTES):
        folder = tmp_path / f"case-{offset}"
        shutil.copytree(pristine, folder / pristine.name)
        flipped_byte(offset)(folder / pristine.name)
        index_answers.clear()
        assert outcome_with(root, CheckpointIndexes(str(folder))) == expected
        answered.append(bool(index_answers) and all(index_answers))
    assert any(answered) and not all(answered)


Batches = list[pa.RecordBatch]


def rewritten_shards(pristine: Path, folder: Path, rewrite: Callable[[int, Batches], Batches]) -> None:
    """Every shard's record batches rewritten (`rewrite(shard, batches)`, 0 the always-read shard),
    written as the build writes a shard, and sealed as the build would: block hashes, shard manifests
    and manifest made to match, so that only the checks of the shards' own content can tell."""
    manifest, parts = shard_parts(pristine)
    changed = []
    for number, (arrow, fields) in enumerate(parts):
        reader = pa.ipc.open_file(pa.py_buffer(arrow))
        batches = rewrite(number, [reader.get_batch(i) for i in range(reader.num_record_batches)])
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, batches[0].schema, options=checkpoint_index._WRITE_OPTIONS) as writer:
            for batch in batches:
                writer.write_batch(batch)
        data = sink.getvalue().to_pybytes()
        width = checkpoint_index.VERIFY_BLOCK_BYTES
        hashes = [hashlib.sha256(data[i : i + width]).hexdigest() for i in range(0, len(data), width)]
        blocks = {"size": len(data), "block_bytes": width, "block_sha256": hashes}
        changed.append((data, {**fields, "blocks": blocks}))
    write_shards(folder, manifest, changed, reseal=True)


def without_tags(_shard: int, batches: Batches) -> Batches:
    """The add type without its `tags` field (which no answer reads)."""
    add_type = batches[0].schema.field("add").type
    kept = [add_type.field(i) for i in range(add_type.num_fields) if add_type.field(i).name != "tags"]

    def changed(batch: pa.RecordBatch) -> pa.RecordBatch:
        adds = batch.column("add")
        arrays = [adds.field(field.name) for field in kept]
        struct = pa.StructArray.from_arrays(arrays, fields=kept, mask=adds.is_null())
        return pa.record_batch(
            [batch.column(0), batch.column(1), struct], names=["ordinal", "basename", "add"]
        )

    return [changed(batch) for batch in batches]


def one_batch_more(shard: int, batches: Batches) -> Batches:
    """An empty record batch after a bucket shard's buckets."""
    return batches if shard == 0 else [*batches, batches[-1].slice(0, 0)]


def one_row_moved(shard: int, batches: Batches) -> Batches:
    """A bucket shard's first bucket one row longer, its last one row shorter: the same rows, cut
    elsewhere."""
    if shard == 0:
        return batches
    rows = [batch.num_rows for batch in batches]
    rows[0], rows[-1] = rows[0] + 1, rows[-1] - 1
    assert rows[-1] > 0
    table = pa.Table.from_batches(batches).combine_chunks()
    starts = [sum(rows[:i]) for i in range(len(rows))]
    return [table.slice(start, count).to_batches()[0] for start, count in zip(starts, rows, strict=True)]


@pytest.mark.parametrize("rewrite", [without_tags, one_batch_more, one_row_moved])
def test_a_shard_written_otherwise_is_not_used(
    tmp_path: Path, rewrite: Callable[[int, Batches], Batches], index_answers: list[bool]
) -> None:
    """Shards whose Arrow bytes the manifests vouch for (resealed) but whose content is not what they
    say: an add type other than the manifest's `add_type`, more record batches than buckets, a bucket's
    rows not its shard manifest's count. Each is refused, the answer the no-index one: the first two by
    their own check alone (the schema's add type, the batch count), the third by its batch's row count
    and by `_check_rows` (a bucket's names out of its bounds) both."""
    root = table_of_37(tmp_path / "table", "classic")
    pristine = pristine_index(root, tmp_path / "pristine")
    folder = tmp_path / "case"
    shutil.copytree(pristine, folder / pristine.name)
    rewritten_shards(pristine, folder / pristine.name, rewrite)
    assert outcome_with(root, CheckpointIndexes(str(folder))) == no_index_outcome(root)
    assert index_answers and not any(index_answers)


# --- one warning, then rebuilt ---------------------------------------------------------------------------


def assert_one_warning_then_rebuilt(
    root: Path, index_dir: Path, damaged: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A run (the changes, then `index_checkpoint` on the same instance, as sync_table does) answers as
    without an index, logs one warning naming the damaged index, writes a new one and removes it; the
    next run uses the new index without a warning."""
    expected = no_index_outcome(root)
    caplog.clear()
    indexes = CheckpointIndexes(str(index_dir))
    table = DeltaTable(root, checkpoint_indexes=indexes)
    assert changes_outcome(table, 1, LATEST) == expected
    assert table.index_checkpoint(indexes, LATEST) is not None
    warnings = [r.getMessage() for r in caplog.records if r.name == checkpoint_index.__name__]
    assert len(warnings) == 1 and damaged.name in warnings[0], warnings
    (rebuilt,) = index_dir.iterdir()
    assert rebuilt.name != damaged.name
    caplog.clear()
    next_run = CheckpointIndexes(str(index_dir))
    assert next_run.find(DeltaLog(str(root)), *_checkpoint_and_infos(root)) is not None
    assert changes_outcome(DeltaTable(root, checkpoint_indexes=next_run), 1, LATEST) == expected
    assert [r for r in caplog.records if r.name == checkpoint_index.__name__] == []


def _checkpoint_and_infos(root: Path) -> tuple[Any, Any]:
    listing = DeltaLog(str(root)).list()
    return listing.checkpoints[0][0], listing.infos


@pytest.mark.parametrize(
    "damage",
    ["manifest field", "manifest not an object", "adds byte", "adds truncated", "adds missing"],
)
def test_a_damaged_index_warns_once_and_is_rebuilt(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    root = table_of_37(tmp_path / "table", "classic")
    pristine = pristine_index(root, tmp_path / "index")
    manifest, adds = pristine / checkpoint_index.MANIFEST, pristine / checkpoint_index.ADDS
    if damage == "manifest field":
        manifest.write_text(json.dumps(json.loads(manifest.read_text()) | {"always_groups": 0}))
    elif damage == "manifest not an object":
        manifest.write_text("[]")
    elif damage == "adds byte":
        flipped_byte(adds.stat().st_size - 10)(pristine)  # in the footer: every lookup reads it
    elif damage == "adds truncated":
        adds.write_bytes(adds.read_bytes()[:-1])
    else:
        adds.unlink()
    with caplog.at_level(logging.WARNING, logger=checkpoint_index.__name__):
        assert_one_warning_then_rebuilt(root, tmp_path / "index", pristine, caplog)


def test_a_base_name_of_5000_characters_is_indexed_and_used(
    tmp_path: Path, index_answers: list[bool], caplog: pytest.LogCaptureFixture
) -> None:
    """Format 3 could not index a base name of over 4 KiB (Parquet writes no statistics for it, and its
    bucket could not be checked); format 4 checks a bucket by its rows, so the index is built, used
    without a warning, and answers as the checkpoint does."""
    root = tmp_path / "table"
    long_name = "n" * 5000 + ".parquet"
    write_log(root, [base_commit(*(add(f"part-{i:02d}.parquet") for i in range(8)), add(long_name))])
    write_checkpoint(root, 0, "classic", random.Random(0))
    write_log(
        root, [[info("DELETE"), remove("part-03.parquet")], [info("DELETE"), remove(long_name)]], first=1
    )
    indexes = CheckpointIndexes(str(tmp_path / "index"))
    with caplog.at_level(logging.WARNING, logger=checkpoint_index.__name__):
        assert DeltaTable(root).index_checkpoint(indexes, 2) is not None
        expected = changes_outcome(DeltaTable(root, restricted_replay=False), 1, 2)
        outcome = changes_outcome(
            DeltaTable(root, checkpoint_indexes=CheckpointIndexes(str(tmp_path / "index"))), 1, 2
        )
    assert outcome == expected
    assert index_answers and all(index_answers)
    assert [r for r in caplog.records if r.name == checkpoint_index.__name__] == []
    assert len(list((tmp_path / "index").iterdir())) == 1


def test_an_index_a_lookup_would_refuse_is_not_left_behind(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build that cuts buckets wrong (here: a fault put in on purpose, buckets of exactly 4 rows cut
    between the two adds of `x.parquet`, listed twice) writes an index a lookup refuses (a bucket holds
    the next one's first name): the build finds so once (one warning), removes the folder, and the run
    answers without an index."""
    root = table_of_37(tmp_path / "table", "twice")

    def cut_every_4(names):
        return ((start, min(start + 4, len(names))) for start in range(0, len(names), 4))

    monkeypatch.setattr(checkpoint_index, "_bucket_bounds", cut_every_4)
    indexes = CheckpointIndexes(str(tmp_path / "index"))
    with caplog.at_level(logging.WARNING, logger=checkpoint_index.__name__):
        assert DeltaTable(root).index_checkpoint(indexes, LATEST) is None
    warnings = [r.getMessage() for r in caplog.records if r.name == checkpoint_index.__name__]
    assert len(warnings) == 1 and "within its manifest's bounds" in warnings[0], warnings
    assert list((tmp_path / "index").iterdir()) == []
    assert outcome_with(root, indexes) == no_index_outcome(root)


@pytest.mark.parametrize("seed", range(5))
def test_rows_taken_chunk_by_chunk_are_the_plain_take(seed: int) -> None:
    """`_take_rows` (the build's copy into index order, a chunk at a time) against Arrow's own take over the
    whole array, on generated chunkings: empty chunks, one chunk, rows repeated and in any order."""
    rnd = random.Random(seed)
    add_type = pa.struct([("path", pa.string()), ("size", pa.int64())])
    for _ in range(60):
        sizes = [rnd.randint(0, 9) for _ in range(rnd.randint(1, 7))]
        rows = [{"path": f"part-{i}.parquet", "size": i} for i in range(sum(sizes))]
        starts = [sum(sizes[:k]) for k in range(len(sizes))]
        chunks = [pa.array(rows[s : s + n], add_type) for s, n in zip(starts, sizes, strict=True)]
        adds = pa.chunked_array(chunks, add_type)
        wanted = [rnd.randrange(len(rows)) for _ in range(rnd.randint(0, 2 * len(rows)))] if rows else []
        taken = checkpoint_index._take_rows(adds, pa.array(wanted, pa.int64()))
        assert taken.to_pylist() == adds.combine_chunks().take(pa.array(wanted, pa.int64())).to_pylist()


def test_regrouped_adds_keep_every_add_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """The build's regrouping of the checkpoint's batches: every add once, in order, in chunks of about
    REGROUP_ROWS, the batches' list emptied (each batch freed once copied)."""
    monkeypatch.setattr(checkpoint_index, "REGROUP_ROWS", 10)
    add_type = pa.struct([("path", pa.string())])
    batches = [
        pa.array([{"path": f"{b}-{i}"} for i in range(n)], add_type) for b, n in enumerate([4, 0, 7, 3, 9, 1])
    ]
    expected = pa.chunked_array(batches, add_type).combine_chunks().to_pylist()
    regrouped = checkpoint_index._regrouped(batches)
    assert batches == []
    assert regrouped.combine_chunks().to_pylist() == expected
    assert [len(c) for c in regrouped.chunks] == [4 + 0 + 7, 3 + 9, 1]  # cut once a chunk reaches 10
