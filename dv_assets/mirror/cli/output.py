"""What every `dvmirror` subcommand prints and how it ends: one JSON document (or JSON Lines) with --json,
text otherwise; a failure is one line on stderr (`dvmirror: …`) and, with --json, the same failure as a
document on stdout; Spark's log kept only when it may explain a failure. The exit codes (defined in
errors.py, the one place):

    0 done    1 a check failed (verify)    2 bad input, refused    3 internal error    4 conflict
    5 storage error (it did not answer, after retries, or denied access)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Any

from dv_assets.mirror.errors import (
    EXIT_BAD_INPUT,
    EXIT_CHECK_FAILED,
    EXIT_CONFLICT,
    EXIT_INTERNAL_ERROR,
    EXIT_OK,
    EXIT_STORAGE,
    MirrorInputError,
)
from dv_assets.mirror.secrets import MaskedStream, mask_file

__all__ = [  # the subcommands take them from here, with the rest of how they end
    "EXIT_BAD_INPUT",
    "EXIT_CHECK_FAILED",
    "EXIT_CONFLICT",
    "EXIT_INTERNAL_ERROR",
    "EXIT_OK",
    "EXIT_STORAGE",
]


def print_json(document: dict[str, Any]) -> None:
    """One JSON document on stdout (--json), flushed."""
    print(json.dumps(document, indent=2), flush=True)


def refusal_line(err: MirrorInputError | ValueError) -> str:
    """The one line a bad input is refused with: a MirrorInputError's own (table, version, file,
    reason), else the first line of a ValueError's text (an argument or a setting)."""
    text = err.one_line() if isinstance(err, MirrorInputError) else str(err)
    return text.splitlines()[0]


def report_failure(args: argparse.Namespace, code: int, line: str, **report: object) -> int:
    """One line on stderr; with --json the same failure, and `report`'s fields, as one JSON document on
    stdout. Returns the exit code."""
    print(f"dvmirror: {line}", file=sys.stderr)
    if "spark_log" in report:
        report["spark_log"] = kept_log(report["spark_log"])  # type: ignore[arg-type]
    if getattr(args, "json", False):
        print(json.dumps({"ok": False, "exit_code": code, "error": line, **report}, indent=2))
    return code


def internal_error_line(err: Exception, spark_log: str | None) -> str:
    """An unexpected error as one line, naming Spark's log when there is one and it is not empty."""
    line = f"internal error: {type(err).__name__}: {str(err).splitlines()[0][:500]}"
    spark_log = kept_log(spark_log)
    return line if spark_log is None else f"{line} (Spark's log: {spark_log})"


def kept_log(spark_log: str | None) -> str | None:
    """Spark's log when it holds something (its secrets masked: `secrets.mask_file`); an empty one
    (nothing started, or it said nothing) is removed and never named as the place to look."""
    if spark_log is None:
        return None
    try:
        if os.path.getsize(spark_log) > 0:
            mask_file(spark_log)
            return spark_log
    except OSError:
        return None
    os.unlink(spark_log)
    return None


def child_stderr_to_log() -> str:
    """Send what the Spark JVM (a child process, inheriting fd 2) prints to a log file; its path.

    The JVM and Spark's default log4j profile write a few lines to stderr; the contract is one line on
    stderr for bad input. Python's own `sys.stderr` keeps the original stream. The caller removes the file
    after a success and names it in the message of a failure.
    """
    log = tempfile.NamedTemporaryFile(prefix="dvmirror-spark-", suffix=".log", delete=False)  # noqa: SIM115
    sys.stderr.flush()
    original = os.dup(2)
    os.dup2(log.fileno(), 2)
    log.close()
    sys.stderr = MaskedStream(os.fdopen(original, "w", buffering=1))  # type: ignore[assignment]
    return log.name
