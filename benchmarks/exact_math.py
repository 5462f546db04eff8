"""The same bits on the CPU and CUDA (benchmarks/results/2026-11-26-cpu-cuda-bits.md): fused
multiply-adds in the PTX of a few CUDA programs (needs the ``cuda`` extra's NVVM, no GPU), and the
CPU time of ``log1p`` (compiler/prims/exactmath.py's helper in a fused loop) against NumPy's.

    python benchmarks/exact_math.py [--ptx] [--time]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dsl  # noqa: E402
import dsl.numpy as dnp  # noqa: E402


def ptx_counts() -> None:
    """``fma.rn`` and ``mul.rn`` instructions over every kernel of each program, sm_90."""
    from compiler.codegen import compile_ptx

    x = np.ones(4096, np.float32)
    key = dsl.random.key(0)
    programs = {
        "a * b + c (float32, 4096)": (lambda a, b, c: a * b + c, (x, x, x)),
        "normal(key, (64, 64)) float32": (lambda k: dsl.random.normal(k, (64, 64)), (key,)),
        "uniform(key, (9,), minval=-2, maxval=3)": (
            lambda k: dsl.random.uniform(k, (9,), minval=-2.0, maxval=3.0),
            (key,),
        ),
        "log1p float32 + float64": (lambda a: dnp.log1p(a) + dnp.log1p(a.astype(np.float64)), (x,)),
    }
    print("| program | fma.rn | mul.rn |\n|---|---:|---:|")
    for what, (fn, args) in programs.items():
        generated = dsl.compile(fn, target="cuda").lower(*args).program.generated
        text = "".join(compile_ptx(generated, (9, 0)).values())
        print(f"| {what} | {text.count('fma.rn.')} | {text.count('mul.rn.')} |")


def log1p_times(n: int = 4_000_000, calls: int = 15) -> None:
    """Median ms of ``log1p(x) * 2 + x`` compiled for the CPU and in NumPy, after one call."""
    rng = np.random.default_rng(0)
    f = dsl.compile(lambda x: dnp.log1p(x) * 2.0 + x)
    for dtype in (np.float32, np.float64):
        x = rng.uniform(-0.9, 10, n).astype(dtype)
        for name, run in (("dslc", f), ("numpy", lambda x: np.log1p(x) * 2.0 + x)):
            run(x)
            times = []
            for _ in range(calls):
                t = time.perf_counter()
                run(x)
                times.append(time.perf_counter() - t)
            print(f"{np.dtype(dtype).name} {name}: {1e3 * np.median(times):.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ptx", action="store_true", help="count fused multiply-adds in the PTX")
    parser.add_argument("--time", action="store_true", help="time log1p on the CPU")
    opts = parser.parse_args()
    if opts.ptx or not opts.time:
        ptx_counts()
    if opts.time or not opts.ptx:
        log1p_times()


if __name__ == "__main__":
    main()
