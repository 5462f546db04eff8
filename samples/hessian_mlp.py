"""Second derivative of a 6-layer tanh MLP with respect to its input (the physics-informed setting).

Run: python samples/hessian_mlp.py

``u(params, x)`` maps a batch of 1-D points ``x`` (shape ``(N, 1)``) to ``(N, 1)``. The rows are
independent, so the gradient of ``u(params, x).sum()`` w.r.t. ``x`` is ``du/dx`` at every point, and
the gradient of that gradient's sum is ``d2u/dx2`` at every point: two nested reverse sweeps.
Only the input derivative is asked for, so dslc computes no weight-gradient matmul at either order;
the "unpruned" program below asks for (and returns) the weight gradients too, as an eager framework
without pruning would compute them (PyTorch issue 56500 / PR 82544).
"""

from __future__ import annotations

import numpy as np

import dsl
import dsl.numpy as dnp

SIZES = (1, 32, 32, 32, 32, 32, 1)  # 6 Linear layers, tanh between them


def u(params, x):
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = dnp.tanh(h)
    return h


def du_dx(params, x):
    return dsl.grad(lambda x: u(params, x).sum())(x)


@dsl.compile
def d2u_dx2(params, x):
    return dsl.grad(lambda x: du_dx(params, x).sum())(x)


@dsl.compile
def d2u_dx2_unpruned(params, x):
    """The same second derivative, but both sweeps also compute every weight gradient (returned)."""

    def first(x, params):
        gx, gparams = dsl.grad(lambda x, p: u(p, x).sum(), argnums=(0, 1))(x, params)
        return gx.sum(), gparams

    (d2u, outer_gparams), inner_gparams = dsl.grad(first, argnums=(0, 1), has_aux=True)(x, params)
    return d2u, outer_gparams, inner_gparams


def init_params(rng: np.random.Generator, dtype=np.float64) -> list[tuple[np.ndarray, np.ndarray]]:
    shapes = zip(SIZES[:-1], SIZES[1:])
    return [
        ((rng.standard_normal((m, n)) / np.sqrt(m)).astype(dtype), 0.1 * rng.standard_normal(n).astype(dtype))
        for m, n in shapes
    ]


def u_numpy(params, x: np.ndarray) -> np.ndarray:
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = np.tanh(h)
    return h


def second_difference(params, x: np.ndarray, h: float = 1e-4) -> np.ndarray:
    return (u_numpy(params, x + h) - 2 * u_numpy(params, x) + u_numpy(params, x - h)) / h**2


def matmul_count(fn, *args) -> int:
    return fn.lower(*args).ir("optimized").count('"dsl.matmul"')


def main() -> None:
    rng = np.random.default_rng(0)
    params = init_params(rng)
    x = np.linspace(-2.0, 2.0, 64).reshape(-1, 1)
    d2u = d2u_dx2(params, x)
    fd = second_difference(params, x)
    err = np.abs(d2u - fd).max() / np.abs(fd).max()
    assert d2u.shape == x.shape and err < 1e-5, f"d2u/dx2 differs from finite differences: {err:.2e}"
    print(f"d2u/dx2 at {x.shape[0]} points matches float64 central differences (max rel. error {err:.1e})")
    pruned, full = matmul_count(d2u_dx2, params, x), matmul_count(d2u_dx2_unpruned, params, x)
    assert pruned < full, (pruned, full)
    print(
        f"matmuls in the optimized program: {pruned} pruned (input derivative only) vs {full} unpruned "
        f"(u itself has {len(params)})"
    )
    plan = d2u_dx2.lower(params, x).memory_plan()
    print(f"pruned program memory plan: peak {plan.peak_bytes} bytes vs naive {plan.naive_bytes} bytes")


if __name__ == "__main__":
    main()
