"""Matmul kernels on SciPy's OpenBLAS against MKL (``runtime/blas.py``, ``runtime/mkl.py``), and the
suite's BLAS-bound programs with each.

    python benchmarks/bench_blas.py [--rounds 60] [--programs]

Each matmul shape of the benchmark suite (MLP layers and their gradients, the second derivative's
4096x128x128, the transformer's projections) is compiled twice, once per library, and the two
kernels are called alternately in one process (this VM's speed drifts between runs); GFLOP/s at
the minimum and median time of each. ``--programs`` does the same for whole suite programs. Needs
MKL (``pip install -e '.[mkl]'``).
"""

from __future__ import annotations

import argparse
import copy
import functools
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import suite_programs  # noqa: E402

import dsl  # noqa: E402
from runtime import blas, mkl  # noqa: E402

LIBRARIES = ("mkl", "openblas")
# (m, k, n, x stored transposed): the suite's products, forward and gradient
SHAPES = [
    (256, 784, 512, False),
    (256, 512, 512, False),
    (512, 256, 512, True),
    (4096, 128, 128, False),
    (128, 4096, 128, True),
    (512, 256, 768, False),
    (512, 1024, 256, False),
    (1024, 512, 256, True),
]


def with_library(library: str, build: Callable[[], Any]) -> Any:
    """``build()`` with new modules generated for ``library``."""
    saved = blas.vendor
    blas.vendor = lambda: library  # type: ignore[assignment]
    try:
        return build()
    finally:
        blas.vendor = saved  # type: ignore[assignment]


def alternate(calls: dict[str, Callable[[], Any]], rounds: int) -> dict[str, list[float]]:
    for f in calls.values():
        f()
    times: dict[str, list[float]] = {k: [] for k in calls}
    for _ in range(rounds):
        for k, f in calls.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return times


def matmul(m: int, k: int, n: int, transposed: bool) -> Callable[[], Any]:
    rng = np.random.default_rng(0)
    y = rng.standard_normal((k, n)).astype(np.float32)
    if transposed:  # x.T @ y, x stored (k, m): a weight gradient h.T @ g
        x = rng.standard_normal((k, m)).astype(np.float32)
        f = dsl.compile(lambda x, y: x.T @ y)
    else:
        x = rng.standard_normal((m, k)).astype(np.float32)
        f = dsl.compile(lambda x, y: x @ y)
    f(x, y)
    return lambda: f(x, y)


def program(name: str) -> Callable[[], Any]:
    prog = suite_programs.BUILDERS[name]()
    args = copy.deepcopy(prog.args)
    prog.dslc(*args)
    return lambda: prog.dslc(*args)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--programs", action="store_true", help="also the suite's BLAS-bound programs")
    args = parser.parse_args()
    if not mkl.available():
        sys.exit("MKL does not load here: pip install -e '.[mkl]'")
    print(f"float32 matmuls, {args.rounds} alternating calls each: GFLOP/s at the min (median) time")
    for m, k, n, transposed in SHAPES:
        calls = {lib: with_library(lib, functools.partial(matmul, m, k, n, transposed)) for lib in LIBRARIES}
        times = alternate(calls, args.rounds)
        flops = 2 * m * k * n
        cells = [
            f"{lib} {flops / min(t) / 1e9:6.1f} ({flops / statistics.median(t) / 1e9:6.1f})"
            for lib, t in times.items()
        ]
        shape = f"{m}x{k}x{n}" + (" (x.T)" if transposed else "")
        print(f"{shape:22s} " + "   ".join(cells), flush=True)
    if args.programs:
        print("programs: ms at the min (median) time")
        for name in ("MLP training step", "second derivative", "transformer block"):
            calls = {lib: with_library(lib, functools.partial(program, name)) for lib in LIBRARIES}
            times = alternate(calls, args.rounds)
            cells = [
                f"{lib} {1e3 * min(t):6.2f} ({1e3 * statistics.median(t):6.2f})" for lib, t in times.items()
            ]
            print(f"{name:22s} " + "   ".join(cells), flush=True)


if __name__ == "__main__":
    main()
