"""``dsl.vmap`` through ``fori_loop``, ``scan``, ``cond`` and ``while_loop`` against ``jax.vmap`` of
the same ``jax.lax`` programs in float64: batched carries, shared closures (in_axes None), a
per-example and a shared predicate, a trip count per example, per-example gradients through a loop,
loops nested in a branch and in each other, and the batched program's IR (each region op batched
natively, one op however many steps). Each program is written once for both libraries."""

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


def test_both_conds_on_a_shared_predicate_stay_region_ops() -> None:
    """In the IR: the cond over shared values stays as it was; the one over a batched operand stays
    one native ``if`` whose result is batched."""
    f = lambda flag, w, x: shared_branch(dsl, dnp, flag, w, x)  # noqa: E731
    traced = trace_function(f, (np.array(1.0), W, XB[0])).func
    bfunc, flags = batch_function(traced, [False, False, True], B)
    verify(bfunc)
    assert flags == [True]
    ifs = [op for op in bfunc.ops if op.regions]
    assert [op.prim for op in ifs] == [control.if_, control.if_]
    assert sorted(op.results[0].type.shape for op in ifs) == [(), (B, 2, 4)]
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


# ---- native scan, fori_loop and cond -----------------------------------------------------------------


def region_ops(func, prim) -> list:
    return [op for op in func.walk() if op.prim is prim]


def batched(f, example_args, flags):
    """``f`` traced on one example and batched over the arguments ``flags`` marks (verified)."""
    traced = trace_function(f, example_args).func
    bfunc, out = batch_function(traced, flags, B)
    verify(bfunc)
    return bfunc, out


def rnn(lax, np_, w, c, seq):
    """A scan over ``seq`` with a carry and a ys row per step, reading ``w`` (a const)."""

    def step(c, s):
        c = np_.tanh(c * 0.5 + s @ w)
        return c, c * c + s

    return lax.scan(step, c, seq)


C0 = RNG.standard_normal(4) * 0.5
CB = RNG.standard_normal((B, 4)) * 0.5
WB = RNG.standard_normal((B, 4, 4)) * 0.4


@pytest.mark.parametrize(
    "axes",
    [(None, None, 0), (None, 0, None), (0, None, None), (None, 0, 0), (0, 0, 0)],
    ids=["xs", "init", "const", "init+xs", "all"],
)
def test_a_scan_against_jax(axes) -> None:
    """Batched xs (the batch to axis 1 of the scanned operand), a batched init, a batched const
    alone (the carry batched by the body: the fixpoint), and mixes; one native scan each time."""
    args = [WB if axes[0] == 0 else W, CB if axes[1] == 0 else C0, SEQ if axes[2] == 0 else SEQ[0]]
    want = jax.vmap(lambda w, c, s: rnn(jax.lax, jnp, w, c, s), in_axes=axes)(*args)
    got = dsl.vmap(lambda w, c, s: rnn(dsl, dnp, w, c, s), in_axes=axes)(*args)
    close(got, want)
    bfunc, flags = batched(
        lambda w, c, s: rnn(dsl, dnp, w, c, s), (W, C0, SEQ[0]), [a is not None for a in axes]
    )
    (loop,) = region_ops(bfunc, control.scan)
    assert flags == [True, True]
    assert [r.type.shape for r in loop.results] == [(B, 4), (5, B, 4)]


def test_a_scan_whose_ys_stay_shared() -> None:
    """A ys row and a carry that read nothing batched stay shared (the scan's results unbatched)."""

    def f(lax, np_, w, x):
        def step(c, s):
            k, acc = c
            return (k + 1.0, acc + s * w.sum()), k * 2.0

        (k, acc), ys = lax.scan(step, (0.0, np_.zeros(4)), x)
        return k, acc, ys

    want = jax.vmap(lambda w, x: f(jax.lax, jnp, w, x), in_axes=(0, None), out_axes=(None, 0, None))(
        WB, SEQ[0]
    )
    got = dsl.vmap(lambda w, x: f(dsl, dnp, w, x), in_axes=(0, None), out_axes=(None, 0, None))(WB, SEQ[0])
    close(got, want)
    _, flags = batched(lambda w, x: f(dsl, dnp, w, x), (W, SEQ[0]), [True, False])
    assert flags == [False, True, False]


