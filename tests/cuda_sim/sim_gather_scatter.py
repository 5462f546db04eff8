"""Indexing with integer arrays on ``target="cuda"`` in the simulator: gathers read by loops, a
reduction and a row band; scatters (add with repeated indices, set keeping the last write, masked
writes, index_add_ into an argument); gradients of a cross-entropy with integer labels and of an
embedding lookup; in-place on and off; each against the CPU backend, bit for bit where the order of
the updates decides (itself checked against NumPy and JAX in tests/test_gather_scatter.py). The
scatter kernel is a thread per element going through the updates in order: no atomics."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp

RNG = np.random.default_rng(0)
X = RNG.standard_normal((5, 4))
IDX = np.array([3, 0, -1, 3, 9, -7])  # repeated, negative, past both ends
V = RNG.standard_normal((len(IDX), 4))
INPLACE = pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "no-inplace"])


def both(fn, *args, **kwargs):
    """``fn`` compiled for CUDA and for the CPU, on copies of ``args``."""
    on_gpu = dsl.compile(fn, target="cuda", **kwargs)(*[np.copy(a) for a in args])
    on_cpu = dsl.compile(fn, target="cpu", **kwargs)(*[np.copy(a) for a in args])
    return on_gpu, on_cpu


def same(got, want, rtol: float = 0.0) -> None:
    got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-14 if rtol else 0.0)


def reads(x, i):
    return x[i] * 2.0, (x[:, i % 4] ** 2).sum(axis=0), dsl.nn.softmax(x[i], axis=-1), x[i, i % 4]


def writes(x, i, v):
    a = x * 1.0
    a[i] = v
    b = x.copy()
    b[b < 0] = 0.0
    f32 = x.astype(np.float32).at[i].add(v.astype(np.float32))
    return a, x.at[i].add(v), b, x.at[:, i % 4].add(1.0), f32, x.at[i].max(v), x.at[i].min(v), x.at[i].mul(v)


@INPLACE
def test_reads_and_writes(inplace: bool) -> None:
    same(*both(reads, X, IDX, inplace=inplace), rtol=1e-12)  # (a softmax: the backends' exp differ)
    same(*both(writes, X, IDX, V, inplace=inplace))


def test_index_add_into_an_argument() -> None:
    def step(w, i, g):
        w.index_add_(0, i, g * -0.1)

    on_gpu, on_cpu = X.copy(), X.copy()
    dsl.compile(step, target="cuda")(on_gpu, IDX, V)
    dsl.compile(step, target="cpu")(on_cpu, IDX, V)
    same(on_gpu, on_cpu)


def loss(emb, out, tokens, targets):
    h = dnp.tanh(emb[tokens])
    logits = h @ out
    m = logits.max(axis=1, keepdims=True)
    logp = logits - m - dnp.log(dnp.sum(dnp.exp(logits - m), axis=1, keepdims=True))
    return -dnp.mean(dnp.take_along_axis(logp, targets[:, None], axis=1))


@INPLACE
def test_gradients_of_an_embedding_and_a_cross_entropy(inplace: bool) -> None:
    tokens = RNG.integers(0, 7, 12)
    targets = (tokens + 1) % 7
    emb, out = RNG.standard_normal((7, 4)), RNG.standard_normal((4, 7))
    grad = dsl.value_and_grad(loss, argnums=(0, 1))
    on_gpu, on_cpu = both(grad, emb, out, tokens, targets, inplace=inplace)
    same((on_gpu[0], *on_gpu[1]), (on_cpu[0], *on_cpu[1]), rtol=1e-12)


@pytest.mark.parametrize("threads", [1, 8, 64], ids=["serial", "blocks-of-rows", "a-row-each"])
def test_scatter_blockings_match_numpy_bit_for_bit(monkeypatch, threads: int) -> None:
    """The follow kernel's thread blocks (``compiler/kernel/cuda/scatter.py``): a thread per line
    walking every update (``THREADS`` 1), threads owning blocks of rows with a shorter last block,
    and a thread per element: each is ``np.add.at``'s (and the other combines' serial loops') bits,
    as the CPU's, with many repeated indices along axis 0 (an embedding's gradient) and 1."""
    from compiler.kernel.cuda import scatter as cuda_scatter

    monkeypatch.setattr(cuda_scatter, "THREADS", threads)
    x0, x1 = RNG.standard_normal((7, 3)).astype(np.float32), RNG.standard_normal((2, 7, 2))
    i = RNG.integers(-7, 9, 40)  # repeated, negative, past the end (clamped)
    v0, v1 = RNG.standard_normal((40, 3)).astype(np.float32), RNG.standard_normal((2, 40, 2))

    def f(x0, x1, i, v0, v1):
        return x0.at[i].add(v0), x1.at[:, i].add(v1), x0.at[i].set(v0), x1.at[:, i].max(v1)

    on_gpu, on_cpu = both(f, x0, x1, i, v0, v1)
    same(on_gpu, on_cpu)
    c = np.clip(np.where(i < 0, i + 7, i), 0, 6)
    a0, a1, s0, m1 = x0.copy(), x1.copy(), x0.copy(), x1.copy()
    np.add.at(a0, c, v0)
    np.add.at(a1, (slice(None), c), v1)
    s0[c] = v0
    np.maximum.at(m1, (slice(None), c), v1)
    same(on_gpu, (a0, a1, s0, m1))


def mixed(x, i, j, r):
    a = x.copy()
    a[i, :, j] += 1.0  # array items apart: their axes first
    b = x.copy()
    b[:, x[0, :, 0] > 0] *= 3.0  # a traced mask after a slice: a where
    c = x.copy()
    c[i] += r[:, None, None]  # repeated rows: the last sum written
    return x[i, None, :, j], x[0, :, j], x[:, np.array([True, False, True])], a, b, c


@INPLACE
def test_mixed_indexing_and_augmented_mask_writes(inplace: bool) -> None:
    x = RNG.standard_normal((4, 3, 5))
    i, j, r = np.array([0, 2, 2, 1]), np.array([1, 4, 4, 0]), RNG.standard_normal(4)
    on_gpu, on_cpu = both(mixed, x, i, j, r, inplace=inplace)
    same(on_gpu, on_cpu)
    same(on_gpu, mixed(x.copy(), i, j, r))
