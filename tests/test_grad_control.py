"""Reverse mode through loops and branches as region ops (compiler/autodiff_control.py): gradients of
loop programs against ``jax.grad`` of the same ``jax.lax`` program (float64), through the reference
interpreter on the joint IR and through ``dsl.compile`` end to end; higher orders; the pruning of
cotangent work for carries nobody asks about; and a joint program whose size does not depend on the
trip count.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
from compiler.autodiff import GradSpec, grad_function
from compiler.compilation import option_defaults
from compiler.interpreter import interpret
from compiler.ir.core import Function, Op
from compiler.ir.parser import parse_function
from compiler.ir.printer import print_function
from compiler.ir.verify import verify
from compiler.prims import control
from dsl.compile import trace_function

jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(3)
W = RNG.standard_normal((4, 4)) * 0.4
X = RNG.standard_normal((3, 4))
XS = RNG.standard_normal((5, 3, 4))
V = RNG.standard_normal(4)


def close(got, want, rtol: float = 1e-10) -> None:
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=1e-12)


def joint(fn, args, argnums=(0, 1)) -> Function:
    """The joint forward+backward IR of ``fn``'s gradient (region ops and all), verified; its text
    parses back to the same text."""
    func = grad_function(trace_function(fn, args).func, GradSpec(tuple(argnums)))
    verify(func)
    text = print_function(func)
    assert print_function(parse_function(text)) == text
    return func


def regions(func: Function, prim) -> list[Op]:
    return [op for op in func.walk() if op.prim is prim]


# ---- programs, written once for both libraries ----------------------------------------------------


def fori_consts(lax, np_, w, x):
    """fori_loop with a static trip count, the counter in the body, a const read from outside."""

    def body(i, c):
        h, total = c
        h = np_.tanh(h @ w + 0.1 * i) * np_.cos(x)
        return h, total + (h * h).sum()

    h, total = lax.fori_loop(2, 6, body, (x, 0.0))
    return total + h.sum()


def scan_many(lax, np_, w, xs):
    """Several carries (one integer), xs and ys, a const from outside, a carry passed through."""

    def step(c, x):
        h, s, k, fixed = c
        h = np_.sin(h @ w) + x * s
        s = s * 0.9 + (x * x).mean()
        return (h, s, k + 1, fixed), (h.sum(axis=0), s * k, x)

    (h, s, k, fixed), (a, b, xs_back) = lax.scan(step, (xs[0], 1.0, 0, w[0]), xs)
    return (a * a).sum() + b.sum() + (h * fixed).sum() + s * k + (xs_back * xs_back).sum()


def scan_reverse(lax, np_, w, xs):
    def step(c, x):
        c = np_.tanh(c * 0.5 + x @ w)
        return c, (c * c).mean()

    c, ys = lax.scan(step, np_.ones((3, 4)), xs, reverse=True)
    return (ys * np_.arange(5.0)).sum() + (c * w[1]).sum()


def nested(lax, np_, w, x):
    """A fori_loop in a scan body (the inner loop reads the outer row and a const)."""

    def step(c, row):
        d = lax.fori_loop(0, 3, lambda i, d: np_.sin(d @ w) + row * 0.5, c)
        return d * 0.7, d.sum()

    c, ys = lax.scan(step, x, np_.stack([x * 0.5, x, -x]))
    return c.sum() + (ys * ys).sum()


def cond_in_scan(lax, np_, w, xs):
    """A cond on each row (the predicate changes per iteration), branches of different work."""

    def step(c, x):
        c = lax.cond(x.sum() > 0.0, lambda c: np_.tanh(c @ w), lambda c: c * x + w[0], c)
        return c, c.sum()

    c, ys = lax.scan(step, xs[0], xs)
    return c.sum() + (ys * ys).sum()


def cond_top(lax, np_, w, x):
    def big(a, b):
        return a @ b, a.sum()

    def small(a, b):
        return a * 2.0 - 1.0, (a * b[0]).sum()

    m, s = lax.cond(x.sum() > 0.0, big, small, x, w)
    return (m * np_.sin(m)).sum() * s


PROGRAMS = {
    "fori_consts": (fori_consts, X),
    "scan_many": (scan_many, XS),
    "scan_reverse": (scan_reverse, XS),
    "nested": (nested, X),
    "cond_in_scan": (cond_in_scan, XS),
    "cond_top": (cond_top, X),
    "cond_top_negative": (cond_top, -X),
}


def dsl_fn(program):
    return lambda w, x: program(dsl, dnp, w, x)


def jax_fn(program):
    return lambda w, x: program(jax.lax, jnp, w, x)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gradients_against_jax_interpreted_and_compiled(name: str) -> None:
    program, x = PROGRAMS[name]
    want = jax.grad(jax_fn(program), argnums=(0, 1))(W, x)
    func = joint(dsl_fn(program), (W, x))
    assert not any(op.prim is control.for_loop for op in func.walk())  # no for left: scans
    close(interpret(func, [W, x]), want)
    close(dsl.grad(dsl_fn(program), argnums=(0, 1))(W, x), want)
    value, grads = dsl.value_and_grad(dsl_fn(program), argnums=1)(W, x)
    close((value, grads), (jax_fn(program)(W, x), want[1]))


@pytest.mark.parametrize("name", ["fori_consts", "scan_many", "nested", "cond_in_scan"])
def test_the_joint_program_is_loops_not_unrolled(name: str) -> None:
    """One forward loop (stacking residuals) and one backward loop per differentiated loop."""
    program, x = PROGRAMS[name]
    func = joint(dsl_fn(program), (W, x))
    top = [op for op in func.ops if op.prim is control.scan]
    assert len(top) == 2
    forward, backward = top
    assert forward.attrs["reverse"] != backward.attrs["reverse"]


def test_joint_size_does_not_depend_on_the_trip_count() -> None:
    def program(n):
        def f(w, x):
            return dsl.fori_loop(0, n, lambda i, c: dnp.tanh(c @ w) + x * 0.1, x).sum()

        return f

    small, large = (joint(program(n), (W, X)) for n in (10, 1000))
    assert len(list(small.walk())) == len(list(large.walk()))
    close(
        dsl.grad(program(10), argnums=(0, 1))(W, X),
        jax.grad(
            lambda w, x: jax.lax.fori_loop(0, 10, lambda i, c: jnp.tanh(c @ w) + x * 0.1, x).sum(),
            argnums=(0, 1),
        )(W, X),
    )


@pytest.mark.parametrize("every", [False, True])
def test_a_carry_read_coming_in_and_going_out_is_stacked_once(every: bool) -> None:
    """An RNN's h: its matmul's vjp reads the h that comes in, tanh's the h that goes out. The
    forward scan stacks h once (one row per step); the backward scan carries each step's row to the
    step before, where it is the outgoing h. Values against JAX, for a loss on the last h and on
    every h (h then also a row of ys)."""

    def rnn(lax, np_, w, x, every):
        def step(h, s):
            h = np_.tanh(h @ w + s)
            return h, h

        h, hs = lax.scan(step, x, XS)
        return (hs * hs).sum() if every else (h * h).sum()

    func = joint(lambda w, x: rnn(dsl, dnp, w, x, every), (W, X))
    forward = [op for op in func.ops if op.prim is control.scan and not op.attrs["reverse"]]
    residuals = forward[0].results[2:]  # after the scan's own results: its h and its ys
    assert [r.type.shape for r in residuals] == [XS.shape]
    want = jax.grad(lambda w, x: rnn(jax.lax, jnp, w, x, every), argnums=(0, 1))(W, X)
    close(dsl.grad(lambda w, x: rnn(dsl, dnp, w, x, every), argnums=(0, 1))(W, X), want)
    close(dsl.compile(dsl.grad(lambda w, x: rnn(dsl, dnp, w, x, every), argnums=(0, 1)))(W, X), want)


def _backward_body_ops(fn, args, argnums) -> int:
    func = joint(fn, args, argnums)
    backward = [op for op in func.ops if op.prim is control.scan and op.attrs["reverse"]]
    assert len(backward) == 1
    return len(list(Function("body", backward[0].regions[0]).walk()))


def test_no_cotangent_work_for_carries_nobody_asks_about() -> None:
    """A second carry that depends on w (but nobody reads), a third that does not depend on w: the
    backward body is the same as without them."""

    def plain(w, x):
        return dsl.fori_loop(0, 4, lambda i, c: dnp.tanh(c @ w), x).sum()

    def extra(w, x):
        def body(i, c):
            h, unused, count = c
            h2 = dnp.tanh(h @ w)
            return h2, dnp.exp(unused @ w) * dnp.sin(h), count * 1.5 + dnp.cos(x)

        h, _, count = dsl.fori_loop(0, 4, body, (x, x, x))
        return h.sum() + dsl.stop_gradient(count).sum()

    assert _backward_body_ops(extra, (W, X), (0,)) == _backward_body_ops(plain, (W, X), (0,))
    want = jax.grad(lambda w, x: jax.lax.fori_loop(0, 4, lambda i, c: jnp.tanh(c @ w), x).sum())(W, X)
    close(dsl.grad(extra)(W, X), want)


def test_no_gradient_work_for_an_argument_not_differentiated() -> None:
    """Differentiating w.r.t. x only: no accumulator of w's cotangent in the backward scan."""
    program, x = PROGRAMS["fori_consts"]
    func = joint(dsl_fn(program), (W, x), argnums=(1,))
    backward = next(op for op in func.ops if op.prim is control.scan and op.attrs["reverse"])
    assert all(r.type.shape != W.shape for r in backward.results)  # no accumulator for w's cotangent
    both = joint(dsl_fn(program), (W, x))
    backward_both = next(op for op in both.ops if op.prim is control.scan and op.attrs["reverse"])
    assert any(r.type.shape == W.shape for r in backward_both.results)
    close(interpret(func, [W, x]), jax.grad(jax_fn(program), argnums=1)(W, x))


