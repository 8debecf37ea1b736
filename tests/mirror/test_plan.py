"""The translation (`plan.py`) on its own: a Delta version and the mirror's state in, the Iceberg requests
out, and the state the next version is planned on. No Spark, no Iceberg; the only storage is a small log."""

from __future__ import annotations

from pathlib import Path

import pytest

from dv_assets.mirror.errors import InvalidDeletionVectorError, MirrorInputError
from dv_assets.mirror.iceberg.mirror_table import (
    DELTA_TABLE_ID_PROPERTY,
    DELTA_TIMESTAMP_SUMMARY,
    GC_ENABLED_PROPERTY,
    URI_LOCATIONS_PROPERTY,
    URI_LOCATIONS_SUMMARY,
    CommitOutcome,
    MirrorTable,
)
from dv_assets.mirror.plan import MirrorState
from tests.helpers.plans import HEADER, add_action, log_changes, plan_of, puffin_entry, remove_of


def test_the_first_version_plans_the_table_its_dvs_and_a_whole_commit(tmp_path: Path) -> None:
    root = tmp_path / "delta"
    (v0,) = log_changes(
        root, [*HEADER, add_action("a.parquet", 10), add_action("b.parquet", 5, f"{root}/dv.bin")]
    )
    state = MirrorState.new(str(root), "/warehouse/t", 3)
    plan = plan_of(v0, state, root)

    assert plan.new_table is not None and plan.new_table.properties[DELTA_TABLE_ID_PROPERTY] == "delta-id"
    assert plan.new_table.properties[URI_LOCATIONS_PROPERTY] == "true"
    (task,) = plan.delete_job.tasks
    assert (task.data_file, task.num_records) == (f"{root}/b.parquet", 5)
    # Iceberg names every file by URI: the DV's data file, the table's folder and so its delete files.
    assert plan.delete_job.data_file_paths == {f"{root}/b.parquet": f"file:{root}/b.parquet"}
    assert state.location == "file:/warehouse/t" and plan.delete_job.delta_version == 0
    assert plan.delete_job.layout.puffin_path(0).startswith("file:/warehouse/t/data/dvmirror-v")

    written = puffin_entry(f"{root}/b.parquet", 0)
    request = plan.commit_request([written])
    assert request.base_snapshot_id is None and request.summary[DELTA_TIMESTAMP_SUMMARY] == "1000"
    assert [(f.path, f.record_count) for f in request.add_data_files] == [
        (f"file:{root}/a.parquet", 10),
        (f"file:{root}/b.parquet", 5),
    ]
    assert request.add_delete_files == (written,) and request.remove_delete_files == ()
    assert request.schema is None and request.name_mapping is None and request.properties == {}

    after = state.after(v0.metadata, request, CommitOutcome(7, plan.new_table.schema))
    assert (after.exists, after.base_snapshot_id, after.delta_table_id) == (True, 7, "delta-id")
    assert after.partition_columns == () and after.deletes == {f"{root}/b.parquet": written}
    assert state.deletes == {} and not state.exists  # a value: the state planned on is unchanged


def test_a_dv_update_replaces_its_delete_file_or_is_refused_before_any_is_written(tmp_path: Path) -> None:
    root = tmp_path / "delta"
    v0, v1 = log_changes(
        root,
        [*HEADER, add_action("b.parquet", 5, f"{root}/dv.bin")],
        [
            remove_of(add_action("b.parquet", 5, f"{root}/dv.bin")),
            add_action("b.parquet", 5, f"{root}/dv.bin", offset=40),
        ],
    )
    first = plan_of(v0, MirrorState.new(str(root), "/warehouse/t", 3), root)
    old = puffin_entry(f"{root}/b.parquet", 0)
    state = first.state.after(v0.metadata, first.commit_request([old]), CommitOutcome(7, first.schema))

    plan = plan_of(v1, state, root)
    assert plan.new_table is None and len(plan.delete_job.tasks) == 1
    new = puffin_entry(f"{root}/b.parquet", 1)
    request = plan.commit_request([new])
    assert request.base_snapshot_id == 7 and request.remove_delete_files == (old,)
    after = state.after(v1.metadata, request, CommitOutcome(8, first.schema))
    assert after.deletes == {f"{root}/b.parquet": new}

    with pytest.raises(MirrorInputError) as refused:
        plan_of(v1, MirrorState(str(root), "/warehouse/t", 3, exists=True, schema=first.schema), root)
    assert (refused.value.version, refused.value.file) == (1, f"{root}/b.parquet")


