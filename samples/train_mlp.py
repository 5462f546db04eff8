"""Train a small MLP with a compiled step: value_and_grad w.r.t. the params, then an in-place SGD update.

Run: python samples/train_mlp.py

The step function differentiates ``loss_fn`` with respect to its first argument only, and itself
does not differentiate ``params``: so ``p -= lr * g`` is allowed and writes into the caller's arrays.
"""

from __future__ import annotations

import numpy as np

import dsl
import dsl.numpy as dnp

SIZES = (2, 32, 32, 1)  # two hidden tanh layers


def mlp(params, x):
    """``params`` is a flat list ``[w1, b1, w2, b2, ...]``."""
    h = x
    n = len(params) // 2
    for i in range(n):
        h = h @ params[2 * i] + params[2 * i + 1]
        if i < n - 1:
            h = dnp.tanh(h)
    return h


def loss_fn(params, x, y):
    return ((mlp(params, x) - y) ** 2).mean()


@dsl.compile
def step(params, x, y, lr):
    loss, grads = dsl.value_and_grad(loss_fn)(params, x, y)
    for p, g in zip(params, grads):
        p -= lr * g  # params are not differentiated here: the caller's arrays are updated in place
    return loss


def init_params(rng: np.random.Generator, dtype=np.float32) -> list[np.ndarray]:
    params = []
    for m, n in zip(SIZES[:-1], SIZES[1:]):
        params += [(rng.standard_normal((m, n)) / np.sqrt(m)).astype(dtype), np.zeros(n, dtype)]
    params[-2] *= dtype(0.1)  # a small output layer keeps full-batch SGD at lr=0.1 stable
    return params


def make_data(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    x = rng.uniform(-2.0, 2.0, (n, SIZES[0])).astype(np.float32)
    y = np.sin(1.5 * x[:, :1]) * np.cos(x[:, 1:2])
    return x, y.astype(np.float32)


def loss_numpy(params, x, y) -> float:
    h = x
    n = len(params) // 2
    for i in range(n):
        h = h @ params[2 * i] + params[2 * i + 1]
        if i < n - 1:
            h = np.tanh(h)
    return float(((h - y) ** 2).mean())


def train(params, x, y, steps: int, lr: float) -> list[float]:
    return [float(step(params, x, y, lr)) for _ in range(steps)]


def check_one_step_in_float64(params, x, y, rng: np.random.Generator) -> float:
    """On a float64 copy: the step's update (lr=1) is minus the gradient; compare it with central
    differences of the NumPy loss along random directions. Returns the worst relative error."""
    p64 = [p.astype(np.float64) for p in params]
    x64, y64 = x[:8].astype(np.float64), y[:8].astype(np.float64)
    before = [p.copy() for p in p64]
    loss = float(step(p64, x64, y64, 1.0))
    assert abs(loss - loss_numpy(before, x64, y64)) <= 1e-12 * max(1.0, abs(loss))
    grads = [b - a for b, a in zip(before, p64)]
    eps, worst = 1e-6, 0.0
    for _ in range(3):
        d = [rng.standard_normal(p.shape) for p in before]
        plus = loss_numpy([p + eps * v for p, v in zip(before, d)], x64, y64)
        minus = loss_numpy([p - eps * v for p, v in zip(before, d)], x64, y64)
        numeric = (plus - minus) / (2 * eps)
        analytic = sum(float(np.sum(g * v)) for g, v in zip(grads, d))
        worst = max(worst, abs(numeric - analytic) / max(1e-8, abs(numeric)))
    assert worst < 1e-6, f"gradient of one step differs from finite differences: {worst:.2e}"
    return worst


def report_memory(params, x, y, lr: float) -> None:
    lowered = step.lower(params, x, y, lr)
    plan = lowered.memory_plan()
    print(
        f"step memory plan: peak {plan.peak_bytes / 1024:.1f} KiB vs naive {plan.naive_bytes / 1024:.1f} KiB "
        f"({plan.naive_bytes / max(plan.peak_bytes, 1):.1f}x less)"
    )
    updates = [line for line in lowered.explain_inplace().splitlines() if "-=" in line]
    assert len(updates) == len(params), updates  # "in place" unless DSL_NO_INPLACE=1 asks for copies
    print("parameter updates:")
    print("\n".join("  " + line.strip() for line in updates))


def main() -> None:
    rng = np.random.default_rng(0)
    params = init_params(rng)
    x, y = make_data(rng, 256)
    worst = check_one_step_in_float64(params, x, y, rng)
    print(f"one step's gradient matches central differences in float64 (worst rel. error {worst:.1e})")
    ids = [id(p) for p in params]
    losses = train(params, x, y, steps=200, lr=0.1)
    assert [id(p) for p in params] == ids and all(p.dtype == np.float32 for p in params)
    np.testing.assert_allclose(loss_numpy(params, x, y), float(step(params, x, y, 0.0)), rtol=1e-5)
    assert losses[-1] < 0.2 * losses[0], f"loss did not go down enough: {losses[0]:.4f} -> {losses[-1]:.4f}"
    for i in (0, 50, 100, 150, 199):
        print(f"step {i:3d}: loss {losses[i]:.5f}")
    print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} ({losses[0] / losses[-1]:.1f}x lower) in 200 steps")
    report_memory(params, x, y, 0.1)


if __name__ == "__main__":
    main()
