"""NumPy functions written with other ``dsl.numpy`` functions: contractions (``tensordot``, ``inner``,
``vdot``, ``kron``), diagonals (``diagonal``, ``diag``, ``trace``), repetition (``tile``, ``repeat``,
``roll``), ``cross``, the NaN-ignoring reductions and extrema (``nansum`` ... ``fmax``), comparisons within a
tolerance (``isclose``, ``allclose``), ``average``, the ``atleast_*d`` and stacking helpers, and a few
elementwise ones (``deg2rad`` ... ``sinc``). Their gradients are those of what they are written with.
Each follows NumPy 2 in values and dtypes; where NumPy gives a view (``diagonal``), a Python bool
(``allclose``) or a read-only array, dslc gives a new array (a 0-d bool array for ``allclose``).
``dsl.numpy`` re-exports every public name here."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from compiler.prims import movement
from dsl import layout, ops, tracing
from dsl import numpy as dnp
from dsl.array import Array
from dsl.einsum import einsum
from dsl.errors import DTypeError, ShapeError, TraceError

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


# ---- contractions ----------------------------------------------------------------------------------


def tensordot(a: Any, b: Any, axes: Any = 2) -> Array:
    """``np.tensordot``: the sum over ``axes`` (``N``: the last ``N`` of ``a`` with the first ``N`` of
    ``b``; or two sequences of axes), as one ``einsum``."""
    a, b = ops.asarray(a), ops.asarray(b)
    if isinstance(axes, (int, np.integer)):
        n = operator.index(axes)
        if n < 0 or n > min(a.ndim, b.ndim):
            raise tracing.user_error(ShapeError, f"tensordot: axes={n} is not in [0, {min(a.ndim, b.ndim)}]")
        left, right = list(range(a.ndim - n, a.ndim)), list(range(n))
    else:
        left, right = (_axes_in_order(ax, x.ndim) for ax, x in zip(axes, (a, b), strict=True))
    if len(left) != len(right) or any(a.shape[i] != b.shape[j] for i, j in zip(left, right, strict=False)):
        raise tracing.user_error(
            ShapeError, f"tensordot: shape-mismatch for sum: axes {left} of {a.shape}, {right} of {b.shape}"
        )
    if a.ndim + b.ndim - len(left) > len(_LETTERS):
        raise tracing.user_error(ShapeError, "tensordot: too many axes")
    sa = list(_LETTERS[: a.ndim])
    sb = list(_LETTERS[a.ndim : a.ndim + b.ndim])
    for i, j in zip(left, right, strict=True):
        sb[j] = sa[i]
    out = [c for k, c in enumerate(sa) if k not in left] + [c for k, c in enumerate(sb) if k not in right]
    return einsum(f"{''.join(sa)},{''.join(sb)}->{''.join(out)}", a, b)


def cross(
    a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: int | None = None
) -> Array:
    """``np.cross``: the cross product of 3-vectors (or 2-vectors, as NumPy: a 2-vector's third
    component is 0, and two 2-vectors give the scalar z component) along ``axisa``/``axisb``, the
    other axes broadcast, the result's vectors along ``axisc`` (``axis`` sets all three)."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a = dnp.moveaxis(ops.asarray(a), axisa, -1)
    b = dnp.moveaxis(ops.asarray(b), axisb, -1)
    if a.ndim == 0 or b.ndim == 0 or a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise tracing.user_error(
            ShapeError,
            f"cross: incompatible dimensions for cross product (dimension must be 2 or 3), got shapes "
            f"{a.shape} and {b.shape} along the vector axes",
        )
    dtype = ops.result_dtype(a, b)
    a, b = ops.to_dtype(a, dtype), ops.to_dtype(b, dtype)
    a0, a1, b0, b1 = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
    z = dnp.subtract(dnp.multiply(a0, b1), dnp.multiply(a1, b0))
    if a.shape[-1] == 2 and b.shape[-1] == 2:
        return z
    # NumPy's products and negations where one vector's third component is a zero it does not write
    if a.shape[-1] == 2:
        b2 = b[..., 2]
        x, y = dnp.multiply(a1, b2), dnp.negative(dnp.multiply(a0, b2))
    elif b.shape[-1] == 2:
        a2 = a[..., 2]
        x, y = dnp.negative(dnp.multiply(a2, b1)), dnp.multiply(a2, b0)
    else:
        a2, b2 = a[..., 2], b[..., 2]
        x = dnp.subtract(dnp.multiply(a1, b2), dnp.multiply(a2, b1))
        y = dnp.subtract(dnp.multiply(a2, b0), dnp.multiply(a0, b2))
    return dnp.moveaxis(dnp.stack([x, y, z], axis=-1), -1, axisc)


