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
    if d.is_float:
        return -np.inf
    return False if d.is_bool else int(np.iinfo(d.np).min)


def _highest(d: DType) -> float | int | bool:
    if d.is_float:
        return np.inf
    return True if d.is_bool else int(np.iinfo(d.np).max)


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
    """Float32 sums accumulate in float64, on every backend and in every fused form (a long chunk of a
    float32 accumulator loses digits in proportion to its length; NumPy's pairwise sum does not). On
    the CPU the float64 adds stay vectorized (and the sums of a fused kernel are a small part of its
    work); float64 and integer sums keep their own dtype (integer sums are exact)."""
    return DType.f64 if d is DType.f32 else d


def _sum_ref(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    wide = _sum_accumulator(DType.from_numpy(x.dtype)).np
    return np.sum(x, axis=tuple(axes), dtype=wide).astype(x.dtype, copy=False)


def _max_ref(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    return np.max(x, axis=tuple(axes), initial=_lowest(DType.from_numpy(x.dtype)))


def _min_ref(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    return np.min(x, axis=tuple(axes), initial=_highest(DType.from_numpy(x.dtype)))


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


# combine(acc, x): NaN propagates through max/min as in NumPy.
reduce_sum = _reduction(
    "reduce_sum",
    _sum_ref,
    Reducer(lambda acc, x: f"({acc} + {x})", lambda d: 0, _sum_accumulator, mlir_combine=ml.ADD),
    frozenset(),
    False,
    _sum_vjp,
)
reduce_max = _reduction(
    "reduce_max",
    _max_ref,
    Reducer(
        lambda acc, x: f"({x} if ({x} > {acc} or {x} != {x}) else {acc})",
        _lowest,
        mlir_combine=ml.by_dtype("arith.maximumf", "arith.maxsi", "arith.ori"),  # bools: max is or
    ),
    frozenset({"inputs", "output"}),
    True,
    _chooser_vjp,
)
reduce_min = _reduction(
    "reduce_min",
    _min_ref,
    Reducer(
        lambda acc, x: f"({x} if ({x} < {acc} or {x} != {x}) else {acc})",
        _highest,
        mlir_combine=ml.by_dtype("arith.minimumf", "arith.minsi", "arith.andi"),  # bools: min is and
    ),
    frozenset({"inputs", "output"}),
    True,
    _chooser_vjp,
)
