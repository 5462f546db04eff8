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
import os
import statistics
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_optimizations import build, interleaved_times  # noqa: E402

import dsl  # noqa: E402
from runtime import mkl  # noqa: E402

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


@contextmanager
def blas_library(library: str) -> Iterator[None]:
    """New modules generated for ``library`` (``DSL_BLAS``), meanwhile."""
    saved = os.environ.get("DSL_BLAS")
    os.environ["DSL_BLAS"] = library
    try:
        yield
    finally:
        if saved is None:
            del os.environ["DSL_BLAS"]
        else:
            os.environ["DSL_BLAS"] = saved


def matmul(m: int, k: int, n: int, transposed: bool) -> Callable[[], Any]:
    """A compiled ``x @ y`` (``x.T @ y`` with ``x`` stored (k, m): a weight gradient), compiled now."""
    rng = np.random.default_rng(0)
    y = rng.standard_normal((k, n)).astype(np.float32)
    x = rng.standard_normal((k, m) if transposed else (m, k)).astype(np.float32)
    f = dsl.compile((lambda x, y: x.T @ y) if transposed else (lambda x, y: x @ y))
    f(x, y)
    return lambda: f(x, y)


def table(calls: dict[str, Callable[[], Any]], rounds: int, cell: Callable[[float], str]) -> str:
    times = interleaved_times(calls, rounds, per_round=1)
    return "   ".join(f"{lib} {cell(min(t))} ({cell(statistics.median(t))})" for lib, t in times.items())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--programs", action="store_true", help="also the suite's BLAS-bound programs")
    args = parser.parse_args()
    if not mkl.available():
        sys.exit("MKL does not load here: pip install -e '.[mkl]'")
    print(f"float32 matmuls, {args.rounds} alternating calls each: GFLOP/s at the min (median) time")
    for m, k, n, transposed in SHAPES:
        calls = {}
        for lib in LIBRARIES:
            with blas_library(lib):
                calls[lib] = matmul(m, k, n, transposed)
        flops = 2 * m * k * n
        shape = f"{m}x{k}x{n}" + (" (x.T)" if transposed else "")
        print(
            f"{shape:22s} " + table(calls, args.rounds, lambda t, f=flops: f"{f / t / 1e9:6.1f}"), flush=True
        )
    if args.programs:
        print("programs: ms at the min (median) time")
        for name in ("MLP training step", "second derivative", "transformer block"):
            calls = {}
            for lib in LIBRARIES:
                with blas_library(lib):
                    calls[lib] = build(name, set())[0]
            print(f"{name:22s} " + table(calls, args.rounds, lambda t: f"{1e3 * t:6.2f}"), flush=True)


if __name__ == "__main__":
    main()
