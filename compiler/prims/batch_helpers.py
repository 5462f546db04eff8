"""Small pieces shared by the batching rules (``Primitive.batch``, used by ``vmap``).

A batched value carries the batch as its leading axis; a rule gets the op's new operands and which of
them are batched, and returns the op's result with a leading batch axis, built from primitives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from compiler.ir.core import Value
from compiler.prims.base import Build


def with_batch(build: Build, v: Value, batched: bool, size: int) -> Value:
    """``v`` with a leading batch axis: itself if it has one, else broadcast along a new one."""
    if batched:
        return v
    from compiler.prims.movement import broadcast  # on use: movement's own rules import this module

    return build(broadcast, [v], {"shape": (size,) + v.type.shape})


def all_batched(build: Build, operands: Sequence[Value], batched: Sequence[bool], size: int) -> list[Value]:
    return [with_batch(build, v, b, size) for v, b in zip(operands, batched, strict=True)]


def shifted(attrs: Any, name: str, first: int) -> tuple[int, ...]:
    """An attribute of one int per axis, with ``first`` for the new leading axis."""
    return (first,) + tuple(int(v) for v in attrs[name])
