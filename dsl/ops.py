"""NumPy semantics on traced arrays: promotion, broadcasting, indexing, reductions, views.

Everything here emits primitives; ``dsl.numpy``, ``dsl.nn`` and the array methods are thin layers on
top. Type promotion is NumPy's own (``np.result_type``, where Python scalars are weak); a traced
array made from a Python scalar argument stays weak like the scalar it came from.
"""

from __future__ import annotations

import builtins
import functools
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from compiler.ir.types import DType, is_supported_numpy_dtype
from compiler.prims import contraction, elementwise, movement, reduction, source
from compiler.prims.base import Primitive
from dsl import dynamic_index, gather, layout, tracing
from dsl.array import Array, Storage, argument_shadow, argument_strides
from dsl.errors import CastingError, DTypeError, IndexingError, ShapeError, TraceError
from dsl.scalar_args import ScalarOverflowError

Scalar = (bool, int, float)


# ---- making arrays ------------------------------------------------------------------------------


def emit(
    prim: Primitive,
    operands: Sequence[Array],
    attrs: dict[str, Any] | None = None,
    weak: bool = False,
    shadow: np.ndarray | None = None,
) -> Array:
    """Record ``prim`` on the operands' current values; the result owns a new storage, laid out as
    ``shadow`` (C order if ``None``: NumPy's layout for sources, reshape copies and matrix products)."""
    value = tracing.current().emit(prim, [a.value for a in operands], attrs)
    return Array.fresh(value, weak, shadow)


def emit_elementwise(
    prim: Primitive, operands: Sequence[Array], attrs: dict[str, Any] | None = None, weak: bool = False
) -> Array:
    """``emit`` for an elementwise primitive of operands of one shape (broadcast already): the result
    is laid out after them as a NumPy ufunc's (order K), so that reshaping it copies where NumPy does."""
    return emit(prim, operands, attrs, weak, ufunc_shadow(operands))


def ufunc_shadow(operands: Sequence[Array]) -> np.ndarray:
    """The shadow NumPy's ufuncs give the result of ``operands`` (of one shape)."""
    return layout.shadow(operands[0].shape, layout.ufunc_order([a._shadow for a in operands]))


def constant(value: Any, dtype: DType | None = None, weak: bool = False) -> Array:
    try:
        array = np.asarray(value, dtype=dtype.np if dtype else None)
    except OverflowError as e:  # a Python int past the dtype it meets (``int32_array + 2**40``)
        raise tracing.user_error(
            ScalarOverflowError,
            f"{e} (as NumPy 2's arithmetic raises OverflowError); make the array wider (int64) or the "
            "number smaller",
        ) from None
    if not is_supported_numpy_dtype(array.dtype):
        raise tracing.user_error(ShapeError, f"unsupported dtype {array.dtype} in a compiled function")
    # Laid out as the given array (a NumPy array from the caller's closure), as an argument would be.
    strides = argument_strides(array.shape, array.strides, array.itemsize)
    shadow = argument_shadow(array.shape, array.dtype, strides)
    return emit(source.constant, [], {"value": np.array(array, order="C")}, weak, shadow)


def asarray(x: Any) -> Array:
    """A traced array for ``x``: traced arrays pass through; Python scalars become weak constants."""
    if isinstance(x, Array):
        return x
    if isinstance(x, (np.ndarray, np.generic)):  # (first: NumPy's float64 scalar is a Python float too)
        return constant(x)
    if isinstance(x, Scalar):
        return constant(x, _default_dtype(x), weak=True)
    raise tracing.user_error(
        TraceError,
        f"cannot use a value of type {type(x).__name__} as an array in a compiled function; "
        "use NumPy arrays, Python numbers or dsl arrays",
    )


def assigned(value: Any, dtype: DType) -> Any:
    """``value`` as NumPy stores it by assignment (``x[i] = value``) into an array of ``dtype``: a
    float scalar (Python's or NumPy's) into an integer array goes through ``int()``, so NaN raises
    ValueError, an infinity or a number outside the dtype's range OverflowError (NumPy 2), where an
    array's cast would store the integer minimum (a Python float argument is checked on every call:
    ``dsl/scalar_args.py``); anything else is returned as it is."""
    if isinstance(value, Array) and value.weak and value.ir_dtype.is_float and dtype.is_int:
        tracing.current().assigned_floats[value.value] = dtype  # a Python float argument: checked per call
        return value
    floating = isinstance(value, float) or (isinstance(value, np.generic) and value.dtype.kind == "f")
    if not floating or not dtype.is_int:
        return value
    from dsl.scalar_args import int_of_float  # (scalar_args is imported after ops)

    return constant(int_of_float(float(value), dtype, "assignment"), dtype, weak=True)


