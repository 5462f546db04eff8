"""``dsl.vmap`` through ``fori_loop``, ``scan`` and ``cond`` against ``jax.vmap`` of the same
``jax.lax`` programs in float64: batched carries, shared closures (in_axes None), a per-example and a
shared predicate, per-example gradients through a loop, loops nested in a branch, and the error for a
``while_loop`` whose values differ per example. Each program is written once for both libraries."""

from __future__ import annotations

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
from compiler.prims import elementwise as ew
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


# ---- while_loop ------------------------------------------------------------------------------------


def grow(lax, np_, x, bound):
    """Grows ``x`` until its sum passes ``bound``: a trip count per example (when either is mapped),
    with a counter and a running total beside it."""

    def body(c):
        i, v, total = c
        v = v * 1.5 + 0.25
        return i + 1, v, total + np_.tanh(v).sum()

    i, v, total = lax.while_loop(lambda c: c[1].sum() < bound, body, (0, x, 0.0))
    return v * total, i


def counted(lax, np_, x, w):
    """A predicate on a counter alone (shared by every example) over a batched carry reading a
    shared weight: the loop runs its one trip count on the batch, selecting nothing."""

    def body(c):
        i, h = c
        return i + 1, np_.tanh(h @ w) + 0.1 * i

    return lax.while_loop(lambda c: c[0] < 4, body, (0, x))


# positive and small, so every example's loop ends, after 1 to about 9 trips
XW = np.abs(RNG.standard_normal((B, 4))) * np.array([0.05, 1.0, 3.0])[:, None]


def test_a_per_example_trip_count_against_jax() -> None:
    bound = np.array(12.0)
    want = jax.vmap(lambda x: grow(jax.lax, jnp, x, bound))(XW)
    got = dsl.vmap(lambda x: grow(dsl, dnp, x, bound))(XW)
    close(got, want)
    assert len(set(np.asarray(want[1]).tolist())) == B  # the trip counts differ


def test_a_per_example_bound_alone_against_jax() -> None:
    """The init is shared and only the predicate's bound is mapped: the carries become batched."""
    x, bounds = XW[1], np.array([3.0, 12.0, 40.0])
    want = jax.vmap(lambda b: grow(jax.lax, jnp, x, b))(bounds)
    got = dsl.vmap(lambda b: grow(dsl, dnp, x, b))(bounds)
    close(got, want)


def test_a_shared_predicate_over_batched_carries_against_jax() -> None:
    want = jax.vmap(lambda x, w: counted(jax.lax, jnp, x, w), in_axes=(0, None))(XB[:, 0], W)
    got = dsl.vmap(lambda x, w: counted(dsl, dnp, x, w), in_axes=(0, None))(XB[:, 0], W)
    close(got, want)


def test_the_batched_while_in_the_ir() -> None:
    """One ``while`` per program, run natively: with a shared predicate the counter stays a shared
    carry and nothing is selected; with a per-example one every carry is batched, the cond is an
    ``or`` over the batch and the body selects."""
    shared = trace_function(lambda x, w: counted(dsl, dnp, x, w), (XB[0, 0], W)).func
    bfunc, flags = batch_function(shared, [True, False], B)
    verify(bfunc)
    (loop,) = [op for op in bfunc.walk() if op.prim is control.while_loop]
    assert [r.type.shape for r in loop.results] == [(), (B, 4)] and flags == [False, True]
    assert not any(op.prim is ew.select for op in loop.regions[1].ops)
    got = interpret(bfunc, [XB[:, 0], W])
    close(got[1], np.stack([interpret(shared, [x, W])[1] for x in XB[:, 0]]))

    per = trace_function(lambda x: grow(dsl, dnp, x, 12.0), (XW[0],)).func
    bfunc, flags = batch_function(per, [True], B)
    verify(bfunc)
    (loop,) = [op for op in bfunc.walk() if op.prim is control.while_loop]
    assert [r.type.shape for r in loop.results] == [(B,), (B, 4), (B,)] and flags == [True, True]
    assert sum(op.prim is ew.select for op in loop.regions[1].ops) == 3
    got = interpret(bfunc, [XW])
    want = [np.stack(rows) for rows in zip(*(interpret(per, [x]) for x in XW), strict=True)]
    close(got, want)