def test_grad_of_grad_through_a_scan() -> None:
    def f(lax, np_, w, xs):
        c, ys = lax.scan(lambda c, x: (np_.sin(c * w) + x, (c * c).sum()), w, xs)
        return c.sum() + ys.sum()

    xs = RNG.standard_normal((4, 4))

    def dsl_outer(w):
        return (dsl.grad(lambda w: f(dsl, dnp, w, xs))(w) * V).sum()

    def jax_outer(w):
        return (jax.grad(lambda w: f(jax.lax, jnp, w, xs))(w) * V).sum()

    close(dsl.grad(dsl_outer)(V), jax.grad(jax_outer)(V), rtol=1e-9)
    close(
        dsl.hessian(lambda w: f(dsl, dnp, w, xs))(V),
        jax.hessian(lambda w: f(jax.lax, jnp, w, xs))(V),
        rtol=1e-9,
    )


def test_hessian_jacrev_and_vjp_through_loops() -> None:
    def f(lax, np_, w):
        c, ys = lax.scan(lambda c, x: (np_.tanh(c * w + x), c * x), w, XS[:, 0])
        return lax.fori_loop(0, 3, lambda i, d: np_.sin(d) * w, c) + ys.sum(axis=0)

    close(dsl.jacrev(lambda w: f(dsl, dnp, w))(V), jax.jacrev(lambda w: f(jax.lax, jnp, w))(V))
    close(
        dsl.hessian(lambda w: f(dsl, dnp, w).sum())(V),
        jax.hessian(lambda w: f(jax.lax, jnp, w).sum())(V),
        rtol=1e-9,
    )
    out, vjp_fn = dsl.vjp(lambda w: f(dsl, dnp, w), V)
    jout, jvjp_fn = jax.vjp(lambda w: f(jax.lax, jnp, w), V)
    close(out, jout)
    close(vjp_fn(V * 2.0), jvjp_fn(V * 2.0))


