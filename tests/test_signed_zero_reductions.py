"""max / min reductions over both signed zeros (issue 25; docs/semantics.md): -0.0 orders below +0.0,
as in JAX (max over {-0.0, 0.0} is 0.0 and min is -0.0, whatever their order), and NaN propagates.

Every implementation follows that order: the NumPy reference (and so the reference interpreter), the
CPU's keyed loops and its compare-select loops, the partial results of its chunked reductions and of
its NumPy-assisted kernels, and the CUDA backend (``tests/cuda_sim/sim_signed_zero_reductions.py``
runs ``check_table`` there, and each CUDA reduction strategy). The oracle here orders the floats
through their bits (``ordered``), independently of each implementation. A tie of -0.0 and 0.0
shares the gradient as JAX does (they are equal). Elementwise ``maximum`` / ``minimum`` keep
NumPy's rule (of two equal operands, the second) on both backends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from helpers import interpret_fn, python_kernels

import dsl
import dsl.numpy as dnp
from compiler.compilation import option_defaults
from compiler.prims import reduction

SHAPE = (3, 4, 5)
AXES: tuple[Any, ...] = (None, 0, 1, 2, (0, 2), (1, 2))
REDUCTIONS = {"max": dnp.max, "min": dnp.min}


def ordered(x: np.ndarray, which: str, axis: Any = None, keepdims: bool = False) -> np.ndarray:
    """The contract's max / min: over the floats' bits mapped to integers of the same order (negative
    floats' magnitude bits flipped, so -0.0 < +0.0), NaN wherever one is reduced."""
    x = np.asarray(x)
    bits = x.view(np.int32 if x.dtype == np.float32 else np.int64)
    flip = np.iinfo(bits.dtype).max
    keys = np.where(bits >= 0, bits, bits ^ flip)
    k = np.asarray(keys.max(axis, keepdims=keepdims) if which == "max" else keys.min(axis, keepdims=keepdims))
    out = np.where(k >= 0, k, k ^ flip).astype(bits.dtype).view(x.dtype)
    return np.where(np.isnan(x).any(axis, keepdims=keepdims), np.nan, out).astype(x.dtype)


def assert_identical(got: Any, want: Any, what: str) -> None:
    """Same dtype and shape, same values, NaN in the same places, numbers (zeros) of the same sign."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape, want.shape)
    np.testing.assert_array_equal(got, want, err_msg=what)
    numbers = ~np.isnan(want)  # (IEEE leaves the sign of a NaN unspecified)
    np.testing.assert_array_equal(
        np.signbit(got[numbers]), np.signbit(want[numbers]), err_msg=f"{what}: signs"
    )


def signed_zero_arrays(dtype: Any, middle: bool = True, randoms: int = 4) -> Iterator[tuple[str, np.ndarray]]:
    """Arrays of ``SHAPE`` mixing -0.0 and 0.0: along every axis a plane of one zero among the other
    at the first, a middle (``middle``) and the last position; ``randoms`` random sign patterns;
    zeros with NaN; zeros with negative and positive numbers."""
    for axis in range(len(SHAPE)):
        for pos in (0, SHAPE[axis] // 2, SHAPE[axis] - 1) if middle else (0, SHAPE[axis] - 1):
            for inner, outer in ((0.0, -0.0), (-0.0, 0.0)):
                x = np.full(SHAPE, outer, dtype)
                index = [slice(None)] * len(SHAPE)
                index[axis] = slice(pos, pos + 1)
                x[tuple(index)] = inner
                yield f"{inner} at {pos} of axis {axis} among {outer}", x
    rng = np.random.default_rng(25)
    for k in range(4):
        signs = np.where(rng.random(SHAPE) < 0.5, -0.0, 0.0).astype(dtype)
        if k < randoms:
            yield f"random signs {k}", signs
    x = np.where(rng.random(SHAPE) < 0.5, -0.0, 0.0).astype(dtype)
    x[1, 2, 3] = np.nan
    yield "zeros and a NaN", x
    x = np.where(rng.random(SHAPE) < 0.5, -0.0, 0.0).astype(dtype)
    x[0] = -1.5
    x[2, :, 1:3] = 2.0
    yield "zeros among numbers", x


def all_reductions(prologue: Callable[[Any], Any]) -> Callable[[Any], tuple[Any, ...]]:
    """One function returning max and min of ``prologue(x)`` over every axis form in ``AXES``,
    with and without keepdims (one compile for all of them)."""

    def fn(x: Any) -> tuple[Any, ...]:
        y = prologue(x)
        return tuple(
            REDUCTIONS[which](y, axis=axis, keepdims=keepdims)
            for which in REDUCTIONS
            for axis in AXES
            for keepdims in (False, True)
        )

    return fn


def expected_reductions(
    x: np.ndarray, prologue: Callable[[Any], Any] = lambda x: x
) -> tuple[np.ndarray, ...]:
    x = prologue(x)
    return tuple(
        ordered(x, which, axis, keepdims)
        for which in REDUCTIONS
        for axis in AXES
        for keepdims in (False, True)
    )


def unfused(x: Any) -> Any:
    return x


def fused(x: Any) -> Any:  # an elementwise prologue fused into each reduction's loop (keeps signs)
    return x * 2.0


PROLOGUES = {"unfused": unfused, "fused": fused}


def check_table(target: str, dtype: Any, prologue: str, **arrays: Any) -> None:
    """Every array of ``signed_zero_arrays(dtype, **arrays)`` through every reduction of
    ``all_reductions``."""
    f = dsl.compile(all_reductions(PROLOGUES[prologue]), target=target)
    for name, x in signed_zero_arrays(dtype, **arrays):
        got = f(x.copy())
        for k, (g, w) in enumerate(zip(got, expected_reductions(x, PROLOGUES[prologue]), strict=True)):
            assert_identical(g, w, f"{target} {prologue} {np.dtype(dtype).name}, {name}: output {k}")


@pytest.mark.parametrize("prologue", sorted(PROLOGUES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_axis_form_on_the_cpu(dtype: Any, prologue: str) -> None:
    check_table("cpu", dtype, prologue)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cpu_compare_select_loops_without_keys(dtype: Any) -> None:
    # "keyed_minmax" off: the reducer's combine, as on the CUDA backend.
    with switched_off("keyed_minmax"):
        check_table("cpu", dtype, "unfused")


def test_generated_modules_run_as_python() -> None:
    with python_kernels():
        check_table("cpu", np.float64, "fused")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reference_implementation(dtype: Any) -> None:
    """The prims' NumPy references (the interpreter's), every axis form; ``keepdims`` is a reshape."""
    for name, x in signed_zero_arrays(dtype):
        for prim, which in ((reduction.reduce_max, "max"), (reduction.reduce_min, "min")):
            for axes in ((), (0,), (1,), (2,), (0, 2), (1, 2), (0, 1, 2)):
                got = prim.run_reference([x], {"axes": axes})
                assert_identical(got, ordered(x, which, axes), f"{prim.name} {axes}, {name}")


def test_interpreter() -> None:
    for dtype in (np.float32, np.float64):
        fn = all_reductions(fused)
        for name, x in signed_zero_arrays(dtype):
            want = expected_reductions(x, fused)
            for k, (g, w) in enumerate(zip(interpret_fn(fn, x.copy()), want, strict=True)):
                assert_identical(g, w, f"interpreter {np.dtype(dtype).name}, {name}: output {k}")


# ---- big reductions: the CPU's chunked and NumPy-assisted forms --------------------------------------


def halves(n: int, dtype: Any, first: float) -> np.ndarray:
    """``n`` zeros: the first half ``first``, the rest of the other sign (so chunks disagree)."""
    x = np.full(n, -first, dtype)
    x[: n // 2] = first
    return x


# Past the CPU's thresholds for partial results per chunk (parallel loops; NumPy-assisted kernels in
# chunks of rows), combined in order.
BIG = 1 << 18


@contextmanager
def switched_off(name: str) -> Iterator[None]:
    with option_defaults(**{name: False}):
        yield


def check_big(target: str, n: int = BIG, rows: int = 1024) -> None:
    """A full reduction, one over axis 0 keeping a row (chunks of rows), and a float64 one behind a
    transcendental prologue (the CPU's NumPy-assisted kernel, combining chunks with NumPy): each over
    zeros whose halves have opposite signs, in both orders."""
    for dtype in (np.float32, np.float64):
        for first in (-0.0, 0.0):
            x = halves(n, dtype, first)
            for which, fn in REDUCTIONS.items():
                got = dsl.compile(lambda v, fn=fn: fn(v), target=target)(x)
                assert_identical(got, ordered(x, which), f"{target} full {which} of {x.dtype}, {first} first")
                m = x.reshape(rows, -1)
                got = dsl.compile(lambda v, fn=fn: fn(v, axis=0), target=target)(m)
                assert_identical(got, ordered(m, which, 0), f"{target} axis-0 {which}, {first} first")
                if dtype == np.float64:
                    got = dsl.compile(lambda v, fn=fn: fn(dnp.sin(v), axis=0), target=target)(m)
                    assert_identical(got, ordered(m, which, 0), f"{target} NumPy-assisted {which}, {first}")


def test_big_reductions_on_the_cpu() -> None:
    check_big("cpu")


def test_big_reductions_on_the_cpu_without_keys() -> None:
    with switched_off("keyed_minmax"):
        check_big("cpu")


# ---- the fuzzer's findings (benchmarks/results/fuzz_campaign.md, seed 11) ---------------------------


def fuzz_program(np_like: Any, reduce_min: Callable[..., Any], written: tuple[slice, slice]) -> Callable:
    """The campaign's program: a min over zeros of both signs (``x % x`` has the divisor's sign)."""

    def program(v0: Any) -> Any:
        v1 = v0.transpose((2, 1, 0))
        v0[written] = 0.5
        v2 = np_like.broadcast_to(v1, (2, 2, 4, 2, 2))
        v3 = np_like.remainder(v2, v1)
        v4 = reduce_min(v3, axis=-3)
        v3[0::-2, 0::2] = 0.5
        return v0, v4

    return program


@pytest.mark.parametrize(
    "written", [(slice(1, None, -2), slice(0, None, -2)), (slice(1, None, -2), slice(1, None, -2))]
)
def test_fuzzer_min_over_remainders(written: tuple[slice, slice]) -> None:
    base = np.random.default_rng(1).standard_normal((4, 2, 4))
    strided = lambda: base.copy()[::2]  # noqa: E731 - the campaign's argument was a strided view
    want = fuzz_program(np, lambda v, axis: ordered(v, "min", axis), written)(strided())
    assert np.signbit(want[1][want[1] == 0]).any() and not np.signbit(want[1][want[1] == 0]).all()
    program = fuzz_program(dnp, dnp.min, written)
    for what, got in (
        ("compiled", dsl.compile(program)(strided())),
        ("interpreter", interpret_fn(program, strided())),
    ):
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_identical(g, w, f"{what}[{k}]")


# ---- gradients and elementwise maximum / minimum ------------------------------------------------------


@pytest.mark.parametrize("which", sorted(REDUCTIONS))
def test_gradient_shares_a_tie_of_signed_zeros_as_jax(which: str) -> None:
    # jax.grad(jnp.max)([0.0, -0.0, 0.0]) is [1/3, 1/3, 1/3] (jnp.min too): -0.0 == 0.0 is a tie.
    fn = REDUCTIONS[which]
    for x in ([0.0, -0.0, 0.0], [-0.0, 0.0, -0.0], [-0.0, 0.0, -1.0]):
        x = np.array(x)
        got = dsl.grad(lambda v, fn=fn: fn(v))(x)
        ties = x == ordered(x, which)
        np.testing.assert_allclose(got, ties / ties.sum(), rtol=1e-15)


def test_elementwise_maximum_and_minimum_keep_numpys_second_operand() -> None:
    """np.maximum(-0.0, 0.0) is 0.0 and np.maximum(0.0, -0.0) is -0.0 (of equal operands the second;
    JAX orders them): the CPU, the interpreter and, in the CUDA suite, the GPU give NumPy's."""
    a = np.array([-0.0, 0.0, -0.0, 0.0, np.nan, 1.0])
    b = np.array([0.0, -0.0, -0.0, 0.0, 0.0, np.nan])

    def both(x: Any, y: Any) -> Any:
        return dnp.maximum(x, y), dnp.minimum(x, y)

    want = (np.maximum(a, b), np.minimum(a, b))
    for what, got in (("compiled", dsl.compile(both)(a, b)), ("interpreter", interpret_fn(both, a, b))):
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_identical(g, w, f"{what}[{k}]")