def test_a_while_in_a_scan_against_jax() -> None:
    """A scan over a batched sequence whose step runs a while until its carry's norm passes 2: the
    scan is unrolled, each step's while batched natively."""

    def program(lax, np_, c, seq):
        def step(c, s):
            d = lax.while_loop(lambda d: (d * d).sum() < 4.0, lambda d: d * 1.25 + np_.abs(s), c + s * 0.1)
            return np_.tanh(d), d.sum()

        return lax.scan(step, c, seq)

    c = np.full(4, 0.3)
    want = jax.vmap(lambda s: program(jax.lax, jnp, c, s))(SEQ)
    got = dsl.vmap(lambda s: program(dsl, dnp, c, s))(SEQ)
    close(got, want)


@pytest.mark.parametrize("shared", [False, True])
def test_a_while_in_a_cond_against_jax(shared: bool) -> None:
    """A while in one branch of a cond whose predicate is per example or shared, over batched
    operands: the cond is unrolled (both branches and a select), its while batched natively."""

    def program(lax, np_, flag, x):
        def grown(a):
            return lax.while_loop(lambda d: d.sum() < 8.0, lambda d: d * 1.5 + 0.25, np_.abs(a))

        return lax.cond(flag.sum() > 0.0, grown, lambda a: a * 2.0, x)

    flags = np.array(1.0) if shared else np.array([1.0, -1.0, 2.0])
    axes = (None if shared else 0, 0)
    want = jax.vmap(lambda f, x: program(jax.lax, jnp, f, x), in_axes=axes)(flags, XW)
    got = dsl.vmap(lambda f, x: program(dsl, dnp, f, x), in_axes=axes)(flags, XW)
    close(got, want)


def test_in_and_out_axes_against_jax() -> None:
    """The batch on axis 1 of ``x``, a shared bound, the results stacked on their last axis."""
    xt = np.ascontiguousarray(XW.T)

    def program(lax, np_, x, bound):
        v, i = grow(lax, np_, x, bound)
        return v, i * 1.0

    want = jax.vmap(lambda x, b: program(jax.lax, jnp, x, b), in_axes=(1, None), out_axes=-1)(xt, 12.0)
    got = dsl.vmap(lambda x, b: program(dsl, dnp, x, b), in_axes=(1, None), out_axes=-1)(xt, np.array(12.0))
    close(got, want)


def test_nested_vmap_against_jax() -> None:
    """Per example of an outer batch of bounds and an inner batch of inits: each (bound, init)
    pair its own trip count."""
    bounds = np.array([3.0, 12.0])

    def inner(lax, np_, b):
        return lambda x: grow(lax, np_, x, b)

    want = jax.vmap(lambda b: jax.vmap(inner(jax.lax, jnp, b))(XW))(bounds)
    got = dsl.vmap(lambda b: dsl.vmap(inner(dsl, dnp, b))(XW))(bounds)
    close(got, want)


def test_the_result_written_into_an_argument() -> None:
    """A mapped argument takes the loop's result in place: the caller's rows are updated."""

    def f(x):
        x[...] = dsl.while_loop(lambda d: d.sum() < 8.0, lambda d: d * 1.5 + 0.25, x)
        return x.sum()

    x = XW.copy()
    want_x = np.asarray(
        jax.vmap(lambda x: jax.lax.while_loop(lambda d: d.sum() < 8.0, lambda d: d * 1.5 + 0.25, x))(XW)
    )
    close(dsl.vmap(f)(x), want_x.sum(axis=1))
    close(x, want_x)
