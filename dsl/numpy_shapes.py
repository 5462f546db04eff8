"""NumPy's splitting, padding and rearranging functions, from views and the movement primitives
(``dnp.split``, ``dnp.pad``, ``dnp.flip`` ...). Views are views as in NumPy (``split``'s pieces,
``flip``, ``swapaxes`` and ``moveaxis`` see and make writes to their base); the rest are new arrays.
``dsl.numpy`` re-exports every public name here."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from compiler.prims import movement, source
from dsl import numpy as dnp
from dsl import ops, tracing
from dsl.array import Array
from dsl.errors import ShapeError


def _along(x: Array, axis: int, index: Any) -> Array:
    """``x[..., index, ...]`` with ``index`` (a slice or an int) at ``axis``: a view."""
    return ops.getitem(x, (slice(None),) * axis + (index,))


# ---- split -----------------------------------------------------------------------------------------


def _pieces(x: Array, bounds: Sequence[int], axis: int) -> list[Array]:
    return [_along(x, axis, slice(lo, hi)) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]


def array_split(x: Any, indices_or_sections: Any, axis: int = 0) -> list[Array]:
    """``np.array_split``: views of ``x`` between the given indices (Python slice semantics), or
    ``sections`` pieces whose lengths differ by at most one (the longer ones first)."""
    x = ops.asarray(x)
    (ax,) = ops.normalize_axes(axis, x.ndim)
    n = x.shape[ax]
    if isinstance(indices_or_sections, (int, np.integer)):
        sections = int(indices_or_sections)
        if sections <= 0:
            raise tracing.user_error(ShapeError, "number sections must be larger than 0.")
        each, extra = divmod(n, sections)
        sizes = [each + 1] * extra + [each] * (sections - extra)
        bounds = [0]
        for size in sizes:
            bounds.append(bounds[-1] + size)
    else:
        bounds = [0, *(operator.index(i) for i in indices_or_sections), n]
    return _pieces(x, bounds, ax)


def split(x: Any, indices_or_sections: Any, axis: int = 0) -> list[Array]:
    """``np.split``: as ``array_split``, but a number of sections must divide the axis."""
    x = ops.asarray(x)
    if isinstance(indices_or_sections, (int, np.integer)):
        (ax,) = ops.normalize_axes(axis, x.ndim)
        if indices_or_sections <= 0 or x.shape[ax] % int(indices_or_sections):
            raise tracing.user_error(ShapeError, "array split does not result in an equal division")
    return array_split(x, indices_or_sections, axis)


# ---- pad ---------------------------------------------------------------------------------------------


def _pairs(value: Any, ndim: int, what: str) -> list[tuple[Any, Any]]:
    """NumPy's ``_as_pairs``: a scalar, a ``(before, after)`` pair, or one pair per axis."""
    try:
        pairs = np.broadcast_to(np.asarray(value, dtype=object), (ndim, 2))
    except ValueError:
        raise tracing.user_error(
            ShapeError, f"pad: {what} {value!r} does not give a (before, after) pair for each of {ndim} axes"
        ) from None
    return [(a, b) for a, b in pairs.tolist()]


def _widths(pad_width: Any, ndim: int) -> list[tuple[int, int]]:
    widths = [(operator.index(a), operator.index(b)) for a, b in _pairs(pad_width, ndim, "pad_width")]
    if any(a < 0 or b < 0 for a, b in widths):
        raise tracing.user_error(ShapeError, "index can't contain negative values")
    return widths


def _pad_constant(x: Array, widths: list[tuple[int, int]], values: list[tuple[Any, Any]]) -> Array:
    """One ``pad`` op where all values are one Python number; else one per axis and side, the first
    axis first, so that the corners take the later axis's value, as NumPy fills them."""
    flat = {id(v) if isinstance(v, Array) else v for pair in values for v in pair}
    if len(flat) == 1:
        value = values[0][0]
        low, high = tuple(a for a, _ in widths), tuple(b for _, b in widths)
        return ops.emit(movement.pad, [x, ops.to_dtype(value, x.ir_dtype)], {"low": low, "high": high})
    out = x
    for axis in range(x.ndim):
        for side, value in enumerate(values[axis]):
            width = widths[axis][side]
            if width:
                low = tuple(width if (a == axis and side == 0) else 0 for a in range(x.ndim))
                high = tuple(width if (a == axis and side == 1) else 0 for a in range(x.ndim))
                fill = ops.to_dtype(value, x.ir_dtype)
                out = ops.emit(movement.pad, [out, fill], {"low": low, "high": high})
    return out


