"""``results_in_place`` (compiler/passes/plan.py): a returned value computed in place from an arena
value that dies there takes that value's chain of blocks into the result's own memory. An embedding
gradient (a scatter-add into a zeroed buffer) then plans no arena at all instead of a full-size
zero buffer, on the CPU and CUDA; values are checked against NumPy and against the option switched
off, with the sanitizer (which poisons dead arena buffers and checks overlaps) on and off. The CUDA
simulator's run of the same programs is in ``tests/cuda_sim/sim_gather_scatter.py``."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
from compiler.compilation import option_defaults

RNG = np.random.default_rng(3)
EMB = RNG.standard_normal((500, 16)).astype(np.float32)
TOKENS = RNG.integers(0, 500, 300)
W = RNG.standard_normal((300, 16)).astype(np.float32)


def embedding_loss(emb, tokens, w):
    return (emb[tokens] * w).sum()


def scatter_then_scale(x, i, v):
    z = dnp.zeros((6, 3))
    z[i] += v
    z = z * 2.0
    z[0] = x
    return z


def returned_twice(x):
    z = dnp.zeros((4,))
    z[1:3] += x[:2]
    return z, z


def loop_carry(x):
    return dsl.fori_loop(0, 3, lambda i, c: c * 0.5 + 1.0, x * 2.0) + 1.0


CASES = {
    "embedding gradient": (dsl.grad(embedding_loss), (EMB, TOKENS, W)),
    "scatter, scale, write": (scatter_then_scale, (np.arange(3.0), np.array([1, 3, 3]), np.ones((3, 3)))),
    "returned twice": (returned_twice, (np.arange(4.0),)),
    "loop carry": (loop_carry, (np.arange(4.0),)),
}


def _numpy_embedding_gradient() -> np.ndarray:
    want = np.zeros_like(EMB)
    np.add.at(want, TOKENS, W)
    return want


@pytest.mark.parametrize("sanitize", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_equal_the_option_switched_off(name: str, sanitize: bool) -> None:
    fn, args = CASES[name]
    with option_defaults(sanitize=sanitize):
        on = dsl.compile(fn)(*args)
        with option_defaults(results_in_place=False):
            off = dsl.compile(fn)(*args)
    for a, b in zip(on if isinstance(on, tuple) else (on,), off if isinstance(off, tuple) else (off,)):
        np.testing.assert_array_equal(a, b)
    if name == "embedding gradient":
        np.testing.assert_allclose(on, _numpy_embedding_gradient(), rtol=1e-6, atol=1e-6)
    if name == "returned twice":
        assert on[0] is not on[1]  # results never alias each other


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_an_embedding_gradient_plans_no_zero_buffer(target: str) -> None:
    """The zeroed base of the scatter-add is computed in the gradient's memory: the plan holds no
    full-size buffer (CUDA: only the sorted scatter's small tables), where before it held one."""
    fn, args = CASES["embedding gradient"]
    plan = dsl.compile(fn, target=target).lower(*args).memory_plan()
    with option_defaults(results_in_place=False):
        before = dsl.compile(fn, target=target).lower(*args).memory_plan()
    assert before.peak_bytes >= EMB.nbytes > plan.peak_bytes, (str(before), str(plan))
    rows = [r for r in plan.buffers if r.result is not None]
    assert [r.bytes for r in rows] == [EMB.nbytes], str(plan)
    assert "result" in str(plan) and "computed in the result's own memory" in str(plan)


def test_not_for_a_result_returned_twice_or_a_loop_carry() -> None:
    """Results never alias each other (a value returned twice is copied), and a loop's carries stay
    in the loop code's own buffers."""
    for name in ("returned twice", "loop carry"):
        fn, args = CASES[name]
        plan = dsl.compile(fn).lower(*args).memory_plan()
        assert not plan.in_result, (name, str(plan))


def test_the_bufferized_ir_and_the_cli_name_the_result() -> None:
    fn, args = CASES["scatter, scale, write"]
    text = dsl.compile(fn).lower(*args).ir("bufferized")
    assert 'dsl.buffer = "result 0"' in text and "dsl.reuses" in text
