"""Per-kernel profile of one suite program: where a dslc program's time goes.

    python benchmarks/profile_kernels.py "softmax + cross-entropy" [--repeats 20] [--source] [--calls]

Runs the program's generated driver as plain Python (the kernels, and the runtime's matmul
functions, stay compiled) with a timer around each call in the kernel table, and prints them by
total time with their share of the whole (a function called several times is one line; with
``--calls``, every call on its own line, in the driver's order).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import suite_programs  # noqa: E402

from runtime.intrinsics import (  # noqa: E402
    buffer_view_python,
    call_kernel_python,
    fill_frame_python,
    keep_alive_python,
)


def profile(name: str, repeats: int, show_source: bool, each_call: bool = False) -> None:
    prog = suite_programs.BUILDERS[name]()
    prog.dslc(*prog.args)
    entry = max(prog.dslc._cache.values(), key=lambda e: e.run.arena.nbytes)
    source = entry.program.source
    if show_source:
        print(source)
    driver_src = source[source.index("def run(") :]
    this_run: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)

    def timed_call(slot: int, signature: str, *args: Any) -> None:
        """``call_kernel`` from plain Python, timed: the table passed in is the slot numbers (a table
        entry passed on to a kernel, ``u8``, becomes that slot's address again)."""
        dispatcher = executable.kernels.compiled[slot][0]
        entries = signature.split(",")
        addresses = executable.kernels.addresses
        args = tuple(np.uint64(addresses[a]) if e == "u8" else a for e, a in zip(entries, args, strict=True))
        name = dispatcher.__name__
        if name == "parallel_for":  # a kernel the driver runs directly: named after its chunks
            name = executable.kernels.compiled[slot_of[int(args[0])]][0].__name__.removesuffix("_chunk")
        if each_call:  # "07 gemm_rows": the call's place in the run, then its function
            name = f"{len(this_run):02d} {name}"
        t0 = time.perf_counter()
        call_kernel_python(dispatcher, signature, *args)
        this_run[name] += time.perf_counter() - t0
        calls[name] += 1

    executable = entry.run
    slot_of = {int(a): i for i, a in enumerate(executable.kernels.addresses)}
    namespace: dict[str, Any] = dict(executable.driver.py_func.__globals__)  # the module's names
    namespace.update(
        call_kernel=timed_call,
        buffer_view=buffer_view_python,
        fill_frame=fill_frame_python,
        keep_alive=keep_alive_python,
    )
    exec(driver_src.replace("with numba.objmode():", "if True:"), namespace)
    run = namespace["run"]
    table = list(range(len(executable.kernels.compiled)))
    leaves = [np.asarray(a) for a in _flatten(prog.args)]
    outs = [np.empty(s, d) for s, d in executable._outs]
    for _ in range(3):
        run(executable.arena, table, *outs, *leaves)
    times: dict[str, list[float]] = defaultdict(list)  # kernel -> its total time in each run
    calls.clear()
    for _ in range(repeats):
        this_run.clear()
        run(executable.arena, table, *outs, *leaves)
        for kname, t in this_run.items():
            times[kname].append(t)
    total = sum(statistics.median(t) for t in times.values())
    print(f"{name}: {len(times)} {'calls' if each_call else 'kernels'}, sum of medians {1e3 * total:.2f} ms")
    order = sorted(times.items(), key=lambda kv: kv[0] if each_call else -statistics.median(kv[1]))
    for kname, ts in order:
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
    parser.add_argument("--calls", action="store_true", help="one line per call, in the driver's order")
    args = parser.parse_args()
    profile(args.program, args.repeats, args.source, args.calls)


if __name__ == "__main__":
    main()
