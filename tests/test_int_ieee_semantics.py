"""Integer and IEEE semantics against NumPy 2 (issue 25, families 1 and 2).

Integers: bitwise operators and functions (logical on bools, TypeError on floats), shifts by counts
outside the bit width, integer division and remainders by zero and MIN // -1, Python int arguments
that do not fit the int32 array they meet (OverflowError at call time, as NumPy raises), comparisons
with such ints (exact, as NumPy 2). IEEE: identities the simplifier may apply only where they hold for
signed zeros, infinities and NaN; max/min over an empty axis raise ValueError as NumPy.

``CASES`` is one table run here on the CPU and by ``tests/cuda_sim/sim_int_ieee.py`` on the CUDA
backend (simulator or GPU).
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp

I32_MIN, I64_MIN = np.iinfo(np.int32).min, np.iinfo(np.int64).min


class Case(NamedTuple):
    fn: Callable[..., Any]  # written with operators / np.* so NumPy runs it as the oracle
    args: tuple[Any, ...]
    traced: Callable[..., Any] | None = None  # the dsl spelling, where NumPy's differs (dnp.*)


def _i(*values: int, dtype: Any = np.int32) -> np.ndarray:
    return np.array(values, dtype)


def _f(*values: float, dtype: Any = np.float64) -> np.ndarray:
    return np.array(values, dtype)


INTS = _i(1, 2, 6, -1, 0, I32_MIN, 2**31 - 1)
OTHERS = _i(3, -7, 5, 12, -1, -1, 9)
COUNTS = _i(0, 1, 31, 32, 40, -1, -33)
SIGNED = _i(-7, 7, -7, 7, 0, -8, 8)
DIVISORS = _i(3, -3, -3, 3, 0, 0, -1)
BOOLS = np.array([True, False, True, False])
BOOLS2 = np.array([True, True, False, False])
SIGNED_ZEROS = _f(-0.0, 0.0, np.inf, -np.inf, np.nan, 2.5)
ROUNDED = _f(-0.0, 0.0, -0.5, 0.5, -1.0, 1.0, -2.5, 2.5, -0.25, 0.75, np.inf, -np.inf, np.nan, 1e30, -1e30)


BASES = _i(-7, -2, -1, -1, 0, 1, 2, 5, 3, 0, -3)
EXPONENTS = _i(-1, -2, -3, -2, -1, -1, -1, -2, 2, 0, 3)


def _int_power(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
    """``a**b, 2**b, b**a[0]`` as docs/semantics.md defines integer powers with negative exponents
    (where NumPy raises): the truncated ``1 / a**-b``, which is ``reciprocal`` of 1, -1 or ``a``."""

    def power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        x, y = np.broadcast_arrays(x, y)
        even_minus_one = (x == -1) & (y % 2 == 0)
        inverse = np.reciprocal(np.where(even_minus_one, np.ones_like(x), x))
        return np.where(y < 0, inverse, np.power(x, np.maximum(y, 0)))

    return power(a, b), power(np.asarray(2, a.dtype), b), power(b, a[:1])


def _augmented(op: str) -> Callable[[np.ndarray, Any], np.ndarray]:
    def fn(a: Any, b: Any) -> Any:
        a = a.copy()
        if op == "&":
            a &= b
        elif op == "|":
            a |= b
        elif op == "^":
            a ^= b
        elif op == "<<":
            a <<= b
        else:
            a >>= b
        return a

    return fn


CASES: dict[str, Case] = {
    # ---- bitwise on integers: was logical (i & 3 gave all True) ----
    "and": Case(lambda a, b: a & b, (INTS, OTHERS)),
    "and_scalar": Case(lambda a: a & 3, (INTS,)),
    "rand_scalar": Case(lambda a: 3 & a, (INTS,)),
    "or": Case(lambda a, b: a | b, (INTS, OTHERS)),
    "xor": Case(lambda a, b: a ^ b, (INTS, OTHERS)),
    "invert": Case(lambda a: ~a, (INTS,)),
    "and_int64": Case(lambda a, b: a & b, (INTS.astype(np.int64) * 3, OTHERS.astype(np.int64))),
    "mixed_widths": Case(lambda a, b: a | b, (INTS, OTHERS.astype(np.int64))),
    "bitwise_functions": Case(
        lambda a, b: (np.bitwise_and(a, b), np.bitwise_or(a, b), np.bitwise_xor(a, b), np.invert(a)),
        (INTS, OTHERS),
        lambda a, b: (dnp.bitwise_and(a, b), dnp.bitwise_or(a, b), dnp.bitwise_xor(a, b), dnp.invert(a)),
    ),
    "bitwise_not": Case(np.bitwise_not, (INTS,), lambda a: dnp.bitwise_not(a)),
    "ufunc_dispatch": Case(lambda a, b: np.bitwise_xor(a, b), (INTS, OTHERS)),
    "logical_stay_logical": Case(
        lambda a, b: (np.logical_and(a, b), np.logical_or(a, b), np.logical_xor(a, b), np.logical_not(a)),
        (INTS, OTHERS),
        lambda a, b: (dnp.logical_and(a, b), dnp.logical_or(a, b), dnp.logical_xor(a, b), dnp.logical_not(a)),
    ),
    **{f"augmented_{op}": Case(_augmented(op), (INTS, OTHERS % 8)) for op in ("&", "|", "^", "<<", ">>")},
    # ---- int64 arithmetic wraps: Numba's signed arithmetic is nsw (an overflow undefined), and LLVM
    # used that: (x + 1) > x was True at the maximum, x + MIN an or, (x * 2) // 2 the maximum ----
    "int64_overflow_wraps": Case(
        lambda a: ((a + 1) > a, (a * 2) // 2, (a - 3) < a, a + I64_MIN, I64_MIN + a, a * a, (a + a) - a),
        (np.array([-7, -1, 0, 1, 5, I64_MIN, -I64_MIN - 1, 3037000500], np.int64),),
    ),
    # ---- a scalar exponent of 0.5 is NumPy's sqrt: (-inf) ** 0.5 NaN, (-0.0) ** 0.5 -0.0 (C's pow:
    # inf and 0.0, what an exponent array gives) ----
    "power_half": Case(
        lambda a: (a**0.5, np.power(a, 0.5), a.astype(np.float32) ** 0.5, a ** np.full(6, 0.5)),
        (SIGNED_ZEROS,),
    ),
    # ---- bitwise on bools: logical, as NumPy (~True is False) ----
    "bool_ops": Case(lambda a, b: (a & b, a | b, a ^ b, ~a), (BOOLS, BOOLS2)),
    "bool_with_int": Case(lambda a: (a & 1, a | 2), (BOOLS,)),
    "bool_add_mul": Case(lambda a, b: (a + b, a * b), (BOOLS, BOOLS2)),
    # ---- shifts: counts outside [0, bits) give 0 / the sign on every platform ----
    "left_shift": Case(lambda a, n: a << n, (INTS, COUNTS)),
    "right_shift": Case(lambda a, n: a >> n, (INTS, COUNTS)),
    "left_shift_scalar": Case(lambda a: (a << 40, a << 31, 1 << a.clip(0, 70)), (INTS,)),
    "shift_int64": Case(
        lambda a, n: (a << n, a >> n), (INTS.astype(np.int64), _i(0, 1, 63, 64, 100, -1, -64, dtype=np.int64))
    ),
    "shift_functions": Case(
        lambda a, n: (np.left_shift(a, n), np.right_shift(a, n)),
        (INTS, COUNTS),
        lambda a, n: (dnp.left_shift(a, n), dnp.right_shift(a, n)),
    ),
    # ---- integer division and remainders: 0 for a zero divisor, MIN // -1 wraps ----
    "floordiv": Case(lambda a, b: a // b, (SIGNED, DIVISORS)),
    "remainder": Case(lambda a, b: a % b, (SIGNED, DIVISORS)),
    "mod_zero_literal": Case(lambda a: (a % 0, a // 0), (SIGNED,)),
    "fmod": Case(lambda a, b: np.fmod(a, b), (SIGNED, DIVISORS), lambda a, b: dnp.fmod(a, b)),
    "fmod_zero_literal": Case(lambda a: np.fmod(a, 0), (SIGNED,), lambda a: dnp.fmod(a, 0)),
    "divmod": Case(lambda a, b: divmod(a, b), (SIGNED, DIVISORS)),
    "min_by_minus_one_i32": Case(
        lambda a, b: (a // b, a % b, np.fmod(a, b)),
        (_i(I32_MIN, I32_MIN, 5), _i(-1, 1, -1)),
        lambda a, b: (a // b, a % b, dnp.fmod(a, b)),
    ),
    "min_by_minus_one_i64": Case(
        lambda a, b: (a // b, a % b, np.fmod(a, b)),
        (_i(I64_MIN, I64_MIN, 5, dtype=np.int64), _i(-1, 1, -1, dtype=np.int64)),
        lambda a, b: (a // b, a % b, dnp.fmod(a, b)),
    ),
    "int64_by_zero": Case(lambda a, b: (a // b, a % b), (SIGNED.astype(np.int64), DIVISORS.astype(np.int64))),
    "abs_of_min": Case(lambda a: (abs(a), -a), (_i(I32_MIN, -3, 3),)),
    # ---- Python ints beyond int32 in comparisons: exact, as NumPy 2 ----
    "compare_big_literal": Case(lambda a: (a < 2**40, a == 2**40, a >= -(2**40), a != 2**33), (INTS,)),
    "compare_big_argument": Case(lambda a, s: (a < s, a == s, a > -s), (INTS, 2**40)),
    "compare_small_argument": Case(lambda a, s: (a < s, a == s), (INTS, 6)),
    "asarray_is_strong": Case(lambda a: np.asarray(5) + a, (INTS,), lambda a: dnp.asarray(5) + a),
    # ---- IEEE: no identity that fails at -0.0, inf or NaN ----
    # from floats to integers: NaN, infinities and values past the range give the minimum (x86's
    # and NumPy's there; a GPU's conversion saturates, NaN to 0, and the CPU's is undefined in LLVM)
    "float_to_int_outside_the_range": Case(
        lambda x: (x.astype(np.int32), x.astype(np.int64), x.astype(np.float32).astype(np.int32)),
        (_f(np.nan, np.inf, -np.inf, 3e10, -3e10, 2.7, -2.7, -(2.0**31), 2.0**31 - 1, 2.0**31, -0.0, 1e19),),
    ),
    "add_zero": Case(lambda x: (1 / (x + 0.0), 1 / (0.0 + x)), (SIGNED_ZEROS,)),
    "sub_zero": Case(lambda x: (1 / (x - 0.0), 1 / (x - -0.0), 1 / (0.0 - x), 1 / -x), (SIGNED_ZEROS,)),
    "mul_zero": Case(lambda x: (x * 0.0, 0.0 * x, 1 / (x * 0.0)), (SIGNED_ZEROS,)),
    "self_difference": Case(lambda x: (x - x, x / x, x * 1.0, x / 1.0, x**1.0), (SIGNED_ZEROS,)),
    "self_comparison": Case(lambda x: (x == x, x != x, x < x, x >= x), (SIGNED_ZEROS,)),
    "float32_add_zero": Case(lambda x: 1 / (x + 0.0), (SIGNED_ZEROS.astype(np.float32),)),
    "outer_product_of_signed_zeros": Case(
        lambda a, b: 1 / (a @ b), (_f(-0.0, 2.0, -np.inf).reshape(3, 1), _f(1.0, -0.0, 3.0).reshape(1, 3))
    ),
    "zeros_plus": Case(lambda x: 1 / (np.zeros(6) + x), (SIGNED_ZEROS,), lambda x: 1 / (dnp.zeros(6) + x)),
    # ---- rounding keeps the sign of a zero: floor(-0.0) gave 0.0, ceil(0.0) -0.0 (2026-11-26) ----
    **{
        f"rounding_{np.dtype(t).name}": Case(
            lambda x: (np.floor(x), np.ceil(x), np.trunc(x), np.rint(x), np.round(x)),
            (ROUNDED.astype(t),),
            lambda x: (dnp.floor(x), dnp.ceil(x), dnp.trunc(x), dnp.rint(x), dnp.round(x)),
        )
        for t in (np.float32, np.float64)
    },
    # ---- integer reciprocal: C's 1.0 / x converted (truncated; 0 gives the minimum), not floored ----
    "reciprocal_int32": Case(np.reciprocal, (SIGNED,), dnp.reciprocal),
    "reciprocal_int64": Case(np.reciprocal, (SIGNED.astype(np.int64),), dnp.reciprocal),
    # ---- a negative integer exponent known only at run time (NumPy raises): 1 / x**-y truncated ----
    **{
        f"power_negative_{np.dtype(t).name}": Case(
            _int_power, (BASES.astype(t), EXPONENTS.astype(t)), lambda a, b: (a**b, 2**b, b ** a[:1])
        )
        for t in (np.int32, np.int64)
    },
    # ---- integers to negative decimals: in float64 as NumPy (int32's minimum to -1 decimal wrapped) ----
    "round_int32_decimals": Case(
        lambda a: (np.round(a, -1), np.round(a, -2), np.round(a, -12)),
        (np.append(INTS, _i(25, 35, -25, -35, 15)),),
        lambda a: (dnp.round(a, -1), dnp.round(a, -2), dnp.round(a, -12)),
    ),
    "round_int64_decimals": Case(
        lambda a: (np.round(a, -1), np.round(a, -19)),
        (_i(2**62 + 13, -(2**62) - 17, 2**63 - 1, -25, 35, dtype=np.int64),),
        lambda a: (dnp.round(a, -1), dnp.round(a, -19)),
    ),
    # ---- float functions of bools: NumPy's float16 is dslc's float32 (round(b) was bool) ----
    "bool_floats": Case(
        lambda a, b: (
            np.rint(a.astype(np.float32)),
            np.round(a.astype(np.float32), -1),
            np.round(b.astype(np.float32)),
            np.logaddexp(a.astype(np.float32), b.astype(np.float32)),
        ),
        (BOOLS, BOOLS2),
        lambda a, b: (dnp.rint(a), dnp.round(a, -1), dnp.round(b), dnp.logaddexp(a, b)),
    ),
}


def numpy_result(case: Case) -> Any:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return case.fn(*[np.copy(a) if isinstance(a, np.ndarray) else a for a in case.args])


def compiled_result(case: Case, target: str) -> Any:
    fn = case.traced or case.fn
    args = [np.copy(a) if isinstance(a, np.ndarray) else a for a in case.args]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dsl.compile(fn, target=target)(*args)


def assert_same(got: Any, want: Any, what: str) -> None:
    """Exact: dtypes, values, NaN positions and the signs of zeros and infinities."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), what
        for k, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{what}[{k}]")
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want, err_msg=what)
    if want.dtype.kind == "f":  # (IEEE leaves the sign of an arithmetic NaN unspecified)
        numbers = ~np.isnan(want)
        np.testing.assert_array_equal(
            np.signbit(got[numbers]), np.signbit(want[numbers]), err_msg=f"{what}: signs"
        )


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_numpy_on_cpu(name: str) -> None:
    case = CASES[name]
    assert_same(compiled_result(case, "cpu"), numpy_result(case), name)


