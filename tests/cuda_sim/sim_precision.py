"""Float matmuls on CUDA: ``dsl.compile(..., precision=...)`` (``../shared/api.md``, "Options for the
GPU") and results written through a transposing epilogue. In the simulator every matmul runs the
generated kernel, in full precision whatever ``precision`` says; on a GPU float matmuls run on cuBLAS
(``runtime/cublas.py``): "highest" in full float32, "tf32" with TensorFloat-32 products on a GPU that
has them (compute capability 8.0 on), and a result laid out transposed as one ``O = A @ B`` call."""

from __future__ import annotations

import os

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
from runtime.devices import simulator_enabled

RNG = np.random.default_rng(5)


def _tf32_hardware() -> bool:
    """Whether matmuls given ``precision="tf32"`` may use TF32 here (a GPU of sm_80 on, not switched
    off by ``NVIDIA_TF32_OVERRIDE=0``)."""
    if simulator_enabled() or os.environ.get("NVIDIA_TF32_OVERRIDE") == "0":
        return False
    from numba import cuda

    return cuda.get_current_device().compute_capability >= (8, 0)


def test_precision_highest_is_float32_and_tf32_rounds_products() -> None:
    m, k, n = (4, 32, 4) if simulator_enabled() else (96, 512, 80)  # the simulator: Python threads
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    got = {
        p: np.asarray(dsl.compile(lambda x, y: x @ y, target="cuda", precision=p)(a, b))
        for p in ("highest", "tf32")
    }
    scale = np.max(np.abs(want))
    error = {p: np.max(np.abs(g - want)) / scale for p, g in got.items()}
    assert error["highest"] < 1e-5, error  # float32 products, float32 sums
    if _tf32_hardware():  # 10-bit mantissas in the products: about 1e-3 of the scale
        assert 1e-5 < error["tf32"] < 1e-2, error
    else:
        np.testing.assert_array_equal(got["tf32"], got["highest"])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_results_laid_out_transposed(dtype: type) -> None:
    a = RNG.standard_normal((6, 5)).astype(dtype)
    b = RNG.standard_normal((5, 7)).astype(dtype)
    batch_a = RNG.standard_normal((3, 6, 5)).astype(dtype)
    batch_b = RNG.standard_normal((3, 5, 7)).astype(dtype)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    got = dsl.compile(lambda x, y: (x @ y).T, target="cuda")(a, b)
    np.testing.assert_allclose(np.asarray(got), (a @ b).T, rtol=tol, atol=tol)
    got = dsl.compile(lambda x, y: dnp.swapaxes(x @ y, 1, 2), target="cuda")(batch_a, batch_b)
    np.testing.assert_allclose(np.asarray(got), np.swapaxes(batch_a @ batch_b, 1, 2), rtol=tol, atol=tol)
