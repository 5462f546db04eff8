"""NumPy-named array functions for use inside compiled functions (``import dsl.numpy as dnp``).

Each is a composition of primitives through ``dsl.ops``; semantics (broadcasting, promotion, views)
follow NumPy.
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from compiler.ir.types import DType
from compiler.prims import elementwise as ew
from compiler.prims import reduction
from compiler.prims.base import Primitive
from dsl import layout, numpy_keywords, ops, pytree, tracing
from dsl.array import Array
from dsl.errors import DTypeError, MissingError, ShapeError, TraceError
from dsl.scalar_args import ScalarOverflowError


class _ScalarType(type):
    """``dsl.numpy``'s ``float32`` ... ``bool_``: a dtype wherever NumPy takes one (``np.dtype(dnp.float32)``,
    ``x.dtype == dnp.float32``, ``np.zeros(3, dnp.int32)``: its ``dtype`` attribute) and equal to
    NumPy's scalar type, and, called, a cast as ``jnp.float32(x)``: a traced array (or a list
    holding one) becomes an array of this dtype, anything else NumPy's scalar or array (JAX's
    ``_ScalarMeta``)."""

    dtype: np.dtype

    def __call__(cls, x: Any = 0) -> Any:
        if builtins.any(isinstance(leaf, Array) for leaf in pytree.flatten(x)[0]):
            return asarray(x, cls.dtype)
        try:
            return cls.dtype.type(x)
        except OverflowError as err:  # (NumPy's message, at the user's line)
            raise tracing.user_error(ScalarOverflowError, str(err)) from None

    def __eq__(cls, other: object) -> bool:
        return cls is other or other is cls.dtype.type

    def __hash__(cls) -> int:
        return hash(cls.dtype.type)

    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, cls.dtype.type)

    def __repr__(cls) -> str:
        return f"dsl.numpy.{cls.__name__}"


def _scalar_type(t: type[np.generic]) -> Any:
    return _ScalarType(np.dtype(t).name if t is not np.bool_ else "bool_", (), {"dtype": np.dtype(t)})


float32 = _scalar_type(np.float32)
float64 = _scalar_type(np.float64)
int32 = _scalar_type(np.int32)
int64 = _scalar_type(np.int64)
bool_ = _scalar_type(np.bool_)


def asarray(x: Any, dtype: Any = None) -> Array:
    """An array: strong even from a Python number (``np.asarray(5)`` is an int64 array, which
    promotes ``int32`` arrays to ``int64``; the number itself would not). A (nested) list or tuple
    holding traced arrays is stacked, as ``jnp.asarray`` does."""
    a = _from_sequence(x) if isinstance(x, (list, tuple)) else ops.asarray(x)
    if a.weak:
        a = Array(a._storage, a._steps, a._shadow, False, a.type)
    return astype(a, dtype) if dtype is not None else a


def array(x: Any, dtype: Any = None) -> Array:
    """``np.array``: as ``asarray``, but always a new array (writing to it leaves ``x`` unchanged)."""
    return ops.new_storage(asarray(x, dtype))


def _from_sequence(x: list[Any] | tuple[Any, ...]) -> Array:
    """Numbers only: NumPy's constant; with traced arrays: the items stacked (NumPy's shape rules,
    the promotion of ``stack``: Python numbers among them are weak, as in JAX)."""
    if not builtins.any(isinstance(leaf, Array) for leaf in pytree.flatten(x)[0]):
        return ops.asarray(np.asarray(x))
    if not x:
        raise tracing.user_error(ShapeError, "asarray: an empty list among traced arrays has no shape")
    return ops.stack([_from_sequence(e) if isinstance(e, (list, tuple)) else e for e in x])


def astype(x: Any, dtype: Any, copy: bool = True) -> Array:
    """``x.astype(dtype)``: a new array; with ``copy=False``, ``x`` itself where it has ``dtype``
    already (writing into the result then writes into ``x``, as in NumPy)."""
    ir_dtype = ops.ir_dtype(dtype)
    x = ops.asarray(x)
    if not copy and x.ir_dtype is ir_dtype:
        return x
    order = layout.like_order(x._shadow)  # astype's order K: the layout of np.empty_like(x)
    return ops.new_storage(ops.cast(x, ir_dtype), layout.shadow(x.shape, order))


# ---- arithmetic ----------------------------------------------------------------------------------


def _no_loop(ufunc: str) -> DTypeError:
    """NumPy's error for a ufunc without a loop for its operands' dtypes."""
    return tracing.user_error(  # type: ignore[return-value]
        DTypeError,
        f"ufunc '{ufunc}' not supported for the input types, and the inputs could not be safely "
        "coerced to any supported types according to the casting rule ''safe''",
    )


def _int8_of_bools(what: str) -> DTypeError:
    """The error for an operation NumPy computes on bools in int8, a dtype dslc does not have."""
    return tracing.user_error(  # type: ignore[return-value]
        DTypeError,
        f"{what} of bool values is int8 in NumPy, a dtype dslc does not have; "
        "cast the operands first, e.g. x.astype(dsl.int32)",
    )


def add(x: Any, y: Any) -> Array:
    dtype = ops.result_dtype(x, y)
    return ops.binary(ew.or_ if dtype.is_bool else ew.add, x, y, dtype)  # NumPy adds bools as `or`


def subtract(x: Any, y: Any) -> Array:
    dtype = ops.result_dtype(x, y)
    if dtype.is_bool:
        raise tracing.user_error(
            DTypeError,
            "numpy boolean subtract, the `-` operator, is not supported, use the bitwise_xor, "
            "the `^` operator, or the logical_xor function instead.",
        )
    return ops.binary(ew.sub, x, y, dtype)


def multiply(x: Any, y: Any) -> Array:
    dtype = ops.result_dtype(x, y)
    return ops.binary(ew.and_ if dtype.is_bool else ew.mul, x, y, dtype)  # bools multiply as `and`


def divide(x: Any, y: Any) -> Array:
    return ops.true_divide(x, y)


true_divide = divide


def _integral(x: Any) -> Array | None:
    """floor/ceil/trunc of integers and bools: the values themselves, as NumPy 2 (a new array)."""
    x = ops.asarray(x)
    return None if x.ir_dtype.is_float else ops.emit_elementwise(ew.copy, [x], weak=x.weak)


def floor(x: Any) -> Array:
    same = _integral(x)
    return same if same is not None else ops.unary(ew.floor, x)


def ceil(x: Any) -> Array:
    same = _integral(x)
    return same if same is not None else negative(floor(negative(x)))


def trunc(x: Any) -> Array:
    same = _integral(x)
    return same if same is not None else where(less(x, 0), ceil(x), floor(x))


def fmod(x: Any, y: Any) -> Array:
    """C's fmod (the sign of ``x``), as ``np.fmod``; 0 for an integer ``y`` of 0."""
    dtype = ops.result_dtype(x, y)
    if dtype.is_bool:
        raise _int8_of_bools("fmod")
    return ops.binary(ew.fmod, x, y, dtype)