def _axes_in_order(axes: Any, ndim: int) -> list[int]:
    """Axes as given (an int or a sequence), each made non-negative, their order kept (it pairs them)."""
    listed = [axes] if isinstance(axes, (int, np.integer)) else list(axes)
    return [ops.normalize_axes(operator.index(ax), ndim)[0] for ax in listed]


def inner(a: Any, b: Any) -> Array:
    """``np.inner``: the sum over the last axes of both (a product for a 0-d operand)."""
    a, b = ops.asarray(a), ops.asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        return dnp.multiply(a, b)
    return tensordot(a, b, ([-1], [-1]))


def vdot(a: Any, b: Any) -> Array:
    """``np.vdot``: the dot product of the flattened arrays (real arrays: no conjugation)."""
    return tensordot(dnp.ravel(a), dnp.ravel(b), 1)


def kron(a: Any, b: Any) -> Array:
    """``np.kron``: the block product (``a``'s element ``i`` times ``b`` in block ``i``)."""
    a, b = ops.asarray(a), ops.asarray(b)
    n = max(a.ndim, b.ndim)
    sa, sb = (1,) * (n - a.ndim) + a.shape, (1,) * (n - b.ndim) + b.shape
    a2 = dnp.reshape(a, tuple(d for s in sa for d in (s, 1)))
    b2 = dnp.reshape(b, tuple(d for s in sb for d in (1, s)))
    return dnp.reshape(dnp.multiply(a2, b2), tuple(x * y for x, y in zip(sa, sb, strict=True)))


# ---- diagonals ---------------------------------------------------------------------------------------


def _diagonal_positions(rows: int, cols: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
    start_row, start_col = max(-offset, 0), max(offset, 0)
    n = max(0, min(rows - start_row, cols - start_col))
    return np.arange(start_row, start_row + n), np.arange(start_col, start_col + n)


def diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Array:
    """``np.diagonal``: the ``offset`` diagonal over ``axis1`` and ``axis2``, as the last axis: a
    read-only view, as NumPy's (it sees later writes to ``a``; a write into it raises
    ``ReadOnlyError``). Its steps: the two axes moved last, merged, a slice of stride ``cols + 1``,
    and a broadcast to its own shape, which has no ``unview`` and so makes the view read-only."""
    a = ops.asarray(a)
    if a.ndim < 2:
        raise tracing.user_error(ShapeError, "diag requires an array of at least two dimensions")
    (i,), (j,) = ops.normalize_axes(axis1, a.ndim), ops.normalize_axes(axis2, a.ndim)
    if i == j:
        raise tracing.user_error(ShapeError, "axis1 and axis2 cannot be the same")
    k = operator.index(offset)
    moved = dnp.moveaxis(a, (i, j), (-2, -1))
    *lead, rows, cols = moved.shape
    start = max(-k, 0) * cols + max(k, 0)
    n = len(_diagonal_positions(rows, cols, k)[0])
    flat_shape = (*lead, rows * cols)
    flat = moved.view_step(movement.reshape, {"shape": flat_shape}, layout.shadow(flat_shape))
    attrs = {
        "start": (*(0 for _ in lead), start if n else 0),
        "limit": (*lead, start + (n - 1) * (cols + 1) + 1 if n else 0),
        "stride": (*(1 for _ in lead), cols + 1),
    }
    shadow = np.diagonal(a._shadow, k, i, j)
    view = flat.view_step(movement.slice_, attrs, shadow)
    return view.view_step(movement.broadcast, {"shape": view.shape}, shadow)


def diag(v: Any, k: int = 0) -> Array:
    """``np.diag``: the ``k`` diagonal of a matrix, or a square matrix with a vector on it."""
    v = ops.asarray(v)
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise tracing.user_error(ShapeError, "Input must be 1- or 2-d.")
    size = v.shape[0] + abs(operator.index(k))
    out = dnp.zeros((size, size), v.dtype)
    rows, cols = _diagonal_positions(size, size, operator.index(k))
    out[rows, cols] = v
    return out


def trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None) -> Array:
    """``np.trace``: the sum of the ``offset`` diagonal (integers and bools summed as ``sum`` does)."""
    return dnp.sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


