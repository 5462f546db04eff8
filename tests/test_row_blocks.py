"""Row-block regions (``compiler/codegen/cpu.py``): runs of row-local kernels and matmuls executed
block of rows by block of rows. Each program here is checked against the same program compiled with
``row_blocks`` switched off (the results must be the same bits: every element is computed by the same
operations in the same order) and against NumPy; and for where regions form, where they stop, and
which buffers keep only one block of rows per thread (the memory plan's resized slots)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from helpers import tanh_mlp

import dsl
import dsl.numpy as dnp
from compiler.codegen import cpu
from compiler.compilation import option_defaults

rng = np.random.default_rng(23)


@contextmanager
def regions_off() -> Iterator[None]:
    with option_defaults(row_blocks=False):
        yield


def params(widths: list[int], dtype: Any = np.float32) -> list[tuple[np.ndarray, np.ndarray]]:
    pairs = zip(widths[:-1], widths[1:], strict=True)
    return [
        (
            (rng.standard_normal((a, b)) / np.sqrt(a)).astype(dtype),
            (0.1 * rng.standard_normal(b)).astype(dtype),
        )
        for a, b in pairs
    ]


u = tanh_mlp


def d2(p: Any, x: Any) -> Any:
    du = lambda x: dsl.grad(lambda x: u(p, x).sum())(x)  # noqa: E731
    return dsl.grad(lambda x: du(x).sum())(x)


def d2_numpy(p: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray) -> np.ndarray:
    """Value, first and second derivative pushed forward together, in float64."""
    h, dh, ddh = x.astype(np.float64), np.ones_like(x, np.float64), np.zeros_like(x, np.float64)
    for i, (w, b) in enumerate(p):
        z, dz, ddz = h @ w + b, dh @ w, ddh @ w
        if i == len(p) - 1:
            return ddz
        t = np.tanh(z)
        s = 1 - t * t
        h, dh, ddh = t, s * dz, s * ddz - 2 * t * s * dz * dz
    raise AssertionError


def both(fn: Callable[..., Any], *args: Any) -> tuple[list[np.ndarray], list[np.ndarray], str]:
    """``fn``'s results with regions and without, and the source with them."""
    on = dsl.compile(fn)
    source = on.lower(*args).source()
    with_regions = _leaves(on(*args))
    with regions_off():
        without = _leaves(dsl.compile(fn)(*args))
    return with_regions, without, source


def _leaves(x: Any) -> list[np.ndarray]:
    if isinstance(x, (tuple, list)):
        return [a for v in x for a in _leaves(v)]
    return [np.asarray(x)]


