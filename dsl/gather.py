"""Indexing with integer arrays and writing through it: NumPy's advanced indexing (``x[idx]``,
``x[i, j]``, mixed with slices, ``None`` and an ellipsis), ``dnp.take``, ``dnp.take_along_axis``,
``x[idx] = v``, ``x[idx] += v``, boolean-mask writes (``x[mask] = v``, ``x[mask] += v``: a
``where``), JAX's ``x.at[idx].set/add/mul/min/max/get`` and PyTorch's ``index_add_`` and
``masked_fill_``; all on the ``gather`` / ``scatter`` / ``scatter_add`` primitives
(``compiler/prims/gather.py``).

An index with integer arrays is read as NumPy 2 reads it: ``None`` is a new unit axis, a constant
boolean mask its ``nonzero()`` integer arrays, integers among arrays are advanced indices too; the
slices are applied first as a view, the indexed axes (moved first when a slice or ``None`` parts
them, as NumPy does) are merged into one and read by one ``gather`` at the row-major position of
the broadcast indices (each wrapped once if negative, then clamped into its axis). NumPy's
``x[idx]`` is a copy; a write ``x[idx] = v`` is a ``scatter`` into ``x`` at positions of its own
(an update whose index is outside its axis is dropped; repeated indices: the last update stays, as
NumPy's in practice); ``x[idx] += v`` reads, adds and writes back (once per repeated index, as
NumPy), while ``x.at[idx].add(v)`` accumulates every repeat (JAX, ``np.add.at``).

A traced boolean mask selects a number of elements known only at run time: ``x[mask]`` is a
``Selection`` that can only be written back (``x[mask] op= v``, ``y[mask] = x[mask]``), each write
a ``where`` over the array; reading it raises ``dsl.TraceError``.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import numpy as np

from compiler.ir.core import Op, Value, attr_key
from compiler.ir.types import DType, TensorType
from compiler.prims import elementwise as ew
from compiler.prims import gather as gp
from compiler.prims import movement as mv
from compiler.prims import source
from dsl import layout, ops, tracing
from dsl.array import Array, Storage
from dsl.binding import CallError
from dsl.errors import CastingError, IndexingError, ShapeError, TraceError


def listed(it: list[Any]) -> np.ndarray:
    """A list index as NumPy reads it: an empty one is an empty integer array (``x[[]]``)."""
    a = np.asarray(it)
    return a.astype(np.int64) if a.size == 0 and a.dtype.kind == "f" else a


def is_index_array(it: Any) -> bool:
    """An integer array (traced, NumPy or a list) used as an index; a 0-d traced integer is a
    dynamic slice instead (``dsl/dynamic_index.py``), a 0-d NumPy one an index array, as NumPy
    reads it (``x[np.array(1)]`` is a copy of ``x[1]``)."""
    if isinstance(it, Array):
        return it.ndim > 0 and it.ir_dtype.is_int
    if isinstance(it, list):
        return listed(it).dtype.kind in "iu"
    return isinstance(it, np.ndarray) and it.dtype.kind in "iu"


def is_mask(it: Any) -> bool:
    """A boolean array used as an index (traced, NumPy or a list); a 0-d NumPy one is read as a
    Python bool (``ops.index_view``)."""
    if isinstance(it, Array):
        return it.ir_dtype.is_bool
    if isinstance(it, list):
        return bool(it) and np.asarray(it).dtype == np.bool_
    return isinstance(it, np.ndarray) and it.ndim > 0 and it.dtype == np.bool_


def _traced_mask(it: Any) -> bool:
    return isinstance(it, Array) and it.ir_dtype.is_bool


def has_index_arrays(index: Any) -> bool:
    """Whether ``index`` is NumPy's advanced indexing: it has an integer or a boolean array."""
    items = index if isinstance(index, tuple) else (index,)
    return any(is_index_array(it) or is_mask(it) for it in items)


def has_traced_mask(index: Any) -> bool:
    """Whether ``index`` has a traced boolean array (a selection whose size is the data's)."""
    items = index if isinstance(index, tuple) else (index,)
    return any(_traced_mask(it) for it in items)


