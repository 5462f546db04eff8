"""Row fusion on ``target="cuda"`` (``compiler/kernel/cuda/bands.py``) in the simulator, with bands on
and off (``row_fusion``), against NumPy: layer norm and softmax + cross-entropy forward and backward,
a band with a tail, reductions over axis 0 (partials per block, combined in block order), a row
reduction that keeps an inner axis, local rows wider than a block (TPB is 8 here) and narrow rows
that share a block, and local rows in global scratch instead of shared memory."""

from __future__ import annotations

import re

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
from compiler.kernel.cuda import bands
from compiler.pipeline import option_defaults

RNG = np.random.default_rng(7)


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def run(fn, args, row_fusion: bool):
    """``fn`` compiled for CUDA with row fusion on or off: its results and generated source."""
    with option_defaults(row_fusion=row_fusion):
        compiled = dsl.compile(fn, target="cuda")
        source = compiled.lower(*args).source()
        return compiled(*[np.copy(a) for a in args]), source


def check(fn, args, want, rtol: float = 2e-5):
    """On and off, the results match ``want`` (NumPy's, in float64); with row fusion on, a band."""
    for row_fusion in (True, False):
        got, source = run(fn, args, row_fusion)
        assert ("_rows(" in source) == row_fusion, source
        got = got if isinstance(got, tuple) else (got,)
        for g, w in zip(dsl_flat(got), want, strict=True):
            g = np.asarray(g)
            assert g.dtype == np.float32 and g.shape == np.shape(w), (g.dtype, g.shape, np.shape(w))
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * max(1.0, float(np.max(np.abs(w)))))


def dsl_flat(values):
    out = []
    for v in values:
        out += dsl_flat(v) if isinstance(v, tuple | list) else [v]
    return out


def layer_norm_loss(x, g, b, r):
    mu = x.mean(axis=-1, keepdims=True)
    c = x - mu
    var = (c * c).mean(axis=-1, keepdims=True)
    return ((c / dnp.sqrt(var + 1e-5) * g + b) * r).sum()


def layer_norm_numpy(x, g, b, r):
    x, g, b, r = (a.astype(np.float64) for a in (x, g, b, r))
    mu = x.mean(axis=-1, keepdims=True)
    sigma = np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + 1e-5)
    xhat = (x - mu) / sigma
    dxhat = r * g
    dx = (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True)) / sigma
    return [((xhat * g + b) * r).sum(), dx, (r * xhat).sum(0), r.sum(0)]


@pytest.mark.parametrize("rows, width", [(6, 20), (7, 3)])  # rows wider than a block; rows sharing one
def test_layer_norm_forward_and_backward(rows: int, width: int) -> None:
    args = (f32(rows, width), 1 + 0.1 * f32(width), 0.1 * f32(width), f32(rows, width))
    fn = dsl.value_and_grad(layer_norm_loss, argnums=(0, 1, 2))
    check(fn, args, layer_norm_numpy(*args))


def xent_loss(z, onehot):
    s = z - dsl.stop_gradient(z.max(axis=-1, keepdims=True))
    return -(onehot * (s - dnp.log(dnp.exp(s).sum(axis=-1, keepdims=True)))).sum() / z.shape[0]


@pytest.mark.parametrize("rows, classes", [(5, 3), (4, 12)])
def test_softmax_cross_entropy_forward_and_backward(rows: int, classes: int) -> None:
    """The loss divided by the batch size is the band's tail (a follow kernel after the combine)."""
    z = f32(rows, classes)
    onehot = np.eye(classes, dtype=np.float32)[RNG.integers(0, classes, rows)]
    z64 = z.astype(np.float64)
    p = np.exp(z64 - z64.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    want = [-(onehot * np.log(p)).sum() / rows, (p - onehot) / rows]
    check(dsl.value_and_grad(xent_loss), (z, onehot), want)
    program = dsl.compile(dsl.value_and_grad(xent_loss), target="cuda").lower(z, onehot).program
    assert program.compilation.fusion is not None
    assert [len(band.tail) for band in program.compilation.fusion.bands] == [1]


def test_a_mean_of_row_values() -> None:
    """The loss sums one value per row (rows of one element): one thread of the row adds it (every
    thread did, so the loss counted each row once per thread of its row)."""

    def loss(z, onehot):
        return -(dsl.nn.log_softmax(z) * onehot).sum(axis=1).mean()

    z = f32(4, 3)
    onehot = np.eye(3, dtype=np.float32)[[0, 2, 1, 0]]
    z64 = z.astype(np.float64)
    p = np.exp(z64 - z64.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    check(dsl.value_and_grad(loss), (z, onehot), [-(onehot * np.log(p)).sum() / 4, (p - onehot) / 4])


def test_column_reductions_and_a_row_reduction_keeping_an_inner_axis() -> None:
    """Rows of (3, 5): a max over the last axis keeps 3 outputs per row (a serial loop per output);
    sums over axis 0 and over axes (0, 2) keep partial results per block."""

    def fn(x, w):
        e = dnp.exp(x - x.max(axis=2, keepdims=True)) * w
        return e.sum(axis=0), e.sum(axis=(0, 2)), (e * x).sum()

    x, w = f32(9, 3, 5), f32(9, 3, 5)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=2, keepdims=True)) * w
    check(fn, (x, w), [e.sum(axis=0), e.sum(axis=(0, 2)), (e * x64).sum()])


