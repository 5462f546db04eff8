"""``dsl.vmap`` through ``fori_loop``, ``scan`` and ``cond`` against ``jax.vmap`` of the same
``jax.lax`` programs in float64: batched carries, shared closures (in_axes None), a per-example and a
shared predicate, per-example gradients through a loop, loops nested in a branch, and the error for a
``while_loop`` whose values differ per example. Each program is written once for both libraries."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
from compiler.batching import batch_function
from compiler.interpreter import interpret
from compiler.ir.verify import verify
from compiler.prims import control
from dsl.compile import trace_function

jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(7)
B = 3
W = RNG.standard_normal((4, 4)) * 0.4
XB = RNG.standard_normal((B, 2, 4))
XB *= np.sign(XB.sum(axis=(1, 2)))[:, None, None] * np.array([1.0, -1.0, 1.0])[:, None, None]  # both sides
SEQ = RNG.standard_normal((B, 5, 4))


def close(got, want) -> None:
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves, strict=True):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-10, atol=1e-12)


def loops(lax, np_, w, x, seq):
    """A fori_loop with a batched carry and the counter, a scan over a batched sequence with a
    shared weight, and a cond on a per-example predicate holding a loop in one branch."""

    def body(i, carry):
        h, total = carry
        h = np_.tanh(h @ w + 0.1 * i)
        return h, total + (h * h).sum()

    h, total = lax.fori_loop(0, 3, body, (x, 0.0))

    def step(c, s):
        c = np_.tanh(c * 0.5 + s @ w)
        return c, c.sum()

    c, ys = lax.scan(step, h[0], seq)

    def grow(a):
        return lax.fori_loop(0, 2, lambda i, v: v * 1.5 + a.sum(), a)

    def shrink(a):
        return a * 0.5 - 1.0

    picked = lax.cond(x.sum() > 0.0, grow, shrink, c)
    return picked.sum() * total + (ys * ys).sum()


def shared_branch(lax, np_, flag, w, x):
    """A cond on a predicate shared by every example (from an unmapped argument) over batched
    operands, and one whose operands are all shared (it stays a region op)."""
    m = lax.cond(flag > 0.0, lambda a: a @ w, lambda a: a * 2.0, x)
    k = lax.cond(flag < 0.0, lambda v: v.sum(), lambda v: (v * v).sum(), w)
    return m.sum() * k


def test_loops_and_a_per_example_branch_against_jax() -> None:
    want = jax.vmap(lambda w, x, s: loops(jax.lax, jnp, w, x, s), in_axes=(None, 0, 0))(W, XB, SEQ)
    got = dsl.vmap(lambda w, x, s: loops(dsl, dnp, w, x, s), in_axes=(None, 0, 0))(W, XB, SEQ)
    close(got, want)


@pytest.mark.parametrize("flag", [1.0, -1.0])
def test_a_shared_predicate_against_jax(flag: float) -> None:
    f = np.array(flag)
    want = jax.vmap(lambda f, w, x: shared_branch(jax.lax, jnp, f, w, x), in_axes=(None, None, 0))(f, W, XB)
    got = dsl.vmap(lambda f, w, x: shared_branch(dsl, dnp, f, w, x), in_axes=(None, None, 0))(f, W, XB)
    close(got, want)


def test_per_example_gradients_through_a_loop_against_jax() -> None:
    def loss(lax, np_, w, x):
        h = lax.fori_loop(0, 3, lambda i, h: np_.tanh(h @ w) + x, x)
        return (h * h).sum()

    want = jax.vmap(jax.grad(lambda w, x: loss(jax.lax, jnp, w, x)), in_axes=(None, 0))(W, XB)
    got = dsl.vmap(dsl.grad(lambda w, x: loss(dsl, dnp, w, x)), in_axes=(None, 0))(W, XB)
    close(got, want)


def test_only_the_regions_reading_batched_values_are_unrolled() -> None:
    """In the IR: the cond over shared values stays one region op; the batched one is unrolled."""
    f = lambda flag, w, x: shared_branch(dsl, dnp, flag, w, x)  # noqa: E731
    traced = trace_function(f, (np.array(1.0), W, XB[0])).func
    bfunc, flags = batch_function(traced, [False, False, True], B)
    verify(bfunc)
    assert flags == [True]
    assert [op.prim for op in bfunc.ops if op.regions] == [control.if_]
    (got,) = interpret(bfunc, [np.array(1.0), W, XB])
    close(got, np.stack([interpret(traced, [np.array(1.0), W, x])[0] for x in XB]))


def test_while_loop_over_batched_values_raises_at_the_users_line() -> None:
    def f(x):
        return dsl.while_loop(lambda c: c.sum() < 10.0, lambda c: c * 2.0, x)

    line = inspect.getsourcelines(f)[1] + 1
    with pytest.raises(
        dsl.TransformError, match=rf"test_vmap_control.py:{line}: vmap cannot batch dsl.while_loop"
    ):
        dsl.vmap(f)(XB)