def _float_divmod(x: Any, y: Any, dtype: DType) -> tuple[Array, Array]:
    """NumPy's ``npy_divmod``: floor division and remainder exactly as NumPy computes them."""
    a, b = ops.to_dtype(x, dtype), ops.to_dtype(y, dtype)
    mod = ops.binary(ew.fmod, a, b, dtype)
    has_mod = not_equal(mod, 0)
    adjust = logical_and(has_mod, not_equal(less(b, 0), less(mod, 0)))
    div = divide(subtract(a, mod), b)
    div = where(adjust, subtract(div, 1), div)
    pos, neg = np.asarray(0.0, dtype.np), np.asarray(-0.0, dtype.np)  # zeros of dtype (not weak)
    zero_like_b = where(less(b, 0), neg, pos)
    # The value: the zero of an exact multiple takes b's sign. The derivative is the same formula's
    # without that replacement (d/da 1, d/db -floor(a / b), JAX's), also at the multiples, where the
    # zero constant had none: the value minus (g - g) with one g behind stop_gradient, which is +0.0
    # (g taken as 0 where it is not finite: 1 % -inf is -inf) and keeps the zero's sign.
    carrier = where(adjust, add(mod, b), mod)
    carrier = where(isfinite(carrier), carrier, pos)
    value = where(adjust, add(mod, b), where(has_mod, mod, zero_like_b))
    mod = subtract(
        ops.unary(ew.stop_gradient, value), subtract(ops.unary(ew.stop_gradient, carrier), carrier)
    )
    low = floor(div)
    rounded = where(greater(subtract(div, low), 0.5), add(low, 1), low)
    quotient = divide(a, b)
    # npy_copysign(0, a / b): the zero takes the quotient's sign bit (-0.0 // 2.0 is -0.0), which
    # ``quotient < 0`` misses at -0.0; 1 / quotient has that sign (|quotient| < 1 here, never inf).
    floordiv = where(not_equal(div, 0), rounded, where(less(divide(1, quotient), 0), neg, pos))
    # Piecewise constant, so its derivative is 0 (JAX's floor_divide), also where b == 0 (a / b is
    # inf there, and its cotangent would be inf or NaN).
    return ops.unary(ew.stop_gradient, where(equal(b, 0), quotient, floordiv)), mod


@ops.keeps_weak
def floor_divide(x: Any, y: Any) -> Array:
    """``x // y`` as NumPy computes it (integers floor, 0 for ``y == 0``; floats through ``npy_divmod``)."""
    dtype = ops.result_dtype(x, y)
    if dtype.is_bool:
        raise _int8_of_bools("floor division (//)")
    if dtype.is_float:
        return _float_divmod(x, y, dtype)[0]
    return ops.binary(ew.div, x, y, dtype)  # integer ``div`` floors, like NumPy


