"""``dnp.cumsum`` / ``dnp.cumprod`` on the O(n) scan primitives (``compiler/prims/scan.py``): values
and dtypes against NumPy 2 for each axis, ``axis=None``, ``dtype=``, the method forms, empty and
size-1 axes; gradients (cumprod over zeros included) against JAX in float64; a program holds one
scan op per call (no log-step composition); float32 sums rounded once per element; a scan of a
dying temporary computed over its buffer. The primitives' own tables (each axis both ways, every
dtype, vjp, vmap, PTX, the CUDA simulator) are in test_prims_registry.py and test_vjp_rules.py."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import interpret_fn

import dsl
import dsl.numpy as dnp

jax.config.update("jax_enable_x64", True)
RNG = np.random.default_rng(29)
X34 = RNG.standard_normal((3, 4)).astype(np.float32)
I23 = RNG.integers(-5, 6, size=(2, 3)).astype(np.int32)
B5 = RNG.random(5) < 0.5


def scans(x, i, b, e):
    return (
        dnp.cumsum(x, axis=0),
        dnp.cumsum(x, axis=-1),
        dnp.cumsum(x),  # flattened
        dnp.cumprod(x, axis=1),
        x.cumsum(0),
        x.cumprod(axis=-1),
        dnp.cumsum(i, axis=1),  # int32 -> int64
        dnp.cumprod(i, axis=0),
        dnp.cumsum(b),  # bool -> int64
        dnp.cumsum(i, axis=0, dtype=np.float64),
        dnp.cumsum(e, axis=0),  # an empty axis
        dnp.cumprod(e, axis=1),  # a size-1 axis of an empty array
        dnp.cumsum(x[:, :1], axis=1),  # a size-1 axis
    )


def reference(x, i, b, e):
    return (
        np.cumsum(x, axis=0),
        np.cumsum(x, axis=-1),
        np.cumsum(x),
        np.cumprod(x, axis=1),
        x.cumsum(0),
        x.cumprod(axis=-1),
        np.cumsum(i, axis=1),
        np.cumprod(i, axis=0),
        np.cumsum(b),
        np.cumsum(i, axis=0, dtype=np.float64),
        np.cumsum(e, axis=0),
        np.cumprod(e, axis=1),
        np.cumsum(x[:, :1], axis=1),
    )


@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "no-inplace"])
def test_values_and_dtypes_against_numpy(inplace: bool) -> None:
    args = (X34, I23, B5, np.zeros((0, 1), np.float32))
    got = dsl.compile(scans, inplace=inplace)(*args)
    for k, (g, w) in enumerate(zip(got, reference(*args), strict=True)):
        assert g.shape == w.shape and g.dtype == w.dtype, (
            f"result {k}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        )
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=f"result {k}")


def test_one_scan_op_and_no_log_steps() -> None:
    """The log-step form it replaces padded and added ceil(log2 n) times."""
    func = dsl.compile(lambda x: dnp.cumsum(x, axis=1)).lower(np.zeros((4, 1000), np.float32))
    names = [op.prim.name for op in func._program.stages["optimized"].ops]
    assert names == ["cumulative_sum"], names


def test_elementwise_producers_are_computed_inside_the_scan() -> None:
    """As a reduction's prologue: ``exp(x) * 2 + y`` (a broadcast row) gets no buffer of its own."""

    def f(x, y):
        return dnp.cumsum(dnp.exp(x) * 2 + y, axis=0)

    x, y = RNG.standard_normal((5, 4)), RNG.standard_normal(4)
    buffers = dsl.compile(f).lower(x, y).memory_plan().buffers
    assert not buffers, buffers  # (results are not arena buffers)
    np.testing.assert_allclose(dsl.compile(f)(x, y), np.cumsum(np.exp(x) * 2 + y, axis=0), rtol=1e-12)


def test_float32_sums_are_rounded_once_per_element() -> None:
    """Accumulated in float64, as the reductions: the float64 running sum rounded to float32."""
    x = np.full(100_000, 0.1, np.float32)
    got = dsl.compile(lambda x: dnp.cumsum(x))(x)
    np.testing.assert_array_equal(got, np.cumsum(x.astype(np.float64)).astype(np.float32))


