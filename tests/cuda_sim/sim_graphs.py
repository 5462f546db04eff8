"""The eager path of the CUDA executable where graphs are off (``runtime/cuda_graphs.py``): always in
the simulator (which has none), and on a GPU unless ``DSL_CUDA_GRAPHS=1``. The executable launches
every kernel on every call, captures nothing, and its results match the CPU backend's."""

from __future__ import annotations

import os

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
from runtime import cuda_graphs

RNG = np.random.default_rng(5)


def _step(w, x):
    loss = dnp.tanh(x @ w).sum()
    w -= 0.1 * x.T @ dnp.tanh(x @ w)
    return loss


def test_graphs_off_launches_eagerly(monkeypatch: pytest.MonkeyPatch) -> None:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        monkeypatch.setenv("DSL_CUDA_GRAPHS", "1")  # asked for, but the simulator has none
    if cuda_graphs.graphs_enabled():
        pytest.skip("graphs are on here: tests/test_cuda_graphs.py checks them")
    w0 = RNG.standard_normal((8, 4)).astype(np.float32)
    xs = [RNG.standard_normal((3, 8)).astype(np.float32) for _ in range(3)]
    on_gpu, on_cpu = dsl.compile(_step, target="cuda"), dsl.compile(_step, target="cpu")
    w_gpu, w_cpu = w0.copy(), w0.copy()
    for x in xs:
        np.testing.assert_allclose(on_gpu(w_gpu, x), on_cpu(w_cpu, x), rtol=1e-5)
        np.testing.assert_allclose(w_gpu, w_cpu, rtol=1e-5, atol=1e-6)
    executable = on_gpu.lower(w0, xs[0]).program.executable
    assert executable.graph is None
    assert executable.eager_reason == cuda_graphs.eager_reason(False, 0, 0, 0)  # off or simulator
