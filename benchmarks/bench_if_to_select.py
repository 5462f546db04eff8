"""if_to_select on the CPU: call time of cond programs with the pass on and off (issue 28 item 5).

    python benchmarks/bench_if_to_select.py              # prints the table
    python benchmarks/bench_if_to_select.py --calls 200

Programs (float64):

- ``scan_cond``: ``dsl.scan`` over T=256 steps of a (64,) state, each step a cond on the row's sum
  (``tanh(h * 0.9 + x)`` or ``h * 0.5 - x``): natively a branch per iteration whose branches are
  bodies of their own; converted, one body of fused kernels computing both;
- ``scan_cheap``: the same with ``h * 0.9 + x`` in place of the tanh;
- ``cond_between``: a (64, 64) ``exp`` chain, a cond on its sum (``sqrt`` or ``log`` of the
  magnitude), another chain: converted, the branches fuse with their neighbours;
- ``grad scan_cond``: the gradient of ``scan_cond``'s loss.

Each program is compiled both ways in this process, checked equal, then timed interleaved round by
round (``--rounds`` rounds of ``--calls`` calls; a figure is the lowest round median), so outside load
spoils a round, not the comparison. The pass is forced on (``if_select_budget`` large) against off;
the last column says which form the CPU's default budget picks. On CUDA the native form reads each
predicate back to the host (``tests/test_if_to_select.py`` checks that the converted driver does
not); no GPU timing here.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dsl  # noqa: E402
import dsl.numpy as dnp  # noqa: E402
from compiler.compilation import option_defaults  # noqa: E402
from compiler.prims import control  # noqa: E402

RNG = np.random.default_rng(0)
XS = RNG.standard_normal((256, 64))
H0 = RNG.standard_normal(64)
A = RNG.standard_normal((64, 64)) * 0.1


def scan_cond(h0: Any, xs: Any) -> Any:
    def step(h: Any, x: Any) -> tuple[Any, Any]:
        h = dsl.cond(x.sum() > 0, lambda a: dnp.tanh(a * 0.9 + x), lambda a: a * 0.5 - x, h)
        return h, h.sum()

    h, sums = dsl.scan(step, h0, xs)
    return (h * h).sum() + (sums * sums).sum()


def scan_cheap(h0: Any, xs: Any) -> Any:
    def step(h: Any, x: Any) -> tuple[Any, Any]:
        h = dsl.cond(x.sum() > 0, lambda a: a * 0.9 + x, lambda a: a * 0.5 - x, h)
        return h, h.sum()

    h, sums = dsl.scan(step, h0, xs)
    return (h * h).sum() + (sums * sums).sum()


def cond_between(a: Any) -> Any:
    b = dnp.exp(a) * 0.5 + a
    c = dsl.cond(b.sum() > 0, lambda v: dnp.sqrt(dnp.abs(v)), lambda v: dnp.log(dnp.abs(v) + 1.0), b)
    return (dnp.tanh(c) * 2.0 - a).sum()


PROGRAMS: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "scan_cond": (scan_cond, (H0, XS)),
    "scan_cheap": (scan_cheap, (H0, XS)),
    "cond_between": (cond_between, (A,)),
    "grad scan_cond": (dsl.grad(scan_cond, argnums=(0,)), (H0, XS)),
}


def median_call(fn: Callable[..., Any], args: tuple[Any, ...], calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with open("/proc/loadavg") as f:
        print("load average:", " ".join(f.read().split()[:3]))
    print(f"{'program':<16} {'native if us':>13} {'selects us':>11} {'speedup':>8}  default (CPU budget)")
    for name, (fn, inputs) in PROGRAMS.items():
        compiled = {}
        for on in (False, True):
            with option_defaults(if_to_select=on, if_select_budget=1 << 20):
                compiled[on] = dsl.compile(fn)
                compiled[on](*inputs)  # the first call builds the executable
        for got, want in zip(np.atleast_1d(compiled[True](*inputs)), np.atleast_1d(compiled[False](*inputs))):
            np.testing.assert_allclose(got, want, rtol=1e-10)
        best = {False: float("inf"), True: float("inf")}
        for _ in range(args.rounds):
            for on in (False, True):
                best[on] = min(best[on], median_call(compiled[on], inputs, args.calls))
        native, selects = best[False] * 1e6, best[True] * 1e6
        optimized = dsl.compile(fn).lower(*inputs)._program.stages["optimized"]
        kept = any(op.prim is control.if_ for op in optimized.walk())
        default = "native if" if kept else "selects"
        print(f"{name:<16} {native:13.1f} {selects:11.1f} {native / selects:7.2f}x  {default}", flush=True)


if __name__ == "__main__":
    main()
