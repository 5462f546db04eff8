"""NumPy-named array functions for use inside compiled functions (``import dsl.numpy as dnp``).

Each is a composition of primitives through ``dsl.ops``; semantics (broadcasting, promotion, views)
follow NumPy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compiler.prims import elementwise as ew
from compiler.prims import reduction
from dsl import ops, tracing
from dsl.array import Array
from dsl.errors import ShapeError, TraceError

float32 = np.float32
float64 = np.float64
int32 = np.int32
int64 = np.int64
bool_ = np.bool_


def asarray(x: Any, dtype: Any = None) -> Array:
    a = ops.asarray(x)
    return astype(a, dtype) if dtype is not None else a


def astype(x: Any, dtype: Any) -> Array:
    try:
        ir_dtype = ops.DType.from_numpy(dtype)
    except TypeError as err:
        raise tracing.user_error(ShapeError, str(err)) from None
    return ops.new_storage(ops.cast(ops.asarray(x), ir_dtype))


# ---- arithmetic ----------------------------------------------------------------------------------


def add(x: Any, y: Any) -> Array:
    return ops.binary(ew.add, x, y)


def subtract(x: Any, y: Any) -> Array:
    return ops.binary(ew.sub, x, y)


def multiply(x: Any, y: Any) -> Array:
    return ops.binary(ew.mul, x, y)


def divide(x: Any, y: Any) -> Array:
    return ops.true_divide(x, y)


true_divide = divide


def floor_divide(x: Any, y: Any) -> Array:
    """``x // y`` (NumPy's floor division) for integer arrays."""
    dtype = ops.result_dtype(x, y)
    if not dtype.is_int:
        raise tracing.user_error(
            TraceError,
            f"floor division (//) of {dtype} values is not supported yet, only of integers; "
            "use divide (/) for floating-point values",
        )
    return ops.binary(ew.div, x, y, dtype)  # integer ``div`` floors, like NumPy


def remainder(x: Any, y: Any) -> Array:
    """``x % y`` (NumPy's remainder: the sign of ``y``) for integer arrays (``y != 0``)."""
    dtype = ops.result_dtype(x, y)
    if not dtype.is_int:
        raise tracing.user_error(
            TraceError,
            f"remainder (%) of {dtype} values is not supported yet, only of integers",
        )
    return subtract(x, multiply(floor_divide(x, y), y))


mod = remainder


def power(x: Any, y: Any) -> Array:
    negative = isinstance(y, (int, np.integer)) and not isinstance(y, bool) and y < 0
    if negative and not ops.result_dtype(x, y).is_float:  # NumPy's rule, for a known exponent
        raise tracing.user_error(ShapeError, "integers to negative integer powers are not allowed")
    return ops.binary(ew.pow_, x, y)


def maximum(x: Any, y: Any) -> Array:
    return ops.binary(ew.max_, x, y)


def minimum(x: Any, y: Any) -> Array:
    return ops.binary(ew.min_, x, y)


def negative(x: Any) -> Array:
    return ops.unary(ew.neg, x)


def abs(x: Any) -> Array:  # noqa: A001 (NumPy's name)
    return ops.unary(ew.abs_, x)


absolute = abs


def sign(x: Any) -> Array:
    return ops.unary(ew.sign, x)


def square(x: Any) -> Array:
    return multiply(x, x)


def reciprocal(x: Any) -> Array:
    x = ops.asarray(x)
    return ops.binary(ew.div, 1, x)


def clip(x: Any, lo: Any, hi: Any) -> Array:
    return minimum(maximum(x, lo), hi)


# ---- transcendental (ints are computed in float64, as in NumPy) -------------------------------------


def exp(x: Any) -> Array:
    return ops.unary(ew.exp, x, float_only=True)


def log(x: Any) -> Array:
    return ops.unary(ew.log, x, float_only=True)


def log1p(x: Any) -> Array:
    return ops.unary(ew.log1p, x, float_only=True)


def expm1(x: Any) -> Array:
    return ops.unary(ew.expm1, x, float_only=True)


def sqrt(x: Any) -> Array:
    return ops.unary(ew.sqrt, x, float_only=True)


def sin(x: Any) -> Array:
    return ops.unary(ew.sin, x, float_only=True)


def cos(x: Any) -> Array:
    return ops.unary(ew.cos, x, float_only=True)


def tan(x: Any) -> Array:
    return ops.unary(ew.tan, x, float_only=True)


def tanh(x: Any) -> Array:
    return ops.unary(ew.tanh, x, float_only=True)


# ---- comparison and logic ------------------------------------------------------------------------


