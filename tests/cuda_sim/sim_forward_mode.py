"""Forward mode and batching on ``target="cuda"``: a jvp, a Jacobian and per-example Hessians
(``vmap(jacfwd(jacrev(u)))``, its matmuls over all the examples' rows) against the CPU backend. Tiny
shapes: the simulator runs every thread in Python."""

from __future__ import annotations

import numpy as np

import dsl
import dsl.numpy as dnp

rng = np.random.default_rng(5)
W1, B1, W2 = rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal((4, 1))


def u(x):
    return (dnp.tanh(x @ W1 + B1) @ W2).sum()


def both(transform, *args):
    return transform(dsl.compile(u, target="cuda"))(*args), transform(dsl.compile(u, target="cpu"))(*args)


def test_jvp_and_jacobian_match_the_cpu() -> None:
    x, t = rng.standard_normal(3), rng.standard_normal(3)
    gpu, cpu = both(lambda f: lambda x, t: dsl.jvp(f, (x,), (t,)), x, t)
    np.testing.assert_allclose(gpu, cpu, rtol=1e-12)
    gpu, cpu = both(lambda f: dsl.jacrev(dsl.jacfwd(f)), x)
    np.testing.assert_allclose(gpu, cpu, rtol=1e-12)


def test_per_example_hessians_match_the_cpu() -> None:
    xs = rng.standard_normal((4, 3))
    gpu, cpu = both(lambda f: dsl.vmap(dsl.jacfwd(dsl.jacrev(f))), xs)
    assert gpu.shape == (4, 3, 3)
    np.testing.assert_allclose(gpu, cpu, rtol=1e-12)
