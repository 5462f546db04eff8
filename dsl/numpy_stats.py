"""NumPy's statistics, index reductions and scans (``dnp.var``, ``dnp.std``, ``dnp.argmax``,
``dnp.argmin``, ``dnp.cumsum``, ``dnp.cumprod``, ``dnp.prod``). The statistics and index reductions
are built from existing primitives and differentiate through them; the scans are the O(n)
``cumulative_sum`` and ``cumulative_prod`` primitives (``compiler/prims/scan.py``; ``prod`` is
the last running product). ``dsl.numpy`` re-exports NumPy's names here; the masked moments serve
``where=`` (``numpy_keywords``)."""

from __future__ import annotations

from typing import Any

from compiler.prims import reduction, scan, source
from dsl import numpy as dnp
from dsl import ops, tracing
from dsl.array import Array
from dsl.errors import ShapeError


def var(
    x: Any,
    axis: Any = None,
    dtype: Any = None,
    ddof: float = 0,
    keepdims: bool = False,
    *,
    correction: float | None = None,
) -> Array:
    """``np.var``: the mean of squared deviations from the mean, divided by ``n - ddof`` (floored at
    0, so too large a ``ddof`` gives inf or NaN as NumPy); integers in float64. ``correction`` is
    NumPy 2's (and the array API's) name for ``ddof``."""
    x = moment_input(x, dtype)
    if correction is not None:
        ddof = correction
    deviation = dnp.subtract(x, dnp.mean(x, axis, keepdims=True))
    squares = dnp.sum(dnp.multiply(deviation, deviation), axis, keepdims)
    return dnp.divide(squares, float(max(ops.count(x, axis) - ddof, 0)))


def std(
    x: Any,
    axis: Any = None,
    dtype: Any = None,
    ddof: float = 0,
    keepdims: bool = False,
    *,
    correction: float | None = None,
) -> Array:
    """``np.std``: the square root of ``var``. Where all values are equal (the variance is zero: a
    minimum of the convex ``std``) its gradient is zero, the least subgradient, as ``abs``'s at zero,
    and exact where the deviations cannot move (one element); ``sqrt``'s own would be NaN there
    (infinite times zero), as in JAX and PyTorch."""
    return root_of_variance(var(x, axis, dtype, ddof, keepdims, correction=correction))


def root_of_variance(v: Array) -> Array:
    """``std`` from its variance, with the zero gradient where the variance is zero (``std``)."""
    zero = dnp.equal(v, 0.0)
    return dnp.where(zero, v, dnp.sqrt(dnp.where(zero, 1.0, v)))


def moment_input(x: Any, dtype: Any) -> Array:
    """What ``mean``, ``var`` and ``std`` sum: ``x`` in ``dtype`` if given, integers in float64."""
    x = ops.asarray(x)
    if dtype is not None:
        return dnp.astype(x, dtype)
    return x if x.ir_dtype.is_float else ops.cast(x, ops.DType.f64)


def masked_mean(x: Array, mask: Array, axis: Any, keepdims: bool) -> Array:
    """``np.mean(x, where=mask)`` of a float ``x`` (``moment_input``): the sum of the kept elements
    over their count per result, divided in float64 and cast back as NumPy's."""
    total = dnp.sum(dnp.where(mask, x, ops.cast(ops.asarray(0), x.ir_dtype)), axis, keepdims=keepdims)
    return ops.cast(
        dnp.divide(ops.cast(total, ops.DType.f64), dnp.sum(mask, axis, keepdims=keepdims)), x.ir_dtype
    )


def masked_var(x: Array, mask: Array, axis: Any, ddof: float, keepdims: bool) -> Array:
    """``np.var(x, where=mask, ddof=ddof)`` of a float ``x``: the kept squared deviations from their
    own mean over the kept count less ``ddof`` (floored at 0), divided in float64 as NumPy's."""
    deviation = dnp.subtract(x, masked_mean(x, mask, axis, True))
    zero = ops.cast(ops.asarray(0), x.ir_dtype)
    squares = dnp.sum(dnp.where(mask, dnp.multiply(deviation, deviation), zero), axis, keepdims=keepdims)
    n = ops.cast(dnp.sum(mask, axis, keepdims=keepdims), ops.DType.f64)
    dof = dnp.maximum(dnp.subtract(n, float(ddof)), 0.0)
    return ops.cast(dnp.divide(ops.cast(squares, ops.DType.f64), dof), x.ir_dtype)