# ---- errors where NumPy raises --------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x & 1,
        lambda x: 1 | x,
        lambda x: x ^ x,
        lambda x: ~x,
        lambda x: x << 1,
        lambda x: dnp.bitwise_and(x, x),
        lambda x: dnp.invert(x),
        lambda x: dnp.right_shift(x, 1),
    ],
)
def test_bitwise_on_floats_is_a_type_error_at_the_users_line(fn) -> None:
    with pytest.raises(TypeError, match=r"test_int_ieee_semantics.py:\d+: ufunc '\w+' not supported"):
        dsl.compile(fn)(np.ones(3))


def test_bool_shift_subtract_negative_raise_type_error() -> None:
    b = np.array([True, False])
    # +x: NumPy's positive has no bool loop (it returned the bools, 2026-11-27)
    for fn in (lambda x: x << x, lambda x: x - x, lambda x: -x, lambda x: +x):
        with pytest.raises(TypeError, match="test_int_ieee_semantics.py"):
            dsl.compile(fn)(b)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x**x,
        lambda x: x**2,  # a Python int exponent: NumPy's square of bools (it gave int64)
        lambda x: x // x,
        lambda x: x % True,
        lambda x: dnp.fmod(x, x),
        lambda x: dnp.square(x),
        lambda x: dnp.reciprocal(x),
        lambda x: x >> x,
        lambda x: dnp.left_shift(True, x),
    ],
)
def test_bool_operations_numpy_computes_in_int8_name_the_cast(fn) -> None:
    """NumPy gives int8 for these on bools, a dtype dslc lacks: a TypeError at the user's line that
    says what to do (``square`` of bools was bool, ``reciprocal`` int64: wrong dtypes, silently)."""
    with pytest.raises(
        TypeError, match=r"test_int_ieee_semantics.py:\d+: .* int8 in NumPy.*astype\(dsl.int32\)"
    ):
        dsl.compile(fn)(np.array([True, False]))


