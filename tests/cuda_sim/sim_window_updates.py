"""In-place window updates on ``target="cuda"`` in the simulator (``compiler/kernel/window.py``: the
kernel of an update computed over its base's buffer loops over the window only): a loop's
``c[i] = c[i] * 2 + 1`` (static and traced ``i``) and updates of a dying matmul result (a traced
row, a traced band added to, a strided static window), in-place on and off, against the CPU."""

from __future__ import annotations

import numpy as np
import pytest

import dsl

RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 5)).astype(np.float32)
K = 4


def rows_static(x):
    c = x * 1.0
    for i in range(K):
        c[i] = c[i] * 2 + 1
    return c


def rows_traced(x):
    c = x * 1.0

    def body(i, c):
        c[i] = c[i] * 2 + 1
        return c

    return dsl.fori_loop(0, K, body, c)


def over_matmul(x, v, w, i):
    c = x @ x.T
    c[i] = v
    c[i : i + 2] += w
    c[1:5:3, ::2] = 2.0 * v[:3]
    return c @ x


@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "no-inplace"])
def test_window_updates_match_the_cpu(inplace: bool) -> None:
    for fn in (rows_static, rows_traced):
        got = dsl.compile(fn, target="cuda", inplace=inplace)(X)
        np.testing.assert_array_equal(got, dsl.compile(fn, target="cpu", inplace=inplace)(X))
    x, v, w = RNG.standard_normal((6, 6)), RNG.standard_normal(6), RNG.standard_normal((2, 6))
    for i in (np.int64(2), np.int64(-1), np.int64(9)):
        got = dsl.compile(over_matmul, target="cuda", inplace=inplace)(x, v, w, i)
        want = dsl.compile(over_matmul, target="cpu", inplace=inplace)(x, v, w, i)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
