"""Reductions over a set of axes: sum, max, min. ``keepdims`` and ``mean`` are frontend compositions."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from compiler.ir.types import DType, TensorType
from compiler.prims.base import AttrType, Kind, Memory, Primitive, Reducer, fail


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
    )


def _sum_ref(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    return np.sum(x, axis=tuple(axes), dtype=x.dtype)


def _max_ref(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    return np.max(x, axis=tuple(axes), initial=_lowest(DType.from_numpy(x.dtype)))


def _min_ref(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    return np.min(x, axis=tuple(axes), initial=_highest(DType.from_numpy(x.dtype)))


# combine(acc, x): NaN propagates through max/min as in NumPy.
reduce_sum = _reduction(
    "reduce_sum", _sum_ref, Reducer(lambda acc, x: f"({acc} + {x})", lambda d: 0), frozenset(), False
)
reduce_max = _reduction(
    "reduce_max",
    _max_ref,
    Reducer(lambda acc, x: f"({x} if ({x} > {acc} or {x} != {x}) else {acc})", _lowest),
    frozenset({"inputs", "output"}),
    True,
)
reduce_min = _reduction(
    "reduce_min",
    _min_ref,
    Reducer(lambda acc, x: f"({x} if ({x} < {acc} or {x} != {x}) else {acc})", _highest),
    frozenset({"inputs", "output"}),
    True,
)
