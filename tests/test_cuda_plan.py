"""The memory plan for ``target="cuda"``, made on a machine without a GPU: row fusion keeps layer
norm's and softmax + cross-entropy's rows in a block (``compiler/codegen/cuda/bands.py``), so no
full-size intermediate is planned (the suite's sizes, ``benchmarks/suite_programs.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
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
    plan, source = planned(name, row_fusion=True)
    full = PROGRAMS[name][1][0].nbytes  # one 4096-row array
    assert "_rows(" in source
    assert all(row.bytes < full // 64 for row in plan.buffers), str(plan)
    assert plan.peak_bytes <= 64 * 1024, str(plan)


def test_without_row_fusion_layer_norm_plans_full_size_intermediates() -> None:
    plan, source = planned("layer norm", row_fusion=False)
    assert "_rows(" not in source
    assert plan.peak_bytes >= 2 * PROGRAMS["layer norm"][1][0].nbytes, str(plan)
