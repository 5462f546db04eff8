"""Row fusion (``compiler/passes/rows.py``): which groups form a band, what a band keeps per row,
how the planner treats it, and that band kernels give the results of the unfused kernels (the
``row_fusion`` switch off) and of the reference interpreter, under the sanitizer as well."""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numba
import numpy as np
import pytest
from helpers import interpret_fn, parallel_loops
from test_codegen_cpu import Builder, T

import dsl
import dsl.numpy as dnp
from compiler.codegen import build_cpu_executable
from compiler.interpreter import interpret
from compiler.passes.fuse import GroupKind
from compiler.pipeline import Options, option_defaults, plan_program, run_passes

rng = np.random.default_rng(23)


def f32(*shape: int) -> np.ndarray:
    """Random values that depend on the shape only, not on which tests ran before (xdist)."""
    return np.random.default_rng(hash(shape) % 2**32).standard_normal(shape).astype(np.float32)


@contextmanager
def rows_off() -> Iterator[None]:
    with option_defaults(row_fusion=False):
        yield


def build(fn: Any, *args: Any, sanitize: bool = False) -> Any:
    func = dsl.compile(fn)._trace(args)[0]
    optimized = run_passes(func, Options())["optimized"]
    return build_cpu_executable(plan_program(optimized, Options(sanitize=sanitize)))


def layer_norm(x: Any, g: Any, b: Any, r: Any) -> Any:
    c = x - x.mean(axis=-1, keepdims=True)
    y = c / dnp.sqrt((c * c).mean(axis=-1, keepdims=True) + 1e-5) * g + b
    return (y * r).sum()


def xent(z: Any, y: Any) -> Any:
    s = z - dsl.stop_gradient(z.max(axis=-1, keepdims=True))
    return -(y * (s - dnp.log(dnp.exp(s).sum(axis=-1, keepdims=True)))).sum() / z.shape[0]


def _leaves(x: Any) -> list[np.ndarray]:
    if isinstance(x, (tuple, list)):
        return [a for v in x for a in _leaves(v)]
    return [np.asarray(x)]


def check_against_off(fn: Any, *args: np.ndarray, rtol: float = 2e-5) -> list[np.ndarray]:
    on = _leaves(dsl.compile(fn)(*args))
    with rows_off():
        off = _leaves(dsl.compile(fn)(*args))
    want = _leaves(interpret_fn(fn, *args))
    for a, b, w in zip(on, off, want, strict=True):
        scale = max(1.0, float(np.abs(w).max()))
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale)
        np.testing.assert_allclose(a, w, rtol=1e-4, atol=1e-4 * scale)
    return on


def test_layer_norm_forward_and_backward_is_one_kernel_with_rows_of_scratch() -> None:
    args = (f32(300, 128), f32(128), f32(128), f32(300, 128))
    grad = dsl.value_and_grad(layer_norm, argnums=(0, 1, 2))
    _, program, fusion, plan = build(grad, *args)
    (band,) = fusion.bands
    assert band.rows == 300 and len(band.groups) == len(fusion.groups) > 5
    assert program.source.count("def k") == 1 and "_rows(" in program.source
    # the centred rows, the normalized rows and the backward's row temporaries are all per row
    assert all(v.type.shape[0] == 300 for v in band.local) and len(band.local) >= 8
    # nothing full-size outlives a row: the arena holds only the band's scratch (a row and a partial
    # result per chunk)
    assert all(r.scratch_of == "k0_rows" for r in plan.buffers)
    assert 0 < plan.peak_bytes < 300 * 128 * 4 // 4
    with rows_off():
        _, _, unfused, unplanned = build(grad, *args)
    # without bands, full-size intermediates (one more than this is computed in the gradient's own
    # memory: results_in_place)
    assert not unfused.bands and unplanned.peak_bytes >= 300 * 128 * 4
    assert any(r.bytes == 300 * 128 * 4 for r in unplanned.buffers if r.result is not None)
    check_against_off(grad, *args)


