"""The scan primitives on the CUDA backend (a thread per line, serial within it) against the CPU
backend, bit for bit: both walk each line in the same order with the same accumulator. Forward
along each axis, integer and float32 (float64 running sums), and the gradient of a loss through
cumsum and cumprod over zeros, in-place on and off."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp

RNG = np.random.default_rng(29)


def scans(x, i):
    return (
        dnp.cumsum(x, axis=0),
        dnp.cumsum(x * 2.0, axis=1),
        dnp.cumprod(x, axis=-1),
        dnp.cumsum(i),
        dnp.cumprod(i, axis=0),
    )


def loss(x, u):
    return (u * dnp.cumsum(x, axis=0)).sum() + (u * dnp.cumprod(x, axis=1)).sum()


@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "no-inplace"])
def test_scans_on_cuda_equal_the_cpu(inplace: bool) -> None:
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    i = RNG.integers(-4, 5, size=(4, 2)).astype(np.int32)
    cpu = dsl.compile(scans, target="cpu", inplace=inplace)(x, i)
    cuda = dsl.compile(scans, target="cuda", inplace=inplace)(x, i)
    for k, (g, w) in enumerate(zip(cuda, cpu, strict=True)):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w, err_msg=f"result {k}")
    np.testing.assert_allclose(cpu[0], np.cumsum(x, axis=0), rtol=1e-6)


def test_float32_running_sums_on_cuda_are_float64_rounded_once() -> None:
    """A scan kernel of its own (the log-step form summed in float32, log2 n times)."""
    x = np.linspace(0.1, 0.7, 96, dtype=np.float32).reshape(2, 48)
    got = dsl.compile(lambda x: dnp.cumsum(x, axis=1), target="cuda")(x)
    np.testing.assert_array_equal(got, np.cumsum(x.astype(np.float64), axis=1).astype(np.float32))


@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "no-inplace"])
def test_gradient_through_zeros_on_cuda_equals_the_cpu(inplace: bool) -> None:
    x, u = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    x[0, 1] = x[2, 0] = x[2, 3] = 0.0
    g = dsl.grad(loss)
    cpu = dsl.compile(g, target="cpu", inplace=inplace)(x, u)
    cuda = dsl.compile(g, target="cuda", inplace=inplace)(x, u)
    np.testing.assert_allclose(cuda, cpu, rtol=1e-13, atol=1e-15)


def test_float32_running_sums_stay_infinite_once_they_overflow() -> None:
    """Past float32's range a running sum is its infinity from then on, as NumPy's float32 sum."""
    from test_cumulative import OVERFLOWING

    for values in OVERFLOWING:
        x = np.array(values, np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            want = np.cumsum(x)
        got = dsl.compile(lambda v: dnp.cumsum(v), target="cuda")(x)
        np.testing.assert_array_equal(
            np.asarray(got.copy_to_host() if hasattr(got, "copy_to_host") else got), want
        )
