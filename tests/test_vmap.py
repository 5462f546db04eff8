"""``dsl.vmap``: every batching rule against the unbatched primitive, example by example (from the vjp
rules' table of cases), and the transform against ``jax.vmap`` in float64: in_axes and out_axes,
per-example MLPs, gradients and per-example Hessians (``vmap(jacfwd(jacrev(u)))``), in-place programs,
the per-example fallback of a primitive without a rule, and the errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_vjp_rules import DIFFERENTIABLE, cases_of, forward, program

import dsl
import dsl.numpy as dnp
from compiler.batching import batch_function
from compiler.interpreter import interpret
from compiler.ir.verify import verify

jax.config.update("jax_enable_x64", True)
rng = np.random.default_rng(31)
BATCH = 3


def close(got, want, rtol=1e-10):
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, np.asarray(w), rtol=rtol, atol=rtol)


# ---- every rule, example by example -----------------------------------------------------------


def _examples(a: np.ndarray) -> np.ndarray:
    """``BATCH`` examples like ``a``: ``a`` and perturbations of it (same dtype, same domain)."""
    if a.dtype.kind != "f":
        return np.stack([a] * BATCH)
    return np.stack([a * (1.0 + 0.1 * k) for k in range(BATCH)]).astype(a.dtype)


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_batching_rule_of_every_primitive_matches_it_per_example(name: str) -> None:
    """Each operand batched alone, and all of them: the batched op's example ``b`` is the op on the
    operands' example ``b`` (the shared ones as they are)."""
    for i, case in enumerate(cases_of(name)):
        params, ops, out = forward(name, case)
        func = program(params, ops, [out])
        n = len(params)
        for batched in [[k == j for k in range(n)] for j in range(n)] + [[True] * n]:
            bfunc, flags = batch_function(func, batched, BATCH)
            verify(bfunc)
            assert flags == [True]
            args = [_examples(a) if b else a for a, b in zip(case.operands, batched)]
            (got,) = interpret(bfunc, args)
            for e in range(BATCH):
                (want,) = interpret(func, [a[e] if b else a for a, b in zip(args, batched)])
                np.testing.assert_array_equal(got[e], want, err_msg=f"{name} case {i} batched {batched}")


# ---- against jax.vmap ---------------------------------------------------------------------------


def test_in_axes_and_out_axes_as_in_jax() -> None:
    def f(x, y):
        z = dnp.exp(x)[:, None] * y
        return z.sum(axis=0), x[::-1], dnp.maximum(x, 0.0).max()

    def fj(x, y):
        z = jnp.exp(x)[:, None] * y
        return z.sum(axis=0), x[::-1], jnp.maximum(x, 0.0).max()

    x, y = rng.standard_normal((4, 5)), rng.standard_normal((4, 2))
    close(dsl.vmap(f, in_axes=(1, None))(x, y), jax.vmap(fj, in_axes=(1, None))(x, y))
    ys = rng.standard_normal((5, 4, 2))
    close(
        dsl.vmap(f, in_axes=(1, 0), out_axes=(1, 0, 0))(x, ys),
        jax.vmap(fj, in_axes=(1, 0), out_axes=(1, 0, 0))(x, ys),
    )
    # a pytree argument with a per-leaf spec; a result that does not depend on the mapped axis
    p = {"a": rng.standard_normal((3, 2)), "b": rng.standard_normal(2)}

    def g(p, s):
        return p["a"] @ p["b"] * s, p["b"].sum()

    def gj(p, s):
        return p["a"] @ p["b"] * s, p["b"].sum()

    axes = ({"a": 0, "b": None}, None)
    close(dsl.vmap(g, in_axes=axes)(p, 2.0), jax.vmap(gj, in_axes=axes)(p, 2.0))


def _mlp(params, x):
    h = x
    for w, b in params:
        h = dnp.tanh(h @ w + b)
    return h.sum()


def _mlp_jax(params, x):
    h = x
    for w, b in params:
        h = jnp.tanh(h @ w + b)
    return h.sum()


def _params(sizes):
    return [
        (rng.standard_normal((m, n)) / np.sqrt(m), rng.standard_normal(n)) for m, n in zip(sizes, sizes[1:])
    ]