def _default_dtype(x: bool | int | float) -> DType:
    if isinstance(x, bool):
        return DType.i1
    return DType.i64 if isinstance(x, int) else DType.f64


def _promotion_key(x: Any) -> Any:
    if isinstance(x, Array):
        if x.weak:  # a weak array promotes like a Python scalar of its kind
            return {"b": False, "i": 0, "f": 0.0}[x.dtype.kind]
        return x.dtype
    if isinstance(x, Scalar):
        return x
    if isinstance(x, (np.ndarray, np.generic)):
        return x.dtype
    return asarray(x)  # raises the unsupported-type error


def result_dtype(*xs: Any) -> DType:
    """NumPy's result dtype for mixing ``xs`` (NEP 50: Python scalars are weak)."""
    dt = np.result_type(*(_promotion_key(x) for x in xs))
    if not is_supported_numpy_dtype(dt):
        raise tracing.user_error(ShapeError, f"the result dtype {dt} is not supported by dslc")
    return DType.from_numpy(dt)


def to_dtype(x: Any, dtype: DType) -> Array:
    """``x`` as an array of ``dtype`` (Python scalars are made directly in it)."""
    if isinstance(x, Scalar):  # (weak only if a Python number: NumPy's scalars are typed)
        return constant(x, dtype, weak=is_weak(x))  # raises OverflowError where it does not fit, as NumPy 2
    x = asarray(x)
    note_narrowing(x, dtype)
    return cast(x, dtype)


def note_narrowing(x: Array, dtype: DType) -> None:
    """A weak integer (a Python int argument) converted to a narrower integer dtype where it meets an
    array: NumPy 2 raises OverflowError if the number does not fit, so each call checks that it does
    (``dsl.scalar_args``); the trace records which values need it."""
    if x.weak and x.ir_dtype.is_int and dtype.is_int and dtype.itemsize < x.ir_dtype.itemsize:
        trace = tracing.current()
        made = trace.ops[-1] if trace.ops else None
        if made is not None and made.prim is source.constant and made.results[0] is x.value:
            constant(made.attrs["value"].item(), dtype)  # a literal just made (x[i] = 2**40): raises now
        trace.narrowed[x.value] = dtype


def ir_dtype(dtype: Any) -> DType:
    """The IR dtype of a user's ``dtype`` (a NumPy dtype, type or name); one dslc lacks is a
    ``ShapeError`` at the user's line."""
    try:
        return DType.from_numpy(dtype)
    except TypeError as err:
        raise tracing.user_error(ShapeError, str(err)) from None


def cast(x: Array, dtype: DType) -> Array:
    if x.ir_dtype is dtype:
        return x
    return emit_elementwise(elementwise.cast, [x], {"dtype": dtype}, x.weak)


def can_cast(src: DType, dst: DType, casting: str) -> bool:
    return bool(np.can_cast(src.np, dst.np, casting=casting))  # type: ignore[arg-type]


def fit(x: Array, target: Array, casting: str, what: str) -> Array:
    """``x`` broadcast to ``target``'s shape and cast to its dtype (for writes into ``target``)."""
    note_narrowing(x, target.ir_dtype)
    if x.shape != target.shape:
        if broadcast_shapes(x.shape, target.shape) != target.shape:
            raise tracing.user_error(
                ShapeError,
                f"{what}: a value of shape {x.shape} cannot be written into an array of shape "
                f"{target.shape} (it does not broadcast to it)",
            )
        x = broadcast_to(x, target.shape)
    if not castable(x, target.ir_dtype, casting):
        raise tracing.user_error(
            CastingError,
            f"{what}: cannot write a {x.dtype} result into a {target.dtype} array in place "
            f"(casting rule '{casting}'); use .astype() first",
        )
    return cast(x, target.ir_dtype)


_KIND_ORDER = {"b": 0, "i": 1, "u": 1, "f": 2}


