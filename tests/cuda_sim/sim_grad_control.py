"""Gradients through loops and branches on ``target="cuda"`` in the simulator: the joint program's
forward scan (stacking residuals), backward scan (reverse, accumulating the consts' cotangents) and
backward ``if`` (compiler/autodiff_control.py), against the reference interpreter on the same joint
IR. Tiny shapes: the simulator is slow."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
from compiler.autodiff import GradSpec, grad_function
from compiler.interpreter import interpret
from dsl.compile import trace_function

RNG = np.random.default_rng(5)
W = RNG.standard_normal((3, 3)) * 0.5
XS = RNG.standard_normal((3, 2, 3))


def loss(w, xs):
    def step(h, x):
        h = dsl.cond(x.sum() > 0.0, lambda h: dnp.tanh(h @ w + x), lambda h: h * x - 0.5, h)
        h = dsl.fori_loop(0, 2, lambda i, d: dnp.sin(d) * 0.5 + w[0], h)
        return h, (h * h).sum()

    h, sums = dsl.scan(step, xs[0], xs, reverse=True)
    return (sums * sums).sum() + (h * w[1]).sum()


@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "no-inplace"])
def test_gradients_through_loops_on_cuda(inplace: bool) -> None:
    want = interpret(grad_function(trace_function(loss, (W, XS)).func, GradSpec((0, 1))), [W, XS])
    got = dsl.compile(dsl.grad(loss, argnums=(0, 1)), target="cuda", inplace=inplace)(W, XS)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-10, atol=1e-12)