def test_cond_gradient_has_no_nan_from_the_untaken_branch() -> None:
    def f(lax, np_, x, y):
        return lax.cond(
            x.sum() > 0, lambda x: np_.sqrt(x).sum() + np_.log(y).sum(), lambda x: (x * y).sum(), x
        )

    for x, y in (
        (np.array([-1.0, -2.0]), np.array([-0.5, 2.0])),
        (np.array([1.0, 4.0]), np.array([0.5, 2.0])),
    ):
        want = jax.grad(lambda x, y: f(jax.lax, jnp, x, y), argnums=(0, 1))(x, y)
        fn = lambda x, y: f(dsl, dnp, x, y)  # noqa: E731
        close(interpret(joint(fn, (x, y)), [x, y]), want)
        close(dsl.grad(fn, argnums=(0, 1))(x, y), want)


def test_a_while_loop_nobody_differentiates_is_left_alone() -> None:
    """Reverse mode raises only for a while loop a differentiated value goes through (as JAX)."""

    def f(w, n):
        k = dsl.while_loop(lambda c: c < n, lambda c: c * 2.0, 1.0)
        return (w * k).sum()

    func = joint(f, (V, np.float64(5.0)), argnums=(0,))
    close(interpret(func, [V, np.float64(5.0)]), np.full(4, 8.0))
    close(dsl.grad(f)(V, 5.0), np.full(4, 8.0))
    with pytest.raises(dsl.TransformError, match="reverse-mode differentiation does not work through"):
        joint(lambda w, n: dsl.while_loop(lambda c: c.sum() < n, lambda c: c * 2.0, w).sum(), (V, 5.0), (0,))


