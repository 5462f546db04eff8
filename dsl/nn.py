"""Neural-network functions (``import dsl.nn``), built from ``dsl.numpy``."""

from __future__ import annotations

import math
from typing import Any

from compiler.prims import elementwise as ew
from dsl import numpy as dnp
from dsl import ops
from dsl.array import Array
from dsl.random import dropout as dropout  # dsl.nn.dropout(key, x, rate)


def relu(x: Any) -> Array:
    """``max(x, 0)``, with derivative 0 at 0 (JAX's and PyTorch's convention; ``maximum`` splits a tie
    0.5/0.5). Written as a select on ``x <= 0`` so that NaN stays NaN, as ``maximum`` keeps it."""
    return dnp.where(dnp.less_equal(x, 0), 0, x)


def sigmoid(x: Any) -> Array:
    return ops.unary(ew.logistic, x, float_only=True)


def _shifted(x: Any, axis: Any, finite: bool = True) -> tuple[Array, Array]:
    """``x - max(x)`` along ``axis`` (for stable exponentials) and that max; ``finite``: an infinite
    max shifts by 0 instead (``logsumexp`` of an all ``-inf`` row is ``-inf``, of a row holding
    ``inf`` is ``inf``, as JAX's). Softmax shifts by the max itself, as JAX's: a row holding ``inf``
    is all NaN (``inf - inf``), not NaN at the ``inf`` and 0 elsewhere."""
    x = ops.asarray(x)
    if not x.ir_dtype.is_float:
        x = ops.cast(x, ops.DType.f64)
    empty = any(x.shape[a] == 0 for a in ops.normalize_axes(axis, x.ndim))
    # over an empty axis the max is -inf (logsumexp of nothing is -inf, as JAX's and SciPy's)
    top = dnp.max(x, axis=axis, keepdims=True, initial=-math.inf if empty else None)
    if finite:
        top = dnp.where(dnp.less(dnp.abs(top), math.inf), top, 0.0)
    return dnp.subtract(x, top), top


def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> Array:
    shifted, top = _shifted(x, axis)
    out = dnp.add(dnp.log(dnp.sum(dnp.exp(shifted), axis=axis, keepdims=True)), top)
    if not keepdims:
        x = ops.asarray(x)
        axes = ops.normalize_axes(axis, x.ndim)
        out = dnp.reshape(out, tuple(d for i, d in enumerate(x.shape) if i not in axes))
    return out


def softmax(x: Any, axis: Any = -1) -> Array:
    shifted, _ = _shifted(x, axis, finite=False)
    e = dnp.exp(shifted)
    return dnp.divide(e, dnp.sum(e, axis=axis, keepdims=True))


def log_softmax(x: Any, axis: Any = -1) -> Array:
    shifted, _ = _shifted(x, axis, finite=False)
    return dnp.subtract(shifted, dnp.log(dnp.sum(dnp.exp(shifted), axis=axis, keepdims=True)))


def gelu(x: Any, approximate: bool = True) -> Array:
    """GELU; ``approximate=True`` (JAX's default) uses the tanh form, ``False`` the exact form,
    ``x * erfc(-x / sqrt(2)) / 2`` as JAX's (``1 + erf`` cancels for x below about -3)."""
    x = ops.asarray(x)
    if not x.ir_dtype.is_float:
        x = ops.cast(x, ops.DType.f64)
    if approximate:
        inner = dnp.multiply(math.sqrt(2 / math.pi), dnp.add(x, dnp.multiply(0.044715, dnp.power(x, 3))))
        return dnp.multiply(dnp.multiply(0.5, x), dnp.add(1.0, dnp.tanh(inner)))
    cdf = dnp.multiply(0.5, ops.unary(ew.erfc, dnp.multiply(x, -1 / math.sqrt(2))))
    return dnp.multiply(x, cdf)
