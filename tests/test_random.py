"""dsl.random: keys, split, bits, uniform, normal, bernoulli and dsl.nn.dropout.

Bit for bit against JAX (``jax_threefry_partitionable``, its default) and against the primitive's
NumPy reference; statistics over 10**6 samples; the draw fused into its reader (a dropout is one
kernel, forward and backward, and stores no mask); the same key gives the same numbers in any call
order. The CUDA simulator's half is tests/cuda_sim/sim_random.py.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cuda_ptx import PTX_AVAILABLE, PTX_UNAVAILABLE, check_ptx

import dsl
import dsl.numpy as dnp
from compiler.interpreter import interpret
from compiler.passes.fuse import fuse
from compiler.pipeline import Options, run_passes
from compiler.prims.random import random_bits, random_bits_reference, threefry2x32, threefry2x32_bits

jax.config.update("jax_enable_x64", True)  # 64-bit seeds and float64 draws; dtypes are explicit below

SEEDS = (0, 1, 42, 2**31 - 1, 2**40 + 3, -1)


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory: pytest.TempPathFactory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DSL_CACHE_DIR", str(tmp_path_factory.mktemp("dslc_cache")))
        yield


def jax_key(seed: int) -> jax.Array:
    return jax.random.PRNGKey(seed)


def key_data(k: jax.Array) -> np.ndarray:
    return np.asarray(jax.random.key_data(k)).astype(np.int64)


# ---- keys and the generator ---------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_key_and_concrete_split_are_jaxs(seed: int) -> None:
    k = dsl.random.key(seed)
    assert k.dtype == np.int64 and k.shape == (2,)
    np.testing.assert_array_equal(k, key_data(jax_key(seed)))
    for num in (2, 3):
        np.testing.assert_array_equal(
            dsl.random.split(k, num), key_data(jax.random.split(jax_key(seed), num))
        )


def test_reference_and_scalar_helper_are_jaxs_64_bit_bits() -> None:
    """The primitive's NumPy reference and the scalar helper both backends print are two writings of
    one function: JAX's 64 random bits (seen as int64)."""
    for seed in SEEDS:
        k = key_data(jax_key(seed))
        want = np.asarray(jax.random.bits(jax_key(seed), (3, 7), jnp.uint64)).view(np.int64)
        np.testing.assert_array_equal(random_bits_reference(k, (3, 7)), want)
        helper = [threefry2x32_bits(int(k[0]), int(k[1]), n) for n in range(21)]
        np.testing.assert_array_equal(np.array(helper).reshape(3, 7), want)


def test_counter_high_word_is_used() -> None:
    """Positions past 2**32 put their high bits in the first counter word, as JAX's iota_2x32."""
    k = key_data(jax_key(7))
    n = (1 << 32) + 5
    x0, x1 = threefry2x32(k, np.array([n >> 32], np.uint32), np.array([n & 0xFFFFFFFF], np.uint32))
    want = ((x0.astype(np.uint64) << np.uint64(32)) | x1.astype(np.uint64)).view(np.int64)[0]
    assert threefry2x32_bits(int(k[0]), int(k[1]), n) == want != threefry2x32_bits(int(k[0]), int(k[1]), 5)