def test_rows_in_global_scratch(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no shared memory to spare, local rows and partials live in global scratch per block (in
    the one-pass form: by default the rows pass computes such rows again where they are read)."""
    monkeypatch.setattr(bands, "SHARED_BYTES", 0)
    args = (f32(5, 12), 1 + 0.1 * f32(12), 0.1 * f32(12), f32(5, 12))
    fn = dsl.value_and_grad(layer_norm_loss, argnums=(0, 1, 2))
    with option_defaults(band_columns="band"):
        got, source = run(fn, args, row_fusion=True)
    assert re.search(r"v\d+_row\[", source), source
    assert "cuda.shared.array(k" not in source  # only the trees' arrays, sized TPB
    for g, w in zip(dsl_flat(got), layer_norm_numpy(*args), strict=True):
        np.testing.assert_allclose(
            np.asarray(g), w, rtol=2e-5, atol=2e-5 * max(1.0, float(np.max(np.abs(w))))
        )


def test_local_rows_in_shared_memory_partials_in_global(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shared memory for the local rows only (a GPU block's 16 rows of 12 float32 each, three rows):
    they take it before the partials, which keep their global row per block (the flush's, anyway)."""
    monkeypatch.setattr(bands, "SHARED_BYTES", 3 * 16 * 12 * 4)
    args = (f32(5, 12), 1 + 0.1 * f32(12), 0.1 * f32(12), f32(5, 12))
    fn = dsl.value_and_grad(layer_norm_loss, argnums=(0, 1, 2))
    got, source = run(fn, args, row_fusion=True)
    shared = re.findall(r"(\w+) = cuda\.shared\.array\(k", source)
    assert len(shared) == 3 and all(name.endswith("_row_s") for name in shared), shared
    for g, w in zip(dsl_flat(got), layer_norm_numpy(*args), strict=True):
        np.testing.assert_allclose(
            np.asarray(g), w, rtol=2e-5, atol=2e-5 * max(1.0, float(np.max(np.abs(w))))
        )


def test_a_band_without_partials_with_rows_in_global_scratch(monkeypatch: pytest.MonkeyPatch) -> None:
    """No partials, local rows past shared memory: the band takes BANDB blocks (a global row each)."""
    monkeypatch.setattr(bands, "SHARED_BYTES", 0)

    def fn(x, y):
        a = dnp.exp(x - x.max(axis=-1, keepdims=True))
        c = dnp.tanh(a / a.sum(axis=-1, keepdims=True) * y)
        return c - c.mean(axis=-1, keepdims=True) + a

    x, y = f32(7, 12), f32(7, 12)
    got, source = run(fn, (x, y), row_fusion=True)
    assert "_rows(" in source and "BANDB))" in source
    x64 = x.astype(np.float64)
    a = np.exp(x64 - x64.max(-1, keepdims=True))
    c = np.tanh(a / a.sum(-1, keepdims=True) * y)
    want = c - c.mean(-1, keepdims=True) + a
    np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=2e-5)


