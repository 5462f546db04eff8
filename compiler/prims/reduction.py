"""Reductions over a set of axes: sum, max, min. ``keepdims`` and ``mean`` are frontend compositions."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from compiler.ir.core import Op, Value
from compiler.ir.types import DType, TensorType
from compiler.prims import elementwise as ew
from compiler.prims import mlir as ml
from compiler.prims import movement as mv
from compiler.prims.base import AttrType, Build, Kind, Memory, Primitive, Reducer, Vjp, fail
from compiler.prims.vjp_helpers import Cotangents, Wanted, emitter, vjp_rule
from runtime import array_ops


def _reduce_rule(name: str, allow_bool: bool):
    def rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
        (x,) = types
        axes = tuple(attrs["axes"])
        if len(set(axes)) != len(axes) or list(axes) != sorted(axes):
            raise fail(f"{name}: axes must be sorted and unique, got {axes}")
        for a in axes:
            if not 0 <= a < x.rank:
                raise fail(f"{name}: axis {a} is out of range for an array of rank {x.rank}")
        if x.dtype.is_bool and not allow_bool:
            raise fail(f"{name} does not accept bool operands; cast them first")
        return [x.with_shape(tuple(d for i, d in enumerate(x.shape) if i not in axes))]

    return rule


def _lowest(d: DType) -> float | int | bool:
    return array_ops.lowest(d.np)


def _highest(d: DType) -> float | int | bool:
    return array_ops.highest(d.np)


def _reduction(
    name: str,
    reference: Callable[..., np.ndarray],
    reducer: Reducer,
    vjp_needs: frozenset[str],
    allow_bool: bool,
    vjp: Vjp,
) -> Primitive:
    return Primitive(
        name=name,
        kind=Kind.REDUCTION,
        nargs=1,
        attrs={"axes": AttrType.INTS},
        shape_rule=_reduce_rule(name, allow_bool),
        reference=reference,
        memory=Memory(vjp_needs=vjp_needs),
        reducer=reducer,
        mlir=ml.reduction,
        vjp=vjp,
    )


def _sum_accumulator(d: DType) -> DType:
    """Float32 sums accumulate in float64, on every backend and in every fused form
    (``array_ops.sum_dtype``, which the reference uses too). On the CPU the float64 adds stay
    vectorized (and the sums of a fused kernel are a small part of its work)."""
    return DType.from_numpy(array_ops.sum_dtype(d.np))


def _expand(build: Build, v: Value, op: Op) -> Value:
    """``v`` (shaped like the reduction's result) broadcast back over the reduced axes of its operand."""
    x = op.operands[0].type
    if v.type.shape == x.shape:  # no axes reduced
        return v
    kept = tuple(1 if i in op.attrs["axes"] else d for i, d in enumerate(x.shape))
    return build(mv.broadcast, [build(mv.reshape, [v], {"shape": kept})], {"shape": x.shape})


@vjp_rule
def _sum_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    return (_expand(build, ct, op),)


@vjp_rule
def _chooser_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    """max/min: the cotangent is shared equally by every position that attains the result (JAX's rule;
    for one winner that is the winner, and a tie of k positions gives each 1/k)."""
    e, (x,) = emitter(build), op.operands
    winners = e(ew.cast, e(ew.eq, x, _expand(build, op.result, op)), dtype=x.type.dtype)
    count = e(reduce_sum, winners, axes=op.attrs["axes"])
    return (e(ew.mul, winners, _expand(build, e(ew.div, ct, count), op)),)


def _max_combine(acc: str, x: str) -> str:
    """max's ``combine(acc, x)``: NaN propagates, as in NumPy; of two equal zeros, their sum (-0.0 only
    when both are: -0.0 orders below +0.0, as in JAX and the CPU's keyed loops, ``vecmath.max_key_f32``).
    One expression for every dtype: integers and bools take the zero branch at 0 == 0 and get 0."""
    tie = f"({acc} + {x})"
    return f"({x} if ({x} > {acc} or {x} != {x}) else ({tie} if ({x} == {acc} and {x} == 0) else {acc}))"


def _min_combine(acc: str, x: str) -> str:
    """min's ``combine(acc, x)``, as ``_max_combine``; of two equal zeros, their product times their sum,
    which has the sign bit when either has it (the product's sign is the signs' xor, the sum's their and)."""
    tie = f"({acc} * {x} * ({acc} + {x}))"
    return f"({x} if ({x} < {acc} or {x} != {x}) else ({tie} if ({x} == {acc} and {x} == 0) else {acc}))"


reduce_sum = _reduction(
    "reduce_sum",
    array_ops.reduce_sum,
    Reducer(
        lambda acc, x: f"({acc} + {x})", lambda d: 0, _sum_accumulator, mlir_combine=ml.ADD, reassociable=True
    ),
    frozenset(),
    False,
    _sum_vjp,
)
reduce_max = _reduction(
    "reduce_max",
    array_ops.reduce_max,
    Reducer(
        _max_combine,
        _lowest,
        mlir_combine=ml.by_dtype("arith.maximumf", "arith.maxsi", "arith.ori"),  # bools: max is or
        selects="max",
    ),
    frozenset({"inputs", "output"}),
    True,
    _chooser_vjp,
)
reduce_min = _reduction(
    "reduce_min",
    array_ops.reduce_min,
    Reducer(
        _min_combine,
        _highest,
        mlir_combine=ml.by_dtype("arith.minimumf", "arith.minsi", "arith.andi"),  # bools: min is and
        selects="min",
    ),
    frozenset({"inputs", "output"}),
    True,
    _chooser_vjp,
)