OVERFLOWING = [
    [3e38, 3e38, -3e38, 1.0],  # the float64 running sum came back to 3e38 (NumPy: inf from then on)
    [-3e38, -3e38, 3e38, np.inf, 1.0],  # -inf, then -inf + inf: NaN, as NumPy's
    [3.4028234e38, 1e31, -1e31],  # past the largest float32 by less than half its last place: finite
    [3.4028234e38, 2.1e31, -1e38],  # by more (it rounds to inf): inf from then on
]


@pytest.mark.parametrize("values", OVERFLOWING)
@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_float32_running_sums_stay_infinite_once_they_overflow(values: list[float], target: str) -> None:
    """float32 running sums are kept in float64 but, past float32's range, are its infinity from then
    on, as NumPy's running sum in float32 (CUDA: in the simulator, in its own process, and in the
    generated text here)."""
    x = np.array(values, np.float32)
    if target == "cuda":
        source = dsl.compile(lambda v: dnp.cumsum(v), target="cuda").lower(x).source()
        assert "3.4028235677973366e+38" in source, source
        return
    with np.errstate(over="ignore", invalid="ignore"):
        want = np.cumsum(x)
    np.testing.assert_array_equal(dsl.compile(lambda v: dnp.cumsum(v))(x), want)
    np.testing.assert_array_equal(
        dsl.compile(lambda v: dnp.cumsum(v[::-1])[::-1])(x), np.cumsum(x[::-1])[::-1]
    )


def test_scan_of_a_dying_temporary_is_in_place() -> None:
    def f(x, w):
        return dnp.cumsum(x @ w, axis=0) * 2.0

    x, w = RNG.standard_normal((6, 5)), RNG.standard_normal((5, 5))
    lowered = dsl.compile(f).lower(x, w)
    buffers = lowered.memory_plan().buffers  # the matmul's, then the scan's over it
    assert any(b.reused_from == buffers[0].name for b in buffers[1:]), lowered.explain_inplace()
    for inplace in (True, False):
        np.testing.assert_allclose(dsl.compile(f, inplace=inplace)(x, w), np.cumsum(x @ w, 0) * 2, rtol=1e-12)


def loss(x, u, v):
    return (
        (u * dnp.cumsum(x, axis=0)).sum()
        + (v * dnp.cumprod(x, axis=1)).sum()
        + (dnp.cumprod(x[::-1], axis=0) ** 2).sum()
    )


def jax_loss(x, u, v):
    return (
        (u * jnp.cumsum(x, axis=0)).sum()
        + (v * jnp.cumprod(x, axis=1)).sum()
        + (jnp.cumprod(x[::-1], axis=0) ** 2).sum()
    )


def test_gradients_against_jax() -> None:
    """Rows and columns holding one zero and two zeros: cumprod's gradient is exact there."""
    x = RNG.standard_normal((4, 5))
    x[1, 2] = x[1, 4] = x[3, 0] = 0.0
    x[2, 1] = 0.0
    u, v = RNG.standard_normal((4, 5)), RNG.standard_normal((4, 5))
    got = dsl.compile(dsl.grad(loss))(x, u, v)
    want = jax.grad(jax_loss)(x, u, v)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-10, atol=1e-12)


def test_second_order_against_jax() -> None:
    """Hessian-vector products through both scans (away from zeros)."""
    x = RNG.uniform(0.5, 1.5, (3, 4))
    u, v, t = (RNG.standard_normal((3, 4)) for _ in range(3))

    def hvp(x, u, v, t):
        return (dsl.grad(loss)(x, u, v) * t).sum()

    got = dsl.compile(dsl.grad(hvp))(x, u, v, t)
    want = jax.grad(lambda x: (jax.grad(jax_loss)(x, u, v) * t).sum())(x)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-10, atol=1e-12)


