"""`make bench`, first and quick (a few seconds): the construction cost of each hot value, the gain that
keeps its idiom.

The mirror makes some values once per file or per DV: a million `DataFile`s and `ColumnMetrics` in a
first version, 100,000 `DVTask`s, `DVBlob`s, `BlobMetadata`s and `DeleteFile`s in a large DELETE. All
are slotted dataclasses, read-only by convention, built by their plain constructors: no bypass
(`object.__new__` + `__dict__.update`, `tuple.__new__`) and no named tuple. What keeps them unfrozen is
the time a frozen dataclass of the same fields takes to build (an `object.__setattr__` per field); each
line prints the hot constructor (`fast_us`, microseconds per object) against that frozen one
(`plain_us`), with realistic values, and the ratio against its target. Exit status 1 when a ratio
misses its target (the gain is gone: the idiom is no longer worth keeping for that type).

    .venv/bin/python benchmarks/micro.py [--objects 100000] [--repeats 3] [--idioms]

`--idioms` also prints what chose the idiom: per object, for 4 to 10 plain int fields, a frozen
dataclass, the bypass of one, a frozen slotted one, a slotted one, a named tuple (constructor,
`_make`, `tuple.__new__`).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import timeit
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's dv_assets

from dv_assets.mirror.dv.reader import DVBlob, DVTask
from dv_assets.mirror.iceberg.content_files import (
    NO_METRICS,
    PUFFIN,
    ColumnMetrics,
    DataFile,
    DeleteFile,
)
from dv_assets.mirror.iceberg.metrics import IcebergMetrics
from dv_assets.mirror.iceberg.puffin import BlobMetadata

# A hot constructor must take at most this fraction of a frozen dataclass's time (>= 1.3x faster), or its
# reason to be unfrozen is gone.
TARGET_RATIO = 0.7

_TABLE = "s3://bucket/warehouse/sales.db/orders"
_DATA_FILE = f"{_TABLE}/date=2024-05-01/part-00042-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901.c000.snappy.parquet"
_PUFFIN = f"{_TABLE}_iceberg/data/00012-dv-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9.puffin"
_DV_FILE = f"{_TABLE}/deletion_vector_0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9.bin"


def _metrics() -> dict[str, Any]:
    """One data file's metrics of a 12-column table, as `StatsConverter` makes them."""
    return {
        "value_counts": {},
        "null_value_counts": {i: 0 for i in range(1, 13)},
        "lower_bounds": {i: i.to_bytes(8, "little") for i in range(1, 13)},
        "upper_bounds": {i: (i * 1000).to_bytes(8, "little") for i in range(1, 13)},
    }


def _cases() -> list[tuple[str, type, tuple[Any, ...]]]:
    """(name, hot type, the positional values a hot path passes it)."""
    metrics = _metrics()
    return [
        ("DVTask", DVTask, (_TABLE, _DATA_FILE, "u", "vBn[lx{q8@P<9BNH/isA", 1, 36, 2, 1_000_000)),
        ("DVBlob", DVBlob, (_DATA_FILE, b"\x00" * 44, 2, _DV_FILE)),
        ("BlobMetadata", BlobMetadata, (_DATA_FILE, 4, 44, 2)),
        (
            "DeleteFile",
            DeleteFile,
            (_PUFFIN, PUFFIN, ("2024-05-01",), 4_400_004, 2, _DATA_FILE, 4, 44, NO_METRICS),
        ),
        (
            "DataFile",
            DataFile,
            (_DATA_FILE, ("2024-05-01",), 12_345_678, 1_000_000, ColumnMetrics(**metrics), 0),
        ),
        ("ColumnMetrics", ColumnMetrics, tuple(metrics.values())),
        ("IcebergMetrics", IcebergMetrics, (*metrics.values(), 1_000_000)),
    ]


