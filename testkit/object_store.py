"""An S3 server on loopback for the tests and the benchmarks: moto's server, behind a proxy that counts
every request by kind (LIST, HEAD, GET, PUT, …) and may add a fixed delay to each, as a real store's
round trip would. Every client (pyarrow in the mirror, S3A and S3FileIO in the JVM) is pointed at the
proxy, so the counts are what the store was asked, whoever asked."""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "dvmirror-test",
    "AWS_SECRET_ACCESS_KEY": "dvmirror-test-secret",
    "AWS_REGION": "us-east-1",
}
# Hop-by-hop headers are the proxy's own; the rest go through unchanged (S3's signatures cover them).
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
}


def request_kind(method: str, target: str) -> str:
    """What an S3 request is, by its method and query: LIST (ListObjects of a bucket), HEAD, GET (an
    object's bytes), PUT, DELETE, POST (multi-part uploads, batch deletes)."""
    key = urlsplit(target).path.lstrip("/").partition("/")[2]  # path-style: /bucket/key
    return "LIST" if method == "GET" and not key else method


@dataclass
class RequestLog:
    """The requests the proxy passed on, by kind; thread-safe."""

    counts: Counter[str] = field(default_factory=Counter)
    paths: list[tuple[str, str]] = field(default_factory=list)
    # Seconds the server itself took to answer, by kind (the proxy's delay not included).
    server_seconds: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, kind: str, target: str) -> None:
        with self._lock:
            self.counts[kind] += 1
            self.paths.append((kind, target))

    def served(self, kind: str, seconds: float) -> None:
        with self._lock:
            self.server_seconds[kind] += seconds

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()
            self.paths.clear()
            self.server_seconds.clear()

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self.counts)

    def by_file(self) -> Counter[str]:
        """The requests by kind and by what they asked for: `LIST`, or `<kind> <file kind>` where the file
        kind is a Delta log's (commit, checkpoint, _last_checkpoint), a DV file, a data file or other."""
        with self._lock:
            paths = list(self.paths)
        found: Counter[str] = Counter()
        for kind, target in paths:
            if kind == "LIST":
                found["LIST"] += 1
                continue
            name = urlsplit(target.split(" ", 1)[1]).path.rsplit("/", 1)[-1]
            if name == "_last_checkpoint":
                what = "_last_checkpoint"
            elif ".checkpoint." in name:
                what = "checkpoint"
            elif name.endswith(".json"):
                what = "commit"
            elif name.startswith("deletion_vector_"):
                what = "DV file"
            elif name.endswith(".parquet"):
                what = "data file"
            else:
                what = "other"
            found[f"{kind} {what}"] += 1
        return found

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.counts.values())


def _handler(upstream: tuple[str, int], log: RequestLog, delay_s: float) -> type[BaseHTTPRequestHandler]:
    local = threading.local()

    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs expect

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _connection(self) -> http.client.HTTPConnection:
            if getattr(local, "connection", None) is None:
                local.connection = http.client.HTTPConnection(*upstream, timeout=120)
            return local.connection

        def _body(self) -> bytes | None:
            """The request's body, HTTP/1.1 chunking undone (it is sent on with a Content-Length)."""
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                chunks = []
                while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                    pass
                return b"".join(chunks)
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else None

        def _forward(self) -> None:
            body = self._body()
            kind = request_kind(self.command, self.path)
            log.record(kind, f"{self.command} {self.path}")
            if delay_s:
                time.sleep(delay_s)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            if body is not None:
                headers = {k: v for k, v in headers.items() if k.lower() != "content-length"}
                headers["Content-Length"] = str(len(body))
            began = time.monotonic()
            for attempt in (1, 2):
                connection = self._connection()
                try:
                    connection.request(self.command, self.path, body=body, headers=headers)
                    response = connection.getresponse()
                    payload = response.read()
                    break
                except (http.client.HTTPException, OSError):
                    connection.close()
                    local.connection = None
                    if attempt == 2:
                        raise
            log.served(kind, time.monotonic() - began)
            self.send_response_only(response.status, response.reason)
            for name, value in response.getheaders():
                if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                    self.send_header(name, value)
            # A HEAD's length is the object's, as the server said; anything else's, the body's.
            length = response.getheader("Content-Length") if self.command == "HEAD" else len(payload)
            self.send_header("Content-Length", str(length or 0))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward

    return Forward


@dataclass
class S3Store:
    """moto's S3 server and the counting proxy in front of it. `endpoint` is the proxy's."""

    endpoint: str
    upstream: str
    requests: RequestLog
    delay_s: float

    def catalog_properties(self) -> dict[str, str]:
        """Iceberg's S3 properties for this store (credentials come from the environment)."""
        return {"s3.endpoint": self.endpoint, "s3.path-style-access": "true", "client.region": "us-east-1"}

    def filesystem(self, *, through_proxy: bool = False):  # -> pyarrow.fs.S3FileSystem
        """pyarrow's S3 file system on the server itself (set-up, uncounted), or through the proxy."""
        import pyarrow.fs as pafs

        endpoint = (self.endpoint if through_proxy else self.upstream).removeprefix("http://")
        return pafs.S3FileSystem(
            endpoint_override=endpoint,
            scheme="http",
            allow_bucket_creation=True,
            access_key=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            secret_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            region=CREDENTIALS["AWS_REGION"],
        )

    def create_bucket(self, name: str) -> None:
        self.filesystem().create_dir(name)

    @contextlib.contextmanager
    def counting(self) -> Iterator[RequestLog]:
        """The requests made inside the block (counted from zero)."""
        self.requests.reset()
        yield self.requests


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, process: subprocess.Popen, log: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"moto_server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.2)
    raise TimeoutError(f"moto_server does not listen on 127.0.0.1:{port} after {seconds} s")


