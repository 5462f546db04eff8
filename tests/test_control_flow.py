"""dsl.fori_loop / scan / while_loop / cond against jax.lax: values and gradients (float64), pytrees of
carries, the IR they trace to (one region op, a size independent of the trip count), the reference
interpreter on that IR, and the errors at the user's line.

Compiled code sees the loops unrolled for now (compiler/passes/regions_unroll.py); the interpreter
runs the region ops themselves, so both paths are checked against JAX.
"""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
from compiler.compilation import option_defaults
from compiler.interpreter import interpret
from compiler.prims import control
from dsl.compile import trace_function

jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(0)
W = RNG.standard_normal((4, 4)) * 0.4
X = RNG.standard_normal((3, 4))
XS = RNG.standard_normal((5, 3, 4))


def close(got, want, rtol: float = 1e-10) -> None:
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=1e-12)


def interpreted(fn, *args):
    """``fn`` traced, then its traced IR (region ops and all) run by the reference interpreter."""
    traced = trace_function(fn, args).func
    return interpret(traced, [np.asarray(a) for a in args])


# ---- the programs, written once for both libraries ---------------------------------------------


def rnn(lax, np_, w, x):
    """fori_loop with a pytree carry and the counter used in the body."""

    def body(i, carry):
        h, total = carry
        h = np_.tanh(h @ w + 0.1 * i)
        return h, total + (h * h).sum()

    h, total = lax.fori_loop(0, 4, body, (x, 0.0))
    return total + h.sum()


def scan_rnn(lax, np_, w, xs):
    """scan over a sequence: carry h, output per-step sums; dict carry and tuple ys."""

    def step(carry, x):
        h = np_.tanh(carry["h"] @ w + x)
        return {"h": h, "n": carry["n"] + 1.0}, (h.sum(axis=1), h[0])

    carry, (sums, firsts) = lax.scan(step, {"h": np_.zeros((3, 4)), "n": 0.0}, xs)
    return (sums * sums).sum() + firsts.sum() + carry["h"].sum() * carry["n"]


def scan_reverse(lax, np_, w, xs):
    def step(c, x):
        c = c * 0.5 + x @ w
        return c, c.mean()

    c, ys = lax.scan(step, np_.ones((3, 4)), xs, reverse=True)
    return (ys * np_.arange(5.0)).sum() + c.sum()


def branch(lax, np_, w, x):
    def big(a, b):
        return a @ b, a.sum()

    def small(a, b):
        return a * 2.0 - 1.0, (a * b[0]).sum()

    m, s = lax.cond(x.sum() > 0.0, big, small, x, w)
    n, t = lax.cond(x.sum() <= 0.0, big, small, x, w)
    return (m * m).sum() + s + (n * np_.sin(n)).sum() * t


LOSSES = {
    "fori_loop": (rnn, X),
    "scan": (scan_rnn, XS),
    "scan_reverse": (scan_reverse, XS),
    "cond": (branch, X),
}


def dsl_fn(program):
    return lambda w, x: program(dsl, dnp, w, x)


def jax_fn(program):
    return lambda w, x: program(jax.lax, jnp, w, x)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_values_against_jax(name: str) -> None:
    program, x = LOSSES[name]
    want = jax_fn(program)(W, x)
    close(dsl.compile(dsl_fn(program))(W, x), want)
    close(interpreted(dsl_fn(program), W, x)[0], want)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_gradients_against_jax(name: str) -> None:
    program, x = LOSSES[name]
    want = jax.grad(jax_fn(program), argnums=(0, 1))(W, x)
    close(dsl.grad(dsl_fn(program), argnums=(0, 1))(W, x), want)


def test_second_order_through_a_loop_against_jax() -> None:
    def f(lax, np_, w):
        return lax.fori_loop(0, 3, lambda i, c: np_.sin(c) * w, w).sum()

    want = jax.hessian(lambda w: f(jax.lax, jnp, w))(X[0])
    close(dsl.hessian(lambda w: f(dsl, dnp, w))(X[0]), want)


