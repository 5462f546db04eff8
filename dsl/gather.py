"""Indexing with integer arrays and writing through it: NumPy's advanced indexing (``x[idx]``,
``x[i, j]``, mixed with slices), ``dnp.take``, ``dnp.take_along_axis``, ``x[idx] = v``,
``x[idx] += v``, boolean-mask writes (``x[mask] = v``: a ``where``), JAX's ``x.at[idx].set/add/mul/
min/max/get``
and PyTorch's ``index_add_`` and ``masked_fill_``; all on the ``gather`` / ``scatter`` /
``scatter_add`` primitives (``compiler/prims/gather.py``).

An index with integer arrays is read as NumPy 2 reads it when the arrays (and the integers among
them) are adjacent: the slices and integers before them are applied first as a view, the indexed
axes are merged into one and read by one ``gather`` at the row-major position of the broadcast
indices (each wrapped once if negative, then clamped into its axis). ``x[idx]`` is a view through
the gather only for writing: NumPy's ``x[idx]`` is a copy, and a write through it
(``x[idx] = v``) is a ``scatter`` back into ``x`` (repeated indices: the last update stays, as
NumPy's in practice); ``x[idx] += v`` reads, adds and writes back (once per repeated index, as
NumPy), while ``x.at[idx].add(v)`` accumulates every repeat (JAX, ``np.add.at``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from compiler.ir.types import DType
from compiler.prims import elementwise as ew
from compiler.prims import gather as gp
from compiler.prims import source
from dsl import ops, tracing
from dsl.array import Array
from dsl.errors import IndexingError, ShapeError


def is_index_array(it: Any) -> bool:
    """An integer array (traced, NumPy or a list) used as an index; a 0-d traced integer is a
    dynamic slice instead (``dsl/dynamic_index.py``)."""
    if isinstance(it, Array):
        return it.ndim > 0 and it.ir_dtype.is_int
    if isinstance(it, list):
        return np.asarray(it).dtype.kind in "iu"
    return isinstance(it, np.ndarray) and it.ndim > 0 and it.dtype.kind in "iu"


def is_mask(it: Any) -> bool:
    if isinstance(it, Array):
        return it.ir_dtype.is_bool
    return isinstance(it, np.ndarray) and it.dtype == np.bool_


def has_index_arrays(index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(is_index_array(it) for it in items)


def _as_index(it: Any) -> Array:
    a = ops.asarray(np.asarray(it) if isinstance(it, list) else it)
    if not a.ir_dtype.is_int:
        raise tracing.user_error(IndexingError, f"an index array must hold integers, got {a.dtype}")
    return a


def normalized(i: Array, n: int) -> Array:
    """``i`` on an axis of ``n``: wrapped once if negative, clamped into ``[0, n - 1]`` (as the
    primitives read their indices), as int64."""
    i = ops.cast(i, DType.i64) if i.ir_dtype is not DType.i64 else i
    wrapped = ops.where(ops.binary(ew.lt, i, 0), ops.binary(ew.add, i, n), i)
    return ops.binary(ew.min_, ops.binary(ew.max_, wrapped, 0), max(n - 1, 0))


def _split(x: Array, index: Any) -> tuple[Array, int, list[Array]]:
    """``x[index]`` as (a view of ``x`` by the basic items, the axis of that view where the advanced
    items start, those items as integer arrays, one per consecutive axis)."""
    items = list(index) if isinstance(index, tuple) else [index]
    if any(it is None for it in items):
        raise tracing.user_error(IndexingError, "None (np.newaxis) together with integer-array indices")
    if any(is_mask(it) for it in items):
        raise tracing.user_error(
            IndexingError,
            "a boolean mask together with other indices: x[mask] alone is supported for writes "
            "(x[mask] = v); for reads use dsl.numpy.where(mask, x, 0)",
        )
    fill = x.ndim - sum(it is not Ellipsis for it in items)
    at = next((k for k, it in enumerate(items) if it is Ellipsis), None)
    if at is not None:
        items = items[:at] + [slice(None)] * fill + items[at + 1 :]
    elif fill > 0:
        items += [slice(None)] * fill
    if len(items) > x.ndim:
        raise tracing.user_error(
            IndexingError, f"too many indices for array: array is {x.ndim}-dimensional, but {len(items)}"
        )
    advanced = [k for k, it in enumerate(items) if not isinstance(it, slice)]
    if advanced != list(range(advanced[0], advanced[-1] + 1)):
        raise tracing.user_error(
            IndexingError,
            "integer-array indices separated by a slice (NumPy moves their axes first): write the "
            "indexed axes next to each other (transpose first), or index in two steps",
        )
    basic = tuple(slice(None) if k in advanced else it for k, it in enumerate(items))
    view = ops.index_view(x, basic) if any(it != slice(None) for it in basic) else x
    return view, advanced[0], [_as_index(items[k]) for k in advanced]


def _linear(view: Array, axis: int, arrays: list[Array]) -> tuple[Array, Array]:
    """The view with the indexed axes merged into one, and the row-major position the broadcast
    index arrays name in it (one array: itself, read by the gather's own wrap and clamp)."""
    if len(arrays) == 1:
        return view, arrays[0]
    shape = ops.broadcast_shapes(*(a.shape for a in arrays))
    dims = view.shape[axis : axis + len(arrays)]
    position: Array | None = None
    for a, n in zip(arrays, dims, strict=True):
        term = normalized(ops.broadcast_to(a, shape), n)
        position = term if position is None else ops.binary(ew.add, ops.binary(ew.mul, position, n), term)
    assert position is not None
    merged = view.shape[:axis] + (math.prod(dims),) + view.shape[axis + len(arrays) :]
    return ops.reshape(view, merged), position


def gather_view(x: Array, index: Any) -> Array:
    """``x[index]`` for an index with integer arrays, as a view a write goes back through."""
    view, axis, arrays = _split(x, index)
    base, position = _linear(view, axis, arrays)
    return _gather(base, position, axis)


def _gather(base: Array, idx: Array, axis: int) -> Array:
    shadow = np.empty(gp.gathered_shape(base.type, idx.type, axis), base.dtype)
    return base.view(gp.gather, {"axis": axis}, shadow, (idx.value,))


def getitem(x: Array, index: Any) -> Array:
    """``x[index]`` with integer arrays: a copy (NumPy's advanced indexing)."""
    return Array.fresh(gather_view(x, index).value, x.weak)


def mask_write(x: Array, mask: Any, value: Any, request: str = "setitem") -> None:
    """``x[mask] = value`` for a boolean mask of ``x``'s leading axes and a value that broadcasts to
    ``x`` (a scalar, a row): ``x = where(mask, value, x)``."""
    mask = ops.asarray(mask)
    if mask.shape != x.shape[: mask.ndim]:
        raise tracing.user_error(
            IndexingError, f"boolean index of shape {mask.shape} does not match the array's {x.shape}"
        )
    since = len(tracing.current().ops)
    value = ops.asarray(value)
    m = ops.reshape(mask, mask.shape + (1,) * (x.ndim - mask.ndim))
    if value.ndim and value.shape != x.shape[mask.ndim :][-value.ndim :] and value.size != 1:
        raise tracing.user_error(
            ShapeError,
            f"x[mask] = v takes a v that broadcasts to each selected element (a scalar or a trailing "
            f"block of shape {x.shape[mask.ndim :]}), got {value.shape}: its number of rows would depend "
            "on the mask's values",
        )
    new = ops.where(m, ops.fit(value, x, "unsafe", "assignment"), x)
    x.write(new.value, request, since)


# ---- x.at[index] (JAX) --------------------------------------------------------------------------


class At:
    """``x.at``: JAX's functional updates. ``x.at[idx].set(v)`` is a new array (``x`` unchanged)."""

    def __init__(self, x: Array) -> None:
        self._x = x

    def __getitem__(self, index: Any) -> AtIndex:
        return AtIndex(self._x, index)


class AtIndex:
    def __init__(self, x: Array, index: Any) -> None:
        self._x, self._index = x, index

    def get(self) -> Array:
        return self._x[self._index]

    def set(self, v: Any, **options: Any) -> Array:
        return self._scatter(gp.scatter, v, options)

    def add(self, v: Any, **options: Any) -> Array:
        return self._scatter(gp.scatter_add, v, options)

    def mul(self, v: Any, **options: Any) -> Array:
        """Every repeat multiplies (the gradient w.r.t. ``v`` assumes unique indices, as JAX's)."""
        return self._scatter(gp.scatter_mul, v, options)

    multiply = mul

    def max(self, v: Any, **options: Any) -> Array:
        return self._scatter(gp.scatter_max, v, options)

    def min(self, v: Any, **options: Any) -> Array:
        return self._scatter(gp.scatter_min, v, options)

    def _unsupported(self, name: str) -> Any:
        def method(*args: Any, **kwargs: Any) -> Array:
            raise tracing.user_error(
                IndexingError,
                f"x.at[...].{name} is not supported yet; x.at[...].set, .add, .mul, .min, .max and .get are",
            )

        return method

    def __getattr__(self, name: str) -> Any:
        if name in ("divide", "power", "apply"):
            return self._unsupported(name)
        raise AttributeError(name)

    def _scatter(self, prim: Any, v: Any, options: dict[str, Any]) -> Array:
        """JAX's options: ``unique_indices`` and ``indices_are_sorted`` are hints (ignored);
        ``mode``: out-of-range indices clamp here (JAX's ``"clip"``), so ``"drop"`` and ``"fill"``
        raise."""
        mode = options.pop("mode", None)
        options.pop("unique_indices", None)
        options.pop("indices_are_sorted", None)
        if options or mode not in (None, "clip", "promise_in_bounds"):
            raise tracing.user_error(
                IndexingError,
                f"x.at[...] takes unique_indices, indices_are_sorted and mode='clip' (indices clamp); "
                f"got {dict(options, mode=mode) if mode else options}",
            )
        return scatter_into(ops.new_storage(self._x), self._index, v, prim, "at")


def scatter_into(x: Array, index: Any, v: Any, prim: Any, request: str) -> Array:
    """``x`` (written in place) with the updates ``v`` combined by ``prim`` at ``index``: the basic
    items as a view, the integer arrays as one scatter over the merged indexed axes."""
    if not has_index_arrays(index):
        index = _static_as_array(index)
    since = len(tracing.current().ops)
    view, axis, arrays = _split(x, index)
    base, position = _linear(view, axis, arrays)
    update = _fit(ops.asarray(v), gp.gathered_shape(base.type, position.type, axis), base.ir_dtype, request)
    out = ops.emit(prim, [base, update, position], {"axis": axis})
    new = ops.reshape(out, view.shape) if out.shape != view.shape else out
    view.write(new.value, request, since)
    return x


def _fit(v: Array, shape: tuple[int, ...], dtype: DType, request: str) -> Array:
    """The updates ``v`` broadcast to ``shape`` and cast to ``dtype`` (NumPy's unsafe casting)."""
    if v.shape != shape:
        if ops.broadcast_shapes(v.shape, shape) != shape:
            raise tracing.user_error(
                ShapeError, f"{request}: updates of shape {v.shape} do not broadcast to the indexed {shape}"
            )
        v = ops.broadcast_to(v, shape)
    return ops.cast(v, dtype) if v.ir_dtype is not dtype else v


def _static_as_array(index: Any) -> Any:
    """An index without integer arrays (``x.at[2]``, ``x.at[:, i]``): its first integer as a
    one-element array, a scatter of one slice."""
    items = list(index) if isinstance(index, tuple) else [index]
    for k, it in enumerate(items):
        static = isinstance(it, int | np.integer) and not isinstance(it, bool | np.bool_)
        if static or (isinstance(it, Array) and it.ndim == 0 and it.ir_dtype.is_int):
            items[k] = ops.reshape(ops.asarray(it), (1,))
            return tuple(items)
    raise tracing.user_error(
        IndexingError, "x.at[...] with slices only: index with integers or integer arrays"
    )


# ---- NumPy and PyTorch functions ------------------------------------------------------------------


def take(a: Any, indices: Any, axis: int | None = None, mode: str = "raise") -> Array:
    """``np.take``: out-of-range indices clamp after one wrap of negative ones (NumPy's default
    ``mode="raise"`` cannot raise in a compiled program; ``"clip"`` clamps as NumPy does, without
    the wrap; ``"wrap"`` takes them modulo the axis)."""
    a = ops.asarray(a)
    if axis is None:
        a, axis = ops.reshape(a, (-1,)), 0
    axis = ops.normalize_axes(axis, a.ndim)[0]
    idx = _as_index(indices)
    n = a.shape[axis]
    if mode not in ("raise", "wrap", "clip"):
        raise tracing.user_error(IndexingError, f"take: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    if mode == "wrap" and n:
        idx = ops.binary(ew.fmod, ops.binary(ew.add, ops.binary(ew.fmod, idx, n), n), n)
    elif mode == "clip":
        idx = ops.binary(ew.min_, ops.binary(ew.max_, idx, 0), max(n - 1, 0))
    return ops.emit(gp.gather, [a, idx], {"axis": axis})


def take_along_axis(arr: Any, indices: Any, axis: int | None) -> Array:
    """``np.take_along_axis``: ``out[..., k, ...] = arr[..., indices[..., k, ...], ...]`` (the other
    axes broadcast), one gather of the flattened array at row-major positions."""
    arr, idx = ops.asarray(arr), _as_index(indices)
    if axis is None:
        arr, axis = ops.reshape(arr, (-1,)), 0
    axis = ops.normalize_axes(axis, arr.ndim)[0]
    if idx.ndim != arr.ndim:
        raise tracing.user_error(
            ShapeError, f"take_along_axis: indices ({idx.shape}) and arr ({arr.shape}) need the same ndim"
        )
    out_shape = tuple(
        idx.shape[d] if d == axis else ops.broadcast_shapes((arr.shape[d],), (idx.shape[d],))[0]
        for d in range(arr.ndim)
    )
    full = tuple(arr.shape[axis] if d == axis else n for d, n in enumerate(out_shape))
    arr = ops.broadcast_to(arr, full) if arr.shape != full else arr
    idx = ops.broadcast_to(idx, out_shape) if idx.shape != out_shape else idx
    return ops.emit(gp.gather, [ops.reshape(arr, (-1,)), _along(full, idx, axis)], {"axis": 0})


def _along(full: tuple[int, ...], idx: Array, axis: int) -> Array:
    """The row-major positions in an array of shape ``full`` of ``idx``'s elements read along
    ``axis`` (element ``[..., k, ...]`` of ``idx`` names ``[..., idx[..., k, ...], ...]``)."""
    position = ops.binary(ew.mul, normalized(idx, full[axis]), math.prod(full[axis + 1 :]))
    for d in range(len(full)):
        if d != axis and idx.shape[d] > 1:
            iota = ops.emit(source.iota, [], {"shape": idx.shape, "dimension": d, "dtype": DType.i64})
            position = ops.binary(ew.add, position, ops.binary(ew.mul, iota, math.prod(full[d + 1 :])))
    return position


def put_along_axis(arr: Array, indices: Any, values: Any, axis: int | None, combine: Any = None) -> None:
    """``np.put_along_axis`` (in place, as NumPy): ``arr[..., indices[..., k, ...], ...] = values``;
    ``combine``: ``scatter_add`` to accumulate instead (repeated positions: the last write stays
    under ``scatter``, every one counts under ``scatter_add``)."""
    idx = _as_index(indices)
    if not isinstance(arr, Array):
        raise tracing.user_error(IndexingError, "put_along_axis writes into a traced array")
    if axis is None:  # NumPy: along the flattened array
        return put_along_axis(ops.reshape(arr, (-1,)), ops.reshape(idx, (-1,)), values, 0, combine)
    since = len(tracing.current().ops)
    axis = ops.normalize_axes(axis, arr.ndim)[0]
    if idx.ndim != arr.ndim or any(i > n for d, (i, n) in enumerate(zip(idx.shape, arr.shape)) if d != axis):
        raise tracing.user_error(
            ShapeError,
            f"put_along_axis/scatter_: indices of shape {idx.shape} do not fit along axis {axis} "
            f"of {arr.shape}",
        )
    v = ops.asarray(values)
    if v.ndim == idx.ndim and v.shape != idx.shape and all(a >= b for a, b in zip(v.shape, idx.shape)):
        v = ops.index_view(v, tuple(slice(0, n) for n in idx.shape))  # torch: the leading part of src
    update = _fit(v, idx.shape, arr.ir_dtype, "put_along_axis")
    flat = ops.reshape(arr, (-1,))
    out = ops.emit(combine or gp.scatter, [flat, update, _along(arr.shape, idx, axis)], {"axis": 0})
    arr.write(ops.reshape(out, arr.shape).value, "put_along_axis", since)


def index_add_(x: Array, *args: Any, alpha: Any = 1, **kwargs: Any) -> Array:
    """PyTorch's ``x.index_add_(dim, index, source, alpha=1)`` and Paddle's
    ``x.index_add_(index, axis, value)``: the rows of ``source`` added at ``index`` along the axis
    (repeated indices accumulate)."""
    if args and isinstance(args[0], int | np.integer):
        dim, index, src = _args(args, kwargs, ("dim", "index", "source"))
    else:
        index, dim, src = _args(args, kwargs, ("index", "axis", "value"))
    dim = ops.normalize_axes(dim, x.ndim)[0]
    if not (isinstance(alpha, int | float) and alpha == 1):
        src = ops.binary(ew.mul, ops.asarray(src), alpha)
    items = (slice(None),) * dim + (_as_index(index),)
    scatter_into(x, items, src, gp.scatter_add, "index_add_")
    return x


def _args(args: tuple[Any, ...], kwargs: dict[str, Any], names: tuple[str, ...]) -> list[Any]:
    out = list(args) + [kwargs.pop(n) for n in names[len(args) :] if n in kwargs]
    if len(out) != len(names) or kwargs:
        raise tracing.user_error(TypeError, f"takes ({', '.join(names)})")  # type: ignore[arg-type]
    return out


def scatter_(x: Array, dim: int, index: Any, src: Any = None, value: Any = None, reduce: Any = None) -> Array:
    """PyTorch's ``x.scatter_(dim, index, src)`` (or ``value=``): ``x[..., index[..., k, ...], ...]
    = src[..., k, ...]`` along ``dim`` (``put_along_axis``); ``reduce="add"`` accumulates."""
    if reduce not in (None, "add"):
        raise tracing.user_error(
            IndexingError, f"scatter_: reduce={reduce!r} is not supported (None or 'add')"
        )
    put_along_axis(x, index, value if src is None else src, dim, gp.scatter_add if reduce else None)
    return x


def masked_fill(x: Array, mask: Any, value: Any) -> Array:
    """PyTorch's ``masked_fill``: ``value`` where ``mask`` (broadcast to ``x``) holds."""
    return ops.where(mask, value, x)