def test_bool_power_of_a_python_int_argument_raises_as_the_literal() -> None:
    """``b ** y`` with ``y`` a Python int passed as an argument is ``b ** 2`` written the other way:
    the same TypeError (it gave int64 values, ``[1, INT64_MIN, 1]`` for ``y=-3``)."""
    with pytest.raises(TypeError, match=r"test_int_ieee_semantics.py:\d+: .* int8 in NumPy"):
        dsl.compile(lambda b, y: b**y)(np.array([True, False]), 2)
    got = dsl.compile(lambda b, y: b**y)(np.array([True, False]), np.array([2, 3]))  # int64 exponents
    assert got.dtype == np.int64 and got.tolist() == [1, 0]


@pytest.mark.parametrize("exponent", [np.int32(3), np.int64(2), np.int32(0)])
def test_bool_power_of_a_numpy_integer_is_its_dtype(exponent) -> None:
    """A NumPy integer scalar is typed (NEP 50), written in the program or passed: bools to its power
    are of its dtype, as in NumPy (written in the program, it raised the weak int's int8 error)."""
    b = np.array([True, False, True])
    want = b**exponent
    for fn, args in ((lambda a: a**exponent, (b,)), (lambda a, y: a**y, (b, exponent))):
        got = dsl.compile(fn)(*args)
        assert got.dtype == want.dtype and got.tolist() == want.tolist(), (exponent, got, want)
    with pytest.raises(ValueError, match="negative integer powers"):  # NumPy's error, as the literal's
        dsl.compile(lambda a: a ** np.int32(-1))(b)