def test_grad_inside_a_compiled_function() -> None:
    program, x = LOSSES["fori_loop"]
    inner = dsl.grad(dsl_fn(program))

    @dsl.compile
    def outer(w, x):
        return inner(w, x) * 2.0

    close(outer(W, x), 2.0 * np.asarray(jax.grad(jax_fn(program))(W, x)))


def test_while_loop_compiles_and_its_unrolled_form_is_an_error() -> None:
    def f(x):
        return dsl.while_loop(lambda c: c[1] < 50.0, lambda c: (c[0] + 1, c[1] * 2.0 + c[0]), (0, x.sum()))

    x = np.array([0.5, 1.0])
    want = jax.lax.while_loop(lambda c: c[1] < 50.0, lambda c: (c[0] + 1, c[1] * 2.0 + c[0]), (0, x.sum()))
    close(interpreted(f, x), want)
    close(dsl.compile(f)(x), want)
    line = inspect.getsourcelines(f)[1] + 1
    with (
        option_defaults(native_loops=False),
        pytest.raises(
            dsl.TransformError, match=rf"test_control_flow.py:{line}: dsl.while_loop is not compiled"
        ),
    ):
        dsl.compile(f)(x)


def test_reverse_mode_through_while_loop_raises() -> None:
    def f(x):
        return dsl.while_loop(lambda c: c.sum() < 10.0, lambda c: c * 2.0, x).sum()

    with pytest.raises(
        dsl.TransformError, match="reverse-mode differentiation does not work through dsl.while_loop"
    ):
        dsl.grad(f)(np.ones(3))


def test_traced_trip_count_compiles() -> None:
    def f(x, n):
        return dsl.fori_loop(0, n, lambda i, c: c * 2.0 + i, x)

    x = np.arange(3.0)
    compiled = dsl.compile(f)
    for n in (4, 0, 7):  # one executable: the trip count is an argument
        want = jax.lax.fori_loop(0, n, lambda i, c: c * 2.0 + i, x)
        close(interpreted(f, x, n), want)
        close(compiled(x, n), want)
    with (
        option_defaults(native_loops=False),
        pytest.raises(dsl.TransformError, match="trip count computed at run time"),
    ):
        dsl.compile(f)(x, 4)


def test_static_trip_count_argument_compiles() -> None:
    f = dsl.compile(lambda x, n: dsl.fori_loop(1, n, lambda i, c: c * 2.0 + i, x), static_argnums=1)
    close(f(np.arange(3.0), 5), jax.lax.fori_loop(1, 5, lambda i, c: c * 2.0 + i, np.arange(3.0)))


def test_nested_loops_with_a_triangular_trip_count() -> None:
    def f(lax, x):
        def outer(i, c):
            return lax.fori_loop(0, i, lambda j, d: d * 0.5 + j, c) + 1.0

        return lax.fori_loop(0, 4, outer, x)

    close(dsl.compile(lambda x: f(dsl, x))(X), f(jax.lax, X))


def test_loop_ir_does_not_grow_with_the_trip_count() -> None:
    def traced(n):
        fn = lambda x: dsl.fori_loop(0, n, lambda i, c: dnp.tanh(c @ W), x)  # noqa: E731
        return trace_function(fn, (X,)).func

    small, large = traced(10), traced(1000)
    assert len(list(small.walk())) == len(list(large.walk()))
    assert [op.prim for op in large.ops].count(control.for_loop) == 1


def test_scan_with_length_and_no_xs() -> None:
    def f(lax, x):
        return lax.scan(lambda c, _: (c * 1.5, c.sum()), x, None, length=3)

    close(dsl.compile(lambda x: f(dsl, x))(X), f(jax.lax, X))
    close(interpreted(lambda x: f(dsl, x), X), f(jax.lax, X))