@pytest.mark.parametrize("out_axes", [0, 1, -1])
def test_a_reverse_scan_with_ys_and_out_axes_against_jax(out_axes: int) -> None:
    def f(lax, np_, c, seq):
        def step(c, s):
            c = np_.sin(c) + s
            return c, (c.sum(), c * 2.0)

        return lax.scan(step, c, seq, reverse=True)

    want = jax.vmap(lambda c, s: f(jax.lax, jnp, c, s), out_axes=out_axes)(CB, SEQ)
    got = dsl.vmap(lambda c, s: f(dsl, dnp, c, s), out_axes=out_axes)(CB, SEQ)
    close(got, want)


def test_vmap_of_a_long_scan_is_one_scan_of_the_same_size() -> None:
    """Issue 28: the program's size does not depend on the trip count, under vmap too: a 10-step and
    a 1,000-step scan over batched xs give one ``dsl.scan`` op and optimized IR of the same size."""

    def f(w, c, seq):
        return rnn(dsl, dnp, w, c, seq)[1].sum(axis=0)

    def optimized(steps: int) -> str:
        seq = RNG.standard_normal((B, steps, 4))
        return dsl.vmap(f, in_axes=(None, None, 0)).lower(W, C0, seq).ir("optimized")

    short, long = optimized(10), optimized(1000)
    assert long.count('"dsl.scan"') == 1
    assert len(short.splitlines()) == len(long.splitlines())
    hundred = RNG.standard_normal((B, 100, 4))
    want = jax.vmap(lambda s: rnn(jax.lax, jnp, W, C0, s)[1].sum(axis=0))(hundred)
    close(dsl.vmap(f, in_axes=(None, None, 0))(W, C0, hundred), want)


def counted_loop(lax, np_, w, x, lower, upper):
    def body(i, c):
        h, total = c
        h = np_.tanh(h @ w + 0.1 * i)
        return h, total + (h * h).sum()

    return lax.fori_loop(lower, upper, body, (x, 0.0))


def test_a_fori_loop_with_batched_carries_against_jax() -> None:
    """Shared bounds keep one ``for`` (its counter shared), the carries batched."""
    want = jax.vmap(lambda x: counted_loop(jax.lax, jnp, W, x, 0, 3))(XB)
    got = dsl.vmap(lambda x: counted_loop(dsl, dnp, W, x, 0, 3))(XB)
    close(got, want)
    bfunc, flags = batched(lambda x: counted_loop(dsl, dnp, W, x, 0, 3), (XB[0],), [True])
    (loop,) = region_ops(bfunc, control.for_loop)
    assert flags == [True, True] and [r.type.shape for r in loop.results] == [(B, 2, 4), (B,)]
    assert not region_ops(bfunc, control.while_loop)


@pytest.mark.parametrize("which", ["upper", "lower", "both"])
def test_a_fori_loop_with_a_bound_per_example_against_jax(which: str) -> None:
    """A bound that differs per example: the ``for`` becomes a ``while`` over the counter, each
    example stopping at its own bound (JAX's fori_loop with bounds known at run time)."""
    lowers, uppers = np.array([0, 1, 2]), np.array([3, 1, 5])
    lo_axis, up_axis = (None if which == "upper" else 0), (None if which == "lower" else 0)
    lo = lowers if lo_axis == 0 else np.array(1)
    up = uppers if up_axis == 0 else np.array(4)

    def f(lax, np_, x, lo, up):
        return counted_loop(lax, np_, W, x, lo, up)

    axes = (0, lo_axis, up_axis)
    want = jax.vmap(lambda x, a, b: f(jax.lax, jnp, x, a, b), in_axes=axes)(XB, lo, up)
    got = dsl.vmap(lambda x, a, b: f(dsl, dnp, x, a, b), in_axes=axes)(XB, lo, up)
    close(got, want)
    bfunc, _ = batched(
        lambda x, a, b: f(dsl, dnp, x, a, b),
        (XB[0], lo if lo_axis is None else lo[0], up if up_axis is None else up[0]),
        [True, lo_axis == 0, up_axis == 0],
    )
    assert not region_ops(bfunc, control.for_loop)
    (loop,) = region_ops(bfunc, control.while_loop)
    assert [r.type.shape for r in loop.results][:1] == [(B,)]  # the counter, per example


