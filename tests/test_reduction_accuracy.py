"""Float32 reductions are as accurate as NumPy's pairwise sum in every fused form (issue 25).

A float32 accumulator carried along a long chunk loses digits in proportion to its length; float32
sums accumulate in float64 instead (``Reducer.accumulator``), on the CPU in flat, band, axis-0 and
NumPy-assisted kernels and on CUDA (``tests/cuda_sim/sim_accuracy.py``). Each form is compared with a
float64 reference: its relative error (to the sum of magnitudes, the condition of the sum) must stay
within a small multiple of NumPy's own float32 error on the same input, and never above one rounding
of the result (``FLOOR``), which is what a float64 accumulator gives.
"""

from __future__ import annotations

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp

FLOOR = 2.0**-23  # two roundings of a float32 result: the result, and its float32 prologue


def _inputs(n: int, signs: str) -> np.ndarray:
    x = np.random.default_rng(n).random(n, dtype=np.float32)
    return x if signs == "positive" else (x - np.float32(0.5)).astype(np.float32)


def _rel(got: np.ndarray, want: np.ndarray, scale: np.ndarray) -> float:
    """The largest error relative to ``scale`` (the sum of magnitudes of each reduction)."""
    got, want, scale = np.asarray(got, np.float64), np.asarray(want, np.float64), np.asarray(scale)
    return float(np.max(np.abs(got - want) / scale))


def _pairwise(x: np.ndarray, axis: int | None = None, keepdims: bool = False) -> np.ndarray:
    """NumPy's float32 sum, pairwise along ``axis`` (NumPy sums a leading axis row after row)."""
    if axis is None:
        return np.sum(x.reshape(-1))
    inner = np.ascontiguousarray(np.moveaxis(x, axis, -1))
    total = inner.sum(axis=-1)
    return np.expand_dims(total, axis) if keepdims else total


def _check(got: np.ndarray, numpy32: np.ndarray, want: np.ndarray, scale: np.ndarray) -> None:
    assert np.asarray(got).dtype == np.float32
    ours, numpys = _rel(got, want, scale), _rel(numpy32, want, scale)
    assert ours <= max(4 * numpys, FLOOR), f"relative error {ours:.3g} (NumPy's float32: {numpys:.3g})"


SIZES = [10**6, 4 * 10**6]
SIGNS = ["positive", "mixed"]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("signs", SIGNS)
def test_sums_in_one_program(n: int, signs: str) -> None:
    a = _inputs(n, signs)
    w = a.astype(np.float64)
    got = dsl.compile(lambda a: (a.sum(), (a * a).sum(), a.mean()))(a)
    _check(got[0], a.sum(), w.sum(), np.abs(w).sum())
    _check(got[1], (a * a).sum(), (w * w).sum(), (w * w).sum())
    _check(got[2], a.mean(), w.mean(), np.abs(w).mean())
    alone = dsl.compile(lambda a: a.sum())(a)
    _check(alone, a.sum(), w.sum(), np.abs(w).sum())


@pytest.mark.parametrize("n", SIZES)
def test_variance_around_the_mean(n: int) -> None:
    a = _inputs(n, "positive") + np.float32(3.0)
    w = a.astype(np.float64)
    got = dsl.compile(lambda a: (a.mean(), ((a - a.mean()) ** 2).sum()))(a)
    _check(got[0], a.mean(), w.mean(), w.mean())
    want = ((w - w.mean()) ** 2).sum()
    _check(got[1], ((a - a.mean()) ** 2).sum(), want, want)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("signs", SIGNS)