def less(x: Any, y: Any) -> Array:
    return ops.binary(ew.lt, x, y)


def less_equal(x: Any, y: Any) -> Array:
    return ops.binary(ew.le, x, y)


def greater(x: Any, y: Any) -> Array:
    return ops.binary(ew.gt, x, y)


def greater_equal(x: Any, y: Any) -> Array:
    return ops.binary(ew.ge, x, y)


def equal(x: Any, y: Any) -> Array:
    return ops.binary(ew.eq, x, y)


def not_equal(x: Any, y: Any) -> Array:
    return ops.binary(ew.ne, x, y)


def logical_and(x: Any, y: Any) -> Array:
    return ops.binary(ew.and_, x, y, ops.DType.i1)


def logical_or(x: Any, y: Any) -> Array:
    return ops.binary(ew.or_, x, y, ops.DType.i1)


def logical_not(x: Any) -> Array:
    return ops.unary(ew.not_, ops.cast(ops.asarray(x), ops.DType.i1))


def where(cond: Any, x: Any, y: Any) -> Array:
    return ops.where(cond, x, y)


# ---- reductions -----------------------------------------------------------------------------------


def sum(x: Any, axis: Any = None, keepdims: bool = False) -> Array:  # noqa: A001
    return ops.sum(x, axis, keepdims)


def mean(x: Any, axis: Any = None, keepdims: bool = False) -> Array:
    return ops.mean(x, axis, keepdims)


def max(x: Any, axis: Any = None, keepdims: bool = False) -> Array:  # noqa: A001
    return ops.reduce(reduction.reduce_max, x, axis, keepdims)


def min(x: Any, axis: Any = None, keepdims: bool = False) -> Array:  # noqa: A001
    return ops.reduce(reduction.reduce_min, x, axis, keepdims)


amax, amin = max, min

# ---- linear algebra ---------------------------------------------------------------------------------


def matmul(x: Any, y: Any) -> Array:
    return ops.matmul(x, y)


def dot(x: Any, y: Any) -> Array:
    return ops.dot(x, y)


# ---- shapes -------------------------------------------------------------------------------------------


def transpose(x: Any, axes: Any = None) -> Array:
    return ops.transpose(x, axes)


def reshape(x: Any, shape: Any) -> Array:
    return ops.reshape(x, shape)


def expand_dims(x: Any, axis: Any) -> Array:
    x = ops.asarray(x)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    ndim = x.ndim + len(axes)
    new = ops.normalize_axes(axes, ndim)
    dims = iter(x.shape)
    return ops.reshape(x, tuple(1 if i in new else next(dims) for i in range(ndim)))


def squeeze(x: Any, axis: Any = None) -> Array:
    x = ops.asarray(x)
    if axis is None:
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
    else:
        axes = ops.normalize_axes(axis, x.ndim)
        for a in axes:
            if x.shape[a] != 1:
                raise ops.tracing.user_error(
                    ops.ShapeError,
                    f"cannot select an axis to squeeze out which has size not equal to one: {a}",
                )
    return ops.reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes))


def broadcast_to(x: Any, shape: Any) -> Array:
    return ops.broadcast_to(x, (shape,) if isinstance(shape, int) else shape)


def concatenate(xs: Any, axis: int = 0) -> Array:
    return ops.concatenate(xs, axis)


def stack(xs: Any, axis: int = 0) -> Array:
    return ops.stack(xs, axis)


def ravel(x: Any) -> Array:
    return ops.reshape(x, (-1,))


# ---- making arrays (NumPy's default dtype is float64) ---------------------------------------------------


def zeros(shape: Any, dtype: Any = np.float64) -> Array:
    return ops.full(shape, 0, dtype)


def ones(shape: Any, dtype: Any = np.float64) -> Array:
    return ops.full(shape, 1, dtype)


def full(shape: Any, fill_value: Any, dtype: Any = None) -> Array:
    return ops.full(shape, fill_value, dtype)


def zeros_like(x: Any, dtype: Any = None) -> Array:
    x = ops.asarray(x)
    return ops.full(x.shape, 0, dtype or x.dtype)


def ones_like(x: Any, dtype: Any = None) -> Array:
    x = ops.asarray(x)
    return ops.full(x.shape, 1, dtype or x.dtype)


def full_like(x: Any, fill_value: Any, dtype: Any = None) -> Array:
    x = ops.asarray(x)
    return ops.full(x.shape, fill_value, dtype or x.dtype)


def arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None) -> Array:
    return ops.arange(start, stop, step, dtype)