def frozen_twin(cls: type) -> type:
    """A frozen dataclass with `cls`'s fields (names, defaults): the constructor the idiom replaces."""
    fields = []
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            fields.append((f.name, f.type, dataclasses.field(default=f.default)))
        elif f.default_factory is not dataclasses.MISSING:
            fields.append((f.name, f.type, dataclasses.field(default_factory=f.default_factory)))
        else:
            fields.append((f.name, f.type))
    return dataclasses.make_dataclass(f"Frozen{cls.__name__}", fields, frozen=True)


def per_object_us(build: Callable[[], Any], objects: int, repeats: int) -> float:
    """The best of `repeats` runs, in microseconds per object."""
    return min(timeit.repeat(build, number=objects, repeat=repeats)) / objects * 1e6


def hot_values(objects: int, repeats: int) -> list[tuple[str, float, float]]:
    """(name, hot constructor us, frozen twin us) per hot type."""
    rows = []
    for name, cls, values in _cases():
        twin = frozen_twin(cls)
        hot = cls(*values)
        assert dataclasses.astuple(hot) == dataclasses.astuple(twin(*values)), name  # the same values
        assert not hasattr(hot, "__dict__"), f"{name} is not slotted"
        fast = per_object_us(lambda cls=cls, values=values: cls(*values), objects, repeats)
        plain = per_object_us(lambda twin=twin, values=values: twin(*values), objects, repeats)
        rows.append((name, fast, plain))
    return rows


def idioms(objects: int, repeats: int) -> list[tuple[int, str, float]]:
    """(field count, idiom, us per object) for the candidates of one idiom for hot values."""
    rows = []
    new = object.__new__
    make_tuple = tuple.__new__
    for count in (4, 6, 8, 10):
        names = [f"f{i}" for i in range(count)]
        values = tuple(range(count))
        as_dict = dict(zip(names, values, strict=True))
        frozen = dataclasses.make_dataclass("Frozen", names, frozen=True)
        frozen_slots = dataclasses.make_dataclass("FrozenSlots", names, frozen=True, slots=True)
        slots = dataclasses.make_dataclass("Slots", names, slots=True)
        named = NamedTuple("Named", [(n, int) for n in names])  # type: ignore[misc]
        make = named._make

        def bypass(frozen: type = frozen, as_dict: dict[str, int] = as_dict) -> Any:
            value = new(frozen)
            value.__dict__.update(as_dict)
            return value

        candidates: Sequence[tuple[str, Callable[[], Any]]] = (
            ("frozen dataclass", lambda frozen=frozen, values=values: frozen(*values)),
            ("frozen, object.__new__ + __dict__", bypass),
            ("frozen slotted dataclass", lambda c=frozen_slots, values=values: c(*values)),
            ("slotted dataclass", lambda c=slots, values=values: c(*values)),
            ("NamedTuple()", lambda c=named, values=values: c(*values)),
            ("NamedTuple._make", lambda make=make, values=values: make(values)),
            ("tuple.__new__", lambda c=named, values=values: make_tuple(c, values)),
        )
        rows += [(count, label, per_object_us(build, objects, repeats)) for label, build in candidates]
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=100_000, help="objects per timed run")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per figure (the best is kept)")
    parser.add_argument("--idioms", action="store_true", help="also print the candidates of the idiom")
    args = parser.parse_args(argv)
    print(f"hot values: slotted dataclass vs a frozen one of the same fields, {args.objects:,} objects")
    print(f"{'name':16s}{'fast_us':>9s}{'plain_us':>10s}{'ratio':>8s}  target")
    missed = []
    for name, fast, plain in hot_values(args.objects, args.repeats):
        ratio = fast / plain
        verdict = "ok" if ratio <= TARGET_RATIO else "MISSED"
        print(f"{name:16s}{fast:9.3f}{plain:10.3f}{ratio:8.2f}  <= {TARGET_RATIO} {verdict}")
        if ratio > TARGET_RATIO:
            missed.append(name)
    if args.idioms:
        print("\nidioms (plain int fields), us per object")
        for count, label, us in idioms(args.objects, args.repeats):
            print(f"{count:3d} fields  {label:36s}{us:7.3f}")
    if missed:
        print(f"missed the target: {', '.join(missed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