def castable(x: Array, target: DType, casting: str) -> bool:
    """Whether ``x`` may become ``target`` under NumPy's ``casting`` rule: a typed value by NumPy's
    ``can_cast``; a weak one (a Python number, or what is computed from them alone) by its kind, as a
    Python number adapts to any dtype of its kind or a wider one (``1`` into int8, ``1.5`` into
    float32, but not ``1.5`` into int32 unless ``casting='unsafe'``)."""
    if not x.weak:
        return can_cast(x.ir_dtype, target, casting)
    return casting == "unsafe" or _KIND_ORDER[x.dtype.kind] <= _KIND_ORDER[target.np.kind]


# ---- broadcasting --------------------------------------------------------------------------------


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0} - {1}
        if len(dims) > 1:
            listed = " ".join(str(s) for s in shapes)
            raise tracing.user_error(
                ShapeError, f"operands could not be broadcast together with shapes {listed}"
            )
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def broadcast_to(x: Any, shape: Sequence[int]) -> Array:
    """``x`` broadcast to ``shape``: ``x`` itself where it has that shape (an operand of an operation),
    else the read-only view of ``broadcast_view``."""
    x = asarray(x)
    shape = tuple(int(d) for d in shape)
    return x if x.shape == shape else broadcast_view(x, shape)


def broadcast_view(x: Any, shape: Sequence[int]) -> Array:
    """NumPy's ``broadcast_to``: a view of ``x`` (it sees later writes to ``x``), read-only because
    ``broadcast`` has no ``unview`` (a write through it raises, as in NumPy), even for ``x``'s own shape."""
    x = asarray(x)
    shape = tuple(int(d) for d in shape)
    if broadcast_shapes(x.shape, shape) != shape:
        raise tracing.user_error(ShapeError, f"cannot broadcast an array of shape {x.shape} to shape {shape}")
    return x.view_step(movement.broadcast, {"shape": shape}, np.broadcast_to(x._shadow, shape))


def _broadcast_all(xs: Sequence[Array]) -> list[Array]:
    shape = broadcast_shapes(*(x.shape for x in xs))
    return [broadcast_to(x, shape) for x in xs]


# ---- elementwise -----------------------------------------------------------------------------------


def float_of(dtype: DType) -> DType:
    """The float dtype a float function computes ``dtype`` in: itself, float64 for integers (as
    NumPy), float32 for bools (NumPy's float16, which dslc does not have)."""
    return dtype if dtype.is_float else DType.f64 if dtype.is_int else DType.f32


def unary(prim: Primitive, x: Any, float_only: bool = False) -> Array:
    x = asarray(x)
    if float_only:
        x = cast(x, float_of(x.ir_dtype))
    return emit_elementwise(prim, [x], weak=x.weak)


def binary(prim: Primitive, x: Any, y: Any, dtype: DType | None = None) -> Array:
    """Promote, broadcast and apply a two-operand elementwise primitive."""
    dtype = dtype or result_dtype(x, y)
    weak = is_weak(x) and is_weak(y)
    a, b = _broadcast_all([to_dtype(x, dtype), to_dtype(y, dtype)])
    return emit_elementwise(prim, [a, b], weak=weak)


def true_divide(x: Any, y: Any) -> Array:
    dtype = result_dtype(x, y)
    return binary(elementwise.div, x, y, dtype if dtype.is_float else DType.f64)


def where(cond: Any, x: Any, y: Any) -> Array:
    """``x`` where ``cond`` holds, else ``y``: weak where both are (JAX's ``where``; the condition's
    type does not matter)."""
    pred = cast(asarray(cond), DType.i1)
    dtype = result_dtype(x, y)
    p, a, b = _broadcast_all([pred, to_dtype(x, dtype), to_dtype(y, dtype)])
    return emit_elementwise(elementwise.select, [p, a, b], weak=is_weak(x) and is_weak(y))


def is_weak(x: Any) -> bool:
    """Whether ``x`` promotes as a Python scalar does (NEP 50): a Python number, or a weak array (a
    Python number passed as an argument, a loop's counter, what is computed from weak values only)."""
    if isinstance(x, Array):
        return x.weak
    return isinstance(x, Scalar) and not isinstance(x, np.generic)  # (NumPy's float64 is a float)


