"""First-call time against program size: unrolled programs of growing size, each compiled cold.

    python benchmarks/compile_scaling.py                    # every program, writes the record
    python benchmarks/compile_scaling.py --only mlp --no-record
    python benchmarks/compile_scaling.py --driver one --no-record   # every program's one-function driver

Each program runs in a new process with empty ``DSL_CACHE_DIR`` and ``NUMBA_CACHE_DIR`` (so the
runtime's own functions, ``gemm_rows`` and ``parallel_for``, are compiled too), and reports:

- ops: the operations of the optimized program (the gradient's backward included), what the
  fusion and the code generator start from;
- kernels: the kernel calls of the generated driver; driver: its form (``one``: one njit function,
  ``table``: a native loop over a table of steps, ``compiler/codegen/cpu/steps.py``);
- trace s: tracing the Python function; passes s: every pass (``run_pipeline``); codegen s:
  printing the module;
- Numba s: compiling the kernels and the driver (``runtime.precompile.prepare``, helper processes
  included, and the driver's compile at its first call where no helper compiled it ahead), the
  module's import too;
- first call s: the whole first call (all of the above, and the run);
- second call ms: the median of 5 calls after it.

Programs: ``mlp L``, the gradient of an L-layer tanh MLP (64 wide, batch 32, float32; every
layer's weight and bias an argument and a gradient: 4L + 1 arrays), and ``chain N``, N steps of
``x = tanh(x * 0.9 + 0.1); x = x - x.mean() * 0.5`` on a 64 x 64 float32 array (a reduction every
step, so each step is kernels of its own; 525 steps are 4,206 ops). Results go to
results/compile_scaling.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = {
    "mlp 10": ("mlp", 10),
    "mlp 25": ("mlp", 25),
    "mlp 50": ("mlp", 50),
    "mlp 100": ("mlp", 100),
    "chain 40": ("chain", 40),
    "chain 150": ("chain", 150),
    "chain 525": ("chain", 525),  # 4,206 ops: the size of the program issue 28 timed at 65.8 s
}


def build(kind: str, size: int) -> tuple[Any, tuple[Any, ...]]:
    """The compiled function and its arguments."""
    import numpy as np

    import dsl
    import dsl.numpy as dnp

    rng = np.random.default_rng(0)
    if kind == "mlp":

        def loss(params: Any, x: Any) -> Any:
            h = x
            for w, b in params:
                h = dnp.tanh(h @ w + b)
            return (h * h).mean()

        width = 64
        params = [
            (
                (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32),
                (0.1 * rng.standard_normal(width)).astype(np.float32),
            )
            for _ in range(size)
        ]
        x = rng.standard_normal((32, width)).astype(np.float32)
        return dsl.compile(dsl.grad(loss)), (params, x)

    def chain(x: Any) -> Any:
        for _ in range(size):
            x = dnp.tanh(x * 0.9 + 0.1)
            x = x - x.mean() * 0.5
        return x

    return dsl.compile(chain), (rng.standard_normal((64, 64)).astype(np.float32),)


def child(name: str, form: str) -> None:
    """One program's cold first call, phase by phase, as a line of JSON; ``form``: the driver
    (``auto``: as the code generator chooses)."""
    import faulthandler

    faulthandler.dump_traceback_later(900, exit=True)  # a hang shows where, in the error below
    import importlib

    import compiler.codegen as codegen
    import compiler.pipeline as pipeline

    compiling = importlib.import_module("dsl.compile")  # (the package's ``dsl.compile`` is the decorator)

    spent = {"passes": 0.0, "codegen": 0.0, "numba": 0.0}
    started: list[float] = []

    def timed(phase: str, function: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[phase] += time.perf_counter() - t0

        return run

    # compile_function and build_cpu_executable look these up in their modules at each call
    pipeline.run_pipeline = timed("passes", pipeline.run_pipeline)  # type: ignore[assignment]
    codegen.generate = timed("codegen", codegen.generate)  # type: ignore[assignment]
    codegen.load_module = timed("numba", codegen.load_module)  # type: ignore[assignment]
    executable = importlib.import_module("runtime.executable").Executable
    executable.__call__ = timed("numba", executable.__call__)  # the first call: kernels, driver, run
    compile_function = compiling.compile_function

    def marked(*args: Any) -> Any:
        started.append(time.perf_counter())  # tracing ends here
        return compile_function(*args)

    compiling.compile_function = marked
    if form != "auto":
        from compiler.codegen.cpu import steps

        steps.TABLE_STEPS = steps.TABLE_ARRAYS = -1 if form == "table" else 1 << 30
    kind, size = PROGRAMS[name]
    f, args = build(kind, size)
    t0 = time.perf_counter()
    f(*args)
    first = time.perf_counter() - t0
    trace = started[0] - t0
    numba = spent["numba"]
    calls = []
    for _ in range(5):
        t0 = time.perf_counter()
        f(*args)
        calls.append(time.perf_counter() - t0)
    numba -= statistics.median(calls)  # (the first call's run itself, about a later call's time)
    lowered = f.lower(*args)
    source = lowered.source()
    ops = sum(1 for line in lowered.ir("optimized").splitlines() if '"dsl.' in line)
    driver = "table" if "def run_steps(" in source else "one"
    kernels = source.count("call_kernel(kernel_table[") if driver == "one" else _table_steps(f)
    print(
        json.dumps(
            {
                "ops": ops,
                "kernels": kernels,
                "driver": driver,
                "trace_s": trace,
                "passes_s": spent["passes"],
                "codegen_s": spent["codegen"],
                "numba_s": numba,
                "first_call_s": first,
                "second_call_ms": 1000 * statistics.median(calls),
            }
        )
    )


def _table_steps(f: Any) -> int:
    """The number of steps of a table driver (rows of its step table)."""
    from compiler.codegen.cpu.steps import STEPS

    entry = next(iter(f._cache.values()))
    return int(entry.program.generated.constants[STEPS].shape[0])


def run(name: str, form: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="dslc-scaling-") as cache:
        env = dict(os.environ, DSL_CACHE_DIR=cache, NUMBA_CACHE_DIR=os.path.join(cache, "numba"))
        cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--driver", form]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{name} failed:\n{out.stderr[-6000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# First call against program size",
        "",
        f"- date: {result['date']}",
        f"- machine: {result['machine']}",
        f"- load average before: {result['load']}",
        f"- command: `{result['command']}`",
        "- each program in a new process with empty `DSL_CACHE_DIR` and `NUMBA_CACHE_DIR`; one run each",
        "",
        "| program | ops | kernels | driver | trace s | passes s | codegen s | Numba s | first call s "
        "| second call ms |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in result["programs"].items():
        lines.append(
            f"| {name} | {r['ops']} | {r['kernels']} | {r['driver']} | {r['trace_s']:.2f} | "
            f"{r['passes_s']:.2f} | "
            f"{r['codegen_s']:.2f} | {r['numba_s']:.2f} | {r['first_call_s']:.2f} | "
            f"{r['second_call_ms']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="", help="program names or kinds (mlp, chain), comma-separated")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--driver", default="auto", choices=("auto", "one", "table"), help="driver form")
    parser.add_argument("--no-record", action="store_true", help="print only; leave the record alone")
    parser.add_argument("--out", default=os.path.join(HERE, "results", "compile_scaling.md"))
    args = parser.parse_args()
    if args.child:
        child(args.child, args.driver)
        return
    wanted = [w for w in args.only.split(",") if w]
    names = [n for n in PROGRAMS if not wanted or any(w in (n, n.split()[0]) for w in wanted)]
    result: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load": " ".join(open("/proc/loadavg").read().split()[:3])
        if os.path.exists("/proc/loadavg")
        else "?",
        "command": "python benchmarks/compile_scaling.py"
        + f" --only {args.only}" * bool(args.only)
        + f" --driver {args.driver}" * (args.driver != "auto"),
        "programs": {},
    }
    for name in names:
        result["programs"][name] = r = run(name, args.driver)
        print(
            f"{name:10s} ops {r['ops']:5d} kernels {r['kernels']:5d} {r['driver']:5s} "
            f"trace {r['trace_s']:5.2f} s  passes {r['passes_s']:6.2f} s  codegen {r['codegen_s']:5.2f} s  "
            f"Numba {r['numba_s']:6.2f} s  "
            f"first call {r['first_call_s']:6.2f} s  second call {r['second_call_ms']:8.3f} ms",
            flush=True,
        )
    if not args.no_record:
        with open(args.out, "w") as f:
            f.write(markdown(result))


if __name__ == "__main__":
    main()
