"""Native loops (issue 28) on ``target="cuda"`` in the simulator: the ten loop programs of
``tests/test_native_loops.py`` (the CUDA host driver's ``for``, ``scan``, ``while`` and ``if`` around
the bodies' launches) against ``jax.lax`` in float64 and against the CPU target, with in-place on and
off and under the sanitizer; gradients through scan, fori_loop and cond against the CPU; trip counts
and a while's limit passed as traced integers; loops nested in loops. Tiny shapes: the simulator is
slow."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import test_native_loops as programs

import dsl
import dsl.numpy as dnp
from compiler.compilation import option_defaults

jax.config.update("jax_enable_x64", True)

PROGRAMS = programs.PROGRAMS
X, W, XS = programs.X, programs.W, programs.XS
MODES = {"native": {}, "no-inplace": {"inplace": False}, "sanitized": {"sanitize": True}}


def close(got, want, rtol: float = 1e-11) -> None:
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves, strict=True):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=1e-12)


def on(target: str, fn, args, **switches):
    with option_defaults(**switches):
        return dsl.compile(fn, target=target)(*args)


_CPU: dict[str, object] = {}


def on_cpu(key: str, fn, args):
    """The CPU target's result, computed once per ``key`` (the same for every CUDA mode)."""
    if key not in _CPU:
        _CPU[key] = on("cpu", fn, args)
    return _CPU[key]


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_loop_values_on_cuda(name: str, mode: str) -> None:
    fn, args = PROGRAMS[name]
    got = on("cuda", lambda *a: fn(dsl, *a), args, **MODES[mode])
    close(got, fn(jax.lax, *args))
    close(got, on_cpu(name, lambda *a: fn(dsl, *a), args), rtol=1e-13)


def _loss(name: str):
    """A scalar of every floating result of program ``name``."""
    fn, _ = PROGRAMS[name]

    def loss(a, b):
        leaves = jax.tree_util.tree_leaves(fn(dsl, a, b))
        return sum((leaf * leaf).sum() for leaf in leaves if leaf.dtype.kind == "f")

    return loss


@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "no-inplace"])
@pytest.mark.parametrize("name", ["rnn", "reverse_scan", "swapped", "scalar_rows", "branches", "loop_ops"])
def test_loop_gradients_on_cuda(name: str, inplace: bool) -> None:
    """Autodiff through loops is native (compiler/autodiff_control.py): the joint program's forward
    scan stacking residuals and its reverse scan run as host loops on CUDA, as on the CPU."""
    _, args = PROGRAMS[name]
    grads = dsl.grad(_loss(name), argnums=(0, 1))
    got = on("cuda", grads, args, inplace=inplace)
    close(got, on_cpu(f"grad {name}", grads, args), rtol=1e-12)
    jax_loss = _loss_jax(name)
    close(got, jax.grad(jax_loss, argnums=(0, 1))(*args), rtol=1e-10)


def _loss_jax(name: str):
    fn, _ = PROGRAMS[name]

    def loss(a, b):
        leaves = jax.tree_util.tree_leaves(fn(jax.lax, a, b))
        return sum((leaf * leaf).sum() for leaf in leaves if jnp.issubdtype(leaf.dtype, jnp.floating))

    return loss


def traced_trips(lax, n, x, w):
    """A fori_loop whose bounds are traced integers, and a while_loop whose limit is one."""
    np_ = dnp if lax is dsl else jnp
    a = lax.fori_loop(n - 3, n, lambda i, c: np_.sin(c) @ w + i, x)
    b = lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 2, c[1] * 0.5 + c[0]), (0, x))
    return a, b


def loop_in_loop(lax, x, w, xs):
    """A scan inside a fori_loop inside a scan, and a while_loop inside a fori_loop."""

    def outer(h, row):
        def middle(i, c):
            c, ys = lax.scan(lambda d, r: (d * 0.5 + r * i, d.sum()), c, xs[:2])
            return c + ys.sum()

        return lax.fori_loop(0, 2, middle, h + row), (h * row).sum()

    h, sums = lax.scan(outer, x, xs)
    count = lax.fori_loop(0, 3, lambda i, k: lax.while_loop(lambda j: j < i * 2, lambda j: j + 1, k), 0)
    return h @ w, sums, count


@pytest.mark.parametrize("mode", sorted(MODES))
def test_traced_trip_counts_on_cuda(mode: str) -> None:
    """The bounds are read back from the device at each call: one compiled program for every n (n = 1
    gives a fori_loop over [-2, 1) and a while that stops after one step)."""
    f = dsl.compile(lambda n, x, w: traced_trips(dsl, n, x, w), target="cuda")
    for n in (3, 6, 1):
        with option_defaults(**MODES[mode]):
            got = f(np.int64(n), X, W)
        close(got, traced_trips(jax.lax, np.int64(n), X, W))
        cpu = on_cpu(f"traced {n}", lambda n, x, w: traced_trips(dsl, n, x, w), (np.int64(n), X, W))
        close(got, cpu, rtol=1e-13)
    assert f.trace_count == 1


@pytest.mark.parametrize("mode", sorted(MODES))
def test_loops_nested_in_loops_on_cuda(mode: str) -> None:
    xs = XS[:3]
    got = on("cuda", lambda *a: loop_in_loop(dsl, *a), (X, W, xs), **MODES[mode])
    close(got, loop_in_loop(jax.lax, X, W, xs))
    close(got, on_cpu("loop_in_loop", lambda *a: loop_in_loop(dsl, *a), (X, W, xs)), rtol=1e-13)


def test_gradient_through_nested_loops_on_cuda() -> None:
    def loss(dsl_or_lax, x, w, xs):
        h, sums, _ = loop_in_loop(dsl_or_lax, x, w, xs)
        return (h * h).sum() + (sums * sums).sum()

    xs = XS[:3]
    grads = dsl.grad(lambda x, w, xs: loss(dsl, x, w, xs), argnums=(0, 1, 2))
    got = on("cuda", grads, (X, W, xs))
    close(got, on("cpu", grads, (X, W, xs)), rtol=1e-12)
    close(got, jax.grad(lambda x, w, xs: loss(jax.lax, x, w, xs), argnums=(0, 1, 2))(X, W, xs), rtol=1e-10)
