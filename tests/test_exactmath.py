"""The math both targets compile from one text (``compiler/prims/exactmath.py``): ``log1p`` within
1 ulp over dense grids and C99's results at the special values, through the whole compiler; float
products spelled so no target fuses them; the helpers' text for each target. The CPU and CUDA giving
the same bits is checked in ``tests/cuda_sim/sim_random.py`` (the simulator, or a GPU) and, for
the absence of fused multiply-adds in the PTX, in ``tests/test_cuda_ptx.py``."""

from __future__ import annotations

import ast
import inspect
import textwrap

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
from compiler.prims import exactmath

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0, -1.5, -np.inf, 1e-45, -1e-45, 1e-30, -1e-30, 3e38]
SPECIAL += [0.41421356, -0.29289321, 0.4142136, -0.2928932, 1.0, -0.5, 2.0**-24, -(2.0**-24), 1e-8, 100.0]


def _log1p(dtype: type) -> dsl.Compiled:
    return dsl.compile(lambda x: dnp.log1p(x)) if dtype is np.float32 else dsl.compile(dnp.log1p)


def _ulps_from_exact(got: np.ndarray, x: np.ndarray) -> np.ndarray:
    """float32 results' distance in ulps from float64's log1p rounded (within 0.5 ulp of exact)."""
    with np.errstate(all="ignore"):
        ref = np.log1p(x.astype(np.float64)).astype(np.float32)
    finite = np.isfinite(ref)
    return np.abs(got[finite].view(np.int32).astype(np.int64) - ref[finite].view(np.int32).astype(np.int64))


def test_float32_log1p_within_one_ulp_of_every_sampled_float() -> None:
    """Every 4099th float32 bit pattern (a million, both signs, denormals to inf and NaN)."""
    x = np.arange(0, 2**32, 4099, dtype=np.uint64).astype(np.uint32).view(np.float32)
    got = _log1p(np.float32)(x)
    assert got.dtype == np.float32
    assert _ulps_from_exact(got, x).max() <= 1
    with np.errstate(all="ignore"):
        want = np.log1p(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))  # x < -1 and NaN
    np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])  # -1 and +inf


def test_float64_log1p_within_one_ulp_of_numpy() -> None:
    rng = np.random.default_rng(5)
    x = np.concatenate(
        [
            rng.uniform(-1, 1, 300_000),
            -(rng.uniform(0, 1, 100_000) ** 9),  # near 0 from below
            np.exp(rng.uniform(-700, 700, 300_000)),
            -np.exp(rng.uniform(-700, 0, 100_000)),
            np.nextafter(-1.0, 0.0) + rng.uniform(0, 1e-12, 1_000),
        ]
    )
    got = _log1p(np.float64)(x)
    want = np.log1p(x)
    assert np.abs(got.view(np.int64) - want.view(np.int64)).max() <= 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log1p_special_values_are_c99s(dtype: type) -> None:
    x = np.array(SPECIAL, dtype)
    got = _log1p(dtype)(x)
    with np.errstate(all="ignore"):
        want = np.log1p(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    exact = ~np.isnan(want) & ((want == 0) | np.isinf(want) | (np.abs(x) < 1e-7))  # x itself, +-0, +-inf
    np.testing.assert_array_equal(got[exact], want[exact])
    np.testing.assert_array_equal(np.signbit(got[exact]), np.signbit(want[exact]))  # log1p(-0.0) = -0.0
    np.testing.assert_allclose(got, want, rtol=2 * np.finfo(dtype).eps)


def test_log1p_gradient_still_one_over_one_plus_x() -> None:
    x = np.linspace(-0.9, 4.0, 11)
    np.testing.assert_allclose(dsl.grad(lambda x: dnp.log1p(x).sum())(x), 1 / (1 + x), rtol=1e-15)


def test_float32_cbrt_is_correctly_rounded_on_every_sampled_float() -> None:
    """musl's ``cbrtf``, two Newton steps in float64: the float64 cube root rounded once, on every
    4099th float32 bit pattern (NumPy's own float32 ``cbrt`` is within 2 ulps)."""
    x = np.arange(0, 2**32, 4099, dtype=np.uint64).astype(np.uint32).view(np.float32)
    got = dsl.compile(lambda v: dnp.cbrt(v))(x)
    assert got.dtype == np.float32
    want = np.cbrt(x.astype(np.longdouble)).astype(np.float32)  # the exact root, rounded
    finite = np.isfinite(x)
    np.testing.assert_array_equal(got[finite], want[finite])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(x))
    np.testing.assert_array_equal(got[np.isinf(x)], x[np.isinf(x)])


