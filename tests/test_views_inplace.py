"""Mutation and views keep NumPy's eager semantics (checked against NumPy running the same code)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_same, interpret_fn, trace

import dsl


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

    with pytest.raises(dsl.ShapeError, match="cannot write a float64 result into a int64"):
        trace(f, np.ones(3, dtype=np.int64))


def test_python_scalar_argument_is_not_written_back() -> None:
    def f(x, lr):
        lr *= 2
        return x * lr

    func, _, mutated = trace(f, np.ones(2, np.float32), 0.5)
    assert mutated == []
    assert interpret_fn(f, np.ones(2, np.float32), 0.5).dtype == np.float32
