"""The CPU target's vectorizable float32 math (``compiler/prims/vecmath.py``) and keyed float max/min
reductions, through the whole compiler: accuracy against float64 NumPy in ulps over dense grids,
C99/NumPy results at the special values, and the generated code taking the vectorizable path."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dsl
import dsl.nn
import dsl.numpy as dnp
from compiler.compilation import option_defaults
from compiler.prims import random, vecmath

SPECIAL = np.array(
    [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1e-40, 1.1754944e-38, 3.4e38, -3.4e38]
    + [1.0, -1.0, 0.5, 0.625, 0.6249999, 2.44e-4, 9.5, -9.5, 44.0, 88.72, 88.73, -87.4, -103.9, -104.0],
    np.float32,
)


def _ulps(got: np.ndarray, x: np.ndarray, exact: Callable[[np.ndarray], np.ndarray]) -> float:
    """Largest error in float32 ulps of the exact value, where that value is a finite float32."""
    with np.errstate(all="ignore"):
        ref = exact(x.astype(np.float64))
        ref32 = ref.astype(np.float32)
    finite = np.isfinite(ref32)
    err = np.abs(got[finite].astype(np.float64) - ref[finite]) / np.spacing(np.abs(ref32[finite]))
    return float(err.max())


def _grid(lo: float, hi: float, n: int = 400_001) -> np.ndarray:
    rng = np.random.default_rng(0)
    return np.concatenate([np.linspace(lo, hi, n), rng.uniform(lo, hi, n)]).astype(np.float32)


def _logistic(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


CASES: list[tuple[str, Any, Callable[[np.ndarray], np.ndarray], np.ndarray, float]] = [
    ("exp", dnp.exp, np.exp, _grid(-110.0, 90.0), 1.0),
    ("exp_small", dnp.exp, np.exp, _grid(-1.0, 1.0), 1.0),
    ("tanh", dnp.tanh, np.tanh, _grid(-12.0, 12.0), 2.0),
    ("tanh_small", dnp.tanh, np.tanh, _grid(-0.7, 0.7), 2.0),
    ("log", dnp.log, np.log, np.exp(_grid(-103.0, 88.0).astype(np.float64)).astype(np.float32), 1.0),
    ("log_near_1", dnp.log, np.log, _grid(0.5, 2.0), 1.0),
    ("logistic", dsl.nn.sigmoid, _logistic, _grid(-85.0, 90.0), 3.0),  # below -87: denormal, see below
    ("logistic_formula", lambda x: 1.0 / (1.0 + dnp.exp(-x)), _logistic, _grid(-85.0, 90.0), 3.0),
]


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_float32_math_is_accurate(name: str) -> None:
    (_, fn, exact, x, bound), *_ = [c for c in CASES if c[0] == name]
    compiled = dsl.compile(fn)
    source = compiled.lower(x).source()
    helper = name.split("_")[0].replace("logistic", "exp") + "_f32("
    assert helper in source and "objmode" not in source  # the vectorizable loop, not NumPy
    got = compiled(x)
    assert got.dtype == np.float32
    assert _ulps(got, x, exact) <= bound


@pytest.mark.parametrize("name", ["exp", "tanh", "log"])
def test_float32_math_special_values_match_numpy(name: str) -> None:
    fn = {"exp": dnp.exp, "tanh": dnp.tanh, "log": dnp.log}[name]
    ref = getattr(np, name)
    with np.errstate(all="ignore"):
        want = ref(SPECIAL)
    got = dsl.compile(fn)(SPECIAL)
    finite = np.isfinite(want) & (want != 0)
    # exact where the result is inf, NaN or a signed zero; within the accuracy bound elsewhere
    np.testing.assert_array_equal(got[~finite], want[~finite])
    signed = ~finite & ~np.isnan(want)  # a NaN's sign means nothing
    np.testing.assert_array_equal(np.signbit(got[signed]), np.signbit(want[signed]))
    np.testing.assert_allclose(got[finite], want[finite], rtol=3e-7, atol=0)


def test_float64_math_keeps_libm() -> None:
    x = np.linspace(-5, 5, 1001)
    source = dsl.compile(dnp.exp).lower(x).source()
    assert "exp_f32" not in source
    np.testing.assert_allclose(dsl.compile(dnp.exp)(x), np.exp(x), rtol=5e-16)


def test_helpers_are_defined_only_where_used() -> None:
    x = np.ones((8, 8), np.float32)
    assert "def exp_f32" not in dsl.compile(lambda x: x * 2.0).lower(x).source()
    tanh_only = dsl.compile(dnp.tanh).lower(x).source()
    assert "def tanh_f32" in tanh_only and "def exp_f32" not in tanh_only
    assert vecmath.helper_source({"exp_f32"}) == vecmath.helper_source({"exp_f32"})  # deterministic


def test_declared_calls_are_the_calls_in_the_helpers_source() -> None:
    """``vecmath.CALLS`` (what a prelude includes beside a helper) lists exactly the helpers each
    helper's source calls, and a prelude defines every callee before its caller."""
    for name in vecmath.HELPERS:
        tree = ast.parse(textwrap.dedent(inspect.getsource(getattr(vecmath, name))))
        called = {
            n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        }
        assert set(vecmath.CALLS.get(name, ())) == called & set(vecmath.HELPERS), name
        assert ("fma" in called) == (name in vecmath.FMA), name
        for callee in vecmath.CALLS.get(name, ()):
            assert vecmath.HELPERS.index(callee) < vecmath.HELPERS.index(name)
    tanh = vecmath.helper_source({"tanh_f32"})
    assert "def exp_poly_f32" in tanh and "def exp_f32" not in tanh
    assert tanh.index("def exp_poly_f32") < tanh.index("def tanh_f32")