@pytest.mark.parametrize("target", ["cpu", "cuda"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_powers_past_65536_wrap_as_numpy(dtype, target: str) -> None:
    """Numba's integer ``**`` takes exponents past 65536 through float64 ``pow``: int64 results were
    the minimum, int32 ones 0. dslc's ``exactmath.ipow`` wraps as NumPy, for array and literal
    exponents (CUDA: the kernels' text, compiled to PTX where NVVM is here)."""
    x = np.array([3, -3, 7, 5, 2, 0, 1, -1], dtype)
    y = np.array([65536, 65537, 2**31 - 1, 100_003, 64, 70_000, 2**30, 99_999], dtype)
    if target == "cuda":
        from cuda_ptx import PTX_AVAILABLE

        if not PTX_AVAILABLE:
            pytest.skip("NVVM is not available here (the cuda extra)")
        from compiler.codegen import compile_ptx

        program = dsl.compile(lambda x, y: x**y, target="cuda").lower(x, y).program.generated
        assert "ipow(" in program.source and compile_ptx(program, (9, 0))
        return
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(dsl.compile(lambda x, y: x**y)(x, y), x**y)
        np.testing.assert_array_equal(dsl.compile(lambda x: x**65537)(x), x**65537)


EMPTY_REDUCTIONS = [
    ((0,), None, True),
    ((0, 3), 0, True),
    ((0, 3), 1, False),  # over the non-empty axis: an empty result
    ((0, 0), 1, True),
    ((2, 0, 3), (0, 2), False),
    ((2, 0, 3), 1, True),
    ((0, 3), (), False),
]


@pytest.mark.parametrize("shape, axis, raises", EMPTY_REDUCTIONS)
def test_max_min_of_empty_raise_like_numpy(shape, axis, raises: bool) -> None:
    x = np.zeros(shape)
    forms = [
        lambda a: a.max(axis=axis),
        lambda a: a.min(axis=axis),
        lambda a: np.max(a, axis),  # dispatched to dsl.numpy on a traced array
        lambda a: np.amin(a, axis, keepdims=True),
    ]
    for form in forms:
        if raises:
            with pytest.raises(ValueError, match="zero-size array to reduction operation"):
                form(x)  # NumPy itself
            with pytest.raises(ValueError, match=r"test_int_ieee_semantics.py:\d+: zero-size array"):
                dsl.compile(form)(x)
        else:
            assert_same(dsl.compile(form)(x), form(x), f"{shape} {axis}")


def test_python_int_argument_out_of_int32_raises_overflow_error_per_call() -> None:
    f = dsl.compile(lambda a, s: a + s)
    a = np.arange(3, dtype=np.int32)
    assert_same(f(a, 5), a + 5, "fits")
    assert_same(f(a, -(2**31)), a + -(2**31), "fits at the bottom")
    for big in (2**31, -(2**31) - 1, 2**40):
        with pytest.raises(
            OverflowError, match=r"argument 's': Python integer -?\d+ out of bounds for int32"
        ):
            f(a, big)
        with pytest.raises(OverflowError):
            a + big  # NumPy 2 agrees
    assert_same(f(a, 7), a + 7, "the same compiled program again")
    assert f.trace_count == 1


def test_python_int_argument_past_int64_names_the_argument_and_line() -> None:
    """Every Python int argument is passed as int64: one past it raised a bare "Python int too large
    to convert to C long" from the executable."""
    f = dsl.compile(lambda x, s: x + s)
    assert f(np.ones(2, np.float32), 2**40).dtype == np.float32
    with pytest.raises(
        OverflowError, match=rf"{re.escape(__file__)}:\d+: argument 's': Python integer .* does not fit int64"
    ):
        f(np.ones(2, np.float32), 2**70)


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, s: a * s,
        lambda a, s: np.maximum(a, s),
        lambda a, s: a & s,
        lambda a, s: a // s,
    ],
)
def test_python_int_argument_overflow_in_other_ops(fn) -> None:
    a = np.arange(3, dtype=np.int32)
    with pytest.raises(OverflowError):
        fn(a, 2**40)
    with pytest.raises(OverflowError, match="out of bounds for int32"):
        dsl.compile(fn)(a, 2**40)