def test_a_triangular_loop_is_unrolled_and_differentiated() -> None:
    """An inner fori_loop bounded by the outer counter has no static trip count: the program is
    unrolled first, as before loops had vjps."""

    def f(w):
        def outer(i, c):
            return dsl.fori_loop(0, i, lambda j, d: dnp.sin(d) * w + j, c) + 1.0

        return dsl.fori_loop(0, 3, outer, w).sum()

    def unrolled(w):  # JAX has no reverse mode for it (dynamic bounds): Python loops
        c = w
        for i in range(3):
            for j in range(i):
                c = jnp.sin(c) * w + j
            c = c + 1.0
        return c.sum()

    close(dsl.grad(f)(V), jax.grad(unrolled)(V))


def test_several_cotangents_and_tangents_through_one_loop() -> None:
    """vjp_function and jvp_function sweep one builder per set: the loop's forward is replaced once
    per sweep, each stacking its residuals beside the earlier ones'."""
    from compiler.forward import jvp_function, vjp_function

    def f(lax, np_, w, x):
        c, ys = lax.scan(lambda c, r: (np_.tanh(c * w + r), (c * r).sum()), x, XS[:, 0])
        return c.sum(), ys.sum() * w.sum()

    traced = trace_function(lambda w, x: f(dsl, dnp, w, x), (V, V * 0.5)).func
    u = [np.float64(1.5), np.float64(-0.5)]
    func = vjp_function(traced, [0, 1], [[0], [1], [0, 1]])
    verify(func)
    got = interpret(func, [V, V * 0.5, u[0], u[1], u[0], u[1]])
    _, pull = jax.vjp(lambda w, x: f(jax.lax, jnp, w, x), V, V * 0.5)
    want = [pull((u[0], 0.0)), pull((0.0, u[1])), pull((u[0], u[1]))]
    close(got[2:], [g for pair in want for g in pair])
    func = jvp_function(traced, [0, 1], [[0], [1]])
    verify(func)
    got = interpret(func, [V, V * 0.5, V * 2.0, V - 1.0])
    jf = lambda w, x: f(jax.lax, jnp, w, x)  # noqa: E731
    want_w = jax.jvp(jf, (V, V * 0.5), (V * 2.0, np.zeros(4)))[1]
    want_x = jax.jvp(jf, (V, V * 0.5), (np.zeros(4), V - 1.0))[1]
    close(got[2:], [*want_w, *want_x])


@pytest.mark.parametrize("mode", ["no-inplace", "sanitized", "unrolled"])
@pytest.mark.parametrize("name", ["scan_many", "nested", "cond_in_scan"])
def test_compiled_gradients_in_every_mode(name: str, mode: str) -> None:
    """The joint program compiled with in-place off, under the sanitizer, and unrolled."""
    program, x = PROGRAMS[name]
    switches = {
        "no-inplace": {"inplace": False},
        "sanitized": {"sanitize": True},
        "unrolled": {"native_loops": False},
    }[mode]
    with option_defaults(**switches):
        got = dsl.grad(dsl_fn(program), argnums=(0, 1))(W, x)
    close(got, jax.grad(jax_fn(program), argnums=(0, 1))(W, x))


def test_the_backward_if_reads_only_what_its_branches_need() -> None:
    """Both branches linear in x: the backward if takes the predicate and the cotangent, not the
    operands (inside a loop body each operand it took would be stacked per iteration)."""

    def f(x, y):
        return dsl.cond(x.sum() > 0, lambda a, b: a * 2.0 + b.sum(), lambda a, b: a - b.sum(), x, y).sum()

    func = joint(f, (V, X), argnums=(0,))
    forward, backward = regions(func, control.if_)
    assert len(backward.operands) == 2 and len(forward.operands) == 3
    for x in (V, -V):
        close(interpret(func, [x, X]), [np.full(4, 2.0 if x.sum() > 0 else 1.0)])
