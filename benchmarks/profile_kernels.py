"""Per-kernel profile of one suite program: where a dslc program's time goes.

    python benchmarks/profile_kernels.py "softmax + cross-entropy" [--repeats 20] [--source]

Runs the program's generated driver as plain Python (the kernels stay compiled) with a timer
around each kernel call, and prints the kernels by total time with their share of the whole.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import suite_programs  # noqa: E402

from runtime.module_cache import load_module  # noqa: E402


def profile(name: str, repeats: int, show_source: bool) -> None:
    prog = suite_programs.BUILDERS[name]()
    prog.dslc(*prog.args)
    entry = max(prog.dslc._cache.values(), key=lambda e: e.run.arena.nbytes)
    source = entry.program.source
    if show_source:
        print(source)
    module = load_module(source, {})
    driver_src = source[source.index("def run(") :]
    this_run: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)

    def timed(kernel_name: str, fn: Any) -> Any:
        def call(*args: Any) -> Any:
            t0 = time.perf_counter()
            out = fn(*args)
            this_run[kernel_name] += time.perf_counter() - t0
            calls[kernel_name] += 1
            return out

        return call

    namespace: dict[str, Any] = {"np": np, "numba": __import__("numba")}
    for kname in re.findall(r"^def (k\w+)\(", source, re.M):
        namespace[kname] = timed(kname, getattr(module, kname))
    exec(driver_src.replace("with numba.objmode():", "if True:"), namespace)
    run = namespace["run"]
    executable = entry.run
    leaves = [np.asarray(a) for a in _flatten(prog.args)]
    outs = [np.empty(s, d) for s, d in executable._outs]
    for _ in range(3):
        run(executable.arena, *outs, *leaves)
    times: dict[str, list[float]] = defaultdict(list)  # kernel -> its total time in each run
    calls.clear()
    for _ in range(repeats):
        this_run.clear()
        run(executable.arena, *outs, *leaves)
        for kname, t in this_run.items():
            times[kname].append(t)
    total = sum(statistics.median(t) for t in times.values())
    print(f"{name}: {len(times)} kernels, sum of medians {1e3 * total:.2f} ms")
    for kname, ts in sorted(times.items(), key=lambda kv: -statistics.median(kv[1])):
        med = statistics.median(ts)
        per_run = calls[kname] // repeats
        print(f"  {kname:32s} x{per_run:<3d} {1e3 * med:8.3f} ms  {100 * med / total:5.1f}%")


def _flatten(x: Any) -> list[Any]:
    if isinstance(x, dict):
        return [a for k in sorted(x) for a in _flatten(x[k])]  # dsl pytrees sort dict keys
    if isinstance(x, (list, tuple)):
        return [a for v in x for a in _flatten(v)]
    return [x]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("program", choices=list(suite_programs.BUILDERS))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--source", action="store_true", help="print the generated module too")
    args = parser.parse_args()
    profile(args.program, args.repeats, args.source)


if __name__ == "__main__":
    main()