def test_a_dv_outside_the_allowed_roots_is_refused_naming_its_data_file(tmp_path: Path) -> None:
    root = tmp_path / "delta"
    (v0,) = log_changes(root, [*HEADER, add_action("b.parquet", 5, f"{tmp_path}/elsewhere/dv.bin")])
    with pytest.raises(InvalidDeletionVectorError) as refused:
        plan_of(v0, MirrorState.new(str(root), "/warehouse/t", 3), root)
    assert refused.value.file == f"{root}/b.parquet"


def test_an_older_mirror_gets_its_missing_properties_and_mapping_with_the_next_commit(tmp_path: Path) -> None:
    root = tmp_path / "delta"
    v0, v1 = log_changes(root, [*HEADER, add_action("a.parquet", 10)], [add_action("c.parquet", 3)])
    schema = plan_of(v0, MirrorState.new(str(root), "/warehouse/t", 3), root).schema
    table = MirrorTable("ns.t", "/warehouse/t", 3, {}, schema, 7, ())
    state = MirrorState.of(table, str(root), {})
    assert state.stale_mapping and state.pending_properties[GC_ENABLED_PROPERTY] == "false"

    request = plan_of(v1, state, root).commit_request([])
    assert request.properties == state.pending_properties and request.name_mapping is not None
    after = state.after(v1.metadata, request, CommitOutcome(8, schema))
    assert (after.pending_properties, after.stale_mapping, after.delta_table_id) == ({}, False, None)


def test_an_older_mirror_names_its_bare_path_entries_as_recorded_and_new_files_by_uri(tmp_path: Path) -> None:
    """A mirror made before every path was a URI recorded data files (and DVs) as bare paths: Iceberg
    matches them by string, so a DV on such a file, and its removal, name it as recorded; a new file is
    named by its URI. Once no bare path is left the table is marked, and later runs need not look."""
    root = tmp_path / "delta"
    a, b = add_action("a.parquet", 10), add_action("b.parquet", 5, f"{root}/dv.bin")
    v0, v1 = log_changes(
        root,
        [*HEADER, a, b],
        [
            remove_of(a),  # a bare-path file without a DV gets one
            add_action("a.parquet", 10, f"{root}/dv.bin", offset=40),
            remove_of(b),  # a bare-path file with a (bare-path) DV goes
            add_action("c.parquet", 3, f"{root}/dv.bin", offset=80),  # a new file, with a DV
        ],
    )
    schema = plan_of(v0, MirrorState.new(str(root), "/warehouse/t", 3), root).schema
    table = MirrorTable("ns.t", "/warehouse/t", 3, {}, schema, 7, ())
    old_dv = puffin_entry(f"{root}/b.parquet", 0)
    state = MirrorState.of(
        table, str(root), {old_dv.referenced_data_file: old_dv}, [f"{root}/a.parquet", f"{root}/b.parquet"]
    )
    assert URI_LOCATIONS_PROPERTY not in state.pending_properties  # bare paths are left

    plan = plan_of(v1, state, root)
    assert plan.delete_job.data_file_paths == {
        f"{root}/a.parquet": f"{root}/a.parquet",
        f"{root}/c.parquet": f"file:{root}/c.parquet",
    }
    request = plan.commit_request(
        [puffin_entry(f"{root}/a.parquet", 1), puffin_entry(f"file:{root}/c.parquet", 1)]
    )
    assert [f.path for f in request.remove_data_files] == [f"{root}/b.parquet"]
    assert [f.path for f in request.add_data_files] == [f"file:{root}/c.parquet"]
    assert request.remove_delete_files == (old_dv,)
    # Bare paths were live when it was planned: the snapshot does not say otherwise, the next run looks again.
    assert URI_LOCATIONS_SUMMARY not in request.summary

    after = state.after(v1.metadata, request, CommitOutcome(8, schema))
    assert after.recorded_paths == {f"{root}/a.parquet": f"{root}/a.parquet"}
    assert sorted(after.deletes) == [f"{root}/a.parquet", f"{root}/c.parquet"]  # by comparable location
    assert after.delete_file_of(f"file://{root}/c.parquet") == request.add_delete_files[1]

    done = MirrorState.of(table, str(root), {}, [])
    assert done.pending_properties[URI_LOCATIONS_PROPERTY] == "true"
    no_bare_path = MirrorState.of(table, str(root), {old_dv.referenced_data_file: old_dv}, [])
    assert plan_of(v1, no_bare_path, root).commit_request([]).summary[URI_LOCATIONS_SUMMARY] == "true"
    assert URI_LOCATIONS_PROPERTY not in MirrorState.of(table, str(root), {}).pending_properties
