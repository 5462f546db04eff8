"""More of NumPy written with other ``dsl.numpy`` functions, the ones outside programs reached for and
found missing (2026-11-27): ranges (``linspace``, ``logspace``, ``tri``), grids (``meshgrid``,
``broadcast_arrays``), differences and integrals (``diff``, ``ediff1d``, ``trapezoid``, ``ptp``),
rearranging (``rot90``, ``append``, ``delete``), selection (``select``), comparisons
(``array_equal``, ``isposinf``, ``isneginf``), a few elementwise ones (``fabs``, ``logaddexp2``),
polynomials (``polyval``), the NaN-ignoring moments (``nanvar``, ``nanstd``), statistics between
variables (``cov``, ``corrcoef``) and 1-D ``convolve`` / ``correlate``. Each follows NumPy 2 in
values and dtypes (sums may add in another order: within rounding); their gradients are those of
what they are written with. ``dsl.numpy`` re-exports every public name here."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from dsl import numpy as dnp
from dsl import numpy_stats, ops, tracing
from dsl.array import Array
from dsl.errors import DTypeError, ShapeError
from dsl.numpy_compose import flat_or_axis

# ---- ranges ----------------------------------------------------------------------------------------


def _static(*values: Any) -> bool:
    """Whether every value is known at trace time (a Python or NumPy number or array)."""
    return not any(isinstance(v, Array) for v in values)


def linspace(
    start: Any,
    stop: Any,
    num: int = 50,
    endpoint: bool = True,
    retstep: bool = False,
    dtype: Any = None,
    axis: int = 0,
) -> Any:
    """``np.linspace``: NumPy's own values where ``start`` and ``stop`` are known at trace time (a
    constant); traced ones as NumPy computes them (``arange(num) * step + start``, ``stop`` at the
    end; a zero step as ``arange / div * delta``), integer ``dtype`` floored first."""
    num = operator.index(num)
    if num < 0:
        raise tracing.user_error(ShapeError, f"Number of samples, {num}, must be non-negative.")
    if _static(start, stop):
        values, step = np.linspace(start, stop, num, endpoint, True, dtype, axis)  # type: ignore[call-overload]
        out = dnp.asarray(values)
        return (out, step) if retstep else out
    a, b = dnp.asarray(start), dnp.asarray(stop)
    dt = ops.result_dtype(a, b, float(num))
    a, b = ops.cast(a, dt), ops.cast(b, dt)
    shape = np.broadcast_shapes(a.shape, b.shape)
    div = (num - 1) if endpoint else num
    delta = dnp.subtract(b, a)
    steps = dnp.reshape(dnp.asarray(np.arange(num, dtype=dt.np)), (-1,) + (1,) * len(shape))
    if div > 0:
        step = dnp.divide(delta, div)
        scaled = dnp.where(
            dnp.equal(step, 0), dnp.multiply(dnp.divide(steps, div), delta), dnp.multiply(steps, step)
        )
    else:  # (one sample without its endpoint: NumPy's step is NaN)
        step, scaled = dnp.multiply(delta, np.nan), dnp.multiply(steps, delta)
    y = dnp.add(scaled, a)
    if endpoint and num > 1:
        last = dnp.reshape(dnp.broadcast_to(b, shape), (1, *shape))
        y = dnp.concatenate([y[:-1], last], axis=0)
    if axis != 0:
        y = dnp.moveaxis(y, 0, axis)
    if dtype is not None:
        target = ops.ir_dtype(dtype)
        y = dnp.astype(dnp.floor(y) if target.is_int else y, target.np)
    return (y, step) if retstep else y


def logspace(
    start: Any,
    stop: Any,
    num: int = 50,
    endpoint: bool = True,
    base: Any = 10.0,
    dtype: Any = None,
    axis: int = 0,
) -> Array:
    """``np.logspace``: ``base ** linspace(start, stop)``."""
    if _static(start, stop, base):
        return dnp.asarray(np.logspace(start, stop, num, endpoint, base, dtype, axis))
    y = dnp.power(base, linspace(start, stop, num, endpoint, axis=axis))
    return y if dtype is None else dnp.astype(y, ops.ir_dtype(dtype).np)


def tri(N: int, M: int | None = None, k: int = 0, dtype: Any = float) -> Array:
    """``np.tri``: ones at and below the ``k``-th diagonal (a constant)."""
    ops.ir_dtype(dtype)  # one dslc lacks raises at the user's line
    return dnp.asarray(np.tri(N, M, k, dtype))


# ---- grids -------------------------------------------------------------------------------------------


def broadcast_arrays(*args: Any) -> tuple[Array, ...]:
    """``np.broadcast_arrays``: each argument broadcast to their common shape (views)."""
    arrays = [dnp.asarray(a) for a in args]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    return tuple(ops.broadcast_to(a, shape) for a in arrays)


def meshgrid(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> tuple[Array, ...]:
    """``np.meshgrid``: coordinate arrays of 1-D ``xi`` (``indexing`` 'xy': the first two axes
    swapped, as NumPy); ``sparse`` keeps the size-1 axes."""
    if indexing not in ("xy", "ij"):
        raise tracing.user_error(ShapeError, "Valid values for `indexing` are 'xy' and 'ij'.")
    ndim = len(xi)
    grids = []
    for i, x in enumerate(xi):
        shape = [1] * ndim
        shape[i] = -1
        grids.append(dnp.reshape(dnp.asarray(x), tuple(shape)))
    if indexing == "xy" and ndim > 1:
        for i in (0, 1):
            grids[i] = dnp.swapaxes(grids[i], 0, 1)
    if not sparse:
        grids = list(broadcast_arrays(*grids))
    return tuple(ops.new_storage(g) for g in grids) if copy else tuple(grids)


# ---- differences and integrals ----------------------------------------------------------------------


def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None) -> Array:
    """``np.diff``: the ``n``-th differences along ``axis`` (``not_equal`` for bools), with
    ``prepend``/``append`` joined first (scalars broadcast to one slice)."""
    a = dnp.asarray(a)
    if n < 0:
        raise tracing.user_error(ShapeError, f"order must be non-negative but got {n!r}")
    if a.ndim == 0:
        raise tracing.user_error(ShapeError, "diff requires input that is at least one dimensional")
    (axis,) = ops.normalize_axes(axis, a.ndim)
    parts = []
    for extra, at_end in ((prepend, False), (append, True)):
        if extra is None:
            continue
        e = dnp.asarray(extra)
        if e.ndim == 0:
            shape = list(a.shape)
            shape[axis] = 1
            e = dnp.broadcast_to(e, tuple(shape))
        parts.append((e, at_end))
    if parts:
        before = [e for e, end in parts if not end]
        after = [e for e, end in parts if end]
        a = dnp.concatenate([*before, a, *after], axis=axis)
    for _ in range(n):
        upper = a[(slice(None),) * axis + (slice(1, None),)]
        lower = a[(slice(None),) * axis + (slice(None, -1),)]
        a = dnp.not_equal(upper, lower) if a.ir_dtype.is_bool else dnp.subtract(upper, lower)
    return a if n else ops.new_storage(a)


def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Array:
    """``np.ediff1d``: the differences of the flattened array, with ``to_begin``/``to_end``."""
    a = dnp.ravel(dnp.asarray(ary))
    parts = [dnp.subtract(a[1:], a[:-1])]
    if to_begin is not None:
        parts.insert(0, dnp.astype(dnp.ravel(dnp.asarray(to_begin)), a.dtype))
    if to_end is not None:
        parts.append(dnp.astype(dnp.ravel(dnp.asarray(to_end)), a.dtype))
    return dnp.concatenate(parts) if len(parts) > 1 else parts[0]


def trapezoid(y: Any, x: Any = None, dx: float = 1.0, axis: int = -1) -> Array:
    """``np.trapezoid``: the trapezoidal rule along ``axis``, spacing ``dx`` or the differences of
    ``x``."""
    y = dnp.asarray(y)
    (axis,) = ops.normalize_axes(axis, y.ndim)
    if x is None:
        d: Any = dx
    else:
        x = dnp.asarray(x)
        d = diff(x)
        if x.ndim == 1:
            shape = [1] * y.ndim
            shape[axis] = d.shape[0]
            d = dnp.reshape(d, tuple(shape))
        else:
            d = diff(x, axis=axis)
    upper = y[(slice(None),) * axis + (slice(1, None),)]
    lower = y[(slice(None),) * axis + (slice(None, -1),)]
    return dnp.sum(dnp.divide(dnp.multiply(d, dnp.add(upper, lower)), 2.0), axis=axis)


def ptp(a: Any, axis: Any = None, keepdims: bool = False) -> Array:
    """``np.ptp``: the range, ``max - min``."""
    a = dnp.asarray(a)
    return dnp.subtract(dnp.max(a, axis=axis, keepdims=keepdims), dnp.min(a, axis=axis, keepdims=keepdims))


# ---- rearranging ------------------------------------------------------------------------------------


def rot90(m: Any, k: int = 1, axes: Sequence[int] = (0, 1)) -> Array:
    """``np.rot90``: ``k`` quarter turns in the plane of ``axes``, from the first toward the second
    (flips and a transpose: a view, as NumPy's)."""
    m = dnp.asarray(m)
    axes = tuple(axes)
    if len(axes) != 2:
        raise tracing.user_error(ShapeError, "len(axes) must be 2.")
    a0, a1 = (ax % m.ndim if -m.ndim <= ax < m.ndim else ax for ax in axes)
    if a0 == a1 or not (0 <= a0 < m.ndim and 0 <= a1 < m.ndim):
        raise tracing.user_error(ShapeError, f"Axes={axes} out of range for array of ndim={m.ndim}.")
    k %= 4
    if k == 0:
        return m[...]
    if k == 2:
        return dnp.flip(dnp.flip(m, a0), a1)
    perm = list(range(m.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return dnp.transpose(dnp.flip(m, a1), perm)
    return dnp.flip(dnp.transpose(m, perm), a1)


def append(arr: Any, values: Any, axis: int | None = None) -> Array:
    """``np.append``: ``concatenate`` (flattened both when ``axis`` is None)."""
    arr, values = dnp.asarray(arr), dnp.asarray(values)
    if axis is None:
        return dnp.concatenate([dnp.ravel(arr), dnp.ravel(values)])
    return dnp.concatenate([arr, values], axis=axis)


def delete(arr: Any, obj: Any, axis: int | None = None) -> Array:
    """``np.delete`` of positions known at trace time (an int, a slice, a sequence or a boolean
    mask): the kept ones, taken in order."""
    a, axis = flat_or_axis(dnp.asarray(arr), axis, obj, "delete: the positions")
    kept = np.delete(np.arange(a.shape[axis]), obj)
    return dnp.take(a, kept, axis=axis)


# ---- selection and comparison ------------------------------------------------------------------------


def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Array:
    """``np.select``: where each condition holds, its choice (the first that holds wins), else
    ``default``; in the choices' and default's common dtype."""
    if len(condlist) != len(choicelist):
        raise tracing.user_error(ShapeError, "list of cases must be same length as list of conditions")
    if not condlist:
        raise tracing.user_error(ShapeError, "select with an empty condition list is not possible")
    choices = [dnp.asarray(c) for c in choicelist]
    dtype = ops.result_dtype(*choicelist, default)
    out = dnp.astype(dnp.asarray(default), dtype.np)
    for cond, choice in reversed(list(zip(condlist, choices, strict=True))):
        c = dnp.asarray(cond)
        if not c.ir_dtype.is_bool:
            raise tracing.user_error(DTypeError, "invalid entry in condlist: should be boolean ndarray")
        out = dnp.where(c, dnp.astype(choice, dtype.np), out)
    return out


def array_equal(a1: Any, a2: Any, equal_nan: bool = False) -> Array:
    """``np.array_equal``: the same shape and elements, as a 0-d bool array (NumPy's Python bool is
    not known at trace time); shapes are static, so different ones give a constant False."""
    a, b = dnp.asarray(a1), dnp.asarray(a2)
    if a.shape != b.shape:
        return dnp.asarray(np.bool_(False))
    same = dnp.equal(a, b)
    if equal_nan and a.ir_dtype.is_float and b.ir_dtype.is_float:
        same = dnp.logical_or(same, dnp.logical_and(dnp.isnan(a), dnp.isnan(b)))
    return dnp.all(same)


def isposinf(x: Any) -> Array:
    """``np.isposinf``: True where ``x`` is +inf."""
    x = dnp.asarray(x)
    return dnp.logical_and(dnp.isinf(x), dnp.greater(x, 0))


def isneginf(x: Any) -> Array:
    """``np.isneginf``: True where ``x`` is -inf."""
    x = dnp.asarray(x)
    return dnp.logical_and(dnp.isinf(x), dnp.less(x, 0))


# ---- elementwise --------------------------------------------------------------------------------------


@ops.keeps_weak
def fabs(x: Any) -> Array:
    """``np.fabs``: the absolute value as a float (integers in float64)."""
    x = dnp.asarray(x)
    return dnp.abs(ops.cast(x, ops.float_of(x.ir_dtype)))


@ops.keeps_weak
def logaddexp2(x1: Any, x2: Any) -> Array:
    """``np.logaddexp2``: ``log2(2**x1 + 2**x2)`` as NumPy's ``npy_logaddexp2``: equal arguments give
    ``x + 1``, else the larger plus ``log2(1 + 2**-gap)``."""
    dtype = ops.float_of(ops.result_dtype(x1, x2))
    a, b = ops.to_dtype(x1, dtype), ops.to_dtype(x2, dtype)
    gap = dnp.where(dnp.equal(a, b), 0, dnp.subtract(a, b))
    log2e = np.asarray(1 / math.log(2), dtype.np)
    larger = dnp.add(dnp.maximum(a, b), dnp.multiply(log2e, dnp.log1p(dnp.exp2(dnp.negative(dnp.abs(gap))))))
    # (ties: the larger's value, a itself, with maximum's tie rule: half the gradient each, as JAX's
    # 2**x / (2**x + 2**y); ``a + 1`` gave all of it to x1, 2026-11-28)
    return dnp.where(dnp.equal(a, b), dnp.add(dnp.maximum(a, b), 1), larger)


# ---- polynomials -------------------------------------------------------------------------------------


def polyval(p: Any, x: Any) -> Array:
    """``np.polyval``: Horner's rule over the coefficients, highest power first."""
    p, x = dnp.asarray(p), dnp.asarray(x)
    if p.ndim != 1:
        raise tracing.user_error(ShapeError, "polyval: the coefficients must be a 1-D array")
    y = dnp.zeros_like(x)
    for k in range(p.shape[0]):
        y = dnp.add(dnp.multiply(y, x), p[k])
    return y


# ---- moments ------------------------------------------------------------------------------------------


def nanvar(a: Any, axis: Any = None, dtype: Any = None, ddof: float = 0, keepdims: bool = False) -> Array:
    """``np.nanvar``: the variance of the numbers (NaN for a slice without any, as NumPy's)."""
    x = numpy_stats.moment_input(a, dtype)
    if not dnp.asarray(a).ir_dtype.is_float:
        return dnp.var(x, axis=axis, ddof=ddof, keepdims=keepdims)
    numbers = dnp.logical_not(dnp.isnan(x))
    out = numpy_stats.masked_var(dnp.where(numbers, x, 0), numbers, axis, ddof, keepdims)
    # NumPy's nanvar: NaN where the numbers are at most ddof (``var``'s own rule gives inf there)
    few = dnp.less_equal(dnp.sum(numbers, axis, keepdims=keepdims), ddof)
    return dnp.where(few, ops.cast(ops.asarray(np.nan), out.ir_dtype), out)


def nanstd(a: Any, axis: Any = None, dtype: Any = None, ddof: float = 0, keepdims: bool = False) -> Array:
    """``np.nanstd``: the square root of ``nanvar`` (with ``std``'s zero gradient where it is 0)."""
    return numpy_stats.root_of_variance(nanvar(a, axis, dtype, ddof, keepdims))


def cov(m: Any, y: Any = None, rowvar: bool = True, bias: bool = False, ddof: int | None = None) -> Array:
    """``np.cov``: the covariance of the variables (rows, or columns with ``rowvar=False``), each
    less its mean, divided by ``N - 1`` (``bias``: ``N``; or ``N - ddof``); in float64 at least."""
    x = dnp.asarray(m)
    if x.ndim > 2:
        raise tracing.user_error(ShapeError, "m has more than 2 dimensions")
    dtype = ops.result_dtype(x, np.float64(0)) if y is None else ops.result_dtype(x, y, np.float64(0))
    x = dnp.atleast_2d(ops.cast(x, dtype))
    if not rowvar and x.shape[0] != 1:
        x = x.T
    if y is not None:
        w = dnp.atleast_2d(ops.cast(dnp.asarray(y), dtype))
        if not rowvar and w.shape[0] != 1:
            w = w.T
        x = dnp.concatenate([x, w], axis=0)
    n = x.shape[1]
    if ddof is None:
        ddof = 0 if bias else 1
    centered = dnp.subtract(x, dnp.mean(x, axis=1, keepdims=True))
    c = dnp.divide(dnp.matmul(centered, centered.T), float(max(n - ddof, 0)))
    return dnp.squeeze(c) if c.shape == (1, 1) else c


def corrcoef(x: Any, y: Any = None, rowvar: bool = True) -> Array:
    """``np.corrcoef``: ``cov`` over the outer product of the deviations, clipped to [-1, 1]."""
    c = cov(x, y, rowvar)
    if c.ndim == 0:
        return dnp.divide(c, c)
    d = dnp.sqrt(dnp.diagonal(c))
    c = dnp.divide(dnp.divide(c, d[:, None]), d[None, :])
    return dnp.clip(c, -1, 1)


# ---- 1-D convolution ----------------------------------------------------------------------------------


def convolve(a: Any, v: Any, mode: str = "full") -> Array:
    """``np.convolve`` of two 1-D arrays: ``out[k] = sum_j a[k - j] v[j]`` over the positions where
    both exist, as one product of a gathered matrix of ``a``'s (zero-padded) windows with ``v``
    (``mode``: 'full', 'same', 'valid')."""
    a, v = dnp.asarray(a), dnp.asarray(v)
    if a.ndim != 1 or v.ndim != 1:
        raise tracing.user_error(ShapeError, "object too deep for desired array: convolve takes 1-D arrays")
    if a.shape[0] == 0 or v.shape[0] == 0:
        raise tracing.user_error(ShapeError, f"{'a' if a.shape[0] == 0 else 'v'} cannot be empty")
    if v.shape[0] > a.shape[0]:
        a, v = v, a
    n, m = a.shape[0], v.shape[0]
    if mode == "full":
        first, length = 0, n + m - 1
    elif mode == "same":
        first, length = (m - 1) // 2, n
    elif mode == "valid":
        first, length = m - 1, n - m + 1
    else:
        raise tracing.user_error(ShapeError, f"mode must be one of 'full', 'same' or 'valid', not {mode!r}")
    dtype = ops.result_dtype(a, v)
    padded = dnp.pad(ops.cast(a, dtype), (m - 1, m - 1))
    k = np.arange(first, first + length)[:, None]
    windows = dnp.take(padded, k + m - 1 - np.arange(m)[None, :])  # a[k - j], j = 0 .. m - 1
    return dnp.matmul(windows, ops.cast(v, dtype))


def correlate(a: Any, v: Any, mode: str = "valid") -> Array:
    """``np.correlate`` of two 1-D real arrays: ``convolve(a, v[::-1])``, reversed where ``v`` is the
    longer (NumPy's order)."""
    a, v = dnp.asarray(a), dnp.asarray(v)
    if a.ndim != 1 or v.ndim != 1:
        raise tracing.user_error(ShapeError, "object too deep for desired array: correlate takes 1-D arrays")
    if v.shape[0] > a.shape[0]:
        return dnp.flip(convolve(v, dnp.flip(a, 0), mode), 0)
    return convolve(a, dnp.flip(v, 0), mode)