def test_cond_with_integer_predicate_and_closure() -> None:
    def f(lax, x, k):
        return lax.cond(k, lambda: x * 2.0, lambda: x - 1.0)

    for k in (0, 3):
        close(dsl.compile(lambda x, k: f(dsl, x, k))(X, k), f(jax.lax, X, k))


# ---- errors at the user's line ------------------------------------------------------------------


def _line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def test_a_carry_that_changes_type_names_the_line_and_both_types() -> None:
    def f(x):
        return dsl.fori_loop(0, 3, lambda i, c: c.sum(), x)  # the carry loses its shape

    line = _line_of(f, "c.sum()")
    with pytest.raises(
        dsl.TraceError, match=rf"test_control_flow.py:{line}: .*from tensor<3x4xf64> to tensor<f64>"
    ):
        dsl.compile(f)(X)


def test_a_carry_that_changes_dtype() -> None:
    def f(x):
        return dsl.scan(lambda c, r: (c + r, r), 0, x)  # int carry, float rows

    with pytest.raises(
        dsl.TraceError, match=r"from tensor<i64> to tensor<4xf64>|from tensor<i64> to tensor<f64>"
    ):
        dsl.compile(f)(X)


def test_python_if_on_a_traced_value_inside_a_body() -> None:
    def f(x):
        def body(i, c):
            if c.sum() > 0:  # Python control flow on a traced value
                return c
            return -c

        return dsl.fori_loop(0, 2, body, x)

    line = _line_of(f, "if c.sum()")
    with pytest.raises(dsl.TraceError, match=rf"test_control_flow.py:{line}: bool\(\)"):
        dsl.compile(f)(X)


def test_branches_of_different_types() -> None:
    def f(x):
        return dsl.cond(x.sum() > 0, lambda: x, lambda: x.sum())

    line = _line_of(f, "dsl.cond")
    with pytest.raises(dsl.TraceError, match=rf"test_control_flow.py:{line}: cond: true_fun and false_fun"):
        dsl.compile(f)(X)

    def g(x):  # structures differ: the types inside them are shown as IR text (was TensorType(...))
        return dsl.cond(x.sum() > 0, lambda: (x, {"a": x}), lambda: x)

    with pytest.raises(
        dsl.TraceError, match=r"returns \(tensor<\d+x\d+xf64>, \{'a': tensor<\d+x\d+xf64>\}\) and"
    ):
        dsl.compile(g)(X)


def test_a_value_leaking_out_of_a_body() -> None:
    def f(x):
        seen = []

        def body(i, c):
            seen.append(c * 2.0)
            return c + 1.0

        y = dsl.fori_loop(0, 2, body, x)
        return y + seen[0]

    line = _line_of(f, "y + seen[0]")
    with pytest.raises(
        dsl.TraceError, match=rf"test_control_flow.py:{line}: this reads an array computed inside"
    ):
        dsl.compile(f)(X)


def test_while_cond_must_return_a_bool_scalar() -> None:
    with pytest.raises(
        dsl.TraceError, match=r"cond_fun must return a bool scalar \(tensor<i1>\), got tensor<4xi1>"
    ):
        dsl.compile(lambda x: dsl.while_loop(lambda c: c > 0, lambda c: c - 1.0, x[0]))(X)


def test_scan_rows_of_different_lengths() -> None:
    with pytest.raises(dsl.TraceError, match="same leading axis"):
        dsl.compile(lambda a, b: dsl.scan(lambda c, r: (c, r), 0.0, (a, b)))(XS, X)


