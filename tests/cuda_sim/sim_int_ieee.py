"""Integer and IEEE semantics on the CUDA backend: ``tests/test_int_ieee_semantics.py``'s table of
programs (bitwise ops, shifts past the bit width, integer division by 0 and MIN // -1, signed zeros
through the simplifier, Python int arguments) against NumPy, compiled for ``target="cuda"``."""

from __future__ import annotations

import numpy as np
import pytest
import test_int_ieee_semantics as semantics


@pytest.mark.parametrize("name", sorted(semantics.CASES))
def test_against_numpy_on_cuda(name: str) -> None:
    case = semantics.CASES[name]
    semantics.assert_same(semantics.compiled_result(case, "cuda"), semantics.numpy_result(case), name)


def test_python_int_argument_out_of_int32_raises_on_cuda() -> None:
    import dsl

    f = dsl.compile(lambda a, s: a + s, target="cuda")
    a = np.arange(3, dtype=np.int32)
    np.testing.assert_array_equal(f(a, 5), a + 5)
    with pytest.raises(OverflowError, match="out of bounds for int32"):
        f(a, 2**40)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_powers_past_65536_wrap_on_cuda(dtype) -> None:
    """``exactmath.ipow`` on CUDA (numba-cuda's own integer ``**`` takes exponents past 65536 through
    float64 ``pow`` as Numba's CPU does); the simulator runs its Python."""
    import dsl

    x = np.array([3, -3, 7, 5, 2, 0, 1, -1], dtype)
    y = np.array([65536, 65537, 2**31 - 1, 100_003, 64, 70_000, 2**30, 99_999], dtype)
    got = dsl.compile(lambda x, y: x**y, target="cuda")(x, y)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(
            np.asarray(got.copy_to_host() if hasattr(got, "copy_to_host") else got), x**y
        )
