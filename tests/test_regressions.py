"""Bugs found by the reliability work (issue #8), each pinned by the smallest program that showed it.

Fixed: ``compiler/passes/plan.py`` (an argument returned as a result counts as read at the end of
the program), ``compiler/kernel/emit.py`` (fused loop bodies evaluated without recursion).

Found elsewhere and tested beside their subject: a truncated or garbled Numba cache file made every
later call raise (``test_module_cache.py``); interleaved views of one array (``x[::2]``, ``x[1::2]``)
were refused as aliasing (``test_call_safety.py``); several errors lacked the user's file and line
(``test_errors.py``).
"""

from __future__ import annotations

import numpy as np
from helpers import python_kernels

import dsl
import dsl.numpy as dnp


def test_a_fused_chain_thousands_of_ops_deep() -> None:
    # Code generation evaluated a fused loop body recursively: a chain of ~1,000 elementwise ops in
    # one kernel raised RecursionError (found compiling a 10,000-op program, test_limits.py).
    def chain(x):
        for _ in range(2500):
            x = dnp.sin(x) + 0.5
        return x

    x = np.linspace(-1, 1, 5)
    with python_kernels():
        got = dsl.compile(chain)(x)
    want = x
    for _ in range(2500):
        want = np.sin(want) + 0.5
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_returned_argument_keeps_its_old_value_when_the_program_writes_it() -> None:
    # Found by the fuzzer (program: ``v2 = v0.copy(); v0[...] = v1; return v2``). The copy folds to
    # the argument itself, returned by copying it as the driver returns; the planner stored the new
    # value straight into the caller's array first, so the result was the new value.
    def f(x, y):
        z = x.copy()
        x[...] = y
        return z

    for shape in ((), (3,)):
        x, y = np.full(shape, 1.0), np.full(shape, 2.0)
        for inplace in (True, False):
            target = x.copy()
            np.testing.assert_array_equal(dsl.compile(f, inplace=inplace)(target, y), x)
            np.testing.assert_array_equal(target, y)


def test_returned_donated_argument_is_not_used_for_temporaries() -> None:
    # The neighbouring case of the same rule (it held before the fix too, through another check): a
    # donated argument that is also returned must keep its value.
    x = np.linspace(0.0, 1.0, 5)
    got = dsl.compile(lambda x: (x, dnp.exp(x) * 2.0, x.sum()), donate_argnums=0)(x.copy())
    np.testing.assert_array_equal(got[0], x)
    np.testing.assert_allclose(got[1], np.exp(x) * 2.0)


# Found by the widened differential fuzzer (tests/test_fuzz_programs.py, issue 25).


def test_sign_of_negative_zero_is_positive_zero_as_numpy() -> None:
    x = np.array([-0.0, 0.0, -2.0, 3.0, np.nan])
    got = dsl.compile(dnp.sign)(x)
    np.testing.assert_array_equal(got, np.sign(x))
    assert not np.signbit(got[:2]).any()  # assert_array_equal does not tell -0.0 from 0.0


def test_float_floor_division_keeps_the_sign_of_a_zero_quotient() -> None:
    x = np.array([-0.0, 0.0, -0.5, 0.5, 3.0])
    for y in (2.0, -1.5):
        got, want = dsl.compile(lambda a, y=y: a // y)(x), x // y
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_floor_division_is_piecewise_constant_for_grad() -> None:
    """JAX's floor_divide has derivative 0 everywhere, also at a zero divisor (a / b is inf there)."""
    assert dsl.grad(lambda v: dnp.floor_divide(v, 0.0))(np.array(0.3)) == 0.0
    g = dsl.grad(lambda v: (v // 2.0 + v % 2.0).sum())(np.array([0.3, 3.1]))
    np.testing.assert_array_equal(g, [1.0, 1.0])  # d(v % 2)/dv = 1, d(v // 2)/dv = 0


def test_module_run_as_python_gives_nan_outside_a_functions_domain() -> None:
    """A generated module run as plain Python computes what the compiled one does: Python's own
    ``math.sin(inf)`` raises "math domain error" where the libm call gives NaN."""
    x = np.array([np.inf, -1.0, 0.0])
    with python_kernels():
        for f in (dnp.sin, dnp.cos, dnp.log, dnp.sqrt, dnp.log1p):
            with np.errstate(all="ignore"):
                np.testing.assert_array_equal(dsl.compile(f)(x), getattr(np, f.__name__)(x))


def test_a_reduction_over_an_empty_concatenation() -> None:
    """Every operand of a concatenation empty along its axis, read by a reduction over that axis (a
    loop of no trips whose body is still generated): its read recursed without end (found by the
    fuzzer's CUDA gradient batches, tests/cuda_sim/sim_fuzz.py; the CPU's kernels the same)."""
    x = np.zeros((3, 0, 2))
    got = dsl.compile(lambda x: dnp.concatenate((x, x), axis=1).sum(axis=1) + 1.0)(x)
    np.testing.assert_array_equal(got, np.ones((3, 2)))
    grad = dsl.grad(lambda x: (dnp.concatenate((x, x), axis=1).sum(axis=1) ** 2).sum())
    assert dsl.compile(grad)(x).shape == (3, 0, 2)
