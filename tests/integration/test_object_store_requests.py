"""What a mirror costs an object store, in requests: a Delta DV table on S3 (moto's server on loopback,
behind a proxy counting every request by kind) mirrored by the engine, the CLI's JVM-free answers and the
follow poll. The counts are pinned so that a regression to a request per data file fails here, and the
guarantees stay those of a local disk: a data file missing or of another size is refused by name.

The Iceberg warehouse is a local folder: the requests counted are the Delta side's, the ones that grow
with the table."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.follow import LogWatch
from dv_assets.mirror.io import FileIO
from dv_assets.mirror.settings import CatalogConfig
from dv_assets.mirror.sync import sync_table
from testkit.object_store import S3Store, s3_store
from testkit.synthetic import SyntheticTable

pytestmark = pytest.mark.integration

# Over one listing page (1,000 keys), so the listing's paging is part of what is pinned.
FILES = 1_200
# The refusals' tables: a listing of one page answers for them as for any.
SMALL_FILES = 40
ROWS_PER_FILE = 10
BUCKET = "lake"


# The module's tables, written locally and held by the server from its start: name → files.
TABLES = {
    "counted": FILES,
    "damaged_missing": SMALL_FILES,
    "damaged_wrong_size": SMALL_FILES,
    "backlog": SMALL_FILES,
}


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SyntheticTable]:
    """Synthetic Delta DV tables (version 0 and its checkpoint), by name."""
    folder = tmp_path_factory.mktemp("tables")
    made = {}
    for name, files in TABLES.items():
        table = SyntheticTable(folder / name, rows_per_file=ROWS_PER_FILE)
        table.create(files, real=10)
        table.write_checkpoint()
        made[name] = table
    return made


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, tables: dict[str, SyntheticTable]) -> Iterator[S3Store]:
    preload = {f"{BUCKET}/{name}": table.root for name, table in tables.items()}
    with s3_store(tmp_path_factory.mktemp("s3"), preload=preload) as server:
        yield server


def _location(name: str) -> str:
    return f"s3://{BUCKET}/{name}"


def _upload_new(store: S3Store, local: SyntheticTable, name: str, before: set[Path]) -> None:
    """The files a local change wrote (and `_last_checkpoint`), copied to the bucket."""
    filesystem = store.filesystem()
    for path in local.root.rglob("*"):
        if path.is_file() and (path not in before or path.name == "_last_checkpoint"):
            key = f"{BUCKET}/{name}/{path.relative_to(local.root).as_posix()}"
            with filesystem.open_output_stream(key) as out:
                out.write(path.read_bytes())


def _cli(store: S3Store, catalog: CatalogConfig, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    properties = {**catalog.properties, **store.catalog_properties()}
    flags = [f for key, value in properties.items() for f in ("--catalog-property", f"{key}={value}")]
    dvmirror = Path(sys.executable).with_name("dvmirror")
    return subprocess.run(
        [str(dvmirror), *args, *flags], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_request_counts_of_a_first_version_a_small_one_a_no_op_status_and_a_poll(
    spark, catalog: CatalogConfig, store: S3Store, tables: dict[str, SyntheticTable], tmp_path: Path
) -> None:
    local, root = tables["counted"], _location("counted")
    io = FileIO(store.catalog_properties())

    with store.counting() as first:
        result = sync_table(spark, root, "s3_requests.counted", io=io)
    assert result.mirrored_versions == [0]
    # The bound: files/500 + 50. Today: the log (a listing, `_last_checkpoint`, the checkpoint
    # read by the walk and by the sync), one listing of the table's folder (2 pages) for every file.
    assert first.total <= FILES / 500 + 50, first.snapshot()
    assert first.snapshot()["HEAD"] <= 10, first.snapshot()  # never one per data file
    assert first.snapshot()["LIST"] == 1 + 2, first.paths  # the log, then 1,202 keys in 2 pages

    before = set(local.root.rglob("*"))
    version, _ = local.delete(local.files[:10], lambda i: [i % 5, 9 - i % 5])
    _upload_new(store, local, "counted", before)
    with store.counting() as small:
        result = sync_table(spark, root, "s3_requests.counted", io=io)
    assert result.mirrored_versions == [version]
    assert small.total <= 30, small.paths
    snapshot = result.versions[0]
    assert (snapshot.dvs_written, snapshot.rows_deleted_by_new_dvs) == (10, 20)

    with store.counting() as no_op:
        answer = _cli(store, catalog, "sync", root, "--table", "s3_requests.counted", cwd=tmp_path)
    assert answer.returncode == 0, answer.stderr
    assert f"up to date with {root} at version {version}" in answer.stdout
    assert no_op.total <= 5, no_op.paths

    with store.counting() as status:
        answer = _cli(store, catalog, "status", "s3_requests.counted", cwd=tmp_path)
    assert answer.returncode == 0, answer.stderr
    assert "lag:                  0 versions" in answer.stdout, answer.stdout
    assert status.total <= 5, status.paths

    watch = LogWatch(root, io)
    last = watch.last_commit(version)
    with store.counting() as poll:
        assert not watch.changed(version, last)
    assert poll.total <= 2, poll.paths
    before = set(local.root.rglob("*"))
    local.append(1)
    _upload_new(store, local, "counted", before)
    with store.counting() as poll:
        assert watch.changed(version, last)
    assert poll.total == 1, poll.paths  # the next commit is there: nothing else asked


@pytest.mark.parametrize("damage", ["missing", "wrong size"])
def test_a_data_file_missing_or_resized_on_s3_is_refused_by_name(
    spark, catalog: CatalogConfig, store: S3Store, tables: dict[str, SyntheticTable], damage: str
) -> None:
    """The listing answers for the whole table, and still refuses by name what a stat per file refused."""
    name = f"damaged_{damage.replace(' ', '_')}"
    local, root = tables[name], _location(name)
    victim = local.files[SMALL_FILES // 2]
    key = f"{BUCKET}/{name}/{victim}"
    filesystem = store.filesystem()
    if damage == "missing":
        filesystem.delete_file(key)
    else:
        with filesystem.open_output_stream(key) as out:
            out.write(local.content + b"\0")
    with pytest.raises(MirrorInputError) as refused:
        sync_table(spark, root, f"s3_requests.{name}", io=FileIO(store.catalog_properties()))
    assert (refused.value.table, refused.value.version) == (root, 0)
    assert refused.value.file == f"{root}/{victim}"
    reason = "is readable" if damage == "missing" else f"the log's add.size says {len(local.content)}"
    assert reason in str(refused.value)
    assert not catalog.pyiceberg_catalog().table_exists(f"s3_requests.{name}")


def test_a_backlog_reads_each_commit_once_ahead_of_the_replay(
    spark, catalog: CatalogConfig, store: S3Store, tables: dict[str, SyntheticTable]
) -> None:
    """Twenty commits of one new file each mirrored in one run: each commit read once (a HEAD and a GET,
    in the background while the version before it is mirrored), each new file asked once, and the mirror
    exactly the log's."""
    local, root = tables["backlog"], _location("backlog")
    io = FileIO(store.catalog_properties())
    assert sync_table(spark, root, "s3_requests.backlog", io=io).mirrored_versions == [0]
    before = set(local.root.rglob("*"))
    versions = [local.append(1) for _ in range(20)]
    _upload_new(store, local, "backlog", before)
    with store.counting() as backlog:
        result = sync_table(spark, root, "s3_requests.backlog", io=io)
    assert result.mirrored_versions == versions
    commit_reads = [p for kind, p in backlog.paths if kind == "GET" and p.endswith(".json")]
    assert len(commit_reads) == len(set(commit_reads)) == len(versions) + 1, (
        commit_reads
    )  # + the mirrored one
    assert backlog.total <= 3 * len(versions) + 10, backlog.paths
    files = catalog.pyiceberg_catalog().load_table("s3_requests.backlog").inspect.files()
    assert files.num_rows == SMALL_FILES + len(versions)


def test_the_benchs_sorted_listing_answers_as_motos_own(
    tables: dict[str, SyntheticTable], tmp_path: Path
) -> None:
    """The bench's server (`sorted_listing`) lists what moto lists, page by page: every key and size."""
    import pyarrow.fs as pafs

    preload = {f"{BUCKET}/{name}": table.root for name, table in tables.items()}
    answers = []
    for sorted_listing in (False, True):
        with s3_store(
            tmp_path / str(sorted_listing), preload=preload, sorted_listing=sorted_listing
        ) as server:
            filesystem = server.filesystem(through_proxy=True)
            with server.counting() as listed:
                found = filesystem.get_file_info(pafs.FileSelector(f"{BUCKET}/counted", recursive=True))
                under_log = filesystem.get_file_info(pafs.FileSelector(f"{BUCKET}/counted/_delta_log"))
            answers.append(([(i.path, i.size) for i in found], [i.path for i in under_log], listed.total))
    assert answers[0] == answers[1]
    # Every file and folder of the table as it is now (earlier tests grew it): `_delta_log`, the folder of
    # the builder's hard links.
    entries = list(tables["counted"].root.rglob("*"))
    assert len(answers[0][0]) == len(entries) >= FILES + 3 + 1
