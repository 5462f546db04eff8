"""max / min reductions over both signed zeros on the CUDA backend (``tests/test_signed_zero_reductions.py``
on ``target="cuda"``): -0.0 orders below +0.0 in every reduction strategy (a thread per output, a block
and its tree per output, columns side by side, two passes through partial results), NaN propagates;
elementwise maximum / minimum keep NumPy's rule as on the CPU."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
import test_signed_zero_reductions as zeros

import dsl
import dsl.numpy as dnp


@pytest.mark.parametrize(("dtype", "prologue"), [(np.float32, "fused"), (np.float64, "unfused")])
def test_every_axis_form_on_cuda(dtype: Any, prologue: str) -> None:
    # (two of the four dtype x prologue pairs: each takes 20 s in the simulator; the CPU runs all four)
    # Planes at the first and last position of each axis (a middle one meets the same threads and
    # halves of the tree in the simulator), two random patterns, NaN, numbers: a simulated call runs
    # every kernel thread by thread (25 s per case with the whole table).
    simulated = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
    zeros.check_table("cuda", dtype, prologue, **({"middle": False, "randoms": 2} if simulated else {}))


@pytest.mark.parametrize(
    "shape, axis",
    [
        ((2, 160), 1),  # a block per output, its threads' values combined by the tree
        ((600, 8), 0),  # the innermost axis kept: columns side by side, partials per chunk of rows
        ((1 << 17,), None),  # two passes: partials of fixed chunks, then the tree over them
    ],
)
@pytest.mark.parametrize("first", [-0.0, 0.0])
def test_every_reduction_strategy(shape: tuple[int, ...], axis: Any, first: float) -> None:
    """Zeros whose halves along the reduced axis have opposite signs (threads, chunks and the tree's
    halves disagree), in both orders."""
    for dtype in (np.float32, np.float64):
        x = np.full(shape, -first, dtype)
        reduced = 0 if axis is None else axis
        index = [slice(None)] * len(shape)
        index[reduced] = slice(0, shape[reduced] // 2)
        x[tuple(index)] = first
        for which, fn in zeros.REDUCTIONS.items():
            got = dsl.compile(lambda v, fn=fn: fn(v, axis=axis), target="cuda")(x)
            zeros.assert_identical(
                got, zeros.ordered(x, which, axis), f"{which} {shape} {x.dtype}, {first} first"
            )


def test_fuzzer_program_on_cuda() -> None:
    base = np.random.default_rng(1).standard_normal((4, 2, 4))
    written = (slice(1, None, -2), slice(0, None, -2))
    want = zeros.fuzz_program(np, lambda v, axis: zeros.ordered(v, "min", axis), written)(base.copy()[::2])
    got = dsl.compile(zeros.fuzz_program(dnp, dnp.min, written), target="cuda")(base.copy()[::2])
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        zeros.assert_identical(g, w, f"output {k}")


def test_elementwise_maximum_and_minimum_as_numpy_on_cuda() -> None:
    a = np.array([-0.0, 0.0, -0.0, 0.0, np.nan, 1.0])
    b = np.array([0.0, -0.0, -0.0, 0.0, 0.0, np.nan])
    got = dsl.compile(lambda x, y: (dnp.maximum(x, y), dnp.minimum(x, y)), target="cuda")(a, b)
    zeros.assert_identical(got[0], np.maximum(a, b), "maximum")
    zeros.assert_identical(got[1], np.minimum(a, b), "minimum")
