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


def test_softmax_cross_entropy_over_8192_classes_is_one_band():
    """Rows of 8192 elements join a band (``compilation.CUDA_ROW_MAX``): softmax + cross-entropy's
    forward and backward over 8192 classes is one band kernel whose exp row stays in shared memory;
    its loss and gradient against the CPU's."""

    def xent(z, y):
        s = z - dsl.stop_gradient(z.max(axis=-1, keepdims=True))
        return -(y * (s - dnp.log(dnp.exp(s).sum(axis=-1, keepdims=True)))).sum() / z.shape[0]

    rng = np.random.default_rng(8)
    z = rng.standard_normal((3, 8192)).astype(np.float32) * 3.0
    y = np.eye(8192, dtype=np.float32)[[5, 8000, 77]]
    step = dsl.value_and_grad(xent)
    lowered = dsl.compile(step, target="cuda").lower(z, y)
    bands = lowered._program.compilation.fusion.bands
    assert len(bands) == 1 and bands[0].rows == 3, bands
    loss, grad = dsl.compile(step, target="cuda")(z, y)
    want_loss, want_grad = dsl.compile(step, target="cpu")(z, y)
    np.testing.assert_allclose(float(np.asarray(loss)), float(want_loss), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(grad), want_grad, rtol=1e-4, atol=1e-8)