def test_a_fori_loop_writing_its_carry_in_place_against_jax() -> None:
    """``c[i] = ...`` with the shared counter in a batched carry, and a loop reading a shared
    matrix's row ``i`` into a batched carry."""

    def f(lax, np_, x):
        def body(i, c):
            if lax is dsl:
                c[i] = c[i] * 2.0 + c[i - 1] * x.sum()
                return c
            return c.at[i].set(c[i] * 2.0 + c[i - 1] * x.sum())

        return lax.fori_loop(1, 4, body, x * 1.0)

    xs = RNG.standard_normal((B, 5)) * 0.5
    close(dsl.vmap(lambda x: f(dsl, dnp, x))(xs), jax.vmap(lambda x: f(jax.lax, jnp, x))(xs))
    bfunc, _ = batched(lambda x: f(dsl, dnp, x), (xs[0],), [True])
    assert len(region_ops(bfunc, control.for_loop)) == 1


def branches(lax, np_, flag, w, x):
    """A cond holding a scan and a fori_loop in its branches."""

    def yes(a, w):
        c, ys = lax.scan(lambda c, r: (np_.tanh(c + r @ w), c.sum()), a[0], a)
        return c * ys.sum()

    def no(a, w):
        return lax.fori_loop(0, 2, lambda i, v: v * 0.5 + w[i], a[1])

    return lax.cond(flag.sum() > 0.0, yes, no, x, w)


@pytest.mark.parametrize("shared", [True, False])
def test_a_cond_against_jax(shared: bool) -> None:
    """A shared predicate keeps one native ``if`` (its branches' loops batched inside it); a
    per-example one runs both branches (their loops native) and selects."""
    flags = np.array(1.0) if shared else np.array([1.0, -1.0, 2.0])
    axes = (None if shared else 0, None, 0)
    for sign in (1.0, -1.0):
        want = jax.vmap(lambda f, w, x: branches(jax.lax, jnp, f, w, x), in_axes=axes)(flags * sign, W, XB)
        got = dsl.vmap(lambda f, w, x: branches(dsl, dnp, f, w, x), in_axes=axes)(flags * sign, W, XB)
        close(got, want)
    example = (np.array(1.0), W, XB[0])
    bfunc, out = batched(lambda f, w, x: branches(dsl, dnp, f, w, x), example, [not shared, False, True])
    assert out == [True]
    assert len(region_ops(bfunc, control.scan)) == len(region_ops(bfunc, control.for_loop)) == 1
    assert len(region_ops(bfunc, control.if_)) == (1 if shared else 0)
    if shared:
        (op,) = region_ops(bfunc, control.if_)
        assert op.results[0].type.shape == (B, 4)


@pytest.mark.parametrize("flag", [1.0, -1.0])
def test_a_cond_results_shared_where_neither_branch_batches_them(flag: float) -> None:
    """A shared predicate: a result neither branch makes batched stays shared; one that only one
    branch batches is broadcast by the other."""

    def f(lax, np_, flag, w, x):
        return lax.cond(flag > 0.0, lambda w, x: (w.sum(), x * 2.0), lambda w, x: (w.max(), w[0]), w, x)

    want = jax.vmap(lambda x: f(jax.lax, jnp, flag, W, x), out_axes=(None, 0))(XB[:, 0])
    got = dsl.vmap(lambda x: f(dsl, dnp, np.array(flag), W, x), out_axes=(None, 0))(XB[:, 0])
    close(got, want)


def test_a_scan_in_a_vmapped_scan_and_vmap_of_vmap_against_jax() -> None:
    def f(lax, np_, w, seq):
        def outer(c, row):
            inner, ys = lax.scan(lambda d, r: (d * 0.5 + r * row.sum(), d.sum()), c, seq)
            return np_.tanh(inner @ w), ys

        return lax.scan(outer, seq[0], seq)

    want = jax.vmap(lambda s: f(jax.lax, jnp, W, s))(SEQ)
    close(dsl.vmap(lambda s: f(dsl, dnp, W, s))(SEQ), want)
    bfunc, _ = batched(lambda s: f(dsl, dnp, W, s), (SEQ[0],), [True])
    (outer,) = [op for op in bfunc.ops if op.prim is control.scan]
    assert len(region_ops(bfunc, control.scan)) == 2 and outer.results[1].type.shape == (5, B, 5)
    seqs = np.stack([SEQ, SEQ * 0.5])
    want = jax.vmap(jax.vmap(lambda w, s: f(jax.lax, jnp, w, s), in_axes=(None, 0)), in_axes=(0, None))(
        WB, seqs[0]
    )
    got = dsl.vmap(dsl.vmap(lambda w, s: f(dsl, dnp, w, s), in_axes=(None, 0)), in_axes=(0, None))(
        WB, seqs[0]
    )
    close(got, want)
    want = jax.vmap(jax.vmap(lambda s: f(jax.lax, jnp, W, s)))(seqs)
    close(dsl.vmap(dsl.vmap(lambda s: f(dsl, dnp, W, s)))(seqs), want)


