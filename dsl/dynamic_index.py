"""Indexing with traced integer scalars: ``c[i]``, ``c[i] = v``, ``c[i] += v``, ``c[i:i + k]``
(JAX's ``lax.dynamic_slice`` / ``lax.dynamic_update_slice``, ``compiler/prims/dynamic.py``).

An index item is *dynamic* when it is a 0-d integer traced array (a loop counter, a Python int
argument, a computed index) or a slice whose bounds are the same traced integer plus two Python
ints (``i:i + k``, ``i - 1:i + 2``): a window whose size is known at trace time. ``ops.index_view``
takes the static items as before, then views the dynamic axes through one ``dynamic_slice`` step;
a write through the view goes back through that step's ``unview``, a ``dynamic_update_slice``,
so in-place forms keep the eager program's semantics as static indices do.

Out-of-range positions are the primitives', as ``lax.dynamic_slice`` and ``dynamic_update_slice``
treat them: a negative start counts from the end once (``c[-1]`` is the last element, as in NumPy;
``c[-3:-1]`` the two before it), then it is clamped so that the window lies inside its axis (NumPy
would raise, which a traced index cannot do). ``c[i:i + k]`` is ``lax.dynamic_slice(c, (i,), (k,))``
and ``c[i] = v`` writes the clamped window (where JAX's ``c.at[i].set(v)`` would drop the write).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.ir.core import Op, Value
from compiler.ir.types import DType
from compiler.prims import dynamic, source
from compiler.prims import elementwise as ew
from dsl import gather, ops, tracing
from dsl.array import Array
from dsl.errors import IndexingError


@dataclass(frozen=True)
class Window:
    """The part of one axis a dynamic item selects: ``size`` elements from ``start`` (a 0-d integer
    array, clamped by the primitive); ``integer``: an integer index, whose axis the result drops."""

    start: Array
    size: int
    integer: bool


def is_integer(it: Any) -> bool:
    """A traced integer scalar used as an index (NumPy treats a 0-d integer array as an integer)."""
    return isinstance(it, Array) and it.ndim == 0 and it.ir_dtype.is_int


def is_dynamic(it: Any) -> bool:
    """An index item with a traced part: a traced integer, or a slice with a traced bound."""
    if isinstance(it, slice):
        return any(isinstance(b, Array) for b in (it.start, it.stop, it.step))
    return is_integer(it)


def window(it: Any, n: int) -> Window:
    """The window of the dynamic item ``it`` on an axis of ``n`` elements."""
    if is_integer(it):
        return Window(it, 1, True)
    if it.step is not None and not (isinstance(it.step, int | np.integer) and it.step == 1):
        raise _slice_error(it, "a slice with a traced bound takes no step")
    start, stop = it.start, it.stop
    size = _size(start, stop) if is_integer(start) and is_integer(stop) else None
    if size is not None and 0 <= size <= n:
        return Window(start, size, False)
    if size is not None:
        raise _slice_error(it, f"its {size} elements do not fit in an axis of {n}")
    raise _slice_error(
        it,
        "its size must be known at trace time, and its stop is not recognized as its start plus a "
        "Python int: compute the start once and write c[j:j + k] with a Python int k "
        "(j = 2 * i; c[j:j + 2])",
    )


def view(x: Array, windows: dict[int, Window]) -> Array:
    """``x`` viewed through the windows (axis -> window) of one ``dynamic_slice`` step."""
    trace = tracing.current()
    starts: list[Value] = []
    for axis in range(x.ndim):
        if axis in windows:
            starts.append(windows[axis].start.value)
            continue
        if trace.index_zero is None:
            trace.index_zero = ops.constant(0, DType.i64).value
        starts.append(trace.index_zero)  # the window spans this axis: its start clamps to 0
    sizes = tuple(windows[a].size if a in windows else d for a, d in enumerate(x.shape))
    shadow = x._shadow[tuple(slice(0, n) for n in sizes)]
    return x.view_step(dynamic.dynamic_slice, {"sizes": sizes}, shadow, tuple(starts))


def _size(start: Array, stop: Array) -> int | None:
    """``stop - start`` when both are the same traced integer plus Python ints (``i:i + 3`` -> 3,
    ``i - 1:i + 2`` -> 3), else ``None``. "The same": one value, or one computation traced twice
    (``c[2 * i:2 * i + 2]`` computes ``2 * i`` twice: two values, equal ops)."""
    producers: dict[Value, Op] = {}  # built on the first comparison that needs it

    def same(a: Value, b: Value) -> bool:
        if a is not b and not producers:
            producers.update((r, op) for op in tracing.current().ops for r in op.results)
        return gather.same_computation(a, b, producers=producers)

    # The usual ``i:i + k``: follow ``stop`` back to ``start``.
    v, offset = stop.value, 0
    while not same(v, start.value) and (step := _peeled(v)) is not None:
        v, offset = step[0], offset + step[1]
    if same(v, start.value):
        return offset
    base, low = start.value, 0
    while (step := _peeled(base)) is not None:
        base, low = step[0], low + step[1]
    return offset - low if same(base, v) else None


def _peeled(v: Value) -> tuple[Value, int] | None:
    """``v`` as ``(u, k)`` with ``v == u + k`` for a Python int ``k``, if the op that made ``v`` adds
    or subtracts a constant (or widens an integer: ``k = 0``); else ``None``."""
    op = _producer(v)
    if op is None:
        return None
    if op.prim is ew.cast and op.operands[0].type.dtype.is_int:
        widens = op.operands[0].type.dtype.itemsize <= v.type.dtype.itemsize  # a narrowing one may wrap
        return (op.operands[0], 0) if widens else None
    if op.prim not in (ew.add, ew.sub):
        return None
    x, y = op.operands
    if (k := _integer_constant(y)) is not None:
        return x, k if op.prim is ew.add else -k
    if (k := _integer_constant(x)) is not None and op.prim is ew.add:
        return y, k
    return None


def _producer(v: Value) -> Op | None:
    """The op of the current trace that computed ``v`` (most recent first: an index's bound is
    usually computed just before the index)."""
    for op in reversed(tracing.current().ops):
        if v in op.results:
            return op
    return None


def _integer_constant(v: Value) -> int | None:
    op = _producer(v)
    if op is None or op.prim is not source.constant or v.type.rank or not v.type.dtype.is_int:
        return None
    return int(op.attrs["value"])


def _slice_error(it: slice, why: str) -> IndexingError:
    return tracing.user_error(  # type: ignore[return-value]
        IndexingError,
        f"slice {_describe(it)} with a traced integer: {why} (the window's start may be traced, its "
        "size must be static, as in lax.dynamic_slice)",
    )


def _describe(it: slice) -> str:
    """The slice as the user wrote it, a traced bound shown as ``i`` (a stop ``k`` past a traced start
    as ``i + k``, one unrelated to it as ``j``: ``i:i`` would read as an empty slice)."""

    def bound(b: Any, traced: str) -> str:
        return traced if isinstance(b, Array) else "" if b is None else str(b)

    stop = "i"
    if isinstance(it.start, Array):
        size = _size(it.start, it.stop) if isinstance(it.stop, Array) else None
        stop = "j" if size is None else "i" if size == 0 else f"i + {size}" if size > 0 else f"i - {-size}"
    parts = [bound(it.start, "i"), bound(it.stop, stop), bound(it.step, "k")]
    return ":".join(parts if it.step is not None else parts[:2])