def _as_index(it: Any) -> Array:
    a = ops.asarray(listed(it) if isinstance(it, list) else it)
    if not a.ir_dtype.is_int:
        raise tracing.user_error(IndexingError, f"an index array must hold integers, got {a.dtype}")
    return a


def _lands(i: Array, n: int) -> Array:
    """Where a scatter update at the index ``i`` lands on an axis of ``n`` (wrapped once if negative,
    then inside it; elsewhere the scatter drops it: ``compiler/prims/gather.py``'s rule)."""
    return Array.fresh(gp.lands_value(tracing.current().emit, i.value, n))


def normalized(i: Array, n: int) -> Array:
    """``i`` on an axis of ``n``, as the primitives read their indices (wrapped once if negative,
    clamped into ``[0, n - 1]``), as int64."""
    return Array.fresh(gp.clamped_value(tracing.current().emit, i.value, n))


def _width(it: Any) -> int:
    """How many axes of the indexed array the item ``it`` consumes."""
    if it is None or it is Ellipsis:
        return 0
    return it.ndim if isinstance(it, Array | np.ndarray) and is_mask(it) else 1


def _items(x: Array, index: Any) -> list[Any]:
    """The items of ``index`` with the ellipsis filled with full slices, so that each item but
    ``None`` consumes one axis of ``x``, or a traced mask its axes, in order; lists are NumPy arrays
    and a constant boolean mask is its ``nonzero()`` integer arrays (NumPy's rule)."""
    items = [
        listed(it) if isinstance(it, list) else it for it in (index if isinstance(index, tuple) else (index,))
    ]
    if sum(it is Ellipsis for it in items) > 1:
        raise tracing.user_error(IndexingError, "an index can only have a single ellipsis ('...')")
    used = sum(_width(it) for it in items)
    if used > x.ndim:
        raise tracing.user_error(
            IndexingError,
            f"too many indices for array: array is {x.ndim}-dimensional, but {used} were indexed",
        )
    at = next((k for k, it in enumerate(items) if it is Ellipsis), None)
    fill = [slice(None)] * (x.ndim - used)
    items = items[:at] + fill + items[at + 1 :] if at is not None else items + fill
    out: list[Any] = []
    axis = 0
    for it in items:
        if isinstance(it, np.ndarray) and it.dtype == np.bool_:
            if it.ndim == 0:
                raise tracing.user_error(IndexingError, "a 0-d boolean index (x[True]) is not supported")
            _check_mask(it.shape, x.shape[axis : axis + it.ndim], axis)
            out += [np.asarray(positions) for positions in it.nonzero()]
        else:
            out.append(it)
        axis += _width(it)
    return out


def _check_mask(mask: tuple[int, ...], axes: tuple[int, ...], axis: int) -> None:
    if mask != axes:
        raise tracing.user_error(
            IndexingError,
            f"boolean index of shape {mask} does not match the indexed array's axes {axes} "
            f"(from axis {axis})",
        )


def _split(x: Array, index: Any, known_in_bounds: bool = False) -> tuple[Array, int, list[Array]]:
    """``x[index]`` as (a view of ``x`` by the basic items, the axis of that view where the advanced
    items start, those items as integer arrays, one per consecutive axis). As NumPy: ``None`` is a
    new unit axis (a slice over it), and advanced items not next to each other (a slice or ``None``
    between them) put their axes first (the view is transposed so). ``known_in_bounds``: an index
    known at trace time out of its axis raises (NumPy's ``x[idx]``), instead of clamping."""
    items = _items(x, index)
    if known_in_bounds:
        _check_known_indices(x, items)
    if any(_traced_mask(it) for it in items):
        raise _selection_error("x.at[mask] with a traced boolean mask (as in JAX)")
    if any(it is None for it in items):
        shape, dims = [], iter(x.shape)
        for it in items:
            shape.append(1 if it is None else next(dims))
        x = ops.reshape(x, tuple(shape))
        items = [slice(None) if it is None else it for it in items]
    advanced = [k for k, it in enumerate(items) if not isinstance(it, slice)]
    basic = tuple(slice(None) if k in advanced else it for k, it in enumerate(items))
    view = ops.index_view(x, basic) if any(it != slice(None) for it in basic) else x
    axis = advanced[0]
    if advanced != list(range(axis, advanced[-1] + 1)):  # NumPy moves the indexed axes first
        view = ops.transpose(view, advanced + [d for d in range(view.ndim) if d not in advanced])
        axis = 0
    return view, axis, [_as_index(items[k]) for k in advanced]


