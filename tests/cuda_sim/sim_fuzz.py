"""The differential fuzzer's random programs (``tests/test_fuzz_programs.py``: every primitive kind,
views and writes through them, integer and special float values, loops and branches, arguments of any
layout, empty ones included) compiled for CUDA and checked against NumPy, results and the arguments'
contents after the call, as its Numba batches are on the CPU: many programs traced into one function,
one CUDA module per batch, each program's results compared on their own so a failure names its
program. In the simulator the generated kernels' semantics are checked; on a GPU (the suite's second
run) what only a GPU runs is: warp-shuffle reductions, cuBLAS, the launch path.

``DSL_FUZZ_CUDA_BATCHES`` batches of ``BATCH`` programs (default 12: about 20 s in the simulator);
``DSL_FUZZ_SEED`` draws other programs, as for the CPU fuzzer."""

from __future__ import annotations

import os

import numpy as np
import pytest
import test_fuzz_programs as fuzz
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import dsl

BATCHES = int(os.environ.get("DSL_FUZZ_CUDA_BATCHES", "12"))
BATCH = 10


def check_batch_on_cuda(batch: list[fuzz.Program]) -> None:
    batch = [p for p in batch if not p.raises]  # refusals happen while tracing: the CPU checks them
    inputs = [p.inputs() for p in batch]
    try:
        outs = dsl.compile(fuzz.batched(batch), target="cuda")(*(a for xs in inputs for a in xs))
    except Exception:
        for p in batch:  # attribute the failure to the programs that fail on their own
            try:
                dsl.compile(p.closure(fuzz.DSL), target="cuda")(*p.inputs())
            except Exception as err:
                raise AssertionError(f"program fails on CUDA:\n{p.describe()}") from err
        raise
    failures = []
    for p, out, xs in zip(batch, outs, inputs, strict=True):
        want = fuzz.run_numpy(p)
        signs = not any(kind == "matmul" for kind, *_ in p.steps)  # a zero's sign through BLAS is its own
        try:
            fuzz.assert_values(fuzz._leaves(out), want[0], "results, CUDA vs NumPy", False, signs)
            fuzz.assert_values(list(xs), want[1], "inputs after the call, CUDA vs NumPy", False, signs)
        except AssertionError as err:
            failures.append(f"{p.describe()}\n{err}")
    assert not failures, "\n\n".join(failures)


@fuzz.shard
@settings(max_examples=max(BATCHES, 1), phases=[Phase.generate], **fuzz.FUZZ_SETTINGS)
@given(st.lists(fuzz.any_programs, min_size=BATCH, max_size=BATCH))
def test_random_programs_on_cuda(batch: list[fuzz.Program]) -> None:
    if BATCHES == 0:
        pytest.skip("DSL_FUZZ_CUDA_BATCHES=0 turns the CUDA batches off")
    check_batch_on_cuda(batch)


@pytest.mark.parametrize("order", ["C", "F"])
def test_empty_arguments_written_back(order: str) -> None:
    """A mutated argument with no elements: nothing to copy back (the copy between a device array's
    and NumPy's empty layouts raised "incompatible strides"; found by the fuzzer's CUDA batches)."""

    def f(x, y):
        x -= 3
        y //= 2.0
        return x * 2, y.sum()

    x = np.zeros((1, 1, 0), np.int32, order=order)
    y = np.zeros((4, 0, 2), order=order)
    doubled, total = dsl.compile(f, target="cuda")(x, y)
    assert np.asarray(doubled).shape == (1, 1, 0) and float(total) == 0.0
