"""The traced array: what a compiled function's body sees instead of a NumPy array.

An ``Array`` is a handle on a ``Storage`` (one per buffer a NumPy program would own: an argument or a
freshly computed result) plus the chain of view steps (slice, reshape, transpose) that leads from the
storage to this array. Mutation is functionalized while tracing, with exactly NumPy's semantics:

- writing through a view computes the new value of the view, then the new value of its storage by
  undoing each view step (each view primitive's ``unview`` rule), and bumps the storage's version;
- reading a view whose storage changed since the view last looked re-derives it from the storage.

The IR therefore stays pure SSA. The op that computed each written value carries the discardable
attribute ``dsl.inplace`` naming the user's request, which the in-place pass reads later.

Whether a ``reshape`` is a view or a copy follows NumPy: a *shadow* (a NumPy array with the view's
real strides over a one-element buffer, never dereferenced) asks ``np.reshape(..., copy=False)``.
An argument's shadow has the caller's array's strides (``argument_strides``, part of the signature),
so a Fortran-ordered or sliced argument gets NumPy's copies where a C-ordered one gets views. A
computed array's shadow has the layout NumPy would give it (``dsl.layout``): ``exp`` of a
Fortran-ordered argument is Fortran-ordered (NumPy's order K), so its ``reshape(-1)`` is a copy too.

A view step whose primitive has no ``unview`` (``broadcast``, as NumPy's ``broadcast_to``) makes
the view read-only: writing through it raises, as NumPy does.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from compiler.ir.core import Location, Value
from compiler.ir.types import DType, TensorType
from compiler.prims.base import Primitive
from dsl import layout, tracing
from dsl.errors import DTypeError, InplaceError, ReadOnlyError, ShapeError, TraceError

# A view step: the view primitive, its attributes and its operands after the base (a dynamic slice's
# starts: SSA values fixed when the view was made, as NumPy fixes a view's place).
ViewStep = tuple[Primitive, Mapping[str, Any], tuple[Value, ...]]
Strides = tuple[int, ...] | None  # an argument's strides in bytes; None: C order


def argument_strides(shape: tuple[int, ...], strides: tuple[int, ...] | None, itemsize: int) -> Strides:
    """What of an argument's memory layout NumPy's view-or-copy choices depend on: ``None`` for C
    order (``strides`` ``None``, an empty array, any strides along unit axes), else its byte strides
    (those of unit axes, never used, as 0). Part of the call signature: each layout traces apart."""
    if strides is None or 0 in shape:
        return None
    given = tuple(0 if n == 1 else s for n, s in zip(shape, strides, strict=True))
    c_order, acc = [], itemsize
    for n in reversed(shape):
        c_order.append(0 if n == 1 else acc)
        acc *= n
    return None if given == tuple(reversed(c_order)) else given


def argument_shadow(shape: tuple[int, ...], dtype: np.dtype, strides: Strides) -> np.ndarray:
    """The shadow of an argument with ``strides`` (``argument_strides``): the caller's array's strides
    and item size, so that NumPy's reshape answers for it exactly as for the caller's array."""
    if strides is None:
        return layout.shadow(shape)
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, strides, writeable=False)


def copy_keeping_strides(x: np.ndarray) -> np.ndarray:
    """A copy of ``x`` with ``x``'s own strides (where ``x.copy()`` would make it C-ordered), so that
    it traces as ``x`` does: a saved argument gets the same view-or-copy reshapes as ``x``."""
    if argument_strides(x.shape, x.strides, x.itemsize) is None:
        return x.copy()
    low = sum(s * (n - 1) for n, s in zip(x.shape, x.strides, strict=True) if s < 0)
    high = sum(s * (n - 1) for n, s in zip(x.shape, x.strides, strict=True) if s > 0) + x.itemsize
    memory = np.empty(high - low, np.uint8)
    out: np.ndarray = np.ndarray(x.shape, x.dtype, buffer=memory, offset=-low, strides=x.strides)
    out[...] = x
    return out


class Storage:
    """One buffer of the eager program: its current SSA value and a version bumped by every write."""

    __slots__ = ("value", "version", "arg_name", "frozen", "copied_at", "copied_in")

    def __init__(self, value: Value, arg_name: str | None = None, copied: bool = False) -> None:
        self.value = value
        self.version = 0
        self.arg_name = arg_name  # set for function arguments
        self.frozen: str | None = None  # set by autodiff: why this storage must not be written
        # a copy (``x.copy()``: ``ops.new_storage``) shares the SSA value of what it copies until its
        # first in-place request, which records the copy as an op (``Trace.copy_before``): where
        # the user made it
        self.copied_at: Location | None = tracing.current().location() if copied else None
        self.copied_in = tracing.current() if copied else None  # the trace (a body's own) of the copy


class Array:
    """A traced array with NumPy semantics and static shape and dtype."""

    __slots__ = ("_storage", "_steps", "_shadow", "_view_value", "_view_version", "_type", "weak")
    __array_priority__ = 1000  # NumPy arrays defer to our operators

    def __init__(
        self,
        storage: Storage,
        steps: tuple[ViewStep, ...] = (),
        shadow: np.ndarray | None = None,
        weak: bool = False,
        type: TensorType | None = None,
    ) -> None:
        self._storage = storage
        self._steps = steps
        self._type = type or storage.value.type
        self._shadow = shadow if shadow is not None else layout.shadow(self._type.shape)
        self._view_value: Value | None = None
        self._view_version = -1
        self.weak = weak  # a Python scalar: promotes like NumPy's weak scalars

    @staticmethod
    def fresh(value: Value, weak: bool = False, shadow: np.ndarray | None = None) -> Array:
        """A new array owning its own storage (the result of a computation), laid out as ``shadow``
        (C order if ``None``; ``dsl.layout`` has NumPy's rules for the others)."""
        return Array(Storage(value), shadow=shadow, weak=weak)

    # ---- value and views -------------------------------------------------------------------

    @property
    def value(self) -> Value:
        """The SSA value of this array now (re-derived after a write to its storage)."""
        storage = self._storage
        if not self._steps:
            return storage.value
        trace = tracing.current()
        # (a view first read inside a loop or branch body was derived there: outside it, that
        # value is sealed, and the view is derived again)
        if self._view_version != storage.version or self._view_value in trace.sealed:
            v = storage.value
            for prim, attrs, operands in self._steps:
                v = trace.emit(prim, [v, *operands], attrs)
            self._view_value, self._view_version = v, storage.version
        assert self._view_value is not None
        return self._view_value

    def view(self, dtype: Any = None) -> Array:
        """NumPy's ``x.view()``: a new array object over the same elements (writes through it change
        ``x``). ``x.view(other_dtype)``, which reinterprets the bytes, is not supported."""
        if dtype is not None and np.dtype(dtype) != np.dtype(self.dtype):
            raise tracing.user_error(
                DTypeError,
                f"x.view({np.dtype(dtype).name}) reinterprets the bytes of a {self.dtype} array, which a "
                "compiled function cannot; convert the values with x.astype(...) instead",
            )
        return Array(self._storage, self._steps, self._shadow, self.weak, self._type)

    def view_step(
        self, prim: Primitive, attrs: Mapping[str, Any], shadow: np.ndarray, operands: tuple[Value, ...] = ()
    ) -> Array:
        """A view of this array through one more view step (``operands``: the step's operands after
        the base)."""
        out_type = prim.infer([self._type, *(v.type for v in operands)], attrs)[0]
        step = (prim, attrs, operands)
        return Array(self._storage, self._steps + (step,), shadow, self.weak, out_type)

    def write(self, new: Value, request: str, since: int) -> None:
        """Make ``new`` the contents of this array (and so of its storage and every other view).

        ``request`` names the user's operation; ops recorded after index ``since`` computed ``new``.
        """
        storage = self._storage
        if storage.frozen:
            raise tracing.user_error(InplaceError, storage.frozen)
        readonly = [prim.name for prim, _, _ in self._steps if prim.unview is None]
        if readonly:
            raise tracing.user_error(
                ReadOnlyError,
                f"assignment destination is read-only: {request} writes into a read-only view (made "
                "by broadcast_to or diagonal, as NumPy's are); write into a copy instead (.copy())",
            )
        trace = tracing.current()
        if not trace.owns(storage.value):
            if trace.local is not None and storage.value not in trace.sealed:
                raise tracing.LiftCarry(storage)  # a body writes an enclosing array: one more carry
            raise tracing.user_error(
                TraceError,
                f"{request} writes into an array made inside the body of a loop or branch, after it: "
                "only what the body returns leaves it; return the array from the body",
            )
        if storage.copied_at is not None and storage.copied_in is trace and trace.is_request(request):
            # (not in a loop's or branch's body that writes a copy made outside it: the body's ops
            # would copy the whole array on each iteration, where the carry is written in place)
            # the request writes the user's copy, not the array it copied: its ops read the copy (an
            # op the optimizer keeps, ``simplify``), so its verdict is on the copy's memory
            copy = trace.copy_before(storage.value, since, storage.copied_at)
            new = copy if new is storage.value else new
            storage.value = copy
        storage.copied_at = storage.copied_in = None
        new = trace.mark_inplace(new, request, since)
        chain = [storage.value]
        for prim, attrs, operands in self._steps[:-1]:
            chain.append(trace.emit(prim, [chain[-1], *operands], attrs))
        written = new
        for (prim, attrs, operands), base in zip(reversed(self._steps), reversed(chain)):
            assert prim.unview is not None, f"{prim.name} is not a view primitive"
            new = prim.unview(trace.emit_inplace(request), base, new, attrs, *operands)
        storage.value = new
        storage.version += 1
        if self._steps:
            self._view_value, self._view_version = written, storage.version

    # ---- NumPy-like attributes ------------------------------------------------------------

    @property
    def type(self) -> TensorType:
        return self._type

    @property
    def shape(self) -> tuple[int, ...]:
        return self._type.shape

    @property
    def dtype(self) -> np.dtype:
        return self._type.dtype.np

    @property
    def ir_dtype(self) -> DType:
        return self._type.dtype

    @property
    def ndim(self) -> int:
        return self._type.rank

    @property
    def size(self) -> int:
        return self._type.size

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def T(self) -> Array:  # noqa: N802 (NumPy's name)
        return _ops.transpose(self)

    @property
    def mT(self) -> Array:  # noqa: N802 (NumPy 2's name)
        """The last two axes swapped (a view, as ``.T``): NumPy 2's and PyTorch's matrix transpose."""
        if self.ndim < 2:
            raise tracing.user_error(ShapeError, "matrix transpose with ndim < 2 is undefined")
        return _ops.transpose(self, (*range(self.ndim - 2), self.ndim - 1, self.ndim - 2))

    def __len__(self) -> int:
        if not self.shape:
            raise tracing.user_error(TraceError, "len() of a 0-d array")
        return self.shape[0]

    def __iter__(self) -> Iterator[Array]:
        if not self.shape:
            raise tracing.user_error(TraceError, "iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self) -> str:
        return f"dsl.Array({self._type})"

    # ---- what cannot be traced -------------------------------------------------------------

    def _not_concrete(self, what: str) -> TraceError:
        return tracing.user_error(  # type: ignore[return-value]
            TraceError,
            f"{what} needs the value of a traced array ({self._type}), which is not known at trace time; "
            "use dsl.numpy.where or dsl.cond for data-dependent choices, dsl.while_loop or dsl.fori_loop "
            "for data-dependent loops, or pass the value as a static argument (static_argnums)",
        )

    def __bool__(self) -> bool:
        raise self._not_concrete("bool() (an `if`, `while`, `and`/`or` or `not` on an array)")

    def __int__(self) -> int:
        raise self._not_concrete("int()")

    def __float__(self) -> float:
        raise self._not_concrete("float()")

    def __index__(self) -> int:
        raise self._not_concrete("using an array as an index")

    def item(self, *args: object) -> object:
        raise self._not_concrete("item()")

    def tolist(self) -> object:
        raise self._not_concrete("tolist()")

    def __array__(self, *args: object, **kwargs: object) -> np.ndarray:
        raise self._not_concrete("converting to a NumPy array")

    def __hash__(self) -> int:
        return id(self)

    # ---- indexing ----------------------------------------------------------------------------

    @property
    def at(self) -> _gather.At:
        """JAX's functional updates: ``x.at[idx].set(v)``, ``.add(v)``, ``.get()``."""
        return _gather.At(self)

    def __getitem__(self, index: object) -> Array:
        return _ops.getitem(self, index)

    def __setitem__(self, index: object, value: object) -> None:
        if _gather.has_traced_mask(index):  # x[mask] = v, x[mask] += v: a where
            return _gather.mask_write(self, index, value)
        since = len(tracing.current().ops)
        # (an index with integer arrays: a view only written through, whose scatter drops an update
        # outside the array, where a read of ``x[index]`` clamps)
        arrays = _gather.has_index_arrays(index)
        target = _gather.write_view(self, index) if arrays else _ops.index_view(self, index)
        if isinstance(value, Array) and _same_elements(value, target):
            # ``x[i] += v`` ends with ``x[i] = <the view x[i], updated in place>``: NumPy copies the
            # elements onto themselves; nothing changes, and no op is traced (the update stays in place)
            return None
        source = _ops.asarray(_ops.assigned(value, self.ir_dtype))
        # NumPy assigns a value with more axes than the target view when the extra leading ones have
        # size 1 (``x[0] = x[1:2]``): they are dropped before broadcasting. (One element takes only a
        # 0-d value.)
        lead = 0
        while source.ndim - lead > target.ndim and source.shape[lead] == 1:
            lead += 1
        if lead and not _ops.selects_element(self, index):
            source = _ops.reshape(source, source.shape[lead:])
        new = _ops.fit(source, target, "unsafe", "assignment")
        target.write(new.value, "setitem", since)


def _same_elements(a: Array, b: Array) -> bool:
    """Whether two arrays are views of one storage at the same elements in the same order: the same
    view steps (a dynamic window's start is an operand: the same value, not only the same layout)."""
    if a._storage is not b._storage or len(a._steps) != len(b._steps) or a.type != b.type:
        return False
    for (p, attrs, operands), (q, attrs2, operands2) in zip(a._steps, b._steps, strict=True):
        same_operands = len(operands) == len(operands2) and all(
            u is v for u, v in zip(operands, operands2, strict=True)
        )
        if p is not q or not same_operands or dict(attrs) != dict(attrs2):
            return False
    return a._shadow.__array_interface__ == b._shadow.__array_interface__


from dsl import gather as _gather  # noqa: E402  (x.at, x[mask] = v: dsl/gather.py)
from dsl import ops as _ops  # noqa: E402  (ops builds on Array; Array's methods call ops)

__all__ = ["Array", "Storage"]