def _check_known_indices(x: Array, items: list[Any]) -> None:
    """NumPy's ``IndexError`` for an item known at trace time (a Python int, a list or a NumPy
    array in the program) out of its axis of ``x``, as ``x[5]`` raises; traced index arrays cannot
    raise in a compiled program and clamp instead. ``items`` as ``_items`` gives them."""
    axis = 0
    for it in items:
        known = isinstance(it, int | np.integer) and not isinstance(it, bool | np.bool_)
        if known or (isinstance(it, np.ndarray) and it.dtype.kind in "iu"):
            n, positions = x.shape[axis], np.asarray(it)
            outside = positions[(positions < -n) | (positions >= n)]
            if outside.size:
                raise tracing.user_error(
                    IndexingError, f"index {outside.flat[0]} is out of bounds for axis {axis} with size {n}"
                )
        axis += _width(it)


def _linear(view: Array, axis: int, arrays: list[Array], drop: bool = False) -> tuple[Array, Array]:
    """The view with the indexed axes merged into one, and the row-major position the broadcast
    index arrays name in it (one array: itself, read by the gather's own wrap and clamp). ``drop``
    (a scatter's positions): where an index is outside its axis after one wrap, the position is
    outside the merged axis, so that the scatter drops the update as it drops one array's (JAX's
    ``.at[i, j]``); else each index clamps into its axis, as a read's."""
    if len(arrays) == 1:
        return view, arrays[0]
    shape = ops.broadcast_shapes(*(a.shape for a in arrays))
    dims = view.shape[axis : axis + len(arrays)]
    position: Array | None = None
    for a, n in zip(arrays, dims, strict=True):
        term = normalized(ops.broadcast_to(a, shape), n)
        position = term if position is None else ops.binary(ew.add, ops.binary(ew.mul, position, n), term)
    assert position is not None
    if drop:
        lands = [_lands(ops.broadcast_to(a, shape), n) for a, n in zip(arrays, dims, strict=True)]
        everywhere = functools.reduce(lambda p, q: ops.binary(ew.and_, p, q), lands)
        position = ops.where(everywhere, position, math.prod(dims))
    merged = view.shape[:axis] + (math.prod(dims),) + view.shape[axis + len(arrays) :]
    # a view step even where NumPy's reshape would copy (indexed axes moved first by a transpose): a
    # write through the gather goes back through it; a read copies anyway
    return view.view_step(mv.reshape, {"shape": merged}, layout.shadow(merged)), position


def gather_view(x: Array, index: Any, known_in_bounds: bool = True) -> Array:
    """``x[index]`` for an index with integer arrays, as a view a write goes back through; an index
    known at trace time out of range raises, as NumPy's (``known_in_bounds=False``: it clamps, as
    JAX's ``x.at[index].get()``)."""
    view, axis, arrays = _split(x, index, known_in_bounds)
    base, position = _linear(view, axis, arrays)
    return _gather(base, position, axis)


def write_view(x: Array, index: Any) -> Array:
    """The view ``x[index] = v`` writes through (an index with integer arrays): the gather at the
    positions the write's scatter takes, where an update whose index is outside its axis is dropped
    (several index arrays: a position outside the merged axis; ``_linear``). Only written, never read:
    a read clamps each index into its axis instead (``gather_view``)."""
    view, axis, arrays = _split(x, index, known_in_bounds=True)
    base, position = _linear(view, axis, arrays, drop=True)
    return _gather(base, position, axis)


def _gather(base: Array, idx: Array, axis: int) -> Array:
    shadow = np.empty(gp.gathered_shape(base.type, idx.type, axis), base.dtype)
    return base.view_step(gp.gather, {"axis": axis}, shadow, (idx.value,))


