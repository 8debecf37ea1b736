"""Log replay on small hand-written logs: reconciliation cases, checkpoint formats, protocol checks."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from dv_assets.mirror.delta import log as delta_log
from dv_assets.mirror.delta.actions import DeletionVectorDescriptor, Protocol
from dv_assets.mirror.delta.protocol import SUPPORTED_READER_FEATURES, check_protocol
from dv_assets.mirror.delta.replay import DeltaTable
from dv_assets.mirror.errors import MirrorInputError, UnsupportedFeatureError
from tests.helpers.delta_log import (
    CHECKPOINT_SCHEMA,
    METADATA,
    PROTOCOL,
    add,
    assert_checkpoint_state,
    base_commit,
    checkpoint_add,
    checkpoint_rows,
    checkpointed_log,
    dv,
    info,
    names,
    remove,
    write_log,
    write_parquet,
)
from tests.helpers.paths import DELTA_FIXTURES

# --- reconciliation ------------------------------------------------------------------------------


def test_restore_optimize_purge_and_dv_updates(tmp_path: Path) -> None:
    root = write_log(
        tmp_path,
        [
            base_commit(add("a.parquet"), add("b.parquet")),
            [info("DELETE"), remove("a.parquet"), add("a.parquet", dv("dv1"))],
            [info("DELETE"), remove("b.parquet")],
            # RESTORE to v0: b comes back, a goes back to having no DV.
            [info("RESTORE"), add("b.parquet"), remove("a.parquet", dv("dv1")), add("a.parquet")],
            # OPTIMIZE: rewrite without changing data.
            [
                info("OPTIMIZE"),
                remove("a.parquet", data_change=False),
                remove("b.parquet", data_change=False),
                add("c.parquet", data_change=False, rows=20),
            ],
            [info("DELETE"), remove("c.parquet"), add("c.parquet", dv("dv2", 3))],
            # REORG TABLE ... APPLY (PURGE): the file with a DV is rewritten without the deleted rows.
            [
                info("REORG"),
                remove("c.parquet", dv("dv2", 3), data_change=False),
                add("d.parquet", rows=17, data_change=False),
            ],
        ],
    )
    table = DeltaTable(root)
    changes = {c.version: c for c in table.changes(0, 6)}
    assert names(changes[0].added) == ["a.parquet", "b.parquet"] and changes[0].data_change
    assert changes[1].added == changes[1].removed == []
    (before, after) = changes[1].dv_changed[0]
    assert (before.dv_unique_id, after.dv_unique_id) == (None, "udv1@1")
    assert names(changes[2].removed) == ["b.parquet"]
    assert names(changes[3].added) == ["b.parquet"] and changes[3].operation == "RESTORE"
    assert [(b.dv_unique_id, a.dv_unique_id) for b, a in changes[3].dv_changed] == [("udv1@1", None)]
    assert names(changes[4].removed) == ["a.parquet", "b.parquet"] and names(changes[4].added) == [
        "c.parquet"
    ]
    assert not changes[4].data_change
    assert changes[5].dv_changed[0][1].deletion_vector == DeletionVectorDescriptor("u", "dv2", 1, 34, 3)
    # The removed file is reported as it was live, with its DV, so its delete file can go too.
    assert changes[6].removed[0].dv_unique_id == "udv2@1" and names(changes[6].added) == ["d.parquet"]
    assert not changes[6].data_change
    assert names(table.state(6).files.values()) == ["d.parquet"]
    assert len({*changes[0].added, *table.state(0).files.values()}) == 2  # hashable on (location, DV id)
    assert names(table.state(3).files.values()) == ["a.parquet", "b.parquet"]


def test_same_dv_remove_and_add_is_no_change_and_stale_removes_are_ignored(tmp_path: Path) -> None:
    root = write_log(
        tmp_path,
        [
            base_commit(add("a.parquet", dv("dv1")), add("b.parquet")),
            # Recomputed stats: the logical file (a, dv1) is the same.
            [
                info("COMPUTE STATS"),
                remove("a.parquet", dv("dv1"), data_change=False),
                add("a.parquet", dv("dv1"), data_change=False, rows=10),
            ],
            # A remove naming a DV the live file does not have ends nothing (key is path + DV id).
            [info("X"), remove("b.parquet", dv("old"))],
        ],
    )
    table = DeltaTable(root)
    one, two = table.changes(1, 2)
    assert (one.added, one.removed, one.dv_changed, one.data_change) == ([], [], [], False)
    assert (two.added, two.removed, two.dv_changed) == ([], [], [])
    assert names(table.state(2).files.values()) == ["a.parquet", "b.parquet"]


@pytest.mark.parametrize(
    ("commit", "action"),
    [
        # Another DV id for the live file, and its entry not removed: two logical files on one path.
        ([add("part-0.parquet", dv("dv2"))], "add of 'part-0.parquet' with DV udv2@1"),
        ([add("part-0.parquet")], "add of 'part-0.parquet' with DV None"),
        # The same location spelled otherwise (absolute URI, an escaped character): the same DV id, but
        # another file to delta-kernel-rs and delta-rs, which would read the rows twice.
        ([add("file://{root}/part-0.parquet", dv("dv1"))], "add of 'file://{root}/part-0.parquet'"),
        ([add("part%2D0.parquet", dv("dv1"))], "add of 'part%2D0.parquet' with DV udv1@1"),
        # A DV update whose remove spells the path otherwise: that remove ends nothing to Delta Spark and
        # delta-rs, which keep the old entry too and disagree on the rows
        # (tests/mirror/test_locations_spellings.py).
        (
            [remove("part%2D0.parquet", dv("dv1")), add("part-0.parquet", dv("dv2"))],
            "add of 'part-0.parquet' with DV udv2@1",
        ),
        # Added twice by one commit, under two DV ids.
        ([add("new.parquet"), add("new.parquet", dv("dv3"))], "add of 'new.parquet' with DV udv3@1"),
    ],
    ids=["other-dv", "dv-dropped", "absolute-uri", "escaped", "remove-respelled", "twice-in-commit"],
)
def test_a_file_live_twice_is_refused_by_name(tmp_path: Path, commit: list[dict], action: str) -> None:
    commit = json.loads(json.dumps(commit).replace("{root}", str(tmp_path)))
    root = write_log(tmp_path, [base_commit(add("part-0.parquet", dv("dv1"))), [info("WRITE"), *commit]])
    table = DeltaTable(root)
    assert len(table.state(0).files) == 1
    for read in (
        lambda: table.state(1),
        lambda: list(table.changes(0, 1)),
        lambda: list(table.changes(1, 1)),
    ):
        with pytest.raises(MirrorInputError) as err:
            read()
        assert (err.value.table, err.value.version) == (str(root), 1)
        assert Path(err.value.file).name in {"part-0.parquet", "new.parquet"}
        assert err.value.reason.startswith(action.replace("{root}", str(tmp_path))), err.value.reason
        assert "the log is invalid, refused" in err.value.reason


@pytest.mark.parametrize(
    "spelling",
    [
        "{root}/p=a/part-0.parquet",
        "file://{root}/p=a/part-0.parquet",
        "file:{root}/p=a/part-0.parquet",
        "p%3Da/part-0.parquet",
        "p=a/part%2D0.parquet",
    ],
)
def test_a_remove_naming_the_live_file_otherwise_ends_nothing(tmp_path: Path, spelling: str) -> None:
    """Delta Spark and delta-rs key log replay on the path as written: such a remove leaves the live
    entry (and its DV) as it was, to both alike (reader table in
    tests/mirror/test_locations_spellings.py), so replay ignores it as it ignores a stale DV id; a DV
    update whose add keeps the live spelling stays refused."""
    path = spelling.replace("{root}", str(tmp_path))
    root = write_log(
        tmp_path,
        [
            base_commit(add("p=a/part-0.parquet", dv("dv1")), add("b.parquet")),
            [info("DELETE"), remove(path, dv("dv1"))],
            [info("DELETE"), remove("b.parquet")],
        ],
    )
    table = DeltaTable(root)
    one, two = table.changes(1, 2)
    assert (one.added, one.removed, one.dv_changed) == ([], [], [])
    assert names(two.removed) == ["b.parquet"]
    (live,) = table.state(2).files.values()
    assert (live.path, live.dv_unique_id) == ("p=a/part-0.parquet", "udv1@1")
    write_log(
        root, [[info("DELETE"), remove(path, dv("dv1")), add("p=a/part-0.parquet", dv("dv2"))]], first=3
    )
    with pytest.raises(MirrorInputError) as err:
        table.state(3)
    assert err.value.reason.startswith("add of 'p=a/part-0.parquet' with DV udv2@1"), err.value.reason
    assert f"its remove of {path!r} spells the path otherwise" in err.value.reason


@pytest.mark.parametrize(
    ("live", "removed"),
    [("{root}/x.parquet", "file://{root}/x.parquet"), ("file:{root}/x.parquet", "{root}/x.parquet")],
)
def test_a_remove_of_an_absolute_path_spelled_otherwise_is_refused(
    tmp_path: Path, live: str, removed: str
) -> None:
    """Two absolute spellings: Delta Spark removes the file, delta-rs keeps it (test_path_spellings)."""
    live, removed = (p.replace("{root}", str(tmp_path)) for p in (live, removed))
    root = write_log(tmp_path, [base_commit(add(live)), [info("DELETE"), remove(removed)]])
    with pytest.raises(MirrorInputError) as err:
        DeltaTable(root).state(1)
    assert err.value.reason.startswith(f"remove of {removed!r} while the same data file is live as {live!r}")
    assert "readers disagree, refused" in err.value.reason and err.value.version == 1
    assert Path(err.value.file).name == "x.parquet"


def test_identical_re_adds_and_dv_updates_in_either_order_stay_legal(tmp_path: Path) -> None:
    root = write_log(
        tmp_path,
        [
            base_commit(add("part-0.parquet", dv("dv1")), add("b%20c.parquet")),
            # The same logical file (path as written, DV id) added again without a remove, e.g. with
            # recomputed stats: one entry to every reader.
            [info("COMPUTE STATS"), add("part-0.parquet", dv("dv1"), data_change=False, rows=11)],
            # A DV update written add first (as in log-replay-dv-key-cases), and an escaped path kept.
            [
                info("DELETE"),
                add("part-0.parquet", dv("dv2")),
                remove("part-0.parquet", dv("dv1")),
                remove("b%20c.parquet"),
                add("b%20c.parquet", dv("dv3")),
            ],
        ],
    )
    table = DeltaTable(root)
    one, two = table.changes(1, 2)
    assert (one.added, one.removed, one.dv_changed) == ([], [], [])
    assert table.state(1).files[f"{root}/part-0.parquet"].num_records == 11
    assert {(b.dv_unique_id, a.dv_unique_id) for b, a in two.dv_changed} == {
        (None, "udv3@1"),
        ("udv1@1", "udv2@1"),
    }
    assert names(table.state(2).files.values()) == ["b c.parquet", "part-0.parquet"]


def test_missing_commit_info_stats_and_unknown_actions_are_tolerated(tmp_path: Path) -> None:
    root = write_log(
        tmp_path,
        [
            [{"protocol": PROTOCOL}, {"metaData": METADATA}, add("a.parquet", rows=None)],
            [
                {"txn": {"appId": "x", "version": 3}},
                {"domainMetadata": {"domain": "d", "configuration": "{}", "removed": False}},
                {
                    "cdc": {
                        "path": "_change_data/c.parquet",
                        "partitionValues": {},
                        "size": 1,
                        "dataChange": False,
                    }
                },
                {"checkpointMetadata": {"version": 1}},
                {"someFutureAction": {"x": 1}},
                add("b.parquet"),
            ],
        ],
    )
    table = DeltaTable(root)
    first, second = table.changes(0, 1)
    assert first.commit_info == {} and first.operation is None
    assert first.added[0].num_records is None and first.added[0].stats is None
    assert names(second.added) == ["b.parquet"] and second.added[0].num_records == 10


def test_metadata_and_protocol_changes_are_flagged(tmp_path: Path) -> None:
    wider = {**METADATA, "configuration": {"delta.enableDeletionVectors": "false"}}
    root = write_log(
        tmp_path,
        [
            base_commit(add("a.parquet")),
            [info("X"), {"metaData": METADATA}],
            [info("Y"), {"metaData": wider}],
        ],
    )
    zero, one, two = DeltaTable(root).changes(0, 2)
    assert zero.metadata_changed and zero.protocol_changed
    assert not one.metadata_changed and not one.protocol_changed
    assert two.metadata_changed and two.metadata.configuration == wider["configuration"]


def test_commit_info_is_parsed_once_into_typed_fields(tmp_path: Path) -> None:
    typed = {
        "timestamp": 1700000000123,
        "inCommitTimestamp": 1700000000456,
        "operation": "DELETE",
        "operationParameters": {"predicate": '["id = 1"]'},
        "engineInfo": "x",
    }
    # A free-form action: values of another type than Delta writes read as unknown, never guessed.
    odd = {"timestamp": "1700000000999", "operation": 7, "operationParameters": "p"}
    root = write_log(
        tmp_path,
        [
            base_commit(add("a.parquet")),
            [{"commitInfo": typed}],
            [{"commitInfo": odd}],
            [{"commitInfo": "x"}],
        ],
    )
    table = DeltaTable(root)
    zero, one, two = table.changes(0, 2)
    info = one.commit_info
    assert (info.timestamp, info.in_commit_timestamp, info.operation) == (
        1700000000123,
        1700000000456,
        "DELETE",
    )
    assert info.operation_parameters == {"predicate": '["id = 1"]'} and info.raw == typed == info
    assert info.timestamp_text == "1700000000123" and one.operation == "DELETE"
    assert table.commit_info(1) == info and table.commit_info(0) == zero.commit_info
    assert (zero.commit_info.timestamp, zero.commit_info.operation) == (1, "WRITE")
    weird = two.commit_info
    assert (weird.timestamp, weird.timestamp_text, weird.operation, two.operation) == (None, "", None, None)
    assert weird.operation_parameters == {"value": "p"} and weird.raw == odd
    with pytest.raises(MirrorInputError, match="commitInfo action is not a JSON object") as err:
        table.commit_info(3)
    assert (err.value.table, err.value.version) == (str(root), 3)
    assert err.value.file.endswith(f"{3:020d}.json")


# --- checkpoints ---------------------------------------------------------------------------------


def test_classic_single_file_checkpoint_with_stats_parsed(tmp_path: Path) -> None:
    root = checkpointed_log(tmp_path)
    write_parquet(root / "_delta_log" / f"{1:020d}.checkpoint.parquet", checkpoint_rows())
    assert_checkpoint_state(root)


def test_multi_part_checkpoint_and_incomplete_parts(tmp_path: Path) -> None:
    root = checkpointed_log(tmp_path)
    rows = checkpoint_rows()
    log = root / "_delta_log"
    for part, chunk in enumerate((rows[:2], rows[2:4], rows[4:]), start=1):
        write_parquet(log / f"{1:020d}.checkpoint.{part:010d}.{3:010d}.parquet", chunk)
    assert_checkpoint_state(root)
    # A checkpoint that lost a part is not a checkpoint; with the commits gone, nothing is reconstructable.
    (log / f"{1:020d}.checkpoint.{2:010d}.{3:010d}.parquet").unlink()
    with pytest.raises(MirrorInputError, match="cannot be reconstructed"):
        DeltaTable(root).state(2)


def test_a_checkpoint_listing_a_file_twice_is_refused(tmp_path: Path) -> None:
    root = checkpointed_log(tmp_path)
    twice = checkpoint_add(f"file://{root}/a.parquet", dv("dv1", 2), 10)
    write_parquet(root / "_delta_log" / f"{1:020d}.checkpoint.parquet", [*checkpoint_rows(), twice])
    with pytest.raises(MirrorInputError, match="the checkpoint lists the data file twice") as err:
        DeltaTable(root).state(2)
    assert (err.value.table, err.value.version, err.value.file) == (str(root), 1, f"{root}/a.parquet")


@pytest.mark.parametrize("top_level_format", ["json", "parquet"])
def test_v2_checkpoint_with_sidecars(tmp_path: Path, top_level_format: str) -> None:
    root = checkpointed_log(tmp_path)
    log = root / "_delta_log"
    rows = checkpoint_rows()
    write_parquet(log / "_sidecars" / "s1.parquet", rows[3:4])
    write_parquet(log / "_sidecars" / "s%202.parquet", rows[4:])  # the sidecar path is URL-encoded too
    sidecars = [
        {"sidecar": {"path": "s1.parquet", "sizeInBytes": 1, "modificationTime": 1}},
        {"sidecar": {"path": "s%25202.parquet", "sizeInBytes": 1, "modificationTime": 1}},
    ]
    top = [{"checkpointMetadata": {"version": 1}}, *rows[:3], *sidecars]
    name = f"{1:020d}.checkpoint.3a0d65cd-4056-49b8-937b-95f9e3ee90e5.{top_level_format}"
    if top_level_format == "json":
        top[1:3] = [{"protocol": PROTOCOL}, {"metaData": METADATA}]
        (log / name).write_text("".join(json.dumps(a) + "\n" for a in top))
    else:
        schema = CHECKPOINT_SCHEMA.append(
            pa.field(
                "sidecar",
                pa.struct(
                    [("path", pa.string()), ("sizeInBytes", pa.int64()), ("modificationTime", pa.int64())]
                ),
            )
        ).append(pa.field("checkpointMetadata", pa.struct([("version", pa.int64())])))
        write_parquet(log / name, top, schema)
    assert_checkpoint_state(root)
    (log / "_sidecars" / "s1.parquet").unlink()
    with pytest.raises(MirrorInputError) as err:
        DeltaTable(root).state(1)
    assert err.value.version == 1 and err.value.file.endswith("_sidecars/s1.parquet")


def test_replay_starts_at_the_newest_checkpoint(copy_fixture) -> None:
    original = DeltaTable(DELTA_FIXTURES / "dv-partitioned-with-checkpoint")
    root = copy_fixture("dv-partitioned-with-checkpoint")
    # Corrupt every commit before the checkpoint at 10: state(10..15) must not read them.
    for v in range(10):
        (root / "_delta_log" / f"{v:020d}.json").write_text("not json\n")
    # A stale `_last_checkpoint` is only a hint; the listing decides.
    (root / "_delta_log" / "_last_checkpoint").write_text('{"version": 99, "size": 1}')
    table = DeltaTable(root)
    for v in (10, 15):
        assert names(table.state(v).files.values()) == names(original.state(v).files.values())
    with pytest.raises(MirrorInputError, match="not JSON") as err:
        table.state(9)
    assert err.value.file.endswith(f"{0:020d}.json")


# --- protocol -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("protocol", "refused"),
    [
        (Protocol(1, 2), None),
        (Protocol(2, 5), None),  # legacy column mapping
        (Protocol(3, 7, frozenset(SUPPORTED_READER_FEATURES), frozenset({"appendOnly"})), None),
        (Protocol(3, 7, frozenset({"deletionVectors", "vacuumProtocolCheck"})), None),
        (
            Protocol(3, 7, frozenset({"deletionVectors", "typeWidening", "catalogManaged"})),
            "catalogManaged (a catalog-managed table keeps its newest commits in its catalog",
        ),
        (
            Protocol(3, 7, frozenset({"catalogOwned-preview"})),
            "catalogOwned-preview (a catalog-managed table keeps its newest commits in its catalog",
        ),
        (Protocol(3, 7, frozenset({"deletionVectors", "typeWidening-preview"})), None),
        (
            Protocol(3, 7, frozenset({"variantType", "variantShredding"})),
            "variantShredding (shredded VARIANT files are not mirrored: DuckDB 1.5.5",
        ),
        (Protocol(3, 7, frozenset({"deletionVectors", "variantType-preview"})), None),
        (Protocol(3, 7, frozenset({"deletionVectors", "zorbFeature"})), "zorbFeature (unknown to dv-mirror)"),
        (Protocol(4, 7, frozenset()), "minReaderVersion=4"),
    ],
)
def test_check_protocol_names_refused_features(protocol: Protocol, refused: str | None) -> None:
    if refused is None:
        check_protocol(protocol, table="t", version=3)
        return
    with pytest.raises(UnsupportedFeatureError) as err:
        check_protocol(protocol, table="t", version=3)
    assert refused in err.value.reason and (err.value.table, err.value.version) == ("t", 3)


def test_replay_refuses_an_unsupported_reader_feature(tmp_path: Path) -> None:
    protocol = {**PROTOCOL, "readerFeatures": ["deletionVectors", "catalogManaged"]}
    root = write_log(tmp_path, [base_commit(add("a.parquet")), [info("ALTER"), {"protocol": protocol}]])
    assert len(DeltaTable(root).state(0).files) == 1
    with pytest.raises(UnsupportedFeatureError, match="catalogManaged") as err:
        DeltaTable(root).state(1)
    assert err.value.version == 1 and err.value.table == str(root)
    assert "its newest commits in its catalog, not in _delta_log" in err.value.reason
    with pytest.raises(UnsupportedFeatureError, match="catalogManaged"):
        list(DeltaTable(root).changes(0, 1))
    assert DeltaTable(root, enforce_protocol=False).state(1).protocol.reader_features == {
        "deletionVectors",
        "catalogManaged",
    }


@pytest.mark.parametrize("path", ["../../victim.parquet", "/elsewhere/s1.parquet", "sub/s1.parquet"])
def test_a_sidecar_outside_the_sidecars_folder_is_refused(tmp_path: Path, path: str) -> None:
    root = checkpointed_log(tmp_path)
    log = root / "_delta_log"
    rows = checkpoint_rows()
    top = [{"checkpointMetadata": {"version": 1}}, {"protocol": PROTOCOL}, {"metaData": METADATA}]
    top.append({"sidecar": {"path": path, "sizeInBytes": 1, "modificationTime": 1}})
    name = f"{1:020d}.checkpoint.3a0d65cd-4056-49b8-937b-95f9e3ee90e5.json"
    (log / name).write_text("".join(json.dumps(a) + "\n" for a in top))
    write_parquet(tmp_path / "victim.parquet", rows[3:])
    with pytest.raises(MirrorInputError, match="is not a file of") as err:
        DeltaTable(root).state(1)
    assert err.value.version == 1


# --- column mapping: the configuration's mode takes effect only where the protocol supports it -----------

NAME_MODE = {
    **METADATA,
    "schemaString": json.dumps(
        {
            "type": "struct",
            "fields": [
                {"name": "id", "type": "long", "nullable": True, "metadata": {}},
                {"name": "p", "type": "string", "nullable": True, "metadata": {}},
            ],
        }
    ),
    "partitionColumns": ["p"],
    "configuration": {"delta.columnMapping.mode": "name"},
}
ANNOTATED = {
    **NAME_MODE,
    "schemaString": json.dumps(
        {
            "type": "struct",
            "fields": [
                {"name": n, "type": t, "nullable": True, "metadata": {"delta.columnMapping.id": i, **phys}}
                for n, t, i, phys in [
                    ("id", "long", 1, {"delta.columnMapping.physicalName": "col-1"}),
                    ("p", "string", 2, {"delta.columnMapping.physicalName": "col-2"}),
                ]
            ],
        }
    ),
}
FEATURES = {"minReaderVersion": 3, "minWriterVersion": 7}


@pytest.mark.parametrize(
    ("protocol", "mode"),
    [
        ({"minReaderVersion": 1, "minWriterVersion": 2}, "none"),
        ({**FEATURES, "readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors"]}, "none"),
        # Not a table feature unless in writerFeatures, as delta-kernel-rs reads the protocol.
        ({**FEATURES, "readerFeatures": ["columnMapping"], "writerFeatures": ["deletionVectors"]}, "none"),
        ({"minReaderVersion": 2, "minWriterVersion": 5}, "name"),
        ({**FEATURES, "readerFeatures": ["columnMapping"], "writerFeatures": ["columnMapping"]}, "name"),
        # Delta Spark once listed it in writerFeatures only (delta-io/delta#3154): still column-mapped.
        ({**FEATURES, "readerFeatures": ["deletionVectors"], "writerFeatures": ["columnMapping"]}, "name"),
    ],
    ids=["legacy-1", "features-without", "reader-list-only", "legacy-2", "feature", "writer-list-only"],
)
def test_column_mapping_mode_follows_the_protocol(tmp_path: Path, protocol: dict, mode: str) -> None:
    partitioned = add("p=x/a.parquet")
    partitioned["add"]["partitionValues"] = {"p": "x"}
    root = write_log(
        tmp_path, [[info("WRITE"), {"protocol": protocol}, {"metaData": NAME_MODE}, partitioned]]
    )
    table = DeltaTable(root)
    state = table.state(0)
    (change,) = table.changes(0, 0)
    for metadata in (state.metadata, change.metadata):
        assert metadata.configuration == {"delta.columnMapping.mode": "name"}
        assert metadata.column_mapping_mode == mode
        assert metadata.physical_names == {"id": "id", "p": "p"}


def test_a_protocol_upgrade_alone_switches_column_mapping_on(tmp_path: Path) -> None:
    root = write_log(
        tmp_path,
        [
            [
                info("WRITE"),
                {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
                {"metaData": NAME_MODE},
            ],
            [info("UPGRADE PROTOCOL"), {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}}],
            [info("WRITE"), add("p=y/b.parquet")],
        ],
    )
    zero, one, two = DeltaTable(root).changes(0, 2)
    assert [c.metadata.column_mapping_mode for c in (zero, one, two)] == ["none", "name", "name"]
    assert [(c.protocol_changed, c.metadata_changed) for c in (one, two)] == [(True, True), (False, False)]
    (mid,) = DeltaTable(root).changes(1, 1)
    assert mid.metadata_changed and mid.metadata.column_mapping_mode == "name"


def test_column_mapping_annotations_under_a_protocol_without_it_are_refused(tmp_path: Path) -> None:
    root = write_log(
        tmp_path,
        [
            [
                info("WRITE"),
                {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}},
                {"metaData": ANNOTATED},
            ],
            # Back to a protocol without column mapping: the files' physical names would be ignored.
            [info("X"), {"protocol": PROTOCOL}],
        ],
    )
    table = DeltaTable(root)
    assert table.state(0).metadata.physical_names == {"id": "col-1", "p": "col-2"}
    for read in (lambda: table.state(1), lambda: list(table.changes(0, 1))):
        with pytest.raises(UnsupportedFeatureError, match="does not support column mapping") as err:
            read()
        assert (err.value.table, err.value.version) == (str(root), 1)
        assert "'name'" in err.value.reason and "writerFeatures ['deletionVectors']" in err.value.reason
    # Not enforced (the Dagster sensors' view of a table): the mode readers following the protocol apply.
    assert DeltaTable(root, enforce_protocol=False).state(1).metadata.column_mapping_mode == "none"


# --- compact state: stats text kept only while someone may read it; checkpoints streamed ---------------


def test_changes_hand_out_stats_of_added_files_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_log(
        tmp_path,
        [
            base_commit(add("a.parquet", rows=7), add("b.parquet", rows=8)),
            [info("DELETE"), remove("a.parquet"), add("a.parquet", dv("dv1"), rows=7)],
            [info("DELETE"), remove("b.parquet"), remove("a.parquet", dv("dv1"))],
        ],
    )
    zero, one, two = DeltaTable(root).changes(0, 2)
    # Added files carry their stats (the mirror's Iceberg metrics), also after later changes were read.
    assert [json.loads(f.stats or "null") for f in zero.added] == [{"numRecords": 7}, {"numRecords": 8}]
    before, after = one.dv_changed[0]
    # DV updates and files as they were live before: every field but the stats text, row counts included.
    assert (after.stats, after.num_records, after.dv_unique_id) == (None, 7, "udv1@1")
    assert before.stats is None and before.num_records == 7 and before == zero.added[0]
    assert sorted((f.stats, f.num_records) for f in two.removed) == [(None, 7), (None, 8)]
    assert {f.dv_unique_id for f in two.removed} == {"udv1@1", None}
    # A range starting mid-log reads the state before it without stats at all.
    (mid,) = DeltaTable(root).changes(2, 2)
    assert sorted((f.stats, f.num_records) for f in mid.removed) == [(None, 7), (None, 8)]
    # Commits are read a chunk at a time; lines cut across chunks read the same.
    monkeypatch.setattr(delta_log, "JSON_CHUNK_BYTES", 5)
    assert list(DeltaTable(root).changes(0, 2)) == [zero, one, two]


def test_state_without_stats_keeps_row_counts(tmp_path: Path) -> None:
    root = checkpointed_log(tmp_path)
    write_parquet(root / "_delta_log" / f"{1:020d}.checkpoint.parquet", checkpoint_rows())
    table = DeltaTable(root)
    for version in (1, 2):
        lean = table.state(version, with_stats=False).files
        full = table.state(version).files
        assert lean == full  # the stats text takes no part in equality
        assert all(f.stats is None for f in lean.values()) and all(f.stats for f in full.values())
        assert {Path(loc).name: f.num_records for loc, f in lean.items()} == {
            "a.parquet": 10,
            "b c.parquet": 5,
        }


def test_checkpoint_is_streamed_in_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = checkpointed_log(tmp_path)
    rows = checkpoint_rows()[:2] + [checkpoint_add(f"f{i}.parquet", None, i) for i in range(25)]
    write_parquet(
        root / "_delta_log" / f"{1:020d}.checkpoint.parquet", rows[:20] + checkpoint_rows()[3:] + rows[20:]
    )
    monkeypatch.setattr(delta_log, "CHECKPOINT_BATCH_ROWS", 4)
    for with_stats in (True, False):
        files = {
            Path(loc).name: f for loc, f in DeltaTable(root).state(1, with_stats=with_stats).files.items()
        }
        assert len(files) == 27
        assert {name: f.num_records for name, f in files.items() if name.startswith("f")} == {
            f"f{i}.parquet": i for i in range(25)
        }
        assert files["a.parquet"].deletion_vector == DeletionVectorDescriptor("u", "dv1", 1, 34, 2)
        assert (files["f3.parquet"].stats is not None) is with_stats


def test_live_files_share_repeated_values_and_keep_their_raw_path(tmp_path: Path) -> None:
    adds = [add(f"p=x/f{i}.parquet", dv("shared")) for i in range(3)]
    for action in adds:
        action["add"]["partitionValues"] = {"p": "x"}
    adds.append(add("p=x%20y/g.parquet"))
    root = write_log(tmp_path, [base_commit(*adds)])
    files = sorted(DeltaTable(root).state(0).files.values(), key=lambda f: f.path)
    assert [f.path for f in files] == [
        "p=x%20y/g.parquet",
        "p=x/f0.parquet",
        "p=x/f1.parquet",
        "p=x/f2.parquet",
    ]
    assert files[0].location == f"{root}/p=x y/g.parquet"
    assert files[1].partition_values is files[2].partition_values == {"p": "x"}
    assert files[1].deletion_vector.path_or_inline_dv is files[3].deletion_vector.path_or_inline_dv
    with pytest.raises(TypeError, match="read-only"):
        files[1].partition_values["p"] = "y"  # type: ignore[index]
    assert "path='p=x/f0.parquet'" in repr(files[1])