def keeps_weak(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (an elementwise function composed of others) with a weak result where its arguments
    are all weak, as JAX's weak types pass through its functions (``i % 2`` of a loop's
    counter added to a float32 carry keeps it float32): a composition may take in strong constants
    of the result's dtype (the zeros of ``remainder``'s float form) that would make it strong."""

    @functools.wraps(fn)
    def weak_where_its_arguments_are(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        if not all(is_weak(a) for a in (*args, *kwargs.values())):
            return out
        return tuple(weakness(o, True) for o in out) if isinstance(out, tuple) else weakness(out, True)

    return weak_where_its_arguments_are


def weakness(x: Array, weak: bool) -> Array:
    """``x`` (its storage: no copy) weak or typed: a composition's result of weak values only
    (``keeps_weak``), a Python number given a dtype explicitly (typed)."""
    return x if x.weak == weak else Array(x._storage, x._steps, x._shadow, weak, x.type)


# ---- reductions --------------------------------------------------------------------------------------


def normalize_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in axes:
        if not isinstance(a, (int, np.integer)) or isinstance(a, bool):
            raise tracing.user_error(TraceError, f"axis must be an int or a tuple of ints, got {a!r}")
        if not -ndim <= a < ndim:
            raise tracing.user_error(
                ShapeError, f"axis {a} is out of bounds for an array of dimension {ndim}"
            )
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise tracing.user_error(ShapeError, f"repeated axis in {axis}")
    return tuple(sorted(out))


def reduce(prim: Primitive, x: Any, axis: Any = None, keepdims: bool = False) -> Array:
    x = asarray(x)
    axes = normalize_axes(axis, x.ndim)
    out = emit(prim, [x], {"axes": axes}, shadow=_reduced_shadow(x, axes))
    if keepdims:
        out = reshape(out, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))
    return out


def _reduced_shadow(x: Array, axes: tuple[int, ...]) -> np.ndarray:
    """A reduction's result is laid out as the iterator orders ``x``'s axes, less the reduced ones."""
    kept = [a for a in layout.ufunc_order([x._shadow]) if a not in axes]
    rank = {a: i for i, a in enumerate(sorted(kept))}
    return layout.shadow(tuple(x.shape[a] for a in sorted(kept)), tuple(rank[a] for a in kept))


def sum(x: Any, axis: Any = None, keepdims: bool = False) -> Array:  # noqa: A001 (NumPy's name)
    x = asarray(x)
    if not x.ir_dtype.is_float and x.ir_dtype is not DType.i64:
        x = cast(x, DType.i64)  # NumPy sums bools and small ints in the default int
    return reduce(reduction.reduce_sum, x, axis, keepdims)


def count(x: Array, axis: Any = None) -> int:
    """How many elements a reduction over ``axis`` combines into each result."""
    return math.prod(x.shape[a] for a in normalize_axes(axis, x.ndim))


def mean(x: Any, axis: Any = None, keepdims: bool = False) -> Array:
    x = asarray(x)
    if not x.ir_dtype.is_float:
        x = cast(x, DType.f64)
    return true_divide(sum(x, axis, keepdims), count(x, axis))


# ---- views: reshape, transpose, indexing ---------------------------------------------------------------


def _resolve_shape(x: Array, shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    shape = [operator.index(d) for d in shape]
    if shape.count(-1) > 1:
        raise tracing.user_error(ShapeError, "can only specify one unknown dimension (-1)")
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1]))
        if known == 0 or x.size % known:
            raise tracing.user_error(
                ShapeError, f"cannot reshape an array of shape {x.shape} into {tuple(shape)}"
            )
        shape[shape.index(-1)] = x.size // known
    if int(np.prod(shape)) != x.size or any(d < 0 for d in shape):
        raise tracing.user_error(
            ShapeError, f"cannot reshape an array of shape {x.shape} into {tuple(shape)}"
        )
    return tuple(shape)


def reshape(x: Any, shape: Any, order: str = "C") -> Array:
    """A view when NumPy would give one (the shadow decides), else a copy. ``order="F"`` reads and
    writes the elements first index fastest: the reversed shape of the transpose, transposed."""
    x = asarray(x)
    if order == "F":
        shape = _resolve_shape(x, shape)
        return transpose(reshape(transpose(x), tuple(reversed(shape))))
    if order != "C":
        raise tracing.user_error(
            ShapeError,
            f"reshape: order must be 'C' or 'F', got {order!r} (NumPy's 'A' follows the argument's memory "
            "layout, which a compiled function does not depend on)",
        )
    shape = _resolve_shape(x, shape)
    if shape == x.shape:
        return Array(x._storage, x._steps, x._shadow, x.weak, x.type)
    try:
        shadow = np.reshape(x._shadow, shape, copy=False)
    except ValueError:  # NumPy would copy: the result owns new storage
        return emit(movement.reshape, [x], {"shape": shape}, x.weak)
    return x.view_step(movement.reshape, {"shape": shape}, shadow)


def transpose(x: Any, axes: Any = None) -> Array:
    x = asarray(x)
    perm = tuple(reversed(range(x.ndim))) if axes is None else tuple(operator.index(a) for a in axes)
    if sorted(a % max(x.ndim, 1) for a in perm) != list(range(x.ndim)) or len(perm) != x.ndim:
        raise tracing.user_error(ShapeError, f"axes {perm} don't match an array of shape {x.shape}")
    perm = tuple(a % x.ndim for a in perm)
    if perm == tuple(range(x.ndim)):
        return Array(x._storage, x._steps, x._shadow, x.weak, x.type)
    return x.view_step(movement.transpose, {"perm": perm}, x._shadow.transpose(perm))


def _index_items(x: Array, index: Any) -> list[Any]:
    items = list(index) if isinstance(index, tuple) else [index]
    for it in items:
        ok = it is None or it is Ellipsis or isinstance(it, slice)
        ok = ok or (isinstance(it, (int, np.integer)) and not isinstance(it, (bool, np.bool_)))
        ok = ok or dynamic_index.is_integer(it)  # a traced integer scalar: a dynamic slice
        if not ok:
            if isinstance(it, Array) and it.ir_dtype.is_bool:
                raise tracing.user_error(
                    TraceError,
                    "x[mask] with a boolean mask selects as many elements as the mask has True values, "
                    "which is not known at trace time (arrays have static shapes); keep the shape with "
                    "dsl.numpy.where(mask, x, 0), or reduce it: dsl.numpy.sum(dsl.numpy.where(mask, x, 0))",
                )
            kind = f"a traced {it.dtype} array" if isinstance(it, Array) else type(it).__name__
            raise tracing.user_error(
                IndexingError,
                f"only integers, slices (`:`), ellipsis (`...`), None and integer or boolean arrays "
                f"are valid indices; got {kind}",
            )
    if builtins.sum(it is Ellipsis for it in items) > 1:
        raise tracing.user_error(IndexingError, "an index can only have a single ellipsis ('...')")
    used = builtins.sum(it is not None and it is not Ellipsis for it in items)
    if used > x.ndim:
        raise tracing.user_error(
            IndexingError,
            f"too many indices for array: array is {x.ndim}-dimensional, but {used} were indexed",
        )
    fill = [slice(None)] * (x.ndim - used)
    # (``is``, not ``in``/``index``: those compare traced items with ``==``, which traces a comparison)
    at = next((k for k, it in enumerate(items) if it is Ellipsis), None)
    if at is not None:
        return items[:at] + fill + items[at + 1 :]
    return items + fill


def _is_bool_scalar(it: Any) -> bool:
    """A Python or NumPy bool, or a 0-d NumPy boolean array (NumPy reads it as the bool)."""
    return isinstance(it, (bool, np.bool_)) or (
        isinstance(it, np.ndarray) and it.shape == () and it.dtype == bool
    )


def _is_integer(it: Any) -> bool:
    """An index item picking one position: a Python or NumPy integer (not a bool), a 0-d NumPy
    integer array (an index array: ``gather``) or a traced integer."""
    if isinstance(it, np.ndarray):
        return it.shape == () and it.dtype.kind in "iu"
    return (isinstance(it, (int, np.integer)) and not _is_bool_scalar(it)) or dynamic_index.is_integer(it)


def _bool_scalar_view(x: Array, index: Any) -> Array:
    """``x[..., True, ...]`` / ``x[..., False, ...]``: NumPy reads a Python bool as a 0-d mask, one
    new axis for all of them, of length 1 (all True) or 0 (a False), where the first stands or, when
    integers and bools (all advanced indices then) are not side by side, first. The view with
    ``None`` there, moved and sliced to nothing as NumPy's."""
    items = list(index) if isinstance(index, tuple) else [index]
    if gather.has_index_arrays(index):
        raise tracing.user_error(
            IndexingError,
            "a Python bool index beside integer arrays: write the bool as None (True) or index with "
            "arrays only",
        )

    bools = [k for k, it in enumerate(items) if _is_bool_scalar(it)]
    advanced = [k for k, it in enumerate(items) if k in bools or _is_integer(it)]
    first = bools[0]
    rest = [None if k == first else it for k, it in enumerate(items) if k not in bools[1:]]
    view = index_view(x, tuple(rest))
    used = builtins.sum(it is not None and it is not Ellipsis for it in rest)
    axis = builtins.sum(
        x.ndim - used if it is Ellipsis else 0 if _is_integer(it) else 1 for it in rest[:first]
    )  # the result axis of the new one: what the items before it leave
    if advanced != list(range(advanced[0], advanced[-1] + 1)):
        order = [axis] + [k for k in range(view.ndim) if k != axis]
        view, axis = transpose(view, order), 0
    if not all(items[k] for k in bools):
        view = index_view(view, tuple(slice(0, 0) if k == axis else slice(None) for k in range(view.ndim)))
    return view


