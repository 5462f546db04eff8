"""NumPy-assisted kernels (compiler/codegen/arraylevel.py): big groups with libm-bound math (float64
here: float32 exp/tanh have vectorized loops, tests/test_vecmath.py) run as NumPy calls in object
mode, with the same results as the loop code and the reference interpreter."""

from __future__ import annotations

import numpy as np
from helpers import interpret_fn

import dsl
import dsl.numpy as dnp

rng = np.random.default_rng(11)


def f(a, w, b):
    h = a @ w  # a buffer the tanh kernel may overwrite in place
    y = dnp.tanh(h + b)
    return (y @ w.T).sum(axis=1), dnp.exp(-y) * 2.0


def test_big_transcendental_group_uses_numpy_and_matches() -> None:
    a = rng.standard_normal((128, 256))
    w = rng.standard_normal((256, 256)) / 16
    b = rng.standard_normal(256)
    on = dsl.compile(f)
    source = on.lower(a, w, b).source()
    assert "numba.objmode()" in source and '_PRIMS["tanh"]' in source
    plan = on.lower(a, w, b).memory_plan()
    assert any(r.reused_from for r in plan.buffers)  # the NumPy kernel writes over its dying input
    got_on, got_off = on(a, w, b), dsl.compile(f, inplace=False)(a, w, b)
    want = interpret_fn(f, a, w, b)
    for x, y, z in zip(got_on, got_off, want):
        np.testing.assert_array_equal(x, y)
        np.testing.assert_allclose(x, z, rtol=1e-5, atol=1e-5)


def test_small_groups_stay_numba_loops() -> None:
    x = rng.standard_normal((8, 8))
    assert "objmode" not in dsl.compile(lambda x: dnp.tanh(x) + 1).lower(x).source()