def test_the_counter_indexes_the_carry() -> None:
    """``c[i] = ...`` with the loop counter (a dynamic update of the carry), values and gradient."""

    def f(lax, x):
        def body(i, c):
            if lax is dsl:
                c[i] = c[i] * 2.0 + c[i - 1]
                return c
            return c.at[i].set(c[i] * 2.0 + c[i - 1])

        return lax.fori_loop(1, 4, body, x * 1.0)

    x = np.arange(5.0)
    close(dsl.compile(lambda x: f(dsl, x))(x), f(jax.lax, x))
    close(dsl.grad(lambda x: f(dsl, x).sum())(x), jax.grad(lambda x: f(jax.lax, x).sum())(x))


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_jvp_against_jax(name: str) -> None:
    """Forward mode through the loops (it was a silent zero tangent while jvp saw the region ops)."""
    program, x = LOSSES[name]
    tw, tx = RNG.standard_normal(W.shape), RNG.standard_normal(x.shape)
    want = jax.jvp(jax_fn(program), (W, x), (tw, tx))
    close(dsl.jvp(dsl_fn(program), (W, x), (tw, tx)), want)


def test_jacrev_through_a_body_that_closes_over_the_argument() -> None:
    def f(lax, np_, w):
        return lax.fori_loop(0, 3, lambda i, c: np_.sin(c * w), np_.ones(4))

    close(dsl.jacrev(lambda w: f(dsl, dnp, w))(X[0]), jax.jacrev(lambda w: f(jax.lax, jnp, w))(X[0]))


def _fori_writer(a, x):
    def body(i, c):
        a[i] = c.sum()  # an argument written in the body
        a[:] *= 1.5  # every element, each iteration: reads what the last one wrote
        return dnp.sin(c) * 1.1

    return dsl.fori_loop(0, 3, body, x * 1.0).sum()


def _scan_writer(a, x):
    def step(c, row):
        a[0] += row  # through a view, and read back in the same iteration
        return c + a.sum(), a[0] * c

    carry, ys = dsl.scan(step, x.sum(), x)
    return carry + ys.sum()


def _while_writer(a, x):
    def body(k):
        a[k % 3] += x[k % 3]
        return k + 1

    return dsl.while_loop(lambda k: k < 7, body, 0) + a.sum()


def _cond_writer(a, x):
    def yes(v):
        a.T[1] = v.sum()  # through a transposed view, in one branch only
        return v * 2.0

    return dsl.cond(x.sum() > 0, yes, lambda v: v - 1.0, x).sum()


def _nested_writer(a, x):
    def outer(i, c):
        local = dnp.zeros(2)

        def inner(j, d):
            a[i] += x[j]  # two levels out
            local[j % 2] += 1.0  # one level out: a local of the enclosing body
            return d + j

        return c + local.sum() + dsl.fori_loop(0, 3, inner, 0)

    return dsl.fori_loop(0, 2, outer, 0.0)


def _eager(f):
    """``f`` with the dsl control flow run as Python loops (NumPy arrays: the eager semantics)."""

    class Lax:
        @staticmethod
        def fori_loop(lo, hi, body, c):
            for i in range(lo, hi):
                c = body(i, c)
            return c

        @staticmethod
        def scan(step, c, xs):
            ys = []
            for row in xs:
                c, y = step(c, row)
                ys.append(y)
            return c, np.stack(ys)

        @staticmethod
        def while_loop(cond, body, c):
            while cond(c):
                c = body(c)
            return c

        @staticmethod
        def cond(p, yes, no, *ops):
            return yes(*ops) if p else no(*ops)

    class Np:
        zeros, sin = staticmethod(np.zeros), staticmethod(np.sin)

    def run(a, x):
        g = dict(f.__globals__, dsl=Lax, dnp=Np)
        return type(f)(f.__code__, g)(a, x)

    return run


