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
real strides over a one-byte buffer, never dereferenced) asks ``np.reshape(..., copy=False)``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from compiler.ir.core import Value
from compiler.ir.types import DType, TensorType
from compiler.prims.base import Primitive
from dsl import tracing
from dsl.errors import InplaceError, TraceError

ViewStep = tuple[Primitive, Mapping[str, Any]]

_ONE_BYTE = np.zeros(1, dtype=np.uint8)


def _contiguous_shadow(shape: tuple[int, ...]) -> np.ndarray:
    strides = []
    acc = 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(d, 1)
    return np.lib.stride_tricks.as_strided(_ONE_BYTE, shape, tuple(reversed(strides)))


class Storage:
    """One buffer of the eager program: its current SSA value and a version bumped by every write."""

    __slots__ = ("value", "version", "arg_name", "frozen")

    def __init__(self, value: Value, arg_name: str | None = None) -> None:
        self.value = value
        self.version = 0
        self.arg_name = arg_name  # set for function arguments
        self.frozen: str | None = None  # set by autodiff: why this storage must not be written


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
        self._shadow = shadow if shadow is not None else _contiguous_shadow(self._type.shape)
        self._view_value: Value | None = None
        self._view_version = -1
        self.weak = weak  # a Python scalar: promotes like NumPy's weak scalars

    @staticmethod
    def fresh(value: Value, weak: bool = False) -> Array:
        """A new array owning its own storage (the result of a computation)."""
        return Array(Storage(value), weak=weak)

    # ---- value and views -------------------------------------------------------------------

    @property
    def value(self) -> Value:
        """The SSA value of this array now (re-derived after a write to its storage)."""
        storage = self._storage
        if not self._steps:
            return storage.value
        if self._view_version != storage.version:
            v = storage.value
            trace = tracing.current()
            for prim, attrs in self._steps:
                v = trace.emit(prim, [v], attrs)
            self._view_value, self._view_version = v, storage.version
        assert self._view_value is not None
        return self._view_value

    def view(self, prim: Primitive, attrs: Mapping[str, Any], shadow: np.ndarray) -> Array:
        """A view of this array through one more view step."""
        out_type = prim.infer([self._type], attrs)[0]
        return Array(self._storage, self._steps + ((prim, attrs),), shadow, self.weak, out_type)

    def write(self, new: Value, request: str, since: int) -> None:
        """Make ``new`` the contents of this array (and so of its storage and every other view).

        ``request`` names the user's operation; ops recorded after index ``since`` computed ``new``.
        """
        storage = self._storage
        if storage.frozen:
            raise tracing.user_error(InplaceError, storage.frozen)
        trace = tracing.current()
        new = trace.mark_inplace(new, request, since)
        chain = [storage.value]
        for prim, attrs in self._steps[:-1]:
            chain.append(trace.emit(prim, [chain[-1]], attrs))
        written = new
        for (prim, attrs), base in zip(reversed(self._steps), reversed(chain)):
            assert prim.unview is not None, f"{prim.name} is not a view primitive"
            new = prim.unview(trace.emit_inplace(request), base, new, attrs)
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
    def T(self) -> Array:  # noqa: N802 (NumPy's name)
        return _ops.transpose(self)

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
            "use dsl.numpy.where for data-dependent choices, or pass the value as a static argument "
            "(static_argnums)",
        )

    def __bool__(self) -> bool:
        raise self._not_concrete("bool() (an `if`, `while`, `and`/`or` or `not` on an array)")

    def __int__(self) -> int:
        raise self._not_concrete("int()")

    def __float__(self) -> float:
        raise self._not_concrete("float()")

    def __index__(self) -> int:
        raise self._not_concrete("using an array as an index")

    def __array__(self, *args: object, **kwargs: object) -> np.ndarray:
        raise self._not_concrete("converting to a NumPy array")

    def __hash__(self) -> int:
        return id(self)

    # ---- indexing ----------------------------------------------------------------------------

    def __getitem__(self, index: object) -> Array:
        return _ops.getitem(self, index)

    def __setitem__(self, index: object, value: object) -> None:
        since = len(tracing.current().ops)
        target = _ops.index_view(self, index)
        new = _ops.fit(_ops.asarray(value), target, "unsafe", "assignment")
        target.write(new.value, "setitem", since)


from dsl import ops as _ops  # noqa: E402  (ops builds on Array; Array's methods call ops)

__all__ = ["Array", "Storage"]
