"""A column's type changing between two schemas of a mirror: an Iceberg type promotion, or refused (pure).

Delta's type widening (reader features `typeWidening`, `typeWidening-preview`) changes a column's type
in place: old data files keep their narrower Parquet type and readers widen the values as they read.
Iceberg's counterpart is a type promotion on the same field id, for fewer changes: int → long,
float → double, and decimal(P, S) → decimal(P', S) with P' ≥ P, in format 2 and 3 alike (Iceberg Java
1.12's `TypeUtil.isPromotionAllowed`, which every Iceberg reader's schema evolution follows). The v3
spec also lists date → timestamp, which Iceberg Java does not implement: refused, like every other
change (int → double, a decimal scale increase, a change of kind). Delta's byte and short are Iceberg
int already: widening between them and int changes no Iceberg type.

float → double is an Iceberg promotion that verified readers get wrong (`READER_LIMITS`), so the mirror
refuses it too: pyiceberg 0.12 and DuckDB 1.5.5 evaluate a filter on the promoted column against an old
file's floats with the literal made a float, and lose rows (`f > 1.49` drops the float 1.49, which as a
double is 1.4900000095...); Iceberg Java 1.12 returns them (tests/delta/test_protocol_features.py).

Old data files are described in the manifests with their bounds as written under the old type; Iceberg
readers read a 4-byte int bound of a long column as the narrower value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dv_assets.mirror.errors import UnsupportedFeatureError
from dv_assets.mirror.iceberg import types as iceberg
from dv_assets.mirror.iceberg.types import IcebergType, Schema
from dv_assets.mirror.schema_visitor import SchemaVisitor, visit

_ALLOWED = "Iceberg promotes only int → long, float → double and decimal(P, S) → decimal(P', S) with P' ≥ P"


def promotion_allowed(old: str, new: str) -> bool:
    """Whether Iceberg reads a column of primitive type `old` as `new` (the same type included)."""
    if old == new or (old, new) in (("int", "long"), ("float", "double")):
        return True
    old_decimal, new_decimal = iceberg.DECIMAL_PATTERN.match(old), iceberg.DECIMAL_PATTERN.match(new)
    if old_decimal is None or new_decimal is None:
        return False
    (old_precision, old_scale), (new_precision, new_scale) = (
        (int(m.group(1)), int(m.group(2))) for m in (old_decimal, new_decimal)
    )
    return old_scale == new_scale and old_precision <= new_precision


# Promotions Iceberg allows that verified Iceberg readers do not read exactly, and why.
READER_LIMITS: dict[tuple[str, str], str] = {
    ("float", "double"): (
        "pyiceberg 0.12 and DuckDB 1.5.5 filter the old files' floats with the literal made a float and "
        "lose rows (`f > 1.49` drops the float 1.49, 1.4900000095... as a double)"
    ),
}


def refused_promotion(old: str, new: str) -> str | None:
    """Why the mirror refuses a column of Iceberg primitive type `old` becoming `new` (None: it does not)."""
    if (old, new) in READER_LIMITS:
        return (
            f"an Iceberg type promotion that Iceberg readers do not read exactly: {READER_LIMITS[old, new]}"
        )
    if promotion_allowed(old, new):
        return None
    note = _DATE_NOTE if old == "date" and new.startswith("timestamp") else ""
    return f"which Iceberg cannot express as a type promotion ({_ALLOWED}{note})"


def check_type_changes(previous: Schema, evolved: Schema) -> None:
    """Refuse (UnsupportedFeatureError) a field whose type changes from `previous` to `evolved` other
    than by an Iceberg type promotion the verified readers read exactly, naming the column and both
    types."""
    before = columns_by_id(previous)
    for field_id, (path, new_type) in columns_by_id(evolved).items():
        if field_id not in before:
            continue
        old_type = before[field_id][1]
        if isinstance(old_type, iceberg.PrimitiveType) and isinstance(new_type, iceberg.PrimitiveType):
            reason = refused_promotion(old_type.name, new_type.name)
        elif type(old_type) is type(new_type):  # a struct, list or map stays one; children by their ids
            reason = None
        else:
            reason = f"which Iceberg cannot express as a type promotion ({_ALLOWED})"
        if reason is not None:
            raise UnsupportedFeatureError(
                f"column {path!r} changes type from {old_type} to {new_type}, {reason}: its old data files "
                "could not be read exactly as the new type; mirror the table into a new Iceberg table"
            )


_DATE_NOTE = "; the v3 spec's date → timestamp is not implemented by Iceberg Java 1.12"


def columns_by_id(schema: Schema) -> dict[int, tuple[str, IcebergType]]:
    """Every field, list element and map key / value of a schema by id: its dotted path and its type."""
    return dict(visit(schema.as_struct(), _Columns(), ""))


_Found = list[tuple[int, tuple[str, IcebergType]]]


class _Columns(SchemaVisitor[str, _Found]):
    """(id, (path, type)) of a type's children, visited with the type's own path."""

    def struct(
        self, struct: iceberg.StructType, ctx: str, fields: Sequence[Callable[[str], _Found]]
    ) -> _Found:
        out: _Found = []
        for f, child in zip(struct.fields, fields, strict=True):
            path = f"{ctx}.{f.name}" if ctx else f.name
            out += [(f.id, (path, f.type)), *child(path)]
        return out

    def list(self, list_type: iceberg.ListType, ctx: str, element: Callable[[str], _Found]) -> _Found:
        path = f"{ctx}.element"
        return [(list_type.element_id, (path, list_type.element_type)), *element(path)]

    def map(
        self,
        map_type: iceberg.MapType,
        ctx: str,
        key: Callable[[str], _Found],
        value: Callable[[str], _Found],
    ) -> _Found:
        key_path, value_path = f"{ctx}.key", f"{ctx}.value"
        return [
            (map_type.key_id, (key_path, map_type.key_type)),
            (map_type.value_id, (value_path, map_type.value_type)),
            *key(key_path),
            *value(value_path),
        ]

    def primitive(self, primitive: iceberg.PrimitiveType, ctx: str) -> _Found:
        return []
