"""Speed-only code paths of the CPU backend give the results of their plain forms (correctness only,
never timing): ``compiler.compilation.CPU_SWITCHES`` and the passes' optimization options (row fusion,
fusion's recomputation, matmuls reading transposed operands as BLAS views) switched off one by one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from helpers import gemm_calls, interpret_fn

import dsl
import dsl.numpy as dnp
from compiler.compilation import CPU_SWITCHES
from compiler.passes.fuse import GroupKind, fuse
from compiler.pipeline import option_defaults

rng = np.random.default_rng(17)


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


@contextmanager
def switched_off(name: str) -> Iterator[None]:
    with option_defaults(**{name: False}):
        yield


PASS_SWITCHES = ["contract_transposes", "recompute", "row_fusion", "row_compute_once"]  # Options fields


def xent(z: Any, y: Any) -> Any:
    s = z - dsl.stop_gradient(z.max(axis=-1, keepdims=True))
    return -(y * (s - dnp.log(dnp.exp(s).sum(axis=-1, keepdims=True)))).sum() / z.shape[0]


def layer_norm(x: Any, g: Any, b: Any) -> Any:
    c = x - x.mean(axis=-1, keepdims=True)
    return (c / dnp.sqrt((c * c).mean(axis=-1, keepdims=True) + 1e-5) * g + b).sum()


def mlp(w1: Any, w2: Any, x: Any) -> Any:
    return dnp.tanh(dnp.tanh(x @ w1) @ w2).sum()


def attention(q: Any, k: Any, v: Any) -> Any:
    s = q @ dnp.transpose(k, (0, 2, 1))
    e = dnp.exp(s - s.max(axis=-1, keepdims=True))
    return ((e / e.sum(axis=-1, keepdims=True)) @ v).sum()


def heads(x: Any, wq: Any, wk: Any, wv: Any, wo: Any) -> Any:  # split and merge heads: strided views
    def split(v: Any) -> Any:
        return dnp.transpose(v.reshape(2, 40, 4, 8), (0, 2, 1, 3))

    s = split(x @ wq) @ dnp.transpose(split(x @ wk), (0, 1, 3, 2)) * 0.2
    e = dnp.exp(s - dsl.stop_gradient(s.max(axis=-1, keepdims=True)))
    a = (e / e.sum(axis=-1, keepdims=True)) @ split(x @ wv)
    return dnp.tanh(dnp.transpose(a, (0, 2, 1, 3)).reshape(80, 32) @ wo).sum()


def sgd(w: Any, x: Any, g: Any) -> Any:  # gemm's alpha and beta do the update (fuse.accumulation)
    return w - 0.01 * (x.T @ g), dnp.tanh(x @ w).sum()


def column_stats(x: Any) -> Any:  # called on (4100, 64): chunks of 1024 rows
    e = dnp.exp(x * 0.1)
    return e.sum(axis=0), e.max(axis=0), dnp.tanh(x).sum(), dnp.tanh(x) * 2.0


def _grad_cases() -> list[tuple[str, Any, tuple[np.ndarray, ...]]]:
    # The same arguments on every call, whichever tests ran before in this process (pytest-xdist
    # spreads them): a sum compared at 2e-5 is then the sum this file was checked with.
    global rng
    rng = np.random.default_rng(17)
    return [
        ("xent", dsl.value_and_grad(xent), (f32(2100, 128), np.abs(f32(2100, 128)))),  # chunked
        (
            "layer_norm",
            dsl.value_and_grad(layer_norm, argnums=(0, 1, 2)),
            (f32(300, 128), f32(128), f32(128)),
        ),
        ("mlp", dsl.value_and_grad(mlp, argnums=(0, 1)), (f32(64, 96) / 8, f32(96, 32) / 8, f32(200, 64))),
        (
            "attention",
            dsl.value_and_grad(attention, argnums=(0, 1, 2)),
            (f32(3, 64, 16), f32(3, 64, 16), f32(3, 64, 16)),
        ),
        (
            "heads",
            dsl.value_and_grad(heads, argnums=(0, 1, 2, 3, 4)),
            (f32(80, 32), *(f32(32, 32) / 4 for _ in range(4))),
        ),
        ("sgd", dsl.compile(sgd), (f32(96, 32), f32(200, 96), f32(200, 32))),
        ("column_stats", dsl.compile(column_stats), (f32(4100, 64),)),
    ]


def _leaves(x: Any) -> list[np.ndarray]:
    if isinstance(x, (tuple, list)):
        return [a for v in x for a in _leaves(v)]
    return [np.asarray(x)]


def _fresh(fn: Any) -> Any:
    """A new compiled object for the same function (compiled objects cache their executables)."""
    inner = getattr(fn, "_fn", fn)
    return type(fn)(inner) if isinstance(fn, dsl.Compiled) else dsl.compile(fn)


@pytest.mark.parametrize("name", [c[0] for c in _grad_cases()])
@pytest.mark.parametrize("switch", sorted(CPU_SWITCHES) + PASS_SWITCHES)
def test_optimization_matches_switched_off(name: str, switch: str) -> None:
    (_, fn, args), *_ = [c for c in _grad_cases() if c[0] == name]
    if switch in PASS_SWITCHES:
        on = _leaves(_fresh(fn)(*args))
        with option_defaults(**{switch: False}):
            off = _leaves(_fresh(fn)(*args))
    else:
        on = _leaves(_fresh(fn)(*args))
        with switched_off(switch):
            off = _leaves(_fresh(fn)(*args))
    for a, b in zip(on, off, strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5 * max(1.0, float(np.abs(b).max())))


def test_transposed_operands_are_views_not_copies() -> None:
    w, x = f32(64, 32), f32(128, 64)
    grad = dsl.grad(lambda w, x: dnp.tanh(x @ w).sum())
    lowered = _fresh(grad).lower(w, x)
    source = lowered.source()
    # x.T @ g: BLAS reads x's buffer with its transpose flag
    assert any(c["ta"] == 1 and c["tb"] == 0 and c["x"] == "a1" for c in gemm_calls(lowered))
    assert "k1_transpose" not in source and "_transpose(" not in source
    func = dsl.compile(lambda a: a @ a.T)._trace((x,))[0]
    plan = fuse(func, contract_transposes=True)
    (group,) = plan.groups
    assert group.kind is GroupKind.CONTRACT and len(group.ops) == 2 and group.inputs == list(func.params)


def test_reductions_with_exp_prologue_run_chunked_with_numpy() -> None:
    x = f32(4100, 64).astype(np.float64)  # float32 exp/tanh/max have vectorized loops (test_vecmath.py)
    source = dsl.compile(column_stats).lower(x).source()
    assert "reduce_sum_np" in source and "for r0 in range(0, 4100, 1024)" in source
    got = dsl.compile(column_stats)(x)
    want = interpret_fn(column_stats, x)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_sum_reductions_are_reassociated_only_for_floats() -> None:
    x, n = f32(300, 128), np.arange(300 * 128, dtype=np.int32).reshape(300, 128)
    assert 'fastmath={"reassoc"}' in dsl.compile(lambda x: x.sum(axis=1)).lower(x).source()
    assert "fastmath" not in dsl.compile(lambda x: x.sum(axis=1)).lower(n).source()
    assert "fastmath" not in dsl.compile(lambda x: x.max(axis=1)).lower(x).source()
    np.testing.assert_array_equal(dsl.compile(lambda x: x.sum(axis=1))(n), n.sum(axis=1, dtype=np.int32))


def test_cheap_shared_values_are_recomputed_not_stored() -> None:
    z, y = f32(256, 100), f32(256, 100)
    func = dsl.compile(lambda z, y: dsl.value_and_grad(xent)(z, y))._trace((z, y))[0]
    from compiler.pipeline import Options, run_passes

    optimized = run_passes(func, Options())["optimized"]
    shifted = next(op.result for op in optimized.ops if op.prim.name == "sub")  # z - max(z)
    on, off = fuse(optimized), fuse(optimized, recompute=False)
    assert shifted not in on.materialized and shifted in off.materialized
    assert sum(shifted in (o.result for o in g.ops) for g in on.groups) >= 2
