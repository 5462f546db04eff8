"""Native loops (issue 28): loops and branches compiled as loops of the generated driver
(``compiler/passes/loops.py``), checked against ``jax.lax`` (float64), against the same programs
unrolled (``native_loops=False``), with in-place off and under the sanitizer; their memory: a carry
updated in place lives in one buffer, and the plan's peak does not depend on the trip count."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import python_kernels

import dsl
import dsl.numpy as dnp
from compiler.compilation import option_defaults

jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(7)
X = RNG.standard_normal((3, 4))
W = RNG.standard_normal((4, 4)) * 0.4
XS = RNG.standard_normal((5, 3, 4))


def _np(module):
    return dnp if module is dsl else jnp


def rnn(lax, w, xs):
    def step(h, x):
        h = _np(lax).tanh(h @ w + x)
        return h, h.sum(axis=1)

    return lax.scan(step, xs[0] * 0.0, xs)


def reverse_scan(lax, w, xs):
    return lax.scan(lambda c, x: (c * 0.5 + x @ w, (c * x).sum()), xs[0], xs, reverse=True)


def swapped(lax, x, w):
    return lax.fori_loop(0, 5, lambda i, c: (c[1] @ w, c[0] + 1.0), (x, x * 2.0))


def unchanged_and_returned(lax, x, w):
    def step(c, row):
        a, b = c
        return (a, b * 0.5 + row), a  # a carry yielded as it is, and read as a y row

    return lax.scan(step, (x, x), x @ w)


def scalar_rows(lax, x, w):
    return lax.scan(lambda c, s: (c * s + 1.0, c.sum() * s), x, x[:, 0])


def while_(lax, x, w):
    return lax.while_loop(lambda c: c[1].sum() < 40.0, lambda c: (c[0] + 1, c[1] * 1.5 + 1.0), (0, x * x))


def branches(lax, x, w):
    def pick(p):
        return lax.cond(p.sum() > 0.0, lambda a: a @ w, lambda a: -a, p)

    return pick(x), pick(-x), lax.cond(x.sum() > 0.0, lambda a: a, lambda a: a * 2.0, x)


def nested(lax, x, w):
    def outer(i, c):
        inner = lax.fori_loop(0, i, lambda j, d: _np(lax).sin(d) * w[0] + j, c)
        return inner + lax.cond(i % 2 == 0, lambda a: a * 0.5, lambda a: a + 1.0, c)

    return lax.fori_loop(0, 4, outer, x)


def zero_trips(lax, x, w):
    return lax.fori_loop(3, 3, lambda i, c: c @ w, x), lax.fori_loop(5, 2, lambda i, c: c + 1.0, x)


def loop_ops(lax, x, w):
    """Values computed before a loop, read by its body, updated in place after it."""
    y = x * 2.0
    z = lax.fori_loop(0, 3, lambda i, c: c + y * i, x)
    return z + y, y.sum()


PROGRAMS = {
    "rnn": (rnn, (W, XS)),
    "reverse_scan": (reverse_scan, (W, XS)),
    "swapped": (swapped, (X, W)),
    "unchanged_and_returned": (unchanged_and_returned, (X, W)),
    "scalar_rows": (scalar_rows, (X, W)),
    "while": (while_, (X, W)),
    "branches": (branches, (X, W)),
    "nested": (nested, (X, W)),
    "zero_trips": (zero_trips, (X, W)),
    "loop_ops": (loop_ops, (X, W)),
}


def close(got, want, rtol: float = 1e-11) -> None:
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("mode", ["native", "no-inplace", "sanitized", "unrolled"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_loop_values_against_jax(name: str, mode: str) -> None:
    fn, args = PROGRAMS[name]
    want = fn(jax.lax, *args)
    if mode == "unrolled" and name == "while":
        pytest.skip("a while loop has no unrolled form (its trip count is known at run time)")
    switches = {
        "native": {},
        "no-inplace": {"inplace": False},
        "sanitized": {"sanitize": True},
        "unrolled": {"native_loops": False},
    }[mode]
    with option_defaults(**switches):
        got = dsl.compile(lambda *a: fn(dsl, *a))(*args)
    close(got, want)


def test_a_carry_updated_in_place_lives_in_one_buffer() -> None:
    """``c * 0.5 + x`` reads the old carry only at the element it writes: the body writes the new
    carry over the old one (no temporary, no copy per iteration), and the loop's result takes the
    block of its dying initial value."""
    f = dsl.compile(lambda x, y: dsl.fori_loop(0, 100, lambda i, c: c * 0.5 + y, x * 3.0))
    lowered = f.lower(X, X)
    (loop,) = lowered.program.compilation.loops.values()
    assert loop.temps == {}, "the carry went through a temporary"
    assert "tmp" not in lowered.source()
    close(f(X, X), jax.lax.fori_loop(0, 100, lambda i, c: c * 0.5 + X, X * 3.0))


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_a_carry_that_cannot_be_written_in_place_alternates_with_its_temporary(target: str) -> None:
    """A matmul cannot write over its own operand: the new carry goes to a temporary, and the carry's
    buffer and the temporary swap roles every iteration (no copy per iteration; one copy after the
    loop when the last value is in the temporary: an odd trip count). A while's condition reads the
    current buffer too."""
    for steps in (3, 4):
        f = dsl.compile(lambda x, w, n=steps: dsl.fori_loop(0, n, lambda i, c: c @ w, x), target=target)
        lowered = f.lower(X, W)
        (loop,) = lowered.program.compilation.loops.values()
        assert list(loop.temps) == [0]
        source = lowered.source()
        loop_text = source[re.search(r"for l\d+b_", source).start() :]
        assert loop_text.count("copy") == 1 and re.search(r"if l\d+b_f:", loop_text), loop_text
        if target == "cpu":
            close(f(X, W), jax.lax.fori_loop(0, steps, lambda i, c: c @ W, X))

    def grow(x, w):
        return dsl.while_loop(lambda c: c[1] < 5.0, lambda c: (c[0] @ w, c[1] + 1.0), (x, x[0, 0] * 0.0))

    if target == "cpu":
        want = jax.lax.while_loop(lambda c: c[1] < 5.0, lambda c: (c[0] @ W, c[1] + 1.0), (X, X[0, 0] * 0.0))
        close(dsl.compile(grow)(X, W), want)
    else:
        (loop,) = dsl.compile(grow, target=target).lower(X, W).program.compilation.loops.values()
        assert 0 in loop.temps


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_a_carry_that_is_also_a_row_of_ys_is_copied_once_per_iteration(target: str) -> None:
    """The new carry is the step's ys row too: the body's kernel writes it into row t of ys, and the
    driver copies that row over the carry, straight (no temporary, one copy per iteration). A swap
    of two carries still goes through a temporary: the copies read the old carries."""

    def f(c, xs):
        return dsl.scan(lambda c, x: (c * 0.5 + x,) * 2, c, xs)

    lowered = dsl.compile(f, target=target).lower(X, XS)
    (loop,) = lowered.program.compilation.loops.values()
    assert loop.temps == {}, "the carry went through a temporary"
    source = lowered.source()
    loop_text = source[source.index("for l0b_s") :]
    assert "tmp" not in source and loop_text.count("copy") == 1, loop_text
    if target == "cpu":
        close(dsl.compile(f)(X, XS), jax.lax.scan(lambda c, x: (c * 0.5 + x,) * 2, X, XS))

    def swap(a, b):
        return dsl.fori_loop(0, 3, lambda i, c: (c[1], c[0] + 1.0), (a, b))

    (loop,) = dsl.compile(swap, target=target).lower(X, X * 2.0).program.compilation.loops.values()
    assert sorted(loop.temps) == [0, 1]
    if target == "cpu":
        want = jax.lax.fori_loop(0, 3, lambda i, c: (c[1], c[0] + 1.0), (X, X * 2.0))
        close(dsl.compile(swap)(X, X * 2.0), want)


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_sgd_steps_plan_the_same_peak_for_any_number_of_steps(target: str) -> None:
    """N SGD steps of a two-layer model in one call: the program and its plan do not grow with N."""

    def train(n):
        def step(i, params):
            w1, w2 = params
            grads = dsl.grad(lambda a, b: ((dnp.tanh(X @ a) @ b) ** 2).mean(), argnums=(0, 1))(w1, w2)
            return w1 - 0.1 * grads[0], w2 - 0.1 * grads[1]

        return lambda w1, w2: dsl.fori_loop(0, n, step, (w1, w2))

    w2 = RNG.standard_normal((4, 2))
    peaks, sizes = [], []
    for n in (10, 1000):
        lowered = dsl.compile(train(n), target=target).lower(W, w2)
        peaks.append(lowered.memory_plan().peak_bytes)
        sizes.append(len(lowered.ir("optimized")))
    assert peaks[0] == peaks[1] and abs(sizes[0] - sizes[1]) <= 2  # (the literal trip count's digits)
    got = dsl.compile(train(10))(W, w2)

    def jax_train(w1, w2):
        def step(i, params):
            a, b = params
            ga, gb = jax.grad(lambda a, b: ((jnp.tanh(X @ a) @ b) ** 2).mean(), argnums=(0, 1))(a, b)
            return a - 0.1 * ga, b - 0.1 * gb

        return jax.lax.fori_loop(0, 10, step, (w1, w2))

    close(got, jax_train(W, w2))


def test_loop_memory_does_not_grow_with_the_trip_count() -> None:
    def program(n):
        return dsl.compile(lambda w, xs: dsl.fori_loop(0, n, lambda i, c: dnp.tanh(c @ w + xs[0]), xs[1]))

    peaks = [program(n).lower(W, XS).memory_plan().peak_bytes for n in (2, 500)]
    assert peaks[0] == peaks[1]


def test_cuda_loops_print_host_loops() -> None:
    """The CUDA driver runs a loop's kernels in a host loop (no device needed to print it)."""
    lowered = dsl.compile(lambda w, xs: rnn(dsl, w, xs), target="cuda").lower(W, XS)
    source = lowered.source()
    assert "for l" in source and "range(5)" in source


