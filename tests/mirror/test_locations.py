"""Log paths decode exactly once and resolve against the table root."""

from __future__ import annotations

from pathlib import Path

import pytest

from dv_assets.mirror.delta.paths import readers_keep_apart
from dv_assets.mirror.errors import MirrorInputError
from dv_assets.mirror.locations import (
    TableLocation,
    _resolve,
    is_remote,
    resolve_location,
    same_location,
    store_of,
    table_root_of,
)

ROOT = "/data/my table"


@pytest.mark.parametrize(
    ("path", "location"),
    [
        ("part-0.parquet", "/data/my table/part-0.parquet"),
        # Delta Spark's encoding of the Hive directory `p=a%25b c` (partition value "a%b c").
        ("p=a%2525b%20c/part-0.parquet", "/data/my table/p=a%25b c/part-0.parquet"),
        ("p=x&y%253Dz/part-0.parquet", "/data/my table/p=x&y%3Dz/part-0.parquet"),
        ("p=%C3%A9%20%C3%BC/f.parquet", "/data/my table/p=é ü/f.parquet"),
        ("p=é%20ü/f.parquet", "/data/my table/p=é ü/f.parquet"),
        ("file:/other/a%20b/f.parquet", "/other/a b/f.parquet"),
        ("file:///other/a%2520b/f.parquet", "/other/a%20b/f.parquet"),
        ("file://localhost/other/f.parquet", "/other/f.parquet"),
        ("/abs/a%20b.parquet", "/abs/a b.parquet"),
        ("s3://bucket/t/a%20b/f.parquet", "s3://bucket/t/a b/f.parquet"),
    ],
)
def test_resolve_location_decodes_once(path: str, location: str) -> None:
    assert resolve_location(ROOT, path) == location


def test_resolve_location_against_a_remote_root() -> None:
    root = "s3://bucket/tables/t"
    assert resolve_location(root, "p=a%20b/f.parquet") == "s3://bucket/tables/t/p=a b/f.parquet"
    assert resolve_location(root, "/elsewhere/f.parquet") == "s3://bucket/elsewhere/f.parquet"
    assert resolve_location(root, "gs://other/f%25.parquet") == "gs://other/f%.parquet"


@pytest.mark.parametrize("path", ["p=100%/f.parquet", "a%2/f.parquet", "a%zz.parquet"])
def test_malformed_escapes_are_refused_with_the_path(path: str) -> None:
    with pytest.raises(MirrorInputError) as err:
        resolve_location(ROOT, path)
    assert err.value.file == path and err.value.table == ROOT


def test_remote_file_uri_host_is_refused() -> None:
    with pytest.raises(MirrorInputError, match="remote host"):
        resolve_location(ROOT, "file://server/share/f.parquet")