@ops.keeps_weak
def remainder(x: Any, y: Any) -> Array:
    """``x % y`` as NumPy computes it: the sign of ``y``, 0 for an integer ``y`` of 0."""
    dtype = ops.result_dtype(x, y)
    if dtype.is_bool:
        raise _int8_of_bools("the remainder (%)")
    if dtype.is_float:
        return _float_divmod(x, y, dtype)[1]
    # NumPy's integer remainder: C's (the sign of x, 0 for y == 0), moved to y's sign when they differ.
    b = ops.to_dtype(y, dtype)
    mod = ops.binary(ew.fmod, x, b, dtype)
    return where(logical_and(not_equal(mod, 0), not_equal(less(b, 0), less(mod, 0))), add(mod, b), mod)


@ops.keeps_weak
def divmod(x: Any, y: Any) -> tuple[Array, Array]:
    dtype = ops.result_dtype(x, y)
    if dtype.is_float:  # one npy_divmod for both results
        return _float_divmod(x, y, dtype)
    return floor_divide(x, y), remainder(x, y)


mod = remainder


def power(x: Any, y: Any) -> Array:
    dtype = ops.result_dtype(x, y)
    weak_int = isinstance(y, int) or (  # (a NumPy integer is typed: bools ** np.int32(3) are int32)
        isinstance(y, Array) and y.weak and not y.ir_dtype.is_float  # a Python int passed as an argument
    )
    if dtype.is_bool or (isinstance(x, Array) and x.ir_dtype.is_bool and weak_int):
        raise _int8_of_bools("power (**)")  # (b ** 2: NumPy's square of bools, int8)
    if dtype.is_float and isinstance(y, (float, np.floating)) and y == 0.5:
        # NumPy's power loop takes a scalar exponent of 0.5 as sqrt: (-inf) ** 0.5 is NaN, and
        # (-0.0) ** 0.5 is -0.0 (C's pow gives inf and 0.0, as an exponent array of 0.5 does)
        return sqrt(ops.to_dtype(x, dtype))
    known = isinstance(y, (int, np.integer)) and not isinstance(y, bool)
    if known and y < 0 and not dtype.is_float:  # NumPy's rule, for a known exponent
        raise tracing.user_error(ShapeError, "integers to negative integer powers are not allowed")
    if dtype.is_float or known:
        return ops.binary(ew.pow_, x, y)
    # An integer exponent known only at run time may be negative, where NumPy raises (checking the
    # values) and the backends' loops differ: the truncated quotient ``1 / x**-y`` as ``reciprocal``
    # gives it (1 and -1 to the power, else 0; 0 the dtype's minimum), the same everywhere.
    a, b = ops.to_dtype(x, dtype), ops.to_dtype(y, dtype)
    below = less(b, 0)
    power = ops.binary(ew.pow_, a, where(below, zeros_like(b), b), dtype)
    odd = not_equal(bitwise_and(b, 1), 0)
    inverse = reciprocal(where(logical_and(equal(a, -1), logical_not(odd)), ones_like(a), a))
    return where(below, inverse, power)


def maximum(x: Any, y: Any) -> Array:
    return ops.binary(ew.max_, x, y)


def minimum(x: Any, y: Any) -> Array:
    return ops.binary(ew.min_, x, y)


def negative(x: Any) -> Array:
    x = ops.asarray(x)
    if x.ir_dtype.is_bool:
        raise tracing.user_error(
            DTypeError,
            "The numpy boolean negative, the `-` operator, is not supported, use the `~` operator or "
            "the logical_not function instead.",
        )
    return ops.unary(ew.neg, x)


def abs(x: Any) -> Array:  # noqa: A001 (NumPy's name)
    x = ops.asarray(x)
    if x.ir_dtype.is_bool:  # NumPy's absolute of bools: the same bools (a new array)
        return ops.emit_elementwise(ew.copy, [x], weak=x.weak)
    return ops.unary(ew.abs_, x)


absolute = abs


def sign(x: Any) -> Array:
    x = ops.asarray(x)
    if x.ir_dtype.is_bool:
        raise _no_loop("sign")
    return ops.unary(ew.sign, x)


def square(x: Any) -> Array:
    x = ops.asarray(x)
    if x.ir_dtype.is_bool:
        raise _int8_of_bools("square")
    return multiply(x, x)


@ops.keeps_weak
def reciprocal(x: Any) -> Array:
    """``1 / x`` in ``x``'s dtype. Integers as NumPy's loop (C's ``1.0 / x`` converted): truncated
    toward zero (1 and -1 keep themselves, every other nonzero value gives 0), and 0 the dtype's
    minimum (the conversion of inf on x86, as ``astype``)."""
    x = ops.asarray(x)
    if x.ir_dtype.is_bool:
        raise _int8_of_bools("reciprocal")
    if x.ir_dtype.is_float:
        return ops.binary(ew.div, 1, x)
    lowest = np.asarray(np.iinfo(x.dtype).min, x.dtype)
    unit = logical_or(equal(x, 1), equal(x, -1))
    return where(equal(x, 0), lowest, where(unit, x, zeros_like(x)))


