"""Forward mode through ``while_loop`` (``compiler/forward.py``): ``dsl.jvp`` of programs whose
``while`` reads a value with a tangent, against ``jax.jvp`` of the same ``jax.lax.while_loop`` program
(float64, compiled on the CPU); the jvp program holds one ``while`` carrying the tangents beside the
primal carries, a ``for``, ``scan`` or ``if`` holding a ``while`` carries the tangents the same way,
forward mode composes with ``vmap`` both ways, and reverse mode through ``while`` stays an error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
from compiler.forward import jvp_function
from compiler.interpreter import interpret
from compiler.ir.verify import verify
from compiler.prims import control
from dsl.compile import trace_function

jax.config.update("jax_enable_x64", True)
rng = np.random.default_rng(28)


def close(got, want, rtol=1e-12):
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, np.asarray(w), rtol=rtol, atol=rtol)


def newton_sqrt(lax, np_, a):
    """sqrt(a) by Newton's iteration until it has converged: a data-dependent trip count."""

    def cond(c):
        x, prev = c
        return np_.abs(x - prev).max() > 1e-13

    def body(c):
        x, _ = c
        return 0.5 * (x + a / x), x

    x, _ = lax.while_loop(cond, body, (a + 1.0, a))
    return x * 2.0


def grow(lax, np_, c, x):
    """``while c.sum() < 10: c = c * 1.5 + x``: ``x`` is a const read inside the body."""
    return np_.sin(lax.while_loop(lambda c: c.sum() < 10.0, lambda c: c * 1.5 + x, c * 1.0))


def counted(lax, np_, w, x):
    """A counter carry beside two float carries, the cond reading the counter and a float carry, the
    body reading two consts (``w`` and ``x * 2``)."""
    scale = x * 2.0

    def body(c):
        i, h, s = c
        h = np_.tanh(h * w + scale)
        return i + 1, h, s + h.sum() * i

    i, h, s = lax.while_loop(lambda c: (c[0] < 7) & (c[2] < 100.0), body, (0, x, w.sum()))
    return h * s, i


class Lax:
    """``dsl`` spelled as ``jax.lax``, so one program runs on both."""

    while_loop = staticmethod(dsl.while_loop)