def test_row_and_column_sums(n: int, axis: int, signs: str) -> None:
    """Long reductions of a 2-D array: 8 columns or 8 rows, and keepdims."""
    shape = (n // 8, 8) if axis == 0 else (8, n // 8)
    x = _inputs(n, signs).reshape(shape)
    w = x.astype(np.float64)
    got = dsl.compile(lambda x: (x.sum(axis=axis), (x * x).sum(axis=axis, keepdims=True)))(x)
    _check(got[0], _pairwise(x, axis), w.sum(axis=axis), np.abs(w).sum(axis=axis))
    assert got[1].shape == ((1, 8) if axis == 0 else (8, 1))
    squares = (w * w).sum(axis=axis, keepdims=True)
    _check(got[1], _pairwise(x * x, axis, keepdims=True), squares, squares)


def test_column_sums_of_a_numpy_kernel() -> None:
    """A reduction whose prologue runs through NumPy (``arraylevel.py``) combines its chunks widely."""
    x = _inputs(10**6, "positive").reshape(-1, 4)
    w = x.astype(np.float64)
    got = dsl.compile(lambda x: dnp.sin(x).sum(axis=0))(x)
    _check(got, _pairwise(np.sin(x), 0), np.sin(w).sum(axis=0), np.sin(w).sum(axis=0))


def _softmax64(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _layer_norm(xp, x):
    mean = x.mean(axis=1, keepdims=True)
    centred = x - mean
    return centred / xp.sqrt((centred * centred).mean(axis=1, keepdims=True) + 1e-5)


@pytest.mark.parametrize("n", SIZES)
def test_softmax_and_layer_norm_rows(n: int) -> None:
    """Row bands: every element divides by a long row sum (softmax) or by a mean and variance."""
    z = (_inputs(n, "positive") * np.float32(0.01)).reshape(4, n // 4)
    w = z.astype(np.float64)
    got = dsl.compile(lambda z: dsl.nn.softmax(z, axis=1))(z)
    want = _softmax64(w)
    e32 = np.exp(z - z.max(axis=1, keepdims=True))
    _check(got, e32 / e32.sum(axis=1, keepdims=True), want, want)
    x = z + np.float32(10.0)
    got = dsl.compile(lambda x: _layer_norm(dnp, x))(x)
    want = _layer_norm(np, x.astype(np.float64))
    _check(got, _layer_norm(np, x), want, np.abs(want).max(axis=1, keepdims=True))


@pytest.mark.parametrize("n", SIZES)
def test_bias_gradient_in_the_backward(n: int) -> None:
    """The gradient of ``(x * b).sum()`` with respect to a broadcast ``b`` is ``x.sum(axis=0)``."""
    x = _inputs(n, "positive").reshape(n // 8, 8)
    b = np.ones(8, np.float32)
    got = dsl.compile(dsl.grad(lambda b, x: (x * b).sum(), argnums=0))(b, x)
    w = x.astype(np.float64)
    _check(got, _pairwise(x, 0), w.sum(axis=0), w.sum(axis=0))


@pytest.mark.parametrize("n", SIZES)
def test_max_and_min_are_exact(n: int) -> None:
    a = _inputs(n, "mixed")
    got = dsl.compile(
        lambda a: (a.max(), a.min(), a.reshape(8, -1).max(axis=1), a.reshape(-1, 8).min(axis=0))
    )(a)
    want = (a.max(), a.min(), a.reshape(8, -1).max(axis=1), a.reshape(-1, 8).min(axis=0))
    for g, e in zip(got, want, strict=True):
        assert np.asarray(g).dtype == np.float32 and np.array_equal(g, e)


def test_sums_are_deterministic() -> None:
    a = _inputs(10**6, "mixed")
    f = dsl.compile(lambda a: (a.sum(), (a * a).sum(axis=0), a.reshape(8, -1).sum(axis=1)))
    first = [np.asarray(v).tobytes() for v in f(a)]
    assert [np.asarray(v).tobytes() for v in f(a)] == first


def test_float64_and_integer_sums() -> None:
    """Float64 sums keep float64; int32 sums follow NumPy (int64, exact)."""
    x = np.random.default_rng(1).random(10**6)
    got = dsl.compile(lambda x: x.sum())(x)
    assert got.dtype == np.float64 and abs(got - x.sum()) <= 1e-12 * x.sum()
    i = np.random.default_rng(2).integers(-(2**31), 2**31 - 1, size=10**6, dtype=np.int32)
    got = dsl.compile(lambda i: (i.sum(), i.reshape(-1, 8).sum(axis=0)))(i)
    assert got[0].dtype == i.sum().dtype == np.int64 and got[0] == i.sum()
    assert got[1].dtype == np.int64 and np.array_equal(got[1], i.reshape(-1, 8).sum(axis=0))


def test_float32_vector_dot_is_a_sum_of_products() -> None:
    """``a @ b``, ``dot`` and ``vdot`` of two float32 vectors accumulate as ``sum`` does (in float64):
    as a one-row matmul the products were added in float32 one after another, ten times NumPy's
    (SIMD-blocked ``sdot``) error on terms near 1e4 (3.1e-4 against 3.1e-5 at 10**6 terms)."""
    x = (1e4 + np.random.default_rng(5).standard_normal(200_000)).astype(np.float32)
    exact = float((x.astype(np.float64) ** 2).sum())
    got = dsl.compile(lambda a, b: (a @ b, dnp.dot(a, b), dnp.matmul(a, b)))(x, x)
    for value in got:
        assert value.dtype == np.float32
        assert abs(float(value) - exact) / exact < 1e-7
    np.testing.assert_allclose(dsl.grad(lambda a: a @ x)(x), x)
