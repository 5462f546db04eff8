"""The float32 math helpers (``compiler/prims/vecmath.py``) with and without fused multiply-adds.

    python benchmarks/bench_vecmath.py [--n 1048576] [--rounds 200]
    python benchmarks/bench_vecmath.py --exhaustive [--hi 10]

Each of exp, tanh and log runs as the CPU target writes it (a parallel flat loop over the helper),
through the compiler: ``dsl.compile`` with the ``fused_multiply_add`` switch on and off
(``compiler.codegen.cpu.OPTIMIZATIONS``). The two kernels are called alternately in one process
(this VM's speed drifts between runs), and the minimum and median time per element of each are
printed, with the accuracy of each against float64 NumPy in ulps.

``--exhaustive`` instead runs ``tanh`` (odd, so one sign suffices; the other is checked to be its exact
negation) through the compiler over every float32 in ``[0, hi)``, about 1.09e9 of them for 10, and
prints its largest error in ulps and where (a minute or two on 2 cores). The tests check dense grids.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_optimizations import interleaved_times, switched_off  # noqa: E402

import dsl  # noqa: E402
import dsl.numpy as dnp  # noqa: E402

FUNCTIONS: dict[str, tuple[Callable[[Any], Any], Callable[[np.ndarray], np.ndarray]]] = {
    "tanh": (dnp.tanh, np.tanh),
    "exp": (dnp.exp, np.exp),
    "log": (dnp.log, np.log),
}


def compiled(fn: Callable[[Any], Any], x: np.ndarray, off: set[str]) -> Callable[[np.ndarray], Any]:
    with switched_off(off):
        f = dsl.compile(fn)
        f(x)  # compiled now, with the switch as set
    return f


def ulps(got: np.ndarray, x: np.ndarray, exact: Callable[[np.ndarray], np.ndarray]) -> float:
    ref = exact(x.astype(np.float64))
    return float((np.abs(got.astype(np.float64) - ref) / np.spacing(np.abs(ref.astype(np.float32)))).max())


def exhaustive_tanh(hi: float, chunk: int = 1 << 24) -> None:
    f = dsl.compile(dnp.tanh)
    worst, where, end = 0.0, 0.0, int(np.float32(hi).view(np.int32))
    for start in range(0, end, chunk):
        x = np.arange(start, min(start + chunk, end), dtype=np.int32).view(np.float32)
        y = f(x)
        if not np.array_equal(f(-x).view(np.int32), (-y).view(np.int32)):
            raise AssertionError(f"tanh(-x) is not -tanh(x) somewhere in [{x[0]}, {x[-1]}]")
        exact = np.tanh(x.astype(np.float64))
        error = np.abs(y.astype(np.float64) - exact) / np.spacing(np.abs(exact.astype(np.float32)))
        i = int(error.argmax())
        if error[i] > worst:
            worst, where = float(error[i]), float(x[i])
    print(f"tanh over every float32 in [0, {hi}) and their negations: max {worst:.3f} ulp at x = {where!r}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1 << 20)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--exhaustive", action="store_true", help="tanh's accuracy on every float32")
    parser.add_argument("--hi", type=float, default=10.0, help="--exhaustive: the top of the range")
    args = parser.parse_args()
    if args.exhaustive:
        exhaustive_tanh(args.hi)
        return
    rng = np.random.default_rng(0)
    x = (np.abs(rng.standard_normal(args.n)) + 0.01).astype(np.float32)  # log's domain too
    print(f"{args.n} float32 elements, {args.rounds} alternating calls each; ns per element")
    for name, (fn, exact) in FUNCTIONS.items():
        kernels = {"fused": compiled(fn, x, set()), "plain": compiled(fn, x, {"fused_multiply_add"})}
        times = interleaved_times({k: (lambda f=f: f(x)) for k, f in kernels.items()}, args.rounds, 1)
        cells = []
        for k, f in kernels.items():
            per = [t / args.n * 1e9 for t in times[k]]
            error = ulps(f(x), x, exact)
            cells.append(f"{k}: min {min(per):.3f} median {statistics.median(per):.3f} ({error:.2f} ulp)")
        print(f"{name:5s} " + "   ".join(cells), flush=True)


if __name__ == "__main__":
    main()
