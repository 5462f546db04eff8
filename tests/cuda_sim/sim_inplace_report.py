"""In-place requests on ``target="cuda"`` (simulator): the programs of ``tests/test_inplace_report.py``
whose requests are honored compile with ``strict_inplace=True`` and agree with the CPU backend; a
request whose old value is still read later raises, naming both lines, as on the CPU."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import dsl

RNG = np.random.default_rng(6)
A = RNG.standard_normal((6, 4)).astype(np.float32)
W = RNG.standard_normal((4, 4)).astype(np.float32)


def returned_after_increment(a, w):
    y = a * 2
    y += 1
    return y


def two_requests_on_a_fused_value(a, w):
    x = a * 2
    x.scale_(2)
    x.add_(1)
    return (x @ w).sum()


def requests_on_a_matmul_result(a, w):
    h = a @ w
    h.tanh_()
    h.mul_(2.0)
    return (h @ w).sum()


@pytest.mark.parametrize(
    "fn", [returned_after_increment, two_requests_on_a_fused_value, requests_on_a_matmul_result]
)
def test_honored_requests_compile_strict_on_cuda(fn) -> None:
    compiled = dsl.compile(fn, target="cuda", strict_inplace=True)
    got = compiled(A.copy(), W.copy())
    want = dsl.compile(fn, target="cpu")(A.copy(), W.copy())
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    assert "-> copy" not in compiled.lower(A, W).explain_inplace()


def test_demoted_request_raises_on_cuda_naming_both_lines() -> None:
    def f(a, w):
        x = a @ w
        y = x * 2.0  # reads the old x later
        x.exp_()  # the request
        return (x @ w) + y

    lines, start = inspect.getsourcelines(f)
    at = {
        needle: start + next(i for i, t in enumerate(lines) if needle in t) for needle in ("old x", "request")
    }
    with pytest.raises(dsl.InplaceError) as info:
        dsl.compile(f, target="cuda", strict_inplace=True)(A, W)
    assert f"{__file__}:{at['request']}" in str(info.value) and f"{__file__}:{at['old x']}" in str(info.value)
    got = dsl.compile(f, target="cuda")(A, W)
    np.testing.assert_allclose(np.asarray(got), np.exp(A @ W) @ W + (A @ W) * 2, rtol=1e-4, atol=1e-4)


def test_sgd_step_is_written_into_the_callers_array_on_cuda() -> None:
    def step(w, g):
        w -= 0.5 * g
        return (w * w).sum()

    w, g = RNG.standard_normal(8).astype(np.float32), RNG.standard_normal(8).astype(np.float32)
    want = w - np.float32(0.5) * g
    compiled = dsl.compile(step, target="cuda", strict_inplace=True)
    compiled(w, g)
    np.testing.assert_allclose(w, want, rtol=1e-6)
    assert "written straight into the caller's array" in compiled.lower(w, g).explain_inplace()
