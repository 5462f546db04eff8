"""The differential fuzzer's random programs (``tests/test_fuzz_programs.py``: every primitive kind,
views and writes through them, integer and special float values, loops and branches, arguments of any
layout, empty ones included) compiled for CUDA and checked against NumPy, results and the arguments'
contents after the call, as its Numba batches are on the CPU: many programs traced into one function,
one CUDA module per batch, each program's results compared on their own so a failure names its
program. In the simulator the generated kernels' semantics are checked; on a GPU (the suite's second
run) what only a GPU runs is: warp-shuffle reductions, cuBLAS, the launch path.

Gradients too: a batch of float programs' losses (``loss_closure``: weighted sums of the results and
the inputs' final contents) summed into one, its ``dsl.grad`` with respect to every input compiled
for CUDA against the same compiled for the CPU (its kernels run as Python: fast; the CPU's own
gradients are checked against finite differences by the CPU fuzzer).

``DSL_FUZZ_CUDA_BATCHES`` batches of ``BATCH`` programs (default 9 in the simulator, about 15 s; 2
on a GPU) and half as many with small thresholds, ``DSL_FUZZ_CUDA_GRAD_BATCHES`` gradient batches
(default 4; 1 on a GPU); ``DSL_FUZZ_SEED`` draws other programs,
as for the CPU fuzzer. Campaign of 2026-11-26 (seeds 1-4 and 10-13, 5,100 programs; gradients: seeds
20-22, 111 batches of about 7; with small thresholds, seeds 30-33 and 40-42, 3,800 programs and 81
gradient batches): three findings, the empty write-back and the empty concatenation below, and a
band's row scalar stored over what its threads read (sim_bands.py)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import test_fuzz_programs as fuzz
from hypothesis import Phase, assume, given, settings
from hypothesis import strategies as st

import dsl
import dsl.numpy as dnp
from compiler.kernel.cuda import bands, loops
from runtime.devices import simulator_enabled

# On a GPU every kernel of a batch's module is compiled by NVVM (~0.3 s each, 10-60 kernels a batch):
# fewer batches there, where the simulator's checks are repeated on the GPU's own paths.
SIMULATED = simulator_enabled()
BATCHES = int(os.environ.get("DSL_FUZZ_CUDA_BATCHES", "9" if SIMULATED else "2"))
GRAD_BATCHES = int(os.environ.get("DSL_FUZZ_CUDA_GRAD_BATCHES", "4" if SIMULATED else "1"))
BATCH = 10
GRAD_BATCH = 8


# Steps whose values have the same bits on every target: IEEE-rounded arithmetic (a product is
# rounded before the sum that reads it on CUDA too: compiler/prims/exactmath.py), exactmath's log1p,
# selections and data movement. A program of only these must give the CPU's bits on CUDA, where
# NumPy's are only close (its log1p is the C library's): on a GPU this is what would catch NVVM
# fusing a product into a sum, which the simulator never does. Not: libm/libdevice functions, float
# sums and means (another order), matmuls, scatter-adds, loops and branches.
EXACT_UNARY = {"log1p", "sqrt", "reciprocal", "abs", "sign", "negative", "relu", "dropout", "noise"}
EXACT_UNARY.add("truncate")
# (the fuzzer's divide and power take a tanh of their second operand: libdevice's, within an ulp of
# libm's; a divide was compared bit for bit until a draw of 2026-11-27 differed in its last bit)
TANH_OF_OPERAND = {"power", "divide"}
EXACT_CALLS = EXACT_UNARY | set(fuzz.BINARY) - TANH_OF_OPERAND | set(fuzz.INT_BINARY) | set(fuzz.INT_UNARY)
EXACT_METHODS = {"clip_", "abs_", "neg_", "relu_", "scale_", "zero_", "fill_", *fuzz.METHODS_WITH_SOURCE}
MOVING = {"where", "count", "join", "arange", "full", "copy", "slice", "transpose", "reshape", "broadcast"}
EXACT_LIBRARY = {"argmax", "argmin", "argmax_f64", "argmin_f64", "clip", "pad", "take_along_axis"}
EXACT_LIBRARY |= {"floor", "ceil", "round"}
MOVING |= {"setitem", "augmented", "take_apart", "augmented_apart", "fancy_augmented", "take", "fancy_set"}


def bitwise_like_cpu(p: fuzz.Program) -> bool:
    """Whether every step of ``p`` is one whose bits are the same on every target."""

    def exact(kind: str, *params: object) -> bool:
        if kind in ("unary", "binary"):
            return params[0] in EXACT_CALLS
        if kind == "reduce":  # max/min select an element; integer sums are exact in any order
            return params[0] in ("max", "min") or (params[0] == "sum" and bool(p.dtypes))
        if kind == "method":
            return params[0] in EXACT_METHODS
        if kind == "augmented":  # ``**=`` is a power (libm's or libdevice's) unless on integers
            return params[0] != "**=" or bool(p.dtypes)
        if kind == "library":  # selections, IEEE-rounded steps, integer sums
            return params[0] in EXACT_LIBRARY or (params[0] == "cumsum" and bool(p.dtypes))
        return kind in MOVING

    return not p.raises and all(exact(*step) for step in p.steps)


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
    exact = [k for k, p in enumerate(batch) if bitwise_like_cpu(p)]
    if exact:
        with fuzz.python_kernels():  # the CPU's kernels as Python: its arithmetic, no compile
            cpu = dsl.compile(fuzz.batched([batch[k] for k in exact]), target="cpu")(
                *(a for k in exact for a in batch[k].inputs())
            )
    failures = []
    for k, (p, out, xs) in enumerate(zip(batch, outs, inputs, strict=True)):
        if k in exact:
            try:
                got, want_cpu = fuzz._leaves(out), fuzz._leaves(cpu[exact.index(k)])
                fuzz.assert_values(got, [np.asarray(w) for w in want_cpu], "results, CUDA vs CPU", True)
            except AssertionError as err:
                failures.append(f"{p.describe()}\n{err}")
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


# The fuzzer's shapes are tiny (axes of at most 4): with a GPU's thresholds every reduction is a
# thread's serial loop. These make its reductions take every other strategy (a block per output,
# two passes, columns in row chunks) and its bands keep rows in global scratch.
SMALL_THRESHOLDS = {
    (loops, "BLOCK_REDUCE_MIN"): 2,
    (loops, "SPLIT_MIN"): 6,
    (loops, "SPLIT_CHUNK"): 3,
    (loops, "COLUMN_ROWS"): 1,
    (bands, "SHARED_BYTES"): 64,
}


@fuzz.shard
@settings(max_examples=max(BATCHES // 2, 1), phases=[Phase.generate], **fuzz.FUZZ_SETTINGS)
@given(st.lists(fuzz.any_programs, min_size=BATCH, max_size=BATCH))
def test_random_programs_on_cuda_every_strategy(batch: list[fuzz.Program]) -> None:
    if BATCHES == 0:
        pytest.skip("DSL_FUZZ_CUDA_BATCHES=0 turns the CUDA batches off")
    with pytest.MonkeyPatch.context() as mp:
        for (module, name), value in SMALL_THRESHOLDS.items():
            mp.setattr(module, name, value)
        check_batch_on_cuda(batch)


def differentiable(p: fuzz.Program) -> bool:
    """Float programs without special values, while loops or run-time trip counts (as the CPU
    fuzzer's gradient check)."""
    return not (p.raises or p.specials or p.dtypes or p.dynamic)


@fuzz.shard
@settings(max_examples=max(GRAD_BATCHES, 1), phases=[Phase.generate], **fuzz.FUZZ_SETTINGS)
@given(st.lists(fuzz.programs(), min_size=GRAD_BATCH, max_size=GRAD_BATCH))
def test_gradients_of_random_programs_on_cuda(batch: list[fuzz.Program]) -> None:
    if GRAD_BATCHES == 0:
        pytest.skip("DSL_FUZZ_CUDA_GRAD_BATCHES=0 turns the CUDA gradient batches off")
    batch = [p for p in batch if differentiable(p)]
    assume(batch)
    losses = [fuzz.loss_closure(p, fuzz.DSL) for p in batch]

    def total(*args):
        out, k = 0.0, 0
        for p, loss in zip(batch, losses, strict=True):
            out = out + loss(*args[k : k + p.n_args])
            k += p.n_args
        return out

    args = [a for p in batch for a in p.inputs()]
    grad = dsl.grad(total, argnums=tuple(range(len(args))))
    with fuzz.python_kernels():
        want = dsl.compile(grad, target="cpu")(*args)
    got = dsl.compile(grad, target="cuda")(*args)
    failures, k = [], 0
    for p in batch:
        try:
            mine = slice(k, k + p.n_args)
            fuzz.assert_values(
                [np.asarray(g) for g in got[mine]],
                [np.asarray(w) for w in want[mine]],
                "gradients, CUDA vs CPU",
                False,
                False,
            )
        except AssertionError as err:
            failures.append(f"{p.describe()}\n{err}")
        k += p.n_args
    assert not failures, "\n\n".join(failures)


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


def test_a_reduction_over_an_empty_concatenation() -> None:
    """(tests/test_regressions.py has the CPU's case.) Found by the gradient batches above."""
    x = np.zeros((3, 0, 2))
    got = dsl.compile(lambda x: dnp.concatenate((x, x), axis=1).sum(axis=1) + 1.0, target="cuda")(x)
    np.testing.assert_array_equal(np.asarray(got), np.ones((3, 2)))
