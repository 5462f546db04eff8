"""NumPy's ufunc and reduction keywords (``dsl/numpy_keywords.py``): ``out=``, ``where=``, ``dtype=``,
``casting=``, through ``dsl.numpy`` and through NumPy's own functions on traced arrays (``np.add(x, 1,
out=x)``, ``np.add.reduce``), against NumPy: the result, its dtype, and the arrays written in place.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers import assert_same, interpret_fn

import dsl
import dsl.numpy as dnp

rng = np.random.default_rng(3)
X = rng.standard_normal((3, 4))
M4 = np.array([True, False, True, True])
M34 = rng.random((3, 4)) > 0.4
I34 = rng.integers(-5, 5, (3, 4)).astype(np.int32)

# name -> program over one float64 array x and one int32 array i, written for NumPy (``np`` is
# ``dsl.numpy`` or ``numpy`` itself): each returns something, and may write into x or i in place.
PROGRAMS: dict[str, Any] = {
    "add_out": lambda np, x, i: np.add(x, 1.0, out=x),
    "add_out_tuple": lambda np, x, i: np.multiply(x, x, out=(x,)),
    "exp_out_where": lambda np, x, i: np.exp(x, out=x, where=x > 0),
    "subtract_out_view": lambda np, x, i: np.subtract(x[0], x[1], out=x[2]),
    "int_out_int": lambda np, x, i: np.add(i, 7, out=i),
    "float_out_of_int": lambda np, x, i: np.multiply(i, 0.5, out=x),
    "less_out_float": lambda np, x, i: np.less(x, 0, out=x),
    "add_dtype": lambda np, x, i: np.add(i, i, dtype=np.float32),
    "multiply_dtype_unsafe": lambda np, x, i: np.multiply(x, 3, dtype=np.int32, casting="unsafe"),
    "sum_where": lambda np, x, i: np.sum(x, where=x > 0),
    "sum_where_axis": lambda np, x, i: np.sum(x, axis=1, where=M4, keepdims=True),
    "sum_where_initial": lambda np, x, i: np.sum(i, axis=0, where=M34, initial=10),
    "prod_where": lambda np, x, i: np.prod(x, axis=0, where=M34),
    "max_where": lambda np, x, i: np.max(x, axis=1, where=M34, initial=-1.5),
    "min_where_int": lambda np, x, i: np.min(i, axis=0, where=M4[None, :3].T, initial=3),
    "any_where": lambda np, x, i: np.any(x > 1, axis=1, where=M4),
    "all_where": lambda np, x, i: np.all(x > -1, where=M34),
    "mean_where": lambda np, x, i: np.mean(x, axis=1, where=M34),
    "mean_where_f32": lambda np, x, i: np.mean(x.astype(np.float32), axis=0, where=M34),
    "mean_where_int": lambda np, x, i: np.mean(i, where=M34),
    "var_where_ddof": lambda np, x, i: np.var(x, axis=1, where=M34, ddof=1),
    "std_where": lambda np, x, i: np.std(x, where=M4),
    "sum_out": lambda np, x, i: np.sum(x, axis=0, out=x[1]),
    "mean_out_int": lambda np, x, i: np.mean(x, axis=0, out=i[0]),
    "clip_out": lambda np, x, i: np.clip(x, -0.5, 0.5, out=x),
    "matmul_out": lambda np, x, i: np.matmul(x[:, :3], x[:3], out=x),
    "cumsum_out": lambda np, x, i: np.cumsum(x, axis=1, out=x),
    "argmax_out": lambda np, x, i: np.argmax(x, axis=1, out=i[:, 0].astype(np.int64)),
}


def _run_numpy(name: str) -> tuple[Any, np.ndarray, np.ndarray]:
    x, i = X.copy(), I34.copy()
    out = PROGRAMS[name](np, x, i)
    return np.array(out), x, i


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_against_numpy(name: str) -> None:
    want, want_x, want_i = _run_numpy(name)
    x, i = X.copy(), I34.copy()
    got = interpret_fn(lambda a, b: PROGRAMS[name](dnp, a, b), x, i)
    assert_same(got, want, rtol=1e-12)
    assert_same((x, i), (want_x, want_i), rtol=1e-12)  # the arrays written in place


def test_compiled_writes_the_callers_arrays() -> None:
    """Through NumPy's own functions (the ufunc protocol passes ``out`` as a tuple), compiled: the
    arguments written with ``out=`` are the caller's arrays afterwards, and ``out`` is returned."""

    def program(x: Any, i: Any) -> Any:
        y = np.add(x, 1.0, out=x)
        same = y is x
        np.exp(x, out=x, where=x > 1.5)
        np.floor_divide(i, 2, out=i)
        return np.add.reduce(x), np.multiply.accumulate(x, axis=1), np.sum(x, where=M34), same

    x, i = X.copy(), I34.copy()
    got = dsl.compile(program)(x, i)
    wx, wi = X.copy(), I34.copy()
    want = program(wx, wi)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    np.testing.assert_allclose(x, wx, rtol=1e-12)
    np.testing.assert_array_equal(i, wi)


