"""Float32 sums on CUDA accumulate in float64 (``Reducer.accumulator``) in every reduction strategy:
a thread per output, a block and its tree per output, two passes, the columns kernel; forward and
backward. At the simulator's sizes a float32 accumulator's error is made visible by the values: a
first element of 1 and many of 3e-8, each below half an ulp of 1, which a float32 accumulator holding
1 drops (NumPy's pairwise sum and a float64 accumulator keep them)."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
from compiler.kernel.cuda import loops

SMALL = 3e-8
RTOL = 2.0**-22  # a float64 accumulator: one rounding of the float32 result (and of its prologue)


def spiked(*shape: int, axis: int = -1) -> np.ndarray:
    """``SMALL`` everywhere and 1 at the start of every reduction along ``axis``."""
    x = np.full(shape, SMALL, np.float32)
    index = [slice(None)] * len(shape)
    index[axis] = 0
    x[tuple(index)] = 1.0
    return x


def close(got, want) -> None:
    got = np.asarray(got)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=0)


def on_cuda(fn, *args):
    return dsl.compile(fn, target="cuda")(*args)


@pytest.mark.parametrize(
    "shape,axis",
    [
        ((7000,), None),  # two passes (SPLIT_MIN made small): chunks into partials, a tree per output
        ((4, 3000), 1),  # a block and a tree per output row
        ((16, 100), 1),  # a thread per output, a serial loop
        ((3000, 4), 0),  # a leading reduced axis: a block per output
        ((3000, 8), 0),  # the innermost axis kept: the columns kernel, chunks into partials
    ],
)
def test_sums_keep_small_terms(shape, axis, monkeypatch: pytest.MonkeyPatch) -> None:
    # a GPU's 65,536 elements for two passes took the simulator two minutes; 7,000 in chunks of 512
    # take the same path (the small terms' 2e-4 still far above the tolerance)
    monkeypatch.setattr(loops, "SPLIT_MIN", 4096)
    monkeypatch.setattr(loops, "SPLIT_CHUNK", 512)
    x = spiked(*shape, axis=0 if axis is None else axis)
    w = x.astype(np.float64)
    got = on_cuda(lambda a: (a.sum(axis=axis), (a * 2).sum(axis=axis, keepdims=True), a.mean(axis=axis)), x)
    close(got[0], w.sum(axis=axis))
    close(got[1], (w * 2).sum(axis=axis, keepdims=True))
    close(got[2], w.mean(axis=axis))


def test_softmax_row_sums() -> None:
    z = np.log(spiked(2, 3000)).astype(np.float32)
    e = np.exp(z.astype(np.float64) - z.max(axis=1, keepdims=True))
    close(on_cuda(lambda z: dsl.nn.softmax(z, axis=1), z), e / e.sum(axis=1, keepdims=True))


def test_bias_gradient_in_the_backward() -> None:
    x, b = spiked(3000, 8, axis=0), np.ones(8, np.float32)
    got = on_cuda(dsl.grad(lambda b, x: (x * b).sum(), argnums=0), b, x)
    close(got, x.astype(np.float64).sum(axis=0))


def test_max_and_min_are_exact() -> None:
    x = np.random.default_rng(0).standard_normal((300, 20)).astype(np.float32)
    got = on_cuda(lambda a: (a.max(), a.min(axis=0), dnp.max(a, axis=1)), x)
    for g, e in zip(got, (x.max(), x.min(axis=0), x.max(axis=1)), strict=True):
        assert np.array_equal(g, e)
