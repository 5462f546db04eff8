"""An in-place optimizer step: ``w -= lr * g`` updates the caller's array.

Run: python samples/sgd_step.py
"""

from __future__ import annotations

import numpy as np

import dsl


@dsl.compile
def sgd_step(w, g, lr):
    w -= lr * g  # w is not differentiated here, so the caller's array is updated
    return (w * w).sum()


def main() -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal(1000).astype(np.float32)
    g = rng.standard_normal(1000).astype(np.float32)
    expected = w - np.float32(0.1) * g
    norm = sgd_step(w, g, 0.1)
    np.testing.assert_allclose(w, expected, rtol=1e-6)
    np.testing.assert_allclose(norm, (expected * expected).sum(), rtol=1e-4)
    print(f"w updated in place; |w|^2 = {float(norm):.4f}")
    print(sgd_step.lower(w, g, 0.1).explain_inplace())


if __name__ == "__main__":
    main()
