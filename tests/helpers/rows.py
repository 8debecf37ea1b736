"""The one row canonicaliser: rows from Arrow (Delta Spark and Iceberg Java through `toArrow()`,
pyiceberg) and from the fixtures' JSON lines, in one comparable form.

Timestamps with a zone become their UTC text (`2023-05-31 18:58:33.633000+00:00`, as the fixtures write
them) and naive ones keep no offset, so a timestamp that lost or gained its zone never compares equal.
Decimals and dates become text, bytes hex, Arrow maps (lists of key/value pairs) dicts. A float NaN
becomes the text `NaN` (Python's NaN never equals another NaN, so rows holding one would never compare
equal) and -0.0 the text `-0.0` (it equals 0.0 in Python, and a reader that loses the sign must not pass).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

NAN = "NaN"
NEGATIVE_ZERO = "-0.0"


def canonical(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return NAN
        if value == 0.0 and math.copysign(1.0, value) < 0:
            return NEGATIVE_ZERO
        return value
    if isinstance(value, dt.datetime):
        return str(value.astimezone(dt.UTC)) if value.tzinfo is not None else str(value)
    if isinstance(value, Decimal | dt.date):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):  # an Arrow map
            return dict(sorted(((canonical(k), canonical(v)) for k, v in value), key=repr))
        return [canonical(v) for v in value]
    return value


def row_key(row: Any) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def sorted_rows(rows: Iterable[dict]) -> list[dict]:
    """Rows as dicts, canonical and in one order."""
    return sorted((canonical(r) for r in rows), key=row_key)


def as_tuples(rows: Iterable[dict], columns: Sequence[str]) -> list[tuple]:
    """Canonical rows (dicts) as tuples over `columns`, in one order."""
    return sorted((tuple(row[c] for c in columns) for row in rows), key=row_key)
