"""Limits: a 10,000-op program compiles in seconds (the passes are linear), and transforms nest to
third and fourth order.

The big program runs its generated module as plain Python (``python_kernels``): this times our
compiler (trace, passes, plan, code generation), linear at ~0.3 ms per op. Numba's compile time is
separate and grows with kernel size: the first call of the same program (12 kernels of ~400 fused
ops each) takes ~45 s in Numba on a 2-core machine, so it is not run here.
"""

from __future__ import annotations

import time

import numpy as np
from helpers import python_kernels

import dsl
import dsl.numpy as dnp

N_STEPS = 1500  # ~10,500 traced ops: each step is several primitives (sin, mul, add, constants)


def _long(x, w):
    for i in range(N_STEPS):
        if i % 300 == 299:
            x = dnp.tanh(x @ w)
        elif i % 97 == 3:
            x = x - x.mean(axis=0)
        else:
            x = dnp.sin(x) * 1.01 + 0.1
    return x


def _long_numpy(x, w):
    for i in range(N_STEPS):
        if i % 300 == 299:
            x = np.tanh(x @ w)
        elif i % 97 == 3:
            x = x - x.mean(axis=0)
        else:
            x = np.sin(x) * 1.01 + 0.1
    return x


def test_a_10000_op_program_compiles_quickly_and_right() -> None:
    x, w = np.linspace(-1, 1, 64).reshape(8, 8), np.eye(8) * 0.5 + 0.01
    f = dsl.compile(_long)
    start = time.perf_counter()
    with python_kernels():
        lowered = f.lower(x, w)
        got = f(x, w)
    seconds = time.perf_counter() - start
    n_ops = sum(1 for line in lowered.ir("traced").splitlines() if '"dsl.' in line)
    print(f"{n_ops} traced ops compiled in {seconds:.1f} s")  # ~3 s on 2 cores
    assert n_ops >= 10_000  # the time is printed, not asserted: benchmarks measure speed
    np.testing.assert_allclose(got, _long_numpy(x, w), rtol=1e-9, atol=1e-12)


def test_third_and_fourth_order_derivatives() -> None:
    def f(x):
        return dnp.sin(x) * x * x

    x = np.array(0.7)
    third = -np.cos(x) * x * x - 6 * np.sin(x) * x + 6 * np.cos(x)
    fourth = np.sin(x) * x * x - 8 * np.cos(x) * x - 12 * np.sin(x)
    np.testing.assert_allclose(dsl.grad(dsl.grad(dsl.grad(f)))(x), third, rtol=1e-12)
    np.testing.assert_allclose(dsl.grad(dsl.grad(dsl.grad(dsl.grad(f))))(x), fourth, rtol=1e-12)


def test_hessian_of_a_gradient() -> None:
    def loss(x):
        return (dnp.sin(x) * x[::-1]).sum() + (x**3).sum()

    g = dsl.grad(loss)
    xv = np.linspace(0.1, 0.9, 4)
    hess = dsl.hessian(lambda x: g(x).sum())(xv)

    def grad_of_sum(x):
        return dsl.grad(lambda y: g(y).sum())(x)

    h = 1e-5
    fd = np.stack([(grad_of_sum(xv + h * e) - grad_of_sum(xv - h * e)) / (2 * h) for e in np.eye(4)])
    assert hess.shape == (4, 4)
    np.testing.assert_allclose(hess, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(hess, hess.T, rtol=1e-12, atol=1e-12)
