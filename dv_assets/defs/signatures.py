"""`evaluated(fn)`: a per-table closure given its signature with its annotations evaluated, once per code.

Dagster reads a decorated function's signature and type hints many times while building its definition
(about 18 signatures and 9 `typing.get_type_hints` per op: resources, inputs, outputs, context), and this
package's annotations are strings (`from __future__ import annotations`), evaluated again each time. Every
table's asset, check and op is a closure of the same code: its signature is the same, so it is computed
once per code object and set as the closure's `__signature__`, which `inspect.signature` returns as is
and from which Dagster takes the type hints (`dagster._core.decorator_utils.get_type_hints`). What Dagster
sees is what it computed before: the same parameters, the types `typing.get_type_hints` evaluates.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from types import CodeType
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_SIGNATURES: dict[CodeType, inspect.Signature] = {}


def evaluated(fn: F) -> F:
    """`fn` with `__signature__` set: its own, annotations evaluated (computed once per code; a function
    with default values, which differ between closures, gets its own)."""
    shared = fn.__defaults__ is None and not fn.__kwdefaults__  # type: ignore[attr-defined]
    signature = _SIGNATURES.get(fn.__code__) if shared else None  # type: ignore[attr-defined]
    if signature is None:
        signature = _evaluated_signature(fn)
        if shared:
            _SIGNATURES[fn.__code__] = signature  # type: ignore[attr-defined]
    fn.__signature__ = signature  # type: ignore[attr-defined]
    return fn


def _evaluated_signature(fn: Callable[..., Any]) -> inspect.Signature:
    hints = typing.get_type_hints(fn, include_extras=True)
    plain = inspect.signature(fn)
    parameters = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in plain.parameters.values()]
    return plain.replace(
        parameters=parameters, return_annotation=hints.get("return", plain.return_annotation)
    )