def test_draws_are_jaxs_bit_for_bit() -> None:
    @dsl.compile
    def draws(key, lo, hi):
        a, b = dsl.random.split(key)
        return (
            dsl.random.bits(key, (3, 4)),
            dsl.random.uniform(a, (1000,)),
            dsl.random.uniform(b, (7, 5), minval=lo, maxval=hi),
            dsl.random.uniform(a, (500,), dtype=np.float64),
            dsl.random.bernoulli(key, 0.3, (50,)),
            dsl.random.split(key, 3),
        )

    lo, hi = np.float32(-2.0), np.linspace(1, 3, 5, dtype=np.float32)
    bits, u, scaled, u64, coin, keys = draws(dsl.random.key(42), lo, hi)
    jk = jax_key(42)
    ja, jb = jax.random.split(jk)
    np.testing.assert_array_equal(bits, np.asarray(jax.random.bits(jk, (3, 4), jnp.uint32)))
    assert u.dtype == np.float32 and u64.dtype == np.float64
    np.testing.assert_array_equal(u, jax.random.uniform(ja, (1000,), jnp.float32))
    # A range scales JAX's [0, 1) floats with a multiply and an add, each rounded (XLA fuses them:
    # an ulp apart at most).
    unit = np.asarray(jax.random.uniform(jb, (7, 5), jnp.float32))
    np.testing.assert_array_equal(scaled, np.maximum(lo, unit * (hi - lo) + lo))
    np.testing.assert_array_max_ulp(
        scaled, np.asarray(jax.random.uniform(jb, (7, 5), jnp.float32, lo, hi)), 1
    )
    np.testing.assert_array_equal(u64, jax.random.uniform(ja, (500,), jnp.float64))
    np.testing.assert_array_equal(coin, jax.random.bernoulli(jk, jnp.float32(0.3), (50,)))
    np.testing.assert_array_equal(keys, key_data(jax.random.split(jk, 3)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_normal_is_jaxs_to_a_few_ulp(dtype) -> None:
    """JAX's transform (sqrt(2) erfinv(u) with XLA's polynomials) of JAX's uniforms (bit for bit).
    XLA's CPU code evaluates erfinv's polynomials and its log1p's Cephes rational with fused
    multiply-adds and calls its own log1p (glibc's log for float64, its own for float32): with
    JAX's log1p and exact FMAs these same polynomials give JAX's erf_inv bit for bit; with ours,
    about 5% (float32) and 11% (float64) of the values differ, by at most 3 and 30 ulp
    (measured on 200,000 draws; dsl/random.py)."""
    z = dsl.compile(lambda k: dsl.random.normal(k, (20000,), dtype))(dsl.random.key(3))
    want = np.asarray(jax.random.normal(jax_key(3), (20000,), dtype))
    assert z.dtype == dtype
    ulp = np.spacing(np.abs(want).astype(dtype))
    assert np.max(np.abs(z - want) / ulp) <= (8 if dtype == np.float32 else 64)
    assert np.mean(z == want) > 0.5


@pytest.mark.parametrize("seed", [0, 42, 2**40 + 3])
def test_fold_in_is_jaxs(seed: int) -> None:
    """``fold_in`` with a concrete key, a traced key and a traced counter (a loop's), over a batch of
    keys: JAX's ``fold_in`` bit for bit (before: no ``dsl.random.fold_in``)."""
    data = (0, 7, 2**31 + 5, 2**32 - 1)
    jk = jax_key(seed)
    want = [key_data(jax.random.fold_in(jk, d)) for d in data]
    for d, w in zip(data, want, strict=True):
        np.testing.assert_array_equal(dsl.random.fold_in(dsl.random.key(seed), d), w)

    @dsl.compile
    def traced(k, d):
        keys = dsl.random.split(k, 3)
        in_loop = dsl.fori_loop(0, 3, lambda i, acc: acc + dsl.random.fold_in(k, i), dnp.zeros(2, np.int64))
        return dsl.random.fold_in(k, d), dsl.random.fold_in(k, 7), dsl.random.fold_in(keys, d), in_loop

    for d, w in zip(data, want, strict=True):
        got, static, batch, in_loop = traced(dsl.random.key(seed), np.int64(d))
        np.testing.assert_array_equal(got, w)
        np.testing.assert_array_equal(static, want[1])
        split = key_data(jax.random.split(jk, 3))
        np.testing.assert_array_equal(
            batch,
            [key_data(jax.random.fold_in(jax.random.wrap_key_data(s.astype(np.uint32)), d)) for s in split],
        )
        np.testing.assert_array_equal(
            in_loop, sum(key_data(jax.random.fold_in(jk, i)).astype(np.int64) for i in range(3))
        )


def test_traced_key_and_split_match_concrete() -> None:
    @dsl.compile
    def keys(seed):
        k = dsl.random.key(seed)
        return k, dsl.random.split(k, 4)

    for seed in (5, 2**40 + 3):
        k, ks = keys(np.int64(seed))
        np.testing.assert_array_equal(k, dsl.random.key(seed))
        np.testing.assert_array_equal(ks, dsl.random.split(dsl.random.key(seed), 4))


def test_narrow_seeds_and_numpy_float_p_are_jaxs() -> None:
    """A seed of fewer than 64 bits has no high word in JAX (``PRNGKey(np.int32(-5))`` is ``[0,
    2**32 - 5]``), concrete or traced; a NumPy float64 ``p`` is not weak: float64 uniforms."""
    for seed in (np.int32(-5), np.int16(-3), np.uint32(4_000_000_000), np.int32(7)):
        want = key_data(jax_key(seed))
        np.testing.assert_array_equal(dsl.random.key(seed), want)
        if seed.dtype == np.int32:  # (traced arguments are int32, int64, floats or bool)
            np.testing.assert_array_equal(dsl.compile(dsl.random.key)(seed), want)
    got = dsl.compile(lambda k: dsl.random.bernoulli(k, np.float64(0.3), (200,)))(dsl.random.key(7))
    np.testing.assert_array_equal(got, np.asarray(jax.random.bernoulli(jax_key(7), np.float64(0.3), (200,))))


def test_same_key_same_numbers_in_any_order() -> None:
    key = dsl.random.key(11)

    @dsl.compile
    def forward(k):
        return dsl.random.uniform(k, (64,)), dsl.random.normal(k, (8, 8))

    @dsl.compile
    def backward(k):
        z = dsl.random.normal(k, (8, 8))
        return dsl.random.uniform(k, (64,)) + 0.0, z

    u1, z1 = forward(key)
    u2, z2 = backward(key)
    np.testing.assert_array_equal(u1, u2)
    np.testing.assert_array_equal(z1, z2)
    np.testing.assert_array_equal(forward(key)[0], u1)  # and again: no state between calls


def test_wrong_keys_and_dtypes_are_refused() -> None:
    with pytest.raises(dsl.ShapeError, match="shape \\(2,\\)"):
        dsl.compile(lambda k: dsl.random.uniform(k, (3,)))(np.zeros(3, np.int64))
    with pytest.raises(dsl.ShapeError, match="floating-point"):
        dsl.compile(lambda k: dsl.random.uniform(k, (3,), dtype=np.int32))(dsl.random.key(0))
    with pytest.raises(dsl.ShapeError, match="rate"):
        dsl.compile(lambda k, x: dsl.nn.dropout(k, x, 1.5))(dsl.random.key(0), np.ones(3))


# ---- statistics -------------------------------------------------------------------------------

N = 10**6


def test_uniform_normal_bernoulli_statistics() -> None:
    @dsl.compile
    def draws(key):
        a, b, c = dsl.random.split(key, 3)
        return dsl.random.uniform(a, (N,)), dsl.random.normal(b, (N,)), dsl.random.bernoulli(c, 0.3, (N,))

    u, z, coin = draws(dsl.random.key(2024))
    assert 0.0 <= u.min() and u.max() < 1.0
    # Means within 5 standard errors; variances within 1%.
    assert abs(u.mean() - 0.5) < 5 * np.sqrt(1 / 12 / N) and abs(u.var() - 1 / 12) < 1e-3
    assert abs(z.mean()) < 5 / np.sqrt(N) and abs(z.var() - 1.0) < 0.01
    assert abs(coin.mean() - 0.3) < 5 * np.sqrt(0.3 * 0.7 / N)
    # Chi-square over 100 equal bins (99 degrees of freedom: mean 99, sd 14): below mean + 5 sd.
    counts = np.bincount((u * 100).astype(np.int64), minlength=100)
    chi2 = ((counts - N / 100) ** 2 / (N / 100)).sum()
    assert chi2 < 99 + 5 * 14, chi2
    # The normal's quartiles and tails.
    q = np.quantile(z, [0.25, 0.5, 0.75])
    np.testing.assert_allclose(q, [-0.6744898, 0.0, 0.6744898], atol=0.01)
    assert abs(np.mean(np.abs(z) > 3) - 0.0026998) < 5 * np.sqrt(0.0027 / N)


def test_split_keys_are_independent() -> None:
    """Streams of sibling keys are uncorrelated (and not shifted copies of each other)."""
    u = dsl.compile(lambda k: [dsl.random.uniform(s, (N // 10,)) for s in dsl.random.split(k, 3)])(
        dsl.random.key(9)
    )
    for a, b in ((0, 1), (0, 2), (1, 2)):
        assert abs(np.corrcoef(u[a], u[b])[0, 1]) < 5 / np.sqrt(N // 10)
        assert abs(np.corrcoef(u[a][1:], u[b][:-1])[0, 1]) < 5 / np.sqrt(N // 10)


# ---- dropout -----------------------------------------------------------------------------------


def test_dropout_is_flaxs_and_its_gradient_flows_through_x() -> None:
    rate = 0.25
    x = np.random.default_rng(0).standard_normal((64, 33)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((64, 33)).astype(np.float32)

    def loss(x, w, key):
        return (dsl.nn.dropout(key, x, rate) * w).sum()

    key = dsl.random.key(5)
    y = dsl.compile(lambda k, x: dsl.nn.dropout(k, x, rate))(key, x)
    keep = np.asarray(jax.random.bernoulli(jax_key(5), jnp.float32(1 - rate), x.shape))
    np.testing.assert_array_equal(y, np.where(keep, x / np.float32(1 - rate), np.float32(0)))
    assert abs(keep.mean() - (1 - rate)) < 0.03
    g = dsl.grad(loss)(x, w, key)
    np.testing.assert_allclose(g, np.where(keep, w / np.float32(1 - rate), 0), rtol=1e-6)
    assert dsl.compile(lambda k, x: dsl.nn.dropout(k, x, 0.0))(key, x) is not None
    np.testing.assert_array_equal(dsl.compile(lambda k, x: dsl.nn.dropout(k, x, 1.0))(key, x), 0 * x)


def _groups(fn, *args):
    func = dsl.compile(fn)._trace(args)[0]
    return fuse(run_passes(func, Options())["optimized"])


def test_dropout_is_one_kernel_and_the_mask_is_never_stored() -> None:
    """random_bits is an index map for fusion: inlined into the kernel reading it (forward: one loop
    over x), and recomputed in the backward instead of stored."""
    x = np.ones((256, 128), np.float32)
    key = dsl.random.key(0)
    plan = _groups(lambda k, x: dsl.nn.dropout(k, x, 0.5), key, x)
    assert len(plan.groups) == 1
    assert any(op.prim is random_bits for op in plan.groups[0].ops)

    def loss(x, k):
        return (dnp.tanh(dsl.nn.dropout(k, x, 0.5)) ** 2).sum()

    plan = _groups(dsl.value_and_grad(loss), x, key)
    # Two kernels: the forward (with the sum) also writes the keep mask, one byte per element, which
    # the backward reads; the random bits themselves are never stored.
    assert len(plan.groups) == 2
    stored = {str(v.type.dtype) for v in plan.materialized if v.type.size == x.size}
    assert stored == {"f32", "i1"}, stored
    assert all(
        op.result not in plan.materialized for g in plan.groups for op in g.ops if op.prim is random_bits
    )


@pytest.mark.skipif(not PTX_AVAILABLE, reason=PTX_UNAVAILABLE)
def test_cuda_kernels_compile_to_ptx() -> None:
    """Draws fused into CUDA kernels (a loop, a reduction's prologue, a softmax row band) compile
    for sm_80 and sm_90: the Threefry helper is inlined, so no device-function call needs a driver."""

    def loss(x, w, key):
        k1, k2 = dsl.random.split(key)
        h = dsl.nn.dropout(k1, dsl.nn.softmax(x @ w, axis=-1), 0.1)
        return (h * dsl.random.normal(k2, h.shape)).sum() + dsl.random.uniform(key, (7,), np.float64).sum()

    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((256, 64), np.float32), rng.standard_normal((64, 128), np.float32)
    func = dsl.compile(dsl.value_and_grad(loss, argnums=(0, 1)), target="cpu").lower(x, w, dsl.random.key(0))
    assert check_ptx(func._program.stages["optimized"], "dropout after softmax") >= 2


def test_draws_inside_row_bands_and_reductions_match_the_interpreter() -> None:
    """A dropout after a softmax (a row band on the CPU), a normal draw in a reduction's prologue,
    forward and backward: the compiled program against the reference interpreter, exactly where no
    float rounding differs (the masks) and to float tolerance elsewhere."""

    def loss(x, w, key):
        k1, k2 = dsl.random.split(key)
        h = dsl.nn.dropout(k1, dsl.nn.softmax(x @ w, axis=-1), 0.3)
        return (h * dsl.random.normal(k2, h.shape)).sum()

    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((64, 16), np.float32), rng.standard_normal((16, 128), np.float32)
    args = (x, w, dsl.random.key(4))
    fn = dsl.value_and_grad(loss, argnums=(0, 1))
    value, (gx, gw) = dsl.compile(fn)(*args)
    want = interpret(dsl.compile(fn)._trace(args)[0], list(args))
    np.testing.assert_allclose(value, want[0], rtol=1e-4)
    np.testing.assert_allclose(gx, want[1], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gw, want[2], rtol=1e-4, atol=1e-5)


def test_forward_mode_through_dropout() -> None:
    """jvp and jacfwd see the mask as a constant: the tangent is t * keep / (1 - rate)."""
    key, rate = dsl.random.key(1), 0.5
    x, t = np.linspace(-1, 1, 10, dtype=np.float32), np.ones(10, np.float32)

    def f(x):
        return dsl.nn.dropout(key, x, rate) * 3.0

    keep = np.asarray(jax.random.bernoulli(jax_key(1), jnp.float32(1 - rate), x.shape))
    out, tangent = dsl.jvp(f, (x,), (t,))
    np.testing.assert_allclose(tangent, np.where(keep, 3.0 / (1 - rate), 0.0))
    np.testing.assert_allclose(dsl.jacfwd(f)(x), np.diag(np.where(keep, 3.0 / (1 - rate), 0.0)))


def test_vmap_over_keys_is_one_draw_per_call() -> None:
    """random_bits' batching rule: a batch of keys is one op over keys of shape (B, 2), not one op
    per example (which compiler/batching.py refuses past 64 examples)."""
    keys = dsl.random.split(dsl.random.key(8), 100)

    def draw(key, x):
        return dsl.random.uniform(key, (3,)) + dsl.nn.dropout(key, x, 0.5)

    x = np.ones(3, np.float32)
    got = dsl.vmap(draw, in_axes=(0, None))(keys, x)
    want = np.stack([dsl.compile(draw)(k, x) for k in keys[:5]])
    np.testing.assert_array_equal(got[:5], want)
    assert len({tuple(row) for row in got}) == 100  # every example its own numbers
    traced = dsl.compile(dsl.vmap(draw, in_axes=(0, None)))._trace((keys, x))[0]
    draws = [op for op in traced.ops if op.prim is random_bits]
    assert len(draws) == 2 and all(op.result.type.shape == (100, 3) for op in draws)  # uniform, dropout


def test_bernoulli_with_an_array_of_probabilities() -> None:
    """p's dtype chooses the uniforms (float64 here), p broadcasts to the shape, as JAX."""
    p = np.array([[0.1], [0.5], [0.9]])
    key = dsl.random.key(12)
    got = dsl.compile(lambda k, p: dsl.random.bernoulli(k, p, (3, 400)))(key, p)
    np.testing.assert_array_equal(got, jax.random.bernoulli(jax_key(12), p, (3, 400)))
    np.testing.assert_allclose(got.mean(axis=1), [0.1, 0.5, 0.9], atol=0.08)
    same = dsl.compile(lambda k, p: dsl.random.bernoulli(k, p))(key, np.full((2, 3), 0.5, np.float32))
    assert same.shape == (2, 3) and same.dtype == np.bool_
    with pytest.raises(dsl.ShapeError, match="does not broadcast"):
        dsl.compile(lambda k, p: dsl.random.bernoulli(k, p, (4,)))(key, p)