def _edge_parts(x: Array, axis: int, before: int, after: int, mode: str) -> tuple[Array, Array]:
    """The slabs ``mode`` puts before and after ``x`` along ``axis`` (one period at most)."""
    n = x.shape[axis]
    if mode == "edge":
        first, last = _along(x, axis, slice(0, 1)), _along(x, axis, slice(n - 1, n))
        grow = [list(x.shape), list(x.shape)]
        grow[0][axis], grow[1][axis] = before, after
        return ops.broadcast_to(first, grow[0]), ops.broadcast_to(last, grow[1])
    if mode == "wrap":
        return _along(x, axis, slice(n - before, n)), _along(x, axis, slice(0, after))
    skip = 1 if mode == "reflect" else 0  # reflect mirrors about the edge element, symmetric about the edge
    head = flip(_along(x, axis, slice(skip, skip + before)), axis)
    tail = flip(_along(x, axis, slice(n - skip - after, n - skip)), axis)
    return head, tail


def _reflected(edge: Array, chunk: Array) -> Array:
    """``2 * edge - chunk`` (``reflect_type="odd"``) as NumPy's pad stores it: in the array's dtype, so
    bools (whose arithmetic is in integers) are True where it is nonzero (2026-11-28: ints came out)."""
    return ops.cast(dnp.subtract(dnp.multiply(2, edge), chunk), chunk.ir_dtype)


def _reflect_odd(x: Array, axis: int, before: int, after: int, include_edge: bool) -> Array:
    """``reflect_type="odd"`` past one period: NumPy's own loop (``_set_reflect_both``), each round
    reflecting a chunk of what is filled so far about its current edge value (``2 * edge - chunk``),
    the chunk at most the filled length rounded down to whole periods of the original axis."""
    period = x.shape[axis]
    out = x
    while before or after:
        filled = out.shape[axis]
        if include_edge:
            length, offset = filled // period * period, 0
        else:
            length, offset = (filled - 1) // (period - 1) * (period - 1), 1
        parts = []
        if before:
            k = min(length, before)
            chunk = flip(_along(out, axis, slice(offset, offset + k)), axis)
            parts.append(_reflected(_along(out, axis, slice(0, 1)), chunk))
            before -= k
        parts.append(out)
        if after:
            k = min(length, after)
            chunk = flip(_along(out, axis, slice(filled - offset - k, filled - offset)), axis)
            parts.append(_reflected(_along(out, axis, slice(filled - 1, filled)), chunk))
            after -= k
        out = dnp.concatenate(parts, axis)
    return out


def pad(
    array: Any, pad_width: Any, mode: str = "constant", constant_values: Any = 0, reflect_type: str = "even"
) -> Array:
    """``np.pad`` with static widths: modes ``constant`` (the ``pad`` primitive), ``edge``, ``wrap``,
    ``reflect`` and ``symmetric`` (slices and ``concatenate``; past one period a gather);
    ``reflect_type="odd"`` reflects about the edge's value: ``2 * edge - x`` (past one period, chunk
    by chunk as NumPy)."""
    x = ops.asarray(array)
    widths = _widths(pad_width, x.ndim)
    if reflect_type not in ("even", "odd"):
        raise tracing.user_error(
            ShapeError, f"pad: reflect_type must be 'even' or 'odd', not {reflect_type!r}"
        )
    odd = reflect_type == "odd" and mode in ("reflect", "symmetric")
    if mode == "constant":
        if isinstance(constant_values, Array):  # a traced value: one for every side
            if constant_values.ndim:
                raise tracing.user_error(ShapeError, "pad: a traced constant_values must be a scalar (0-d)")
            return _pad_constant(x, widths, [(constant_values, constant_values)] * x.ndim)
        return _pad_constant(x, widths, _pairs(constant_values, x.ndim, "constant_values"))
    if mode not in ("edge", "wrap", "reflect", "symmetric"):
        raise tracing.user_error(
            ShapeError,
            f"pad: mode {mode!r} is not supported; dsl.numpy.pad has 'constant', 'edge', 'wrap', "
            "'reflect' and 'symmetric'",
        )
    out = x
    for axis, (before, after) in enumerate(widths):
        if before or after:
            if out.shape[axis] == 0:
                raise tracing.user_error(
                    ShapeError, f"can't extend empty axis {axis} using modes other than 'constant'"
                )
            n = out.shape[axis]
            if odd and n > 1 and max(before, after) > (n - 1 if mode == "reflect" else n):
                out = _reflect_odd(out, axis, before, after, mode == "symmetric")
                continue
            if mode != "edge" and max(before, after) > (n - 1 if mode == "reflect" else n):
                # Past one period (or reflecting an axis of one): NumPy's own index map of the axis
                # (padding positions is what padding values does), as one gather along it.
                positions = np.pad(np.arange(n), (before, after), mode=mode)  # type: ignore[call-overload]
                out = dnp.take(out, positions, axis=axis)
                continue
            head, tail = _edge_parts(out, axis, before, after, mode)
            if odd:  # NumPy's 2 * edge - chunk, stored in the array's dtype (bools: nonzero)
                head = _reflected(_along(out, axis, slice(0, 1)), head)
                tail = _reflected(_along(out, axis, slice(n - 1, n)), tail)
            out = dnp.concatenate([p for p in (head, out, tail) if p.shape[axis]], axis)
    return ops.new_storage(out) if out is x else out


