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
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

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
    parts = urlsplit(target)
    query = parse_qs(parts.query, keep_blank_values=True)
    key = parts.path.lstrip("/").partition("/")[2]  # path-style: /bucket/key
    if method == "GET" and not key and ("list-type" in query or "prefix" in query or "delimiter" in query):
        return "LIST"
    if method == "GET" and not key:
        return "LIST"
    return method


@dataclass
class RequestLog:
    """The requests the proxy passed on, by kind; thread-safe."""

    counts: Counter[str] = field(default_factory=Counter)
    paths: list[tuple[str, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, kind: str, target: str) -> None:
        with self._lock:
            self.counts[kind] += 1
            self.paths.append((kind, target))

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()
            self.paths.clear()

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self.counts)

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
            log.record(request_kind(self.command, self.path), f"{self.command} {self.path}")
            if delay_s:
                time.sleep(delay_s)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            if body is not None:
                headers = {k: v for k, v in headers.items() if k.lower() != "content-length"}
                headers["Content-Length"] = str(len(body))
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
def s3_store(workdir: Path, *, delay_ms: float = 0.0) -> Iterator[S3Store]:
    """moto's S3 server on a loopback port, the counting proxy on another, both stopped after the block.
    The AWS credentials of `CREDENTIALS` are set in this process's environment meanwhile (child processes
    inherit them)."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    moto = Path(sys.executable).with_name("moto_server")
    log_path = workdir / "moto.log"
    saved = {k: os.environ.get(k) for k in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    with log_path.open("w") as out:
        process = subprocess.Popen(
            [str(moto), "-H", "127.0.0.1", "-p", str(port)], stdout=out, stderr=subprocess.STDOUT
        )
    proxy: ThreadingHTTPServer | None = None
    try:
        _wait_for_port(port, process, log_path)
        requests = RequestLog()
        proxy = ThreadingHTTPServer(
            ("127.0.0.1", 0), _handler(("127.0.0.1", port), requests, delay_ms / 1000)
        )
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
    """Copy a local folder's files under `bucket/prefix` on the server itself (uncounted); the count."""
    from concurrent.futures import ThreadPoolExecutor

    filesystem = store.filesystem()
    files = [p for p in local.rglob("*") if p.is_file()]

    def put(path: Path) -> None:
        with filesystem.open_output_stream(f"{bucket_prefix}/{path.relative_to(local).as_posix()}") as out:
            out.write(path.read_bytes())

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(put, files))
    return len(files)