def test_per_row_scalars_are_assigned_on_every_path_through_the_row(tmp_path: Any, monkeypatch: Any) -> None:
    """A row's max, sum and log-sum are scalars assigned on every path through the row (no
    ``range(1)`` loop around them): Numba's parallel lowering treats a variable that may be live
    into the parallel body as shared between threads (NumbaParallelSafetyWarning)."""
    monkeypatch.setenv("DSL_CACHE_DIR", str(tmp_path))  # a cold cache: Numba compiles for real
    z, y = f32(70_000, 4), np.abs(f32(70_000, 4))
    grad = dsl.value_and_grad(xent)
    with warnings.catch_warnings():
        warnings.simplefilter("error", numba.NumbaParallelSafetyWarning)
        _, program, fusion, _ = build(grad, z, y)
        assert any(math.prod(v.type.shape[1:]) == 1 for b in fusion.bands for v in b.local)
        assert 16 in parallel_loops(program.source)
        assert not re.search(r"for i\d+ in range\(1\):", program.source)
        check_against_off(grad, z, y)


def test_the_bufferized_stage_marks_values_kept_per_row() -> None:
    args = (f32(64, 32), f32(32), f32(32), f32(64, 32))
    text = dsl.value_and_grad(layer_norm, argnums=(0, 1, 2)).lower(*args).ir("bufferized")
    assert text.count('dsl.buffer = "row"') >= 8 and "dsl.offset" not in text


@pytest.mark.parametrize("rows", [1, 2, 15, 17, 1000])
def test_softmax_cross_entropy_for_any_row_count(rows: int) -> None:
    z, y = f32(rows, 37), np.abs(f32(rows, 37))
    check_against_off(dsl.value_and_grad(xent), z, y)


def test_softmax_forward_and_backward_is_one_band_around_the_loss_division() -> None:
    z, y = f32(500, 37), np.abs(f32(500, 37))
    grad = dsl.value_and_grad(xent)
    _, program, fusion, _ = build(grad, z, y)
    (band,) = fusion.bands
    assert len(band.tail) == 1 and len(band.groups) == len(fusion.groups)  # loss / batch: a tail
    assert program.source.count("def k") == 1
    check_against_off(grad, z, y)


def test_a_transcendental_recomputed_by_band_members_is_computed_once_per_row() -> None:
    z, y = f32(500, 37), np.abs(f32(500, 37))
    grad = dsl.value_and_grad(xent)
    _, program, fusion, _ = build(grad, z, y)
    (band,) = fusion.bands
    exp_of = {op.result for op in band.groups[1].ops if op.prim.name == "exp"}
    kept = [v for v in band.local if v in exp_of]
    assert kept and kept[0] in band.groups[1].outputs  # the row sum's member stores exp(z - max) ...
    assert all(not g.produces(kept[0]) for g in band.groups[2:])  # ... and the gradient reads it
    assert re.findall(r"\bexp_f32\(", program.source.split("def k")[1]) == ["exp_f32("]
    with option_defaults(row_compute_once=False):
        _, recomputed, _, _ = build(grad, z, y)
        assert len(re.findall(r"\bexp_f32\(", recomputed.source.split("def k")[1])) == 2
        off = _leaves(dsl.compile(grad)(z, y))
    for a, b in zip(_leaves(dsl.compile(grad)(z, y)), off, strict=True):
        np.testing.assert_array_equal(a, b)  # the same exp, stored instead of computed again
    check_against_off(grad, z, y)


