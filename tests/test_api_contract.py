"""../shared/api.md checked section by section, as a user who read only that page writes programs,
against NumPy 2 and JAX (the oracles the contract names). One test per section; each compiles few
programs (several checks per program) to stay fast."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dsl
import dsl.numpy as dnp

RNG = np.random.default_rng(27)
X = RNG.standard_normal((3, 4)).astype(np.float32)
W = RNG.standard_normal((4, 2)).astype(np.float32)


def close(got, want, tol: float = 1e-5) -> None:
    """``got`` equals ``want`` leaf by leaf: same structure, shape and dtype, values to ``tol``."""
    got_leaves, got_tree = jax.tree.flatten(got)
    want_leaves, want_tree = jax.tree.flatten(want)
    assert got_tree == want_tree
    for g, w in zip(got_leaves, want_leaves, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


# ---- Compiling ------------------------------------------------------------------------------------


def test_compiling() -> None:
    traces = []

    @dsl.compile(target="cpu", static_argnames=("mode",))
    def f(p, n, mode="mul"):
        traces.append(mode)
        y = p["x"] * n if mode == "mul" else p["x"] + n
        return {"y": y, "pair": [y.sum(), (3,)]}

    p = {"x": X}
    got = f(p, 2, mode="mul")
    close(got, {"y": X * 2, "pair": [(X * 2).sum(), (np.asarray(3),)]})
    assert not np.shares_memory(got["y"], X) and np.array_equal(p["x"], X)  # no alias, input kept
    f(p, 3, mode="mul")
    close(f(p, 3, mode="add")["y"], X + 3)
    assert traces == ["mul", "add"]  # once per signature; the static value is in the key
    with pytest.raises(dsl.DeviceError, match="target='cuda' needs a usable NVIDIA GPU"):
        dsl.compile(lambda x: x, target="cuda")(X)


# ---- Inspecting -----------------------------------------------------------------------------------


def test_inspecting() -> None:
    lo = dsl.compile(lambda x, w: dnp.tanh(x @ w).sum()).lower(X, W)
    stages = lo.stages()
    contract = ["traced", "functional", "grad", "optimized", "bufferized"]
    assert [s for s in stages if s in contract] == contract
    assert all('"dsl.' in lo.ir(s) for s in contract)
    plan = lo.memory_plan()
    assert plan.peak_bytes >= 0 and plan.naive_bytes > 0 and "peak" in str(plan)
    assert all(hasattr(plan.buffers[0], f) for f in ("name", "bytes", "offset", "live", "reused_from"))
    assert "def " in lo.source() and isinstance(lo.explain_inplace(), str)
    # one 24-byte buffer, planned 64-byte aligned: no saving to claim
    assert (plan.peak_bytes, plan.naive_bytes) == (64, 48) and "x less" not in str(plan)


# ---- Differentiating --------------------------------------------------------------------------------


def test_differentiating() -> None:
    def dsl_f(w, x):
        return {"y": dnp.tanh(x @ w), "s": (x * x).sum()}

    def jax_f(w, x):
        return {"y": jnp.tanh(x @ w), "s": (x * x).sum()}

    # vjp of a function returning a pytree: one cotangent per output leaf, as JAX
    ct = {"y": np.ones((3, 2), np.float32), "s": np.float32(2.0)}
    out, vjp_fn = dsl.vjp(dsl_f, W, X)
    want_out, jax_vjp_fn = jax.vjp(jax_f, W, X)
    close(out, want_out)
    close(vjp_fn(ct), jax_vjp_fn(ct))
    # a result returned twice gets the sum of its cotangents
    out, vjp_fn = dsl.vjp(lambda x: (x * 2, x * 2), X)
    close(vjp_fn((X, X)), (4 * X,))

    # compile(grad(f), ...) takes compile's options, called at the top or inside another program
    def loss(x, mode):
        return (x * x).sum() if mode == "square" else x.sum()

    g = dsl.compile(dsl.grad(loss), static_argnums=(1,))
    close(g(X, "square"), 2 * X)
    close(dsl.compile(lambda x: g(x, "square") + g(x, "sum"))(X), 2 * X + 1)

    # hessian with a tuple of argnums: the nested blocks of JAX's
    def g(a, b):
        return (a * a * b).sum() + (dnp.sin(a) * b[0]).sum()

    def jax_g(a, b):
        return (a * a * b).sum() + (jnp.sin(a) * b[0]).sum()

    a, b = X[0, :2], X[1, :2]
    close(dsl.hessian(g, argnums=(0, 1))(a, b), jax.hessian(jax_g, argnums=(0, 1))(a, b))
    close(dsl.hessian(g, argnums=(1,))(a, b), jax.hessian(jax_g, argnums=(1,))(a, b))


# ---- Arrays inside a compiled function ------------------------------------------------------------


def test_arrays_inside_a_compiled_function() -> None:
    x3 = X.reshape(2, 3, 2)

    def program(x, xi):
        return (
            x.mT,
            x[::-1, None, ..., 1],
            x.reshape(-1, 2).transpose(1, 0),
            x.sum(axis=-1, keepdims=True),
            x.max(axis=(0, 2)),
            (xi / 2, xi // 2, xi * 1.5, xi + True, x**2, 2**xi),
            (x.astype(dnp.int32), x.astype("float64"), x.dtype == dnp.float32),
        )

    def casts(x, xi):  # the dtype names called, as jnp.float32(x)
        return dnp.float32(xi), dnp.int64(x), dnp.bool_(xi), x * dnp.float64(2)

    xi = np.abs(x3 * 4).astype(np.int32)
    close(dsl.compile(program)(x3, xi), program(x3, xi))
    close(
        dsl.compile(casts)(x3, xi), (xi.astype(np.float32), x3.astype(np.int64), xi != 0, x3 * np.float64(2))
    )
    assert np.dtype(dnp.float32) == np.float32 and dnp.float32 == np.float32 and dnp.int64(3) == np.int64(3)
    with pytest.raises(dsl.TraceError, match="not known at trace time"):
        dsl.compile(lambda x: x if x.sum() > 0 else -x)(X)


# ---- In-place -------------------------------------------------------------------------------------


def test_inplace() -> None:
    def step(w, g, lr):
        same = w.scale_(1.0, bias=0.0)
        w.sub_(g, alpha=lr).clip_(min=-1.0)
        v = w.T  # a view: writing through it changes w
        v[0] += 1.0
        return same is w

    w = X.copy()
    want = np.clip(X - 0.5 * X[::-1], -1.0, None)
    want.T[0] += 1.0
    assert dsl.compile(step)(w, X[::-1].copy(), 0.5)  # a Python bool result is a 0-d array
    close(w, want)  # a modified argument is updated in the caller's array
    with pytest.raises(dsl.DSLError):
        dsl.compile(step)(w, w, 0.5)  # one array as two arguments, one modified
    with pytest.raises(
        dsl.InplaceError, match="'weights' is being differentiated and can't be modified in place"
    ):
        dsl.grad(lambda weights: weights.mul_(2.0).sum())(X)


# ---- Control flow ---------------------------------------------------------------------------------


def test_control_flow() -> None:
    def program(x, n):
        a = dsl.fori_loop(0, n, lambda i, c: c * 0.5 + i.astype(x.dtype), x)
        b = dsl.scan(lambda c, r: (c + r, c * r), x[0], x, reverse=True)
        c = dsl.while_loop(lambda c: c.sum() < 50.0, lambda c: c * 2.0, dnp.abs(x) + 1.0)
        d = dsl.cond(x.sum() > 0, lambda u: u * 2.0, lambda u: -u, x)
        return a, b, c, d, x[n : n + 2]

    def jax_program(x, n):
        a = jax.lax.fori_loop(0, n, lambda i, c: c * 0.5 + i.astype(x.dtype), x)
        b = jax.lax.scan(lambda c, r: (c + r, c * r), x[0], x, reverse=True)
        c = jax.lax.while_loop(lambda c: c.sum() < 50.0, lambda c: c * 2.0, jnp.abs(x) + 1.0)
        d = jax.lax.cond(x.sum() > 0, lambda u: u * 2.0, lambda u: -u, x)
        return a, b, c, d, jax.lax.dynamic_slice_in_dim(x, n, 2)

    n = np.int32(2)
    close(dsl.compile(program)(X, n), jax.jit(jax_program)(X, n))
    with pytest.raises(dsl.TransformError):
        dsl.grad(lambda x: dsl.while_loop(lambda c: c.sum() < 50.0, lambda c: c * 2.0, x).sum())(X)


# ---- More transforms ------------------------------------------------------------------------------


def test_more_transforms() -> None:
    def u(p):
        return (dnp.sin(p) ** 2).sum() * p[0]

    def jax_u(p):
        return (jnp.sin(p) ** 2).sum() * p[0]

    x = X[:2, :3]
    close(dsl.vmap(dsl.jacfwd(dsl.jacrev(u)))(x), jax.vmap(jax.jacfwd(jax.jacrev(jax_u)))(x), tol=1e-4)
    close(
        dsl.vmap(lambda a, b: a @ b, in_axes=(1, None), out_axes=1)(X, W[:3]),
        jax.vmap(lambda a, b: a @ b, in_axes=(1, None), out_axes=1)(X, W[:3]),
    )
    close(dsl.jvp(u, (x[0],), (x[1],)), jax.jvp(jax_u, (x[0],), (x[1],)))


# ---- Indexing, gather and scatter -----------------------------------------------------------------


def test_indexing_gather_scatter() -> None:
    x = jnp.asarray(X)

    @dsl.compile
    def at_updates(x):
        # JAX's .at with basic indices only (slices, steps, an ellipsis): a functional update too
        return (
            x.at[1:3].set(7.0),
            x.at[:, ::2].add(1.0),
            x.at[..., 1].mul(3.0),
            x.at[::-1, 1:].max(0.0),
            x.at[1:].min(dnp.zeros(4, dnp.float32)),
            x.at[2:2].set(5.0),  # an empty selection: unchanged
        )

    close(
        at_updates(X),
        (
            x.at[1:3].set(7.0),
            x.at[:, ::2].add(1.0),
            x.at[..., 1].mul(3.0),
            x.at[::-1, 1:].max(0.0),
            x.at[1:].min(jnp.zeros(4)),
            x.at[2:2].set(5.0),
        ),
    )
    close(
        dsl.grad(lambda x: (x.at[1:, ::2].set(x[0, ::2] * 3.0) ** 2).sum())(X),
        jax.grad(lambda x: (x.at[1:, ::2].set(x[0, ::2] * 3.0) ** 2).sum())(x),
    )


# ---- Random numbers -------------------------------------------------------------------------------


def test_random_numbers() -> None:
    def draws(key):
        k1, k2 = dsl.random.split(key)
        return (
            dsl.random.uniform(k1, (4000,), dtype=dsl.float64, minval=-1.0, maxval=3.0),
            dsl.random.normal(k2, (4000,)),
            dsl.random.bernoulli(k1, 0.25, (4000,)),
            dsl.nn.dropout(k2, dnp.ones(4000, dnp.float32), 0.5),
            dsl.random.split(key, 3),
        )

    key = dsl.random.key(0)
    u, z, b, d, keys = dsl.compile(draws)(key)
    assert u.dtype == np.float64 and -1.0 <= u.min() and u.max() < 3.0 and abs(u.mean() - 1.0) < 0.1
    assert z.dtype == np.float32 and abs(z.mean()) < 0.1 and abs(z.std() - 1.0) < 0.1
    assert b.dtype == np.bool_ and abs(b.mean() - 0.25) < 0.05
    assert set(np.unique(d)) == {0.0, 2.0} and keys.shape[0] == 3
    again = dsl.compile(lambda key: dsl.random.normal(dsl.random.split(key)[1], (4000,)))(key)
    np.testing.assert_array_equal(again, z)  # the same key, the same bits, whatever else is drawn


# ---- Errors ---------------------------------------------------------------------------------------


def test_errors() -> None:
    for name in ("TraceError", "ShapeError", "InplaceError", "DeviceError", "IRParseError"):
        assert issubclass(getattr(dsl, name), dsl.DSLError)
    assert issubclass(dsl.ShapeError, ValueError)
    with pytest.raises(dsl.ShapeError, match=rf"{__file__}:\d+: operands could not be broadcast"):
        dsl.compile(lambda x: x + x[:2])(X)


# ---- Command line ---------------------------------------------------------------------------------


def test_command_line(tmp_path) -> None:
    from compiler import cli

    src = tmp_path / "prog.py"
    src.write_text("import dsl.numpy as dnp\n\ndef f(x, w):\n    return dnp.tanh(x @ w).sum()\n")
    spec = [f"{src}:f", "--arg", "f32[8,4]", "--arg", "f32[4]"]
    assert cli.main(["compile", *spec, "--grad", "1", "--emit", "bufferized", "-o", str(tmp_path / "o")]) == 0
    assert (
        cli.main(["plan", *spec, "-o", str(tmp_path / "p")]) == 0 and "peak" in (tmp_path / "p").read_text()
    )
    assert cli.main(["compile", *spec[:3]]) == 1  # a user error: one argument too few
    with pytest.raises(SystemExit) as usage:
        cli.main(["compile", *spec, "--emit", "nonsense"])
    assert usage.value.code == 2


# ---- More of NumPy --------------------------------------------------------------------------------


def test_more_of_numpy() -> None:
    xi = (X * 10).astype(np.int32)

    def breadth(np_, x, xi):
        return (
            np_.einsum("ij,kj->ik", x, x),
            np_.argmax(x, axis=-1),
            np_.argmin(x),
            np_.cumsum(xi, axis=0),
            np_.cumprod(x, axis=1),
            np_.var(x, axis=0, ddof=1),
            np_.std(x),
            np_.clip(x, -0.5, None),
            np_.pad(x, ((1, 0), (0, 2)), mode="edge"),
            np_.split(x, [1, 3], axis=1),
            np_.logaddexp(x, -x),
            np_.linalg.norm(x, axis=-1),
            np_.take(x, np.array([2, -1]), axis=1),
            np_.take_along_axis(x, np.argsort(X, axis=1), axis=1),
            (np_.bitwise_and(xi, 6), np_.bitwise_or(xi, 1), np_.bitwise_xor(xi, xi // 3), np_.invert(xi)),
            (np_.left_shift(xi, 2), np_.right_shift(xi, 1)),
            (np_.floor(x), np_.ceil(x), np_.round(x, 1), np_.floor_divide(xi, -3), np_.remainder(xi, -3)),
            (np_.mod(x, 0.3), np_.fmod(xi, -3), np_.isnan(x), np_.isinf(x), np_.isfinite(x)),
        )

    close(dsl.compile(lambda x, xi: breadth(dnp, x, xi))(X, xi), breadth(np, X, xi))

    def methods(x):
        y = x.copy()
        y.abs_().add_(1.0).rsqrt_().reciprocal_().multiply_(2.0).subtract_(x, alpha=0.5).divide_(3.0)
        z = x.copy().floor_().clamp_(-1.0, 1.0)
        v = x.copy().ceil_().round_().clip_(max=0.5)
        r = x.copy().reshape_(2, 6).unsqueeze_(0).squeeze_(0).flatten_()
        return y, z, v, r, x.exp(), x.scale(2.0, bias=1.0), x.unsqueeze(0)

    def numpy_methods(x):
        y = (1 / (1 / np.sqrt(np.abs(x) + 1.0)) * 2.0 - 0.5 * x) / 3.0
        z, v = np.clip(np.floor(x), -1.0, 1.0), np.minimum(np.round(np.ceil(x)), 0.5)
        return y, z, v, x.reshape(-1), np.exp(x), x * 2.0 + 1.0, x[None]

    close(dsl.compile(methods)(X), numpy_methods(X))

    @dsl.compile
    def reductions(x):
        return dnp.sum(x, axis=0, dtype=dnp.float64), dnp.mean(x, dtype=np.float64), x.sum(dtype=dnp.float64)

    close(
        reductions(X),
        (np.sum(X, axis=0, dtype=np.float64), np.mean(X, dtype=np.float64), X.sum(dtype=np.float64)),
    )
    xi = (X * 10).astype(np.int32)
    close(dsl.compile(lambda x: dnp.sum(x, dtype=dnp.float32))(xi), np.sum(xi, dtype=np.float32))

    def building(x):
        y = dnp.array(x)  # a copy: writing to it leaves x alone
        y[0] = 9.0
        return x, y, dnp.asarray([[x[0, 0], 1.0], [2.0, x[1, 1]]]), dnp.concatenate([x, x[0]], axis=None)

    y = X.copy()
    y[0] = 9.0
    close(
        dsl.compile(building)(X),
        (X, y, jnp.asarray([[X[0, 0], 1.0], [2.0, X[1, 1]]]), np.concatenate([X, X[0]], axis=None)),
    )


if __name__ == "__main__":
    pytest.main([__file__, "-q"])


def test_reshape_in_fortran_order() -> None:
    """``x.reshape(shape, order="F")`` and ``dnp.reshape(..., order="F")`` as NumPy: values, a
    write through the result (NumPy copies a C array here: the argument is unchanged), gradients;
    ``order="A"`` (the memory layout's order) is a ShapeError naming the call."""
    x = np.arange(24.0).reshape(2, 3, 4)

    def f(m, xp=dnp):
        v = m.reshape((4, 6), order="F")
        w = xp.reshape(m, (-1, 2), order="F")
        v[0] = -1.0
        return v, w * 2.0, m.reshape(6, 4, order="F"), m

    got = dsl.compile(f)(x.copy())
    want = f(x.copy(), np)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    weights = np.arange(24.0).reshape(4, 6)
    grad = dsl.grad(lambda m: (m.reshape((4, 6), order="F") * weights).sum())(x)
    np.testing.assert_array_equal(grad, weights.reshape((2, 3, 4), order="F"))
    with pytest.raises(dsl.ShapeError, match=r"test_api_contract.py:\d+: reshape: order must be 'C' or 'F'"):
        dsl.compile(lambda m: m.reshape(24, order="A"))(x)


def test_at_on_a_zero_d_array() -> None:
    """``s.at[()]`` (and ``s.at[...]``) of a 0-d array updates its one element, as JAX's."""

    def f(m):
        s = m.sum()
        return (s.at[()].set(3), s.at[()].add(2.0), s.at[...].mul(2.0), s.at[()].max(100.0),
                s.at[()].min(0.5), s.at[()].get())  # fmt: skip

    s = jnp.sum(jnp.asarray(X))
    want = (s.at[()].set(3), s.at[()].add(2.0), s.at[...].multiply(2.0), s.at[()].max(100.0),
            s.at[()].min(0.5), s.at[()].get())  # fmt: skip
    close(dsl.compile(f)(X), want)


def test_dot_with_a_python_number_has_numpys_dtype() -> None:
    """``np.dot`` converts a Python number with ``asarray`` (float64, int64), unlike ``*``."""
    ints = np.arange(3, dtype=np.int32)
    got = dsl.compile(lambda a, i: (dnp.dot(a, 2.0), dnp.dot(2, i), a.dot(0.5), a * 2.0))(X, ints)
    for g, w in zip(got, (np.dot(X, 2.0), np.dot(2, ints), X.dot(0.5), X * 2.0), strict=True):
        assert np.asarray(g).dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-6)
