"""Iceberg's files on a local warehouse go through the project's Hadoop `file:` system
(`dev.dvmirror.LocalFileSystem`): the same files and permissions as Hadoop's own, set without a `chmod`
process per file (which made a small commit's time mostly process starts)."""

from __future__ import annotations

import stat
from pathlib import Path

from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.sync import sync_table

FIXTURE = "table-with-dv-small"


def _file_system(spark, table_name: str):
    """The Hadoop file system the table's FileIO writes `file:` locations with."""
    ident = spark._jvm.org.apache.iceberg.catalog.TableIdentifier.parse(table_name)
    io = IcebergJava(spark)._catalog.loadTable(ident).io()
    return spark._jvm.org.apache.hadoop.fs.FileSystem.get(spark._jvm.java.net.URI("file:///"), io.conf())


def test_the_catalogs_files_are_written_with_hadoop_permissions_and_checksums(spark, copy_fixture) -> None:
    delta = copy_fixture(FIXTURE)
    sync_table(spark, delta, "localfs.small")
    fs = _file_system(spark, "localfs.small")
    assert fs.getClass().getName() == "dev.dvmirror.LocalFileSystem"
    location = Path(IcebergJava(spark).load("localfs.small").location.removeprefix("file:"))
    metadata = sorted((location / "metadata").iterdir())
    written = [p for p in metadata if not p.name.startswith(".")]
    assert written and all((p.parent / f".{p.name}.crc").is_file() for p in written)
    assert {stat.S_IMODE(p.stat().st_mode) for p in metadata} == {0o666 & ~0o022}  # Hadoop's default umask


def test_a_permission_is_set_as_hadoop_sets_it(spark, tmp_path: Path) -> None:
    jvm = spark._jvm
    conf = jvm.org.apache.hadoop.conf.Configuration()
    conf.set("fs.file.impl", "dev.dvmirror.LocalFileSystem")
    conf.set("fs.file.impl.disable.cache", "true")
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), conf)
    for mode in (0o640, 0o755, 0o600, 0o444, 0o777, 0o000):
        path = tmp_path / f"f{mode:o}"
        path.write_bytes(b"x")
        permission = jvm.org.apache.hadoop.fs.permission.FsPermission(mode)
        fs.setPermission(jvm.org.apache.hadoop.fs.Path(str(path)), permission)
        assert stat.S_IMODE(path.stat().st_mode) == mode, oct(mode)
