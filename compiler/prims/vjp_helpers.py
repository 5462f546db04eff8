"""Small pieces shared by the vjp rules that sit beside each primitive.

Rules build their backward only from primitives (through ``build``), so a backward is ordinary IR:
it is simplified, fused and planned like the forward, and it can be differentiated again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from compiler.ir.core import Op, Value
from compiler.ir.types import DType, TensorType
from compiler.prims.base import Build, Primitive, Vjp
from compiler.prims.source import constant

Wanted = tuple[bool, ...]  # wanted[k]: operand k needs a cotangent
Cotangents = tuple[Value | None, ...]  # one per operand; None is zero


def vjp_rule(rule: Vjp) -> Vjp:
    """Wrap a rule so that integer and bool operands never get a cotangent.

    The wrapped rule sees ``wanted`` with non-float operands turned off and is not called at all when
    nothing is left, so a rule only checks ``wanted`` for operands that may really need work.
    """

    @functools.wraps(rule)
    def wrapped(build: Build, op: Op, ct: Any, wanted: tuple[bool, ...]) -> tuple[Any | None, ...]:
        wanted = tuple(w and v.type.dtype.is_float for w, v in zip(wanted, op.operands, strict=True))
        if not any(wanted):
            return (None,) * len(op.operands)
        cts = rule(build, op, ct, wanted)
        assert len(cts) == len(op.operands), f"{op.prim.name} vjp: one cotangent per operand"
        return tuple(c if w else None for c, w in zip(cts, wanted, strict=True))

    return wrapped


def emitter(build: Build) -> Callable[..., Value]:
    """``e(prim, *operands, **attrs)``: ``build`` with a call shape that nests readably in formulas."""
    return lambda prim, *operands, **attrs: build(prim, operands, attrs)


def scalar(build: Build, value: float, dtype: DType) -> Value:
    """A 0-d constant."""
    return build(constant, [], {"value": np.array(value, dtype=dtype.np)})


def full_like(build: Build, value: float, ttype: TensorType) -> Value:
    """``value`` everywhere in ``ttype``: a broadcast 0-d constant, never a dense literal."""
    from compiler.prims.movement import broadcast  # on use: movement's own rules import this module

    c = scalar(build, value, ttype.dtype)
    return c if ttype.rank == 0 else build(broadcast, [c], {"shape": ttype.shape})


def own_attrs(prim: Primitive, op: Op) -> dict[str, Any]:
    """The forward op's attributes that belong to ``prim``, without ``dsl.*`` annotations (an in-place
    request on the forward op says nothing about the backward op that reuses its attributes)."""
    return {k: op.attrs[k] for k in prim.attrs}
