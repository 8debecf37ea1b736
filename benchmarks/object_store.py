"""Issue 35's object-store figures (`bench.py --only object-store`): what a mirror costs an object store
in requests as well as seconds.

A synthetic Delta DV table (`SyntheticTable`, 100,000 files by default, a checkpoint at version 0) is
mirrored from a local disk first (the reference time), then from moto's S3 server on loopback behind
`testkit.object_store`'s proxy, which adds a fixed delay to every request (10 ms by default, a real
store's round trip) and counts them by kind. moto's own listing sorts the whole bucket for every page
(0.77 s a page at 100,000 keys), so the bench's server cuts pages from sorted names as S3 does
(`_sorted_listings`): the time measured is the mirror's, not moto's. Measured on S3, each next to its target:

- the first version: requests <= files/500 + 50; seconds <= 2x the local disk's + delay x requests /
  REQUEST_CONCURRENCY (the mirror's requests in flight at once), the seconds moto itself took to answer
  the listing's pages (measured by the proxy around each) taken out: they are the emulator's, not the
  mirror's;
- a 10-file DELETE in a run of its own: requests <= 30;
- a no-op `dvmirror sync` and `dvmirror status` (processes of their own, no JVM): requests <= 5 each;
- one follow poll (`LogWatch.changed`, nothing new): requests <= 2.

The Iceberg warehouse is a local folder: the requests counted are the Delta side's, which grow with the
table; the mirror's own writes (metadata, manifests, Puffin files) are a handful per version wherever the
warehouse is.

    .venv/bin/python benchmarks/bench.py --only object-store [--object-store-files 100000]
        [--object-store-delay-ms 10]
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession

from benchmarks.figures import Figure, Unmeasured
from dv_assets.mirror.follow import LogWatch
from dv_assets.mirror.io import REQUEST_CONCURRENCY, FileIO
from dv_assets.mirror.settings import CatalogConfig
from dv_assets.mirror.sync import sync_table
from testkit.object_store import RequestLog, S3Store, s3_store
from testkit.synthetic import SyntheticTable

BUCKET = "lake"
NAME = "events"


def _cli(store: S3Store, catalog: CatalogConfig, *args: str, cwd: Path) -> tuple[float, str]:
    properties = {**catalog.properties, **store.catalog_properties()}
    flags = [f for key, value in properties.items() for f in ("--catalog-property", f"{key}={value}")]
    began = time.monotonic()
    done = subprocess.run(
        [str(Path(sys.executable).with_name("dvmirror")), *args, *flags],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )
    seconds = time.monotonic() - began
    if done.returncode != 0:
        raise RuntimeError(f"dvmirror {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return seconds, done.stdout


def _upload_new(store: S3Store, table: SyntheticTable, before: set[Path]) -> None:
    filesystem = store.filesystem()
    for path in table.root.rglob("*"):
        if path.is_file() and (path not in before or path.name == "_last_checkpoint"):
            with filesystem.open_output_stream(f"{BUCKET}/{NAME}/{path.relative_to(table.root)}") as out:
                out.write(path.read_bytes())


def _kinds(counted: RequestLog) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in sorted(counted.by_file().items()))


def object_store_figures(
    spark: SparkSession, catalog: CatalogConfig, tmp: Path, files: int = 100_000, delay_ms: float = 10.0
) -> list[Figure | Unmeasured]:
    tmp = tmp / "object-store"
    table = SyntheticTable(tmp / NAME, rows_per_file=10)
    table.create(files, real=min(files, 100))
    table.write_checkpoint()

    began = time.monotonic()
    local = sync_table(spark, table.root, "os_bench.local")
    local_seconds = time.monotonic() - began
    assert local.mirrored_versions == [0], local.mirrored_versions
    print(f"object store: the first version of {files:,} files from a local disk: {local_seconds:.2f} s")

    figures: list[Figure | Unmeasured] = []
    delay = delay_ms / 1000
    began = time.monotonic()
    preload = {f"{BUCKET}/{NAME}": table.root}
    with s3_store(tmp / "s3", delay_ms=delay_ms, preload=preload, sorted_listing=True) as store:
        print(f"object store: moto serves the table's files after {time.monotonic() - began:.1f} s")
        io = FileIO(store.catalog_properties())
        root = f"s3://{BUCKET}/{NAME}"

        with store.counting() as counted:
            began = time.monotonic()
            first = sync_table(spark, root, "os_bench.s3", io=io)
            seconds = time.monotonic() - began
        assert first.mirrored_versions == [0], first.mirrored_versions
        requests = counted.total
        served = sum(counted.server_seconds.values())
        print(f"object store: first version on S3: {requests} requests ({_kinds(counted)})")
        print(
            f"object store: {seconds:.2f} s, of which moto answering {served:.2f} s "
            f"(LIST {counted.server_seconds['LIST']:.2f} s)"
        )
        figures += [
            Figure(
                f"first version of {files:,} files on S3: requests",
                requests,
                "requests",
                files / 500 + 50,
                True,
            ),
            # moto's own time to answer its listing pages (Python rendering 1,000 keys, a good part of a
            # second each on this machine) is the emulator's, not the mirror's: taken out, measured by the
            # proxy around each page (they come one after another). The proxy's delay, a real store's
            # round trip, stays in; so does moto's time for the few other requests.
            Figure(
                f"first version on S3 ({delay_ms:g} ms a request, moto's own time out): seconds",
                seconds - counted.server_seconds["LIST"],
                "s",
                2 * local_seconds + delay * requests / REQUEST_CONCURRENCY,
                True,
            ),
        ]

        before = set(table.root.rglob("*"))
        version, _ = table.delete(table.files[:10], lambda i: [i % 5, 9 - i % 5])
        _upload_new(store, table, before)
        with store.counting() as counted:
            began = time.monotonic()
            small = sync_table(spark, root, "os_bench.s3", io=io)
            seconds = time.monotonic() - began
        assert small.mirrored_versions == [version], small.mirrored_versions
        print(f"object store: 10-file DELETE: {counted.total} requests ({_kinds(counted)}), {seconds:.2f} s")
        figures.append(
            Figure("10-file DELETE in a run of its own on S3: requests", counted.total, "requests", 30, True)
        )

        with store.counting() as counted:
            seconds, out = _cli(store, catalog, "sync", root, "--table", "os_bench.s3", cwd=tmp)
        assert "up to date" in out, out
        print(f"object store: no-op dvmirror sync: {counted.total} requests, {seconds:.2f} s (process)")
        figures.append(Figure("no-op dvmirror sync on S3: requests", counted.total, "requests", 5, True))

        with store.counting() as counted:
            seconds, out = _cli(store, catalog, "status", "os_bench.s3", cwd=tmp)
        print(f"object store: dvmirror status: {counted.total} requests, {seconds:.2f} s (process)")
        figures.append(Figure("dvmirror status on S3: requests", counted.total, "requests", 5, True))

        watch = LogWatch(root, io)
        last = watch.last_commit(version)
        with store.counting() as counted:
            changed = watch.changed(version, last)
        assert not changed
        figures.append(
            Figure("one follow poll on S3 (nothing new): requests", counted.total, "requests", 2, True)
        )
    return figures