def getitem(x: Array, index: Any) -> Array:
    """``x[index]`` with integer arrays: a copy (NumPy's advanced indexing); with a traced boolean
    mask: a ``Selection``, whose shape depends on the data."""
    where = _mask_index(x, index)
    if where is not None:
        return Selection(where, where.view.value)
    return Array.fresh(gather_view(x, index).value, x.weak)


# ---- boolean masks: x[mask] = v, x[mask] += v ----------------------------------------------------


class _MaskIndex(NamedTuple):
    """An index with one traced boolean mask: ``x[index]`` selects the elements of ``view`` (``x`` by
    the index's other items, the mask's axes kept) where ``mask`` holds over its axes
    ``at, ..., at + mask.ndim - 1``; NumPy's result ``x[index]`` has one axis for the selected ones,
    at ``count_at`` of the other axes of the view (``rest``)."""

    view: Array
    mask: Array
    at: int
    count_at: int

    @property
    def rest(self) -> tuple[int, ...]:
        shape = self.view.shape
        return shape[: self.at] + shape[self.at + self.mask.ndim :]

    def lifted_mask(self) -> Array:
        shape = (1,) * self.at + self.mask.shape + (1,) * len(self.rest[self.at :])
        return ops.reshape(self.mask, shape)

    def lift(self, value: Any, request: str) -> Array:
        """``value``, which broadcasts to each selected element (NumPy broadcasts it against
        ``x[index]``), as an array of the view's rank: 1 along the mask's axes."""
        v = ops.asarray(value)
        n, shape = len(self.rest) + 1, v.shape
        while len(shape) > n and shape[0] == 1:  # NumPy drops a value's leading unit axes
            shape = shape[1:]
        shape = (1,) * (n - len(shape)) + shape
        others = shape[: self.count_at] + shape[self.count_at + 1 :]
        if (
            len(shape) > n
            or shape[self.count_at] != 1
            or ops.broadcast_shapes(others, self.rest) != self.rest
        ):
            raise tracing.user_error(
                ShapeError,
                f"{request}: x[mask] takes a value that broadcasts to each selected element (a scalar or "
                f"a block of shape {self.rest}), got {v.shape}: its number of selected elements would "
                "depend on the mask's values",
            )
        return ops.reshape(v, others[: self.at] + (1,) * self.mask.ndim + others[self.at :])


def _mask_index(x: Array, index: Any) -> _MaskIndex | None:
    """``index`` as a ``_MaskIndex`` if it has a traced boolean mask (with integers, slices,
    ``None`` and an ellipsis), else ``None``."""
    if not has_traced_mask(index):
        return None
    items = _items(x, index)
    masks = [k for k, it in enumerate(items) if _traced_mask(it)]
    if len(masks) > 1 or any(is_index_array(it) and not ops._is_integer(it) for it in items):
        raise _selection_error("a boolean mask together with other boolean or integer arrays")
    m = masks[0]
    mask = items[m]
    view = ops.index_view(x, tuple(items[:m] + [slice(None)] * mask.ndim + items[m + 1 :]))
    at = sum(it is None or isinstance(it, slice) for it in items[:m])
    _check_mask(mask.shape, view.shape[at : at + mask.ndim], at)
    # NumPy: integers are advanced indices too; not next to the mask, the selection's axis goes first
    group = [k for k, it in enumerate(items) if not (it is None or isinstance(it, slice))]
    count_at = at if group == list(range(group[0], group[-1] + 1)) else 0
    return _MaskIndex(view, mask, at, count_at)


def _selection_error(what: str = "x[mask] with a boolean mask", made_at: Any = None) -> TraceError:
    """The error of reading a selection; ``made_at``: the line of ``x[mask]`` (named first, the
    line reading it after), for a selection read later than it was made."""
    used = str(tracing.user_location())
    head = str(made_at) if made_at is not None else used
    later = f" (read at {used})" if head != used else ""
    return TraceError(
        f"{head}: {what} selects as many elements as the mask has True values, which is not known at "
        "trace time (arrays have static shapes); keep the shape with dsl.numpy.where(mask, x, 0), or "
        "reduce it: dsl.numpy.sum(dsl.numpy.where(mask, x, 0)) (writing works: x[mask] = v, x[mask] += "
        f"v, x[mask] = y[mask]){later}"
    )


