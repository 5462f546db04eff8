"""Compile-time figures of ``bench_suite.py``: first-call latency of each program in fresh processes
(cold: empty ``DSL_CACHE_DIR`` and Numba cache; warm: the same, filled), the pass pipeline's time on
synthetic programs of 1k-100k ops (``run_passes`` + ``fuse`` + ``plan_buffers``: no Numba), and the
tiny-function call overhead (measured by the caller)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PIPELINE_SIZES = (1_000, 10_000, 100_000)


def first_call_child(name: str) -> None:
    """Child process: build one program and time its first dslc call (trace, compile, load, run)."""
    t0 = time.perf_counter()
    import suite_programs

    imported = time.perf_counter() - t0
    prog = suite_programs.BUILDERS[name]()
    t0 = time.perf_counter()
    prog.dslc(*prog.args)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    prog.dslc(*prog.args)
    second = time.perf_counter() - t0
    print(json.dumps({"import_s": imported, "first_call_s": first, "second_call_s": second}))


def first_call(name: str, cache: str) -> dict[str, float]:
    env = dict(os.environ, DSL_CACHE_DIR=cache, NUMBA_CACHE_DIR=os.path.join(cache, "numba"))
    cmd = [sys.executable, os.path.join(HERE, "bench_suite.py"), "--first-call", name]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# Compiles the runtime's own cached functions (runtime.blas.gemm_rows, parallel and serial, and
# gemm_rows_tiles; float32 and float64) into a cache, as any earlier program on the machine would have.
_PRIME = """
import numpy as np, dsl
for dtype in (np.float32, np.float64):
    for m, k, n in ((5, 300, 5), (512, 300, 500), (512, 256, 256)):  # serial, library, tiles
        dsl.compile(lambda a, b: a @ b)(np.ones((m, k), dtype), np.ones((k, n), dtype))
dsl.compile(lambda a: a * 2.0)(np.ones((512, 300), np.float32))  # a parallel loop: parallel_for
"""


def _prime(cache: str) -> None:
    env = dict(os.environ, DSL_CACHE_DIR=cache, NUMBA_CACHE_DIR=os.path.join(cache, "numba"))
    subprocess.run([sys.executable, "-c", _PRIME], env=env, capture_output=True, text=True, check=True)


def first_calls(names: list[str]) -> dict[str, dict[str, Any]]:
    """Per program: cold (every cache empty), warm (the same caches, filled), and new (a program
    never compiled, on a machine whose cache holds the runtime's functions: the usual first call)."""
    rows = {}
    for name in names:
        with tempfile.TemporaryDirectory(prefix="dslc-suite-cache-") as cache:
            cold = first_call(name, cache)
            warm = first_call(name, cache)
        with tempfile.TemporaryDirectory(prefix="dslc-suite-cache-") as cache:
            _prime(cache)
            new = first_call(name, cache)
        rows[name] = {"cold": cold, "warm": warm, "new": new}
        print(
            f"first call {name}: cold {cold['first_call_s']:.2f} s, new program {new['first_call_s']:.2f} s, "
            f"warm {warm['first_call_s']:.3f} s"
        )
    return rows


def _synthetic(iterations: int) -> Any:
    import dsl.numpy as dnp
    from dsl.compile import trace_function

    def body(x: Any, y: Any, w: Any) -> Any:
        t = x
        for i in range(iterations):
            t = dnp.tanh(t * y + x)
            if i % 4 == 3:
                t = t - t.sum(axis=1, keepdims=True) * 0.01
            if i % 16 == 15:
                t = t @ w
        return t

    x = np.ones((8, 16), np.float32)
    return trace_function(body, (x, x, np.eye(16, dtype=np.float32))).func


def synthetic(n_ops: int) -> Any:
    """A traced program of about ``n_ops`` ops: elementwise chains, row reductions and small matmuls."""
    per_16 = len(_synthetic(16).ops)
    return _synthetic(max(1, round(16 * n_ops / per_16)))


def pipeline_time(n_ops: int) -> dict[str, float]:
    from compiler.pipeline import Options, run_passes

    func = synthetic(n_ops)
    options = Options(verify=False)
    done: dict[str, float] = {}  # pass -> when it ended
    t0 = time.perf_counter()
    stages = run_passes(func, options, observe=lambda p, f: done.setdefault(p.name, time.perf_counter()))
    optimized = stages["optimized"]
    t1, t2, t3 = done["schedule"], done["rows"], done["bufferize"]  # passes | fuse, rows | plan, bufferize
    return {
        "ops": len(func.ops),
        "optimized_ops": len(optimized.ops),
        "passes_s": t1 - t0,
        "fuse_s": t2 - t1,
        "plan_s": t3 - t2,
        "total_s": t3 - t0,
        "us_per_op": 1e6 * (t3 - t0) / len(func.ops),
    }


def measure(names: list[str], quick: bool, overhead_s: float) -> dict[str, Any]:
    sizes = PIPELINE_SIZES[:2] if quick else PIPELINE_SIZES
    pipeline = {}
    for n in sizes:
        pipeline[n] = pipeline_time(n)
        print(f"pipeline {n} ops: {pipeline[n]['total_s']:.3f} s ({pipeline[n]['us_per_op']:.1f} us/op)")
    return {"first_call": first_calls(names), "pipeline": pipeline, "call_overhead_s": overhead_s}


def markdown(c: dict[str, Any]) -> list[str]:
    lines = ["", "## Compile time", ""]
    if c["first_call"]:
        lines += [
            "First call in a new process (trace + passes + code generation + Numba load or compile + run);",
            "cold: empty `DSL_CACHE_DIR` and `NUMBA_CACHE_DIR`; new program: the same, except that Numba's",
            "cache holds the runtime's own functions (`runtime.blas.gemm_rows`, `gemm_rows_tiles`,",
            "`runtime.parallel.parallel_for`, compiled by any earlier program on the machine); warm: a",
            "second new process, caches filled.",
            "",
            "| program | cold s | new program s | warm s | second call ms (warm process) |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, r in c["first_call"].items():
            new = f"{r['new']['first_call_s']:.2f}" if "new" in r else "-"
            lines.append(
                f"| {name} | {r['cold']['first_call_s']:.2f} | {new} | {r['warm']['first_call_s']:.3f} | "
                f"{1e3 * r['warm']['second_call_s']:.2f} |"
            )
        lines.append("")
    lines += [
        "Pass pipeline (`run_passes` + `fuse` + `plan_buffers`, no Numba) on synthetic programs "
        "(tanh chains, row reductions, small matmuls):",
        "",
        "| traced ops | optimized ops | passes s | fuse s | plan s | total s | us per op |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in c["pipeline"].values():
        lines.append(
            f"| {r['ops']:,} | {r['optimized_ops']:,} | {r['passes_s']:.3f} | {r['fuse_s']:.3f} | "
            f"{r['plan_s']:.3f} | {r['total_s']:.3f} | {r['us_per_op']:.1f} |"
        )
    lines += [
        "",
        f"Tiny-function call overhead: {1e6 * c['call_overhead_s']:.2f} us per call (target <= 10 us).",
    ]
    return lines