def index_view(x: Array, index: Any) -> Array:
    """The view ``x[index]`` (also when NumPy would return a scalar copy: setitem writes through it)."""
    if any(_is_bool_scalar(it) for it in (index if isinstance(index, tuple) else (index,))):
        return _bool_scalar_view(x, index)
    if gather.has_index_arrays(index):  # advanced indexing: a gather, written back by a scatter
        return gather.gather_view(x, index)
    items = _index_items(x, index)
    start, limit, stride, shape, slices = [], [], [], [], []
    windows: dict[int, dynamic_index.Window] = {}  # axes indexed by traced integers
    axis = 0
    for it in items:
        if it is None:
            shape.append(1)
            continue
        n = x.shape[axis]
        if dynamic_index.is_dynamic(it):  # the whole axis here, then the window of a dynamic slice
            windows[axis] = dynamic_index.window(it, n)
            s, lim, st = 0, n, 1
            if not windows[axis].integer:
                shape.append(windows[axis].size)
        elif isinstance(it, slice):
            if it.step == 0:
                raise tracing.user_error(IndexingError, "slice step cannot be zero (as in NumPy)")
            s, lim, st = it.indices(n)
            shape.append(len(range(s, lim, st)))
        else:
            if not -n <= it < n:
                raise tracing.user_error(
                    IndexingError, f"index {it} is out of bounds for axis {axis} with size {n}"
                )
            s, lim, st = int(it) % n, int(it) % n + 1, 1
        start.append(s)
        limit.append(lim)
        stride.append(st)
        slices.append(slice(s, None if lim < 0 else lim, st))
        axis += 1
    view = x
    if any((s, lim, st) != (0, n, 1) for s, lim, st, n in zip(start, limit, stride, x.shape)):
        attrs = {"start": tuple(start), "limit": tuple(limit), "stride": tuple(stride)}
        view = view.view_step(movement.slice_, attrs, x._shadow[tuple(slices)])
    if windows:
        view = dynamic_index.view(view, windows)
    shape_t = tuple(shape)
    if view.shape != shape_t:
        view = view.view_step(
            movement.reshape, {"shape": shape_t}, np.reshape(view._shadow, shape_t, copy=False)
        )
    return view