def _arg_reduce(name: str, prim: Any, x: Any, axis: int | None, keepdims: bool) -> Array:
    """The first position of ``x``'s max (min) along ``axis``: the reduction, a compare, and a min
    reduction over the positions that attain it (``n`` elsewhere), as XLA's argmax. A NaN wins (as
    in NumPy): max and min propagate it, and NaN positions count as attaining it."""
    x = ops.asarray(x)
    shape = x.shape
    if axis is None:
        x = dnp.reshape(x, (-1,))
        ax = 0
    else:
        (ax,) = ops.normalize_axes(axis, x.ndim)
    n = x.shape[ax]
    if n == 0:
        raise tracing.user_error(ShapeError, f"attempt to get {name} of an empty sequence")
    best = ops.reduce(prim, x, ax, keepdims=True)
    attains = dnp.equal(x, best)
    if x.ir_dtype.is_float:
        attains = dnp.logical_or(attains, dnp.isnan(x))
    position = ops.emit(source.iota, [], {"shape": x.shape, "dimension": ax, "dtype": ops.DType.i64})
    out = ops.reduce(reduction.reduce_min, dnp.where(attains, position, n), ax)
    if keepdims:
        kept = (
            tuple(1 for _ in shape)
            if axis is None
            else tuple(1 if i == ax else d for i, d in enumerate(shape))
        )
        out = dnp.reshape(out, kept)
    return out


def argmax(x: Any, axis: int | None = None, *, keepdims: bool = False) -> Array:
    """``np.argmax``: int64 positions of the first maximum (of the flattened array for ``axis=None``)."""
    return _arg_reduce("argmax", reduction.reduce_max, x, axis, keepdims)


def argmin(x: Any, axis: int | None = None, *, keepdims: bool = False) -> Array:
    """``np.argmin``: int64 positions of the first minimum (of the flattened array for ``axis=None``)."""
    return _arg_reduce("argmin", reduction.reduce_min, x, axis, keepdims)


def _scan_operand(x: Any, axis: int | None, dtype: Any) -> tuple[Array, int]:
    """``x`` as NumPy's cumsum/cumprod reads it: flattened for ``axis=None``, in ``dtype`` or, for
    bools and integers narrower than int64, in int64 (as NumPy's sum)."""
    x = ops.asarray(x)
    if axis is None:
        x = dnp.reshape(x, (-1,))
    (ax,) = ops.normalize_axes(0 if axis is None else axis, x.ndim)
    if dtype is not None:
        x = dnp.astype(x, dtype)
    elif not x.ir_dtype.is_float and x.ir_dtype is not ops.DType.i64:
        x = ops.cast(x, ops.DType.i64)
    return x, ax


def cumsum(x: Any, axis: int | None = None, dtype: Any = None) -> Array:
    """``np.cumsum``: running sums along ``axis`` (of the flattened array for ``axis=None``)."""
    x, ax = _scan_operand(x, axis, dtype)
    return ops.emit(scan.cumulative_sum, [x], {"axis": ax, "reverse": False})


def cumprod(x: Any, axis: int | None = None, dtype: Any = None) -> Array:
    """``np.cumprod``: running products along ``axis``; its gradient is exact where elements are 0
    (``compiler/prims/scan.py``: no division by them)."""
    x, ax = _scan_operand(x, axis, dtype)
    return ops.emit(scan.cumulative_prod, [x], {"axis": ax, "reverse": False})


def prod(
    x: Any, axis: Any = None, keepdims: bool = False, *, dtype: Any = None, initial: Any = None
) -> Array:
    """``np.prod``: the last running product over the reduced axes (moved last and merged into one),
    so that its gradient is cumprod's, exact where elements are 0; 1 over empty axes. Integers and
    bools multiply in int64, as NumPy's. ``initial`` multiplies each product (cast to its type)."""
    return dnp.with_initial(_product(x, axis, keepdims, dtype), initial, dnp.multiply)


def _product(x: Any, axis: Any, keepdims: bool, dtype: Any) -> Array:
    x = ops.asarray(x)
    axes = ops.normalize_axes(axis, x.ndim)
    kept = [d for d in range(x.ndim) if d not in axes]
    if keepdims:
        shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape))
    else:
        shape = tuple(x.shape[d] for d in kept)
    n = ops.count(x, axes)
    merged = dnp.reshape(
        dnp.transpose(x, kept + list(axes)) if x.ndim else x, tuple(x.shape[d] for d in kept) + (n,)
    )
    if n == 0:
        return ops.full(shape, 1, _scan_operand(merged, -1, dtype)[0].dtype)
    return dnp.reshape(cumprod(merged, axis=-1, dtype=dtype)[..., -1], shape)


__all__ = ["argmax", "argmin", "cumprod", "cumsum", "prod", "std", "var"]
