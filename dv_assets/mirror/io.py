"""The one seam to storage: every read, list, stat, write and delete of the engine goes through `FileIO`
(after pyiceberg's `io.FileIO`), for plain local paths, `file:` URIs and any URI pyarrow.fs knows
(s3://, gs://, abfs://, hdfs://).

Locations stay strings end to end: a plain absolute path or a `file:` URI for local files, a URI
otherwise. S3 (`s3://`, and Hadoop's `s3a://`/`s3n://` spellings of the same objects) is
configured by Iceberg's catalog properties (`s3.endpoint`, `s3.access-key-id`, `s3.secret-access-key`,
`s3.session-token`, `client.region`/`s3.region`, `s3.path-style-access`), the same keys Iceberg Java and
pyiceberg read; what they leave unset comes from the AWS environment. GCS (`gs://`) and Azure
(`abfs[s]://`, `wasb[s]://`, Hadoop's `container@account.host` form) likewise, by pyiceberg's `gcs.*` and
`adls.*` names (`gcs_filesystem`, `azure_filesystem`). Tests inject faults by subclassing `FileIO`, never
through the production path.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar, cast
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from dv_assets.mirror.errors import StorageError
from dv_assets.mirror.locations import comparable, store_of_scheme


@dataclass(frozen=True)
class FileInfo:
    """What a stat or a listing tells about one location."""

    location: str
    exists: bool
    is_file: bool = False
    size: int | None = None
    mtime_s: float | None = None  # seconds since the epoch


_LOCAL = pafs.LocalFileSystem()
# pyarrow needs an expiry with an access token; Iceberg's `gcs.oauth2.token` may come without one.
_NO_KNOWN_EXPIRY = datetime(2200, 1, 1, tzinfo=UTC)


def _endpoint_options(endpoint: str | None) -> dict[str, Any]:
    """pyarrow's `endpoint_override` and `scheme` from an Iceberg endpoint property (`http://host:port`
    or a bare `host:port`); none when it is unset."""
    if not endpoint:
        return {}
    parsed = urlparse(endpoint)
    options: dict[str, Any] = {"endpoint_override": parsed.netloc or endpoint}
    if parsed.scheme:
        options["scheme"] = parsed.scheme
    return options


def s3_filesystem(properties: Mapping[str, str]) -> pafs.S3FileSystem:
    """pyarrow's S3 file system configured by Iceberg's S3 properties (the environment for the rest)."""
    endpoint = properties.get("s3.endpoint")
    options: dict[str, Any] = _endpoint_options(endpoint)
    for key, option in (
        ("s3.access-key-id", "access_key"),
        ("s3.secret-access-key", "secret_key"),
        ("s3.session-token", "session_token"),
    ):
        if properties.get(key):
            options[option] = properties[key]
    region = properties.get("s3.region") or properties.get("client.region") or os.environ.get("AWS_REGION")
    if region:
        options["region"] = region
    if properties.get("s3.path-style-access", "").lower() == "false" and endpoint:
        options["force_virtual_addressing"] = True
    return pafs.S3FileSystem(**options)


def gcs_filesystem(properties: Mapping[str, str]) -> pafs.GcsFileSystem:
    """pyarrow's GCS file system configured by Iceberg's GCS properties (pyiceberg's names:
    `gcs.service.host`, `gcs.project-id`, `gcs.oauth2.token`, `gcs.oauth2.token-expires-at` in ms,
    `gcs.default-bucket-location`; Iceberg Java's `gcs.no-auth`); Google's default credentials otherwise."""
    options: dict[str, Any] = _endpoint_options(properties.get("gcs.service.host"))
    token = properties.get("gcs.oauth2.token")
    if properties.get("gcs.no-auth", "").lower() == "true":
        options["anonymous"] = True
    elif token:
        expires_ms = properties.get("gcs.oauth2.token-expires-at")
        options["access_token"] = token
        options["credential_token_expiration"] = (
            datetime.fromtimestamp(int(expires_ms) / 1000, UTC) if expires_ms else _NO_KNOWN_EXPIRY
        )
    if properties.get("gcs.project-id"):
        options["project_id"] = properties["gcs.project-id"]
    if properties.get("gcs.default-bucket-location"):
        options["default_bucket_location"] = properties["gcs.default-bucket-location"]
    return pafs.GcsFileSystem(**options)


def azure_connection_string(text: str) -> dict[str, str]:
    """An Azure Storage connection string's fields (`AccountName`, `AccountKey`, `BlobEndpoint`, …)."""
    fields = (part.partition("=") for part in text.split(";") if part.strip())
    return {key.strip(): value.strip() for key, _, value in fields if key.strip()}


def azure_endpoints(properties: Mapping[str, str]) -> dict[str, str]:
    """The blob and dfs endpoints pyarrow's `*_storage_authority`/`*_storage_scheme` options take, from
    pyiceberg's `adls.{blob,dfs}-storage-{authority,scheme}` or the connection string's `BlobEndpoint` and
    `DfsEndpoint` (an emulator's `http://127.0.0.1:10000/devstoreaccount1`). Without a dfs endpoint of its
    own, a custom blob endpoint serves as both: an emulator has none, and Azure's must not be reached."""
    connection = azure_connection_string(properties.get("adls.connection-string", ""))
    found: dict[str, str] = {}
    for service, field in (("blob", "BlobEndpoint"), ("dfs", "DfsEndpoint")):
        authority = properties.get(f"adls.{service}-storage-authority")
        scheme = properties.get(f"adls.{service}-storage-scheme")
        if not authority and connection.get(field):
            parsed = urlparse(connection[field])
            authority, scheme = parsed.netloc, scheme or parsed.scheme
        if authority:
            found[f"{service}_storage_authority"] = authority
        if scheme:
            found[f"{service}_storage_scheme"] = scheme
    if "blob_storage_authority" in found and "dfs_storage_authority" not in found:
        found["dfs_storage_authority"] = found["blob_storage_authority"]
        if "blob_storage_scheme" in found:
            found["dfs_storage_scheme"] = found["blob_storage_scheme"]
    return found


def azure_filesystem(properties: Mapping[str, str], account: str = "") -> pafs.AzureFileSystem:
    """pyarrow's Azure file system for the storage `account` (the location's; else `adls.account-name`),
    configured by pyiceberg's ADLS properties: `adls.account-name`, `adls.account-key`, `adls.sas-token`,
    `adls.connection-string` (its fields fill what those leave unset), the endpoints (`azure_endpoints`),
    `adls.tenant-id`/`adls.client-id`/`adls.client-secret`; Azure's default credentials otherwise."""
    connection = azure_connection_string(properties.get("adls.connection-string", ""))
    options: dict[str, Any] = {
        "account_name": account or properties.get("adls.account-name") or connection.get("AccountName", "")
    }
    key = properties.get("adls.account-key") or connection.get("AccountKey")
    sas = properties.get("adls.sas-token") or connection.get("SharedAccessSignature")
    if key:
        options["account_key"] = key
    elif sas:
        options["sas_token"] = sas
    options.update(azure_endpoints(properties))
    for prop, option in (
        ("adls.tenant-id", "tenant_id"),
        ("adls.client-id", "client_id"),
        ("adls.client-secret", "client_secret"),
    ):
        if properties.get(prop):
            options[option] = properties[prop]
    return pafs.AzureFileSystem(**options)


def create_folders(filesystem: pafs.FileSystem, path: str) -> None:
    """`create_dir(path, recursive=True)`, but on Azure a folder that pyarrow (Arrow 26) reads as a file is
    taken as there: on a flat-namespace account Hadoop's ABFS and WASB mark folders with empty blobs
    (`hdi_isfolder` metadata), which pyarrow sees as files and refuses to create a folder under, while
    a blob below one is written all the same (a flat namespace has no folders to need)."""
    try:
        filesystem.create_dir(path, recursive=True)
    except NotADirectoryError:
        if not isinstance(filesystem, pafs.AzureFileSystem):
            raise


# Requests in flight at once for a batch of stats on an object store: pyarrow asks one path at a time
# (its `get_file_info(list)` is a loop of HEADs), so a batch is spread over this many threads.
REQUEST_CONCURRENCY = 16
_UNLISTED = object()  # `FolderListing.size_of`: a location the listing does not cover


def _file_infos(filesystem: pafs.FileSystem, paths: list[str]) -> list[pafs.FileInfo]:
    """pyarrow's stat of each path: one call on a local file system; on an object store a request per
    path, REQUEST_CONCURRENCY of them in flight at once (pyarrow releases the GIL while it waits)."""
    if filesystem is _LOCAL or len(paths) < 2:
        return filesystem.get_file_info(paths)
    chunks = [paths[i::REQUEST_CONCURRENCY] for i in range(min(REQUEST_CONCURRENCY, len(paths)))]
    with ThreadPoolExecutor(len(chunks), thread_name_prefix="dvmirror-stat") as pool:
        answers = list(pool.map(filesystem.get_file_info, chunks))
    found: list[pafs.FileInfo] = [None] * len(paths)  # type: ignore[list-item]
    for offset, infos in enumerate(answers):
        found[offset :: len(chunks)] = infos
    return found


def _opens(filesystem: pafs.FileSystem, path: str) -> bool:
    """Whether `path` opens as a file: one request on an object store (see `FileIO.exists_many`)."""
    if filesystem is _LOCAL:
        return filesystem.get_file_info(path).type == pafs.FileType.File
    try:
        filesystem.open_input_file(path).close()
    except (FileNotFoundError, IsADirectoryError):
        return False
    return True


def _opened(open_: Callable[[str], pa.NativeFile], location: str, path: str) -> pa.NativeFile:
    """`open_(path)`, a missing object named by its location (pyarrow's message names the bucket path)."""
    try:
        return open_(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{location} does not exist") from None


class FolderListing:
    """The regular files under an object-store folder and their sizes, from one recursive listing (a
    request per 1,000 keys) made when first asked. One pass's answer, made for it and dropped after
    (`FileIO.listing`): a listing is true of one moment. It holds every file under the folder, about
    150 bytes each: on an object store, what a first version's presence check holds for the whole table."""

    def __init__(self, filesystem: pafs.FileSystem, prefix: str) -> None:
        self._filesystem = filesystem
        self._prefix = prefix
        self._sizes: dict[str, int] | None = None

    def size_of(self, filesystem: pafs.FileSystem, path: str) -> int | object | None:
        """The size of the file at `path` on `filesystem`, None when the listing does not hold it, and
        `_UNLISTED` when it is not the listing's to say (another file system, outside the folder)."""
        if not path.startswith(self._prefix) or not (
            filesystem is self._filesystem or filesystem.equals(self._filesystem)
        ):
            return _UNLISTED
        if self._sizes is None:
            selector = pafs.FileSelector(self._prefix.rstrip("/"), allow_not_found=True, recursive=True)
            regular = pafs.FileType.File
            self._sizes = {
                info.path: info.size
                for info in self._filesystem.get_file_info(selector)
                if info.type == regular
            }
        return self._sizes.get(path)


class NotARegularFileError(OSError):
    """The location is a folder, a FIFO or a device: a definite answer of the storage, not a failure."""


# What a storage's answer says for certain: left as they are, the caller's to judge (a data file that
# does not exist is a refusal of its version; a log file that does not exist, a storage error: log.py).
_DEFINITE_ANSWERS = (
    FileNotFoundError,
    NotARegularFileError,
    IsADirectoryError,
    NotADirectoryError,
    FileExistsError,
    StorageError,
)
_Read = TypeVar("_Read", bound=Callable[..., Any])


def _storage_errors(read: _Read) -> _Read:
    """A read of FileIO whose other OSErrors (a connection refused or reset, a timeout, throttling, an
    I/O error, access denied) are raised as `errors.StorageError`s naming the location asked."""

    @functools.wraps(read)
    def reading(self: FileIO, location: str | Sequence[str], *args: Any, **kwargs: Any) -> Any:
        try:
            return read(self, location, *args, **kwargs)
        except _DEFINITE_ANSWERS:
            raise
        except OSError as err:
            named = location if isinstance(location, str) else ", ".join(location[:3])
            raise StorageError.of(err, named) from err

    return cast(_Read, reading)


class FileIO:
    """Storage access by location. Holds only its properties (so it pickles into Spark tasks); one
    instance may be shared by threads."""

    def __init__(self, properties: Mapping[str, str] | None = None) -> None:
        self.properties = dict(properties or {})
        self._s3: pafs.S3FileSystem | None = None
        self._gcs: pafs.GcsFileSystem | None = None
        self._azure: dict[str, pafs.AzureFileSystem] = {}  # by storage account

    def __getstate__(self) -> dict[str, Any]:
        return {"properties": self.properties}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["properties"])

    def resolve(self, location: str) -> tuple[pafs.FileSystem, str]:
        """The pyarrow file system of `location` and the path within it."""
        if location.startswith("/"):  # a plain absolute path, by far the commonest: no parsing
            return _LOCAL, location
        if location.startswith("file:") and comparable(location).startswith("/"):
            # Literally, as Iceberg's readers take a file URI's path (never percent-decoded, and a `#` or
            # `?` is part of the name, which URL parsing would cut off): the mirror's own files are named so
            # in Iceberg (`locations.iceberg_location`); a Delta `file:` URI is decoded before it gets here
            # (`locations.resolve_location`).
            return _LOCAL, comparable(location)
        parsed = urlparse(location)
        if not parsed.scheme or len(parsed.scheme) == 1:  # a plain path (or a Windows drive letter)
            return _LOCAL, location
        store = store_of_scheme(parsed.scheme)
        if store == "s3":
            if self._s3 is None:
                self._s3 = s3_filesystem(self.properties)
            return self._s3, f"{parsed.netloc}{parsed.path}"
        if store == "gcs":
            if self._gcs is None:
                self._gcs = gcs_filesystem(self.properties)
            return self._gcs, f"{parsed.netloc}{parsed.path}"
        if store == "azure":
            # Hadoop's `container@account.blob.core.windows.net` (or pyarrow's bare `container`).
            container, _, host = parsed.netloc.partition("@")
            account = host.split(".", 1)[0]
            filesystem = self._azure.get(account)
            if filesystem is None:
                filesystem = self._azure[account] = azure_filesystem(self.properties, account)
            return filesystem, f"{container}{parsed.path}"
        return pafs.FileSystem.from_uri(location)

    # -- reading ---------------------------------------------------------------------------------------
    # Local files are stat'ed before they are opened: a FIFO or a device named by a hostile log would hang
    # or stream forever. An object store holds no such thing, and pyarrow's open already asks for the
    # object's size (a HEAD): a second HEAD of our own would only double the requests of every read.
    def _regular_file(self, location: str) -> tuple[pafs.FileSystem, str]:
        filesystem, path = self.resolve(location)
        if filesystem is not _LOCAL:
            return filesystem, path
        kind = filesystem.get_file_info(path).type
        if kind == pafs.FileType.NotFound:
            raise FileNotFoundError(f"{location} does not exist")
        if kind != pafs.FileType.File:
            raise NotARegularFileError(f"{location} is not a regular file")
        return filesystem, path

    @_storage_errors
    def open_input(self, location: str) -> pa.NativeFile:
        """A random-access handle (`size()`, `read_at()`); the caller closes it."""
        filesystem, path = self._regular_file(location)
        return _opened(filesystem.open_input_file, location, path)

    @_storage_errors
    def read(self, location: str) -> bytes:
        filesystem, path = self._regular_file(location)
        with _opened(filesystem.open_input_stream, location, path) as stream:
            return stream.read()

    @_storage_errors
    def parquet_row_count(self, location: str) -> int:
        """Rows of a Parquet file, from its footer alone."""
        with self.open_input(location) as handle:
            return pq.ParquetFile(handle).metadata.num_rows

    @_storage_errors
    def stat(self, location: str) -> FileInfo:
        filesystem, path = self.resolve(location)
        info = filesystem.get_file_info(path)
        return self._info(location, info)

    @_storage_errors
    def stat_many(self, locations: Sequence[str]) -> list[FileInfo]:
        """`stat` of each location, in order: one file-system call per local file system, concurrent
        requests (at most REQUEST_CONCURRENCY at a time) on an object store."""
        return [
            self._info(location, info)
            for location, info in zip(locations, self._stat_all(locations), strict=True)
        ]

    @_storage_errors
    def exists_many(self, locations: Sequence[str]) -> list[bool]:
        """Whether each location is a file, in order, at one request each on an object store: pyarrow's
        stat of a missing object asks twice (is it an object, else a folder?), its open asks once.
        What a poll asks of a commit file that usually does not exist yet."""
        filesystem_paths = [self.resolve(location) for location in locations]
        if all(filesystem is _LOCAL for filesystem, _ in filesystem_paths):
            regular = pafs.FileType.File
            return [i.type == regular for i in _LOCAL.get_file_info([p for _, p in filesystem_paths])]
        if len(filesystem_paths) < 2:
            return [_opens(*pair) for pair in filesystem_paths]
        with ThreadPoolExecutor(min(REQUEST_CONCURRENCY, len(filesystem_paths))) as pool:
            return list(pool.map(lambda pair: _opens(*pair), filesystem_paths))

    @_storage_errors
    def file_sizes(
        self, locations: Sequence[str], *, listing: FolderListing | None = None
    ) -> list[int | None]:
        """The size of each location that is a regular file, None for any other (missing, a folder...):
        `stat_many` without its FileInfo objects, for the million files a first version checks.

        `listing` (`FileIO.listing`): the locations inside its folder are answered by its one recursive
        listing instead of a request each; locations outside it are stat'ed as without it."""
        regular = pafs.FileType.File
        if listing is not None:
            listed = [listing.size_of(*self.resolve(location)) for location in locations]
            rest = [i for i, size in enumerate(listed) if size is _UNLISTED]
            for index, info in zip(rest, self._stat_all([locations[i] for i in rest]), strict=True):
                listed[index] = info.size if info.type == regular else None
            return listed  # type: ignore[return-value]
        return [info.size if info.type == regular else None for info in self._stat_all(locations)]

    def listing(self, folder: str) -> FolderListing | None:
        """A listing of `folder` to answer `file_sizes` with, made when first asked; None when `folder` is
        local (a stat per file costs no request). For a caller about to ask about most of what the folder
        holds (a table's whole state under its root)."""
        filesystem, base = self.resolve(folder)
        if filesystem is _LOCAL:
            return None
        return FolderListing(filesystem, base.rstrip("/") + "/")

    def _stat_all(self, locations: Sequence[str]) -> list[pafs.FileInfo]:
        groups: list[tuple[pafs.FileSystem, list[int], list[str]]] = []
        last: tuple[pafs.FileSystem, list[int], list[str]] | None = None
        for index, location in enumerate(locations):
            filesystem, path = self.resolve(location)
            if last is None or last[0] is not filesystem:  # most often the same one as the last location's
                last = next((g for g in groups if g[0].equals(filesystem)), None)
                if last is None:
                    last = (filesystem, [], [])
                    groups.append(last)
            last[1].append(index)
            last[2].append(path)
        found: list[pafs.FileInfo] = [None] * len(locations)  # type: ignore[list-item]
        for filesystem, indexes, paths in groups:
            for index, info in zip(indexes, _file_infos(filesystem, paths), strict=True):
                found[index] = info
        return found

    @_storage_errors
    def list_dir(self, location: str, *, from_name: str = "") -> list[FileInfo]:
        """The entries directly under the folder `location` (none when it does not exist), by name; with
        `from_name`, only those whose name sorts at or after it (`listFrom`)."""
        filesystem, path = self.resolve(location)
        base = location.rstrip("/")
        if from_name and filesystem is _LOCAL:
            # Names first (os.scandir, no stat), then one stat call for the names kept: an old log's
            # thousands of earlier entries cost a string comparison each.
            try:
                with os.scandir(path) as entries:
                    kept = [entry.name for entry in entries if entry.name >= from_name]
            except FileNotFoundError:
                return []
            stats = filesystem.get_file_info([f"{path.rstrip('/')}/{name}" for name in kept])
            infos = [info for info in stats if info.type != pafs.FileType.NotFound]  # gone meanwhile
        else:
            # Object stores have no portable start-after in pyarrow: the whole folder is listed, but
            # entries before `from_name` are dropped before any FileInfo is built.
            selector = pafs.FileSelector(path, allow_not_found=True, recursive=False)
            infos = [i for i in filesystem.get_file_info(selector) if i.base_name >= from_name]
        return sorted(
            (self._info(f"{base}/{info.base_name}", info) for info in infos), key=lambda i: i.location
        )

    @staticmethod
    def _info(location: str, info: pafs.FileInfo) -> FileInfo:
        kind = info.type  # made anew at each access: read once (a first version stats a million files)
        if kind == pafs.FileType.NotFound:
            return FileInfo(location, exists=False)
        return FileInfo(
            location,
            exists=True,
            is_file=kind == pafs.FileType.File,
            size=info.size,
            mtime_s=None if info.mtime is None else info.mtime.timestamp(),
        )

    # -- writing ---------------------------------------------------------------------------------------
    def makedirs(self, location: str) -> None:
        filesystem, path = self.resolve(location)
        create_folders(filesystem, path)

    def write(self, location: str, content: bytes) -> None:
        """Write a whole new file (its folder is created when missing)."""
        filesystem, path = self.resolve(location)
        create_folders(filesystem, path.rsplit("/", 1)[0])
        with filesystem.open_output_stream(path) as out:
            out.write(content)

    def open_output(self, location: str) -> pa.NativeFile:
        """A new file's output stream (its folder must exist); the caller closes it."""
        filesystem, path = self.resolve(location)
        return filesystem.open_output_stream(path)

    def parquet_writer(self, location: str, schema: pa.Schema, **options: Any) -> pq.ParquetWriter:
        """A Parquet writer for a new file at `location` (`options` as pyarrow's); the caller closes it."""
        filesystem, path = self.resolve(location)
        return pq.ParquetWriter(path, schema, filesystem=filesystem, **options)

    def delete(self, location: str) -> None:
        filesystem, path = self.resolve(location)
        filesystem.delete_file(path)

    def delete_dir_quietly(self, location: str) -> None:
        """Remove a folder and what is left in it, best effort (only ever one the mirror created)."""
        filesystem, path = self.resolve(location)
        with contextlib.suppress(OSError):
            filesystem.delete_dir(path)

    def delete_quietly(self, locations: Iterable[str]) -> None:
        """Best effort: a file that is already gone (or cannot be removed) is left to the cleanup."""
        for location in locations:
            with contextlib.suppress(OSError):
                self.delete(location)
