"""Forward mode and Jacobians (``dsl.jvp``, ``dsl.jacfwd``, ``dsl.jacrev``) against JAX in float64, the
jvp of every differentiable primitive against finite differences (from the vjp rules' table), the work
the transposed program does, composition with ``grad`` and in-place programs, and the errors."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_vjp_rules import DIFFERENTIABLE, Case, cases_of, diff_operands, forward, program

import dsl
import dsl.numpy as dnp
from compiler.forward import jvp_function
from compiler.interpreter import interpret
from compiler.ir.verify import verify

jax.config.update("jax_enable_x64", True)
rng = np.random.default_rng(29)


def close(got, want, rtol=1e-10):
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, np.asarray(w), rtol=rtol, atol=rtol)


# ---- every primitive's jvp, derived from its vjp, against finite differences ------------------


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_jvp_of_every_primitive_matches_finite_differences(name: str) -> None:
    """The jvp by transposition along a random tangent: ``(f(x + eps t) - f(x - eps t)) / 2 eps``."""
    for i, case in enumerate(cases_of(name)):
        params, ops, out = forward(name, case)
        diff = diff_operands(case, params)
        func = program(params, ops, [out])
        joint = jvp_function(func, diff, [list(range(len(diff)))])
        verify(joint)
        args = list(case.operands)
        tangents = [rng.standard_normal(args[k].shape).astype(args[k].dtype) for k in diff]
        _, got = interpret(joint, args + tangents)
        want = _central_difference(func, args, dict(zip(diff, tangents)), case)
        scale = np.abs(want).max(initial=0.0) + 1.0
        assert np.abs(got - want).max(initial=0.0) <= case.rtol * scale * 10, f"{name} case {i}"


def _central_difference(func, args, tangents, case: Case) -> np.ndarray:
    def at(sign: float) -> np.ndarray:
        moved = [a + sign * case.eps * tangents[k] if k in tangents else a for k, a in enumerate(args)]
        return interpret(func, moved)[0].astype(np.float64)

    return (at(1.0) - at(-1.0)) / (2 * case.eps)


# ---- jvp against jax.jvp -----------------------------------------------------------------------


def test_jvp_of_an_elementwise_chain_and_reductions() -> None:
    def f(x, y):
        z = dnp.sin(x) * dnp.exp(y) / (1.0 + x * x)
        return z.sum(axis=0), dnp.log1p(z * z).max(axis=1), z.mean()

    def fj(x, y):
        z = jnp.sin(x) * jnp.exp(y) / (1.0 + x * x)
        return z.sum(axis=0), jnp.log1p(z * z).max(axis=1), z.mean()

    x, y, tx, ty = (rng.standard_normal((4, 5)) for _ in range(4))
    got = dsl.jvp(f, (x, y), (tx, ty))
    close(got, jax.jvp(fj, (x, y), (tx, ty)))
    assert isinstance(got, tuple) and isinstance(got[1], tuple) and len(got[1]) == 3


def _mlp(params, x):
    h = x
    for w, b in params:
        h = dnp.tanh(h @ w + b)
    return h


def _mlp_jax(params, x):
    h = x
    for w, b in params:
        h = jnp.tanh(h @ w + b)
    return h


def _mlp_params(sizes):
    return [
        (rng.standard_normal((m, n)) / np.sqrt(m), rng.standard_normal(n)) for m, n in zip(sizes, sizes[1:])
    ]


def test_jvp_of_an_mlp_along_parameters_and_input() -> None:
    params, x = _mlp_params([3, 8, 8, 2]), rng.standard_normal((5, 3))
    t_params = jax.tree_util.tree_map(lambda a: rng.standard_normal(a.shape), params)
    tx = rng.standard_normal(x.shape)
    close(dsl.jvp(_mlp, (params, x), (t_params, tx)), jax.jvp(_mlp_jax, (params, x), (t_params, tx)))


def test_jvp_of_softmax_and_layer_norm_in_float32() -> None:
    def f(x, g):
        mu = x.mean(axis=-1, keepdims=True)
        var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
        return dsl.nn.softmax((x - mu) / dnp.sqrt(var + 1e-5) * g)

    def fj(x, g):
        mu = x.mean(axis=-1, keepdims=True)
        var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
        return jax.nn.softmax((x - mu) / jnp.sqrt(var + 1e-5) * g)

    x, tx = rng.standard_normal((3, 6)), rng.standard_normal((3, 6))
    g, tg = rng.standard_normal(6), rng.standard_normal(6)
    close(dsl.jvp(f, (x, g), (tx, tg)), jax.jvp(fj, (x, g), (tx, tg)))
    f32 = [a.astype(np.float32) for a in (x, g, tx, tg)]
    out, tangent = dsl.jvp(f, tuple(f32[:2]), tuple(f32[2:]))
    assert out.dtype == np.float32 and tangent.dtype == np.float32
    close((out, tangent), jax.jvp(fj, (x, g), (tx, tg)), rtol=1e-4)


def test_jvp_takes_python_numbers_and_gives_integer_outputs_a_zero_tangent() -> None:
    def f(x, s, n):
        return x * s, (x > 0).astype(np.int32) + n

    x, tx = rng.standard_normal(4), rng.standard_normal(4)
    (y, k), (ty, tk) = dsl.jvp(f, (x, 2.0, 3), (tx, 0.5, 0))
    np.testing.assert_allclose(ty, tx * 2.0 + x * 0.5, rtol=1e-14)
    assert k.dtype == tk.dtype == np.int32 and not tk.any()


def test_jvp_of_views_and_in_place_updates_leaves_the_inputs_alone() -> None:
    def f(x, counter):
        y = x.copy()
        y[1:, :2] *= x[:-1, 1:]  # a write through a view, reading another view of x
        y.T[0] = dnp.exp(y.T[1])  # a transposed view
        counter += 1  # a non-differentiated argument, modified in place: written once
        return dnp.tanh(y).reshape(-1)

    def fj(x):
        y = x.at[1:, :2].multiply(x[:-1, 1:])
        y = y.at[:, 0].set(jnp.exp(y[:, 1]))
        return jnp.tanh(y).reshape(-1)

    x, tx = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    x0, tx0, counter = x.copy(), tx.copy(), np.zeros(2, np.int64)
    close(dsl.jvp(f, (x, counter), (tx, np.zeros(2, np.int64))), jax.jvp(fj, (x,), (tx,)))
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(tx, tx0)
    np.testing.assert_array_equal(counter, [1, 1])


def test_jvp_inside_a_compiled_function_and_of_a_compiled_function() -> None:
    @dsl.compile
    def g(x):
        return dnp.sin(x) * x

    @dsl.compile
    def h(x, t):
        y, ty = dsl.jvp(g, (x,), (t,))
        return y + ty

    x, t = rng.standard_normal(5), rng.standard_normal(5)
    y, ty = jax.jvp(lambda x: jnp.sin(x) * x, (x,), (t,))
    close(h(x, t), y + ty)
    close(dsl.jvp(g, (x,), (t,)), (y, ty))


# ---- composition with grad -------------------------------------------------------------------


def _loss(params, x):
    return (_mlp(params, x) ** 2).sum()


def _loss_jax(params, x):
    return (_mlp_jax(params, x) ** 2).sum()


def test_grad_of_jvp_and_jvp_of_grad() -> None:
    params, x = _mlp_params([3, 6, 1]), rng.standard_normal((4, 3))
    tx = rng.standard_normal(x.shape)

    def directional(x, params):  # reverse over forward
        return dsl.jvp(lambda x: _loss(params, x), (x,), (tx,))[1]

    def directional_jax(x, params):
        return jax.jvp(lambda x: _loss_jax(params, x), (x,), (tx,))[1]

    close(dsl.grad(directional, argnums=(0, 1))(x, params), jax.grad(directional_jax, (0, 1))(x, params))
    # forward over reverse: a Hessian-vector product
    hvp = dsl.jvp(dsl.grad(_loss, argnums=1), (params, x), (params, tx))
    close(hvp, jax.jvp(jax.grad(_loss_jax, argnums=1), (params, x), (params, tx)))


# ---- jacfwd and jacrev -----------------------------------------------------------------------


def test_jacobians_of_pytrees_have_jaxs_structure_and_shapes() -> None:
    def f(x, p):
        return {"a": dnp.sin(x) @ p["w"], "b": (x * p["s"]).sum()}

    def fj(x, p):
        return {"a": jnp.sin(x) @ p["w"], "b": (x * p["s"]).sum()}

    x, p = rng.standard_normal((2, 3)), {"w": rng.standard_normal((3, 4)), "s": rng.standard_normal(3)}
    for ours, theirs in ((dsl.jacfwd, jax.jacfwd), (dsl.jacrev, jax.jacrev)):
        for argnums in ((0, 1), 1):
            got = ours(f, argnums=argnums)(x, p)
            want = theirs(fj, argnums=argnums)(x, p)
            assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
            close(got, want)
    assert dsl.jacfwd(f)(x, p)["a"].shape == (2, 4, 2, 3)


def test_hessian_as_jacfwd_of_jacrev_and_jacrev_of_jacfwd() -> None:
    params = _mlp_params([3, 4, 1])

    def u(x):
        return _mlp(params, x).sum()

    def uj(x):
        return _mlp_jax(params, x).sum()

    x = rng.standard_normal(3)
    want = jax.hessian(uj)(x)
    close(dsl.jacfwd(dsl.jacrev(u))(x), want)
    close(dsl.jacrev(dsl.jacfwd(u))(x), want)


def test_jacobians_of_an_in_place_program_and_of_empty_arrays() -> None:
    def f(x):
        y = dnp.zeros((3,))
        y[0] = x[1] * x[2]
        y[1:] += dnp.exp(x[:2])
        return y

    def fj(x):
        y = jnp.zeros((3,)).at[0].set(x[1] * x[2])
        return y.at[1:].add(jnp.exp(x[:2]))

    x = rng.standard_normal(3)
    x0 = x.copy()
    close(dsl.jacfwd(f)(x), jax.jacfwd(fj)(x))
    close(dsl.jacrev(f)(x), jax.jacrev(fj)(x))
    np.testing.assert_array_equal(x, x0)
    assert dsl.jacfwd(lambda x: x * 2.0)(np.zeros((0, 2))).shape == (0, 2, 0, 2)


# ---- the work the transposed program does ------------------------------------------------------


def _ops(text: str, name: str | None = None) -> int:
    return text.count('"dsl.' if name is None else f'"dsl.{name}"')


def test_jvp_of_an_mlp_costs_about_twice_its_forward() -> None:
    """Transposing the reverse sweep leaves a forward-mode program: per layer one tangent matmul and
    the tangent's elementwise factor, nothing of the first sweep (no transposes, no reductions)."""
    params, x, tx = _mlp_params([32] * 7), rng.standard_normal((64, 32)), rng.standard_normal((64, 32))
    fwd = dsl.compile(lambda x, params: _mlp(params, x)).lower(x, params).ir("optimized")

    def along_x(x, tx, params):
        return dsl.jvp(lambda x: _mlp(params, x), (x,), (tx,))

    jvp = dsl.compile(along_x).lower(x, tx, params).ir("optimized")
    assert _ops(jvp, "matmul") == 2 * _ops(fwd, "matmul") == 12
    assert _ops(jvp, "transpose") == _ops(jvp, "reduce_sum") == 0
    assert _ops(jvp) <= 2.2 * _ops(fwd)

    def along_all(x, tx, params, t_params):
        return dsl.jvp(_mlp, (params, x), (t_params, tx))

    every = dsl.compile(along_all).lower(x, tx, params, params).ir("optimized")
    assert _ops(every, "matmul") == 3 * _ops(fwd, "matmul")  # h @ W, dh @ W, h @ dW
    assert _ops(every, "transpose") == _ops(every, "reduce_sum") == 0


