"""Reverse-mode autodiff end to end: known values, nesting, pruning, mutation under differentiation."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp

rng = np.random.default_rng(7)


def _line(fn, needle: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, text in enumerate(lines) if needle in text)


def test_argnums_tuple_order() -> None:
    g = dsl.grad(lambda x, y, z: x + 2 * y + 3 * z, argnums=(2, 0))
    gz, gx = g(1.0, 1.0, 1.0)
    assert float(gz) == 3.0 and float(gx) == 1.0


def test_hessian_of_quadratic_form() -> None:
    a = rng.standard_normal((4, 4))
    h = dsl.hessian(lambda x: x @ (a @ x))(rng.standard_normal(4))
    np.testing.assert_allclose(h, a + a.T, rtol=1e-12, atol=1e-12)


def test_sixth_derivative_of_reciprocal() -> None:
    f = lambda x: 1.0 / x  # noqa: E731
    for _ in range(6):
        f = dsl.grad(f)
    np.testing.assert_allclose(f(4.0), 720 / 4**7, rtol=1e-10)


def test_second_derivative_of_sin() -> None:
    x = np.linspace(-2, 2, 5)
    d2 = dsl.compile(lambda x: dsl.grad(dsl.grad(dnp.sin))(x))
    for xi in x:
        np.testing.assert_allclose(dsl.grad(dsl.grad(dnp.sin))(xi), -np.sin(xi), rtol=1e-12)
    _ = d2


def test_nested_grad_of_sum_of_grad() -> None:
    g = dsl.grad(lambda x: dsl.grad(lambda y: (y**3).sum())(x).sum())
    x = rng.standard_normal(5)
    np.testing.assert_allclose(g(x), 6 * x, rtol=1e-12)


def test_output_independent_of_input_has_zero_gradient() -> None:
    g = dsl.grad(lambda x, y: (y * 2).sum())
    np.testing.assert_array_equal(g(np.ones(3), np.ones(2)), np.zeros(3))


def test_non_scalar_output_raises_type_error_naming_the_shape() -> None:
    with pytest.raises(TypeError, match=r"\(3,\)|3xf64"):
        dsl.grad(lambda x: x * 2)(np.ones(3))


def test_value_and_grad_with_aux() -> None:
    def f(w, x):
        pred = x @ w
        loss = ((pred - 1.0) ** 2).mean()
        return loss, {"pred": pred}

    w, x = rng.standard_normal(3), rng.standard_normal((4, 3))
    (loss, aux), gw = dsl.value_and_grad(f, has_aux=True)(w, x)
    pred = x @ w
    np.testing.assert_allclose(loss, ((pred - 1) ** 2).mean(), rtol=1e-12)
    np.testing.assert_allclose(aux["pred"], pred, rtol=1e-12)
    np.testing.assert_allclose(gw, 2 * x.T @ (pred - 1) / 4, rtol=1e-12)


def test_vjp() -> None:
    x = rng.standard_normal((2, 3))
    out, vjp_fn = dsl.vjp(lambda x: dnp.tanh(x) * 3.0, x)
    ct = rng.standard_normal((2, 3))
    (gx,) = vjp_fn(ct)
    np.testing.assert_allclose(out, np.tanh(x) * 3, rtol=1e-12)
    np.testing.assert_allclose(gx, ct * 3 * (1 - np.tanh(x) ** 2), rtol=1e-12)


def test_stop_gradient() -> None:
    g = dsl.grad(lambda x: (x * dsl.stop_gradient(x)).sum())
    x = rng.standard_normal(3)
    np.testing.assert_allclose(g(x), x, rtol=1e-12)


def test_mutation_after_use_gives_correct_gradient() -> None:
    def f(a):
        b = a**2
        c = b**2
        b[1:2] = 3.3  # PyTorch and Paddle raise here at backward time
        return c.sum() + b.sum()

    a = rng.standard_normal(4)
    want = 4 * a**3 + 2 * a * (np.arange(4) != 1)
    np.testing.assert_allclose(dsl.grad(f)(a), want, rtol=1e-12)


def test_inplace_chain_matches_out_of_place() -> None:
    def inplace(a):
        b = a**2
        b.sin_().sin_()
        return b.sum()

    def out_of_place(a):
        return dnp.sin(dnp.sin(a**2)).sum()

    a = rng.standard_normal(5)
    np.testing.assert_allclose(dsl.grad(inplace)(a), dsl.grad(out_of_place)(a), rtol=1e-14)


def test_inplace_on_differentiated_argument_raises() -> None:
    def f(x, y):
        x += y  # the offending line
        return x.sum()

    with pytest.raises(dsl.InplaceError, match="can't be modified in place") as info:
        dsl.grad(f)(np.ones(2), np.ones(2))
    assert "'x'" in str(info.value)
    assert f"{_line(f, 'the offending line')}" in str(info.value)
    np.testing.assert_array_equal(dsl.grad(f, argnums=1)(np.ones(2), np.ones(2)), np.ones(2))


def test_inplace_on_value_the_backward_needs_is_correct_and_strict_names_both_lines() -> None:
    def f(a, w):
        b = dnp.sin(a @ w)
        c = b @ w  # the backward of this product reads the old b
        b.exp_()  # overwrites b in place
        return ((b @ w) + c).sum()

    a, w = rng.standard_normal((3, 3)), rng.standard_normal((3, 3))
    dsl.check_grads(f, [a, w], order=1)
    lowered = dsl.grad(f, argnums=1).lower(a, w)
    assert "copy" in lowered.explain_inplace()
    with pytest.raises(dsl.InplaceError) as info:
        dsl.compile(dsl.grad(f, argnums=1), strict_inplace=True)(a, w)
    msg = str(info.value)
    assert f":{_line(f, 'overwrites b in place')}" in msg
    assert f":{_line(f, 'reads the old b')}" in msg


def test_fused_inplace_needs_no_copy_even_when_the_backward_reads_the_old_value() -> None:
    def f(a):
        b = dnp.sin(a)
        c = b * b  # the backward of this product reads the old b ...
        b.exp_()  # ... but everything fuses into one loop: no buffer, no copy
        return (c + b).sum()

    a = rng.standard_normal(6)
    want = 2 * np.sin(a) * np.cos(a) + np.exp(np.sin(a)) * np.cos(a)
    np.testing.assert_allclose(dsl.grad(f)(a), want, rtol=1e-12)
    assert "fused" in dsl.compile(dsl.grad(f), strict_inplace=True).lower(a).explain_inplace()


def test_write_after_use_not_needed_by_backward_costs_no_copy() -> None:
    def f(a):
        b = a * 2.0
        c = b + 1.0  # add's backward does not read b
        b.exp_()
        return (c * 3.0 + b).sum()

    lowered = dsl.grad(f).lower(rng.standard_normal(8))
    text = lowered.explain_inplace()
    assert "exp_" in text and "copy" not in text.split("buffers reused")[0]


def _mlp(x, ws):
    h = x
    for w in ws:
        h = dnp.tanh(h @ w)
    return h.sum()


def _count(text: str, name: str) -> int:
    return text.count(f'"dsl.{name}"')


def test_grad_wrt_input_computes_no_weight_gradient_matmul() -> None:
    x = rng.standard_normal((5, 4))
    ws = [rng.standard_normal((4, 4)) for _ in range(3)]
    wrt_input = dsl.grad(_mlp, argnums=0).lower(x, ws).ir("optimized")
    wrt_all = dsl.grad(_mlp, argnums=(0, 1)).lower(x, ws).ir("optimized")
    assert _count(wrt_input, "matmul") == 3 + 3  # forward + one input-gradient matmul per layer
    assert _count(wrt_all, "matmul") == 3 + 3 + 3  # plus one weight-gradient matmul per layer
    g = dsl.grad(_mlp)(x, ws)
    eps = 1e-6
    d = rng.standard_normal(x.shape)
    fd = (_mlp_np(x + eps * d, ws) - _mlp_np(x - eps * d, ws)) / (2 * eps)
    np.testing.assert_allclose(np.sum(g * d), fd, rtol=1e-6)


def _mlp_np(x, ws):
    h = x
    for w in ws:
        h = np.tanh(h @ w)
    return h.sum()


def test_second_order_pruning_holds() -> None:
    x = rng.standard_normal((5, 4))
    ws = [rng.standard_normal((4, 4)) for _ in range(3)]

    def input_grad_sum(x, ws):
        return (dsl.grad(_mlp)(x, ws) ** 2).sum()

    pruned = dsl.grad(input_grad_sum).lower(x, ws).ir("optimized")
    full = dsl.grad(input_grad_sum, argnums=(0, 1)).lower(x, ws).ir("optimized")
    assert _count(pruned, "matmul") < _count(full, "matmul")


def test_check_grads_passes_and_catches_errors() -> None:
    dsl.check_grads(
        lambda x, y: dnp.tanh(x @ y).sum(),
        [rng.standard_normal((3, 2)), rng.standard_normal((2, 4))],
        order=2,
    )
    dsl.check_grads(lambda x: dsl.nn.softmax(x) * 2.0, [rng.standard_normal((3, 5))], order=1)


def test_grad_of_compiled_function_and_options_compose() -> None:
    @dsl.compile
    def f(x):
        return (dnp.exp(x) * x).sum()

    g = dsl.compile(dsl.grad(f), inplace=False)
    x = rng.standard_normal(4)
    np.testing.assert_allclose(g(x), np.exp(x) * (x + 1), rtol=1e-12)
    lo = dsl.grad(f).lower(x)
    assert "dsl.exp" in lo.ir("traced") and lo.ir("grad") != lo.ir("functional")
    assert math.isfinite(float(f(x)))


def test_backward_writes_into_dead_forward_buffers_in_place() -> None:
    def loss(ws, x):
        h = x
        for w in ws:
            h = dnp.tanh(h @ w)
        return (h * h).sum()

    x = rng.standard_normal((64, 32))
    ws = [rng.standard_normal((32, 32)) for _ in range(3)]
    plan = dsl.grad(loss).lower(ws, x).memory_plan()
    forward_outputs = {r.name for r in plan.buffers if r.live[0] < 6}  # the saved tanh outputs
    backward_reuses = [r for r in plan.buffers if r.reused_from in forward_outputs and r.live[0] >= 6]
    assert len(backward_reuses) >= 2  # (1 - out^2) * ct is written over the dead `out`
    assert plan.peak_bytes * 2 <= plan.naive_bytes
    reference = dsl.compile(dsl.grad(loss), inplace=False)(ws, x)
    for a, b in zip(dsl.grad(loss)(ws, x), reference):
        np.testing.assert_array_equal(a, b)
