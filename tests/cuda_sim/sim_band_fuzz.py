"""Random row programs, the shapes row fusion makes bands of (``compiler/kernel/cuda/bands.py``), compiled
for CUDA against the CPU, and with the row loops unrolled against plain (``DSL_CUDA_UNROLL``, bit for
bit): chains of row-wise steps over ``(rows, width)`` arrays, row reductions kept as ``(rows, 1)``
values and broadcast back, softmax, in-place updates of temporaries, and a loss summing several of
them, ``(rows, 1)`` ones included, with its gradients.

The program fuzzer (``tests/test_fuzz_programs.py``, run for CUDA by ``sim_fuzz.py``) draws steps of
every kind over unrelated shapes, and rarely makes a band whose members keep a row's value for each
other: a reduction member over one-element rows computed the band's register of it on the row's first
thread only, and the value and gradient were wrong (2026-11-27, found by a differential run of such
programs). Widths past 32 run the unrolled trips in the simulator (8 threads a row at most).
``DSL_FUZZ_BAND_SEEDS`` (default 8) programs, seeded 0, 1, ...; ``DSL_FUZZ_BAND_SEED`` starts elsewhere."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
from dsl import pytree

SEEDS = int(os.environ.get("DSL_FUZZ_BAND_SEEDS", "8"))
FIRST = int(os.environ.get("DSL_FUZZ_BAND_SEED", "0"))
WIDTHS = (5, 33, 37, 45, 64, 70)

UNARY: dict[str, Callable[[Any], Any]] = {
    "tanh": dnp.tanh,
    "exp of tanh": lambda a: dnp.exp(dnp.tanh(a)),
    "square": lambda a: a * a,
    "sigmoid": dsl.nn.sigmoid,
    "relu": dsl.nn.relu,
    "log1p abs": lambda a: dnp.log1p(dnp.abs(a)),
}
BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "max": dnp.maximum,
    "div": lambda a, b: a / (1.0 + dnp.abs(b)),
}
REDUCE: dict[str, Callable[[Any], Any]] = {
    "sum": lambda a: a.sum(axis=-1, keepdims=True),
    "max": lambda a: a.max(axis=-1, keepdims=True),
    "mean": lambda a: a.mean(axis=-1, keepdims=True),
    "log sum exp": lambda a: dnp.log(dnp.exp(a - 1.0).sum(axis=-1, keepdims=True)),
}


def program(seed: int) -> tuple[Callable[..., Any], str]:
    """A random loss of ``x``, ``y`` (rows x width) and ``w`` (width), and what it does."""
    rng = np.random.default_rng(seed)
    steps: list[tuple[str, ...]] = []
    for _ in range(int(rng.integers(4, 9))):
        kind = str(rng.choice(["unary", "binary", "reduce", "softmax", "in place"]))
        name = {"unary": UNARY, "binary": BINARY, "reduce": REDUCE}.get(kind)
        # operands: the newest values more often than the older (chains of steps make the bands)
        picks = [str(len(steps) + 3 - 1 - min(int(k), len(steps) + 2)) for k in rng.geometric(0.45, 2) - 1]
        steps.append((kind, str(rng.choice(list(name))) if name else "", *picks))

    def loss(x: Any, y: Any, w: Any) -> Any:
        values = [x, y, x * w]  # rows x width, and (rows, 1) ones as reductions make them
        for kind, name, i, j in steps:
            a, b = values[int(i) % len(values)], values[int(j) % len(values)]
            if kind == "unary":
                values.append(UNARY[name](a))
            elif kind == "binary":
                values.append(BINARY[name](a, b))
            elif kind == "reduce":
                values.append(REDUCE[name](a))
            elif kind == "softmax":
                values.append(dsl.nn.softmax(a if a.shape[-1] > 1 else b, axis=-1))
            else:  # an in-place update of a temporary (the program's own array), the wider one
                a, b = (b, a) if a.shape[-1] < b.shape[-1] else (a, b)
                t = a * 1.0
                t += b
                values.append(t)
        return sum((v * (1.0 + 0.1 * k)).sum() for k, v in enumerate(values[3:]))  # every step's

    return loss, f"seed {seed}: {steps}"


def _host(a: Any) -> np.ndarray:
    return np.asarray(a.copy_to_host() if hasattr(a, "copy_to_host") else a)


@pytest.mark.parametrize("seed", range(FIRST, FIRST + SEEDS))
def test_random_row_programs(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    loss, what = program(seed)
    rng = np.random.default_rng(1000 + seed)
    dtype = np.float64 if seed % 3 else np.float32
    rows, width = int(rng.integers(2, 6)), WIDTHS[seed % len(WIDTHS)]
    args = [rng.standard_normal(s).astype(dtype) for s in ((rows, width), (rows, width), (width,))]
    fn = dsl.value_and_grad(loss, argnums=(0, 1, 2)) if seed % 2 else loss
    got = {}
    for unroll in ("4", "1"):
        monkeypatch.setenv("DSL_CUDA_UNROLL", unroll)
        compiled = dsl.compile(fn, target="cuda")
        assert "_rows(" in compiled.lower(*args).source(), what  # (a band: what this fuzzes)
        got[unroll] = [_host(a) for a in pytree.flatten(compiled(*[np.copy(a) for a in args]))[0]]
    want = [np.asarray(a) for a in pytree.flatten(dsl.compile(fn, target="cpu")(*args))[0]]
    tol = 1e-9 if dtype == np.float64 else 2e-4
    for u, p, c in zip(got["4"], got["1"], want, strict=True):
        np.testing.assert_array_equal(u, p, err_msg=f"unrolled against plain, {what}")
        scale = max(1.0, float(np.max(np.abs(c))))
        np.testing.assert_allclose(u, c, rtol=tol, atol=tol * scale, err_msg=f"against the CPU, {what}")
