"""A long run of row-local steps on ``target="cuda"`` in the simulator: the rows pass cuts it into
bands of at most ``BAND_MAX_GROUPS`` groups (``compiler/passes/rows.py``), each one kernel whose
rows stay in a block, the next band reading the earlier one's rows from memory; against NumPy."""

from __future__ import annotations

import numpy as np

import dsl
import dsl.numpy as dnp
from compiler.passes import rows

STEPS = 12  # 24 row-local groups: two bands


def normalize(x):
    for _ in range(STEPS):
        x = dnp.tanh(x * 0.9 + 0.1)
        x = x - x.mean(axis=1, keepdims=True) * 0.5
    return x


def test_a_long_row_local_chain_is_several_bands_and_matches_numpy():
    x = np.random.default_rng(3).standard_normal((6, 16))
    compiled = dsl.compile(normalize, target="cuda")
    lowered = compiled.lower(x)
    bands = lowered._program.compilation.fusion.bands
    assert len(bands) == 2 and all(len(b.groups) <= rows.BAND_MAX_GROUPS for b in bands)
    want = x
    for _ in range(STEPS):
        want = np.tanh(want * 0.9 + 0.1)
        want = want - want.mean(axis=1, keepdims=True) * 0.5
    np.testing.assert_allclose(np.asarray(compiled(x)), want, rtol=1e-12, atol=1e-12)