def test_in_place_requests_in_a_loop_body_are_reported_and_strict() -> None:
    """A user's in-place request inside a body is planned by the body's planner and reported with the
    program's own (``explain_inplace``); ``strict_inplace`` holds there too."""

    def f(x, y):
        def body(i, c):
            c += y
            c.exp_()
            return c

        return dsl.fori_loop(0, 3, body, x * 1.0)

    x, y = RNG.random(4), RNG.random(4)
    report = dsl.compile(f).lower(x, y).explain_inplace()
    assert "+=" in report and "exp_" in report and "in place" in report
    close(dsl.compile(f, strict_inplace=True)(x, y), jax.lax.fori_loop(0, 3, lambda i, c: jnp.exp(c + y), x))

    def blocked(x, w):
        def body(i, c):
            y = c * 2.0  # reads the old c later
            c.exp_()  # needs a copy
            return (c @ w) + y

        return dsl.fori_loop(0, 2, body, x * 1.0)

    with pytest.raises(dsl.InplaceError, match="exp_"):
        dsl.compile(blocked, strict_inplace=True)(np.ones((3, 3)), np.ones((3, 3)))


def test_a_stack_of_hundreds_of_arrays_compiles() -> None:
    """concatenate's element form is a balanced tree of conditionals: 300 operands nest 9 deep, where
    a chain of 300 failed to parse ("too many nested parentheses"; found by benchmarks/bench_loops.py).
    Python parses the generated module whether Numba compiles it or not: its kernels run as plain
    Python here (Numba took a minute over the 300-way kernel, and checks nothing the parse does not)."""
    x = RNG.standard_normal((2, 3))
    with python_kernels():
        got = dsl.compile(lambda x: dnp.stack([x * i for i in range(300)]))(x)
    np.testing.assert_array_equal(got, np.stack([x * i for i in range(300)]))


