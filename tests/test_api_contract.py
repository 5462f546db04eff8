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
        )

    xi = np.abs(x3 * 4).astype(np.int32)
    close(dsl.compile(program)(x3, xi), program(x3, xi))
    with pytest.raises(dsl.TraceError, match="not known at trace time"):
        dsl.compile(lambda x: x if x.sum() > 0 else -x)(X)


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


# ---- More of NumPy --------------------------------------------------------------------------------


def test_more_of_numpy() -> None:
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