def test_float64_cbrt_within_two_thirds_of_an_ulp() -> None:
    """musl's ``cbrt`` (< 0.667 ulps), against the long double root; glibc's ``cbrt`` is 3 ulps off
    at places, and 27.0 gives 3.0000000000000004 there."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal(200_000) * 10.0 ** rng.integers(-300, 300, 200_000)
    x = np.concatenate([x, np.exp(rng.uniform(-744, -708, 2_000)), -np.exp(rng.uniform(-744, -708, 2_000))])
    got = dsl.compile(dnp.cbrt)(x)
    exact = np.cbrt(x.astype(np.longdouble))
    error = np.abs(got.astype(np.longdouble) - exact) / np.spacing(np.abs(got)).astype(np.longdouble)
    assert float(error.max()) < 0.667


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cbrt_of_cubes_zeros_and_infinities_is_exact(dtype: type) -> None:
    roots = np.arange(-200, 201).astype(dtype)
    np.testing.assert_array_equal(dsl.compile(lambda v: dnp.cbrt(v))(roots**3), roots)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype)
    got = dsl.compile(lambda v: dnp.cbrt(v))(special)
    np.testing.assert_array_equal(got, special)
    np.testing.assert_array_equal(np.signbit(got[:4]), np.signbit(special[:4]))


def test_float_products_are_spelled_unfused_and_integer_ones_plainly() -> None:
    """``mul`` of floats calls ``mul_f32``/``mul_f64`` (``operator.mul`` on the CPU, libdevice's
    ``fmul_rn`` on CUDA); of integers it stays ``*``. The CPU module binds what it calls."""
    f = np.ones(4, np.float32)
    source = dsl.compile(lambda a, b, c: a * b + c).lower(f, f, f).source()
    assert "mul_f32(" in source and "mul_f32 = operator.mul" in source
    assert "mul_f64" not in source and "def log1p_f32" not in source
    i = np.ones(4, np.int64)
    assert "mul_f" not in dsl.compile(lambda a, b: a * b + b).lower(i, i).source()
    assert "def log1p_f32" in dsl.compile(dnp.log1p).lower(f).source()


def test_declared_calls_are_the_calls_in_the_helpers_source() -> None:
    """``exactmath.CALLS`` lists what each helper calls of the helpers and bound names, callees are
    defined first, and every product in a helper goes through ``mul_f32``/``mul_f64`` (a bare ``*`` of
    floats could be fused by NVVM; ``INTEGER_HELPERS`` multiply integers)."""
    names = set(exactmath.HELPERS) | {n for b in exactmath.BINDINGS.values() for n in b}
    for name in exactmath.HELPERS:
        tree = ast.parse(textwrap.dedent(inspect.getsource(getattr(exactmath, name))))
        called = {
            n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        }
        assert set(exactmath.CALLS.get(name, ())) == called & names, name
        for callee in exactmath.CALLS.get(name, ()):
            if callee in exactmath.HELPERS:
                assert exactmath.HELPERS.index(callee) < exactmath.HELPERS.index(name)
        products = any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult) for n in ast.walk(tree))
        assert not products or name in exactmath.INTEGER_HELPERS, name


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_helper_source_is_deterministic_python(target: str) -> None:
    text = exactmath.helper_source(target, {"log1p_f32", "log1p_f64"})
    assert text == exactmath.helper_source(target, {"log1p_f64", "log1p_f32"})
    compile(text, f"<{target} prelude>", "exec")
    assert text.count("def log1p_f") == 2 and "def f64_bits" in text
    if target == "cuda":
        assert "mul_f32 = libdevice.fmul_rn" in text and "f32_bits = libdevice.float_as_int" in text
        assert text.index("def f32_bits") < text.index("f32_bits = libdevice.float_as_int")  # bound over
