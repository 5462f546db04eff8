"""Indexing with traced integer scalars on ``target="cuda"`` in the simulator: reads, writes, windows
read by reductions and by a row band, gradients, a loop counter, a write into an argument; in-place on
and off; each against the CPU backend (itself checked against JAX in tests/test_dynamic_slice.py).
The start is loaded from its 0-d device buffer and clamped in the kernel body."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp

RNG = np.random.default_rng(0)
C = RNG.standard_normal((5, 4))
V = RNG.standard_normal(4)
W = RNG.standard_normal((2, 4))
STARTS = (np.int64(2), np.int64(7), np.int64(-1), np.int32(-9))  # inside, clamped, wrapped, int32


def both(fn, *args, **kwargs):
    """``fn`` compiled for CUDA and for the CPU, on copies of ``args``."""
    on_gpu = dsl.compile(fn, target="cuda", **kwargs)(*[np.copy(a) for a in args])
    on_cpu = dsl.compile(fn, target="cpu", **kwargs)(*[np.copy(a) for a in args])
    return on_gpu, on_cpu


def close(got, want, rtol: float = 1e-12) -> None:
    got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-14)


def reads(c, i):
    return c[i], c[i : i + 2], c[:, i], c[i, 1:3], c[i - 1 : i + 2, ::2], c[i, i]


def writes(c, v, w, i):
    c = c * 1.0
    c[i] = v
    c[i + 1] += v
    c[i : i + 2] = w
    c[:, i] *= 2.0
    c[i - 1 : i + 1, 1:3] -= 1.0
    return c


def windows(c, i):
    """A window read by reductions (sums over either axis) and by a softmax (a row band)."""
    part = c[i : i + 3]
    return (part**2).sum(axis=1), c[:, i].sum(), dsl.nn.softmax(part * 2.0, axis=-1), part.max(axis=0)


@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "no-inplace"])
def test_reads_writes_and_windows(inplace: bool) -> None:
    for i in STARTS if inplace else STARTS[::3]:  # (off: one start of each dtype, for CI time)
        close(*both(reads, C, i, inplace=inplace))
        close(*both(writes, C, V, W, i, inplace=inplace))
        close(*both(windows, C, i, inplace=inplace))


def test_update_over_a_dying_temporary_and_an_overlapping_shift() -> None:
    def update(x, v, i):
        c = x @ x.T
        c[i] = v
        return c @ x

    def shift(x, i):
        c = x * 1.0
        c[i + 1 : i + 3] = c[i : i + 2]
        return c

    x, v = RNG.standard_normal((5, 5)), RNG.standard_normal(5)
    for inplace in (True, False):
        for i in (np.int64(1), np.int64(-2), np.int64(9)):
            close(*both(update, x, v, i, inplace=inplace), rtol=1e-10)
            close(*both(shift, C, i, inplace=inplace))


def test_gradient_and_loop_counter() -> None:
    def loss(x, w, i):
        h = dnp.tanh(x * 1.5)
        h[i] = w * h[i]
        return (h * h).sum() + (x[i : i + 2] * w).sum()

    def prefix_sums(x):
        def body(i, c):
            c[i] = c[i - 1] + x[i]
            return c

        return dsl.fori_loop(1, x.shape[0], body, x * 1.0)

    w = RNG.standard_normal(4)
    for i in (np.int64(0), np.int64(4), np.int64(-3)):
        got, want = both(dsl.value_and_grad(loss, argnums=(0, 1)), C, w, i)
        close((got[0], *got[1]), (want[0], *want[1]), rtol=1e-10)
    close(*both(prefix_sums, C))


def test_write_into_an_argument() -> None:
    def step(c, v, i):
        c[i] += v

    for i in (np.int64(3), np.int64(-1), np.int64(8)):
        on_gpu, on_cpu = C.copy(), C.copy()
        dsl.compile(step, target="cuda")(on_gpu, V, i)
        dsl.compile(step, target="cpu")(on_cpu, V, i)
        np.testing.assert_array_equal(on_gpu, on_cpu)


def test_windows_per_example_under_vmap() -> None:
    """Starts per example: a start per row, read in the kernel at the element's row (the writes and
    reads of ``writes`` and ``windows`` batched), in place and not."""
    cs, vs, ws = RNG.standard_normal((3, 5, 4)), RNG.standard_normal((3, 4)), RNG.standard_normal((3, 2, 4))
    starts = np.array([2, -1, 9])
    for inplace in (True, False):
        close(*both(dsl.vmap(writes), cs, vs, ws, starts, inplace=inplace))
        close(*both(dsl.vmap(windows), cs, starts, inplace=inplace))
