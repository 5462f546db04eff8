"""Elementwise grid-stride loops a thread runs 4 iterations of at once (``For.unroll``,
``compiler/codegen/cuda/printer._unrolled``): the same bits as the plain loop (``DSL_CUDA_UNROLL=1``)
and as the CPU, at sizes around the unrolled trip's edge. In the simulator a grid has ``MAXB * TPB``
= 16 threads, so a thread's unrolled trips cover 64 elements and sizes 47-49 and 63-65 take the
remainder loop's every case; on a GPU (this suite's second run) the edge is at 4 x 2,097,152 and
these sizes run the remainder loop only. ``tests/test_cuda_ptx.py`` checks the loads' order in PTX."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
from compiler.pipeline import option_defaults
from dsl import pytree

RNG = np.random.default_rng(17)
SIZES = [1, 47, 48, 49, 63, 64, 65, 200]


def _host(x):
    return np.asarray(x.copy_to_host() if hasattr(x, "copy_to_host") else x)


def _chain(x, y):
    return dnp.maximum((x * 1.5 + 0.5) * y - 2.0, 0.0) / (x * x + 1.0)


def _in_place(x, y):
    x += y * 2.0
    return x * 1.0


def _broadcast(x, y):
    return (x[:, None] * y[None, :3]).astype(np.float32) - 1.0


def _ints(x, y):
    i = (x * 100.0).astype(np.int32)
    return i * 3 + (i > 7), dnp.where(y > 0, i, -i)


PROGRAMS = {"chain": _chain, "in place": _in_place, "broadcast": _broadcast, "ints and bools": _ints}


def _run(fn, n: int, target: str, unroll: str, monkeypatch: pytest.MonkeyPatch) -> list[np.ndarray]:
    monkeypatch.setenv("DSL_CUDA_UNROLL", unroll)
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = dsl.compile(fn, target=target)(x, y)
    leaves = out if isinstance(out, tuple) else (out,)
    return [_host(a) for a in leaves] + [x]  # x: the in-place program's write-back


@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("n", SIZES)
def test_unrolled_loops_match_the_plain_loop_and_the_cpu(name: str, n: int, monkeypatch) -> None:
    fn = PROGRAMS[name]
    unrolled = _run(fn, n, "cuda", "4", monkeypatch)
    plain = _run(fn, n, "cuda", "1", monkeypatch)
    cpu = _run(fn, n, "cpu", "4", monkeypatch)
    for u, p, c in zip(unrolled, plain, cpu, strict=True):
        assert u.dtype == c.dtype and u.shape == c.shape, (name, n)
        np.testing.assert_array_equal(u, p, err_msg=f"{name} at {n}: unrolled against plain")
        np.testing.assert_array_equal(u, c, err_msg=f"{name} at {n}: unrolled against the CPU")


def test_the_unrolled_loop_is_in_the_module(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.ones(100, np.float32)
    monkeypatch.setenv("DSL_CUDA_UNROLL", "4")
    source = dsl.compile(_chain, target="cuda").lower(x, x).source()
    assert "while g_b + 3 * g_s < 100:" in source and "_u3_" in source, source
    monkeypatch.setenv("DSL_CUDA_UNROLL", "1")
    assert "while g_b" not in dsl.compile(_chain, target="cuda").lower(x, x).source()


# Reductions' loops unroll too (``loops.reduce_kernel``'s ``accumulate``): their loads issued first,
# their sums in the plain loop's order. One reduction per program (two and more reductions of a row
# become a band): a full sum (split into chunks past 2**16), sums over either axis (a block per row;
# a column kernel), a NaN-propagating max, and a sum of a gather of loaded positions (the positions'
# loads issued early, not the gather's).
REDUCTIONS = {
    "full": (lambda x, i: (x / (1.5 + x * x)).sum(), (203, 5)),
    "split": (lambda x, i: (x / (1.5 + x * x)).sum(), (300, 300)),
    "rows": (lambda x, i: (x / (1.5 + x * x)).sum(axis=1), (3, 301)),
    "columns": (lambda x, i: (x / (1.5 + x * x)).sum(axis=0), (203, 5)),
    "max": (lambda x, i: dnp.max(x * 2.0, axis=1), (6, 37)),
    "gathered": (lambda x, i: x[i % x.shape[0]].sum(), (141, 3)),
}


@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_unrolled_reductions_match_the_plain_loop_and_the_cpu(name: str, monkeypatch) -> None:
    fn, shape = REDUCTIONS[name]
    x = RNG.standard_normal(shape)
    x.flat[::17] = np.nan if name == "max" else x.flat[::17]
    i = np.arange(shape[0] * 2) * 7
    got = {}
    for unroll in ("4", "1"):
        monkeypatch.setenv("DSL_CUDA_UNROLL", unroll)
        with option_defaults(row_fusion=name != "gathered"):
            compiled = dsl.compile(fn, target="cuda")
            source = compiled.lower(x, i).source()
            got[unroll] = _host(compiled(x, i))
        assert ("while r_b + 3 * r_s < " in source and "_l3_" in source) == (unroll == "4"), source
    np.testing.assert_array_equal(got["4"], got["1"], err_msg=f"{name}: unrolled against plain")
    np.testing.assert_allclose(got["4"], dsl.compile(fn, target="cpu")(x, i), rtol=1e-12, err_msg=name)


# A band's row loops unroll too (``bands._row_loop``): the row's loads of several elements first,
# its sums in order, its stores last, each at the position its own iteration computed (a row store's
# index statement, ``i1 = c``, is redefined by the next iteration). In the simulator a row's threads
# are at most 8, so rows of 45 and 70 elements run unrolled trips and the remainder loop.
def _layer_norm(x, g, b, r):
    mu = x.mean(axis=-1, keepdims=True)
    c = x - mu
    var = (c * c).mean(axis=-1, keepdims=True)
    return ((c / dnp.sqrt(var + 1e-5) * g + b) * r).sum()


def _softmax_rows(z, w):
    z = z - z.max(axis=-1, keepdims=True)
    e = dnp.exp(z)
    return e / e.sum(axis=-1, keepdims=True) * w


def _rows_in_place(z, w):
    z *= 1.0 / (z * z).sum(axis=-1, keepdims=True)
    return z + w


BANDS = {
    "layer norm": (dsl.value_and_grad(_layer_norm, argnums=(0, 1, 2)), 4),
    "softmax rows": (_softmax_rows, 2),
    "rows in place": (_rows_in_place, 2),
}


@pytest.mark.parametrize("name", list(BANDS))
@pytest.mark.parametrize("width", [45, 70])
def test_unrolled_band_rows_match_the_plain_loop_and_the_cpu(name: str, width: int, monkeypatch) -> None:
    fn, n_args = BANDS[name]
    rng = np.random.default_rng(width)
    rows = 5
    shapes = [(rows, width), (width,), (width,), (rows, width)] if n_args == 4 else [(rows, width), (width,)]
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    got = {}
    for unroll in ("4", "1"):
        monkeypatch.setenv("DSL_CUDA_UNROLL", unroll)
        compiled = dsl.compile(fn, target="cuda")
        source = compiled.lower(*args).source()
        assert "_rows(" in source, source
        assert ("while c_b + 3 * c_s < " in source) == (unroll == "4"), source
        given = [np.copy(a) for a in args]
        got[unroll] = [_host(a) for a in pytree.flatten(compiled(*given))[0]] + given
    cpu_args = [np.copy(a) for a in args]
    cpu = [np.asarray(a) for a in pytree.flatten(dsl.compile(fn, target="cpu")(*cpu_args))[0]] + cpu_args
    for u, p, c in zip(got["4"], got["1"], cpu, strict=True):
        np.testing.assert_array_equal(u, p, err_msg=f"{name} at {width}: unrolled against plain")
        np.testing.assert_allclose(u, c, rtol=2e-5, atol=2e-5, err_msg=f"{name} at {width}: against the CPU")