@contextlib.contextmanager
def s3_store(
    workdir: Path,
    *,
    delay_ms: float = 0.0,
    preload: Mapping[str, Path] | None = None,
    sorted_listing: bool = False,
) -> Iterator[S3Store]:
    """moto's S3 server on a loopback port (`python -m testkit.object_store`), the counting proxy on
    another, both stopped after the block. `preload`: `bucket/prefix` → a local folder whose files the
    server holds from the start (put in its process, uncounted: thousands a second, where moto takes
    HTTP uploads at about a hundred); their buckets are created. `sorted_listing`: see `_sorted_listings`.
    The AWS credentials of `CREDENTIALS` are set in this process's environment meanwhile (child processes
    inherit them)."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log_path = workdir / "moto.log"
    saved = {k: os.environ.get(k) for k in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    command = [sys.executable, "-m", "testkit.object_store", str(port)]
    command += [f"--preload={target}={folder}" for target, folder in (preload or {}).items()]
    command += ["--sorted-listing"] if sorted_listing else []
    with log_path.open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=_REPOSITORY)
    proxy: ThreadingHTTPServer | None = None
    try:
        _wait_for_port(port, process, log_path, seconds=600)
        requests = RequestLog()
        handler = _handler(("127.0.0.1", port), requests, delay_ms / 1000)
        proxy = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        proxy.daemon_threads = True
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        yield S3Store(
            endpoint=f"http://127.0.0.1:{proxy.server_address[1]}",
            upstream=f"http://127.0.0.1:{port}",
            requests=requests,
            delay_s=delay_ms / 1000,
        )
    finally:
        if proxy is not None:
            proxy.shutdown()
            proxy.server_close()
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def upload_tree(store: S3Store, local: Path, bucket_prefix: str, *, threads: int = 16) -> int:
    """Copy a local folder's files under `bucket/prefix` on the server itself (uncounted); the count.
    One PutObject a file (boto3, moto's own dependency): pyarrow's streams upload in three requests."""
    from concurrent.futures import ThreadPoolExecutor

    import boto3
    from botocore.config import Config

    client = boto3.client(
        "s3",
        endpoint_url=store.upstream,
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        region_name=CREDENTIALS["AWS_REGION"],
        config=Config(max_pool_connections=threads, s3={"addressing_style": "path"}),
    )
    bucket, _, prefix = bucket_prefix.partition("/")
    files = [p for p in local.rglob("*") if p.is_file()]

    def put(path: Path) -> None:
        key = f"{prefix}/{path.relative_to(local).as_posix()}".lstrip("/")
        client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(put, files))
    return len(files)


# --- the server process --------------------------------------------------------------------------------

_REPOSITORY = Path(__file__).resolve().parent.parent


def _sorted_listings() -> None:
    """moto sorts every key of a bucket (through a copy of its key store) for each page of a listing:
    0.77 s a page at 100,000 keys, where S3 answers a page in a time independent of the bucket's size.
    With this, a listing without a delimiter cuts its page from the bucket's key names sorted by C's sort
    (milliseconds at 100,000), with moto's own semantics (prefix, continuation token or start-after, delete
    markers left out, max-keys); a listing with a delimiter is moto's own. For the benchmarks, whose
    figure is the mirror's time, not moto's."""
    from bisect import bisect_left, bisect_right

    from moto.s3.models import FakeDeleteMarker, FakeTableStorageBucket, S3Backend

    original = S3Backend.list_objects_v2

    def list_objects_v2(self, bucket, prefix, delimiter, continuation_token, start_after, max_keys):  # type: ignore[no-untyped-def]
        limit = self._pagination_tokens.get(continuation_token) if continuation_token else start_after
        if delimiter or isinstance(bucket, FakeTableStorageBucket) or (continuation_token and limit is None):
            return original(self, bucket, prefix, delimiter, continuation_token, start_after, max_keys)
        names = sorted(dict.keys(bucket.keys))
        prefix = prefix or ""
        first = bisect_left(names, prefix)
        if limit:
            first = max(first, bisect_right(names, limit))
        page = []
        for name in names[first:]:
            if not name.startswith(prefix) or len(page) > max_keys:
                break
            key = bucket.keys.get(name)
            if key is not None and not isinstance(key, FakeDeleteMarker):
                page.append(key)
        return self._truncate_result(page, max_keys)

    S3Backend.list_objects_v2 = list_objects_v2  # type: ignore[method-assign]


def _preload(target: str, folder: Path) -> None:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    bucket, _, prefix = target.partition("/")
    if bucket not in backend.buckets:
        backend.create_bucket(bucket, CREDENTIALS["AWS_REGION"])
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            key = f"{prefix}/{path.relative_to(folder).as_posix()}".lstrip("/")
            backend.put_object(bucket, key, path.read_bytes())


def main(argv: list[str]) -> None:
    import argparse
    import signal

    from moto.server import ThreadedMotoServer

    parser = argparse.ArgumentParser(description="moto's S3 server on 127.0.0.1:PORT")
    parser.add_argument("port", type=int)
    parser.add_argument("--preload", action="append", default=[], metavar="BUCKET/PREFIX=FOLDER")
    parser.add_argument("--sorted-listing", action="store_true")
    args = parser.parse_args(argv)
    if args.sorted_listing:
        _sorted_listings()
    for spec in args.preload:
        target, _, folder = spec.partition("=")
        _preload(target, Path(folder))
    stops = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)  # before the server's threads: they inherit it
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=args.port, verbose=False)
    server.start()
    signal.sigwait(stops)
    server.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