def ravel(x: Any) -> Array:
    """NumPy's ``ravel``: a view only of a C-contiguous array (a copy even where ``reshape(-1)``
    would give a view, e.g. of ``x[::2]``)."""
    x = asarray(x)
    flat = reshape(x, (-1,))
    return flat if x._shadow.flags.c_contiguous else new_storage(flat)


def selects_element(x: Array, index: Any) -> bool:
    """Whether ``x[index]`` is one element: an integer per axis (NumPy reads a scalar, a copy, and
    assigns only a scalar or a 0-d array there)."""
    items = index if isinstance(index, tuple) else (index,)
    return len(items) == x.ndim and all(_is_integer(it) for it in items)


def getitem(x: Array, index: Any) -> Array:
    if gather.has_index_arrays(index):
        return gather.getitem(x, index)
    view = index_view(x, index)
    items = index if isinstance(index, tuple) else (index,)
    # NumPy returns a scalar for one element, and indexes with a Python bool as a 0-d mask: copies,
    # not views. A traced integer stands for the Python or NumPy integer of the eager program (a
    # loop counter, an int argument, ``argmax``'s NumPy scalar), a basic index: ``row = c[i]`` is a
    # view that writes reach, both ways (it was a copy, as of a 0-d array: writes through a loop's
    # ``row`` were lost, found 2026-11-27)
    copied = any(_is_bool_scalar(it) for it in items)
    if selects_element(x, index) or copied:
        return Array.fresh(view.value, x.weak)
    return view