WRITERS = {
    "fori": (_fori_writer, (3,), (3,)),
    "scan": (_scan_writer, (3,), (4,)),
    "while": (_while_writer, (3,), (3,)),
    "cond": (_cond_writer, (1, 3), (3,)),
    "nested": (_nested_writer, (2,), (3,)),
}


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_a_body_writing_into_an_array_from_outside_it_has_eager_semantics(name: str) -> None:
    """api.md: in-place writes inside a loop body have eager semantics, and an argument written in
    place is updated in the caller's array. A body writing an enclosing array raised TraceError
    ("make the array part of the carry"); the loop now carries it itself."""
    f, a_shape, x_shape = WRITERS[name]
    a = RNG.standard_normal(a_shape)
    x = RNG.standard_normal(x_shape)
    want_a = a.copy()
    want = _eager(f)(want_a, x.copy())
    got = dsl.compile(f)(a, x)
    close(got, want)
    close(a, want_a)  # the caller's array holds what the eager loop left in it


def test_a_scan_writing_the_array_it_scans_over_raises() -> None:
    """A scan reads its rows as they were before it (JAX's); a Python loop over a mutated array sees
    the writes, so rather than differ silently dslc refuses (found by the fuzzer)."""

    def f(a):
        def step(c, row):
            a[...] += c  # a is also xs
            return c + row, row

        return dsl.scan(step, 0.0, a[::-1])

    line = _line_of(f, "return dsl.scan(step, 0.0, a[::-1])")
    with pytest.raises(
        dsl.TraceError, match=rf"test_control_flow.py:{line}: scan's f writes into an array it scans"
    ):
        dsl.compile(f)(np.ones(3))


@pytest.mark.parametrize("write", ["setitem", "in-place method", "augmented"])
def test_a_scan_writing_its_row_raises(write: str) -> None:
    """A write through the step's row parameter was silently by value: the caller's xs kept its
    rows, where a Python loop's row is a view and writes xs (found 2026-11-27). It raises as a write
    through the closure does; a copy of the row may be written."""

    def f(a):
        def step(c, row):
            if write == "setitem":
                row[0] = 5.0
            elif write == "in-place method":
                row.add_(1.0)
            else:
                row += 1.0
            return c + row, row * 1.0

        return dsl.scan(step, a[0] * 0.0, a)

    line = _line_of(f, "return dsl.scan(step, a[0] * 0.0, a)")
    with pytest.raises(dsl.TraceError, match=rf"test_control_flow.py:{line}: scan's f writes into its row"):
        dsl.compile(f)(np.ones((3, 4)))

    def g(a):
        def step(c, row):
            row = row.copy()
            row[0] = 5.0
            return c + row, row

        return dsl.scan(step, a[0] * 0.0, a)

    x = np.arange(12.0).reshape(3, 4)
    carry, ys = dsl.compile(g)(x.copy())
    rows = x.copy()
    rows[:, 0] = 5.0
    np.testing.assert_array_equal(ys, rows)
    np.testing.assert_array_equal(carry, rows.sum(axis=0))


def test_a_written_enclosing_array_under_grad_and_vmap() -> None:
    a, x = np.zeros(3), np.array([0.3, 0.5, -0.2])
    g = dsl.grad(_fori_writer, argnums=1)(a, x)
    eager_a = np.zeros(3)
    _eager(_fori_writer)(eager_a, x.copy())
    close(a, eager_a)  # written once, as one call of the function writes it
    eps = 1e-6
    eager = _eager(_fori_writer)
    fd = [(eager(np.zeros(3), x + eps * e) - eager(np.zeros(3), x - eps * e)) / (2 * eps) for e in np.eye(3)]
    close(g, np.array(fd), rtol=1e-6)
    with pytest.raises(dsl.InplaceError, match="can't be modified in place"):
        dsl.grad(_fori_writer)(np.zeros(3), x)  # the differentiated argument: as outside a loop
    batch_a, batch_x = np.zeros((2, 3)), RNG.standard_normal((2, 3))
    out = dsl.vmap(_fori_writer)(batch_a, batch_x)
    for k in range(2):
        eager_a = np.zeros(3)
        close(out[k], _eager(_fori_writer)(eager_a, batch_x[k].copy()))
        close(batch_a[k], eager_a)


