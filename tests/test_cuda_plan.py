"""The memory plan for ``target="cuda"``, made on a machine without a GPU: row fusion keeps layer
norm's and softmax + cross-entropy's rows in a block (``compiler/kernel/cuda/bands.py``), so no
full-size intermediate is planned (the suite's sizes, ``benchmarks/suite_programs.py``)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
from compiler.kernel.cuda.loops import unroll_factor
from compiler.kernel.cuda.sizes import GPU
from compiler.pipeline import option_defaults

RNG = np.random.default_rng(3)


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def layer_norm_loss(x, g, b, r):
    mu = x.mean(axis=-1, keepdims=True)
    c = x - mu
    return ((c / dnp.sqrt((c * c).mean(axis=-1, keepdims=True) + 1e-5) * g + b) * r).sum()


def xent(z, onehot):
    s = z - dsl.stop_gradient(z.max(axis=-1, keepdims=True))
    return -(onehot * (s - dnp.log(dnp.exp(s).sum(axis=-1, keepdims=True)))).sum() / z.shape[0]


PROGRAMS = {
    "layer norm": (
        dsl.value_and_grad(layer_norm_loss, argnums=(0, 1, 2)),
        (f32(4096, 1024), f32(1024), f32(1024), f32(4096, 1024)),
    ),
    "softmax + cross-entropy": (dsl.value_and_grad(xent), (f32(4096, 1000), f32(4096, 1000))),
}


def planned(name: str, row_fusion: bool):
    fn, args = PROGRAMS[name]
    with option_defaults(row_fusion=row_fusion):
        lowered = dsl.compile(fn, target="cuda").lower(*args)
    return lowered.memory_plan(), lowered.source()


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_rows_stay_in_a_block(name: str) -> None:
    """No value of the program gets more than a few rows; the kernels' scratch (the band's
    partial column sums: one float64 row per block, ``GPU.BANDB`` blocks) is in the plan too."""
    plan, source = planned(name, row_fusion=True)
    full = PROGRAMS[name][1][0].nbytes  # one 4096-row array
    row64 = full // 4096 * 2  # one row in float64
    assert "_rows(" in source
    values = [row for row in plan.buffers if row.scratch_of is None]
    scratch = [row for row in plan.buffers if row.scratch_of is not None]
    assert all(row.bytes < full // 64 for row in values), str(plan)
    assert all(row.bytes <= GPU.BANDB * row64 for row in scratch), str(plan)
    assert plan.peak_bytes <= 64 * 1024 + sum(row.bytes for row in scratch), str(plan)
    bind = source.split("def bind(")[1].split("def run(")[0]
    assert "cuda.device_array" not in bind  # scratch: views of the arena


def test_scratch_is_planned_beside_the_values_live_with_it() -> None:
    """The scratch pass places each kernel's scratch where no value live during its kernel is:
    the sanitizer's overlap check holds for the plan with scratch, and the arena covers it."""
    from compiler.passes.plan import check_no_overlap

    for form in ("auto", "band"):
        with option_defaults(band_columns=form):
            plan, _ = planned("layer norm", row_fusion=True)
        scratch = [row for row in plan.buffers if row.scratch_of is not None]
        assert scratch, str(plan)
        check_no_overlap(plan)
        assert plan.peak_bytes >= max(row.offset + row.bytes for row in scratch)


def layer_norm_plan(rows: int, width: int, form: str = "auto"):
    args = (np.empty((rows, width), np.float32), f32(width), f32(width), np.empty((rows, width), np.float32))
    fn = dsl.value_and_grad(layer_norm_loss, argnums=(0, 1, 2))
    with option_defaults(band_columns=form):
        lowered = dsl.compile(fn, target="cuda").lower(*args)
    return lowered.memory_plan(), lowered.source()


def test_layer_norm_scratch_at_gpu_size_in_one_pass() -> None:
    """Layer norm fwd+bwd at 16384x4096 (issue 27's GPU size) with its column reductions in the
    band (``band_columns="band"``): the band's scratch is its partial column sums (gamma's and
    beta's: a float64 row per block, ``GPU.BANDB`` blocks) and at most one local row per block: the
    other local rows take the shared memory (29.4 MB before, when a partial took it)."""
    rows, width = 16384, 4096
    plan, _ = layer_norm_plan(rows, width, "band")
    scratch = sum(row.bytes for row in plan.buffers if row.scratch_of is not None)
    partials = 2 * GPU.BANDB * width * 8
    assert scratch <= partials + GPU.BANDB * width * 4 + GPU.BANDB * 8, str(plan)  # 20,973,568 bytes
    assert plan.peak_bytes == scratch, str(plan)  # no value of the program has a buffer