def test_a_value_yielded_twice_by_a_scan_is_stacked_once() -> None:
    """The h of an RNN step is the user's ys and a residual its vjp stacks: one stack (results: the
    carry, h, and the old h the backward reads; four before simplify merged the two stacks of h)."""

    def loss(w, xs):
        _, hs = dsl.scan(lambda h, x: (dnp.tanh(h @ w + x),) * 2, xs[0] * 0.0, xs)
        return (hs * hs).sum()

    optimized = dsl.compile(dsl.value_and_grad(loss)).lower(W, XS).ir("optimized")
    scans = [line.split("=")[0].strip() for line in optimized.splitlines() if '"dsl.scan"' in line]
    assert scans[0].endswith(":3"), scans
    want = jax.value_and_grad(
        lambda w, xs: (jax.lax.scan(lambda h, x: (jnp.tanh(h @ w + x),) * 2, xs[0] * 0.0, xs)[1] ** 2).sum()
    )(W, XS)
    close(dsl.compile(dsl.value_and_grad(loss))(W, XS), want)


def test_body_requests_stay_reported_when_the_plan_is_re_judged() -> None:
    """report_requests re-derives the program's own requests whenever the plan changes (the regions
    pass resizing slots); the decisions of a loop body's requests, which it cannot judge, stay."""
    from compiler.passes.inplace_report import report_requests

    def f(x, y):
        def body(i, c):
            c += y
            return c

        return dsl.fori_loop(0, 2, body, x * 1.0)

    plan = dsl.compile(f).lower(X, X).memory_plan()
    before = [str(d) for d in plan.inplace if d.request]
    assert any("+=" in d for d in before)
    report_requests(plan)
    assert [str(d) for d in plan.inplace if d.request] == before