# ---- errors ------------------------------------------------------------------------------------


def _line_of(needle: str) -> int:
    lines, start = inspect.getsourcelines(test_bad_tangents_raise_at_the_callers_line)
    return start + next(i for i, line in enumerate(lines) if needle in line)


def test_bad_tangents_raise_at_the_callers_line() -> None:
    x = rng.standard_normal(3)

    def f(x):
        return x * 2.0

    with pytest.raises(dsl.ShapeError, match=r"has shape \(3,\) but its tangent has shape \(4,\)") as err:
        dsl.jvp(f, (x,), (np.ones(4),))  # shape
    assert f"test_forward_mode.py:{_line_of('# shape')}" in str(err.value)
    with pytest.raises(dsl.TransformError, match="has dtype float64 but its tangent has dtype float32"):
        dsl.jvp(f, (x,), (np.ones(3, np.float32),))
    with pytest.raises(dsl.TransformError, match="same tree structure"):
        dsl.jvp(lambda a, b: a * b, (x, x), (x, (x,)))
    with pytest.raises(dsl.TransformError, match="must be a tuple or a list"):
        dsl.jvp(f, x, x)
    with pytest.raises(dsl.TransformError, match="only floating-point arguments"):
        dsl.jacfwd(lambda n: n * 2)(np.arange(3))
    with pytest.raises(dsl.InplaceError, match="can't be modified in place"):
        dsl.jvp(lambda a: a.add_(1.0), (x,), (x,))