@pytest.mark.parametrize("name", ["exp", "tanh", "log"])
def test_polynomial_steps_fuse_only_with_the_switch_on(name: str) -> None:
    """``fused_multiply_add``: the helpers' Horner steps are contracting multiply-adds (one FMA each on
    this machine); off, a multiply and an add. Both stay within the accuracy bound, and they differ
    from each other only by those roundings."""
    fn = {"exp": dnp.exp, "tanh": dnp.tanh, "log": dnp.log}[name]
    (_, _, exact, x, bound), *_ = [c for c in CASES if c[0] == name]
    fused = dsl.compile(fn)
    assert "fma = fmuladd_function()" in fused.lower(x).source()
    with option_defaults(fused_multiply_add=False):
        plain = dsl.compile(fn)
        assert "def fma(a, b, c):" in plain.lower(x).source()
        got_plain = plain(x)
    got_fused = fused(x)
    assert _ulps(got_plain, x, exact) <= bound and _ulps(got_fused, x, exact) <= bound
    finite = np.isfinite(got_plain)
    np.testing.assert_array_equal(got_fused[~finite], got_plain[~finite])
    apart = np.abs(got_fused[finite] - got_plain[finite]) / np.spacing(np.abs(got_plain[finite]))
    assert apart.max() <= 2  # ulps, denormal results included


def _nasty(shape: tuple[int, ...], dtype: type, rng: np.random.Generator) -> np.ndarray:
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    picks = rng.choice(flat.size, size=max(1, flat.size // 50), replace=False)
    flat[picks] = rng.choice(np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0], dtype), picks.size)
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("which", ["max", "min"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_keyed_max_min_match_numpy(dtype: type, which: str, axis: int | None) -> None:
    rng = np.random.default_rng(3)
    shape = (300, 400) if axis is not None else (700, 200)  # the full reduction is big: chunked
    x = _nasty(shape, dtype, rng)
    x[7, :] = -np.inf if which == "max" else np.inf  # all at the identity
    x[8, :] = -0.0
    x[9, :] = np.nan
    x[:, 10] = 0.0
    x[11, :] = rng.standard_normal(shape[1]).astype(dtype)  # rows without NaN
    x[:, 12] = rng.standard_normal(shape[0]).astype(dtype)
    fn = dsl.compile(lambda v: getattr(v, which)(axis=axis))
    source = fn.lower(x).source()
    assert f"{which}_key_" in source and "objmode" not in source
    got, want = fn(x), getattr(np, which)(x, axis=axis)
    np.testing.assert_array_equal(got, want)  # NaN where NumPy's is; -0.0 == 0.0 (NumPy's tie order varies)
    clean = np.nan_to_num(x, nan=0.0)  # finite-or-inf results pick the right element
    np.testing.assert_array_equal(fn(clean), getattr(np, which)(clean, axis=axis))


def test_keyed_max_min_order_signed_zeros() -> None:
    """Keys order -0.0 below +0.0 (IEEE 754 maximum/minimum); NumPy's pick between tied zeros
    depends on its SIMD order."""
    z = np.array([[-0.0, 0.0, -0.0], [-0.0, -0.0, -0.0]], np.float32)
    got = dsl.compile(lambda v: v.max(axis=1))(z)
    assert got[0] == 0.0 and not np.signbit(got[0]) and np.signbit(got[1])
    low = dsl.compile(lambda v: v.min(axis=1))(z)
    assert np.signbit(low[0]) and np.signbit(low[1])


def test_helpers_are_inlined_into_every_kernel_that_calls_them() -> None:
    """LLVM inlines the helpers (``forceinline``): a call left in a loop stops its vectorization.
    Plain ``njit`` helpers were left as calls in an attention softmax's row band (4-d rows of 128:
    0.12 -> 0.9 ms), while a flat ``tanh`` loop inlined them."""
    from compiler.cli import llvm_ir

    def f(s: Any, x: Any) -> Any:
        p = dnp.exp(s * 0.125 - (s * 0.125).max(axis=-1, keepdims=True))
        p = p / p.sum(axis=-1, keepdims=True)
        return p, dnp.tanh(x) + dnp.log(x * x + 1.0), dsl.nn.sigmoid(x).sum()

    rng = np.random.default_rng(0)
    s = rng.standard_normal((4, 4, 128, 128)).astype(np.float32)
    x = rng.standard_normal((512, 256)).astype(np.float32)
    ir = llvm_ir(dsl.compile(f).lower(s, x).program, [s, x])
    defined = re.findall(r"^define [^@]*@(\S+)\(", ir, re.M)
    assert any(re.search(r"k\d+_\w+_chunk", d) for d in defined)  # the kernels' own IR is there
    left = sorted(set(re.findall(r"call [^\n]*@(\w*(?:" + "|".join(vecmath.HELPERS) + r")\w*)\(", ir)))
    assert left == []


def test_the_prelude_defines_the_helpers_the_kernels_recorded() -> None:
    """Where the code calling a helper is made, the helper is recorded in the program's pool (a
    float32 tanh, a keyed float max, ``random_bits``' Threefry); the prelude defines exactly those
    (and their callees), without reading the kernels' text."""
    x = np.ones((64, 64), np.float32)

    def f(x):
        return dnp.tanh(x).max() + dsl.random.normal(dsl.random.key(0), x.shape).sum()

    lowered = dsl.compile(f).lower(x)
    pool = lowered._program.compilation.kernels.pool
    assert {"tanh_f32", "max_key_f32", "from_key_f32", random.HELPER} <= pool.helpers
    source = lowered.source()
    for name in vecmath.with_callees(pool.helpers & set(vecmath.HELPERS)) | {random.HELPER}:
        assert f"def {name}(" in source, name
    assert "def exp_f32(" not in source and "def log_f32(" not in source