def test_gradients_of_masked_reductions_against_jax() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    jax.config.update("jax_enable_x64", True)

    def f(np: Any, x: Any) -> Any:
        return np.sum(x * x, where=M34) + np.mean(np.sin(x), axis=0, where=M34).sum() + np.var(x, where=M4)

    got = dsl.grad(lambda x: f(dnp, x))(X)
    want = np.asarray(jax.grad(lambda x: f(jnp, x))(X))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_masked_std_where_the_kept_values_are_equal_has_a_zero_gradient() -> None:
    """As the unmasked ``std`` (the least subgradient of the convex ``std``): the masked form spelled
    ``sqrt`` of its variance again, whose derivative at zero is NaN."""
    x = np.array([[2.0, 5.0, 2.0, 2.0]])
    got = dsl.grad(lambda x: dnp.std(x, where=M4))(x)
    np.testing.assert_array_equal(got, np.zeros_like(x))
    np.testing.assert_array_equal(dsl.compile(lambda x: dnp.std(x, axis=1, where=M4))(x), [0.0])


# program -> the error class and a phrase of its message (every message starts at the user's line)
ERRORS: dict[str, tuple[Any, type, str]] = {
    "where_without_out": (lambda x, i: dnp.exp(x, where=x > 0), dsl.CallError, "needs out="),
    "unknown_keyword": (
        lambda x, i: dnp.exp(x, order="F"),
        dsl.CallError,
        "unexpected keyword argument 'order'",
    ),
    "unknown_reduction_keyword": (lambda x, i: dnp.sum(x, foo=1), dsl.CallError, "'foo'"),
    "max_where_without_initial": (lambda x, i: dnp.max(x, where=x > 0), dsl.ShapeError, "specify 'initial'"),
    "float_into_int_out": (lambda x, i: dnp.add(i, 1.5, out=i), dsl.CastingError, "same_kind"),
    "dtype_cast_refused": (lambda x, i: dnp.add(x, 1, dtype=np.int32), dsl.CastingError, "casting='unsafe'"),
    "numpy_array_out": (lambda x, i: dnp.add(x, 1, out=np.zeros((3, 4))), dsl.CallError, "not ndarray"),
    "np_ufunc_at": (lambda x, i: np.add.at(x, [0], 1.0), dsl.TraceError, "numpy.add.at"),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_name_the_users_line(name: str) -> None:
    program, cls, phrase = ERRORS[name]
    x, i = X.copy(), I34.copy()
    with pytest.raises(cls) as info:
        interpret_fn(program, x, i)
    assert phrase in str(info.value) and "test_numpy_keywords.py:" in str(info.value), str(info.value)
    np.testing.assert_array_equal(x, X)  # nothing written
    np.testing.assert_array_equal(i, I34)


def test_weak_values_are_cast_by_their_kind() -> None:
    """A weak value (Python numbers, or what is computed from them alone) written with ``out=`` or
    cast by ``dtype=`` is checked by its kind, as NumPy checks the Python numbers' result: a float
    into an int32 ``out`` raises (it had passed since such results became weak, 2026-11-28), an int
    into an int32 ``out`` fits; ``dtype=`` gives a typed result (int64 stays int64 beside int32)."""
    a, m = np.zeros(3, np.int32), np.array([True, False, True])
    for fn in (
        lambda a, m: dnp.negative(dnp.where(m, 1.5, 2.5), out=a),
        lambda a, m: dnp.remainder(5.5, 2.0, out=a),
        lambda a, m: dnp.add(5.5, 2.0, out=a),
    ):
        with pytest.raises(dsl.CastingError, match="cannot write a float64 result into a int32"):
            dsl.compile(fn)(a.copy(), m)
    assert_same(dsl.compile(lambda a: dnp.add(5, 2, out=a))(a.copy()), np.full(3, 7, np.int32))
    for fn, want in (
        (lambda b: dnp.remainder(5, 3, dtype=np.int64) + b, np.add(np.remainder(5, 3, dtype=np.int64), a)),
        (lambda b: dnp.add(5, 3, dtype=np.int64) + b, np.add(np.add(5, 3, dtype=np.int64), a)),
    ):
        assert_same(dsl.compile(fn)(a), want)
    with pytest.raises(dsl.CastingError, match="cannot cast a float64 operand to int64"):
        dsl.compile(lambda b: dnp.add(5.5, 3, dtype=np.int64) + b)(a)
    # a keyword argument counts: heaviside of a float32 array and 0.5 is float32, typed
    got = dsl.compile(lambda x, b: dnp.heaviside(x1=x, x2=0.5) + b)(np.ones(3, np.float32), m)
    assert_same(got, np.heaviside(np.ones(3, np.float32), 0.5) + m)