# ---- contraction ------------------------------------------------------------------------------------------


def matmul(a: Any, b: Any) -> Array:
    a, b = asarray(a), asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        raise tracing.user_error(
            ShapeError, "matmul: operands must have at least one dimension (use * for scalars)"
        )
    dtype = result_dtype(a, b)
    if dtype.is_bool:  # NumPy's bool matmul is an `or` of `and`s: the count of true products, != 0
        return cast(matmul(cast(a, DType.i64), cast(b, DType.i64)), DType.i1)
    a, b = cast(a, dtype), cast(b, dtype)
    a2 = reshape(a, (1,) + a.shape) if a.ndim == 1 else a
    b2 = reshape(b, b.shape + (1,)) if b.ndim == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        raise tracing.user_error(
            ShapeError,
            f"matmul: shapes {a.shape} and {b.shape} are not aligned: "
            f"{a2.shape[-1]} (last axis of the first) != {b2.shape[-2]} (the contracted axis of the second)",
        )
    if a.ndim == 1 and b.ndim == 1 and dtype.is_float:
        # a vector dot: a sum of products, accumulated as sums are (float32 in float64); as a one-row
        # matmul the products were added in float32 one after another (10x the error of NumPy's sdot)
        return reduce(reduction.reduce_sum, emit_elementwise(elementwise.mul, [a, b]))
    batch = broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    a3 = broadcast_to(a2, batch + a2.shape[-2:])
    b3 = broadcast_to(b2, batch + b2.shape[-2:])
    out = emit(contraction.matmul, [a3, b3], shadow=_matmul_shadow(a3, b3))
    shape = batch + (a2.shape[-2:-1] if a.ndim > 1 else ()) + (b2.shape[-1:] if b.ndim > 1 else ())
    return reshape(out, shape) if shape != out.shape else out


def _matmul_shadow(a: Array, b: Array) -> np.ndarray:
    """NumPy's matmul result (a gufunc's): the batch axes laid out as a ufunc's result over the
    operands' batch axes, the matrix axes innermost in C order."""
    nb = a.ndim - 2
    batch_only = [x._shadow[..., :1, :1] for x in (a, b)]  # unit matrix axes: ignored by the order
    batch_order = tuple(axis for axis in layout.ufunc_order(batch_only) if axis < nb)
    return layout.shadow(a.shape[:-1] + b.shape[-1:], batch_order + (nb, nb + 1))


def dot(a: Any, b: Any) -> Array:
    """``np.dot``: scalars multiply; otherwise contract the last axis of ``a`` with the second-to-last
    (or only) axis of ``b``. A Python number is an array of its default dtype here, not a weak
    scalar: NumPy's ``dot`` converts its operands with ``asarray`` (``dot(float32, 2.0)`` is float64)."""
    a, b = (constant(v, _default_dtype(v)) if isinstance(v, Scalar) else asarray(v) for v in (a, b))
    if a.ndim == 0 or b.ndim == 0:
        return binary(elementwise.mul, a, b)
    if b.ndim <= 2:
        return new_storage(matmul(a, b))  # np.dot's result is C-ordered (matmul's batch axes may not be)
    k = b.shape[-2]
    moved = transpose(b, (b.ndim - 2,) + tuple(i for i in range(b.ndim) if i != b.ndim - 2))
    flat = matmul(reshape(a, (-1, a.shape[-1])) if a.ndim > 1 else a, reshape(moved, (k, -1)))
    return reshape(flat, a.shape[:-1] + b.shape[:-2] + b.shape[-1:])


# ---- joining and making ---------------------------------------------------------------------------------


