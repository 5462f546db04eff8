"""Shared test helpers: run a traced program on the reference interpreter, compare with NumPy."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numba
import numpy as np
from mlir_tools import find_mlir_opt, run_mlir_opt

import dsl
from compiler.interpreter import interpret
from compiler.ir.core import Function
from compiler.ir.parser import parse_module
from compiler.ir.printer import print_function, print_module
from compiler.pipeline import Options, run_passes
from dsl import pytree


def trace(fn: Any, *args: Any, **compile_options: Any):
    """The traced ``Function`` of ``fn`` for ``args`` (and its output structure)."""
    compiled = dsl.compile(fn, **compile_options)
    func, out_tree, mutated, names = compiled._trace(args)
    return func, out_tree, mutated


def interpret_fn(fn: Any, *args: Any) -> Any:
    """Run ``fn`` through tracing, the passes and the reference interpreter; write-backs applied."""
    func, out_tree, mutated = trace(fn, *args)
    stages = run_passes(func, Options(verify=True))
    check_text_form(stages.values())
    leaves, _ = pytree.flatten(list(args))
    outs = interpret(stages["optimized"], leaves)
    n = len(outs) - len(mutated)
    for k, value in zip(mutated, outs[n:]):
        np.copyto(leaves[k], value)
    return pytree.unflatten(out_tree, outs[:n])


def assert_same(got: Any, want: Any, rtol: float = 1e-6) -> None:
    """Equal structure, shapes and dtypes; values equal (floats to ``rtol``, NaNs in the same places)."""
    got_leaves, got_tree = pytree.flatten(got)
    want_leaves, want_tree = pytree.flatten(want)
    assert got_tree == want_tree, f"structure {got_tree} != {want_tree}"
    for g, w in zip(got_leaves, want_leaves):
        w = np.asarray(w)
        assert isinstance(g, np.ndarray), f"expected an ndarray, got {type(g).__name__}"
        assert g.shape == w.shape, f"shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"dtype {g.dtype} != {w.dtype}"
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)


def check_text_form(funcs: Any) -> None:
    """Every stage prints, parses back to the same text, and (if installed) passes mlir-opt."""
    texts = []
    for func in funcs:
        assert isinstance(func, Function)
        text = print_function(func)
        assert print_module(parse_module(text)) == text, "print -> parse -> print changed the text"
        texts.append(text)
    if find_mlir_opt() is not None:
        for text in texts:
            run_mlir_opt(text)


def check_lowered(lowered: Any) -> None:
    """Every stage of a ``Lowered`` program round-trips and (if installed) passes mlir-opt."""
    for stage in lowered.stages():
        text = lowered.ir(stage)
        assert print_module(parse_module(text)) == text, f"stage {stage}: print -> parse -> print changed it"
        if find_mlir_opt() is not None:
            run_mlir_opt(text)


@contextmanager
def python_kernels() -> Iterator[None]:
    """Generated modules imported in this block run as plain Python (Numba's decorators are off):
    the whole compiler and its generated code, without Numba's compile time (the module cache keeps
    such modules apart from compiled ones)."""
    before = numba.config.DISABLE_JIT
    numba.config.DISABLE_JIT = True
    try:
        yield
    finally:
        numba.config.DISABLE_JIT = before