def test_layer_norm_columns_after_the_band_at_the_cpu_suite_size() -> None:
    """By default gamma's and beta's gradients leave the band for a column kernel after it (the rows
    pass's cost model) with two outputs (``rows.reductions_together``): the band stores each row's mean
    and deviation (a float32 per row each), the column kernel re-reads ``x`` and ``dy`` once and
    keeps a partial row per chunk of rows for each output (8 chunks of 512 rows; the band's loss
    partials before them in the same bytes). At 4096x1024 it planned 4,196,352 bytes (the one-pass
    band), then 98,304 with a column kernel per gradient (their partials in the same bytes, one
    after the other), now 163,840: the two per-row values (32,768) and both gradients' partials
    (131,072). XLA: 8,192."""
    plan, source = layer_norm_plan(4096, 1024)
    assert "_reduce_sum_1(" in source and "(COLS, LANES)" in source
    values = [row for row in plan.buffers if row.scratch_of is None]
    assert sum(row.bytes for row in values) == 2 * 4096 * 4, str(plan)
    assert plan.peak_bytes <= 2 * 4096 * 4 + 2 * 8 * 1024 * 8, str(plan)
    one_pass, _ = layer_norm_plan(4096, 1024, "band")
    assert one_pass.peak_bytes > 25 * plan.peak_bytes, str(one_pass)


def test_layer_norm_columns_after_the_band_at_the_gpu_size() -> None:
    """At 16384x4096 (issue 27's GPU size): 20,973,568 bytes in one pass, now 655,360: the per-row
    values (131,072) and the column kernel's partials (8 chunks of 2048 rows x 4096 x float64,
    262,144, for gamma and for beta: one kernel takes both, 393,216 with a kernel each). The band's
    three kept rows (16 KiB each) do not all fit a block's shared memory: ``x - mean`` is computed
    again by its readers from ``x`` instead of a global row per block slot (4,194,304 bytes).
    XLA: 2,097,152."""
    plan, source = layer_norm_plan(16384, 4096)
    values = [row for row in plan.buffers if row.scratch_of is None]
    assert sum(row.bytes for row in values) == 2 * 16384 * 4, str(plan)
    assert plan.peak_bytes <= 2 * 16384 * 4 + 2 * 8 * 4096 * 8, str(plan)
    band = source.split("def k0_rows(")[1].split("\n\n\n")[0]
    assert band.count("cuda.shared.array(k0_rows_S") == 2 and "_row[" not in band, band
    # after the band, one pass over x (a0) and dy (a3) for both gradients: each read once
    (columns,) = re.findall(r"def (k\d+_reduce_sum)_1\(", source)
    body = source.split(f"def {columns}_1(")[1].split("\n\n\n")[0]
    # (the loop's reads: in each of its 4 unrolled iterations, issued first, and in the remainder loop)
    reads = unroll_factor() + 1 if unroll_factor() > 1 else 1
    assert body.count("a0[") == body.count("a3[") == reads and "acc1 = " in body, body