def concatenate(xs: Sequence[Any], axis: int = 0) -> Array:
    arrays = [asarray(x) for x in xs]
    if not arrays:
        raise tracing.user_error(ShapeError, "need at least one array to concatenate")
    if any(x.ndim == 0 for x in arrays):
        raise tracing.user_error(ShapeError, "zero-dimensional arrays cannot be concatenated")
    (ax,) = normalize_axes(axis, arrays[0].ndim)
    order = layout.concatenate_order([x._shadow for x in arrays])  # NumPy's, from the inputs as given
    dtype = result_dtype(*arrays)
    arrays = [cast(x, dtype) for x in arrays]
    for x in arrays[1:]:
        if x.ndim != arrays[0].ndim or any(
            d != e for i, (d, e) in enumerate(zip(x.shape, arrays[0].shape)) if i != ax
        ):
            raise tracing.user_error(
                ShapeError,
                f"concatenate: shapes {arrays[0].shape} and {x.shape} differ outside axis {ax}",
            )
    shape = arrays[0].shape[:ax] + (builtins.sum(x.shape[ax] for x in arrays),) + arrays[0].shape[ax + 1 :]
    if len(arrays) == 1:
        return Array.fresh(arrays[0].value, shadow=layout.shadow(shape, order))
    return emit(movement.concatenate, arrays, {"axis": ax}, shadow=layout.shadow(shape, order))


def stack(xs: Sequence[Any], axis: int = 0) -> Array:
    arrays = [asarray(x) for x in xs]
    if not arrays:
        raise tracing.user_error(ShapeError, "need at least one array to stack")
    if len({x.shape for x in arrays}) != 1:
        raise tracing.user_error(ShapeError, "stack: all input arrays must have the same shape")
    (ax,) = normalize_axes(axis, arrays[0].ndim + 1)
    expanded = [reshape(x, x.shape[:ax] + (1,) + x.shape[ax:]) for x in arrays]
    return concatenate(expanded, ax)


def full(shape: Any, value: Any, dtype: Any = None) -> Array:
    if isinstance(shape, Array) or (
        isinstance(shape, (tuple, list)) and any(isinstance(d, Array) for d in shape)
    ):
        raise tracing.user_error(
            TraceError,
            "a shape must be known at trace time (Python ints, such as x.shape[0]), not a traced "
            "value: arrays have static shapes",
        )
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
    if dtype is not None:
        ir = ir_dtype(dtype)
        fill = to_dtype(value, ir)
        fill = Array.fresh(fill.value)  # an explicit dtype makes the result strong
    elif isinstance(value, Scalar):
        fill = constant(value, _default_dtype(value))
    else:
        fill = asarray(value)
    return Array.fresh(broadcast_to(fill, shape).value)  # a writable array of its own, strong


def arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None) -> Array:
    if stop is None:
        start, stop = 0, start
    for v in (start, stop, step):
        if not isinstance(v, (int, float, np.integer, np.floating)):
            raise tracing.user_error(TraceError, "arange needs Python numbers (its length must be static)")
    n = max(0, int(np.ceil((stop - start) / step)))
    ir = ir_dtype(dtype) if dtype is not None else DType.from_numpy(np.result_type(start, stop, step))
    if ir.is_bool and n > 2:  # (NumPy's rule: only False, True follow one another)
        raise tracing.user_error(
            DTypeError,
            f"arange with dtype=bool is only supported for at most 2 elements (NumPy's rule); got {n}",
        )
    if not ir.is_float:  # NumPy's: the first two values in the dtype, then their difference repeated
        # (an integer out of the dtype's range raises OverflowError as NumPy's; a float truncates)
        first, second = (
            int(np.array(v, ir.np) if isinstance(v, (int, np.integer)) else np.array(v).astype(ir.np))
            for v in (start, start + step)
        )
        start, step = first, second - first  # (arange(0.5, 4, 1.5, dtype=int) is [0, 2, 4])
    idx = emit(source.iota, [], {"shape": (n,), "dimension": 0, "dtype": DType.i64})
    if (start, step) == (0, 1):
        return cast(idx, ir)
    work = ir if ir.is_float else DType.i64
    return cast(
        binary(elementwise.add, binary(elementwise.mul, cast(idx, work), step, work), start, work), ir
    )


def new_storage(x: Array, shadow: np.ndarray | None = None) -> Array:
    """A copy: same value, its own storage (writes to one are not seen by the other), laid out as
    ``shadow`` (C order if ``None``, as ``x.copy()``)."""
    return Array(Storage(x.value, copied=True), shadow=shadow, weak=x.weak)
