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
        if any(args[i].size == 0 for i in wrt):
            continue  # no element to differentiate (logsumexp over an empty axis: -inf)
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


# ---- conventions at kinks and ties: JAX's values (checked against jax 0.10.2, float64) ---------------

X3 = np.array([-1.0, 0.0, 1.0])
CONVENTIONS = {  # name: (scalar function of X3, JAX's gradient at X3)
    "relu": (lambda x: dsl.nn.relu(x).sum(), [0.0, 0.0, 1.0]),  # relu'(0) = 0 (PyTorch too)
    "relu_": (lambda x: (x * 1.0).relu_().sum(), [0.0, 0.0, 1.0]),
    "abs": (lambda x: dnp.abs(x).sum(), [-1.0, 1.0, 1.0]),  # abs'(0) = 1 (PyTorch: 0)
    "abs_": (lambda x: (x * 1.0).abs_().sum(), [-1.0, 1.0, 1.0]),
    "maximum_tie": (lambda x: dnp.maximum(x, 0.0).sum(), [0.0, 0.5, 1.0]),  # a tie splits 0.5/0.5
    "minimum_tie": (lambda x: dnp.minimum(x, 0.0).sum(), [1.0, 0.5, 0.0]),
    "maximum_self": (lambda x: dnp.maximum(x, x).sum(), [1.0, 1.0, 1.0]),
    "clip_bounds": (lambda x: dnp.clip(x, -1.0, 1.0).sum(), [0.5, 1.0, 0.5]),  # minimum(maximum(..))
    "where": (lambda x: dnp.where(x > 0, x, 2 * x).sum(), [2.0, 2.0, 1.0]),
    "sign": (lambda x: dnp.sign(x).sum(), [0.0, 0.0, 0.0]),
    "max_reduce_tie": (lambda x: dnp.max(dnp.abs(x)), [-0.5, 0.0, 0.5]),  # ties share the cotangent
    "min_reduce": (lambda x: dnp.min(x), [1.0, 0.0, 0.0]),
}


@pytest.mark.parametrize("name", sorted(CONVENTIONS))
def test_derivative_conventions_at_kinks_and_ties_are_jaxs(name: str) -> None:
    fn, want = CONVENTIONS[name]
    np.testing.assert_array_equal(dsl.grad(fn)(X3.copy()), np.asarray(want))


def test_relu_keeps_nan_and_has_zero_second_derivative() -> None:
    x = np.array([np.nan, -0.0, 0.0, 2.0, -3.0])
    got = dsl.compile(dsl.nn.relu)(x)
    np.testing.assert_array_equal(got, np.maximum(x, 0.0))
    assert np.signbit(got).sum() == 0  # relu(-0.0) is +0.0, as np.maximum(-0.0, 0) on this backend
    h = dsl.hessian(lambda x: (dsl.nn.relu(x) ** 1).sum())(np.array([-1.0, 0.0, 1.0]))
    np.testing.assert_array_equal(h, np.zeros((3, 3)))


def test_abs_second_derivative_is_zero_at_the_kink() -> None:
    assert float(dsl.grad(dsl.grad(lambda x: dnp.abs(x)))(0.0)) == 0.0


# ---- transforms of functions that modify their arguments -------------------------------------------


def _line(fn, marker: str) -> int:
    import inspect

    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, text in enumerate(lines) if marker in text)


