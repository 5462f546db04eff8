"""Bugs found by the reliability work (issue #8), each pinned by the smallest program that showed it.

Fixed: ``compiler/passes/plan.py`` (an argument returned as a result counts as read at the end of
the program), ``compiler/codegen/emit.py`` (fused loop bodies evaluated without recursion).

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
