"""Shared test helpers: run a traced program on the reference interpreter, compare with NumPy."""

from __future__ import annotations

import functools
import importlib.util
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numba
import numpy as np
from mlir_tools import check_all_with_mlir_opt, find_mlir_opt

import dsl
import dsl.numpy as dnp
from compiler.interpreter import interpret
from compiler.ir.core import Function
from compiler.ir.parser import parse_module
from compiler.ir.printer import print_function, print_module
from compiler.pipeline import Options, run_passes
from dsl import pytree


def tanh_mlp(params: Any, x: Any) -> Any:
    """``x`` through dense layers ``(w, b)`` with ``tanh`` between them (not after the last)."""
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = dnp.tanh(h)
    return h


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
        check_all_with_mlir_opt(texts)


def check_lowered(lowered: Any) -> None:
    """Every stage of a ``Lowered`` program round-trips and (if installed) passes mlir-opt."""
    texts = []
    for stage in lowered.stages():
        text = lowered.ir(stage)
        assert print_module(parse_module(text)) == text, f"stage {stage}: print -> parse -> print changed it"
        texts.append(text)
    if find_mlir_opt() is not None:
        check_all_with_mlir_opt(texts)


@contextmanager
def python_kernels() -> Iterator[None]:
    """Generated modules imported in this block run as plain Python (Numba's decorators are off):
    the whole compiler and its generated code, without Numba's compile time (the module cache keeps
    such modules apart from compiled ones)."""
    # Runtime modules with njit functions are imported first: one first imported with the JIT off
    # would keep plain Python functions for good, and later compiled modules could not call them.
    import runtime.blas
    import runtime.parallel  # noqa: F401

    before = numba.config.DISABLE_JIT
    numba.config.DISABLE_JIT = True
    try:
        yield
    finally:
        numba.config.DISABLE_JIT = before


def _split_args(text: str) -> list[str]:
    """A call's arguments, split at the commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def driver_calls(source: str) -> list[tuple[str, list[str]]]:
    """The kernel calls of a generated CPU module's driver, in order: each called function's name
    (a kernel ``k<i>_<root>``, or ``gemm_rows``/``gemm_rows_serial`` for a float matmul) and its
    arguments (the buffers, and the sizes of a ``gemm_rows`` call; not the table entries a parallel
    kernel is passed, its chunk function's and ``parallel_for``'s addresses; for a kernel the driver
    runs directly, the buffers it puts in the frame)."""
    calls = []
    framed: list[str] = []  # the arrays of the last fill_frame: a kernel the driver runs directly
    scratch = set()  # arrays the driver allocates for such a kernel (not the kernel's buffers)
    for line in source.splitlines():
        m = re.match(r"\s+(\w+) = np\.empty\(", line)
        if m:
            scratch.add(m.group(1))
        m = re.match(r"\s+fill_frame\(frame, (.*)\)$", line)
        if m:
            framed = [a for a in _split_args(m.group(1)) if a not in scratch]
            continue
        m = re.match(r"\s+call_kernel\(kernel_table\[\d+\], \"[^\"]*\", (.*)\)  # (\w+)$", line)
        if m:
            args = [a for a in _split_args(m.group(1)) if not a.startswith("kernel_table[")]
            calls.append((m.group(2), framed if args[-1:] == ["frame"] else args))
            continue
        m = re.match(r"\s+(k\d+_\w+)\((.*)\)$", line)  # an object-mode (NumPy) kernel
        if m:
            calls.append((m.group(1), _split_args(m.group(2))))
    return calls


def parallel_loops(source: str) -> list[int]:
    """The iteration count of each parallel loop of a generated CPU module: a kernel's chunks run by
    ``runtime.parallel.parallel_for`` (the ``runtime_parallel`` form), or a ``numba.prange`` loop."""
    runtime = re.findall(r'"u8,i8,u8:1", (?:chunk_at|kernel_table\[\d+\]), (\d+), frame\)', source)
    return [int(n) for n in runtime + re.findall(r"numba\.prange\((\d+)\)", source)]


def kernel_kinds(source: str) -> list[str]:
    """Per driver call, what it computes: the root of a kernel (``matmul``, ``reduce_sum``, ``rows`` ...)."""
    calls = driver_calls(source)
    return ["matmul" if name.startswith("gemm_rows") else name.split("_", 1)[1] for name, _ in calls]


def gemm_calls(lowered: Any) -> list[dict[str, Any]]:
    """The float matmuls of a lowered CPU program's driver: each ``gemm_rows`` call's buffers (``x``,
    ``y``, ``o``, ``c``: the names the driver passes) and sizes (``runtime.blas.GEMM_ROWS_PARAMS``,
    ``alpha``, ``beta``: read from the generated module's constant arrays)."""
    import sys

    from runtime.blas import GEMM_ROWS_PARAMS

    source, driver = lowered.source(), lowered.program.executable.driver
    constants = vars(sys.modules[getattr(driver, "py_func", driver).__module__])

    calls = []
    for name, args in driver_calls(source):
        if name.startswith("gemm_rows"):
            x, y, o, c, p, s = args
            call: dict[str, Any] = dict(zip(GEMM_ROWS_PARAMS, (int(v) for v in constants[p]), strict=True))
            calls.append(
                call | {"x": x, "y": y, "o": o, "c": c, "alpha": constants[s][0], "beta": constants[s][1]}
            )
    return calls


@functools.cache
def suite_programs() -> Any:
    """``benchmarks/suite_programs.py`` as a module (its ``BUILDERS`` make the suite's six programs)."""
    path = Path(__file__).parent.parent / "benchmarks" / "suite_programs.py"
    spec = importlib.util.spec_from_file_location("suite_programs_for_tests", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def central_differences(f: Any, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """The gradient of the scalar ``f`` at ``x`` by central differences, element by element."""
    g = np.zeros_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = h
        g.flat[k] = (f(x + e) - f(x - e)) / (2 * h)
    return g