def test_python_int_argument_overflow_in_place_and_setitem() -> None:
    def iadd(a, s):
        a += s
        return a

    def setitem(a, s):
        a[0] = s
        return a

    for fn in (iadd, setitem):
        a = np.arange(3, dtype=np.int32)
        with pytest.raises(OverflowError):
            fn(a.copy(), 2**40)
        with pytest.raises(OverflowError, match="out of bounds for int32"):
            dsl.compile(fn)(a, 2**40)
        np.testing.assert_array_equal(a, np.arange(3))  # nothing ran: the caller's array is untouched


def test_a_literal_written_into_an_int32_array_must_fit() -> None:
    def setitem(a):
        a[0] = 2**40
        return a

    with pytest.raises(OverflowError):
        setitem(np.zeros(3, np.int32))
    with pytest.raises(OverflowError, match=r"test_int_ieee_semantics.py:\d+: .*out of bounds for int32"):
        dsl.compile(setitem)(np.zeros(3, np.int32))  # it wrapped to 0
    for fn in (lambda a: a + 2**40, lambda a: a & 0xFFFFFFFF):  # the message named no line
        with pytest.raises(dsl.DSLError, match=r"test_int_ieee_semantics.py:\d+: .*out of bounds for int32"):
            dsl.compile(fn)(np.zeros(3, np.int32))


