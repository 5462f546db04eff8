"""Bad input gives a clear dsl error naming the user's file and line; nothing crashes internally.

``TRACE_ERRORS`` is one row per mistake a user can make inside a compiled function: the bad op is
written on the row's own line, and the error must name exactly that line of this file. Call-time
mistakes (arguments, transforms, aliasing) name the line of the call. The rest checks inputs that
are *not* errors (odd dtypes, NaN, empty and 0-d arrays, strided and Fortran-ordered arrays,
read-only arrays) give NumPy's answers.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
from compiler.ir.parser import parse_module

HERE = re.escape(__file__.rsplit("/", 1)[-1])
A23, A4, A0 = np.ones((2, 3)), np.arange(4.0), np.array(2.0)
I3 = np.arange(3, dtype=np.int32)


def _line_of(fn, needle: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if needle in line)


def _here() -> int:
    """The line number of the caller (where the failing call is written)."""
    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return frame.f_back.f_lineno


Shape, Index, Trace, Call, Transform = (
    dsl.ShapeError,
    dsl.IndexingError,
    dsl.TraceError,
    dsl.CallError,
    dsl.TransformError,
)

# (name, function, arguments, exception type, a phrase the message must contain). The function is a
# one-line lambda: its line is the line of the bad op.
TRACE_ERRORS: list[tuple[str, Any, tuple, type[Exception], str]] = [
    # elementwise: shapes and dtypes
    ("add shapes", lambda x, y: x + y, (A23, A4), Shape, "(2, 3) (4,)"),
    ("maximum shapes", lambda x, y: dnp.maximum(x, y), (A23, A4), Shape, "(2, 3) (4,)"),
    ("where shapes", lambda x, y: dnp.where(x > 0, x, y), (A23, A4), Shape, "(4,)"),
    ("in-place float into int", lambda x: x.__iadd__(1.5), (I3,), Shape, "float64 result into a int32"),
    ("in-place grows target", lambda x, y: x.mul_(y), (A4, np.ones((2, 4))), Shape, "(2, 4)"),
    ("unsupported astype", lambda x: x.astype(np.float16), (A4,), Shape, "float16"),
    ("unsupported constant", lambda x: x + np.ones(4, np.float16), (A4,), Shape, "float16"),
    ("int to a negative power", lambda x: x ** -1, (I3,), Shape, "negative integer powers"),
    # reductions and axes
    ("sum axis out of range", lambda x: x.sum(axis=2), (A23,), Shape, "axis 2 is out of bounds"),
    ("max negative axis", lambda x: dnp.max(x, axis=-3), (A23,), Shape, "axis -3 is out of bounds"),
    ("repeated axis", lambda x: x.mean(axis=(0, 0)), (A23,), Shape, "repeated axis"),
    ("float axis", lambda x: x.sum(axis=1.5), (A23,), Trace, "axis must be an int"),
    ("expand_dims axis", lambda x: dnp.expand_dims(x, 5), (A23,), Shape, "axis 5 is out of bounds"),
    ("squeeze non-1 axis", lambda x: dnp.squeeze(x, 0), (A23,), Shape, "squeeze"),
    # movement
    ("reshape size", lambda x: x.reshape(4), (A23,), Shape, "cannot reshape an array of shape (2, 3)"),
    ("reshape two -1", lambda x: x.reshape(-1, -1), (A23,), Shape, "one unknown dimension"),
    ("transpose axes", lambda x: x.transpose((0, 0)), (A23,), Shape, "axes (0, 0)"),
    ("broadcast_to", lambda x: dnp.broadcast_to(x, (3, 3)), (A23,), Shape, "(3, 3)"),
    # matmul
    ("matmul shapes", lambda x, y: x @ y, (A23, np.ones((4, 5))), Shape, "(2, 3) and (4, 5)"),
    ("matmul 0-d", lambda x, y: x @ y, (A0, A23), Shape, "at least one dimension"),
    ("dot shapes", lambda x, y: dnp.dot(x, y), (A23, np.ones((4, 5))), Shape, "not aligned"),
    # concatenate / stack
    ("concatenate shapes", lambda x, y: dnp.concatenate([x, y]), (A23, np.ones((2, 4))), Shape, "(2, 4)"),
    ("concatenate ranks", lambda x, y: dnp.concatenate([x, y]), (A23, A4), Shape, "differ outside axis"),
    ("concatenate 0-d", lambda x: dnp.concatenate([x, x]), (A0,), Shape, "zero-dimensional"),
    ("concatenate axis", lambda x: dnp.concatenate([x, x], axis=3), (A23,), Shape, "axis 3"),
    ("stack shapes", lambda x, y: dnp.stack([x, y]), (A23, A4), Shape, "same shape"),
    # indexing and setitem
    ("index out of range", lambda x: x[5], (A4,), Index, "index 5 is out of bounds"),
    ("negative index out of range", lambda x: x[:, -4], (A23,), Index, "index -4 is out of bounds"),
    ("float index", lambda x: x[1.0], (A4,), Index, "got float"),
    ("too many indices", lambda x: x[0, 0], (A4,), Index, "too many indices"),
    ("two ellipses", lambda x: x[..., ...], (A4,), Index, "single ellipsis"),
    ("float array index", lambda x: x[x], (A4,), Index, "got a traced float64 array"),
    ("float list index", lambda x: x[[0.5, 1]], (A4,), Index, "got list"),
    ("setitem shapes", lambda x, y: x.__setitem__(slice(0, 2), y), (A4, np.ones(3)), Shape, "(3,)"),
    ("setitem out of range", lambda x: x.__setitem__(7, 1.0), (A4,), Index, "index 7"),
    # values not known at trace time
    ("if on an array", lambda x: 1 if x.sum() > 0 else 0, (A4,), Trace, "bool()"),
    ("bool()", lambda x: bool(x), (A4,), Trace, "not known at trace time"),
    ("int()", lambda x: int(x), (A0,), Trace, "int() needs the value"),
    ("float()", lambda x: float(x), (A0,), Trace, "float() needs the value"),
    ("range() of an array", lambda x: range(x), (np.array(3),), Trace, "as an index"),
    ("np.asarray", lambda x: np.asarray(x), (A4,), Trace, "converting to a NumPy array"),
    ("len of 0-d", lambda x: len(x), (A0,), Trace, "len() of a 0-d array"),
    ("iterating 0-d", lambda x: list(x), (A0,), Trace, "iteration over a 0-d array"),
    ("arange of an array", lambda x: dnp.arange(x), (np.array(3),), Trace, "arange needs Python numbers"),
    ("NumPy ufunc method", lambda x: np.add.at(x, [0], 1.0), (A4,), Trace, "numpy.add.at(...)"),
    ("into a NumPy array", lambda x: OUTSIDE.__setitem__(0, x.sum()), (A4,), Trace, "cannot hold a traced"),
    ("missing NumPy function", lambda x: dnp.sort(x), (A4,), dsl.MissingError, "sorting is not supported"),
    ("missing method", lambda x: x.foo(), (A4,), dsl.MissingError, "has no attribute 'foo'"),
    ("fori_loop body arity", lambda x: dsl.fori_loop(0, 3, lambda c: c, x), (A4,), Trace, "takes (i, carry)"),
    ("traced shape", lambda x: dnp.zeros(x.shape[0] + x.sum()), (A4,), Trace, "known at trace time"),
    ("ufunc where= without out=", lambda x: np.exp(x, where=x > 0), (A4,), Trace, "needs out="),
]  # fmt: skip


@pytest.mark.parametrize("name", [row[0] for row in TRACE_ERRORS])
def test_trace_error_names_the_line_of_the_bad_op(name: str) -> None:
    _, fn, args, exc, phrase = next(row for row in TRACE_ERRORS if row[0] == name)
    with pytest.raises(exc) as info:
        dsl.compile(fn)(*args)
    msg = str(info.value)
    assert isinstance(info.value, dsl.DSLError)
    assert f"{__file__}:{fn.__code__.co_firstlineno}:" in msg, msg
    assert phrase in msg, msg


OUTSIDE = np.zeros(3)  # a NumPy array a compiled function closes over
READ_ONLY = np.arange(4.0)
READ_ONLY.flags.writeable = False
# Mistakes in how a compiled function is called: the error names the line of the call.
CALL_ERRORS: list[tuple[str, Any, tuple, type[Exception], str]] = [
    ("missing argument", dsl.compile(lambda x, y: x + y), (A4,), Call, "missing a required argument: 'y'"),
    ("too many arguments", dsl.compile(lambda x, y: x + y), (A4, A4, A4), TypeError, "too many positional"),
    ("str argument", dsl.compile(lambda x: x), ("hello",), Call, "argument 'x' is of type str"),
    ("object argument", dsl.compile(lambda x: x), (object(),), Call, "is of type object"),
    ("nested str", dsl.compile(lambda x: x[0]), ([A4, "a"],), Call, "argument 'x[1]' is of type str"),
    ("float16 argument", dsl.compile(lambda x: x), (np.ones(2, np.float16),), Call, "float16"),
    ("complex argument", dsl.compile(lambda x: x), (np.ones(2, np.complex128),), Call, "complex128"),
    ("unhashable static", dsl.compile(lambda x, n: x, static_argnums=1), (A4, [1]), Call, "hashable"),
    ("grad argnums range", dsl.grad(lambda x: x.sum(), argnums=3), (A4,), Transform, "argnums 3"),
    ("grad of an int arg", dsl.grad(lambda x: x.sum()), (np.arange(3),), Transform, "dtype int64"),
    ("grad has_aux", dsl.grad(lambda x: x.sum(), has_aux=True), (A4,), Transform, "a pair"),
    ("read-only mutated", dsl.compile(lambda x: x.mul_(2.0)), (READ_ONLY,), dsl.DSLError, "read-only"),
    ("same array twice", dsl.compile(lambda x, y: x.add_(y)), (A4, A4), dsl.DSLError, "share memory"),
]  # fmt: skip


@pytest.mark.parametrize("name", [row[0] for row in CALL_ERRORS])
def test_call_error_names_the_line_of_the_call(name: str) -> None:
    _, f, args, exc, phrase = next(row for row in CALL_ERRORS if row[0] == name)
    with pytest.raises(exc) as info:
        line = _here() + 1
        f(*args)
    msg = str(info.value)
    assert isinstance(info.value, dsl.DSLError)
    assert f"{__file__}:{line}:" in msg, msg
    assert phrase in msg, msg


def test_grad_of_a_non_scalar_names_its_shape_and_line() -> None:
    def f(x):
        return x * 2.0  # the non-scalar output

    with pytest.raises(TypeError) as info:
        dsl.grad(f)(A4)
    msg = str(info.value)
    assert isinstance(info.value, dsl.TransformError)
    assert f"{__file__}:{_line_of(f, 'the non-scalar output')}:" in msg and "shape (4,)" in msg


def test_hessian_with_argnums_out_of_range() -> None:
    with pytest.raises(dsl.TransformError, match=rf"{HERE}:{_here() + 1}: argnums \(0, 3\) is out of range"):
        dsl.hessian(lambda x: x.sum(), argnums=(0, 3))(A4)


def test_inplace_on_a_differentiated_argument() -> None:
    def f(x):
        x.mul_(2.0)  # mutates the argument being differentiated
        return x.sum()

    with pytest.raises(dsl.InplaceError) as info:
        dsl.grad(f)(A4.copy())
    msg = str(info.value)
    assert f"{__file__}:{_line_of(f, 'mutates the argument')}:" in msg
    assert "can't be modified in place" in msg and "'x'" in msg


def test_strict_inplace_demotion_names_both_lines() -> None:
    def f(x, w):
        y = x * 2.0  # reads the old x later
        x.exp_()  # the request that needs a copy
        return (x @ w) + y

    with pytest.raises(dsl.InplaceError) as info:
        dsl.compile(f, strict_inplace=True)(np.ones((3, 3)), np.ones((3, 3)))
    msg = str(info.value)
    assert f"{__file__}:{_line_of(f, 'the request that needs a copy')}:" in msg
    assert f"{__file__}:{_line_of(f, 'reads the old x later')}" in msg


def test_wrong_shape_at_the_executable_names_the_call() -> None:
    f = dsl.compile(lambda x: x + 1.0)
    f(A4)
    (entry,) = f._cache.values()
    with pytest.raises(dsl.ShapeError, match=rf"{HERE}:{_here() + 1}: .*shape \(5,\)"):
        entry.run(np.ones(5))


def test_target_cuda_without_gpu() -> None:
    from runtime.devices import cuda_available

    if cuda_available():
        pytest.skip("a GPU is present: target='cuda' is valid here")
    f = dsl.compile(lambda x: x + 1, target="cuda")
    with pytest.raises(dsl.DeviceError, match=r"test_errors.py:\d+.*target='cuda' needs a usable NVIDIA GPU"):
        f(np.ones(2))


def test_unknown_function_attribute() -> None:
    with pytest.raises(AttributeError):
        dsl.compile(lambda x: dnp.no_such_function(x))(np.ones(2))


def test_unknown_attribute_and_malformed_ir() -> None:
    text = """func.func @f(%arg0: tensor<2xf32>) -> tensor<2xf32> {
  %0 = "dsl.exp"(%arg0) {bogus = 1 : i64} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}"""
    with pytest.raises(dsl.IRParseError, match="bogus"):
        parse_module(text)
    with pytest.raises(dsl.IRParseError) as info:
        parse_module("func.func @f(%arg0: tensor<2xf32>) -> tensor<2xf32> {\n  %0 = \n}")
    assert info.value.line == 2


def test_returning_an_unsupported_object() -> None:
    def f(x):
        return "nope"

    with pytest.raises(dsl.TraceError, match=rf"{HERE}:{f.__code__.co_firstlineno}: .*returned a str"):
        dsl.compile(f)(np.ones(2))


# ---- inputs that are not errors: NumPy's answers -------------------------------------------------


def _mixed(x):
    return (dnp.exp(x) * 2.0 + x).sum(axis=0), dnp.maximum(x, 0.5), x.max(axis=-1), x.T @ x


def _numpy_mixed(x):
    return (np.exp(x) * 2.0 + x).sum(axis=0), np.maximum(x, 0.5), x.max(axis=-1), x.T @ x


def _check_like_numpy(got: Any, want: Any, rtol: float = 1e-12) -> None:
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, equal_nan=True)


def test_a_call_with_another_dtype_recompiles_and_is_right() -> None:
    f = dsl.compile(_mixed)
    x = np.random.default_rng(0).standard_normal((3, 4))
    _check_like_numpy(f(x), _numpy_mixed(x))
    x32 = x.astype(np.float32)
    _check_like_numpy(f(x32), _numpy_mixed(x32), rtol=1e-5)
    assert f.trace_count == 2
    xi = np.arange(12, dtype=np.int32).reshape(3, 4)
    g = dsl.compile(lambda x: (x * 2 + 1, x.sum(), x / 2))
    for a in (xi, xi.astype(np.int64)):
        _check_like_numpy(g(a), (a * 2 + 1, a.sum(), a / 2))
    assert g.trace_count == 2


def test_nan_and_inf_propagate_like_numpy() -> None:
    x = np.array([[1.0, np.nan, -np.inf], [np.inf, -2.0, 0.0]])
    f = dsl.compile(
        lambda x: (x.max(axis=1), x.min(axis=0), x.sum(), dnp.maximum(x, 0.0), dnp.minimum(x, 0.0), x / 0.0)
    )
    with np.errstate(all="ignore"):
        want = (x.max(axis=1), x.min(axis=0), x.sum(), np.maximum(x, 0.0), np.minimum(x, 0.0), x / 0.0)
        got = f(x)
    _check_like_numpy(got, want)
    with np.errstate(all="ignore"):
        _check_like_numpy(dsl.compile(_mixed)(x.T.copy()), _numpy_mixed(x.T.copy()))


def test_empty_arrays() -> None:
    e = np.zeros((0, 3))
    f = dsl.compile(lambda x, w: (x.sum(axis=0), x * 2.0, x @ w, x.sum(), x.T @ x, dnp.concatenate([x, x])))
    w = np.ones((3, 2))
    want = (e.sum(axis=0), e * 2.0, e @ w, e.sum(), e.T @ e, np.concatenate([e, e]))
    _check_like_numpy(f(e, w), want)


def test_zero_d_arrays() -> None:
    f = dsl.compile(lambda x, y: (x * y + 1.0, dnp.exp(x), x.sum(), dnp.maximum(x, y), x.reshape(1)))
    x, y = np.array(1.5), np.array(-2.0)
    _check_like_numpy(f(x, y), (x * y + 1.0, np.exp(x), x.sum(), np.maximum(x, y), x.reshape(1)))
    _check_like_numpy(f(1.5, -2.0), (x * y + 1.0, np.exp(x), x.sum(), np.maximum(x, y), x.reshape(1)))


def test_strided_and_fortran_inputs() -> None:
    base = np.random.default_rng(1).standard_normal((8, 10))
    f = dsl.compile(_mixed)
    for x in (base[::2, 1::3], base.T[:4], np.asfortranarray(base), base[::-1, ::-2]):
        _check_like_numpy(f(x), _numpy_mixed(x))

    @dsl.compile
    def g(x, y):
        x += y  # a mutated argument that is itself a strided view
        return x.sum()

    target, want = base.copy(), base.copy()
    view = target[1::2, ::3]
    got = g(view, np.ones_like(view))
    want[1::2, ::3] += 1.0
    np.testing.assert_array_equal(target, want)
    np.testing.assert_allclose(got, want[1::2, ::3].sum())


def test_read_only_inputs_are_fine_unless_mutated() -> None:
    x = np.arange(4.0)
    x.flags.writeable = False
    np.testing.assert_array_equal(dsl.compile(lambda x: x * 2.0)(x), x * 2.0)
    with pytest.raises(dsl.DSLError, match="read-only"):
        dsl.compile(lambda x: x.add_(1.0))(x)
    np.testing.assert_array_equal(x, np.arange(4.0))


def test_sampling_outside_a_compiled_function_names_the_line() -> None:
    # dsl.random.key/split work eagerly (NumPy keys); drawing needs a trace, and says so at the call
    key = dsl.random.key(0)
    with pytest.raises(dsl.DSLError, match=rf"{__file__}:\d+: dsl arrays can only be used inside"):
        dsl.random.uniform(key, (3,))


def test_missing_names_are_attribute_errors() -> None:
    # hasattr stays False (an AttributeError); private names skip the location lookup
    assert not hasattr(dnp, "sort") and issubclass(dsl.MissingError, AttributeError)
    with pytest.raises(dsl.DSLError, match=rf"^{__file__}:\d+: no IR stage 'nope'"):
        dsl.compile(lambda x: x + 1).lower(A4).ir("nope")


def test_an_array_kept_from_another_trace_is_a_trace_error_at_the_users_line() -> None:
    """A traced value kept past its trace (appended to a list by a compiled call, or inside a vmap
    body) and read by another trace crashed the code generator with a bare KeyError (found
    2026-11-27); it is a TraceError at the line that reads it."""
    saved: list[Any] = []

    @dsl.compile
    def keep(a):
        saved.append(a * 2)
        return a

    @dsl.compile
    def use(a):
        return a + saved[0]  # the kept array

    x = np.ones(3, np.float32)
    keep(x)
    with pytest.raises(dsl.TraceError, match=rf"{HERE}:\d+: this reads an array traced elsewhere"):
        use(x)

    def v(a):
        seen = []

        def inner(b):
            seen.append(b * 10)
            return b.sum()

        return dsl.vmap(inner)(a.reshape(3, 1)) + seen[0]

    with pytest.raises(dsl.TraceError, match="traced elsewhere"):
        dsl.compile(v)(x)


def test_masked_arrays_methods_and_donated_positions() -> None:
    """A masked array's mask was dropped silently (``sum`` 6 where NumPy gives 3); a compiled method
    did not bind its instance; ``donate_argnums`` past the parameters did nothing (found
    2026-11-27)."""
    x = np.ma.masked_array(np.arange(4, dtype=np.float32), mask=[0, 1, 1, 0])
    with pytest.raises(TypeError, match=rf"{HERE}:\d+: argument 'a' is a NumPy masked array.*filled"):
        dsl.compile(lambda a: a.sum())(x)

    class Model:
        k = 2.0

        @dsl.compile(static_argnums=0)  # the instance is static, as jax.jit needs it
        def scaled(self, a):
            return a * self.k

    m = Model()
    np.testing.assert_array_equal(m.scaled(np.ones(3)), np.full(3, 2.0))
    np.testing.assert_array_equal(Model.scaled(m, np.ones(3)), np.full(3, 2.0))
    for bad in ((3,), (-7,)):
        with pytest.raises(TypeError, match=rf"{HERE}:\d+: donate_argnums=\({bad[0]},\) but"):
            dsl.compile(lambda x, y: x + y, donate_argnums=bad)


def test_zero_steps_item_and_too_many_axes_name_the_users_line() -> None:
    """Bare Python errors from dslc's own frames (found 2026-11-27): ``a[::0]`` a ValueError of
    ``dsl/ops.py``; ``x.item()``/``x.tolist()`` an AttributeError suggesting ``x.write``; an array of
    21 axes a SyntaxError of the generated module (a loop nest per axis: Python allows 20 blocks)."""
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(IndexError, match=rf"{HERE}:\d+: slice step cannot be zero"):
        dsl.compile(lambda a: a[::0])(x)
    for method in ("item", "tolist"):
        with pytest.raises(dsl.TraceError, match=rf"{HERE}:\d+: {method}\(\) needs the value of a traced"):
            dsl.compile(lambda a, m=method: getattr(a, m)())(x)
    with pytest.raises(TypeError, match=rf"{HERE}:\d+: argument 'a' has 21 axes: .* reshape to fewer"):
        dsl.compile(lambda a: a.sum(axis=0))(np.ones((1,) * 20 + (3,), np.float32))
    with pytest.raises(ValueError, match=rf"{HERE}:\d+: arrays of more than 20 axes"):
        dsl.compile(lambda a: a.reshape((1,) * 21 + (4,)))(x)
    twenty = np.ones((1,) * 19 + (3,), np.float32)
    assert dsl.compile(lambda a: a.sum(axis=0))(twenty).shape == (1,) * 18 + (3,)


def test_argnums_that_are_not_ints_say_so_at_the_users_line() -> None:
    """``static_argnums="b"`` was a bare ``TypeError: '<=' not supported`` from dsl/binding.py, a float
    ``argnums`` "'float' object is not iterable", ``argnums="a"`` "out of range" (found 2026-11-27).
    As JAX, the mistake is reported where it is written: ``dsl.compile``, ``dsl.grad``, ``jacfwd``."""
    two = lambda a, b: (a * b).sum()  # noqa: E731
    takes = "takes an int or a tuple of ints, the positions of positional arguments, but got"
    for nums, bad in (("b", "str 'b'"), (1.5, "float 1.5"), ((0, "b"), "str 'b'")):
        with pytest.raises(dsl.CallError, match=rf"{HERE}:{_here() + 1}: static_argnums {takes} {bad}; name"):
            dsl.compile(two, static_argnums=nums)
    for nums, bad in (("b", "str 'b'"), ((1.0,), "float 1.0")):
        with pytest.raises(dsl.CallError, match=rf"{HERE}:{_here() + 1}: donate_argnums {takes} {bad}"):
            dsl.compile(two, donate_argnums=nums)
    for transform in (dsl.grad, dsl.value_and_grad, dsl.hessian, dsl.jacfwd, dsl.jacrev):
        for nums, bad in (("a", "str 'a'"), (1.5, "float 1.5"), ((0.0,), "float 0.0")):
            with pytest.raises(dsl.TransformError, match=rf"{HERE}:{_here() + 1}: argnums {takes} {bad}"):
                transform(two, argnums=nums)
    assert dsl.grad(two, argnums=np.int64(1))(A4, A0).shape == ()  # NumPy integers are ints


def test_an_argument_both_static_and_donated() -> None:
    """Accepted silently (found 2026-11-27); JAX refuses it: a static argument has no buffer."""
    for options in ({"static_argnums": (1,)}, {"static_argnums": -1}, {"static_argnames": "b"}):
        with pytest.raises(dsl.CallError, match=rf"{HERE}:{_here() + 1}: argument 'b' .* both static"):
            dsl.compile(lambda a, b: a * b, donate_argnums=(1,), **options)
    dsl.compile(lambda a, b: a * b, static_argnums=0, donate_argnums=1)  # different arguments: fine


def test_an_unexpected_keyword_is_named() -> None:
    """``f(x, z=x)`` for ``f(x, y)`` said only "missing a required argument: 'y'" (found 2026-11-27);
    Python names the keyword first."""
    f = dsl.compile(lambda x, y: x + y)
    with pytest.raises(dsl.CallError, match=rf"{HERE}:{_here() + 1}: .*unexpected keyword argument 'z'"):
        f(A4, z=A4)
    with pytest.raises(dsl.CallError, match=rf"{HERE}:{_here() + 1}: .*missing a required argument: 'y'"):
        f(A4)


def test_a_traced_array_as_a_dict_key() -> None:
    """``return {x: 1}`` returned a dict keyed by a dead tracer (found 2026-11-27); JAX's arrays are
    unhashable."""

    def h(x):
        return {x: 1}

    def in_a_tuple(x):
        return {(x, 1): x}

    for f in (h, in_a_tuple):
        with pytest.raises(TypeError) as info:
            dsl.compile(f)(A4)
        msg = str(info.value)
        assert isinstance(info.value, dsl.TraceError), msg
        assert re.search(rf"{HERE}:({f.__code__.co_firstlineno}|{_line_of(f, 'return')}): ", msg), msg
        assert "not hashable" in msg, msg
    assert dsl.compile(lambda x: {(1, "a"): x})(A4)[(1, "a")].shape == A4.shape


def test_writing_into_a_numpy_default_says_what_it_is() -> None:
    """A NumPy default written in place said "out must be an array of the compiled function (an
    argument, ...)", though ``a`` is a parameter (found 2026-11-27). Not passed, a default is a
    constant captured at definition time, as in JAX."""

    def acc(x, a=np.zeros(3)):  # noqa: B008 (the mistake under test)
        a += x  # writes the default
        return a

    with pytest.raises(dsl.CallError) as info:
        dsl.compile(acc)(np.ones(3))
    msg = str(info.value)
    assert f"{__file__}:{_line_of(acc, 'writes the default')}: " in msg, msg
    assert "not ndarray: a NumPy array" in msg, msg
    assert "a parameter's default value" in msg and "pass it as an argument" in msg, msg
    np.testing.assert_array_equal(dsl.compile(acc)(np.ones(3), np.ones(3)), np.full(3, 2.0))
