"""A 3-layer MLP forward pass, compiled by dslc and checked against NumPy.

Run: python samples/mlp_forward.py
"""

from __future__ import annotations

import time

import numpy as np

import dsl
import dsl.numpy as dnp


@dsl.compile
def mlp(x, params):
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:  # Python control flow on Python values is unrolled
            h = dsl.nn.gelu(h)
    return dsl.nn.log_softmax(h, axis=-1)


def mlp_numpy(x, params):
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))
    h = h - h.max(axis=-1, keepdims=True)
    return h - np.log(np.exp(h).sum(axis=-1, keepdims=True))


def main() -> None:
    rng = np.random.default_rng(0)
    sizes = [784, 256, 128, 10]
    params = [
        (
            (rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32),
            np.zeros(n, dtype=np.float32),
        )
        for m, n in zip(sizes[:-1], sizes[1:])
    ]
    x = rng.standard_normal((512, 784)).astype(np.float32)

    t0 = time.perf_counter()
    out = mlp(x, params)
    t1 = time.perf_counter()
    out = mlp(x, params)
    t2 = time.perf_counter()
    want = mlp_numpy(x, params)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    print(f"output {out.shape} {out.dtype}: matches NumPy (max abs diff {np.abs(out - want).max():.2e})")
    print(f"first call (trace + compile) {t1 - t0:.2f} s, second call {1e3 * (t2 - t1):.2f} ms")
    print("memory plan of the compiled program:")
    print(mlp.lower(x, params).memory_plan())
    _ = dnp  # dsl.numpy is what a user writes array code with; gelu/log_softmax come from dsl.nn


if __name__ == "__main__":
    main()