FLOAT_STORES = {
    "setitem": lambda a, s: a.__setitem__(0, s),
    "slice": lambda a, s: a.__setitem__(slice(None), s),
    "mask": lambda a, s: a.__setitem__(a > 0, s),
    "fancy": lambda a, s: a.__setitem__([0, 2], s),
}


@pytest.mark.parametrize("store", sorted(FLOAT_STORES))
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_a_float_stored_into_an_int_array_converts_as_numpy(store: str, dtype) -> None:
    """NumPy stores a float scalar into an integer array through ``int()``: truncated toward zero;
    NaN raises ValueError, an infinity or a number out of range OverflowError (a cast would have
    stored the integer minimum). A literal raises at trace time, an argument on every call; the
    caller's array is untouched either way."""
    put = FLOAT_STORES[store]

    def by_argument(a, s):
        put(a, s)
        return a

    compiled_by_argument = dsl.compile(by_argument)  # one program for every value (checked per call)
    for value in (2.7, -1.5, np.float32(-3.9), math.nan, -math.inf, 1e10, -1e19, 3e9):

        def literal(a, value=value):
            put(a, value)
            return a

        a = np.arange(-1, 3, dtype=dtype)
        try:
            want: object = by_argument(a.copy(), value)
        except (ValueError, OverflowError) as err:
            want = type(err)
        for fn, args in ((dsl.compile(literal), (a,)), (compiled_by_argument, (a, float(value)))):
            if isinstance(want, type):
                with pytest.raises(want, match=r"^.*test_int_ieee_semantics.py:\d+: "):
                    fn(*args)
                np.testing.assert_array_equal(a, np.arange(-1, 3))
            else:
                assert_same(fn(*args), want, f"{store} {value!r}")


