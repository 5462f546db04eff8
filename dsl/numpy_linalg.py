"""``dsl.numpy.linalg``: the norms of ``np.linalg.norm`` that need no factorization (vector p-norms,
and the Frobenius, 1 and inf matrix norms), from ``dsl.numpy``'s reductions."""

from __future__ import annotations

from typing import Any

import numpy as np

from dsl import numpy as dnp
from dsl import ops, tracing
from dsl.array import Array
from dsl.errors import MissingError, ShapeError


def _vector_norm(x: Array, ord: Any, axis: int, keepdims: bool) -> Array:
    a = dnp.abs(x)
    if ord is None or ord == 2:
        return dnp.sqrt(dnp.sum(dnp.multiply(x, x), axis, keepdims))
    if ord == np.inf:  # NumPy's and JAX's initial=0: an empty vector's norm is 0 (and the tie at
        return dnp.max(a, axis, keepdims, initial=0)  # zero shares the gradient with it, as JAX's)
    if ord == -np.inf:
        return dnp.min(a, axis, keepdims)
    if ord == 0:
        return dnp.astype(dnp.sum(dnp.not_equal(x, 0), axis, keepdims), x.dtype)
    if ord == 1:
        return dnp.sum(a, axis, keepdims)
    if isinstance(ord, str):
        raise tracing.user_error(ShapeError, f"Invalid norm order '{ord}' for vectors")
    return dnp.power(dnp.sum(dnp.power(a, ord), axis, keepdims), 1.0 / ord)


def _matrix_norm(x: Array, ord: Any, axes: tuple[int, int], keepdims: bool) -> Array:
    row, col = axes
    if ord in (None, "fro", "f"):
        out = dnp.sqrt(dnp.sum(dnp.multiply(x, x), axes, keepdims=True))
    elif ord in (1, -1, np.inf, -np.inf):
        # 1: the largest column sum of |x| (summed over rows); inf: the largest row sum.
        summed, across = (row, col) if ord in (1, -1) else (col, row)
        sums = dnp.sum(dnp.abs(x), summed, keepdims=True)
        if ord > 0:  # (initial=0 as NumPy's and JAX's)
            out = dnp.max(sums, across, keepdims=True, initial=0)
        else:
            out = dnp.min(sums, across, keepdims=True)
    elif ord in (2, -2, "nuc"):
        raise tracing.user_error(
            ShapeError,
            f"linalg.norm: the matrix norm ord={ord!r} needs singular values, which dsl.numpy does not "
            "compute; use ord='fro', 1 or inf",
        )
    else:
        raise tracing.user_error(ShapeError, f"Invalid norm order {ord!r} for matrices")
    if keepdims:
        return out
    return dnp.reshape(out, tuple(d for i, d in enumerate(x.shape) if i not in axes))


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Array:  # noqa: A002
    """``np.linalg.norm``: with ``axis=None`` the 2-norm of the flattened array (for ``ord=None``) or
    the norm ``ord`` of a vector or matrix; an int ``axis`` gives vector norms, a pair matrix norms.
    Integers are computed in float64. The 2-norm's derivative at zero is NaN, as JAX's."""
    x = ops.asarray(x)
    if not x.ir_dtype.is_float:
        x = ops.cast(x, ops.DType.f64)
    if axis is None:
        if ord is None:
            out = dnp.sqrt(dnp.sum(dnp.multiply(x, x)))
            return dnp.reshape(out, (1,) * x.ndim) if keepdims else out
        if x.ndim not in (1, 2):
            raise tracing.user_error(ShapeError, "Improper number of dimensions to norm.")
        axis = tuple(range(x.ndim))
    axes = ops.normalize_axes(axis, x.ndim)
    given = axis if isinstance(axis, (tuple, list)) else (axis,)
    if len(axes) == 1:
        return _vector_norm(x, ord, axes[0], keepdims)
    if len(axes) == 2:
        row, col = (a % x.ndim for a in given)  # the order given decides which axis is the rows
        return _matrix_norm(x, ord, (row, col), keepdims)
    raise tracing.user_error(ShapeError, "Improper number of dimensions to norm.")


__all__ = ["norm"]


def __getattr__(name: str) -> Any:
    from dsl import numpy_missing

    if name.startswith("__"):
        raise AttributeError(f"module 'dsl.numpy.linalg' has no attribute {name!r}")
    raise tracing.user_error(MissingError, numpy_missing.message(name, "dsl.numpy.linalg", globals()))
