"""Loops and branches on ``target="cuda"`` in the simulator: fori_loop, scan and cond, values and
gradients in float64, with in-place on and off, against the reference interpreter running the traced
region IR (and the CPU backend). Tiny shapes: the simulator is slow."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
from compiler.compilation import option_defaults
from compiler.interpreter import interpret
from dsl.compile import trace_function

RNG = np.random.default_rng(3)
W = RNG.standard_normal((3, 3)) * 0.5
XS = RNG.standard_normal((4, 2, 3))


def loss(w, xs):
    def step(h, x):
        h = dnp.tanh(h @ w + x)
        return h, h.sum()

    h, sums = dsl.scan(step, dnp.zeros((2, 3)), xs)
    h = dsl.fori_loop(0, 2, lambda i, c: c * 0.5 + i, h)
    picked = dsl.cond(sums.sum() > 0.0, lambda a: a * 2.0, lambda a: -a, h)
    return (picked * picked).sum() + (sums * sums).sum()


@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "no-inplace"])
def test_loops_and_branches_on_cuda(inplace: bool) -> None:
    want = interpret(trace_function(loss, (W, XS)).func, [W, XS])[0]
    got = dsl.compile(loss, target="cuda", inplace=inplace)(W, XS)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
    grads = dsl.grad(loss, argnums=(0, 1))
    on_cpu = dsl.compile(grads, target="cpu")(W, XS)
    on_gpu = dsl.compile(grads, target="cuda", inplace=inplace)(W, XS)
    for g, c in zip(on_gpu, on_cpu, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(c), rtol=1e-10)


def branchy(w, xs):
    """A cond per scan step and one after it, with sqrt and log defined only in the taken branch:
    cheap, so if_to_select runs both and selects (no predicate read back); its values and gradients
    match the native ifs (if_to_select off)."""

    def step(h, x):
        s = x.sum()
        h = dsl.cond(s > 0.0, lambda a: dnp.sqrt(a * s) + dnp.abs(a @ w), lambda a: a * 0.5 + dnp.sqrt(-s), h)
        return h, h.sum()

    h, sums = dsl.scan(step, dnp.ones((2, 3)), xs)
    y = dsl.cond(sums.sum() > 0.0, lambda a: dnp.log(a), lambda a: dnp.log(-a), h + 0.5)
    return (y * y).sum() + (sums * sums).sum()


XS_SIGNS = XS * np.array([1.0, -1.0, 1.0, -1.0])[:, None, None]  # steps taking each branch


@pytest.mark.parametrize("select", [True, False], ids=["if_to_select", "native-if"])
def test_cheap_branches_on_cuda(select: bool) -> None:
    want = interpret(trace_function(branchy, (W, XS_SIGNS)).func, [W, XS_SIGNS])[0]
    grads = dsl.grad(branchy, argnums=(0, 1))
    on_cpu = dsl.compile(grads, target="cpu")(W, XS_SIGNS)
    with option_defaults(if_to_select=select):
        compiled = dsl.compile(branchy, target="cuda")
        run = compiled.lower(W, XS_SIGNS).source().split("    def run(")[1]
        assert ("_scalar(" in run) is not select  # converted: no predicate read back
        np.testing.assert_allclose(np.asarray(compiled(W, XS_SIGNS)), want, rtol=1e-12)
        on_gpu = dsl.compile(grads, target="cuda")(W, XS_SIGNS)
    for g, c in zip(on_gpu, on_cpu, strict=True):
        assert np.isfinite(np.asarray(g)).all()
        np.testing.assert_allclose(np.asarray(g), np.asarray(c), rtol=1e-10)


@pytest.mark.parametrize("name", ["fori", "scan", "cond", "nested"])
def test_a_body_writing_an_enclosing_array_on_cuda(name: str) -> None:
    """Enclosing arrays written in bodies become carries (``dsl/control.py``): the CUDA backend gives
    the CPU's values and leaves the caller's array as the CPU does (``test_control_flow.WRITERS``)."""
    import test_control_flow as cpu_tests

    f, a_shape, x_shape = cpu_tests.WRITERS[name]
    a, x = RNG.standard_normal(a_shape), RNG.standard_normal(x_shape)
    a_cpu, a_gpu = a.copy(), a.copy()
    want = dsl.compile(f, target="cpu")(a_cpu, x)
    got = dsl.compile(f, target="cuda")(a_gpu, x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12)
    np.testing.assert_allclose(a_gpu, a_cpu, rtol=1e-12)
