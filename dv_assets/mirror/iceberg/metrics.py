"""Delta per-file stats -> Iceberg column metrics (record count, null counts, lower/upper bounds). Pure.

Safety first: Iceberg readers skip a data file when a predicate cannot match its bounds, so a bound
that is too tight loses live rows silently. Only values that are certainly valid are emitted:

* numbers, dates, booleans: Delta's min/max as they are (wide bounds after DVs are still bounds);
  a float/double zero widens to -0.0 below and +0.0 above (Iceberg orders -0.0 < 0.0); NaN or
  infinite stats are skipped;
* decimals: only when the exact digits are known (stats text parsed as Decimal, or a float with at
  most 15 significant digits, which round-trips exactly);
* timestamps: Delta truncates stats to milliseconds, so the upper bound is max + 999 microseconds; a
  `timestamp` (with time zone) stat without an offset is ambiguous and skipped;
* strings: the min is a prefix of the true min, hence a valid lower bound; the max is emitted only when
  it is shorter than Delta's truncation length (`delta.dataSkippingStringPrefixLength`, 32, counted in
  UTF-16 code units as Java does) and does not end in a tie-breaker (U+FFFD, U+FFFF, U+10FFFF), i.e.
  certainly not truncated; older Delta's truncated max ends in U+FFFD, which is not an upper bound
  under Iceberg's UTF-8 byte order. Collated strings are skipped (their stats use another order);
* binary, variant, and anything inside a list or map: nothing (struct children are handled like
  columns);
* null counts: exact when `tightBounds` is true (or absent); when false, Delta only promises the
  special values 0 and numRecords, so only those are emitted;
* partition columns are not in the data files: nothing is emitted for them.

Bounds are inclusive, not exact (timestamps, strings, wide bounds after DVs). Engines that answer
MIN/MAX from metadata must not trust them: the mirror table should carry `MIRROR_TABLE_PROPERTIES`.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Context, Decimal, InvalidOperation
from typing import Any, Protocol

from dv_assets.mirror.delta import schema as delta
from dv_assets.mirror.delta.column_mapping import physical_name
from dv_assets.mirror.iceberg import types as iceberg
from dv_assets.mirror.iceberg.content_files import ColumnMetrics
from dv_assets.mirror.iceberg.schema import ICEBERG_DECIMAL, matched_fields
from dv_assets.mirror.schema_visitor import SchemaVisitor, visit

DEFAULT_STRING_PREFIX_LENGTH = 32
STRING_PREFIX_LENGTH_PROPERTY = "delta.dataSkippingStringPrefixLength"
COLLATIONS_METADATA = "__COLLATIONS"
TIMESTAMP_STATS_SLACK_MICROS = 999
# What Delta appends to a truncated max (U+FFFD by older writers, U+10FFFF or '\uffff' by others): a
# max ending in one may have been truncated, whatever its length.
_TIE_BREAKERS = ("\ufffd", "\uffff", "\U0010ffff")
# Column metrics mode "counts": Iceberg engines then never answer MIN/MAX from these bounds.
MIRROR_TABLE_PROPERTIES = {"write.metadata.metrics.default": "counts"}

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EXACT = Context(prec=100)  # decimal(38, s) needs more than the default 28 digits
_EPOCH_DATE = date(1970, 1, 1)


@dataclass(slots=True)  # not frozen, as ColumnMetrics (one per data file)
class IcebergMetrics(ColumnMetrics):
    """Metrics of one data file from its Delta stats (no value counts: Delta keeps none)."""

    record_count: int | None = None


class DeltaMetadataLike(Protocol):
    """The fields of `dv_assets.mirror.delta.actions.Metadata` this module reads."""

    @property
    def schema(self) -> delta.StructType: ...
    @property
    def column_mapping_mode(self) -> str: ...
    @property
    def partition_columns(self) -> Sequence[str]: ...
    @property
    def configuration(self) -> Mapping[str, str]: ...


@dataclass(frozen=True)
class StatsConverter:
    """Delta stats to Iceberg metrics for the files of one schema and settings: the column walk is done
    once (`of`), not once per file, as a version may add a million files."""

    leaves: tuple[_Leaf, ...]
    string_prefix_length: int

    @classmethod
    def of(
        cls,
        delta_schema: delta.StructType,
        iceberg_schema: iceberg.Schema,
        column_mapping_mode: str = "none",
        partition_columns: Sequence[str] = (),
        string_prefix_length: int = DEFAULT_STRING_PREFIX_LENGTH,
    ) -> StatsConverter:
        partitions = set(partition_columns)
        data_columns = delta.StructType(tuple(f for f in delta_schema.fields if f.name not in partitions))
        walk = visit(data_columns, _Leaves(column_mapping_mode or "none"), (iceberg_schema.as_struct(), ()))
        return cls(tuple(walk), string_prefix_length)

    @classmethod
    def for_table(cls, iceberg_schema: iceberg.Schema, metadata: DeltaMetadataLike) -> StatsConverter:
        """The converter of a Delta table's files, its settings taken from the table's metadata."""
        return cls.of(
            metadata.schema,
            iceberg_schema,
            metadata.column_mapping_mode,
            metadata.partition_columns,
            int(metadata.configuration.get(STRING_PREFIX_LENGTH_PROPERTY, DEFAULT_STRING_PREFIX_LENGTH)),
        )

    def __call__(self, stats: str | Mapping[str, Any] | None) -> IcebergMetrics:
        parsed = _parse_stats(stats)
        if parsed is None:
            return IcebergMetrics(record_count=None)
        num_records = parsed.get("numRecords")
        record_count = num_records if _is_int(num_records) else None
        tight = parsed.get("tightBounds", True) is not False
        null_counts, min_values, max_values = (
            parsed.get("nullCount"),
            parsed.get("minValues"),
            parsed.get("maxValues"),
        )
        nulls, lowers, uppers = {}, {}, {}
        for leaf in self.leaves:
            null_count = _lookup(null_counts, leaf.stats_path)
            if _is_int(null_count) and (tight or null_count == 0 or null_count == record_count):
                nulls[leaf.field_id] = null_count
            if leaf.skip_bounds:
                continue
            lower = _lower_bound(leaf, _lookup(min_values, leaf.stats_path))
            upper = _upper_bound(leaf, _lookup(max_values, leaf.stats_path), self.string_prefix_length)
            if lower is not None:
                lowers[leaf.field_id] = lower
            if upper is not None:
                uppers[leaf.field_id] = upper
        return IcebergMetrics(
            record_count=record_count, null_value_counts=nulls, lower_bounds=lowers, upper_bounds=uppers
        )


# One decoder for every file's stats: `json.loads` with an argument builds a new one per call (a tenth
# of the time of a million-file first version's metrics).
_STATS_JSON = json.JSONDecoder(parse_float=Decimal)


def _parse_stats(stats: str | Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if stats is None or stats == "":
        return None
    if isinstance(stats, str):
        try:
            parsed = _STATS_JSON.decode(stats)
        except json.JSONDecodeError:
            return None  # unreadable stats only cost pruning, never correctness
        return parsed if isinstance(parsed, dict) else None
    return stats


# --- which columns -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Leaf:
    stats_path: tuple[str, ...]  # keys in the stats JSON (physical names under column mapping)
    field_id: int
    iceberg_type: str
    skip_bounds: bool


_Partner = tuple[iceberg.IcebergType, tuple[str, ...]]  # the Iceberg counterpart, the stats path


class _Leaves(SchemaVisitor[_Partner, list[_Leaf]]):
    """Primitive columns reachable through structs, matched to Iceberg fields by (logical) name."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def struct(self, struct: delta.StructType, ctx: _Partner, fields: Sequence[Callable]) -> list[_Leaf]:
        partner, path = ctx
        leaves: list[_Leaf] = []
        for delta_field, child, iceberg_field in matched_fields(struct, fields, partner):
            stats_path = (*path, physical_name(delta_field, self.mode))
            if isinstance(delta_field.type, delta.StructType):
                leaves += child((iceberg_field.type, stats_path))
            elif isinstance(iceberg_field.type, iceberg.PrimitiveType):
                skip_bounds = (
                    COLLATIONS_METADATA in delta_field.metadata
                    or iceberg_field.type.name == "variant"  # Delta keeps no min/max of a variant
                )
                leaves.append(_Leaf(stats_path, iceberg_field.id, iceberg_field.type.name, skip_bounds))
        return leaves

    def list(self, array: delta.ArrayType, ctx: _Partner, element: Callable) -> list[_Leaf]:
        return []  # nothing inside a list

    def map(self, map_type: delta.MapType, ctx: _Partner, key: Callable, value: Callable) -> list[_Leaf]:
        return []  # nor inside a map

    def primitive(self, primitive: delta.PrimitiveType, ctx: _Partner) -> list[_Leaf]:
        return []  # leaves are made by their struct, which knows the field