def test_bands_are_deterministic_and_agree_with_the_cpu() -> None:
    args = (f32(6, 20), 1 + 0.1 * f32(20), 0.1 * f32(20), f32(6, 20))
    fn = dsl.value_and_grad(layer_norm_loss, argnums=(0, 1, 2))
    first, _ = run(fn, args, row_fusion=True)
    again, _ = run(fn, args, row_fusion=True)
    on_cpu = dsl.compile(fn, target="cpu")(*[np.copy(a) for a in args])
    for a, b, c in zip(dsl_flat(first), dsl_flat(again), dsl_flat(on_cpu), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        np.testing.assert_allclose(np.asarray(a), c, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("dtype", [np.int32, np.float64])
def test_a_row_scalar_stored_over_what_the_row_reads(dtype: type) -> None:
    """A member with one element per row is computed by every thread of the row and stored by one.
    Stored over a buffer those threads read (here the updated argument ``x``, written in place
    twice), the store raced with the other threads' reads: a row of ``stack((x, x))`` read ``x``
    after the update (found by the fuzzer's CUDA batches, sim_fuzz.py, with the band's threads
    interleaved). The row's threads now read first and the store waits at a barrier. (The second
    write was ``x[1] = 5``; a window update now runs over its window, never in a band.)"""

    def fn(x):
        x += 7
        pair = dnp.stack((x, x), axis=-1)
        x *= 2
        return pair + 1

    x = np.array([3, -4, 2], dtype)
    want = np.stack((x + 7, x + 7), axis=-1) + 1
    compiled = dsl.compile(fn, target="cuda")
    for _ in range(3):  # the race showed in most runs: each must be right
        given = x.copy()
        np.testing.assert_array_equal(np.asarray(compiled(given)), want)
        np.testing.assert_array_equal(given, (x + 7) * 2)
    source = compiled.lower(x.copy()).source()
    assert "_rows(" in source and "_w = " in source


@pytest.mark.parametrize("n", [1, 7, 37])
def test_a_band_of_one_element_rows_without_barriers(n: int) -> None:
    """Sibling outputs of one vector are a band whose rows are one element, a thread each (``CT``
    1): no barriers, each thread's members in its own program order. Also with a member storing
    over what another reads (the argument updated in place, read by the sibling first)."""

    def siblings(x):
        return x - 1.0, x * x, -x

    def updated(x):
        y = x + 1.0
        x *= 2.0
        return y

    x = f32(n)
    got, source = run(siblings, (x,), row_fusion=True)
    for g, w in zip(got, (x - 1.0, x * x, -x), strict=True):
        np.testing.assert_array_equal(np.asarray(g), w)
    compiled = dsl.compile(updated, target="cuda")
    source = compiled.lower(x.copy()).source()
    if n > 1:  # (one element: a plain loop)
        assert "syncthreads" not in source.split("def k0_rows", 1)[1].split("def bind")[0]
    given = x.copy()
    np.testing.assert_array_equal(np.asarray(compiled(given)), x + 1.0)
    np.testing.assert_array_equal(given, x * 2.0)


def _row_entropy_loss(x, y, w):  # found by a differential run of bands against the CPU, 2026-11-27
    s = -(dsl.nn.log_softmax(y, axis=-1) * dsl.nn.softmax(y, axis=-1)).sum(axis=-1, keepdims=True)
    t = x * 1.0
    t += w
    u = x - s
    u = u - u.sum(axis=-1, keepdims=True)
    return (u * x).sum() + t.sum() + s.sum()


def _log_sum_loss(x, y, w):
    s = dnp.log(dnp.exp(y).sum(axis=-1, keepdims=True))
    u = x - s
    u = u - u.sum(axis=-1, keepdims=True)
    m = (s * 2.0 + w[:1]).max(axis=-1, keepdims=True)  # a row reduction of a one-element row
    return (u * x).sum() + (x + w).sum() + s.sum() + (m * x).sum()


@pytest.mark.parametrize("loss", [_row_entropy_loss, _log_sum_loss], ids=["entropy", "log sum"])
@pytest.mark.parametrize("width", [5, 37])
def test_one_element_rows_of_a_reduction_member_reach_every_thread(loss, width: int) -> None:
    """A reduction member over rows of one element (a loss's sum of a per-row value, ``s.sum()``)
    computes a value the band keeps (the entropy, a register of each thread): every thread of the
    row must compute it, where a loop over the row's one element ran on its first thread only, and
    the next members read the other threads' zeros (the entropy loss's value and gradient were
    wrong). The log-sum loss adds a row reduction over one-element rows (it passed before too)."""
    x, y, w = RNG.standard_normal((6, width)), RNG.standard_normal((6, width)), RNG.standard_normal(width)
    fn = dsl.value_and_grad(loss, argnums=(0, 2))
    want = dsl_flat(dsl.compile(fn, target="cpu")(x, y, w))
    got, source = run(fn, (x, y, w), row_fusion=True)
    assert "_rows(" in source
    for g, v in zip(dsl_flat(got), want, strict=True):
        np.testing.assert_allclose(np.asarray(g), v, rtol=1e-9, atol=1e-9)