def test_per_example_values_gradients_and_hessians() -> None:
    params, xs = _params([3, 4, 1]), rng.standard_normal((5, 3))

    def u(x):
        return _mlp(params, x)

    def uj(x):
        return _mlp_jax(params, x)

    close(dsl.vmap(u)(xs), jax.vmap(uj)(xs))
    close(dsl.vmap(dsl.grad(u))(xs), jax.vmap(jax.grad(uj))(xs))
    hessians = dsl.vmap(dsl.jacfwd(dsl.jacrev(u)))(xs)
    assert hessians.shape == (5, 3, 3)
    close(hessians, jax.vmap(jax.jacfwd(jax.jacrev(uj)))(xs))


def test_batched_matmul_keeps_one_product_with_the_shared_weight() -> None:
    """A batch of rows times a shared weight is one matmul over all the rows, not one per example."""
    params, xs = _params([3, 8, 1]), rng.standard_normal((100, 3))
    text = dsl.vmap(lambda x: _mlp(params, x)).lower(xs).ir("optimized")
    assert text.count('"dsl.matmul"') == 2
    assert "tensor<100x3xf64>, tensor<3x8xf64>" in text


def test_grad_of_vmap_and_softmax_rows() -> None:
    params, xs = _params([3, 4, 1]), rng.standard_normal((6, 3))

    def total(params, xs):
        return dsl.vmap(lambda x: _mlp(params, x))(xs).sum()

    def total_jax(params, xs):
        return jax.vmap(lambda x: _mlp_jax(params, x))(xs).sum()

    close(dsl.grad(total)(params, xs), jax.grad(total_jax)(params, xs))
    logits = rng.standard_normal((4, 7))
    close(dsl.vmap(dsl.nn.softmax)(logits), jax.vmap(jax.nn.softmax)(logits))


def test_in_place_programs_under_vmap() -> None:
    def f(x, counts):
        y = x.copy()
        y[1:] += x[:-1]  # a write through a view
        counts += 1  # a mapped argument modified in place: the caller's array is updated
        return dnp.tanh(y)

    x, counts = rng.standard_normal((4, 3)), np.zeros(4, np.int64)
    x0 = x.copy()
    want = np.tanh(np.concatenate([x[:, :1], x[:, 1:] + x[:, :-1]], axis=1))
    close(dsl.vmap(f)(x, counts), want)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(counts, np.ones(4))


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("axis", [0, -1])
def test_a_members_reshape_is_a_view_where_numpys_is(order: str, axis: int) -> None:
    """Each member is traced with its own strides (the batch's without the mapped axis): a member
    of a Fortran-ordered batch is not C-ordered, so its reshape is a copy and the write through it
    leaves the caller's array alone, as NumPy on each member does (found by the fuzzer's vmap tier:
    the members were traced C-ordered, and the write went through)."""

    def f(v):
        flat = v.reshape((1, 16))
        flat *= 0.5
        return flat.sum(), v * 1.0

    batch = np.random.default_rng(0).uniform(-1, 1, (3, 4, 4))
    batch = np.moveaxis(batch, 0, axis).copy(order=order)
    want_batch = batch.copy(order="K")
    members = np.moveaxis(want_batch, axis, 0)
    want = [f(members[b]) for b in range(3)]  # NumPy writes through each member's reshape, or not
    got = dsl.vmap(f, in_axes=axis)(batch)
    np.testing.assert_allclose(got[0], [w[0] for w in want], rtol=1e-13)
    np.testing.assert_allclose(got[1], np.stack([w[1] for w in want]), rtol=1e-13)
    np.testing.assert_array_equal(batch, want_batch)
    assert np.array_equal(
        batch, np.moveaxis(np.random.default_rng(0).uniform(-1, 1, (3, 4, 4)), 0, axis)
    ) == (order == "F")


def test_a_primitive_without_a_rule_runs_once_per_example() -> None:
    keys = np.stack([dsl.random.key(k) for k in range(3)])

    def draw(key):
        return dsl.random.uniform(key, (2,), dtype=dsl.float64)

    got = dsl.vmap(draw)(keys)
    want = np.stack([dsl.compile(draw)(k) for k in keys])
    np.testing.assert_array_equal(got, want)


