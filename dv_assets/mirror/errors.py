"""Errors the mirror reports to people. Bad input names the table, the version, the file and the reason."""

from __future__ import annotations

EXIT_BAD_INPUT = 2
EXIT_INTERNAL_ERROR = 3
EXIT_CONFLICT = 4

# When a set of tables' exit code sums up theirs, the worst wins: an internal error, then a refusal, then a
# lost race (a rerun converges), then done.
_SEVERITY = {0: 0, EXIT_CONFLICT: 1, EXIT_BAD_INPUT: 2, EXIT_INTERNAL_ERROR: 3}


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
