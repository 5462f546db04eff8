"""Matmul operands read as strided views (``fuse.operand_view``) and results written through them
(``fuse.result_view``): the no-copy reshape rule against NumPy's, attention-style head splits and
merges with no copy kernel, and the results against NumPy (float and
integer matmuls, views BLAS cannot take falling back to a copy). Gradients through split heads are
checked against the copying form in ``test_perf_paths.py`` (case ``heads``)."""

from __future__ import annotations

import itertools
import math
import re
from typing import Any

import numpy as np
import pytest
from helpers import gemm_calls, kernel_kinds

import dsl
import dsl.numpy as dnp
from compiler.prims.movement import contiguous_strides, reshaped_strides

rng = np.random.default_rng(11)


def _factorings(n: int) -> list[tuple[int, ...]]:
    """Shapes of ``n`` elements with up to 3 axes (size-1 axes included)."""
    out = [(n,), (1, n), (n, 1)]
    for a in range(1, n + 1):
        if n % a == 0:
            out.append((a, n // a))
            for b in range(1, n // a + 1):
                if (n // a) % b == 0:
                    out.append((a, b, n // a // b))
    return sorted(set(out))


@pytest.mark.parametrize("shape", [(2, 3, 4), (4, 1, 6), (2, 2, 2, 3)])
def test_reshaped_strides_agree_with_numpy_no_copy_rule(shape: tuple[int, ...]) -> None:
    base = np.arange(math.prod(shape))
    for perm in itertools.permutations(range(len(shape))):
        view = base.reshape(shape).transpose(perm)
        strides = tuple(s // base.itemsize for s in view.strides)
        for new_shape in _factorings(view.size):
            numpy_view = np.shares_memory(view.reshape(new_shape), base)
            mine = reshaped_strides(view.shape, strides, new_shape)
            assert (mine is not None) == numpy_view, (shape, perm, new_shape)
            if mine is None:
                continue
            got = np.lib.stride_tricks.as_strided(base, new_shape, [s * base.itemsize for s in mine])
            np.testing.assert_array_equal(got, view.reshape(new_shape))


def test_contiguous_strides() -> None:
    assert contiguous_strides((2, 3, 4)) == (12, 4, 1)
    assert contiguous_strides(()) == ()


B, T, H, DH = 2, 8, 4, 4
D = H * DH


def attention(xp: Any, x: Any, wq: Any, wk: Any, wv: Any, wo: Any) -> Any:
    def split(v: Any) -> Any:  # (B*T, D) -> (B, H, T, dh): a strided view of v for BLAS
        return xp.transpose(v.reshape(B, T, H, DH), (0, 2, 1, 3))

    q, k, v = split(x @ wq), split(x @ wk), split(x @ wv)
    s = q @ xp.transpose(k, (0, 1, 3, 2))
    a = s @ v
    return xp.transpose(a, (0, 2, 1, 3)).reshape(B * T, D) @ wo


def _attention_args(dtype: Any) -> list[np.ndarray]:
    scale = 0.3 if np.dtype(dtype).kind == "f" else 1
    shapes = [(B * T, D)] + [(D, D)] * 4
    if np.dtype(dtype).kind == "f":
        return [(scale * rng.standard_normal(s)).astype(dtype) for s in shapes]
    return [rng.integers(-3, 4, s).astype(dtype) for s in shapes]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_heads_split_and_merged_without_copies(dtype: Any) -> None:
    args = _attention_args(dtype)
    compiled = dsl.compile(lambda *a: attention(dnp, *a))
    source = compiled.lower(*args).source()
    kernels = set(re.findall(r"^def (k\w+)\(", source, re.M))
    # q, k and v are read through their strides, s @ v is written straight into the merged layout
    assert all(k.endswith("_matmul") for k in kernels), sorted(kernels)  # (integer matmuls)
    assert kernel_kinds(source) == ["matmul"] * 6
    expected = attention(np, *[a.astype(np.float64) for a in args])
    got = compiled(*args)
    if np.dtype(dtype).kind == "f":
        rtol = 1e-4 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol * np.abs(expected).max())
    else:
        np.testing.assert_array_equal(got, expected.astype(dtype))


def test_views_blas_cannot_take_are_copied() -> None:
    """A reshape that merges axes of different strides, and a matmul operand with three batch axes
    left after merging: both are copied into a buffer first, and the results stay right."""
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float64)
    w = rng.standard_normal((6, 5)).astype(np.float64)

    def f(x: Any, w: Any) -> Any:
        merged = dnp.transpose(x, (1, 0, 2, 3)).reshape(6, 20)  # rows (3, 2) with strides (20, 60)
        many = dnp.transpose(x.reshape(2, 3, 2, 2, 5), (0, 2, 1, 3, 4))  # batch (2, 2, 3) strided
        return merged.T @ w[:, :1], many @ dnp.broadcast_to(dnp.ones((5, 2)), (2, 2, 3, 5, 2))

    def ref(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        merged = np.transpose(x, (1, 0, 2, 3)).reshape(6, 20)
        many = np.transpose(x.reshape(2, 3, 2, 2, 5), (0, 2, 1, 3, 4))
        return merged.T @ w[:, :1], many @ np.ones((1, 1, 1, 5, 2))

    for got, want in zip(dsl.compile(f)(x, w), ref(x, w), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_results_written_through_their_layout() -> None:
    """A result whose layout puts its columns at a stride is written as the transposed product; a
    result that is also read elsewhere keeps its own buffer (and the layout is a copy)."""
    a, b = rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 5, 6))

    def written(a: Any, b: Any) -> Any:
        return dnp.transpose(a @ b, (0, 2, 1)).reshape(18, 4)

    def copied(a: Any, b: Any) -> Any:
        p = a @ b
        return dnp.transpose(p, (0, 2, 1)).reshape(18, 4), p.sum()

    compiled = dsl.compile(written)
    assert kernel_kinds(compiled.lower(a, b).source()) == ["matmul"]
    np.testing.assert_allclose(compiled(a, b), np.transpose(a @ b, (0, 2, 1)).reshape(18, 4), rtol=1e-12)
    got = dsl.compile(copied)(a, b)
    np.testing.assert_allclose(got[0], np.transpose(a @ b, (0, 2, 1)).reshape(18, 4), rtol=1e-12)
    np.testing.assert_allclose(got[1], (a @ b).sum(), rtol=1e-12)


def _kernels(compiled: Any, *args: Any) -> list[str]:
    return kernel_kinds(compiled.lower(*args).source())


def test_sgd_step_is_one_gemm_into_the_weights() -> None:
    """``w -= lr * (x.T @ g)``: gemm with alpha = -lr and beta = 1 writes straight into the caller's
    ``w`` (``fuse.accumulation``); no update kernel, no buffer for the gradient."""
    x, g = rng.standard_normal((64, 48)).astype(np.float32), rng.standard_normal((64, 32)).astype(np.float32)
    w = rng.standard_normal((48, 32)).astype(np.float32)

    def step(w: Any, x: Any, g: Any) -> Any:
        loss = (x @ w).sum()
        w -= 0.01 * (x.T @ g)
        return loss

    compiled = dsl.compile(step)
    assert _kernels(compiled, w.copy(), x, g) == ["matmul", "reduce_sum", "matmul"]
    update = gemm_calls(compiled.lower(w.copy(), x, g))[-1]
    # alpha = -lr, beta = 1 (C is read), into w's own buffer, nothing copied in first
    assert np.float32(update["alpha"]) == np.float32(-0.01) and update["beta"] == 1.0
    assert update["o"] == update["c"] == "a0" and update["copy"] == 0
    got = w.copy()
    total = compiled(got, x, g)
    want = w - np.float32(0.01) * (x.T @ g)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(total, (x @ w).sum(), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize(
    "form",
    [
        lambda m, x: x + 2.0 * m,
        lambda m, x: 0.5 * m + x,
        lambda m, x: m - x,  # beta = -1
        lambda m, x: x - (-m),
        lambda m, x: x - m * 3.0 * 0.5,
    ],
)
def test_accumulation_forms(form: Any) -> None:
    a, b, c = (rng.standard_normal(s) for s in ((5, 7), (7, 6), (5, 6)))
    compiled = dsl.compile(lambda a, b, c: form(a @ b, c))
    assert len(_kernels(compiled, a, b, c)) == 1
    np.testing.assert_allclose(compiled(a, b, c), form(a @ b, c), rtol=1e-12, atol=1e-12)


def test_accumulation_reading_its_own_operand_is_not_in_place() -> None:
    """``w - lr * (w @ w)``: gemm reads ``w`` as an operand, so the result cannot overwrite ``w``; it
    is copied into the result first. Integer matmuls keep their update loop."""
    w = rng.standard_normal((6, 6))

    def step(w: Any) -> Any:
        w -= 0.1 * (w @ w)
        return w

    got = w.copy()
    out = dsl.compile(step)(got)
    np.testing.assert_allclose(out, w - 0.1 * (w @ w), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, out, rtol=0, atol=0)
    iw = rng.integers(-3, 4, (6, 6))
    np.testing.assert_array_equal(dsl.compile(lambda w: w - 2 * (w @ w))(iw), iw - 2 * (iw @ iw))


def test_sum_of_two_matmuls_takes_one_as_its_accumulation() -> None:
    """``a @ b + c @ d`` (a matmul's gradient): one matmul accumulates into the other's result
    (found by the fuzz campaign: both once claimed the same add)."""
    a, b, c, d = (rng.standard_normal((2, 3, 3)) for _ in range(4))
    compiled = dsl.compile(lambda a, b, c, d: a @ b + c @ d)
    assert len(_kernels(compiled, a, b, c, d)) == 2
    np.testing.assert_allclose(compiled(a, b, c, d), a @ b + c @ d, rtol=1e-12, atol=1e-12)


def _layout_case(seed: int) -> tuple[Any, list[np.ndarray]]:
    """A batched matmul whose operands are transposes of stored arrays (some stored with two axes
    merged, reshaped back in the program) and whose result is transposed and reshaped before it is
    returned: any mix of views BLAS can take and copies it cannot."""
    r = np.random.default_rng(seed)
    nbatch = int(r.integers(0, 3))
    batch = tuple(int(d) for d in r.integers(1, 4, nbatch))
    m, k, n = (int(d) for d in r.integers(1, 5, 3))
    shapes = [(*batch, m, k), (*batch, k, n)]
    perms = [tuple(int(p) for p in r.permutation(len(s))) for s in shapes]
    stored = [tuple(s[p] for p in perm) for s, perm in zip(shapes, perms, strict=True)]
    merge = [bool(r.integers(0, 2)) and len(s) >= 2 for s in stored]
    args = [
        r.standard_normal((s[0] * s[1], *s[2:]) if mg else s) for s, mg in zip(stored, merge, strict=True)
    ]
    out_perm = tuple(int(p) for p in r.permutation(len(shapes[0])))
    out_shape = tuple((*batch, m, n)[p] for p in out_perm)
    flat = bool(r.integers(0, 2))

    def program(xp: Any, a: Any, b: Any) -> Any:
        ops = []
        for x, s, perm in zip((a, b), stored, perms, strict=True):
            x = x.reshape(s)
            ops.append(xp.transpose(x, tuple(int(i) for i in np.argsort(perm))))
        y = xp.transpose(ops[0] @ ops[1], out_perm)
        return y.reshape(math.prod(out_shape)) if flat else y

    return program, args


@pytest.mark.parametrize("seed", range(24))
def test_random_layouts_around_matmuls(seed: int) -> None:
    program, args = _layout_case(seed)
    got = dsl.compile(lambda a, b: program(dnp, a, b))(*args)
    np.testing.assert_allclose(got, program(np, *args), rtol=1e-12, atol=1e-12)