def test_vjp_fn_uses_the_primals_given_to_vjp() -> None:
    x = np.array([1.0, 2.0, 3.0])
    out, vjp_fn = dsl.vjp(lambda x: x * x, x)
    x[:] = 10.0  # the caller reuses its array: vjp_fn still differentiates at [1, 2, 3] (as JAX)
    (g,) = vjp_fn(np.ones(3))
    np.testing.assert_array_equal(g, [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(out, [1.0, 4.0, 9.0])


def test_vjp_fn_checks_each_cotangent_against_its_output() -> None:
    """As JAX: a cotangent of another shape or dtype is refused (a (4,) one for a (3,) output was
    read as its first 3 elements, a (2, 3) one failed inside Numba, a float32 one was cast)."""
    _, vjp_fn = dsl.vjp(lambda a: (a * 2.0, a.sum()), np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(vjp_fn((np.ones(3), 1.0))[0], [3.0, 3.0, 3.0])  # a Python number: weak
    for ct, error in (
        ((np.ones(4), 1.0), dsl.ShapeError),
        ((np.ones((2, 3)), 1.0), dsl.ShapeError),
        ((np.ones(3, np.float32), 1.0), dsl.TransformError),
    ):
        with pytest.raises(error, match=r"test_grad_api.py:\d+: vjp_fn: cotangent 0 has shape"):
            vjp_fn(ct)


def test_vjp_of_a_function_modifying_a_differentiated_argument_raises_before_writing() -> None:
    def f(x):
        x += 1.0  # modifies x
        return x * 2.0

    x = np.array([1.0, 2.0, 3.0])
    with pytest.raises(dsl.InplaceError, match="can't be modified in place") as info:
        dsl.vjp(f, x)
    assert "'x'" in str(info.value) and f":{_line(f, 'modifies x')}" in str(info.value)
    np.testing.assert_array_equal(x, [1.0, 2.0, 3.0])  # nothing half-written


def test_vjp_of_a_function_modifying_an_integer_argument_writes_it_once() -> None:
    def f(x, n):
        n += 1  # integer: not differentiated, written into the caller's array, once
        return x * n

    x, n = np.array([1.0, 2.0]), np.array([1, 2])
    out, vjp_fn = dsl.vjp(f, x, n)
    np.testing.assert_array_equal(out, [2.0, 6.0])
    np.testing.assert_array_equal(n, [2, 3])
    gx, gn = vjp_fn(np.ones(2))
    gx2, _ = vjp_fn(np.ones(2))
    np.testing.assert_array_equal(n, [2, 3])  # vjp_fn writes nothing
    np.testing.assert_array_equal(gx, [2.0, 3.0])  # d(x * (n0 + 1))/dx at the primals given
    np.testing.assert_array_equal(gx2, gx)
    np.testing.assert_array_equal(gn, [0, 0])


def _modifies_w(w, c):
    w += 1.0  # the leaf rule
    return (w * c).sum()


@pytest.mark.parametrize(
    "transform",
    [
        lambda w, c: dsl.grad(_modifies_w)(w, c),
        lambda w, c: dsl.grad(lambda w, c: dsl.grad(_modifies_w)(w, c).sum())(w, c),
        lambda w, c: dsl.hessian(_modifies_w)(w, c),
        lambda w, c: dsl.vjp(_modifies_w, w, c),
        lambda w, c: dsl.value_and_grad(_modifies_w)(w, c),
    ],
    ids=["grad", "nested_grad", "hessian", "vjp", "value_and_grad"],
)
def test_leaf_rule_names_the_users_argument_under_every_transform(transform) -> None:
    w, c = np.ones(2), np.ones(2)
    with pytest.raises(dsl.InplaceError) as info:
        transform(w, c)
    msg = str(info.value)
    assert "argument 'w' is being differentiated" in msg, msg
    assert f":{_line(_modifies_w, 'the leaf rule')}:" in msg
    np.testing.assert_array_equal(w, np.ones(2))


def _scales_c(x, c):
    c *= 2.0  # a non-differentiated argument, modified in place
    return (c * x**2).sum() * 3.0


def test_hessian_applies_the_functions_inplace_update_once() -> None:
    c = np.array([1.0, 2.0, 3.0])
    h = dsl.hessian(_scales_c)(np.ones(3), c)
    np.testing.assert_array_equal(h, np.diag([12.0, 24.0, 36.0]))  # 6 * (2 * c), c as given
    np.testing.assert_array_equal(c, [2.0, 4.0, 6.0])  # as after one call of the eager program


def test_nested_grad_applies_the_functions_inplace_update_once() -> None:
    c = np.array([1.0, 2.0, 3.0])
    g2 = dsl.grad(lambda x, c: dsl.grad(_scales_c)(x, c).sum())(np.ones(3), c)
    np.testing.assert_array_equal(g2, [12.0, 24.0, 36.0])
    np.testing.assert_array_equal(c, [2.0, 4.0, 6.0])


def test_value_and_grad_with_aux_of_a_modifying_function() -> None:
    def f(x, c):
        c += x  # c: not differentiated, written back once
        return (c * x).sum(), c * 1.0

    x, c = np.array([1.0, 2.0]), np.array([10.0, 20.0])
    (value, aux), g = dsl.value_and_grad(f, has_aux=True)(x, c)
    np.testing.assert_array_equal(c, [11.0, 22.0])
    np.testing.assert_array_equal(aux, [11.0, 22.0])
    assert float(value) == 11.0 + 44.0
    np.testing.assert_array_equal(g, [12.0, 24.0])  # d((c0 + x) * x)/dx = c0 + 2x


# ---- strict_inplace of an inner compiled function under a transform ---------------------------------


def _overwrites_b(a, w):
    b = dnp.sin(a @ w)
    c = b @ w  # the backward of this product reads the old b
    b.exp_()  # needs a copy under grad
    return ((b @ w) + c).sum()


def test_inner_strict_inplace_applies_under_grad() -> None:
    rng = np.random.default_rng(0)
    a, w = rng.standard_normal((3, 3)), rng.standard_normal((3, 3))
    strict = dsl.compile(_overwrites_b, strict_inplace=True)
    strict(a, w)  # no backward: realized in place, no error
    with pytest.raises(dsl.InplaceError, match="strict_inplace") as info:
        dsl.grad(strict, argnums=1)(a, w)
    assert f":{_line(_overwrites_b, 'needs a copy under grad')}:" in str(info.value)
    with pytest.raises(dsl.InplaceError, match="strict_inplace"):  # inlined inside another function
        dsl.grad(lambda a, w: strict(a, w) * 2.0, argnums=1)(a, w)
    lenient = dsl.compile(_overwrites_b)
    want = dsl.grad(_overwrites_b, argnums=1)(a, w)
    np.testing.assert_array_equal(dsl.grad(lenient, argnums=1)(a, w), want)
    dsl.check_grads(lenient, [a, w])