def test_vmap_errors() -> None:
    x = rng.standard_normal((3, 2))
    with pytest.raises(dsl.ShapeError, match="inconsistent sizes"):
        dsl.vmap(lambda a, b: a + b)(x, rng.standard_normal((4, 2)))
    with pytest.raises(dsl.TransformError, match="at least one mapped argument"):
        dsl.vmap(lambda a: a * 2.0, in_axes=None)(x)
    with pytest.raises(dsl.TransformError, match="out_axes is None"):
        dsl.vmap(lambda a: a * 2.0, out_axes=None)(x)
    with pytest.raises(dsl.TransformError, match="in_axes has 1 entries"):
        dsl.vmap(lambda a, b: a + b, in_axes=(0,))(x, x)
    with pytest.raises(dsl.ShapeError, match="out_axes 1 is out of range for a result of shape"):
        dsl.vmap(lambda a: a.sum(), out_axes=1)(x)  # (JAX: ValueError; it was put at axis 0)
    assert dsl.vmap(lambda a: a * 2.0, out_axes=-1)(x).shape == (2, 3)


def test_in_axes_counts_the_arguments_passed_by_position_as_jax() -> None:
    """``in_axes`` has one entry per argument the caller passed by position: a parameter left at its
    default is not one (``in_axes=(0,)`` of ``f(x, scale=1)`` raised "called with 2 positional
    arguments"; found by the fuzzer), and one passed by name is mapped over axis 0, as a keyword."""
    x = rng.standard_normal((3, 2))

    def g(lib, x, y=1.0, z=2.0):
        return x * y + z

    calls = [
        lambda V, lib: V(lambda x, scale=2, post=None: x * scale, in_axes=(0,))(x),
        lambda V, lib: V(lambda x, y=1.0, z=2.0: g(lib, x, y, z), in_axes=(0,))(x, z=x[:, 0]),
        lambda V, lib: V(lambda x, y=1.0, z=2.0: g(lib, x, y, z), in_axes=(0, None))(x, 3.0),
        lambda V, lib: V(lambda x, y=1.0, z=2.0: g(lib, x, y, z), in_axes=(1,))(x, y=x[0]),
        lambda V, lib: V(
            jax.grad(lambda x, s=2.0: (x * s).sum())
            if V is jax.vmap
            else dsl.grad(lambda x, s=2.0: (x * s).sum()),
            in_axes=(0,),
        )(x),
    ]
    for call in calls:
        close(call(dsl.vmap, dnp), call(jax.vmap, jnp))


# ---- jacfwd / jacrev over a batched basis ------------------------------------------------------


def _jac_program(lib, x, w):
    """Two arguments, two outputs: the basis offsets of each argument and output."""
    h = lib.tanh(x @ w)
    return h * x.sum(), (h * h).sum(axis=0)


def test_jacobians_batch_their_basis_against_jax() -> None:
    """Several arguments and outputs (each block at its basis offset), float64; and a basis larger
    than ``VMAP_UNROLL_MAX`` under ``vmap``, batched too."""
    x, w = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    for ours, theirs in ((dsl.jacfwd, jax.jacfwd), (dsl.jacrev, jax.jacrev)):
        got = ours(lambda x, w: _jac_program(dnp, x, w), argnums=(0, 1))(x, w)
        close(got, theirs(lambda x, w: _jac_program(jnp, x, w), argnums=(0, 1))(x, w))
    xs, big = rng.standard_normal((2, 17)), rng.standard_normal((17, 5)) * 0.3
    got = dsl.vmap(dsl.jacfwd(dsl.jacrev(lambda x: dnp.tanh(x @ big).sum())))(xs)
    close(got, jax.vmap(jax.jacfwd(jax.jacrev(lambda x: jnp.tanh(x @ big).sum())))(xs))


def test_jacobian_programs_do_not_grow_with_the_basis() -> None:
    """A Hessian traces to the same number of ops for 4 inputs as for 40 (one jvp and one vjp
    batched over the basis; unrolled, it grew with the inputs)."""
    from dsl.compile import trace_function

    def size(n: int) -> int:
        w = np.ones((n, 3))
        hessian = dsl.jacfwd(dsl.jacrev(lambda x: dnp.tanh(x @ w).sum()))
        return len(list(trace_function(hessian, (np.ones(n),)).func.walk()))

    assert size(40) == size(4)