class Selection(Array):
    """``x[mask]`` for a traced boolean mask: NumPy's copy of the selected elements, whose number
    is not known while tracing. It can only be written back: ``x[mask] += v`` (Python reads
    ``x[mask]``, adds in place, assigns it back) and ``y[mask] = x[mask]`` are ``where``s over the
    whole array. It is held as the whole view (the unselected elements are never read); any other
    use (its value, its shape, an operator) raises ``dsl.TraceError``."""

    __slots__ = ("where", "made_at")

    def __init__(self, where: _MaskIndex, full: Value, made_at: Any = None) -> None:
        super().__init__(Storage(full), weak=where.view.weak)
        self.where = where
        self.made_at = made_at or tracing.user_location()  # the line of ``x[mask]``: the mistake

    def _error(self) -> TraceError:
        return _selection_error(made_at=self.made_at)

    def whole(self) -> Array:
        """The whole view, updated where the mask holds."""
        return Array(self._storage)

    @property
    def value(self) -> Value:
        raise self._error()

    @property
    def type(self) -> TensorType:
        raise self._error()

    @property
    def shape(self) -> tuple[int, ...]:
        raise self._error()

    @property
    def ndim(self) -> int:
        raise self._error()

    @property
    def size(self) -> int:
        raise self._error()

    def __repr__(self) -> str:
        return f"dsl.Array(x[mask]: {self.dtype}, its length depends on the mask)"

    def augmented(self, request: str, fn: Any, v: Any) -> Selection:
        """``x[mask] op= v``: the operator over the whole view (NumPy's in-place casting)."""
        whole = self.whole()
        operand = _selected_alike(v, self.where) if isinstance(v, Selection) else self.where.lift(v, request)
        new = ops.fit(ops.asarray(fn(whole, operand)), whole, "same_kind", request)
        return Selection(self.where, new.value, self.made_at)


def _augmented(name: str) -> Any:
    def method(self: Selection, v: Any) -> Selection:
        from dsl.methods import AUGMENTED  # (dsl.methods imports this module)

        request, fn = AUGMENTED[name]
        return self.augmented(request, fn, v)

    method.__name__ = f"__{name}__"
    return method


for _name in (
    "iadd",
    "isub",
    "imul",
    "itruediv",
    "ifloordiv",
    "imod",
    "iand",
    "ior",
    "ixor",
    "ilshift",
    "irshift",
):
    setattr(Selection, f"__{_name}__", _augmented(_name))


def same_computation(a: Value, b: Value, depth: int = 8, producers: dict[Value, Op] | None = None) -> bool:
    """Whether ``a`` and ``b`` are the same computation: one value, or the results of the same
    primitive with the same attributes over the same values, up to ``depth`` ops back
    (``y[x < 0] = z[x < 0]`` traces ``x < 0`` twice; ``c[2 * i:2 * i + 2]`` ``2 * i``)."""
    if a is b:
        return True
    producers = producers or {r: op for op in tracing.current().ops for r in op.results}
    pa, pb = producers.get(a), producers.get(b)
    if depth == 0 or pa is None or pb is None or pa.prim is not pb.prim or pa.regions or pb.regions:
        return False
    if pa.results.index(a) != pb.results.index(b) or len(pa.operands) != len(pb.operands):
        return False
    if {k: attr_key(v) for k, v in pa.attrs.items()} != {k: attr_key(v) for k, v in pb.attrs.items()}:
        return False
    return all(
        same_computation(u, w, depth - 1, producers) for u, w in zip(pa.operands, pb.operands, strict=True)
    )


def _selected_alike(value: Selection, where: _MaskIndex) -> Array:
    """The whole view of ``value``, a selection by the same mask as ``where`` (the same computation)
    of a view of the same shape: element for element what ``where`` selects (``x[mask] = y[mask]``,
    ``x[mask] += x[mask]``)."""
    other = value.where
    alike = (other.view.type, other.at, other.count_at) == (where.view.type, where.at, where.count_at)
    if not (alike and same_computation(other.mask.value, where.mask.value)):
        raise _selection_error("x[mask] = y[other] with another mask or shape")
    return value.whole()