# ---- rearranging --------------------------------------------------------------------------------------


def flip(m: Any, axis: Any = None) -> Array:
    """``np.flip``: a view with the given axes (all by default) reversed."""
    m = ops.asarray(m)
    axes = ops.normalize_axes(axis, m.ndim)
    return ops.getitem(m, tuple(slice(None, None, -1) if a in axes else slice(None) for a in range(m.ndim)))


def fliplr(m: Any) -> Array:
    return flip(m, 1)


def flipud(m: Any) -> Array:
    return flip(m, 0)


def swapaxes(a: Any, axis1: int, axis2: int) -> Array:
    a = ops.asarray(a)
    (i,), (j,) = ops.normalize_axes(axis1, a.ndim), ops.normalize_axes(axis2, a.ndim)
    perm = list(range(a.ndim))
    perm[i], perm[j] = j, i
    return ops.transpose(a, perm)


def moveaxis(a: Any, source: Any, destination: Any) -> Array:
    a = ops.asarray(a)
    src = [
        ops.normalize_axes(s, a.ndim)[0] for s in (source if isinstance(source, (tuple, list)) else [source])
    ]
    dst = [
        ops.normalize_axes(d, a.ndim)[0]
        for d in (destination if isinstance(destination, (tuple, list)) else [destination])
    ]
    if len(src) != len(dst):
        raise tracing.user_error(
            ShapeError, "`source` and `destination` arguments must have the same number of elements"
        )
    for name, axes in (("source", src), ("destination", dst)):
        if len(set(axes)) != len(axes):
            raise tracing.user_error(ShapeError, f"repeated axis in `{name}` argument")
    order = [n for n in range(a.ndim) if n not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return ops.transpose(a, order)


def vstack(tup: Sequence[Any]) -> Array:
    arrays = [ops.asarray(t) for t in tup]
    return dnp.concatenate([dnp.reshape(t, (1, -1)) if t.ndim < 2 else t for t in arrays], 0)


def hstack(tup: Sequence[Any]) -> Array:
    arrays = [ops.asarray(t) for t in tup]
    arrays = [dnp.reshape(t, (1,)) if t.ndim == 0 else t for t in arrays]
    return dnp.concatenate(arrays, 0 if arrays and arrays[0].ndim == 1 else 1)


def outer(a: Any, b: Any) -> Array:
    return dnp.multiply(dnp.reshape(dnp.ravel(a), (-1, 1)), dnp.reshape(dnp.ravel(b), (1, -1)))


def _lower_triangle(m: Array, k: int) -> Array:
    """Whether each position of ``m``'s last two axes is on or below diagonal ``k`` (a 1-d ``m`` is
    the last row of a square, as NumPy broadcasts it)."""
    rows, cols = m.shape[-2:] if m.ndim >= 2 else (m.shape[-1], m.shape[-1])
    row = ops.emit(source.iota, [], {"shape": (rows, cols), "dimension": 0, "dtype": ops.DType.i64})
    col = ops.emit(source.iota, [], {"shape": (rows, cols), "dimension": 1, "dtype": ops.DType.i64})
    return dnp.less_equal(dnp.subtract(col, row), k)


def tril(m: Any, k: int = 0) -> Array:
    """``np.tril``: zeros above diagonal ``k`` of the last two axes."""
    m = ops.asarray(m)
    return dnp.where(_lower_triangle(m, operator.index(k)), m, ops.to_dtype(0, m.ir_dtype))


def triu(m: Any, k: int = 0) -> Array:
    """``np.triu``: zeros below diagonal ``k`` of the last two axes."""
    m = ops.asarray(m)
    return dnp.where(_lower_triangle(m, operator.index(k) - 1), ops.to_dtype(0, m.ir_dtype), m)


def eye(n: int, m: int | None = None, k: int = 0, dtype: Any = np.float64) -> Array:
    cols = n if m is None else m
    row = ops.emit(source.iota, [], {"shape": (n, cols), "dimension": 0, "dtype": ops.DType.i64})
    col = ops.emit(source.iota, [], {"shape": (n, cols), "dimension": 1, "dtype": ops.DType.i64})
    return dnp.astype(dnp.equal(dnp.subtract(col, row), k), dtype)


def identity(n: int, dtype: Any = np.float64) -> Array:
    return eye(n, dtype=dtype)


__all__ = [
    "array_split",
    "eye",
    "flip",
    "fliplr",
    "flipud",
    "hstack",
    "identity",
    "moveaxis",
    "outer",
    "pad",
    "split",
    "swapaxes",
    "tril",
    "triu",
    "vstack",
]
