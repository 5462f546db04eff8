"""The memory plan for ``target="cuda"``, made on a machine without a GPU: row fusion keeps layer
norm's and softmax + cross-entropy's rows in a block (``compiler/kernel/cuda/bands.py``), so no
full-size intermediate is planned (the suite's sizes, ``benchmarks/suite_programs.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
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

    plan, _ = planned("layer norm", row_fusion=True)
    scratch = [row for row in plan.buffers if row.scratch_of is not None]
    assert len(scratch) == 3, str(plan)  # the loss's partials, and gamma's and beta's partial sums
    check_no_overlap(plan)
    assert plan.peak_bytes >= max(row.offset + row.bytes for row in scratch)


def test_layer_norm_scratch_at_gpu_size() -> None:
    """Layer norm fwd+bwd at 16384x4096 (issue 27's GPU size): the band's scratch is its partial
    column sums (gamma's and beta's: a float64 row per block, ``GPU.BANDB`` blocks, the flushed
    partials the combine reads) and at most one local row per block: the other local rows take the
    shared memory (29.4 MB before, when a partial took it and three local rows went to global)."""
    rows, width = 16384, 4096
    args = (np.empty((rows, width), np.float32), f32(width), f32(width), np.empty((rows, width), np.float32))
    fn = dsl.value_and_grad(layer_norm_loss, argnums=(0, 1, 2))
    plan = dsl.compile(fn, target="cuda").lower(*args).memory_plan()
    scratch = sum(row.bytes for row in plan.buffers if row.scratch_of is not None)
    partials = 2 * GPU.BANDB * width * 8
    assert scratch <= partials + GPU.BANDB * width * 4 + GPU.BANDB * 8, str(plan)  # 20,973,568 bytes
    assert plan.peak_bytes == scratch, str(plan)  # no value of the program has a buffer


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
    plan, source = planned("layer norm", row_fusion=False)
    assert "_rows(" not in source
    assert plan.peak_bytes >= 2 * PROGRAMS["layer norm"][1][0].nbytes, str(plan)