def test_abs_of_bools_is_the_identity_and_sign_a_type_error() -> None:
    b = np.array([True, False])
    assert_same(dsl.compile(lambda x: abs(x))(b), abs(b), "abs")
    with pytest.raises(TypeError):
        np.sign(b)
    with pytest.raises(TypeError, match="ufunc 'sign' not supported"):
        dsl.compile(lambda x: np.sign(x))(b)


def test_python_int_argument_where_no_narrowing_happens_is_not_checked() -> None:
    a64 = np.arange(3, dtype=np.int64)
    assert_same(dsl.compile(lambda a, s: a + s)(a64, 2**40), a64 + 2**40, "int64 array")
    f32 = np.arange(3, dtype=np.float32)
    assert_same(dsl.compile(lambda a, s: a + s)(f32, 2**40), f32 + 2**40, "float32 array")
    a32 = np.arange(3, dtype=np.int32)
    assert_same(dsl.compile(lambda a, s: a < s)(a32, 2**40), a32 < 2**40, "a comparison")


def test_grad_with_a_python_int_argument_checks_too() -> None:
    def loss(x, k, s):
        return (x * (k + s)).sum()

    g = dsl.compile(dsl.grad(loss))
    x, k = np.ones(3), np.arange(3, dtype=np.int32)
    np.testing.assert_allclose(g(x, k, 2), np.arange(3) + 2.0)
    with pytest.raises(OverflowError, match="out of bounds for int32"):
        g(x, k, 2**40)


def test_shift_and_bitwise_lowerings_in_the_mlir_export() -> None:
    """The MLIR export guards what arith leaves undefined (shift counts, division by 0 and -1)."""
    from compiler.codegen.mlir_export import export_function

    def fn(a, b):
        return a << b, a >> b, a // b, a % b, a & b, ~a

    func = dsl.compile(fn).lower(INTS, COUNTS).program.stages["optimized"]
    text = export_function(func)
    for op in ("arith.shli", "arith.shrsi", "arith.floordivsi", "arith.remsi", "arith.andi", "arith.xori"):
        assert op in text, op
    assert "arith.cmpi ult" in text  # the shift count's range test


def test_float_to_int_lowering_in_the_mlir_export() -> None:
    """arith.fptosi is poison for NaN and values past the range: the export selects the minimum."""
    from compiler.codegen.mlir_export import export_function

    x = np.array([np.nan, 2.5, 3e10])
    text = export_function(dsl.compile(lambda x: x.astype(np.int32)).lower(x).program.stages["optimized"])
    assert "arith.fptosi" in text and "arith.cmpf olt" in text and "arith.select" in text
