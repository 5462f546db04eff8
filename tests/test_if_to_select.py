"""if_to_select (compiler/passes/if_to_select.py): a cheap, safe ``cond`` runs both branches and
selects. Values against the reference interpreter on the traced region IR, with the pass on and off;
gradients against JAX, the untaken branch's NaN and inf dropped; which ifs the pass keeps (a big one,
one holding a while, an integer power that would trap, ``if_select_budget=0``); and on CUDA, a
converted program with no predicate read back to the host whose kernels compile to PTX. The IR
rules themselves: tests/lit/if_to_select.mlir; the simulator's values: tests/cuda_sim/sim_control_flow.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cuda_ptx import ARCHS, PTX_AVAILABLE, PTX_UNAVAILABLE

import dsl
import dsl.numpy as dnp
from compiler.compilation import option_defaults
from compiler.interpreter import interpret
from compiler.passes.if_to_select import select_budget
from compiler.pipeline import Options
from compiler.prims import control
from dsl.compile import trace_function

jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(28)
X = RNG.standard_normal((3, 4))
W = RNG.standard_normal((4, 4)) * 0.5
XS = RNG.standard_normal((6, 3, 4))


def logs(x, w):
    """sqrt and log defined only where their branch is taken: the untaken one makes NaN and -inf."""
    pos = dsl.cond(x.sum() > 0, lambda a: dnp.sqrt(dnp.abs(a)) * w[0], lambda a: dnp.log(a) - 1.0, x)
    return pos, dsl.cond(x.sum() <= 0, lambda a: dnp.sqrt(a), lambda a: a * a, x)


def in_a_scan(x, w):
    """A cond per step of a scan, on the row's sign: one readback per iteration on CUDA, natively."""

    def step(h, row):
        h = dsl.cond(row.sum() > 0, lambda a: dnp.tanh(a @ w + row), lambda a: a * 0.5 - row, h)
        return h, h.sum()

    return dsl.scan(step, x, XS)


def nested(x, w):
    """A cond in a cond's branch, and a pytree of results."""

    def outer(a):
        inner = dsl.cond(a.mean() > 0.1, lambda b: dnp.exp(b), lambda b: dnp.cos(b), a)
        return inner * 2.0, inner.sum()

    return dsl.cond(x.sum() > 0, outer, lambda a: (a, a.max()), x)


def guarded_division(x, w):
    """An integer division by a divisor the predicate says is not zero (0 // 0 is 0: no trap)."""
    n = (x > 0).sum()
    return dsl.cond(n != 0, lambda k: 100 // k, lambda k: k * 0 - 1, n)


PROGRAMS: dict[str, tuple[Callable[..., Any], tuple[np.ndarray, ...]]] = {
    "logs": (logs, (X, W)),
    "logs_negative": (logs, (-np.abs(X), W)),
    "in_a_scan": (in_a_scan, (X, W)),
    "nested": (nested, (np.abs(X), W)),
    "nested_small": (nested, (np.abs(X) * 0.01, W)),
    "nested_negative": (nested, (-np.abs(X), W)),
    "guarded_division": (guarded_division, (X, W)),
    "zero_divisor": (guarded_division, (-np.abs(X), W)),
}


def ifs(fn: Callable[..., Any], args: tuple[Any, ...], stage: str = "optimized", **options: Any) -> int:
    """How many ``if`` ops the program ``fn`` compiles to at ``stage``, nested ones included."""
    with option_defaults(**options):
        func = dsl.compile(fn).lower(*args)._program.stages[stage]
    return sum(op.prim is control.if_ for op in func.walk())


def leaves(tree: Any) -> list[np.ndarray]:
    return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(tree)]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_values_against_the_interpreter_with_the_pass_on_and_off(name: str) -> None:
    fn, args = PROGRAMS[name]
    want = interpret(trace_function(fn, args).func, list(args))
    for on in (True, False):
        with option_defaults(if_to_select=on):
            got = leaves(dsl.compile(fn)(*args))
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_cheap_ifs_become_selects(name: str) -> None:
    fn, args = PROGRAMS[name]
    assert ifs(fn, args, "simplified") > 0
    assert ifs(fn, args) == 0
    assert ifs(fn, args, if_to_select=False) == ifs(fn, args, "simplified")


def loss(x, w):
    """sqrt and log of negatives in the untaken branches: their NaN and inf derivatives must not
    reach the gradient (the selects come after autodiff)."""

    def step(h, row):
        s = row.sum()
        h = dsl.cond(s > 0, lambda a: dnp.sqrt(a * s), lambda a: a * 0.5 + dnp.sqrt(-s), h)
        return h, h.sum()

    h, sums = dsl.scan(step, x * x + 1.0, XS)
    y = dsl.cond(x.sum() > 0, lambda a: dnp.sqrt(a) @ w, lambda a: dnp.log(-a) @ w, x)
    return (h * h).sum() + (sums * sums).sum() + (y * y).sum()