def test_a_tail_result_read_by_rows_ends_the_band() -> None:
    b = Builder(T(300, 20))
    (x,) = b.params
    r = b.op("reshape", b.op("reduce_sum", x, axes=(1,)), shape=(300, 1))  # a row reduction
    r = b.op("broadcast", r, shape=(300, 20))
    mean = b.op("div", b.op("reduce_sum", x, axes=(0, 1)), b.const(6000.0))  # full sum, then a tail
    y = b.op("reduce_sum", b.op("sin", b.op("mul", x, r)), axes=(1,))  # rows after the tail
    z = b.op("sub", x, b.op("broadcast", mean, shape=(300, 20)))  # reads the tail's result
    func = b.function(y, z)
    executable, _, fusion, _ = build_cpu_executable(plan_program(func))
    (band,) = fusion.bands
    (tail,) = band.tail
    assert band.groups[-1] is not tail  # the sin rows follow the tail inside the band
    late = set(tail.outputs)
    assert not any(late & set(g.inputs) for g in band.groups)
    assert any(late & set(g.inputs) for g in fusion.groups if g not in band.groups)
    args = [f32(300, 20)]
    for got, want in zip(executable(*args), interpret(func, args), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_column_and_full_reductions_accumulate_per_chunk() -> None:
    def stats(x: Any, w: Any) -> Any:
        e = dnp.tanh(x * w)  # a row-wise prologue shared by row, column and full reductions
        return (
            e.sum(axis=1),
            e.sum(axis=0),
            e.max(axis=0),
            e.sum(),
            (e * x).min(),
            x - e.mean(axis=1, keepdims=True),
        )

    x, w = f32(70_000, 3), f32(70_000, 1)  # big enough for the parallel loop, 16 chunks
    _, program, fusion, _ = build(stats, x, w)
    assert len(fusion.bands) == 1 and 16 in parallel_loops(program.source)
    check_against_off(stats, x, w, rtol=1e-4)  # float32 sums of 210,000 terms in another order


def test_a_value_read_at_another_row_ends_the_band() -> None:
    def shifted(x: Any) -> Any:
        m = x.sum(axis=1)  # (n,): row i of m is ready after row i
        return dnp.tanh(x + m[:, None]), m[::-1] * 2.0  # the reversal reads other rows

    x = f32(64, 8)
    _, _, fusion, _ = build(shifted, x)
    for band in fusion.bands:
        readers = [g for g in band.groups if any(op.prim.name == "slice" for op in g.ops)]
        assert not readers or all(
            m.kind is GroupKind.LOOP for m in band.groups[: band.groups.index(readers[0])]
        )
    check_against_off(shifted, x)


def test_transposed_reads_of_a_band_value_are_not_fused() -> None:
    def f(x: Any) -> Any:
        y = dnp.sin(x - x.max(axis=1, keepdims=True))  # stored: sin is not recomputed
        return (y.T * 2.0).sum(axis=1) + y.sum(axis=1)  # read column-wise and row-wise: stored

    x = f32(32, 32)
    _, _, fusion, plan = build(f, x)
    check_against_off(f, x)
    y_stored = [v for g in fusion.groups for v in g.outputs if v.type.shape == (32, 32)]
    assert y_stored and not any(v in fusion.local for v in y_stored)


def test_in_place_updates_inside_a_band_keep_eager_semantics() -> None:
    def step(x: Any, y: Any) -> Any:
        m = x.mean(axis=1, keepdims=True)
        x -= m  # a user in-place update of an argument, then reads of the old and new value
        y += x * 2.0
        return (x * y).sum(axis=1)

    x, y = f32(200, 64), f32(200, 64)
    want_x, want_y = x.copy(), y.copy()
    want = interpret_fn(step, want_x, want_y)
    for inplace in (True, False):
        gx, gy = x.copy(), y.copy()
        got = dsl.compile(step, inplace=inplace)(gx, gy)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(gx, want_x, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(gy, want_y, rtol=1e-6, atol=1e-5)


def test_band_programs_under_the_sanitizer() -> None:
    """The sanitizer checks that no two live buffers share bytes and poisons every dead buffer."""
    args = (f32(100, 40), f32(40), f32(40), f32(100, 40))
    grad = dsl.value_and_grad(layer_norm, argnums=(0, 1, 2))
    executable, _, fusion, _ = build(grad, *args, sanitize=True)
    assert fusion.bands
    for a, b in zip(_leaves(executable(*args)), _leaves(interpret_fn(grad, *args)), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(b).max())))


def test_three_dimensional_rows_and_integer_values() -> None:
    def f(x: Any, n: Any) -> Any:
        s = x.sum(axis=(1, 2), keepdims=True)
        t = (n * 3).sum(axis=2)  # int32 row reduction of the inner axis only
        return x / (s + 100.0), t, (x - s).max(axis=0)

    x = f32(40, 6, 5)
    n = rng.integers(-9, 9, size=(40, 6, 5)).astype(np.int32)
    _, _, fusion, _ = build(f, x, n)
    assert fusion.bands
    check_against_off(f, x, n)


