"""Which adds of a checkpoint a restricted replay reads, chosen in Arrow by their raw paths' base names
before any Python object is made (`replay.py`'s restricted replay, `checkpoint_index.py`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

# A raw path whose decoded location may have another base name than the raw path's own: percent escapes
# (`a%2Db` is `a-b`), and a last segment that normalisation removes (`x/.`, `x/..`, `x/`).
_BASENAME_MAY_CHANGE = r"%|(^|/)\.{0,2}$"


def raw_basenames(paths: pa.Array) -> pa.Array:
    """Each raw path's last segment, as written (null for a null path)."""
    return pc.replace_substring_regex(paths, pattern="^.*/", replacement="")


def always_admitted(paths: pa.Array) -> pa.Array:
    """Whether `AddCandidates` admits the add of each raw path whatever base names it is given: decoding
    may change its base name, or it has none (never null)."""
    return pc.fill_null(pc.match_substring_regex(paths, _BASENAME_MAY_CHANGE), True)


@dataclass
class AddCandidates:
    """Which checkpoint adds a restricted replay reads: a SUPERSET of those whose decoded location has one
    of `basenames` (the exact check, on decoded locations, is the replay's). An add is admitted when its
    raw path's base name is one of them, when decoding may change that base name, or when it has no path
    (parsing refuses it); all are, when the `add` column lacks `path` (read whole to be refused).

    `passed_over` keeps the base names of the adds left out (raw = decoded for them), one Arrow array
    per batch: a base name seen twice may be a file listed twice, which the replay must still refuse."""

    basenames: frozenset[str]
    # False: `passed_over` stays empty (a caller that finds duplicates otherwise, `DeltaTable.whole_state`).
    keeps_passed_over: bool = True
    passed_over: list[pa.Array] = field(default_factory=list)
    _value_set: pa.Array = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._value_set = pa.array(sorted(self.basenames), pa.string())

    def admitted(self, adds: pa.StructArray) -> pa.StructArray:
        if adds.type.get_field_index("path") < 0:
            return adds
        paths = pc.struct_field(adds, "path")
        basenames = raw_basenames(paths)
        named = pc.is_in(basenames, value_set=self._value_set)
        mask = pc.or_(named, always_admitted(paths))
        if self.keeps_passed_over:
            self.passed_over.append(basenames.filter(pc.invert(mask)))
        return adds.filter(mask)

    def admits_json(self, action: dict[str, Any]) -> bool:
        """`admitted` for one action of a JSON checkpoint part (every other action is admitted)."""
        add = action.get("add")
        path = add.get("path") if isinstance(add, dict) else None
        if not isinstance(path, str):
            return True
        basename = path.rsplit("/", 1)[-1]
        if basename in self.basenames or re.search(_BASENAME_MAY_CHANGE, path) is not None:
            return True
        if self.keeps_passed_over:
            self.passed_over.append(pa.array([basename], pa.string()))
        return False

    def repeated(self, admitted_basenames: list[str]) -> set[str]:
        """The base names seen more than once among the adds passed over and the (decoded) base names of
        those admitted, `admitted_basenames`: where a file may be listed twice unseen."""
        names = pa.chunked_array([*self.passed_over, pa.array(admitted_basenames, pa.string())], pa.string())
        counts = pc.value_counts(names)
        twice = counts.filter(pc.greater(counts.field("counts"), 1)).field("values")
        return set(twice.to_pylist())
