"""The memory passes (``compiler/passes/schedule.py``, ``remat.py``, offline packing in ``plan.py``),
each against its switched-off form: the same results, planned peak never higher, and lower on the
program shape it exists for. Every op computes what it computed before; only a reduction that a new
order moves into or out of a band of row-fused kernels (``rows.py``) sums in another order, so
results agree to float32 rounding, not always bit for bit. Sizes are small: the plans, not the
speed, are checked."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from helpers import tanh_mlp

import dsl
import dsl.numpy as dnp
from compiler.compilation import option_defaults
from compiler.ir.verify import verify
from compiler.passes.fuse import fuse
from compiler.passes.plan import Planner, check_no_overlap, plan_buffers
from compiler.passes.remat import rematerialize
from compiler.passes.schedule import planned_peak, schedule_for_memory
from compiler.pipeline import Options, run_passes

rng = np.random.default_rng(11)
SWITCHES = ("DSL_NO_SCHEDULE", "DSL_NO_REMAT", "DSL_NO_PACK_BY_SIZE")


_mlp = tanh_mlp


def sgd_step(params: Any, x: Any) -> Any:
    loss, grads = dsl.value_and_grad(lambda p: (_mlp(p, x) ** 2).sum())(params)
    for (w, b), (gw, gb) in zip(params, grads):
        w -= 0.01 * gw
        b -= 0.01 * gb
    return loss


def second_derivative(params: Any, x: Any) -> Any:
    du = lambda x: dsl.grad(lambda x: _mlp(params, x).sum())(x)  # noqa: E731
    return dsl.grad(lambda x: du(x).sum())(x)


def gelu_block(x: Any, w1: Any, w2: Any) -> Any:
    h = x @ w1
    h = 0.5 * h * (1.0 + dnp.tanh(0.79788456 * (h + 0.044715 * (h * h * h))))
    return (h @ w2).sum()


def _params(sizes: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    return [
        (
            (rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32),
            rng.standard_normal(n).astype(np.float32),
        )
        for m, n in zip(sizes[:-1], sizes[1:])
    ]


PROGRAMS = {
    "sgd step": (
        sgd_step,
        lambda: (_params([32, 64, 64, 64, 8]), rng.standard_normal((16, 32)).astype(np.float32)),
    ),
    "second derivative": (
        second_derivative,
        lambda: (_params([1, 64, 64, 64, 1]), rng.uniform(-1, 1, (128, 1)).astype(np.float32)),
    ),
    "gelu block": (
        lambda x, w1, w2: dsl.value_and_grad(gelu_block, argnums=(1, 2))(x, w1, w2),
        lambda: (
            rng.standard_normal((64, 32)).astype(np.float32),
            rng.standard_normal((32, 128)).astype(np.float32) / 6,
            rng.standard_normal((128, 32)).astype(np.float32) / 11,
        ),
    ),
}


def _leaves(x: Any) -> Iterator[np.ndarray]:
    if isinstance(x, (tuple, list)):
        for v in x:
            yield from _leaves(v)
    else:
        yield np.asarray(x)


def _copy(args: Any) -> Any:
    if isinstance(args, (tuple, list)):
        return type(args)(_copy(a) for a in args)
    return np.array(args, copy=True)


def _run(fn: Any, args: Any, monkeypatch: pytest.MonkeyPatch, off: tuple[str, ...]) -> tuple[list, int]:
    """Results and arguments after one call, and the planned peak, with the switches ``off`` set."""
    for name in SWITCHES:
        monkeypatch.delenv(name, raising=False)
    for name in off:
        monkeypatch.setenv(name, "1")
    compiled = dsl.compile(fn)
    args = _copy(args)
    peak = compiled.lower(*args).memory_plan().peak_bytes
    out = compiled(*args)
    return [*_leaves(out), *_leaves(args)], peak


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("switch", [(s,) for s in SWITCHES] + [SWITCHES])
def test_memory_pass_matches_switched_off(name: str, switch: tuple[str, ...], monkeypatch) -> None:
    fn, make_args = PROGRAMS[name]
    args = make_args()
    on, peak_on = _run(fn, args, monkeypatch, ())
    off, peak_off = _run(fn, args, monkeypatch, switch)
    assert peak_on <= peak_off
    for a, b in zip(on, off, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6 * max(1.0, float(np.abs(b).max(initial=0))))


def _optimized(fn: Any, args: Any, **options: Any) -> Any:
    func = dsl.compile(fn)._trace(args)[0]
    return run_passes(func, Options(remat=False, schedule=False, **options))["optimized"]


def test_schedule_runs_each_sgd_update_as_soon_as_its_gradient_exists() -> None:
    func = _optimized(sgd_step, PROGRAMS["sgd step"][1]())
    scheduled = schedule_for_memory(func)
    verify(scheduled)
    assert planned_peak(scheduled) < planned_peak(func)
    assert sorted(map(id, scheduled.ops)) == sorted(map(id, func.ops))  # the same ops, reordered
    # Every weight update (a write-back) no longer waits for the whole backward: the first one
    # runs before the last matmul of the backward.
    position = {op: i for i, op in enumerate(scheduled.ops)}
    writeback = {r for r in scheduled.results[1:]}
    updates = [position[op] for op in scheduled.ops if op.results and op.result in writeback]
    last_matmul = max(i for op, i in position.items() if op.prim.name == "matmul")
    assert min(updates) < last_matmul


def test_schedule_never_raises_the_peak_and_keeps_the_reference_plan() -> None:
    for fn, make_args in PROGRAMS.values():
        func = _optimized(fn, make_args())
        assert planned_peak(schedule_for_memory(func)) <= planned_peak(func)
        assert schedule_for_memory(func, Planner(inplace=False)) is func


def test_schedule_keeps_a_user_inplace_request_in_place() -> None:
    def f(a, w):
        x = a @ w
        y = (x * 3.0).sum()  # reads the old x: must run before the in-place update
        x.add_(1.0)
        return (x @ w).sum() + y

    a, w = rng.standard_normal((8, 8)).astype(np.float32), rng.standard_normal((8, 8)).astype(np.float32)
    text = dsl.compile(f).lower(a, w).explain_inplace()
    assert "add_" in text and "-> in place" in text


def test_remat_recomputes_the_tanh_derivative_instead_of_storing_it() -> None:
    func = _optimized(second_derivative, PROGRAMS["second derivative"][1]())
    remat = rematerialize(func)
    verify(remat)
    assert planned_peak(remat) < planned_peak(func)
    assert len(remat.ops) > len(func.ops)  # copies of cheap ops, placed before their readers
    stored = fuse(remat).materialized
    copies = set(remat.ops) - set(func.ops)
    assert any(op.result not in stored for op in copies)  # computed inside its reader's kernel
    assert len(stored) < len(fuse(func).materialized)


def test_remat_recomputes_a_gelus_tanh_for_every_reader_in_the_backward() -> None:
    """A tanh-form GELU (float32: ``tanh`` a vectorized polynomial, cheap to recompute): its
    backward reads ``t`` twice (``1 + t`` and ``1 - t * t``). Each recomputes it from the stored
    pre-activation, sharing one copy, so the forward stores no ``t`` (a copy of ``1 + t`` read the
    stored ``t``, which then stayed alive for nothing; so did a ``t`` eight ops from ``h``); the
    results are the same bits as without remat."""

    def f(x, w1, w2):
        h = x @ w1
        g = 0.5 * h * (1.0 + dnp.tanh(0.7978846 * (h + 0.044715 * (h * h * h))))
        return ((g @ w2) ** 2).sum()

    args = tuple(rng.standard_normal(s).astype(np.float32) for s in ((16, 8), (8, 32), (32, 4)))
    grad = dsl.grad(f, argnums=(1, 2))
    func = _optimized(grad, args)
    remat = rematerialize(func)
    verify(remat)
    assert planned_peak(remat) < planned_peak(func)
    stored_tanh = [op for op in remat.ops if op.prim.name == "tanh" and op.result in fuse(remat).materialized]
    assert not stored_tanh, "the forward still stores t"
    with option_defaults(remat=False):
        want = dsl.compile(grad)(*args)
    for a, b in zip(dsl.compile(grad)(*args), want, strict=True):
        np.testing.assert_array_equal(a, b)


def test_remat_is_kept_only_where_it_shrinks_the_plan() -> None:
    def f(x):
        y = x * 2.0  # read once: nothing to recompute
        return dnp.exp(y).sum()

    func = _optimized(f, (rng.standard_normal(64).astype(np.float32),))
    assert rematerialize(func) is func


def test_offline_packing_removes_fragmentation_and_never_overlaps() -> None:
    func = _optimized(sgd_step, PROGRAMS["sgd step"][1]())
    # Each weight update its own kernel (no gemm epilogue): the online plan then leaves a hole.
    fusion = fuse(func, contract_transposes=False)
    online = plan_buffers(func, fusion, pack_by_size=False)
    packed = plan_buffers(func, fusion, pack_by_size=True)
    check_no_overlap(packed)
    assert packed.peak_bytes < online.peak_bytes
    assert [r.reused_from for r in packed.buffers] == [r.reused_from for r in online.buffers]
    live = max(
        sum(
            r.bytes
            for r in packed.buffers
            if r.param is None
            and r.live[0] <= t <= r.live[1]
            and not any(o.reused_from == r.name and o.live[0] == t for o in packed.buffers)
        )
        for t in {r.live[0] for r in packed.buffers}
    )
    assert packed.peak_bytes - live < 64 * len(packed.buffers)  # only alignment is left over