def _cumsum_loss(lib, a, axis=0):
    return (lib.cumsum(a, axis=axis) ** 2).sum()


def test_nested_transforms_keep_defaults_and_unmapped_numbers_python_values() -> None:
    """A default the caller did not pass stays a Python value under transforms of transforms (it was
    traced as an argument: ``axis`` became an array); a Python number with ``in_axes`` None reaches
    the function as itself (``jax.vmap``'s), against JAX."""
    x = rng.standard_normal((2, 3))

    def k(a, axis=0):
        return _cumsum_loss(dnp, a, axis)

    def kj(a, axis=0):
        return _cumsum_loss(jnp, a, axis)

    def scaled(a, scale=2.0, f=dnp.tanh):
        return f(a) * scale

    close = np.testing.assert_allclose
    close(dsl.vmap(dsl.grad(k))(x), jax.vmap(jax.grad(kj))(x), rtol=1e-12)
    close(dsl.jacfwd(dsl.grad(k))(x[0]), jax.jacfwd(jax.grad(kj))(x[0]), rtol=1e-12)
    close(dsl.jacrev(dsl.grad(k))(x[0]), jax.jacrev(jax.grad(kj))(x[0]), rtol=1e-12)
    close(dsl.vmap(dsl.jacrev(k))(x), jax.vmap(jax.jacrev(kj))(x), rtol=1e-12)
    close(dsl.vmap(dsl.vmap(scaled))(x), 2.0 * np.tanh(x), rtol=1e-15)
    close(dsl.vmap(dsl.grad(lambda a: scaled(a).sum()))(x), 2.0 / np.cosh(x) ** 2, rtol=1e-12)
    want = jax.vmap(jax.grad(kj), in_axes=(0, None))(x, 0)
    close(dsl.vmap(dsl.grad(k), in_axes=(0, None))(x, 0), want, rtol=1e-12)
    close(dsl.vmap(k, in_axes=(0, None))(x, -1), jax.vmap(kj, in_axes=(0, None))(x, -1), rtol=1e-12)


def test_a_keyword_call_and_a_positional_call_are_two_signatures() -> None:
    """vmap maps an argument passed by keyword over axis 0 (as JAX) and a positional one by
    ``in_axes``: the two calls trace differently, so the number of arguments passed by position is
    part of the signature (found 2026-11-27: ``v(X, b=Y)`` then ``v(X, Y)`` returned the keyword
    call's trace for both, in either order)."""
    X = np.arange(9.0).reshape(3, 3)
    Y = 10 * X
    for keyword_first in (True, False):
        v = dsl.vmap(lambda a, b: a + b, in_axes=1)
        for keyword in (keyword_first, not keyword_first):
            got = v(X, b=Y) if keyword else v(X, Y)
            np.testing.assert_array_equal(got, X.T + Y if keyword else (X + Y).T)


def test_axes_given_as_a_dict_follow_an_ordered_dicts_own_order() -> None:
    """An ``OrderedDict`` argument's leaves come in its insertion order: ``in_axes`` and ``out_axes``
    given as dicts are matched to them by key in that order (they were walked sorted, so each leaf
    took another key's axis: found 2026-11-27 in review, after OrderedDicts kept their order)."""
    import collections

    a, b = np.arange(3.0), np.arange(12.0).reshape(4, 3)
    ordered = collections.OrderedDict([("b", b), ("a", a)])
    got = dsl.vmap(lambda d: d["b"] * 10 + d["a"].sum(), in_axes=({"a": None, "b": 0},))(ordered)
    np.testing.assert_array_equal(got, b * 10 + a.sum())
    x = np.arange(6.0).reshape(2, 3)
    pair = lambda v: collections.OrderedDict([("b", v * 2), ("a", v.sum())])  # noqa: E731
    out = dsl.vmap(pair, out_axes={"a": 0, "b": 1})(x)
    np.testing.assert_array_equal(out["b"], (x * 2).T)
    np.testing.assert_array_equal(out["a"], x.sum(axis=1))