def jax_loss(x, w):
    def step(h, row):
        s = row.sum()
        h = jax.lax.cond(s > 0, lambda a: jnp.sqrt(a * s), lambda a: a * 0.5 + jnp.sqrt(-s), h)
        return h, h.sum()

    h, sums = jax.lax.scan(step, x * x + 1.0, jnp.asarray(XS))
    y = jax.lax.cond(x.sum() > 0, lambda a: jnp.sqrt(a) @ w, lambda a: jnp.log(-a) @ w, x)
    return (h * h).sum() + (sums * sums).sum() + (y * y).sum()


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["positive", "negative"])
def test_gradients_through_converted_ifs_against_jax(sign: float) -> None:
    x = sign * np.abs(X)
    grads = dsl.grad(loss, argnums=(0, 1))
    assert ifs(grads, (x, W), "grad") > 0 and ifs(grads, (x, W)) == 0
    want = jax.grad(jax_loss, argnums=(0, 1))(x, W)
    for got, w in zip(grads(x, W), want, strict=True):
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, np.asarray(w), rtol=1e-10, atol=1e-12)


def big(x):
    return dsl.cond(x.sum() > 0, lambda a: dnp.exp(a), lambda a: -a, x)


def holds_while(x):
    def halve(a):
        return dsl.while_loop(lambda c: c.sum() > 1.0, lambda c: c * 0.5, a)

    return dsl.cond(x.sum() > 0, halve, lambda a: a, x)


def int_power(a, e):
    """a ** e with a negative e is an error of np.power (the reference): kept in its branch."""
    return dsl.cond(e.min() >= 0, lambda b, f: b**f, lambda b, f: b, a, e)


def test_ifs_the_pass_keeps() -> None:
    large = np.ones((200, 100))
    assert ifs(big, (large,)) == 1  # 60,000 elements of work, over the budget
    assert ifs(big, (large,), if_select_budget=1 << 20) == 0
    assert ifs(big, (X,), if_select_budget=0) == 1
    assert ifs(holds_while, (X,)) == 1  # however small: an untaken while might not end
    a, e = np.array([0, 2, 3]), np.array([-1, 2, 1])
    assert ifs(int_power, (a, e)) == 1
    optimized = dsl.compile(int_power).lower(a, e)._program.stages["optimized"]
    np.testing.assert_array_equal(interpret(optimized, [a, e])[0], a)  # the reference runs one branch
    np.testing.assert_array_equal(dsl.compile(int_power)(a, e), a)
    np.testing.assert_array_equal(dsl.compile(int_power)(a, np.abs(e)), a ** np.abs(e))
    want = interpret(trace_function(holds_while, (np.abs(X),)).func, [np.abs(X)])[0]
    np.testing.assert_allclose(dsl.compile(holds_while)(np.abs(X)), want)


def tanh_steps(h0, xs):
    def step(h, x):
        h = dsl.cond(x.sum() > 0, lambda a: dnp.tanh(a * 0.9 + x), lambda a: a * 0.5 - x, h)
        return h, h.sum()

    return dsl.scan(step, h0, xs)


def test_the_default_budget_is_the_targets() -> None:
    """A step's untaken tanh of 64 elements costs more than a native if on the CPU (the scan 1.8x
    slower converted: benchmarks/bench_if_to_select.py), less than a predicate read back on CUDA."""
    assert select_budget(Options()) == 1 << 10 and select_budget(Options(target="cuda")) == 1 << 20
    assert select_budget(Options(target="cuda", if_select_budget=5)) == 5
    h0, xs = np.ones(64), RNG.standard_normal((4, 64))
    assert ifs(tanh_steps, (h0, xs)) == 1
    assert ifs(tanh_steps, (h0[:8], xs[:, :8])) == 0  # 8 elements: cheap on the CPU too
    assert "_scalar(" not in _run_body(dsl.compile(tanh_steps, target="cuda").lower(h0, xs).source())


# ---- CUDA: no predicate read back ------------------------------------------------------------------


def _run_body(source: str) -> str:
    return source[source.index("    def run(") :]


@pytest.mark.parametrize("name", ["logs", "in_a_scan", "nested"])
def test_converted_cuda_program_reads_no_predicate_back(name: str) -> None:
    """The host driver of a converted program has no ``_scalar`` readback (the native if reads its
    predicate, in_a_scan once per iteration) and fewer kernel launch sites (``L3(...)``)."""
    fn, args = PROGRAMS[name]
    sources = {}
    for on in (True, False):
        with option_defaults(if_to_select=on):
            sources[on] = dsl.compile(fn, target="cuda").lower(*args).source()
    assert "_scalar(" not in _run_body(sources[True])
    assert "_scalar(" in _run_body(sources[False])
    launches = {on: len(re.findall(r"^ +L\d+\(", _run_body(s), re.M)) for on, s in sources.items()}
    assert launches[True] < launches[False]


@pytest.mark.skipif(not PTX_AVAILABLE, reason=PTX_UNAVAILABLE)
def test_converted_kernels_compile_to_ptx() -> None:
    lowered = dsl.compile(in_a_scan, target="cuda").lower(X, W)
    kernels = {k.name for k in lowered._program.generated.kernels}
    for cc in ARCHS:
        ptx = lowered.ptx(cc)
        assert set(re.findall(r"===== kernel (\S+) \(sm_\d+\) =====", ptx)) == kernels