def scan_loss(lax, np_, w, c, seq):
    c, ys = rnn(lax, np_, w, c, seq)
    return (c * c).sum() + ys.sum()


def test_grad_of_vmap_and_vmap_of_grad_through_a_scan_against_jax() -> None:
    def batched_loss(lax, np_, vmap):
        return lambda w: vmap(lambda c, s: scan_loss(lax, np_, w, c, s))(CB, SEQ).sum()

    want = jax.grad(batched_loss(jax.lax, jnp, jax.vmap))(W)
    close(dsl.grad(batched_loss(dsl, dnp, dsl.vmap))(W), want)
    grads = jax.vmap(jax.grad(lambda w, c, s: scan_loss(jax.lax, jnp, w, c, s)), in_axes=(None, 0, 0))
    got = dsl.vmap(dsl.grad(lambda w, c, s: scan_loss(dsl, dnp, w, c, s)), in_axes=(None, 0, 0))
    close(got(W, CB, SEQ), grads(W, CB, SEQ))
    # per-example weights and a per-example cond in the step: both directions again
    grads = jax.vmap(jax.grad(lambda w, c, s: scan_loss(jax.lax, jnp, w, c, s)))
    close(dsl.vmap(dsl.grad(lambda w, c, s: scan_loss(dsl, dnp, w, c, s)))(WB, CB, SEQ), grads(WB, CB, SEQ))


def test_gradients_through_a_per_example_cond_skip_the_untaken_branch() -> None:
    """The branches read their operands masked per example: the untaken branch's ``sqrt`` of a
    negative gives no NaN gradient, either way round (vmap of grad, grad of vmap)."""

    def f(lax, np_, x):
        return lax.cond(x.sum() > 0.0, lambda a: np_.sqrt(a).sum(), lambda a: (a * a).sum(), x)

    xs = np.array([[1.0, 2.0], [-1.0, -3.0], [0.5, 0.1]])
    want = jax.vmap(jax.grad(lambda x: f(jax.lax, jnp, x)))(xs)
    assert np.isfinite(want).all()
    close(dsl.vmap(dsl.grad(lambda x: f(dsl, dnp, x)))(xs), want)
    close(dsl.grad(lambda x: dsl.vmap(lambda x: f(dsl, dnp, x))(x).sum())(xs), want)


def test_a_bound_per_example_with_the_counter_writing_in_place_against_jax() -> None:
    """``c[i] = ...`` where the counter differs per example (the for become a while): the update
    runs per example."""

    def f(lax, x, upper):
        def body(i, c):
            if lax is dsl:
                c[i] = c[i] * 2.0 + c[i - 1]
                return c
            return c.at[i].set(c[i] * 2.0 + c[i - 1])

        return lax.fori_loop(1, upper, body, x * 1.0)

    xs, uppers = RNG.standard_normal((B, 5)), np.array([2, 4, 5])
    want = jax.vmap(lambda x, u: f(jax.lax, x, u))(xs, uppers)
    close(dsl.vmap(lambda x, u: f(dsl, x, u))(xs, uppers), want)


def test_per_example_hessians_through_a_scan_against_jax() -> None:
    """``vmap(jacfwd(jacrev(u)))`` of a scan: the backward scan and its tangents batched natively over
    the basis and the examples."""
    w = RNG.standard_normal((3, 3)) * 0.5

    def u(lax, np_, x):
        def step(c, s):
            c = np_.tanh(c @ w + s * x)
            return c, c.sum()

        c, ys = lax.scan(step, x, np_.ones((4, 3)) * 0.3)
        return (c * c).sum() + ys.sum()

    xs = RNG.standard_normal((5, 3))
    want = jax.vmap(jax.jacfwd(jax.jacrev(lambda x: u(jax.lax, jnp, x))))(xs)
    close(dsl.vmap(dsl.jacfwd(dsl.jacrev(lambda x: u(dsl, dnp, x))))(xs), want)