def _lookup(values: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(values, Mapping):
            return None
        values = values.get(key)
    return values


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --- bounds -------------------------------------------------------------------------------------------


def _lower_bound(leaf: _Leaf, value: Any) -> bytes | None:
    if value is None:
        return None
    if leaf.iceberg_type == "string":
        if not isinstance(value, str):
            return None
        # A prefix of the min is <= the min in UTF-8 byte order. A truncation may have split a surrogate
        # pair; without its dangling high surrogate the value is still a (code point) prefix.
        if value and "\ud800" <= value[-1] <= "\udbff":
            value = value[:-1]
        return _utf8(value)
    typed = _typed_stat(leaf.iceberg_type, value)
    if typed is None:
        return None
    if leaf.iceberg_type in ("float", "double") and typed == 0.0:
        typed = -0.0
    return to_single_value_bytes(leaf.iceberg_type, typed)


def _upper_bound(leaf: _Leaf, value: Any, string_prefix_length: int) -> bytes | None:
    if value is None:
        return None
    if leaf.iceberg_type == "string":
        # Shorter than the truncation length (in Java chars, as Delta counts) means Delta did not truncate
        # it: the exact max. A value ending in a possible tie-breaker is refused even so.
        if (
            isinstance(value, str)
            and _utf16_units(value) < string_prefix_length
            and not value.endswith(_TIE_BREAKERS)
        ):
            return _utf8(value)
        return None
    typed = _typed_stat(leaf.iceberg_type, value)
    if typed is None:
        return None
    if leaf.iceberg_type in ("float", "double") and typed == 0.0:
        typed = 0.0
    if leaf.iceberg_type in ("timestamp", "timestamptz"):
        typed += TIMESTAMP_STATS_SLACK_MICROS
    return to_single_value_bytes(leaf.iceberg_type, typed)


def _utf16_units(value: str) -> int:
    """The length of `value` in UTF-16 code units (Java chars): characters outside the BMP count 2."""
    return len(value.encode("utf-16-le", "surrogatepass")) // 2


def _utf8(value: str) -> bytes | None:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a truncation: no safe bound
        return None


def _typed_stat(iceberg_type: str, value: Any) -> Any:
    """A Delta stats JSON value as the Python value of `iceberg_type`, or None when not certain."""
    if iceberg_type == "boolean":
        return value if isinstance(value, bool) else None
    if iceberg_type in ("int", "long"):
        if _is_int(value):
            return value
        if isinstance(value, Decimal) and value == value.to_integral_value():
            return int(value)
        return None
    if iceberg_type in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
            return None  # "NaN" / "Infinity" strings included
        number = float(value)
        return number if math.isfinite(number) else None
    if iceberg_type == "date":
        return _days(value)
    if iceberg_type in ("timestamp", "timestamptz"):
        return _micros(value, with_zone=iceberg_type == "timestamptz")
    match = ICEBERG_DECIMAL.match(iceberg_type)
    if match:
        return _decimal(value, int(match.group(1)), int(match.group(2)))
    return None


def _days(value: Any) -> int | None:
    if not isinstance(value, str):
        return None
    try:
        return (date.fromisoformat(value) - _EPOCH_DATE).days
    except ValueError:
        return None


def _micros(value: Any, *, with_zone: bool) -> int | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if (parsed.tzinfo is not None) != with_zone:
        return None  # an instant without its offset (or a local time with one): ambiguous
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    delta = parsed - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _decimal(value: Any, precision: int, scale: int) -> Decimal | None:
    if _is_int(value):
        number = Decimal(value)
    elif isinstance(value, Decimal):
        number = value
    elif (
        isinstance(value, float)
        and math.isfinite(value)
        and len(Decimal(repr(value)).as_tuple().digits) <= 15
    ):
        number = Decimal(repr(value))  # <= 15 significant digits survive the trip through a double
    else:
        return None
    try:
        scaled = number.quantize(Decimal(1).scaleb(-scale), context=_EXACT)
    except InvalidOperation:
        return None
    if scaled != number or len(scaled.as_tuple().digits) > precision:
        return None
    return scaled


def _unscaled(value: Decimal, scale: int) -> int:
    """The integer digits of `value` at `scale`, exactly (no context rounding at 38 digits)."""
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int), "finite decimals only"
    magnitude = int("".join(map(str, digits)) or "0")
    shift = exponent + scale
    if shift < 0:
        magnitude, remainder = divmod(magnitude, 10**-shift)
        if remainder:
            raise ValueError(f"{value} has more than {scale} decimal places")
    else:
        magnitude *= 10**shift
    return -magnitude if sign else magnitude