def test_clip_keeps_x_at_a_bound_as_numpy() -> None:
    """np.clip(-0.0, 0.0, 1.0) is -0.0: with two one-element bounds NumPy keeps ``x`` where it equals
    one; with an array bound (or one bound) it gives the bound, as np.maximum(x, lo) does. NaN in
    ``x`` or in a bound propagates, and ``lo > hi`` gives ``hi``."""
    x = np.array([-0.0, 0.0, -0.0, 0.0, 1.0, -1.0, np.nan, 0.5])
    arr0 = np.zeros_like(x)
    cases: list[tuple[Any, Any]] = [
        (0.0, 1.0),
        (-0.0, 1.0),
        (-1.0, 0.0),
        (-1.0, -0.0),
        (0.0, 0.0),
        (0.0, -0.0),
        (-0.0, -0.0),
        (np.float32(0.0), np.array([1.0])),
        (np.nan, 1.0),
        (0.0, np.nan),
        (2.0, 1.0),
        (arr0, 1.0),
        (-1.0, arr0),
        (None, 0.0),
        (-0.0, None),
        (0.0, None),
    ]
    for dtype in (np.float64, np.float32):
        xd = x.astype(dtype)
        for k, (lo, hi) in enumerate(cases):
            fn = lambda v, lo=lo, hi=hi: dnp.clip(v, lo, hi)  # noqa: E731
            want, what = np.clip(xd, lo, hi), f"clip({dtype.__name__}, {lo!r}, {hi!r})"
            assert_identical(interpret_fn(fn, xd), want, what)
            if dtype is np.float32 and k in (0, 5, 11):  # compiled: the CPU's max/min loops
                assert_identical(dsl.compile(fn)(xd), want, what)