def test_a_band_keeping_a_scalar_per_block_takes_a_wave_of_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Layer norm's band keeps one float64 per block (its partial of the loss): it takes as many blocks
    as the GPU holds at once (``GPU.SMS`` times 4: the launch bounds hold each thread to 64 registers
    so that 4 blocks of 256 threads fit an SM, ``bands.BAND_BLOCKS``), not ``GPU.BANDB`` (256: two
    per SM, whose barriers left the SMs idle), each taking an even share of the rows; its combine is
    one block whose threads take fixed slots, then the block's tree (deterministic), where one
    thread looped over every slot. Without bounds (``DSL_CUDA_BAND_BLOCKS=0``) the wave counts what
    shared memory and threads allow: 6 blocks with its two rows of 4096 float32, 8 with rows of
    1024."""
    plan, source = layer_norm_plan(16384, 4096)
    assert "k0_rows_G = max(1, min((16384 + k0_rows_RT - 1) // k0_rows_RT, SMS * 4))" in source
    assert "@cuda.jit(cache=not SIM, **_bounds(4))\ndef k0_rows(" in source
    ((lo, hi),) = re.findall(r"k0_rows_p\d+ = arena\[(\d+):(\d+)\]", source)  # the partials' scratch
    assert int(hi) - int(lo) == GPU.SMS * 4 * 8
    (combine,) = [k for k in source.split("\n\n\n") if "def k0_rows_combine" in k]
    assert "for q in range(tid, k0_rows_G, TPB):" in combine and "shfl_down_sync" in combine, combine
    _, small = layer_norm_plan(4096, 1024)
    assert "k0_rows_G = max(1, min((4096 + k0_rows_RT - 1) // k0_rows_RT, SMS * 4))" in small
    monkeypatch.setenv("DSL_CUDA_BAND_BLOCKS", "0")
    _, unbounded = layer_norm_plan(16384, 4096)
    assert "k0_rows_G = max(1, min((16384 + k0_rows_RT - 1) // k0_rows_RT, SMS * 6))" in unbounded
    assert "@cuda.jit(cache=not SIM)\ndef k0_rows(" in unbounded
    _, small = layer_norm_plan(4096, 1024)  # rows of 4 KiB: 8 blocks of 256 threads an SM
    assert "k0_rows_G = max(1, min((4096 + k0_rows_RT - 1) // k0_rows_RT, SMS * 8))" in small
    column_sums, _ = layer_norm_plan(16384, 4096, "band")  # a row of partials per block: BANDB
    assert max(row.bytes for row in column_sums.buffers if row.scratch_of is not None) == GPU.BANDB * 4096 * 8


def test_the_cost_model_keeps_a_column_reduction_that_would_reread_much() -> None:
    """A column sum whose prologue reads six full-size inputs stays in the band (re-reading them
    costs more than the partial rows' traffic); ``band_columns="kernel"`` sends it out anyway."""

    def f(x, a, b, c, d, e):
        y = x - x.mean(axis=-1, keepdims=True)
        z = y / (y * y).sum(axis=-1, keepdims=True)
        return z + 1.0, (z * a * b * c * d * e).sum(axis=0)

    args = [np.empty((4096, 256), np.float32) for _ in range(6)]
    for form, after in (("auto", False), ("kernel", True)):
        with option_defaults(band_columns=form):
            source = dsl.compile(f, target="cuda").lower(*args).source()
        assert "_rows(" in source
        assert ("_reduce_sum" in source) == after, source


def test_rows_past_shared_memory_take_bandb_blocks() -> None:
    """A band with no partials whose local rows do not all fit in shared memory keeps a row of
    global scratch per block: it takes ``GPU.BANDB`` blocks, not one per row (``MAXB``): 4 MB of
    scratch at 16384x4096, where it planned 134 MB (8192 blocks)."""

    def f(x, y):
        a = dnp.exp(x - x.max(axis=-1, keepdims=True))
        b = a / a.sum(axis=-1, keepdims=True)
        c = dnp.tanh(b * y)
        d = c - c.mean(axis=-1, keepdims=True)
        e = dnp.sin(d)
        return e / e.sum(axis=-1, keepdims=True) + a

    x = np.empty((16384, 4096), np.float32)
    lowered = dsl.compile(f, target="cuda").lower(x, x)
    plan = lowered.memory_plan()
    assert "_rows(" in lowered.source()
    scratch = [row for row in plan.buffers if row.scratch_of is not None]
    assert scratch and all(row.bytes <= GPU.BANDB * 4096 * 4 for row in scratch), str(plan)


def test_without_row_fusion_layer_norm_plans_full_size_intermediates() -> None:
    """(A chain of full-size intermediates is computed in the gradient's own memory, where the
    last kernel runs in place: results_in_place.)"""
    plan, source = planned("layer norm", row_fusion=False)
    assert "_rows(" not in source
    full = PROGRAMS["layer norm"][1][0].nbytes
    assert plan.peak_bytes >= full, str(plan)
    assert any(r.bytes == full for r in plan.buffers if r.result is not None), str(plan)
