"""The primitives' NumPy implementations that NumPy itself does not have under the primitive's terms.

A primitive's ``reference`` (``compiler/prims/``) is a NumPy function or one of these: the reference
interpreter runs them, and so do the generated NumPy-assisted kernels (``compiler/kernel/arraylevel.py``
writes ``np.<name>(...)`` or ``_ops.<name>(...)`` for this module), so the oracle and the fast path
share one implementation and a generated module needs no compiler. Attributes arrive as NumPy
values: integer tuples, NumPy dtypes, arrays. A function with an ``out`` parameter stores its result
there (an array of the result's shape and dtype, which no operand shares memory with) and returns it:
the NumPy-assisted kernels compute into planned scratch; without it, the result is a new array.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.special import erf as erf  # a reference as it is
from scipy.special import erfc as erfc
from scipy.special import expit

# ---- elementwise --------------------------------------------------------------------------------


def divide(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """True division of floats, NumPy's floor division of integers (0 for a zero divisor)."""
    if a.dtype.kind in "iu":
        return np.floor_divide(a, b, out=out)
    return np.true_divide(a, b, out=out)


def logistic(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    return expit(x, out=out)


def cast(x: np.ndarray, dtype: np.dtype, out: np.ndarray | None = None) -> np.ndarray:
    """``x.astype(dtype)``; from floats to integers, NaN, infinities and values outside the integer's
    range give its minimum on every platform and backend (what x86's conversion gives NumPy there;
    an ARM CPU's and a GPU's saturate instead, NaN to 0)."""
    x = np.asarray(x)
    dtype = np.dtype(dtype)
    if x.dtype.kind == "f" and dtype.kind == "i":
        low = np.iinfo(dtype).min
        inside = (x >= float(low)) & (x < -float(low))
        x = np.where(inside, x, 0)  # converted without a warning, then replaced
        result = x.astype(dtype)
        result[~inside] = low
        if out is None:
            return result
        np.copyto(out, result)
        return out
    if out is None:
        return x.astype(dtype)
    np.copyto(out, x, casting="unsafe")  # (astype's conversion)
    return out


def select(pred: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``a`` where ``pred``, else ``b`` (np.where, which has no ``out``)."""
    if out is None:
        return np.where(pred, a, b)
    np.copyto(out, b)
    np.copyto(out, a, where=pred)
    return out


# ---- reductions ---------------------------------------------------------------------------------


def sum_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a sum of ``dtype`` accumulates in: float32 sums in float64 (a long chunk of a float32
    accumulator loses digits in proportion to its length; NumPy's pairwise sum does not), every
    other dtype in its own (integer sums are exact)."""
    return np.dtype(np.float64) if dtype == np.float32 else np.dtype(dtype)


def lowest(dtype: np.dtype) -> float | int | bool:
    """The identity of max over ``dtype``: -inf, the smallest integer, False."""
    if dtype.kind == "f":
        return -np.inf
    return False if dtype.kind == "b" else int(np.iinfo(dtype).min)


def highest(dtype: np.dtype) -> float | int | bool:
    """The identity of min over ``dtype``: inf, the largest integer, True."""
    if dtype.kind == "f":
        return np.inf
    return True if dtype.kind == "b" else int(np.iinfo(dtype).max)


def reduce_sum(x: np.ndarray, axes: Sequence[int], out: np.ndarray | None = None) -> np.ndarray:
    dtype = sum_dtype(x.dtype)
    if out is not None and out.dtype == dtype:
        return np.sum(x, axis=tuple(axes), dtype=dtype, out=out)
    total = np.sum(x, axis=tuple(axes), dtype=dtype)  # (a float32 sum's float64 total: a new array)
    if out is None:
        return total.astype(x.dtype, copy=False)
    np.copyto(out, total, casting="unsafe")
    return out


def reduce_max(x: np.ndarray, axes: Sequence[int], out: np.ndarray | None = None) -> np.ndarray:
    result = np.asarray(np.max(x, axis=tuple(axes), initial=lowest(x.dtype), out=out))
    return _zeros_ordered(result, x, tuple(axes), 0.0)


def reduce_min(x: np.ndarray, axes: Sequence[int], out: np.ndarray | None = None) -> np.ndarray:
    result = np.asarray(np.min(x, axis=tuple(axes), initial=highest(x.dtype), out=out))
    return _zeros_ordered(result, x, tuple(axes), -0.0)


def _zeros_ordered(out: np.ndarray, x: np.ndarray, axes: tuple[int, ...], zero: float) -> np.ndarray:
    """``out``, np.max or np.min of ``x`` over ``axes`` (an array of its own), with -0.0 ordered below
    +0.0 (JAX's max and min; NumPy's give whichever equal zero its loop meets first): a zero result
    is made ``zero`` (0.0 for max, -0.0 for min) wherever a zero of that sign was reduced. NaN
    results stay NaN. Only where some result is zero are ``x``'s zeros looked at (bool arrays of
    ``x``'s shape)."""
    if x.dtype.kind != "f":
        return out
    at_zero = out == 0
    if at_zero.any():
        found = np.any((x == 0) & (np.signbit(x) == np.signbit(zero)), axis=axes)
        np.copyto(out, zero, where=at_zero & found)
    return out


# ---- movement and sources -----------------------------------------------------------------------


def broadcast(x: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    return np.broadcast_to(x, tuple(shape))


def reshape(x: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    return np.reshape(x, tuple(shape))


def transpose(x: np.ndarray, perm: Sequence[int]) -> np.ndarray:
    return np.transpose(x, tuple(perm))


def numpy_slices(start: Sequence[int], limit: Sequence[int], stride: Sequence[int]) -> tuple[slice, ...]:
    """``start:limit:stride`` per axis as Python slices (a negative limit runs to the front)."""
    return tuple(
        slice(int(s), None if int(lim) < 0 else int(lim), int(st))
        for s, lim, st in zip(start, limit, stride, strict=True)
    )


def slice_(x: np.ndarray, start: Sequence[int], limit: Sequence[int], stride: Sequence[int]) -> np.ndarray:
    return x[numpy_slices(start, limit, stride)]


def update_slice(
    base: np.ndarray,
    update: np.ndarray,
    start: Sequence[int],
    limit: Sequence[int],
    stride: Sequence[int],
    out: np.ndarray | None = None,
) -> np.ndarray:
    out = base.copy() if out is None else _copied(base, out)
    out[numpy_slices(start, limit, stride)] = update
    return out


def _copied(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    np.copyto(out, x)
    return out


def window(shape: Sequence[int], starts: Sequence[np.ndarray], sizes: Sequence[int]) -> tuple[Any, ...]:
    """The window of ``sizes`` at ``starts`` as JAX's ``lax.dynamic_slice`` places it: a negative
    start counts from the end once, then it is clamped into ``[0, dim - size]`` (the window always
    lies inside the array). Slices when every start is 0-d; for starts per row (of shape
    ``shape[:r]``, ``prims/dynamic.py``) an index array per axis, broadcast to ``sizes``: each
    row's window at its own start."""
    if all(np.ndim(s) == 0 for s in starts):
        wrapped = [int(s) + d if int(s) < 0 else int(s) for s, d in zip(starts, shape, strict=True)]
        at = [min(max(s, 0), d - n) for s, d, n in zip(wrapped, shape, sizes, strict=True)]
        return tuple(slice(a, a + n) for a, n in zip(at, sizes, strict=True))
    rank, index = len(shape), []
    for axis, (s, d, n) in enumerate(zip(starts, shape, sizes, strict=True)):
        s = np.asarray(s, np.int64)
        s = np.clip(np.where(s < 0, s + d, s), 0, d - n)
        step = np.arange(n).reshape((1,) * axis + (n,) + (1,) * (rank - axis - 1))
        index.append(s.reshape(s.shape + (1,) * (rank - s.ndim)) + step)
    return tuple(index)


def dynamic_slice(x: np.ndarray, *starts: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    return x[window(x.shape, starts, sizes)]


def dynamic_update_slice(
    base: np.ndarray, update: np.ndarray, *starts: np.ndarray, out: np.ndarray | None = None
) -> np.ndarray:
    out = base.copy() if out is None else _copied(base, out)
    out[window(base.shape, starts, update.shape)] = update
    return out


def pad(
    x: np.ndarray, value: np.ndarray, low: Sequence[int], high: Sequence[int], out: np.ndarray | None = None
) -> np.ndarray:
    if x.ndim == 0:  # np.pad rejects 0-d arrays; padding no axes is the identity
        return x.copy() if out is None else _copied(x, out)
    if out is None:
        return np.pad(x, list(zip(low, high)), constant_values=value)
    out[...] = value
    out[tuple(slice(lo, lo + n) for lo, n in zip(low, x.shape))] = x
    return out


def concatenate(*xs: np.ndarray, axis: int, out: np.ndarray | None = None) -> np.ndarray:
    return np.concatenate(xs, axis=axis, out=out)


def constant(value: np.ndarray) -> np.ndarray:
    return value


def iota(shape: Sequence[int], dimension: int, dtype: np.dtype) -> np.ndarray:
    shape = tuple(shape)
    line = np.arange(shape[dimension], dtype=dtype)
    view = [1] * len(shape)
    view[dimension] = shape[dimension]
    return np.broadcast_to(line.reshape(view), shape)


# ---- random bits ---------------------------------------------------------------------------------

THREEFRY_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))  # Threefry-2x32's, alternating every 4 rounds
THREEFRY_PARITY = 0x1BD11BDA  # Threefish's key-schedule constant


def threefry2x32(key: np.ndarray, x0: np.ndarray, x1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Threefry-2x32 (20 rounds) of the counters ``(x0, x1)`` (``uint32`` arrays, wrapping arithmetic)
    under ``key``'s two words (the low 32 bits of each element)."""
    k = np.asarray(key).astype(np.int64).astype(np.uint32)
    ks = (k[0], k[1], k[0] ^ k[1] ^ np.uint32(THREEFRY_PARITY))
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for i in range(5):
        for r in THREEFRY_ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = ((x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r))) ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x0, x1


def random_bits(key: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """The primitive ``random_bits`` (compiler/prims/random.py): for each key of ``key`` (``(..., 2)``),
    the counter ``n`` of each C-order position of ``shape`` gives ``x0 * 2**32 + x1`` as ``int64``,
    where ``(x0, x1) = threefry2x32(key, (n >> 32, n & 0xFFFFFFFF))``; shape ``key.shape[:-1] + shape``."""
    key, shape = np.asarray(key), tuple(shape)
    n = np.arange(int(np.prod(shape)), dtype=np.uint64)
    hi, lo = (n >> np.uint64(32)).astype(np.uint32), n.astype(np.uint32)
    out = np.empty((int(np.prod(key.shape[:-1])), n.size), np.uint64)
    with np.errstate(over="ignore"):
        for row, k in zip(out, key.reshape(-1, 2)):
            x0, x1 = threefry2x32(k, hi, lo)
            row[:] = (x0.astype(np.uint64) << np.uint64(32)) | x1.astype(np.uint64)
    return out.view(np.int64).reshape(key.shape[:-1] + shape)


def clamped_indices(idx: np.ndarray, n: int) -> np.ndarray:
    """Positions ``idx`` on an axis of ``n`` elements as ``compiler/prims/gather.py`` reads them: a
    negative index counts from the end once (NumPy), then it is clamped into ``[0, n - 1]`` (JAX)."""
    i = idx.astype(np.int64)
    return np.clip(np.where(i < 0, i + n, i), 0, max(n - 1, 0))


def landing_indices(idx: np.ndarray, n: int) -> np.ndarray:
    """Where scatter updates at ``idx`` land on an axis of ``n`` (``compiler/prims/gather.py``:
    ``landing``): a negative index counts from the end once, and one still outside the axis is
    ``n``, dropped (JAX's ``mode="drop"``)."""
    i = idx.astype(np.int64)
    i = np.where(i < 0, i + n, i)
    return np.where((i >= 0) & (i < n), i, n)


def gather(x: np.ndarray, idx: np.ndarray, axis: int, unique: bool = False) -> np.ndarray:
    """``unique`` (positions named once: compiler/prims/gather.py) changes nothing here."""
    return np.take(x, clamped_indices(idx, x.shape[axis]), axis=axis)


def _scatter(x: np.ndarray, v: np.ndarray, idx: np.ndarray, axis: int, combine: Any) -> np.ndarray:
    """``x`` with the updates ``v`` combined into it at positions ``idx`` of ``axis``, one update
    after the other in ``idx``'s row-major order (the CPU kernel's order, and the CUDA kernel's per
    element); an update landing nowhere is dropped."""
    out = x.copy()
    flat = landing_indices(idx, x.shape[axis]).reshape(-1)
    updates = v.reshape(x.shape[:axis] + (flat.size,) + x.shape[axis + 1 :])
    lead = (slice(None),) * axis
    for u, j in enumerate(flat):
        if j == x.shape[axis]:
            continue
        at = lead + (int(j),)
        out[at] = combine(out[at], updates[lead + (u,)])
    return out


def _cumulative(x: np.ndarray, axis: int, reverse: bool, scan: Any, dtype: np.dtype) -> np.ndarray:
    """An inclusive scan of ``x`` along ``axis`` (from the end for ``reverse``), run in ``dtype`` and
    rounded once per element to ``x``'s dtype, as the scan kernels do."""
    x = np.flip(x, axis) if reverse else x
    out = scan(x.astype(dtype), axis=axis).astype(x.dtype)
    return np.flip(out, axis) if reverse else out


def cumulative_sum(x: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    return _cumulative(x, axis, reverse, np.cumsum, sum_dtype(x.dtype))


def cumulative_prod(x: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    return _cumulative(x, axis, reverse, np.cumprod, x.dtype)


def scatter_add(x: np.ndarray, v: np.ndarray, idx: np.ndarray, axis: int, unique: bool = False) -> np.ndarray:
    return _scatter(x, v, idx, axis, lambda old, new: old + new)


def scatter(x: np.ndarray, v: np.ndarray, idx: np.ndarray, axis: int, unique: bool = False) -> np.ndarray:
    return _scatter(x, v, idx, axis, lambda old, new: new)


def _scatter_max2(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """``reduce_max``'s combine (``compiler/prims/reduction.py``): NaN wins; -0.0 below +0.0."""
    return np.where((new > old) | (new != new), new, np.where((new == old) & (new == 0), old + new, old))


def _scatter_min2(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    return np.where(
        (new < old) | (new != new), new, np.where((new == old) & (new == 0), old * new * (old + new), old)
    )


def scatter_mul(x: np.ndarray, v: np.ndarray, idx: np.ndarray, axis: int, unique: bool = False) -> np.ndarray:
    return _scatter(x, v, idx, axis, lambda old, new: old * new)


def scatter_max(x: np.ndarray, v: np.ndarray, idx: np.ndarray, axis: int, unique: bool = False) -> np.ndarray:
    return _scatter(x, v, idx, axis, _scatter_max2)


def scatter_min(x: np.ndarray, v: np.ndarray, idx: np.ndarray, axis: int, unique: bool = False) -> np.ndarray:
    return _scatter(x, v, idx, axis, _scatter_min2)