PROGRAMS: dict[str, tuple[Callable[..., Any], tuple[np.ndarray, ...]]] = {
    "newton_sqrt": (newton_sqrt, (rng.uniform(0.5, 4.0, 5),)),
    "grow": (grow, (rng.uniform(0.1, 0.5, 4), rng.uniform(0.1, 0.3, 4))),
    "counted": (counted, (rng.normal(size=3) * 0.5, rng.normal(size=3))),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_jvp_through_while_matches_jax(name: str) -> None:
    program, args = PROGRAMS[name]
    tangents = tuple(rng.normal(size=a.shape) for a in args)
    got = dsl.jvp(lambda *a: program(Lax, dnp, *a), args, tangents)
    want = jax.jvp(lambda *a: program(jax.lax, jnp, *a), args, tangents)
    close(got[0], want[0])
    close(
        [t for t in jax.tree_util.tree_leaves(got[1]) if np.issubdtype(np.asarray(t).dtype, np.floating)],
        [t for t in jax.tree_util.tree_leaves(want[1]) if np.issubdtype(np.asarray(t).dtype, np.floating)],
    )


def test_jvp_along_one_argument_of_two() -> None:
    program, (c, x) = PROGRAMS["grow"]
    tx = rng.normal(size=x.shape)
    got = dsl.jvp(lambda x: program(Lax, dnp, c, x), (x,), (tx,))
    want = jax.jvp(lambda x: program(jax.lax, jnp, c, x), (x,), (tx,))
    close(got, want)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_jvp_program_holds_one_while(name: str) -> None:
    """The tangents ride in the primal ``while`` (no second loop, no unrolling); the program is valid
    IR and the interpreter agrees with JAX."""
    program, args = PROGRAMS[name]
    func = trace_function(lambda *a: program(Lax, dnp, *a), args).func
    wrt = list(range(len(args)))
    joint = jvp_function(func, wrt, [wrt])
    verify(joint)
    whiles = [op for op in joint.walk() if op.prim is control.while_loop]
    assert len(whiles) == 1
    tangents = tuple(rng.normal(size=a.shape) for a in args)
    got = interpret(joint, [*args, *tangents])
    want_out, want_t = jax.jvp(lambda *a: program(jax.lax, jnp, *a), args, tangents)
    n = len(jax.tree_util.tree_leaves(want_out))
    close(got[:n], jax.tree_util.tree_leaves(want_out))
    float_t = [
        t for t in jax.tree_util.tree_leaves(want_t) if np.issubdtype(np.asarray(t).dtype, np.floating)
    ]
    close([g for g in got[n:] if np.issubdtype(np.asarray(g).dtype, np.floating)], float_t)


def test_reverse_mode_through_while_still_raises() -> None:
    program, args = PROGRAMS["grow"]
    with pytest.raises(dsl.TransformError, match="reverse-mode differentiation does not work through"):
        dsl.grad(lambda c, x: program(Lax, dnp, c, x).sum())(*args)


def test_jacfwd_through_while_matches_jax() -> None:
    program, args = PROGRAMS["grow"]
    got = dsl.jacfwd(lambda c, x: program(Lax, dnp, c, x), argnums=(0, 1))(*args)
    want = jax.jacfwd(lambda c, x: program(jax.lax, jnp, c, x), argnums=(0, 1))(*args)
    close(got, want)


def test_tangents_ride_beside_the_carries() -> None:
    """``counted``'s while carries its counter, ``h`` and ``s`` and the tangents of ``h`` and ``s``
    (none for the counter), and reads ``w`` and ``x * 2`` and their tangents as consts."""
    program, args = PROGRAMS["counted"]
    func = trace_function(lambda *a: program(Lax, dnp, *a), args).func
    (loop,) = [op for op in jvp_function(func, [0, 1], [[0, 1]]).walk() if op.prim is control.while_loop]
    assert len(loop.results) == 5 and loop.attrs["consts"] == 4


def nested(lax, np_, x):
    """A while in a while's body, then a second while reading the first's result."""

    def body(c):
        y = lax.while_loop(lambda d: d.sum() < 3.0, lambda d: d * 1.3 + 0.1, c * 0.5 + 0.01)
        return np_.sin(y) + c * 0.9 + x

    a = lax.while_loop(lambda c: c.sum() < 5.0, body, x * 1.0)
    b = lax.while_loop(lambda c: c.max() < 50.0, lambda c: c * 2.0 + a, a * x)
    return np_.exp(-b * 0.01) * a


def test_jvp_through_nested_and_sequential_whiles() -> None:
    x, t = np.array([0.2, 0.3, 0.4]), np.array([1.0, -0.5, 0.3])
    close(
        dsl.jvp(lambda x: nested(Lax, dnp, x), (x,), (t,)),
        jax.jvp(lambda x: nested(jax.lax, jnp, x), (x,), (t,)),
    )


# ---- a while inside a for, a scan or a branch -----------------------------------------------------


class LaxAll(Lax):
    fori_loop = staticmethod(dsl.fori_loop)
    scan = staticmethod(dsl.scan)
    cond = staticmethod(dsl.cond)


def while_in_for(lax, np_, c, x):
    """Each of three steps grows ``c`` until its sum passes a bound that rises with the counter."""

    def step(i, c):
        c = lax.while_loop(lambda d: d.sum() < 2.0 + i, lambda d: d * 1.2 + x, c)
        return np_.tanh(c) * 0.9

    return lax.fori_loop(0, 3, step, c * 1.0) * x


def while_in_scan(lax, np_, c, xs):
    """A scan whose step runs a while over its carry and row (a per-row trip count), with ys."""

    def step(c, row):
        d = lax.while_loop(lambda d: (d * d).sum() < 4.0, lambda d: d * 1.5 + row * 0.1, c + row)
        return np_.sin(d) * 0.5, d.sum() * row

    c, ys = lax.scan(step, c, xs)
    return c, ys


def while_in_cond(lax, np_, c, x):
    """A branch holding a while (the taken one or not, by ``c``'s sign), the other without."""

    def grow(a):
        return lax.while_loop(lambda d: d.sum() < 6.0, lambda d: d * 1.3 + x * x, a)

    return lax.cond(c.sum() > 0.0, grow, lambda a: a * x - 1.0, c * 2.0)


NESTED: dict[str, tuple[Callable[..., Any], tuple[np.ndarray, ...]]] = {
    "for": (while_in_for, (rng.uniform(0.2, 0.4, 3), rng.uniform(0.1, 0.3, 3))),
    "scan": (while_in_scan, (rng.uniform(0.1, 0.3, 2), rng.uniform(0.2, 0.5, (4, 2)))),
    "cond_taken": (while_in_cond, (rng.uniform(0.2, 0.4, 3), rng.uniform(0.5, 1.0, 3))),
    "cond_other": (while_in_cond, (-rng.uniform(0.2, 0.4, 3), rng.uniform(0.5, 1.0, 3))),
}


@pytest.mark.parametrize("name", sorted(NESTED))
def test_jvp_of_a_while_in_another_region_matches_jax(name: str) -> None:
    program, args = NESTED[name]
    tangents = tuple(rng.normal(size=a.shape) for a in args)
    got = dsl.jvp(lambda *a: program(LaxAll, dnp, *a), args, tangents)
    want = jax.jvp(lambda *a: program(jax.lax, jnp, *a), args, tangents)
    close(got, want)


@pytest.mark.parametrize("name", ["for", "scan", "cond_taken"])  # the untaken branch: jvp above
def test_jacfwd_of_a_while_in_another_region_matches_jax(name: str) -> None:
    program, args = NESTED[name]
    got = dsl.jacfwd(lambda *a: program(LaxAll, dnp, *a), argnums=(0, 1))(*args)
    want = jax.jacfwd(lambda *a: program(jax.lax, jnp, *a), argnums=(0, 1))(*args)
    close(got, want)


@pytest.mark.parametrize("name", sorted(NESTED))
def test_the_region_holding_a_while_carries_the_tangents(name: str) -> None:
    """The jvp program keeps the for, scan or if, with one while inside it (nothing unrolled), is
    valid IR, and the interpreter agrees with JAX."""
    program, args = NESTED[name]
    func = trace_function(lambda *a: program(LaxAll, dnp, *a), args).func
    joint = jvp_function(func, [0, 1], [[0, 1]])
    verify(joint)
    outer = [op for op in joint.ops if op.regions]
    assert len(outer) == 1 and outer[0].prim is not control.while_loop
    assert len([op for op in joint.walk() if op.prim is control.while_loop]) == 1
    tangents = tuple(rng.normal(size=a.shape) for a in args)
    want_out, want_t = jax.jvp(lambda *a: program(jax.lax, jnp, *a), args, tangents)
    want = jax.tree_util.tree_leaves(want_out) + jax.tree_util.tree_leaves(want_t)
    close(interpret(joint, [*args, *tangents]), want)


def test_reverse_mode_through_a_while_in_a_for_still_raises() -> None:
    program, args = NESTED["for"]
    with pytest.raises(dsl.TransformError, match="reverse-mode differentiation does not work through"):
        dsl.grad(lambda c, x: program(LaxAll, dnp, c, x).sum())(*args)


# ---- forward mode and vmap ------------------------------------------------------------------------

XS = rng.uniform(0.1, 1.0, (3, 3)) * np.array([0.1, 1.0, 3.0])[:, None]  # a trip count per row
TS = rng.normal(size=(3, 3))


def test_vmap_of_jvp_through_a_while_in_a_for() -> None:
    """Per example, the jvp of a for holding a while: the tangent while batched with a trip count
    per example."""
    program, (c, _) = NESTED["for"]

    def jvp_of(lax, jvp, x, t):
        return jvp(lambda x: program(lax, dnp if lax is LaxAll else jnp, c, x), (x,), (t,))

    got = dsl.vmap(lambda x, t: jvp_of(LaxAll, dsl.jvp, x, t))(XS, TS)
    want = jax.vmap(lambda x, t: jvp_of(jax.lax, jax.jvp, x, t))(XS, TS)
    close(got, want)


def test_jvp_of_vmap_through_a_while() -> None:
    """The jvp of a vmapped while whose predicate differs per example (its body selects per example)."""
    program, (c, x) = PROGRAMS["grow"]
    xs, ts = x * np.array([0.2, 1.0, 3.0])[:, None], rng.normal(size=(3, x.size))
    got = dsl.jvp(dsl.vmap(lambda x: program(Lax, dnp, c, x)), (xs,), (ts,))
    want = jax.jvp(jax.vmap(lambda x: program(jax.lax, jnp, c, x)), (xs,), (ts,))
    close(got, want)


def test_vmap_of_jacfwd_through_a_while_in_a_scan() -> None:
    program, (c, xs) = NESTED["scan"]
    batch = xs[None] * np.array([0.5, 1.0, 2.0])[:, None, None]
    got = dsl.vmap(dsl.jacfwd(lambda xs: program(LaxAll, dnp, c, xs)[0]))(batch)
    want = jax.vmap(jax.jacfwd(lambda xs: program(jax.lax, jnp, c, xs)[0]))(batch)
    close(got, want)


# ---- fori_loop with a trip count known only at run time -------------------------------------------
# No reverse sweep goes through it either (found by the fuzzer's jvp tier: dsl.jvp raised the
# unroller's "no unrolled form" error, where jax.jvp goes through it as through a while).


def runtime_trips(lax, np_, x, n):
    """A loop of ``n`` trips (an argument), one of ``n`` trips in a loop of three, and a triangular
    loop (its bound the outer counter)."""
    c = lax.fori_loop(0, n, lambda i, c: c * 1.5 + np_.sin(c) * i, x)

    def outer(i, c):
        c = lax.fori_loop(0, n, lambda j, c2: np_.tanh(c2) * 1.1, c)
        return lax.fori_loop(0, i, lambda j, c2: c2 * 0.9 + np_.cos(c2), c)

    return lax.fori_loop(0, 3, outer, c) ** 2


@pytest.mark.parametrize("trips", [0, 1, 3])
def test_jvp_through_fori_loop_of_a_run_time_trip_count_matches_jax(trips: int) -> None:
    x, t, n = rng.normal(size=4), rng.normal(size=4), np.array(trips, np.int64)
    got = dsl.jvp(lambda x, n: runtime_trips(LaxAll, dnp, x, n), (x, n), (t, np.zeros((), np.int64)))
    want = jax.jvp(lambda x: runtime_trips(jax.lax, jnp, x, n), (x,), (t,))
    close(got, want)
    got = dsl.jacfwd(lambda x, n: runtime_trips(LaxAll, dnp, x, n))(x, n)
    close(got, jax.jacfwd(lambda x: runtime_trips(jax.lax, jnp, x, n))(x))


def test_jvp_program_of_a_run_time_trip_count_keeps_its_loop() -> None:
    """The tangents ride in the loops (not unrolled: the trip count is unknown), and reverse mode
    through the loop stays JAX's refusal."""
    args = (rng.normal(size=4), np.array(2, np.int64))
    func = trace_function(lambda x, n: runtime_trips(LaxAll, dnp, x, n), args).func
    joint = jvp_function(func, [0], [[0]])
    verify(joint)
    loops = [op for op in joint.walk() if op.prim is control.for_loop]
    assert len(loops) == len([op for op in func.walk() if op.prim is control.for_loop]) == 4
    with pytest.raises(dsl.TransformError, match="trip count computed at run time"):
        dsl.grad(lambda x, n: runtime_trips(LaxAll, dnp, x, n).sum())(*args)