def test_jvp_and_vmap_against_jax() -> None:
    def f(x):
        return dnp.cumprod(dnp.cumsum(x, axis=1), axis=0)

    def jf(x):
        return jnp.cumprod(jnp.cumsum(x, axis=1), axis=0)

    x, t = RNG.uniform(0.5, 1.5, (3, 4)), RNG.standard_normal((3, 4))
    got = dsl.compile(lambda x, t: (dsl.jvp(f, (x,), (t,)), dsl.vmap(f)(x[None] * t[:, None])))(x, t)
    (value, tangent), batched = got
    want_value, want_tangent = jax.jvp(jf, (x,), (t,))
    np.testing.assert_allclose(value, np.asarray(want_value), rtol=1e-12)
    np.testing.assert_allclose(tangent, np.asarray(want_tangent), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(batched, np.asarray(jax.vmap(jf)(x[None] * t[:, None])), rtol=1e-12)


HESSIAN_LINES = [[2.0, 0.0, 3.0], [0.0, 0.0, 3.0]]  # one zero; two, and an element past them


def _products(np_: Any, v: Any) -> Any:
    """A product, a weighted running product and a reversed one: the forms ``prod`` and ``cumprod``
    take through the scan's vjp."""
    weights = np.arange(1.0, v.shape[0] + 1)
    return np_.prod(v) + (np_.cumprod(v) * weights).sum() + (np_.cumprod(v[::-1]) * weights).sum() * 0.5


@pytest.mark.parametrize("x", HESSIAN_LINES, ids=str)
def test_hessians_of_products_with_zeros_against_jax(x: list[float]) -> None:
    """Past a line's first zero the cotangent of a running product is 0, but not its derivative in
    that zero (``d^2 (a b c) / db dc = a``): written with the zero itself, the Hessian is right (it
    lost those entries: ``hessian(prod)([2, 0, 3])`` had a zero row where JAX has ``[0, 2, 0]``).
    On the reference interpreter (each compiled Hessian costs a minute of Numba); one compiled below."""
    a = np.array(x, np.float64)
    want = np.asarray(jax.hessian(lambda v: _products(jnp, v))(jnp.asarray(a)))
    np.testing.assert_allclose(interpret_fn(dsl.hessian(lambda v: _products(dnp, v)), a), want, atol=1e-12)


def test_hessian_of_a_product_with_zeros_compiled() -> None:
    a = np.array([1.5, 0.0, 2.0, 0.0, 3.0])
    want = np.asarray(jax.hessian(jnp.prod)(jnp.asarray(a)))
    np.testing.assert_allclose(dsl.hessian(lambda v: dnp.prod(v))(a), want, atol=1e-12)


EXTREME_LINES = {
    "underflowing": ([1e-300, 1e-100], [1e-100, 1e-300]),
    "overflow, then back": ([1e200, 1e200, 1e-300], [1e-100, 1e-100, np.inf]),
    "an infinity first": ([np.inf, 2.0], [2.0, np.inf]),
    "an infinity last": ([3.0, -np.inf], [-np.inf, 3.0]),
    "zeros": ([0.0, 0.0, 2.0, 3.0], [0.0, 0.0, 0.0, 0.0]),
}


@pytest.mark.parametrize("line", sorted(EXTREME_LINES))
def test_product_gradients_where_the_running_product_underflows_or_is_infinite(line: str) -> None:
    """The gradient of a running product is the product of the other elements, computed without
    dividing by the element (found 2026-11-27: ``ct * out / x`` gave ``[0, 0]`` for a product
    underflowing to 0, where it is ``[1e-100, 1e-300]``, and NaN next to an infinity); JAX's."""
    values, want = EXTREME_LINES[line]
    x = np.array(values)
    for f in (lambda v: dnp.prod(v), lambda v: dnp.cumprod(v)[-1], lambda v: dnp.cumprod(v[::-1])[-1]):
        np.testing.assert_allclose(dsl.grad(f)(x), want, rtol=1e-12, err_msg=line)
    weighted = lambda np_, v: (np_.cumprod(v) * np_.arange(1.0, v.shape[0] + 1)).sum()  # noqa: E731
    jax_grad = np.asarray(jax.grad(lambda v: weighted(jnp, v))(jnp.asarray(x)))
    np.testing.assert_allclose(dsl.grad(lambda v: weighted(dnp, v))(x), jax_grad, rtol=1e-12, err_msg=line)
    tiny = np.array([1e-30, 1e-20], np.float32)  # forward mode: the product of the others, in float32
    np.testing.assert_allclose(dsl.jacfwd(dnp.cumprod)(tiny), [[1.0, 0.0], [1e-20, 1e-30]], rtol=1e-6)
