"""Errors the mirror reports to people, and every exit code of `dvmirror` (defined here only). Bad input
names the table, the version, the file and the reason; a storage error names the location and its kind."""

from __future__ import annotations

EXIT_OK = 0
EXIT_CHECK_FAILED = 1  # `dvmirror verify`: a check failed
EXIT_BAD_INPUT = 2  # refused: a person must look
EXIT_INTERNAL_ERROR = 3
EXIT_CONFLICT = 4  # another writer committed first: nothing of the run committed, a rerun converges
EXIT_STORAGE = 5  # the storage did not answer, or refused access: nothing of the failed version committed

# When a set of tables' exit code sums up theirs, the worst wins: an internal error, then a refusal, then a
# storage error (it may pass), then a lost race (a rerun converges), then done.
_SEVERITY = {EXIT_OK: 0, EXIT_CONFLICT: 1, EXIT_STORAGE: 2, EXIT_BAD_INPUT: 3, EXIT_INTERNAL_ERROR: 4}


def worst_exit_code(codes: list[int]) -> int:
    """The exit code that sums up `codes` (0 when empty)."""
    return max(codes, key=_SEVERITY.__getitem__, default=0)


class MirrorInputError(Exception):
    """The Delta table (or a file it references) cannot be mirrored as it is; nothing was committed."""

    def __init__(
        self,
        reason: str,
        *,
        table: str | None = None,
        version: int | None = None,
        file: str | None = None,
    ) -> None:
        self.reason = reason
        self.table = table
        self.version = version
        self.file = file
        super().__init__(self.one_line())

    def one_line(self) -> str:
        parts = []
        if self.table is not None:
            parts.append(f"table {self.table}")
        if self.version is not None:
            parts.append(f"version {self.version}")
        if self.file is not None:
            parts.append(f"file {self.file}")
        where = ", ".join(parts)
        return f"{where}: {self.reason}" if where else self.reason

    def at(self, *, table: str | None = None, version: int | None = None, file: str | None = None):
        """The same error with missing context filled in (inner layers often do not know the table)."""
        return type(self)(
            self.reason,
            table=self.table if self.table is not None else table,
            version=self.version if self.version is not None else version,
            file=self.file if self.file is not None else file,
        )


class SparkSetupError(MirrorInputError):
    """Spark cannot start here: no usable Java, or the JVM jars are missing. Said before any Spark start,
    in one line naming what is needed (exit 2)."""


class UnsupportedFeatureError(MirrorInputError):
    """The table uses a Delta reader feature the mirror cannot reproduce exactly."""


class InvalidDeletionVectorError(MirrorInputError):
    """A deletion vector failed a check (length, magic, CRC-32, cardinality, position range) or is missing."""


class MirrorConflictError(Exception):
    """Another writer changed the Iceberg table between planning and committing (typically a second sync
    of the same table). Nothing of this run was committed; rerunning converges."""

    def __init__(self, reason: str, *, table: str, version: int | None = None) -> None:
        self.reason = reason
        self.table = table
        self.version = version
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = f"table {self.table}" + ("" if self.version is None else f", version {self.version}")
        return f"{where}: {self.reason}"


class StorageError(OSError):
    """Storage could not be read (listed, stat'ed, opened) at `location`: not a verdict on the table but a
    failure to get one (exit 5, never a refusal). An OSError, so code that treats any I/O failure alike
    still does. `kind` says which: `StorageUnavailableError` (trying again later may succeed),
    `StorageNotFoundError`, `StoragePermissionError` (definite answers)."""

    kind = "unavailable"

    def __init__(self, reason: str, *, location: str, table: str | None = None) -> None:
        self.reason = reason
        self.location = location
        self.table = table
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = f"table {self.table}, " if self.table is not None else ""
        return f"{where}storage {self.kind}: {self.location}: {self.reason}"

    @staticmethod
    def of(
        err: OSError, location: str, *, table: str | None = None, doing: str | None = None
    ) -> StorageError:
        """`err`, raised by the storage at `location` (while `doing` it), as the storage error of its
        kind."""
        if isinstance(err, StorageError):
            kind: type[StorageError] = type(err)
            reason = err.reason
        else:
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
            kind = _kind_of(err, reason)
        return kind(f"{doing}: {reason}" if doing else reason, location=location, table=table)


def _kind_of(err: OSError, reason: str) -> type[StorageError]:
    if isinstance(err, FileNotFoundError):
        return StorageNotFoundError
    # pyarrow reports an object store's 403 as a plain OSError naming the AWS/GCS/Azure error.
    if isinstance(err, PermissionError) or any(marker in reason for marker in _ACCESS_DENIED):
        return StoragePermissionError
    return StorageUnavailableError


_ACCESS_DENIED = ("ACCESS_DENIED", "AccessDenied", "AuthorizationPermissionMismatch", "403")


class StorageUnavailableError(StorageError):
    """The storage did not answer (a connection refused or reset, a timeout, throttling, an I/O error):
    trying again later may succeed."""

    kind = "unavailable"


class StorageNotFoundError(StorageError, FileNotFoundError):
    """The storage answered that the location does not exist."""

    kind = "missing"


class StoragePermissionError(StorageError, PermissionError):
    """The storage answered that this process may not read the location."""

    kind = "permission denied"