def test_a_python_scalar_carry_takes_the_dtype_the_body_gives_it() -> None:
    """JAX's weak-type promotion: ``0.0`` accumulating float32 values is a float32 carry, ``0``
    accumulating float32 rows too (the body is traced again with the promoted carry)."""
    x = np.arange(4, dtype=np.float32)

    def f(lax, x):
        total = lax.fori_loop(0, 3, lambda i, c: c + x.sum(), 0.0)
        c, ys = lax.scan(lambda c, r: (c + r, c * 2), 0, x)
        picked = lax.cond(total > 1, lambda: total * 2, lambda: 1.0)  # a weak branch result
        return total, c, ys, picked

    jax.config.update("jax_enable_x64", False)  # float32 stays float32 in JAX only without x64
    try:
        want = f(jax.lax, x)
    finally:
        jax.config.update("jax_enable_x64", True)
    got = dsl.compile(lambda x: f(dsl, x))(x)
    assert [np.asarray(g).dtype for g in got] == [np.float32] * 4
    close(got, want)


def test_cond_gradient_ignores_the_untaken_branch() -> None:
    """The untaken branch's derivative never reaches the gradient: sqrt and log at negatives (NaN
    and inf derivatives) in the branch not taken, through its operand and a value it reads from
    above. Before each branch's inputs were masked, the unrolled cond's gradient was NaN here."""

    def f(x, y):
        return dsl.cond(
            x.sum() > 0,
            lambda x: dnp.sqrt(x).sum() + dnp.log(y).sum(),
            lambda x: (x * 2.0).sum() + (y * y).sum(),
            x,
        )

    def jf(x, y):
        return jax.lax.cond(
            x.sum() > 0,
            lambda x: jnp.sqrt(x).sum() + jnp.log(y).sum(),
            lambda x: (x * 2.0).sum() + (y * y).sum(),
            x,
        )

    for x, y in (
        (np.array([-1.0, -2.0]), np.array([-0.5, 2.0])),
        (np.array([1.0, 4.0]), np.array([0.5, 2.0])),
    ):
        got = dsl.grad(f, argnums=(0, 1))(x, y)
        want = jax.grad(jf, argnums=(0, 1))(x, y)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, np.asarray(w), rtol=1e-12)
        _, tangent = dsl.jvp(f, (x, y), (np.ones(2), np.ones(2)))
        _, jax_tangent = jax.jvp(jf, (x, y), (np.ones(2), np.ones(2)))
        np.testing.assert_allclose(tangent, np.asarray(jax_tangent), rtol=1e-12)
    # compiled natively, only the taken branch runs (these branches are cheap enough for if_to_select
    # to run both and select, so it is switched off here); unrolled, the masks cost nothing without
    # gradients (simplify folds them): one select of the two branches' values
    with option_defaults(if_to_select=False):
        native = dsl.compile(f).lower(x, y).ir("optimized")
    assert native.count('"dsl.if"') == 1 and '"dsl.select"' not in native
    with option_defaults(native_loops=False):
        assert dsl.compile(f).lower(x, y).ir("optimized").count('"dsl.select"') == 1


def test_a_view_read_inside_a_body_is_derived_again_after_it() -> None:
    """A view (a keepdims reduction's reshape) first read inside a loop body was derived in the
    body's trace; reading it after the loop raised the 'computed inside the body' TraceError
    (the fuzzer's seed-derandomized share found it). It is derived again outside."""

    def f(x):
        m = dnp.max(x, axis=0, keepdims=True)
        c = dsl.fori_loop(0, 2, lambda k, c: dnp.maximum(c, m) * 0.5 + k * 0.25, m)
        return c // m, m * 1.0

    x = np.array([[0.3, -1.0], [0.1, 2.0]])
    m = x.max(axis=0, keepdims=True)
    c = m.copy()
    for k in range(2):
        c = np.maximum(c, m) * 0.5 + k * 0.25
    for got, want in zip(dsl.compile(f)(x), (c // m, m), strict=True):
        np.testing.assert_array_equal(got, want)