def mask_write(x: Array, index: Any, value: Any, request: str = "setitem") -> None:
    """``x[index] = value`` for an index with a traced boolean mask and a value that broadcasts to
    each selected element (a scalar, a row) or that is a selection by the same mask
    (``x[mask] += v``, ``x[mask] = y[mask]``): ``where`` over the view the mask indexes."""
    where = _mask_index(x, index)
    assert where is not None, "mask_write takes an index with a traced boolean mask"
    since = len(tracing.current().ops)
    view = where.view
    if isinstance(value, Selection):
        new_values = _selected_alike(value, where)
    else:
        new_values = where.lift(ops.assigned(value, x.ir_dtype), request)
    new = ops.where(where.lifted_mask(), ops.fit(new_values, view, "unsafe", "assignment"), view)
    view.write(new.value, request, since)


# ---- x.at[index] (JAX) --------------------------------------------------------------------------


# ``x.at[()].add(v)`` ... of a 0-d ``x``: the one element combined elementwise
_COMBINE = {gp.scatter_add: ew.add, gp.scatter_mul: ew.mul, gp.scatter_max: ew.max_, gp.scatter_min: ew.min_}


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
        """``x[idx]``, except that integer arrays known at trace time clamp too (JAX's gather)."""
        if has_index_arrays(self._index) and not has_traced_mask(self._index):
            return Array.fresh(gather_view(self._x, self._index, known_in_bounds=False).value, self._x.weak)
        return self._x[self._index]

    def set(self, v: Any, **options: Any) -> Array:
        return self._scatter(gp.scatter, v, options)

    def add(self, v: Any, **options: Any) -> Array:
        return self._scatter(gp.scatter_add, v, options)

    def mul(self, v: Any, **options: Any) -> Array:
        """Every repeat multiplies; the gradient w.r.t. ``v`` holds for repeated indices too (PyTorch's
        rule; JAX refuses them)."""
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
        ``mode``: an update out of range is dropped (JAX's default for a scatter, ``"drop"``, and
        ``"fill"``, ``"promise_in_bounds"``), or its indices clamp into their axes (``"clip"``)."""
        mode = options.pop("mode", None)
        options.pop("unique_indices", None)
        options.pop("indices_are_sorted", None)
        if options or mode not in (None, "drop", "fill", "clip", "promise_in_bounds"):
            raise tracing.user_error(
                IndexingError,
                "x.at[...] takes unique_indices, indices_are_sorted and mode ('drop', 'fill', "
                f"'promise_in_bounds': an update out of range is dropped; 'clip'); "
                f"got {dict(options, mode=mode) if mode else options}",
            )
        clip = mode == "clip"
        x = self._x
        whole = x.ndim == 0 and (self._index == () or self._index is Ellipsis)  # the one element
        if prim is gp.scatter:  # v cast to x's dtype (a Python int that does not fit raises)
            if whole:
                return ops.new_storage(_fit(ops.asarray(v), (), x.ir_dtype, "at"))  # never ``v`` itself
            return scatter_into(ops.new_storage(x), self._index, v, prim, "at", clip)
        # JAX combines in the promoted dtype, then casts back once (repeats too: int32 1 * 1.5 * 1.5
        # is 2); a Python int that does not fit x's dtype raises OverflowError, as ``x + v`` does
        work = ops.result_dtype(x, v)
        update = ops.to_dtype(v, work)
        if whole:
            out = ops.binary(_COMBINE[prim], ops.cast(x, work), update)
        else:
            promoted = ops.cast(x, work) if work is not x.ir_dtype else ops.new_storage(x)
            out = scatter_into(promoted, self._index, update, prim, "at", clip)
        return ops.cast(out, x.ir_dtype)


def scatter_into(x: Array, index: Any, v: Any, prim: Any, request: str, clip: bool = False) -> Array:
    """``x`` (written in place) with the updates ``v`` combined by ``prim`` at ``index``: the basic
    items as a view, the integer arrays as one scatter over the merged indexed axes. An update out
    of range is dropped, or, with ``clip`` (JAX's ``mode="clip"``), its indices clamp into their
    axes."""
    if not has_index_arrays(index):
        index = _static_as_array(x, index)
    since = len(tracing.current().ops)
    view, axis, arrays = _split(x, index)
    base, position = _linear(view, axis, arrays, drop=not clip)
    if clip and len(arrays) == 1:  # (one array is its own position: clamped here, not by the read)
        position = normalized(position, base.shape[axis])
    update = _fit(ops.asarray(v), gp.gathered_shape(base.type, position.type, axis), base.ir_dtype, request)
    out = ops.emit(prim, [base, update, position], {"axis": axis})
    new = ops.reshape(out, view.shape) if out.shape != view.shape else out
    view.write(new.value, request, since)
    return x


def _fit(v: Array, shape: tuple[int, ...], dtype: DType, request: str) -> Array:
    """The updates ``v`` broadcast to ``shape`` and cast to ``dtype`` (NumPy's unsafe casting; a
    Python int that does not fit ``dtype`` raises OverflowError, as NumPy's ``x[i] = 2**40``)."""
    ops.note_narrowing(v, dtype)
    if v.shape != shape:
        if ops.broadcast_shapes(v.shape, shape) != shape:
            raise tracing.user_error(
                ShapeError, f"{request}: updates of shape {v.shape} do not broadcast to the indexed {shape}"
            )
        v = ops.broadcast_to(v, shape)
    return ops.cast(v, dtype) if v.ir_dtype is not dtype else v


def _static_as_array(x: Array, index: Any) -> Any:
    """An index without integer arrays (``x.at[2]``, ``x.at[:, i]``, ``x.at[1:3]``): with an integer,
    itself (``_split`` reads each integer as a 0-d index array, whose axis the scatter drops, as
    NumPy's ``x[:, 1]`` does); with slices only, the first slice as the positions it selects along
    its axis (each once, so every combining rule is the basic-index update's)."""
    items = list(index) if isinstance(index, tuple) else [index]
    if any(ops._is_integer(it) for it in items):
        return index
    items, axis = _items(x, index), 0
    for k, it in enumerate(items):
        if isinstance(it, slice):
            items[k] = np.arange(x.shape[axis])[it]
            return tuple(items)
        axis += it is not None
    raise tracing.user_error(IndexingError, f"x.at[{index!r}] selects no axis of an array of shape {x.shape}")


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
    # one index per line (a label per row: cross-entropy) names each element at most once: its
    # gradient's scatter may then combine in parallel (gp.UNIQUE)
    attrs = {"axis": 0, **({gp.UNIQUE: True} if idx.shape[axis] == 1 else {})}
    return ops.emit(gp.gather, [ops.reshape(arr, (-1,)), _along(full, idx, axis)], attrs)


def _along(full: tuple[int, ...], idx: Array, axis: int, drop: bool = False) -> Array:
    """The row-major positions in an array of shape ``full`` of ``idx``'s elements read along
    ``axis`` (element ``[..., k, ...]`` of ``idx`` names ``[..., idx[..., k, ...], ...]``); each
    index clamps into its axis, or, with ``drop`` (a scatter's positions), one outside it after one
    wrap is a position outside the array, which the scatter drops (as ``_linear``'s)."""
    n = full[axis]
    position = ops.binary(ew.mul, normalized(idx, n), math.prod(full[axis + 1 :]))
    for d in range(len(full)):
        if d != axis and idx.shape[d] > 1:
            iota = ops.emit(source.iota, [], {"shape": idx.shape, "dimension": d, "dtype": DType.i64})
            position = ops.binary(ew.add, position, ops.binary(ew.mul, iota, math.prod(full[d + 1 :])))
    if drop:
        position = ops.where(_lands(idx, n), position, math.prod(full))
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
    position = _along(arr.shape, idx, axis, drop=True)
    out = ops.emit(combine or gp.scatter, [flat, update, position], {"axis": 0})
    arr.write(ops.reshape(out, arr.shape).value, "put_along_axis", since)


def index_add_(x: Array, *args: Any, **kwargs: Any) -> Array:
    """PyTorch's ``x.index_add_(dim, index, source, alpha=1)`` and Paddle's
    ``x.index_add_(index, axis, value)``: the rows of ``source`` added at ``index`` along the axis
    (repeated indices accumulate)."""
    dim, index, src, alpha = _index_add_args(args, kwargs)
    dim = ops.normalize_axes(dim, x.ndim)[0]
    if not (isinstance(alpha, int | float) and alpha == 1):
        src = ops.binary(ew.mul, ops.asarray(src), alpha)
    _accumulates_into(x, src, "index_add_")
    items = (slice(None),) * dim + (_as_index(index),)
    scatter_into(x, items, src, gp.scatter_add, "index_add_")
    return x


_TORCH_INDEX_ADD = ("dim", "index", "source", "alpha")
_PADDLE_INDEX_ADD = ("index", "axis", "value")


def _index_add_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """``(dim, index, source, alpha)`` of an ``index_add_`` call in PyTorch's form (an integer first,
    or its keywords ``dim``, ``source``, ``alpha``) or Paddle's (``index, axis, value``)."""
    torch_only = {"dim", "source", "alpha"} & kwargs.keys()
    paddle_only = {"axis", "value"} & kwargs.keys()
    first_is_dim = bool(args) and isinstance(args[0], int | np.integer) and not isinstance(args[0], bool)
    torch = bool(torch_only) or (first_is_dim and not paddle_only)
    names = _TORCH_INDEX_ADD if torch else _PADDLE_INDEX_ADD
    bound = dict(zip(names, args, strict=False))
    clash = bound.keys() & kwargs.keys()
    unknown = kwargs.keys() - set(names)
    missing = [n for n in names[:3] if n not in bound and n not in kwargs]
    if (torch_only and paddle_only) or len(args) > 3 or clash or unknown or missing:  # alpha: keyword
        given = ", ".join([type(a).__name__ for a in args] + [f"{k}=..." for k in kwargs])
        raise tracing.user_error(
            CallError,
            f"index_add_({given}): takes PyTorch's (dim, index, source, alpha=1) or Paddle's "
            "(index, axis, value), by position or by those keywords, one form or the other",
        )
    bound.update(kwargs)
    if torch:
        return bound["dim"], bound["index"], bound["source"], bound.get("alpha", 1)
    return bound["axis"], bound["index"], bound["value"], 1


def scatter_(x: Array, dim: int, index: Any, src: Any = None, value: Any = None, reduce: Any = None) -> Array:
    """PyTorch's ``x.scatter_(dim, index, src)`` (or ``value=``): ``x[..., index[..., k, ...], ...]
    = src[..., k, ...]`` along ``dim`` (``put_along_axis``); ``reduce="add"`` accumulates."""
    if reduce not in (None, "add"):
        raise tracing.user_error(
            IndexingError, f"scatter_: reduce={reduce!r} is not supported (None or 'add')"
        )
    if reduce:
        _accumulates_into(x, value if src is None else src, "scatter_(reduce='add')")
    put_along_axis(x, index, value if src is None else src, dim, gp.scatter_add if reduce else None)
    return x


def _accumulates_into(x: Array, src: Any, request: str) -> None:
    """An in-place accumulation of ``src`` into ``x`` follows NumPy's ``same_kind`` rule, as ``x +=
    src`` (``np.add.at``; PyTorch wants one dtype): float updates into an integer ``x`` raise, where
    each update cast to ``x``'s dtype before the sum would lose its fractions one by one."""
    v = ops.asarray(src)
    if not v.weak and not ops.can_cast(v.ir_dtype, x.ir_dtype, "same_kind"):
        raise tracing.user_error(
            CastingError,
            f"{request}: cannot accumulate {v.dtype} updates into an array of dtype {x.dtype} in place "
            "(casting rule 'same_kind', as x += v); use .astype() on the updates or the array first",
        )


def masked_fill(x: Array, mask: Any, value: Any) -> Array:
    """PyTorch's ``masked_fill``: ``value`` where ``mask`` (broadcast to ``x``) holds, in ``x``'s
    dtype (PyTorch's, in place or not); ``value`` converted as ``x[mask] = value`` stores it (a float
    into an integer ``x`` truncates; NaN, an infinity or a number out of range raises)."""
    return ops.where(mask, ops.to_dtype(ops.assigned(value, x.ir_dtype), x.ir_dtype), x)