# ---- repetition --------------------------------------------------------------------------------------


def tile(a: Any, reps: Any) -> Array:
    """``np.tile``: ``a`` repeated ``reps`` times along each axis (a new array)."""
    a = ops.asarray(a)
    reps = (
        (operator.index(reps),) if isinstance(reps, (int, np.integer)) else tuple(map(operator.index, reps))
    )
    if any(r < 0 for r in reps):
        raise tracing.user_error(ShapeError, f"tile: negative dimensions are not allowed (reps {reps})")
    n = max(a.ndim, len(reps))
    shape, reps = (1,) * (n - a.ndim) + a.shape, (1,) * (n - len(reps)) + reps
    interleaved = dnp.reshape(a, tuple(d for s in shape for d in (1, s)))
    grown = dnp.broadcast_to(interleaved, tuple(d for r, s in zip(reps, shape, strict=True) for d in (r, s)))
    return ops.new_storage(dnp.reshape(grown, tuple(r * s for r, s in zip(reps, shape, strict=True))))


def flat_or_axis(a: Array, axis: int | None, known: Any, what: str) -> tuple[Array, int]:
    """``a`` flattened (``axis`` None) or as it is, and the axis; ``known`` (what decides the result's
    shape: counts, positions) must be known at trace time."""
    if axis is None:
        a, axis = dnp.ravel(a), 0
    (ax,) = ops.normalize_axes(axis, a.ndim)
    if isinstance(known, Array):
        raise tracing.user_error(
            TraceError, f"{what} must be known at trace time (the result's shape depends on them)"
        )
    return a, ax


def repeat(a: Any, repeats: Any, axis: int | None = None) -> Array:
    """``np.repeat``: each element (along ``axis``; of the flattened array for None) ``repeats`` times,
    a count known at trace time (an int, or one per element)."""
    a, ax = flat_or_axis(ops.asarray(a), axis, repeats, "repeat: the counts")
    counts = np.asarray(repeats)
    if counts.dtype.kind not in "iub" or (counts < 0).any():
        raise tracing.user_error(ShapeError, "repeat: repeats must be non-negative integers")
    try:
        positions = np.repeat(np.arange(a.shape[ax]), counts)  # NumPy's own index map: its shape rules too
    except ValueError as err:
        raise tracing.user_error(ShapeError, f"repeat: {err} (one count per element of axis {ax})") from None
    return dnp.take(a, positions, axis=ax)


def roll(a: Any, shift: Any, axis: Any = None) -> Array:
    """``np.roll``: elements shifted along ``axis`` (of the flattened array for None), wrapping."""
    a = ops.asarray(a)
    if axis is None:
        return dnp.reshape(roll(dnp.ravel(a), shift, 0), a.shape)
    try:  # NumPy's pairing: shifts and axes broadcast together; shifts of one axis add up
        shifts, axes = (v.ravel() for v in np.broadcast_arrays(np.asarray(shift), np.asarray(axis)))
    except ValueError as err:
        raise tracing.user_error(
            ShapeError, f"roll: 'shift' and 'axis' do not broadcast together: {err}"
        ) from None
    total: dict[int, int] = {}
    for s, ax_ in zip(shifts, axes, strict=True):
        (ax,) = ops.normalize_axes(int(ax_), a.ndim)
        total[ax] = total.get(ax, 0) + int(s)
    out = a
    for ax, s in total.items():
        out = dnp.take(out, np.roll(np.arange(a.shape[ax]), s), axis=ax)
    return out if out is not a else ops.new_storage(a)