def assert_same_bits(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


def test_second_derivative_runs_as_one_region_in_thread_blocks() -> None:
    p, x = params([1, 64, 64, 64, 1]), rng.uniform(-2, 2, (2048, 1)).astype(np.float32)
    on, off, source = both(d2, p, x)
    assert_same_bits(on, off)
    np.testing.assert_allclose(on[0], d2_numpy(p, x), rtol=1e-3, atol=1e-3 * np.abs(d2_numpy(p, x)).max())
    assert source.count("def region") == 2  # one region: its chunk function and its runner
    assert "gemm_rows_block" in source and "numba.get_thread_id()" in source  # its own buffers: blocks
    assert source.count("call_kernel(kernel_table") < 6  # the region, what it cannot take, the result


def region_plan_figures(fn: Callable[..., Any], *args: Any) -> tuple[Any, int, int, list[Any]]:
    """The memory plan with regions, the planned peak without them, the arena the executable
    allocated with them, and the buffers whose slots hold one block per thread."""
    on = dsl.compile(fn)
    on(*args)
    plan = on.lower(*args).memory_plan()
    (executable,) = on._cache.values()
    with regions_off():
        off = dsl.compile(fn).lower(*args).memory_plan()
    assert all(r.stored_as is None for r in off.buffers)
    return plan, values_peak(off), executable.run.arena.nbytes, [r for r in plan.buffers if r.stored_as]


def values_peak(plan: Any) -> int:
    """The arena the program's values need (without the kernels' scratch rows)."""
    return max((-(-(r.offset + r.bytes) // 64) * 64 for r in plan.buffers if r.scratch_of is None), default=0)


def test_region_buffers_are_planned_as_one_block_per_thread() -> None:
    """The region's own buffers are never whole: their arena slots hold one block of rows per thread,
    and the arena closes over the rest, so the planned peak (what the executable allocates) drops."""
    p, x = params([1, 64, 64, 64, 1]), rng.uniform(-2, 2, (2048, 1)).astype(np.float32)
    plan, peak_off, arena, blocks = region_plan_figures(d2, p, x)
    threads, block_rows = cpu.numba_threads(), 2048 // 16
    assert blocks and arena == plan.peak_bytes
    for r in blocks:
        row_bytes = r.value.type.nbytes // 2048
        assert r.bytes == threads * block_rows * row_bytes
        assert r.stored_as == f"in region0: {threads} blocks of {block_rows} of its 2048 rows, one per thread"
    whole = sum(-(-r.value.type.nbytes // 64) * 64 for r in {r.offset: r for r in blocks}.values())
    now = sum(-(-r.bytes // 64) * 64 for r in {r.offset: r for r in blocks}.values())
    # all slots are the region's own: the values' whole arena (the kernels' scratch apart: the
    # region's copies of transposed right operands are its own)
    assert values_peak(plan) == peak_off - whole + now
    assert plan.peak_bytes == max(values_peak(plan), *(r.offset + r.bytes for r in plan.buffers))
    assert blocks[0].stored_as in str(plan)  # the plan's report says where each lives
    bufferized = dsl.compile(d2).lower(p, x).ir("bufferized")
    assert bufferized.count(f'dsl.stored_as = "{blocks[0].stored_as}"') == len(blocks)
    assert f"dsl.arena_bytes = {plan.peak_bytes}" in bufferized


def test_mlp_forward_with_a_column_sum_and_an_intermediate_returned() -> None:
    """The column sum reads every row (not row-local): the region stops before it. The returned
    activation is used outside the region, so it stays in the arena."""

    def f(p: Any, x: Any) -> Any:
        h1 = dnp.tanh(x @ p[0][0] + p[0][1])
        h2 = dnp.tanh(h1 @ p[1][0] + p[1][1])
        out = h2 @ p[2][0]
        return out, out.sum(axis=0), h1.reshape(-1)[:100]

    p, x = params([64, 64, 64, 32]), rng.standard_normal((1024, 64)).astype(np.float32)
    on, off, source = both(f, p, x)
    assert_same_bits(on, off)
    h1 = np.tanh(x.astype(np.float64) @ p[0][0] + p[0][1])
    expected = np.tanh(h1 @ p[1][0] + p[1][1]) @ p[2][0]
    np.testing.assert_allclose(on[0], expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(on[1], expected.sum(axis=0), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(on[2], h1.reshape(-1)[:100], rtol=1e-5, atol=1e-6)
    assert "def region0_chunk" in source


def test_transposed_weights_and_float64() -> None:
    def f(w1: Any, w2: Any, x: Any) -> Any:  # (float64 tanh would run on NumPy, outside regions)
        return dnp.maximum(dnp.maximum(x @ w1.T, 0.0) @ w2.T + 1.0, 0.5) * 2.0

    w1, w2 = (rng.standard_normal((64, 64)) / 8 for _ in range(2))
    x = rng.standard_normal((2048, 64))
    on, off, source = both(f, w1, w2, x)
    assert_same_bits(on, off)
    expected = np.maximum(np.maximum(x @ w1.T, 0.0) @ w2.T + 1.0, 0.5) * 2.0
    np.testing.assert_allclose(on[0], expected, rtol=1e-12, atol=1e-12)
    assert "def region0_chunk" in source and "float64" in source


def test_no_region_where_blocks_would_be_too_small() -> None:
    p, x = params([1, 64, 64, 1]), rng.uniform(-2, 2, (256, 1)).astype(np.float32)  # 16 rows a block
    on, off, source = both(d2, p, x)
    assert_same_bits(on, off)
    assert "def region" not in source


def test_mlp_training_step_with_weight_gradients() -> None:
    """Weight gradients (``x.T @ g``) read every row: only row-local runs between them can form regions."""

    def loss(p: Any, x: Any) -> Any:
        return (u(p, x) ** 2).mean()

    p, x = params([64, 64, 64, 64, 32]), rng.standard_normal((1024, 64)).astype(np.float32)
    step = dsl.value_and_grad(loss)
    on = _leaves(dsl.compile(step)(p, x))
    with regions_off():
        off = _leaves(dsl.compile(step)(p, x))
    assert_same_bits(on, off)


def test_concurrent_calls_of_region_programs() -> None:
    """Two executables running regions at once (each its own scratch; thread ids per team)."""
    p, x = params([1, 64, 64, 64, 1]), rng.uniform(-2, 2, (2048, 1)).astype(np.float32)
    expected = np.asarray(dsl.compile(d2)(p, x))
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        f = dsl.compile(d2)
        try:
            for _ in range(5):
                results.append(np.asarray(f(p, x)))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 10
    for r in results:
        np.testing.assert_array_equal(r, expected)


@pytest.mark.parametrize("rows", [2048 + 8 * 16, 2048 + 5])
def test_rows_not_a_multiple_of_the_blocks(rows: int) -> None:
    """Blocks of a multiple of the tiles' rows give the same bits; otherwise the rows left beside the
    whole tiles go to the library's gemm, in other places than the two-part split puts them."""
    p, x = params([1, 64, 64, 1]), rng.uniform(-2, 2, (rows, 1)).astype(np.float32)
    on, off, source = both(d2, p, x)
    assert "def region0_chunk" in source
    if rows % (8 * max(16, cpu.numba_threads())) == 0:  # whole tiles in every block and every part
        assert_same_bits(on, off)
    np.testing.assert_allclose(on[0], off[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(on[0], d2_numpy(p, x), rtol=1e-3, atol=1e-3 * np.abs(d2_numpy(p, x)).max())


_RANDOM_OPS = ("mm", "mmT", "tanh", "sq", "relu", "res", "rowmean", "colsum", "flip", "bias", "ret")


def _random_program(seed: int) -> tuple[list[str], Callable[..., Any]]:
    """A chain of row-local steps (matmuls, elementwise, a residual, a row mean) mixed with steps that
    read other rows (a column sum, reversed rows), some intermediates returned."""
    r = np.random.default_rng(seed)
    ops = ["mm"] + [str(r.choice(_RANDOM_OPS)) for _ in range(r.integers(3, 9))]

    def f(ws: Any, b: Any, x: Any, xp: Any = dnp) -> Any:
        h, prev, outs, k = x, x, [], 0
        for op in ops:
            if op in ("mm", "mmT"):
                h, prev, k = h @ (ws[k % 3] if op == "mm" else ws[k % 3].T), h, k + 1
            elif op in ("tanh", "relu", "sq"):
                h = xp.tanh(h) if op == "tanh" else xp.maximum(h, 0.0) if op == "relu" else h * h * 0.5
            elif op in ("res", "bias"):
                h = h + (prev if op == "res" else b)
            elif op == "rowmean":
                h = h - h.mean(axis=1, keepdims=True)
            elif op == "colsum":
                h = h * (h.sum(axis=0, keepdims=True) * 0.001)
            elif op == "flip":
                h = h[::-1]
            else:
                outs.append(h * 1.0)
        return h, *outs

    return ops, f


@pytest.mark.parametrize("seed", range(8))
def test_random_programs_match_without_regions_and_numpy(seed: int) -> None:
    ops, f = _random_program(seed)
    r = np.random.default_rng(seed + 1000)
    ws = [(r.standard_normal((64, 64)) / 8).astype(np.float32) for _ in range(3)]
    b, x = (
        r.standard_normal(64).astype(np.float32),
        r.standard_normal((2048 + 40 * (seed % 2), 64)).astype(np.float32),
    )
    if seed % 3 == 2:  # the gradient of the sum w.r.t. x: the backward chain, row-local where the forward is
        fn = lambda ws, b, x: dsl.grad(lambda x: f(ws, b, x)[0].sum())(x)  # noqa: E731
        on, off, _ = both(fn, ws, b, x)
    else:
        on, off, _ = both(f, ws, b, x)
        expected = _leaves(f(ws, b, x.astype(np.float64), xp=np))
        for got, want in zip(on, expected, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(want).max())))
    for a, c in zip(on, off, strict=True):
        np.testing.assert_allclose(
            a, c, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(c).max())), err_msg=str(ops)
        )


_MORE_THREADS_THAN_BLOCKS = """
import numpy as np, dsl, test_row_blocks as t
p, x = t.params([1, 64, 64, 64, 1]), t.rng.uniform(-2, 2, (2048, 1)).astype(np.float32)
source = dsl.compile(t.d2).lower(p, x).source()
assert "numba.get_thread_id()" in source
plan, peak_off, arena, blocks = t.region_plan_figures(t.d2, p, x)
assert blocks and arena == plan.peak_bytes > peak_off  # 32 blocks of 128 rows: twice each slot
assert all(r.bytes == 2 * r.value.type.nbytes for r in blocks), [(r.bytes, r.value.type) for r in blocks]
got = np.asarray(dsl.compile(t.d2)(p, x))
want = t.d2_numpy(p, x)
np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
print("ok")
"""


def test_more_threads_than_blocks_grow_the_slots(tmp_path: Any) -> None:
    """With more threads than blocks, a slot of the region's own holds a block for every thread id:
    more than the whole buffer (run in a process with 32 Numba threads)."""
    env = {**os.environ, "NUMBA_NUM_THREADS": "32", "DSL_CACHE_DIR": str(tmp_path)}
    tests = os.path.dirname(os.path.abspath(__file__))
    run = subprocess.run(
        [sys.executable, "-c", _MORE_THREADS_THAN_BLOCKS], cwd=tests, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]