def clip(
    x: Any,
    a_min: Any = None,
    a_max: Any = None,
    *,
    min: Any = None,  # noqa: A002 (NumPy 2's and PyTorch's names)
    max: Any = None,  # noqa: A002
) -> Array:
    """``np.clip``: ``minimum(maximum(x, lo), hi)``; a bound that is ``None`` is not applied (neither
    is a copy), and ``lo > hi`` gives ``hi``, as NumPy; where ``x`` equals a bound the result is the
    bound, except with two one-element bounds (NumPy's scalar loop), where it is ``x``. ``min``/``max``
    are NumPy 2's keyword names."""
    lo = a_min if a_min is not None else min
    hi = a_max if a_max is not None else max
    x = ops.asarray(x)
    if x.ir_dtype.is_int and lo is not None and hi is not None:
        # NumPy 2 drops a Python int bound past the dtype's range when the other bound is given
        # (nothing is beyond it); alone, such a bound raises OverflowError as in arithmetic
        info = np.iinfo(x.ir_dtype.np)
        if _python_int(lo) and lo < info.min:
            lo = None
        if _python_int(hi) and hi > info.max:
            hi = None
    if lo is not None and hi is not None and _size(lo) == 1 and _size(hi) == 1:
        # NumPy's clip with two one-element bounds keeps ``x`` where it equals a bound (``clip(-0.0,
        # 0.0, 1.0)`` is -0.0); of equal operands maximum/minimum give the second.
        return minimum(hi, maximum(lo, x))
    out = maximum(x, lo) if lo is not None else x
    out = minimum(out, hi) if hi is not None else out
    return out if out is not x else ops.emit_elementwise(ew.copy, [x], weak=x.weak)


def _size(v: Any) -> int:
    return v.size if isinstance(v, Array) else int(np.size(v))


def _python_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _rint(x: Array) -> Array:
    """Round half to even, as NumPy's ``rint``, from ``floor``: ``x - floor(x)`` is exact for every
    float (Sterbenz; a negative ``x`` above -2**-53 may give 1.0 where a tie at odd -1 rounds up
    alike), so comparing it with 0.5 decides. A zero result keeps ``x``'s sign (``rint(-0.4)`` is -0.0)."""
    low = floor(x)
    frac = subtract(x, low)
    odd = not_equal(fmod(low, 2), 0)
    up = logical_or(greater(frac, 0.5), logical_and(equal(frac, 0.5), odd))
    out = where(up, add(low, 1), low)
    return where(equal(out, 0), multiply(x, 0), out)


def round(x: Any, decimals: int = 0) -> Array:  # noqa: A001 (NumPy's name)
    """``np.round``: half to even at ``decimals`` digits, computed as NumPy does (``rint(x * 10**d) /
    10**d`` in ``x``'s dtype, or ``rint(x / 10**-d) * 10**-d`` for negative ``d``); integers round only
    for negative ``decimals``. Piecewise constant: its derivative is 0 (JAX's)."""
    x = ops.asarray(x)
    decimals = operator.index(decimals)
    if x.ir_dtype.is_bool:  # NumPy rounds bools in float16 (dslc's float32, ``ops.float_of``)
        x = ops.cast(x, ops.float_of(x.ir_dtype))  # (at any ``decimals``: NumPy raises past 0)
    if not x.ir_dtype.is_float:
        if decimals >= 0:
            return ops.emit_elementwise(ew.copy, [x], weak=x.weak)
        return _round_integer(x, 10 ** (-decimals))
    if decimals == 0:
        out = _rint(x)
    elif decimals > 0:
        out = divide(_rint(multiply(x, 10.0**decimals)), 10.0**decimals)
    else:
        out = multiply(_rint(divide(x, 10.0**-decimals)), 10.0**-decimals)
    return ops.unary(ew.stop_gradient, out)


around = round


def rint(x: Any) -> Array:
    x = ops.asarray(x)
    return ops.unary(ew.stop_gradient, _rint(ops.cast(x, ops.float_of(x.ir_dtype))))


def _round_integer(x: Array, step: int) -> Array:
    """Integers to the nearest multiple of ``step`` (a power of ten), ties to the even multiple, as
    NumPy computes it: in float64 (``rint(x / step) * step``), converted back like ``astype`` (an
    int64 past 2**53 rounds as its float64 does; a result past the dtype's range is its minimum)."""
    scaled = multiply(_rint(divide(ops.cast(x, ops.DType.f64), float(step))), float(step))
    return ops.cast(scaled, x.ir_dtype)


def isnan(x: Any) -> Array:
    x = ops.asarray(x)
    return not_equal(x, x) if x.ir_dtype.is_float else full(x.shape, False, bool_)


