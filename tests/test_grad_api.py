"""Every dsl.numpy / dsl.nn function with a float result, differentiated at first and second order
against central finite differences in float64 (on the reference interpreter; broadcasting shapes
come from the cases' own arguments), and a compiled subset with in-place on and off."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from helpers import interpret_fn
from test_numpy_api import CASES, NN_CASES

import dsl
import dsl.numpy as dnp

EPS = 1e-6


def _float_args(args):
    return [np.asarray(a, np.float64) if np.asarray(a).dtype.kind == "f" else a for a in args]


def _differentiable_cases():
    for name, (fn, _, args) in sorted({**CASES, **NN_CASES}.items()):
        args = _float_args(args)
        wrt = tuple(i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "f")
        if not wrt or name.startswith(("astype", "bool_cast", "sign")):
            continue  # no float input to differentiate (or a piecewise-constant function)
        out = interpret_fn(fn, *args)
        if np.asarray(out).dtype.kind != "f":
            continue  # comparisons: not differentiable
        yield name, fn, args, wrt, np.asarray(out).shape


CASES_GRAD = list(_differentiable_cases())


def _scalarize(fn, shape, seed: int):
    weights = np.random.default_rng(seed).standard_normal(shape)
    return lambda *a: dnp.sum(fn(*a) * weights)


def _fd(scalar, args, wrt, directions) -> float:
    plus = [a + EPS * directions[i] if i in wrt else a for i, a in enumerate(args)]
    minus = [a - EPS * directions[i] if i in wrt else a for i, a in enumerate(args)]
    return (float(interpret_fn(scalar, *plus)) - float(interpret_fn(scalar, *minus))) / (2 * EPS)


def _check(scalar, args, wrt, seed: int) -> None:
    rng = np.random.default_rng(seed)
    directions = {i: rng.standard_normal(np.shape(args[i])) for i in wrt}
    grads = interpret_fn(lambda *a: dsl.grad(scalar, argnums=wrt)(*a), *args)
    analytic = sum(float(np.sum(g * directions[i])) for g, i in zip(grads, wrt))
    numeric = _fd(scalar, args, wrt, directions)
    assert analytic == pytest.approx(numeric, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("name", [c[0] for c in CASES_GRAD])
def test_first_and_second_order(name: str) -> None:
    _, fn, args, wrt, shape = next(c for c in CASES_GRAD if c[0] == name)
    scalar = _scalarize(fn, shape, 1)
    _check(scalar, args, wrt, 2)
    u = {i: np.random.default_rng(3 + i).standard_normal(np.shape(args[i])) for i in wrt}

    def directional(*a):  # <grad(scalar)(a), u>: its gradient is the Hessian applied to u
        grads = dsl.grad(scalar, argnums=wrt)(*a)
        terms = [dnp.sum(g * u[i]) for g, i in zip(grads, wrt)]
        return functools.reduce(dnp.add, terms)

    _check(directional, args, wrt, 4)


COMPILED = ["tanh", "matmul_batch", "softmax", "logsumexp", "mean", "max", "divide", "concatenate", "power"]


@pytest.mark.parametrize("name", COMPILED)
def test_compiled_gradients_match_with_inplace_on_and_off(name: str) -> None:
    _, fn, args, wrt, shape = next(c for c in CASES_GRAD if c[0] == name)
    scalar = _scalarize(fn, shape, 5)
    want = interpret_fn(lambda *a: dsl.grad(scalar, argnums=wrt)(*a), *args)
    on = dsl.compile(dsl.grad(scalar, argnums=wrt))(*args)
    off = dsl.compile(dsl.grad(scalar, argnums=wrt), inplace=False)(*args)
    for w, a, b in zip(want, on, off):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, w, rtol=1e-12, atol=1e-12)


def test_table_covers_the_api() -> None:
    names = {c[0].split("_")[0] for c in CASES_GRAD}
    for fn in (
        "add",
        "multiply",
        "divide",
        "power",
        "exp",
        "log",
        "sqrt",
        "tanh",
        "matmul",
        "sum",
        "mean",
        "max",
        "softmax",
        "logsumexp",
        "gelu",
        "sigmoid",
        "where",
        "concatenate",
        "stack",
        "transpose",
        "reshape",
        "broadcast",
        "maximum",
        "abs",
    ):
        assert fn in names, f"no gradient case for {fn}"