# ---- NaN-ignoring reductions and extrema -----------------------------------------------------------


def _nan_to(x: Array, value: float) -> Array:
    return dnp.where(dnp.isnan(x), value, x) if x.ir_dtype.is_float else x


def nansum(a: Any, axis: Any = None, keepdims: bool = False, dtype: Any = None) -> Array:
    """``np.nansum``: NaN counted as zero."""
    return dnp.sum(_nan_to(ops.asarray(a), 0.0), axis=axis, keepdims=keepdims, dtype=dtype)


def nanprod(a: Any, axis: Any = None, keepdims: bool = False, dtype: Any = None) -> Array:
    """``np.nanprod``: NaN counted as one."""
    return dnp.prod(_nan_to(ops.asarray(a), 1.0), axis=axis, keepdims=keepdims, dtype=dtype)


def nanmean(a: Any, axis: Any = None, keepdims: bool = False) -> Array:
    """``np.nanmean``: the mean of the numbers (NaN where there are none, as NumPy's 0 / 0)."""
    a = ops.asarray(a)
    if not a.ir_dtype.is_float:
        return dnp.mean(a, axis=axis, keepdims=keepdims)
    count = dnp.sum(dnp.logical_not(dnp.isnan(a)), axis=axis, keepdims=keepdims)
    return dnp.divide(nansum(a, axis, keepdims), ops.cast(count, a.ir_dtype))


def _nan_extreme(a: Any, axis: Any, keepdims: bool, largest: bool) -> Array:
    a = ops.asarray(a)
    if not a.ir_dtype.is_float:
        return (dnp.max if largest else dnp.min)(a, axis=axis, keepdims=keepdims)
    ignored = _nan_to(a, -np.inf if largest else np.inf)
    out = (dnp.max if largest else dnp.min)(ignored, axis=axis, keepdims=keepdims)
    none = dnp.all(dnp.isnan(a), axis=axis, keepdims=keepdims)  # an all-NaN slice: NaN, as NumPy's
    return dnp.where(none, np.asarray(np.nan, a.dtype), out)


def nanmax(a: Any, axis: Any = None, keepdims: bool = False) -> Array:
    """``np.nanmax``: the largest number (NaN for a slice of NaN only, without NumPy's warning)."""
    return _nan_extreme(a, axis, keepdims, largest=True)


def nanmin(a: Any, axis: Any = None, keepdims: bool = False) -> Array:
    """``np.nanmin``: the smallest number (NaN for a slice of NaN only, without NumPy's warning)."""
    return _nan_extreme(a, axis, keepdims, largest=False)


def fmax(x: Any, y: Any) -> Array:
    """``np.fmax``: ``maximum`` that ignores a NaN operand (NaN only where both are)."""
    return dnp.where(dnp.isnan(y), x, dnp.where(dnp.isnan(x), y, dnp.maximum(x, y)))


def fmin(x: Any, y: Any) -> Array:
    """``np.fmin``: ``minimum`` that ignores a NaN operand (NaN only where both are)."""
    return dnp.where(dnp.isnan(y), x, dnp.where(dnp.isnan(x), y, dnp.minimum(x, y)))


# ---- within a tolerance ------------------------------------------------------------------------------


def isclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Array:
    """``np.isclose``: ``|a - b| <= atol + rtol * |b|`` for finite ``b``, or ``a == b`` (equal
    infinities); NaN close to NaN only with ``equal_nan``. Integers compare as floats, as NumPy's."""
    a, b = ops.asarray(a), ops.asarray(b)
    dtype = ops.result_dtype(b, 1.0)
    y = dnp.astype(b, dtype.np) if b.ir_dtype is not dtype else b  # a strong array, as NumPy's
    near = dnp.less_equal(dnp.abs(dnp.subtract(a, y)), dnp.add(atol, dnp.multiply(rtol, dnp.abs(y))))
    out = dnp.logical_or(dnp.logical_and(near, dnp.isfinite(y)), dnp.equal(a, y))
    if equal_nan:
        out = dnp.logical_or(out, dnp.logical_and(dnp.isnan(a), dnp.isnan(y)))
    return out


def allclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Array:
    """``np.allclose``: ``isclose`` everywhere, as a 0-d bool array (NumPy's Python bool is not known
    at trace time)."""
    return dnp.all(isclose(a, b, rtol, atol, equal_nan))


# ---- average -----------------------------------------------------------------------------------------


def average(
    a: Any, axis: Any = None, weights: Any = None, returned: bool = False, keepdims: bool = False
) -> Any:
    """``np.average``: the mean, or the ``weights``-weighted mean (weights of ``a``'s shape, or 1-d
    along a single ``axis``); ``returned`` adds the sum of the weights."""
    a = ops.asarray(a)
    if weights is None:
        avg = dnp.mean(a, axis=axis, keepdims=keepdims)
        if not returned:
            return avg
        count = (
            a.size if axis is None else int(np.prod([a.shape[x] for x in ops.normalize_axes(axis, a.ndim)]))
        )
        return avg, dnp.full(avg.shape, count, avg.dtype)
    w = ops.asarray(weights)
    if w.shape != a.shape:
        if axis is None or w.ndim != 1 or not isinstance(axis, (int, np.integer)):
            raise tracing.user_error(
                ShapeError,
                "average: weights differ from a in shape; then axis must be one axis and weights 1-d",
            )
        (ax,) = ops.normalize_axes(axis, a.ndim)
        if w.shape[0] != a.shape[ax]:
            raise tracing.user_error(ShapeError, "average: length of weights differs from that of the axis")
        w = dnp.reshape(w, tuple(w.shape[0] if k == ax else 1 for k in range(a.ndim)))
        w = dnp.broadcast_to(w, a.shape)
    dtype = ops.float_of(ops.result_dtype(a, w))
    total = dnp.sum(ops.cast(w, dtype), axis=axis, keepdims=keepdims)
    avg = dnp.divide(dnp.sum(dnp.multiply(a, w), axis=axis, keepdims=keepdims), total)
    return (avg, dnp.broadcast_to(total, avg.shape)) if returned else avg


# ---- shapes ------------------------------------------------------------------------------------------


def _atleast(x: Any, n: int) -> Array:
    x = ops.asarray(x)
    if x.ndim >= n:
        return x
    if n == 3:
        shape = {0: (1, 1, 1), 1: (1, *x.shape, 1), 2: (*x.shape, 1)}[x.ndim]
    else:
        shape = (1,) * (n - x.ndim) + x.shape
    return dnp.reshape(x, shape)


def atleast_1d(*arys: Any) -> Any:
    """``np.atleast_1d``: views with at least one axis (one array: itself, several: a tuple)."""
    out = tuple(_atleast(x, 1) for x in arys)
    return out[0] if len(out) == 1 else out


def atleast_2d(*arys: Any) -> Any:
    """``np.atleast_2d``: a vector ``(n,)`` as ``(1, n)``, a scalar as ``(1, 1)``."""
    out = tuple(_atleast(x, 2) for x in arys)
    return out[0] if len(out) == 1 else out


def atleast_3d(*arys: Any) -> Any:
    """``np.atleast_3d``: ``(n,)`` as ``(1, n, 1)``, ``(m, n)`` as ``(m, n, 1)``."""
    out = tuple(_atleast(x, 3) for x in arys)
    return out[0] if len(out) == 1 else out


