"""Mutation and views keep NumPy's eager semantics (checked against NumPy running the same code)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import assert_same, interpret_fn, python_kernels, trace

import dsl
import dsl.numpy as dnp


def views_see_base_writes(x):
    v = x[1:, ::2]
    x += 1.0
    return v * 1.0


def base_sees_view_writes(x):
    y = x * 1.0
    v = y[:, 1]
    v[0] = 100.0
    v += 2.0
    return y


def transpose_view_write(x):
    y = x * 1.0
    t = y.T
    t[0, :] = -1.0
    t *= 3.0
    return y, t


def reshape_view_write(x):
    y = x + 0.0
    r = y.reshape(-1)
    r[2:4] = 9.0
    return y


def reshape_copy_is_not_a_view(x):
    y = x + 0.0
    r = y.T.reshape(-1)  # NumPy copies here: writes to r do not reach y
    r[0] = 55.0
    return y, r


def chained_views(x):
    y = x * 2.0
    v = y[::-1][1:].T[..., None]
    v[0] = 0.5
    return y, v


def scalar_index_is_a_copy(x):
    y = x + 0.0
    s = y[0, 0]
    y[0, 0] = 42.0
    return s, y


def negative_steps_and_none(x):
    y = x + 0.0
    y[::-2, None, 1:3] = 7.0
    return y, y[None, ..., ::-1]


def setitem_broadcast_and_cast(x):
    y = (x * 10).astype(np.int32)
    y[0] = 3.7  # cast like NumPy (truncates)
    y[:, 1] = np.arange(2)
    return y


def augmented_on_argument(x):
    x -= 1.5
    x[0, 0] = 0.0
    return x.sum()


CASES = [
    views_see_base_writes,
    base_sees_view_writes,
    transpose_view_write,
    reshape_view_write,
    reshape_copy_is_not_a_view,
    chained_views,
    scalar_index_is_a_copy,
    negative_steps_and_none,
    setitem_broadcast_and_cast,
    augmented_on_argument,
]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_same_as_numpy(fn) -> None:
    x = np.arange(6, dtype=np.float64).reshape(2, 3) + 0.25
    x_np, x_dsl = x.copy(), x.copy()
    want = fn(x_np)
    got = interpret_fn(fn, x_dsl)
    assert_same(got, want)
    np.testing.assert_array_equal(x_dsl, x_np)  # arguments mutated exactly as NumPy mutates them


def test_inplace_methods_return_self_and_match_formulas() -> None:
    def f(x, y):
        a = x * 1.0
        r = a.scale_(2.0, bias=1.0)
        assert r is a
        assert a.add_(y) is a
        a.sub_(0.5).mul_(3.0).div_(2.0)
        b = x * 1.0
        b.clip_(0.5, 2.0).pow_(2.0).sqrt_().exp_().log_().sin_().cos_().tanh_().abs_().neg_().relu_()
        c = x * 1.0
        c.sigmoid_()
        d = x * 1.0
        d.zero_()
        e = x * 1.0
        e.fill_(3)
        g = x * 1.0
        g[1].copy_(y)
        return a, b, c, d, e, g

    x = np.linspace(-1, 2, 6).reshape(2, 3)
    y = np.array([1.0, -2.0, 0.5])
    a = ((x * 2.0 + 1.0 + y) - 0.5) * 3.0 / 2.0
    b = np.maximum(-np.abs(np.tanh(np.cos(np.sin(np.log(np.exp(np.sqrt(np.clip(x, 0.5, 2.0) ** 2))))))), 0)
    c = 1 / (1 + np.exp(-x))
    g = x.copy()
    g[1] = y
    want = (a, b, c, np.zeros_like(x), np.full_like(x, 3.0), g)
    assert_same(interpret_fn(f, x, y), want)


def test_inplace_request_is_marked_in_the_ir() -> None:
    def f(x):
        y = x * 2.0
        y.exp_()
        y[0] = 1.0
        return y

    func, _, _ = trace(f, np.ones((2, 2)))
    marks = [op.attrs.get("dsl.inplace") for op in func.ops]
    assert "exp_" in marks and "setitem" in marks


def test_inplace_cannot_broadcast_the_target() -> None:
    def f(x, y):
        x += y
        return x

    with pytest.raises(dsl.ShapeError, match=r"test_views_inplace.py:\d+"):
        trace(f, np.ones(3), np.ones((2, 3)))


def test_inplace_same_kind_casting() -> None:
    def f(x):
        x += 1.5
        return x

    # a TypeError, as NumPy's UFuncTypeError (it was only a ValueError), and still a dsl.ShapeError
    with pytest.raises(TypeError, match="cannot write a float64 result into a int64") as raised:
        trace(f, np.ones(3, dtype=np.int64))
    assert isinstance(raised.value, dsl.ShapeError) and isinstance(raised.value, dsl.CastingError)


def test_python_scalar_argument_is_not_written_back() -> None:
    def f(x, lr):
        lr *= 2
        return x * lr

    func, _, mutated = trace(f, np.ones(2, np.float32), 0.5)
    assert mutated == []
    assert interpret_fn(f, np.ones(2, np.float32), 0.5).dtype == np.float32


# ---- broadcast_to is a read-only view; assignment drops the value's leading unit axes ----------------
# Each function runs eagerly on NumPy and compiled (NumPy functions on traced arrays dispatch to
# dsl.numpy); results and the final contents of every argument must agree, in place or not.


def broadcast_sees_later_writes(x):
    y = x * 1.0
    b = np.broadcast_to(y[0], (3, 3))
    y[0, 1] = 7.0
    return b * 1.0, b


def broadcast_of_slice_sees_writes_through_another_view(x):
    y = x + 0.0
    b = np.broadcast_to(y[:, 1:2], (4, 5))
    t = y.T
    t[1, :] = -2.0  # column 1 of y, which b repeats
    return b + 0.0, y


def broadcast_of_argument_sees_its_mutation(x):
    b = np.broadcast_to(x[1], (2, 3, 3))
    x[1] += 5.0
    return b.sum(axis=0)


def views_of_a_broadcast_see_writes(x):
    b = np.broadcast_to(x[0], (4, 3))
    c = b.T[1:]
    d = np.broadcast_to(c[None], (2, 2, 4))
    x[0] *= 2.0
    return c * 1.0, d * 1.0, b.reshape(-1)


def copies_of_a_broadcast_are_writable(x):
    r = np.broadcast_to(x[0], (2, 3)).reshape(-1)  # NumPy copies here: writable, not a view of x
    r[0] = 9.0
    c = np.broadcast_to(x[1], (2, 3)).copy()
    c[1, 2] = -9.0
    f = (np if isinstance(x, np.ndarray) else dnp).full((2, 3), x[0])
    f[0] = 4.0
    return r, c, f, x


def value_with_leading_unit_axes(x):
    y = x * 1.0
    y[0] = y[1:2]  # (1, 3) into (3,): NumPy drops the leading 1
    return y


def slices_take_values_with_leading_unit_axes(x, v):
    z = np.zeros_like(x)
    z[1:3] = v[None]  # (1, 2, 3) into (2, 3)
    z[:, 0] = np.arange(4.0).reshape(1, -1)  # (1, 4) into (4,)
    z[..., 2] = x[:, 1].reshape(1, 1, -1)  # (1, 1, 4) into (4,)
    x[0, None] = v[:1, None]  # (1, 1, 3) into (1, 3)
    return z, x


def ravel_views_only_c_contiguous_arrays(x):
    y = x + 0.0
    r = y[::2].ravel()  # a copy in NumPy, though reshape(-1) is a view here
    r[0] = -5.0
    s = y[:, :1].ravel()  # likewise (strided unit columns)
    s[1] = -6.0
    t = y[1:3].ravel()  # C-contiguous rows: a view
    t[0] = -7.0
    f = y.flatten()  # always a copy
    f[2] = -8.0
    return y, r, s, t, f


def unary_plus_is_a_copy(x):
    y = +x
    y[0] = 1.0
    return y, x


VIEW_CASES = [
    (broadcast_sees_later_writes, 1),
    (broadcast_of_slice_sees_writes_through_another_view, 1),
    (broadcast_of_argument_sees_its_mutation, 1),
    (views_of_a_broadcast_see_writes, 1),
    (copies_of_a_broadcast_are_writable, 1),
    (value_with_leading_unit_axes, 1),
    (slices_take_values_with_leading_unit_axes, 2),
    (ravel_views_only_c_contiguous_arrays, 1),
    (unary_plus_is_a_copy, 1),
]


@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "no_inplace"])
@pytest.mark.parametrize("fn, nargs", VIEW_CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_views_and_assignment_compiled_as_numpy(fn, nargs, inplace) -> None:
    def make():
        return [np.arange(12.0).reshape(4, 3) * 0.5 - 1.0, np.arange(6.0).reshape(2, 3) + 10.0][:nargs]

    want_args, got_args = make(), make()
    want = fn(*want_args)
    with python_kernels():
        got = dsl.compile(fn, inplace=inplace)(*got_args)
    assert_same(got, want)
    for g, w in zip(got_args, want_args):
        np.testing.assert_array_equal(g, w)


def _setitem(b):
    b[0] = 1.0


def _augmented(b):
    b += 1.0


def _through_a_view_of_the_view(b):
    b.T[0][1:] = 2.0


READ_ONLY_WRITES = {
    "setitem": _setitem,
    "augmented": _augmented,
    "add_": lambda b: b.add_(1.0),
    "fill_": lambda b: b.fill_(0.0),
    "zero_": lambda b: b.zero_(),
    "copy_": lambda b: b.copy_(b * 2.0),
    "view_of_view": _through_a_view_of_the_view,
}


@pytest.mark.parametrize("name", READ_ONLY_WRITES)
@pytest.mark.parametrize("same_shape", [False, True], ids=["stretched", "same_shape"])
def test_writing_into_a_broadcast_view_raises_as_numpy(name, same_shape) -> None:
    write = READ_ONLY_WRITES[name]

    def f(x):
        b = np.broadcast_to(x if same_shape else x[0], (3, 3))
        write(b)
        return x

    if name in ("setitem", "augmented", "view_of_view"):  # the writes NumPy arrays have
        with pytest.raises(ValueError, match="read-only"):
            f(np.ones((3, 3)))
    with pytest.raises(dsl.InplaceError, match="assignment destination is read-only") as err:
        trace(f, np.ones((3, 3)))
    assert isinstance(err.value, ValueError)  # as NumPy's
    assert re.search(r"test_views_inplace.py:\d+", str(err.value)), str(err.value)  # the user's line


@pytest.mark.parametrize(
    "assign",
    [
        lambda y: y.__setitem__(0, np.ones((2, 1, 3))),  # more axes than the target, not all of size 1
        lambda y: y.__setitem__(slice(0, 2), np.ones((1, 3, 3))),
        lambda y: y.__setitem__((0, 0), np.ones((1, 1))),  # one element takes a 0-d value only
        lambda y: y.__setitem__((0, 0), np.ones(1)),
    ],
)
def test_assignment_of_values_numpy_refuses(assign) -> None:
    def f(x):
        y = x * 1.0
        assign(y)
        return y

    with pytest.raises(ValueError):
        f(np.ones((4, 3)))
    with pytest.raises(dsl.ShapeError):  # a ValueError, as NumPy raises
        trace(f, np.ones((4, 3)))


def test_view_method_as_numpy() -> None:
    """``x.view()`` is NumPy's: a new array over the same elements (it was dslc's internal view
    builder, whose TypeError named three internal parameters); ``x.view(other_dtype)`` reinterprets
    bytes, which a compiled function cannot: a TypeError at the user's line."""

    def f(x):
        y = x.view()
        y[0] = 5.0
        return x * 1.0, y is x

    x = np.arange(3.0)
    got, same = dsl.compile(f)(x.copy())
    np.testing.assert_array_equal(got, [5.0, 1.0, 2.0])
    assert not bool(same)
    with pytest.raises(TypeError, match=r"test_views_inplace.py:\d+: x.view\(int64\) reinterprets"):
        dsl.compile(lambda v: v.view(np.int64))(x)
