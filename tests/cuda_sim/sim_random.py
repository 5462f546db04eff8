"""dsl.random on ``target="cuda"``: the same key gives the same bits as the NumPy reference and the CPU
backend, bit for bit (integer math and exact float steps), fused into its readers; dropout's
gradient. Tiny shapes: the simulator runs every thread in Python."""

from __future__ import annotations

import numpy as np

import dsl
import dsl.numpy as dnp
from compiler.prims.random import random_bits_reference

KEY = dsl.random.key(1234)


def both(fn, *args):
    on_gpu = dsl.compile(fn, target="cuda")(*args)
    on_cpu = dsl.compile(fn, target="cpu")(*args)
    return on_gpu, on_cpu


def test_bits_and_split_are_the_reference() -> None:
    gpu, cpu = both(lambda k: (dsl.random.bits(k, (3, 5)), dsl.random.split(k, 3)), KEY)
    wide = random_bits_reference(KEY, (3, 5)).view(np.uint64)
    want_bits = ((wide >> np.uint64(32)) ^ (wide & np.uint64(0xFFFFFFFF))).astype(np.int64)
    for bits, keys in (gpu, cpu):
        np.testing.assert_array_equal(bits, want_bits)
        np.testing.assert_array_equal(keys, dsl.random.split(KEY, 3))


def test_uniform_bernoulli_dropout_bit_identical_to_cpu() -> None:
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6)

    def draws(k, x):
        a, b, c = dsl.random.split(k, 3)
        return (
            dsl.random.uniform(a, (4, 6)),
            dsl.random.uniform(b, (5,), dtype=np.float64),
            dsl.random.bernoulli(c, 0.5, (7,)),
            dsl.nn.dropout(k, x, 0.5),
        )

    gpu, cpu = both(draws, KEY, x)
    for g, c in zip(gpu, cpu, strict=True):
        assert g.dtype == c.dtype
        np.testing.assert_array_equal(g, c)
    wide = random_bits_reference(dsl.random.split(KEY, 3)[0], (4, 6)).view(np.uint64)
    mantissa = ((wide >> np.uint64(32)) ^ (wide & np.uint64(0xFFFFFFFF))) >> np.uint64(9)
    np.testing.assert_array_equal(gpu[0], mantissa.astype(np.float32) * np.float32(2.0**-23))


def test_fold_in_bit_identical_to_cpu() -> None:
    """``fold_in`` of a traced key by a traced counter: Threefry as integer ops, the concrete
    fold's words on both backends."""
    gpu, cpu = both(lambda k, d: dsl.random.fold_in(k, d), KEY, np.int64(7))
    np.testing.assert_array_equal(gpu, dsl.random.fold_in(KEY, 7))
    np.testing.assert_array_equal(cpu, dsl.random.fold_in(KEY, 7))


def test_normal_and_scaled_uniform_bit_identical_to_cpu() -> None:
    """``normal`` (``erfinv`` through ``log1p`` and two polynomials) and ``uniform`` over a range (a
    product and a sum): the same bits on both targets, as api.md promises. Before, CUDA's ``log1p``
    was libdevice's and its products fused into the sums (on a GPU), an ulp apart."""

    def draws(k):
        a, b, c = dsl.random.split(k, 3)
        return (
            dsl.random.normal(a, (2, 128)),
            dsl.random.normal(b, (64,), dtype=np.float64),
            dsl.random.uniform(c, (5, 9), minval=-3.0, maxval=7.5),
        )

    for key in (KEY, dsl.random.key(7)):
        gpu, cpu = both(draws, key)
        for g, c in zip(gpu, cpu, strict=True):
            assert g.dtype == c.dtype
            np.testing.assert_array_equal(g, c)


def test_log1p_bit_identical_to_cpu() -> None:
    """``log1p`` is exactmath's on both targets: the same bits, special values included."""
    x = np.concatenate(
        [np.linspace(-1.25, 3.0, 53), [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -0.29289321]]
    )
    for dtype in (np.float32, np.float64):
        gpu, cpu = both(lambda x: dnp.log1p(x) * 3.0 + x, x.astype(dtype))
        np.testing.assert_array_equal(gpu, cpu)
        assert gpu.dtype == dtype


def test_dropout_gradient() -> None:
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)

    def loss(x, k):
        return (dnp.tanh(dsl.nn.dropout(k, x, 0.25)) * 2.0).sum()

    gpu, cpu = both(dsl.grad(loss), x, KEY)
    np.testing.assert_allclose(gpu, cpu, rtol=1e-6, atol=1e-6)
    assert np.count_nonzero(gpu) == np.count_nonzero(
        dsl.compile(lambda k, x: dsl.nn.dropout(k, x, 0.25))(KEY, x)
    )