def cuda_fusion(fn: Any, *args: Any, **options: Any) -> Any:
    """``fn``'s fusion plan, bands formed, for the CUDA target (planned without a GPU)."""
    func = dsl.compile(fn)._trace(args)[0]
    opts = Options(target="cuda", **options)
    return plan_program(run_passes(func, opts)["optimized"], opts).fusion


def test_column_reductions_after_a_band_that_share_inputs_are_one_group() -> None:
    """On CUDA, layer norm's gamma and beta gradients leave the band (``band_columns="kernel"``) and,
    both reading ``dy``, become one REDUCE group with two outputs (``rows.reductions_together``): one
    column kernel reads ``dy`` once. ``sibling_reductions=False``: a group each. The CPU's bands
    keep their column reductions (no tails, no siblings)."""
    args = (f32(300, 128), f32(128), f32(128), f32(300, 128))
    grad = dsl.value_and_grad(layer_norm, argnums=(0, 1, 2))
    fusion = cuda_fusion(grad, *args, band_columns="kernel")
    (band,) = fusion.bands
    (tail,) = band.tail
    assert tail.kind is GroupKind.REDUCE and len(tail.reductions) == 2 and tail.reduced_axes == {0}
    assert [op.result for op in tail.reductions] == tail.outputs and tail in fusion.groups
    assert all(fusion.group_of[op] is tail for op in tail.reductions)
    apart = cuda_fusion(grad, *args, band_columns="kernel", sibling_reductions=False)
    assert [len(g.reductions) for g in apart.bands[0].tail] == [1, 1]
    _, _, on_cpu, _ = build(grad, *args)
    assert not any(g.siblings for g in on_cpu.groups) and not on_cpu.bands[0].tail


@pytest.mark.parametrize("read_between", [False, True])
def test_a_column_reduction_read_before_a_later_one_keeps_its_group(read_between: bool) -> None:
    """Two column sums after a band's rows that share ``y`` run as one group at the later one's
    place, unless a tail between them reads the earlier's result (``s[3:4] * 2``): it would run
    before the sum it reads."""

    def fn(x: Any, y: Any) -> Any:
        c = x - x.mean(axis=-1, keepdims=True)
        p = c / (c * c).sum(axis=-1, keepdims=True)
        s = (c * y).sum(axis=0)
        return p / p.max(axis=-1, keepdims=True), s[3:4] * 2.0 if read_between else s, (y * y).sum(axis=0)

    fusion = cuda_fusion(fn, f32(300, 128), f32(300, 128), band_columns="kernel")
    (band,) = fusion.bands
    sums = [g for g in band.tail if g.kind is GroupKind.REDUCE]
    assert [len(g.reductions) for g in sums] == ([1, 1] if read_between else [2])


@pytest.mark.parametrize("read_later", [False, True])
def test_reductions_outside_bands_wait_only_where_no_buffer_lives_longer(read_later: bool) -> None:
    """Rows past CUDA's ``row_max`` form no band; two column sums sharing ``y`` become one group at
    the later one's place only when the earlier's other input (``v``, a buffer) is read there or
    after anyway (``v[::-1] * 3``): else running it later would keep ``v`` alive longer."""

    def fn(x: Any, y: Any) -> Any:
        v = dnp.sin(x)
        a = v[::-1] + 1.0
        s, t = (v * y).sum(axis=0), (y * y).sum(axis=0)
        return (a, s, t, v[::-1] * 3.0) if read_later else (a, s, t)

    from compiler.compilation import CUDA_ROW_MAX

    wide = CUDA_ROW_MAX + 1000
    fusion = cuda_fusion(fn, f32(4, wide), f32(4, wide))
    assert not fusion.bands
    sums = [g for g in fusion.groups if g.kind is GroupKind.REDUCE]
    assert [len(g.reductions) for g in sums] == ([2] if read_later else [1, 1])