# --- Iceberg single-value binary serialization (spec Appendix D) -------------------------------------


def to_single_value_bytes(iceberg_type: str, value: Any) -> bytes:
    """Iceberg's binary single-value form: little-endian numbers, UTF-8 strings, big-endian
    two's-complement unscaled decimals (minimal length), days for dates, microseconds for timestamps."""
    if iceberg_type == "boolean":
        return b"\x01" if value else b"\x00"
    if iceberg_type in ("int", "date"):
        return struct.pack("<i", value)
    if iceberg_type in ("long", "timestamp", "timestamptz"):
        return struct.pack("<q", value)
    if iceberg_type == "float":
        return struct.pack("<f", value)
    if iceberg_type == "double":
        return struct.pack("<d", value)
    if iceberg_type == "string":
        return value.encode("utf-8")
    if iceberg_type == "binary":
        return bytes(value)
    decimal_type = ICEBERG_DECIMAL.match(iceberg_type)
    if decimal_type:
        unscaled = _unscaled(Decimal(value), int(decimal_type.group(2)))
        length = max(1, (unscaled + (unscaled < 0)).bit_length() // 8 + 1)
        return unscaled.to_bytes(length, "big", signed=True)
    raise ValueError(f"no single-value serialization for Iceberg type {iceberg_type}")