def test_table_root_of(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert table_root_of(Path("t")) == f"{tmp_path}/t"
    assert table_root_of(f"{tmp_path}/t/") == f"{tmp_path}/t"
    assert table_root_of("file:///data/my%20table/") == "/data/my table"
    assert table_root_of("file:/data/x") == "/data/x"
    # A plain path is a name on disk, not a URI: its `%` is literal.
    assert table_root_of("/data/a%20b") == "/data/a%20b"
    assert table_root_of("s3://bucket/t/") == "s3://bucket/t"
    assert is_remote("s3://b/t") and not is_remote("file:/t") and not is_remote("/t")


def test_a_table_location_is_typed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A TableLocation holds table_root_of's form and its scheme; typing one again gives it back as it is
    (never normalised twice, a relative path never re-read against another working directory)."""
    monkeypatch.chdir(tmp_path)
    local = TableLocation.of("t/")
    assert (local.uri, local.scheme, local.is_remote, local.store) == (f"{tmp_path}/t", "file", False, None)
    monkeypatch.chdir("/")
    assert TableLocation.of(local) is local and table_root_of(local) == f"{tmp_path}/t"
    assert TableLocation.of("file:///data/my%20table/") == TableLocation("/data/my table", "file")
    s3a = TableLocation.of("s3a://bucket/t/")
    assert (s3a.uri, s3a.scheme, s3a.is_remote, s3a.store) == ("s3a://bucket/t", "s3a", True, "s3")
    assert TableLocation.of("abfss://c@a.dfs.core.windows.net/t").store == "azure"
    assert TableLocation.of("hdfs://nn/t").store is None and str(s3a) == "s3a://bucket/t"


def test_one_scheme_table_and_one_comparison() -> None:
    """Every object store's schemes are STORE_SCHEMES' (the settings' jars, the FileIO, comparable); two
    locations are the same whatever spelling each was recorded in."""
    assert {
        scheme: store_of(f"{scheme}://b/t") for scheme in ("s3", "s3a", "s3n", "gs", "wasbs", "hdfs")
    } == {
        "s3": "s3",
        "s3a": "s3",
        "s3n": "s3",
        "gs": "gcs",
        "wasbs": "azure",
        "hdfs": None,
    }
    assert store_of("/data/s3://x") is None and store_of("S3A://b/t") == "s3"
    assert same_location("s3a://b/t", "s3://b/t/") and same_location("file:///d/t", "/d/t")
    assert not same_location("s3://b/t", "s3://b/u") and not same_location("gs://b/t", "s3://b/t")


@pytest.mark.parametrize(
    "root", ["/t/table", "/", "//t", "/t/./x", "/t/x/", "t/rel", "s3://b/t", "s3://b/t/"]
)
@pytest.mark.parametrize(
    "path",
    [
        "part-00000-1a2b.c000.snappy.parquet",
        "p=1/q=a_b/part-0.parquet",
        "deletion_vector_61d16c75-6994.bin",
        "a+b=c/f.parquet",
        "./f.parquet",
        "p=1/../f.parquet",
        "p=1//f.parquet",
        "p=1/",
        ".hidden/f.parquet",
        "p=a%20b/f.parquet",
        "/abs/f.parquet",
        "file:/abs/f.parquet",
        "s3://b/other/f.parquet",
        "p=\u00e9/f.parquet",
    ],
)
def test_the_plain_path_shortcut_gives_what_the_rules_give(root: str, path: str) -> None:
    """`resolve_location` joins a plain relative path to a plain root with a slash: the answer of the
    general rules (`_resolve`), for every path and root, shortcut or not."""
    assert resolve_location(root, path) == _resolve(root, path)


@pytest.mark.parametrize(
    ("path", "other", "apart"),
    [
        # One relative spelling: another entry to Delta Spark (relative kept as written, absolute
        # qualified) and to delta-rs (path as written), measured in tests/mirror/test_locations_spellings.py.
        ("p=a/x.parquet", "/t/p=a/x.parquet", True),
        ("p=a/x.parquet", "file:///t/p=a/x.parquet", True),
        ("file:/t/p=a/x.parquet", "p=a/x.parquet", True),
        ("p=a/x.parquet", "p%3Da/x.parquet", True),
        ("p=a/part-0.parquet", "p=a/part%2D0.parquet", True),
        ("x.parquet", "s3://b/t/x.parquet", True),
        # Two absolute spellings: one file to Delta Spark, two to delta-rs.
        ("/t/x.parquet", "file:///t/x.parquet", False),
        ("file:/t/x.parquet", "file:///t/x.parquet", False),
        ("/t/p=a/x.parquet", "/t/p%3Da/x.parquet", False),
        ("s3://b/t/x.parquet", "s3a://b/t/x.parquet", False),
        # A relative spelling Delta Spark may normalise (`.`, `..`, empty segments), or not parse: undecided.
        ("p=a/x.parquet", "p=a/./x.parquet", False),
        ("p=a/x.parquet", "p=a//x.parquet", False),
        ("q/../p=a/x.parquet", "/t/p=a/x.parquet", False),
        ("b c.parquet", "b%20c.parquet", False),
        ("x.parquet", "x.parquet", False),
    ],
)
def test_readers_keep_two_spellings_apart_only_where_both_do(path: str, other: str, apart: bool) -> None:
    assert readers_keep_apart(path, other) is apart
    assert readers_keep_apart(other, path) is apart


def test_a_mirror_is_known_by_its_delta_location_in_any_spelling() -> None:
    """`identity.check_is_mirror_of` compares the Delta location the mirror recorded through `same_location`:
    Hadoop's s3a:// and Iceberg's s3:// name the same table; another folder is refused by name."""
    from dv_assets.mirror.iceberg.mirror_table import DELTA_TABLE_PROPERTY, MirrorTable
    from dv_assets.mirror.iceberg.types import Schema
    from dv_assets.mirror.identity import check_is_mirror_of

    def recorded(delta: str) -> MirrorTable:
        return MirrorTable("ns.t", "s3://wh/ns/t", 3, {DELTA_TABLE_PROPERTY: delta}, Schema(), None, ())

    check_is_mirror_of(recorded("s3a://lake/t"), "s3://lake/t", 3)
    check_is_mirror_of(recorded("s3://lake/t"), "s3://lake/t", None)
    with pytest.raises(MirrorInputError, match=r"mirrors s3://lake/other, not this table"):
        check_is_mirror_of(recorded("s3://lake/other"), "s3://lake/t", 3)