def column_stack(tup: Sequence[Any]) -> Array:
    """``np.column_stack``: vectors as columns, matrices as they are, side by side."""
    cols = [ops.asarray(x) for x in tup]
    return dnp.concatenate([dnp.reshape(c, (c.shape[0], 1)) if c.ndim < 2 else c for c in cols], axis=1)


def dstack(tup: Sequence[Any]) -> Array:
    """``np.dstack``: along a third axis (each made at least 3-d)."""
    return dnp.concatenate([_atleast(x, 3) for x in tup], axis=2)


# ---- elementwise -------------------------------------------------------------------------------------


def positive(x: Any) -> Array:
    """``np.positive``: a copy (bools have no loop, as NumPy's)."""
    x = ops.asarray(x)
    if x.ir_dtype.is_bool:
        raise tracing.user_error(DTypeError, "ufunc 'positive' did not contain a loop for bool values")
    return ops.new_storage(x)


def _scaled(x: Any, factor: float) -> Array:
    x = ops.asarray(x)
    dtype = ops.float_of(x.ir_dtype)
    return dnp.multiply(ops.cast(x, dtype), np.asarray(factor, dtype.np))


@ops.keeps_weak
def deg2rad(x: Any) -> Array:
    """``np.deg2rad``: ``x * (pi / 180)`` (the factor rounded to ``x``'s float dtype)."""
    return _scaled(x, np.pi / 180.0)


@ops.keeps_weak
def rad2deg(x: Any) -> Array:
    """``np.rad2deg``: ``x * (180 / pi)``."""
    return _scaled(x, 180.0 / np.pi)


radians, degrees = deg2rad, rad2deg


def float_power(x: Any, y: Any) -> Array:
    """``np.float_power``: ``x ** y`` computed in float64 (integers, bools and float32 alike)."""
    x, y = ops.asarray(x), ops.asarray(y)
    return dnp.power(dnp.astype(x, np.float64), dnp.astype(y, np.float64))


@ops.keeps_weak
def heaviside(x1: Any, x2: Any) -> Array:
    """``np.heaviside``: 0 below zero, 1 above, ``x2`` at zero, NaN at NaN."""
    x1 = ops.asarray(x1)
    dtype = ops.float_of(ops.result_dtype(x1, x2))
    zero, one = np.asarray(0, dtype.np), np.asarray(1, dtype.np)
    step = dnp.where(dnp.less(x1, 0), zero, dnp.where(dnp.greater(x1, 0), one, ops.to_dtype(x2, dtype)))
    return dnp.where(dnp.isnan(x1), np.asarray(np.nan, dtype.np), step) if x1.ir_dtype.is_float else step


def fix(x: Any) -> Array:
    """``np.fix``: rounded toward zero (``trunc``; integers unchanged)."""
    return dnp.trunc(x)


@ops.keeps_weak
def sinc(x: Any) -> Array:
    """``np.sinc``: ``sin(pi x) / (pi x)``, as NumPy computes it (1 at 0 from ``x = 1e-20`` there;
    integers and bools in float64, as NumPy's Python-float arithmetic makes them)."""
    x = ops.asarray(x)
    dtype = x.ir_dtype if x.ir_dtype.is_float else ops.DType.f64
    xf = ops.cast(x, dtype)
    y = dnp.multiply(
        np.asarray(np.pi, dtype.np), dnp.where(dnp.equal(xf, 0), np.asarray(1.0e-20, dtype.np), xf)
    )
    return dnp.divide(dnp.sin(y), y)


__all__ = [
    "allclose",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "average",
    "column_stack",
    "cross",
    "deg2rad",
    "degrees",
    "diag",
    "diagonal",
    "dstack",
    "fix",
    "float_power",
    "fmax",
    "fmin",
    "heaviside",
    "inner",
    "isclose",
    "kron",
    "nanmax",
    "nanmean",
    "nanmin",
    "nanprod",
    "nansum",
    "positive",
    "rad2deg",
    "radians",
    "repeat",
    "roll",
    "sinc",
    "tensordot",
    "tile",
    "trace",
    "vdot",
]
