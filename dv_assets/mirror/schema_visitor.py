"""The one walk over a typed schema, Delta's (`delta/schema.py`) or Iceberg's (`iceberg/types.py`).

Both are trees of the same four kinds of type: structs (`fields`, each with a `name` and a `type`), lists
(Delta's arrays; `element_type`), maps (`key_type`, `value_type`) and primitives (`name`). Each side's
types subclass the node class of their kind here, and every walk over either schema is a
`SchemaVisitor` run by `visit`: `visit` knows what each kind of type contains, a visitor what to make of
each. A type's text (`str`) is one such walk.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Generic, TypeVar

C = TypeVar("C")  # what a node is visited with (its path, its key, the other schema's counterpart, ...)
R = TypeVar("R")  # what visiting a node gives


class SchemaNode:
    """A type of either schema."""

    __slots__ = ()

    def __str__(self) -> str:
        """The type as one string: `struct<a: int, b: list<string>>`, `map<string, long>`, primitives by
        their name on the type's side (Delta's `integer` is Iceberg's `int`, Delta's arrays say `array`)."""
        return visit(self, _TYPE_TEXT, None)


class StructNode(SchemaNode):
    __slots__ = ()
    fields: tuple[Any, ...]  # each with `name` and `type`

    def __post_init__(self) -> None:
        if not isinstance(self.fields, tuple):  # immutable all the way down
            object.__setattr__(self, "fields", tuple(self.fields))


class ListNode(SchemaNode):
    __slots__ = ()
    TYPE_NAME = "list"  # in the type's text
    element_type: Any


class MapNode(SchemaNode):
    __slots__ = ()
    key_type: Any
    value_type: Any


class PrimitiveNode(SchemaNode):
    __slots__ = ()
    name: str


class SchemaVisitor(Generic[C, R]):
    """What one walk makes of each kind of type. `visit` hands every method its node's children as
    functions `child(context) -> result` (a struct's in field order): the method decides the order they
    are visited in, the context each sees (paths, ids, the other schema's counterpart) and whether one is
    visited at all."""

    def struct(self, struct: Any, ctx: C, fields: Sequence[Callable[[C], R]]) -> R:
        raise NotImplementedError

    def list(self, list_type: Any, ctx: C, element: Callable[[C], R]) -> R:
        raise NotImplementedError

    def map(self, map_type: Any, ctx: C, key: Callable[[C], R], value: Callable[[C], R]) -> R:
        raise NotImplementedError

    def primitive(self, primitive: Any, ctx: C) -> R:
        raise NotImplementedError


def visit(node: SchemaNode, visitor: SchemaVisitor[C, R], ctx: C) -> R:
    """`visitor`'s result for the type `node`, visited in context `ctx`."""
    if isinstance(node, StructNode):
        return visitor.struct(node, ctx, [partial(visit, f.type, visitor) for f in node.fields])
    if isinstance(node, ListNode):
        return visitor.list(node, ctx, partial(visit, node.element_type, visitor))
    if isinstance(node, MapNode):
        return visitor.map(
            node, ctx, partial(visit, node.key_type, visitor), partial(visit, node.value_type, visitor)
        )
    if isinstance(node, PrimitiveNode):
        return visitor.primitive(node, ctx)
    raise TypeError(f"not a schema type: {node!r}")


class _TypeText(SchemaVisitor[None, str]):
    def struct(self, struct: Any, ctx: None, fields: Sequence[Callable[[None], str]]) -> str:
        columns = ", ".join(f"{f.name}: {t(None)}" for f, t in zip(struct.fields, fields, strict=True))
        return f"struct<{columns}>"

    def list(self, list_type: Any, ctx: None, element: Callable[[None], str]) -> str:
        return f"{list_type.TYPE_NAME}<{element(None)}>"

    def map(self, map_type: Any, ctx: None, key: Callable[[None], str], value: Callable[[None], str]) -> str:
        return f"map<{key(None)}, {value(None)}>"

    def primitive(self, primitive: Any, ctx: None) -> str:
        return primitive.name


_TYPE_TEXT = _TypeText()