def isinf(x: Any) -> Array:
    x = ops.asarray(x)
    return equal(abs(x), np.inf) if x.ir_dtype.is_float else full(x.shape, False, bool_)


def isfinite(x: Any) -> Array:
    x = ops.asarray(x)
    return less(abs(x), np.inf) if x.ir_dtype.is_float else full(x.shape, True, bool_)


def nan_to_num(x: Any, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Array:
    """``np.nan_to_num`` (a new array): NaN to ``nan``, infinities to ``posinf``/``neginf`` (the
    dtype's largest finite values by default)."""
    x = ops.asarray(x)
    if not x.ir_dtype.is_float:
        return ops.emit_elementwise(ew.copy, [x], weak=x.weak)
    big = float(np.finfo(x.dtype).max)
    hi = big if posinf is None else posinf
    lo = -big if neginf is None else neginf
    out = where(isnan(x), nan, x)
    return where(equal(out, np.inf), hi, where(equal(out, -np.inf), lo, out))


# ---- transcendental (ints are computed in float64, as in NumPy) -------------------------------------


def exp(x: Any) -> Array:
    return ops.unary(ew.exp, x, float_only=True)


def log(x: Any) -> Array:
    return ops.unary(ew.log, x, float_only=True)


def log1p(x: Any) -> Array:
    return ops.unary(ew.log1p, x, float_only=True)


def expm1(x: Any) -> Array:
    return ops.unary(ew.expm1, x, float_only=True)


def cbrt(x: Any) -> Array:
    """The real cube root (negative for a negative ``x``); exact for perfect cubes."""
    return ops.unary(ew.cbrt, x, float_only=True)


def copysign(x1: Any, x2: Any) -> Array:
    """``x1``'s magnitude with ``x2``'s sign bit (``-0.0`` and a NaN's sign count), in a float dtype."""
    return _float_binary(ew.copysign, x1, x2)


def signbit(x: Any) -> Array:
    """Whether the sign bit is set: true for ``-0.0`` and negative NaNs, as NumPy's."""
    x = ops.asarray(x)
    if x.ir_dtype.is_bool:
        return zeros_like(x, dtype=np.bool_)
    if not x.ir_dtype.is_float:
        return less(x, 0)
    return less(copysign(np.asarray(1, x.ir_dtype.np), x), 0)


def sqrt(x: Any) -> Array:
    return ops.unary(ew.sqrt, x, float_only=True)


def sin(x: Any) -> Array:
    return ops.unary(ew.sin, x, float_only=True)


def cos(x: Any) -> Array:
    return ops.unary(ew.cos, x, float_only=True)


def tan(x: Any) -> Array:
    return ops.unary(ew.tan, x, float_only=True)


def arcsin(x: Any) -> Array:
    return ops.unary(ew.asin, x, float_only=True)


def arccos(x: Any) -> Array:
    return ops.unary(ew.acos, x, float_only=True)


def arctan(x: Any) -> Array:
    return ops.unary(ew.atan, x, float_only=True)


def sinh(x: Any) -> Array:
    return ops.unary(ew.sinh, x, float_only=True)


def cosh(x: Any) -> Array:
    return ops.unary(ew.cosh, x, float_only=True)


def arcsinh(x: Any) -> Array:
    return ops.unary(ew.asinh, x, float_only=True)


def arccosh(x: Any) -> Array:
    return ops.unary(ew.acosh, x, float_only=True)


def arctanh(x: Any) -> Array:
    return ops.unary(ew.atanh, x, float_only=True)


def log2(x: Any) -> Array:
    return ops.unary(ew.log2, x, float_only=True)


def log10(x: Any) -> Array:
    return ops.unary(ew.log10, x, float_only=True)


def exp2(x: Any) -> Array:
    """``2 ** x`` (libm's ``pow``), in ``x``'s float dtype (float64 for integers, as NumPy)."""
    x = ops.asarray(x)
    return ops.binary(ew.pow_, 2, x, ops.float_of(x.ir_dtype))


def _float_binary(prim: Primitive, x: Any, y: Any) -> Array:
    """A float function of two operands, promoted as NumPy promotes (``ops.float_of``)."""
    return ops.binary(prim, x, y, ops.float_of(ops.result_dtype(x, y)))


def arctan2(y: Any, x: Any) -> Array:
    """The angle of the point ``(x, y)``, in [-pi, pi] (C's ``atan2``: signed zeros and infinities
    as NumPy's)."""
    return _float_binary(ew.atan2, y, x)


def hypot(x: Any, y: Any) -> Array:
    """``sqrt(x**2 + y**2)`` without overflow or underflow in the squares (C's ``hypot``)."""
    return _float_binary(ew.hypot, x, y)


# NumPy 2's array-API names
asin, acos, atan, asinh, acosh, atanh, atan2 = arcsin, arccos, arctan, arcsinh, arccosh, arctanh, arctan2


def tanh(x: Any) -> Array:
    return ops.unary(ew.tanh, x, float_only=True)


def logaddexp(x: Any, y: Any) -> Array:
    """``log(exp(x) + exp(y))`` without overflow: ``max(x, y) + log1p(exp(-|x - y|))``. Equal
    arguments take a gap of 0 (two equal infinities give themselves, not ``inf - inf``), which also
    gives each the derivative 1/2 there (maximum's tie rule; the gap's is 0)."""
    dtype = ops.float_of(ops.result_dtype(x, y))
    a, b = ops.to_dtype(x, dtype), ops.to_dtype(y, dtype)
    gap = where(equal(a, b), 0, subtract(a, b))
    return add(maximum(a, b), log1p(exp(negative(abs(gap)))))


# ---- comparison and logic ------------------------------------------------------------------------


def _compare(prim: Primitive, x: Any, y: Any) -> Array:
    """NumPy 2 compares a Python int with an integer array exactly, also outside the array's range
    (``int32_array < 2**40`` is all True, no OverflowError): such a comparison runs in int64."""
    dtype = ops.result_dtype(x, y)
    if dtype is DType.i32 and builtins.any(_may_exceed_int32(v) for v in (x, y)):
        dtype = DType.i64
    return ops.binary(prim, x, y, dtype)


def _may_exceed_int32(v: Any) -> bool:
    """A Python int beyond int32, or a weak integer (a Python int argument: its value is not known)."""
    if isinstance(v, Array):
        return v.weak and v.ir_dtype.is_int
    info = np.iinfo(np.int32)
    return _python_int(v) and not info.min <= v <= info.max


def less(x: Any, y: Any) -> Array:
    return _compare(ew.lt, x, y)


def less_equal(x: Any, y: Any) -> Array:
    return _compare(ew.le, x, y)


def greater(x: Any, y: Any) -> Array:
    return _compare(ew.gt, x, y)


def greater_equal(x: Any, y: Any) -> Array:
    return _compare(ew.ge, x, y)


def equal(x: Any, y: Any) -> Array:
    return _compare(ew.eq, x, y)


def not_equal(x: Any, y: Any) -> Array:
    return _compare(ew.ne, x, y)


def logical_and(x: Any, y: Any) -> Array:
    return ops.binary(ew.and_, x, y, ops.DType.i1)


def logical_or(x: Any, y: Any) -> Array:
    return ops.binary(ew.or_, x, y, ops.DType.i1)


def logical_not(x: Any) -> Array:
    return ops.unary(ew.not_, ops.cast(ops.asarray(x), ops.DType.i1))


def logical_xor(x: Any, y: Any) -> Array:
    return ops.binary(ew.xor, x, y, ops.DType.i1)


# ---- bitwise (integers and bools; on bools they are the logical operations, as in NumPy) -------------


_INTEGER_ONLY = frozenset({ew.shift_left, ew.shift_right})  # NumPy shifts bools into int8 (no IR type)


def _bitwise(ufunc: str, prim: Primitive, x: Any, y: Any) -> Array:
    dtype = ops.result_dtype(x, y)
    if dtype.is_float:
        raise _no_loop(ufunc)
    if dtype.is_bool and prim in _INTEGER_ONLY:
        raise _int8_of_bools(ufunc)
    return ops.binary(prim, x, y, dtype)


def bitwise_and(x: Any, y: Any) -> Array:
    return _bitwise("bitwise_and", ew.and_, x, y)


def bitwise_or(x: Any, y: Any) -> Array:
    return _bitwise("bitwise_or", ew.or_, x, y)


def bitwise_xor(x: Any, y: Any) -> Array:
    return _bitwise("bitwise_xor", ew.xor, x, y)


def left_shift(x: Any, y: Any) -> Array:
    """``x << y``; a count outside [0, bits) gives 0, as NumPy on every platform."""
    return _bitwise("left_shift", ew.shift_left, x, y)


def right_shift(x: Any, y: Any) -> Array:
    """``x >> y`` (arithmetic); a count outside [0, bits) gives -1 for negative ``x``, else 0."""
    return _bitwise("right_shift", ew.shift_right, x, y)


def invert(x: Any) -> Array:
    """``~x``: bitwise on integers, ``not`` on bools."""
    x = ops.asarray(x)
    if x.ir_dtype.is_float:
        raise _no_loop("invert")
    return ops.unary(ew.not_, x)


bitwise_not = bitwise_invert = invert
bitwise_left_shift, bitwise_right_shift = left_shift, right_shift


def where(cond: Any, x: Any = None, y: Any = None) -> Array:
    if x is None and y is None:
        raise tracing.user_error(
            TraceError,
            "where(condition) with one argument is nonzero(condition): its size is the number of True "
            "values, not known at trace time (arrays have static shapes); use where(condition, x, y)",
        )
    if x is None or y is None:
        raise tracing.user_error(ShapeError, "either both or neither of x and y should be given")
    return ops.where(cond, x, y)


# ---- reductions -----------------------------------------------------------------------------------


def sum(x: Any, axis: Any = None, keepdims: bool = False, *, dtype: Any = None, initial: Any = None) -> Array:  # noqa: A001
    """``np.sum``; with ``dtype`` the elements are cast to it and summed in it (an int32 sum wraps,
    a bool one is ``any``), so it is also the sum's type; ``initial`` (cast to that type, as NumPy
    casts it) is added to each sum."""
    if dtype is None:
        return with_initial(ops.sum(x, axis, keepdims), initial, add)
    x = astype(x, dtype)
    total = ops.sum(x, axis, keepdims)  # bools and int32 add up in int64 here: NumPy's default type
    return with_initial(ops.cast(total, x.ir_dtype), initial, add)


def with_initial(reduced: Array, initial: Any, combine: Callable[[Any, Any], Array]) -> Array:
    """A reduction's result with NumPy's ``initial`` folded in: ``combine(initial, reduced)``, the
    initial value cast (unsafely, as NumPy's reduction casts it) to the result's dtype first."""
    if initial is None:
        return reduced
    return combine(ops.cast(ops.asarray(initial), reduced.ir_dtype), reduced)


def mean(x: Any, axis: Any = None, keepdims: bool = False, *, dtype: Any = None) -> Array:
    """``np.mean``; with ``dtype`` the elements are cast to it first (NumPy computes in it). An
    integer (or bool) ``dtype`` sums in it and divides as NumPy does: in float64, cast back into it."""
    if dtype is None:
        return ops.mean(x, axis, keepdims)
    x = astype(x, dtype)
    if x.ir_dtype.is_float:
        return ops.mean(x, axis, keepdims)
    return astype(divide(sum(x, axis, keepdims=keepdims, dtype=dtype), ops.count(x, axis)), dtype)


def _no_identity(prim: Primitive, ufunc: str, x: Any, axis: Any, keepdims: bool) -> Array:
    """A reduction NumPy gives no identity (max, min): reducing an empty axis raises, as in NumPy,
    instead of returning the IR reducer's identity (-inf for max)."""
    x = ops.asarray(x)
    if builtins.any(x.shape[a] == 0 for a in ops.normalize_axes(axis, x.ndim)):
        raise tracing.user_error(
            ShapeError, f"zero-size array to reduction operation {ufunc} which has no identity"
        )
    return ops.reduce(prim, x, axis, keepdims)


def max(x: Any, axis: Any = None, keepdims: bool = False, *, initial: Any = None) -> Array:  # noqa: A001
    """``np.max``; with ``initial`` an empty axis gives it, as NumPy's (else the empty axis raises)."""
    return _with_start(reduction.reduce_max, "maximum", maximum, x, axis, keepdims, initial)


def min(x: Any, axis: Any = None, keepdims: bool = False, *, initial: Any = None) -> Array:  # noqa: A001
    """``np.min``; with ``initial`` an empty axis gives it, as NumPy's (else the empty axis raises)."""
    return _with_start(reduction.reduce_min, "minimum", minimum, x, axis, keepdims, initial)


def _with_start(
    prim: Primitive,
    ufunc: str,
    combine: Callable[[Any, Any], Array],
    x: Any,
    axis: Any,
    keepdims: bool,
    initial: Any,
) -> Array:
    if initial is None:
        return _no_identity(prim, ufunc, x, axis, keepdims)
    # NumPy starts the reduction at ``initial``: maximum(initial, the elements'), which is also what
    # an empty axis gives (the reducer's identity, -inf for max, loses to any initial value).
    return with_initial(ops.reduce(prim, ops.asarray(x), axis, keepdims), initial, combine)


amax, amin = max, min


def any(x: Any, axis: Any = None, keepdims: bool = False) -> Array:  # noqa: A001
    """Whether any element is true (nonzero): ``or`` over the axes; False over an empty axis."""
    return ops.reduce(reduction.reduce_max, ops.cast(ops.asarray(x), ops.DType.i1), axis, keepdims)


def all(x: Any, axis: Any = None, keepdims: bool = False) -> Array:  # noqa: A001
    """Whether every element is true (nonzero): ``and`` over the axes; True over an empty axis."""
    return ops.reduce(reduction.reduce_min, ops.cast(ops.asarray(x), ops.DType.i1), axis, keepdims)


def count_nonzero(x: Any, axis: Any = None, keepdims: bool = False) -> Array:
    return ops.sum(not_equal(x, 0), axis, keepdims)


# ---- linear algebra ---------------------------------------------------------------------------------


def matmul(x: Any, y: Any) -> Array:
    return ops.matmul(x, y)


def dot(x: Any, y: Any) -> Array:
    return ops.dot(x, y)


# ---- shapes -------------------------------------------------------------------------------------------


def transpose(x: Any, axes: Any = None) -> Array:
    return ops.transpose(x, axes)


def reshape(x: Any, shape: Any, order: str = "C") -> Array:
    return ops.reshape(x, shape, order)


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
    return ops.broadcast_view(x, (shape,) if isinstance(shape, int) else shape)


def concatenate(xs: Any, axis: int | None = 0) -> Array:
    """``np.concatenate``; ``axis=None`` joins the flattened arrays."""
    return ops.concatenate([ravel(x) for x in xs], 0) if axis is None else ops.concatenate(xs, axis)


def stack(xs: Any, axis: int = 0) -> Array:
    return ops.stack(xs, axis)


def ravel(x: Any, order: str = "C") -> Array:
    """``np.ravel``: a view where NumPy gives one. ``order`` 'C' or 'F' (the transpose's C order),
    'A' (F for an array laid out in Fortran order only, else C), 'K' (memory order: of a C- or
    F-contiguous array as 'A'; of another layout it is refused)."""
    x = ops.asarray(x)
    c, f = x._shadow.flags.c_contiguous, x._shadow.flags.f_contiguous
    if order == "K" and not (c or f):
        raise tracing.user_error(
            ShapeError,
            "ravel(order='K') of an array that is neither C- nor Fortran-contiguous is not supported; "
            "use order='C' or order='F'",
        )
    if order not in ("C", "F", "A", "K"):
        raise tracing.user_error(
            ShapeError, f"ravel: order must be one of 'C', 'F', 'A' or 'K', not {order!r}"
        )
    fortran = order == "F" or (order in ("A", "K") and f and not c)
    return ops.ravel(ops.transpose(x) if fortran else x)


# ---- making arrays (NumPy's default dtype is float64) ---------------------------------------------------


def zeros(shape: Any, dtype: Any = None) -> Array:
    """``np.zeros``: float64 unless ``dtype`` says otherwise (``dtype=None`` too, as NumPy)."""
    return ops.full(shape, 0, np.float64 if dtype is None else dtype)


def ones(shape: Any, dtype: Any = None) -> Array:
    """``np.ones``: float64 unless ``dtype`` says otherwise (``dtype=None`` too, as NumPy)."""
    return ops.full(shape, 1, np.float64 if dtype is None else dtype)


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


empty, empty_like = zeros, zeros_like  # no uninitialized memory in a compiled function: zeros will do

# NumPy 2's array-API names.
concat, permute_dims, pow = concatenate, transpose, power  # noqa: A001

inf, nan, pi, e, newaxis = np.inf, np.nan, np.pi, np.e, None


# ---- more of NumPy, in modules of their own (they build on the functions above) -------------------

from dsl import numpy_linalg as linalg  # noqa: E402, F401
from dsl import numpy_missing  # noqa: E402
from dsl.einsum import einsum  # noqa: E402, F401
from dsl.gather import put_along_axis, take, take_along_axis  # noqa: E402, F401
from dsl.numpy_compose import (  # noqa: E402, F401
    allclose,
    atleast_1d,
    atleast_2d,
    atleast_3d,
    average,
    column_stack,
    cross,
    deg2rad,
    degrees,
    diag,
    diagonal,
    dstack,
    fix,
    float_power,
    fmax,
    fmin,
    heaviside,
    inner,
    isclose,
    kron,
    nanmax,
    nanmean,
    nanmin,
    nanprod,
    nansum,
    positive,
    rad2deg,
    radians,
    repeat,
    roll,
    sinc,
    tensordot,
    tile,
    trace,
    vdot,
)
from dsl.numpy_more import (  # noqa: E402, F401
    append,
    array_equal,
    broadcast_arrays,
    convolve,
    corrcoef,
    correlate,
    cov,
    delete,
    diff,
    ediff1d,
    fabs,
    isneginf,
    isposinf,
    linspace,
    logaddexp2,
    logspace,
    meshgrid,
    nanstd,
    nanvar,
    polyval,
    ptp,
    rot90,
    select,
    trapezoid,
    tri,
)
from dsl.numpy_shapes import (  # noqa: E402, F401
    array_split,
    eye,
    flip,
    fliplr,
    flipud,
    hstack,
    identity,
    moveaxis,
    outer,
    pad,
    split,
    swapaxes,
    tril,
    triu,
    vstack,
)
from dsl.numpy_stats import argmax, argmin, cumprod, cumsum, prod, std, var  # noqa: E402, F401

numpy_keywords.install(globals())  # out=, where=, dtype= on the functions NumPy gives them


def __getattr__(name: str) -> Any:
    """``dnp.foo`` for a NumPy function dslc lacks: an AttributeError naming it and what to use."""
    if name.startswith("__"):
        raise AttributeError(f"module 'dsl.numpy' has no attribute {name!r}")
    raise tracing.user_error(MissingError, numpy_missing.message(name, "dsl.numpy", globals()))
