"""Block reductions of strategy "shuffle" (``compiler/codegen/cuda/printer.py``) in the simulator, which
has no warp shuffles: the generated module holds both forms and runs the shared-memory tree (its
``SIM`` branch), the same bits as a module built with ``DSL_CUDA_SHUFFLE=0``, and NumPy's values.
On a GPU (this suite's second run) the shuffles run, close to NumPy. ``tests/test_cuda_shuffle.py``
checks the shuffles' order of combines, and on a GPU against the tree."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
from runtime.devices import simulator_enabled

RNG = np.random.default_rng(11)
CASES = {  # a block per output, the split reduction, band rows of 128 threads (2 warps) and of 4
    "block sums": (lambda x: x.sum(axis=1), (4, 300)),
    "split max": (lambda x: x.max(), (1 << 16,)),
    "rows of 100": (lambda x: x - x.mean(axis=1, keepdims=True), (6, 100)),
    "rows of 3": (lambda x: x - x.max(axis=1, keepdims=True), (20, 3)),
}


def _run(fn, x: np.ndarray, shuffle: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[np.ndarray, str]:
    monkeypatch.setenv("DSL_CUDA_SHUFFLE", "1" if shuffle else "0")
    compiled = dsl.compile(fn, target="cuda")
    source = compiled.lower(x).source()
    got = compiled(x)
    return np.asarray(got.copy_to_host() if hasattr(got, "copy_to_host") else got), source


@pytest.mark.parametrize("name", list(CASES))
def test_shuffle_modules_run_the_tree_in_the_simulator(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fn, shape = CASES[name]
    x = RNG.standard_normal(shape).astype(np.float32)
    got, source = _run(fn, x, True, monkeypatch)
    tree, tree_source = _run(fn, x, False, monkeypatch)
    assert "cuda.shfl_down_sync" in source and "if SIM:" in source, source
    assert "cuda.shfl_down_sync" not in tree_source
    want = np.asarray(fn(x.astype(np.float64)))  # NumPy's, in float64
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1.0, float(np.max(np.abs(want)))))
    if simulator_enabled():  # both modules ran the tree
        np.testing.assert_array_equal(got, tree)
