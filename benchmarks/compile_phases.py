"""Where a cold first call's time goes: the kernels (``runtime.precompile.prepare``: compiled ahead,
then the kernel table) against the rest (mostly the driver's compile), and each kernel's own compile
time when compiled one by one in one process.

    python benchmarks/compile_phases.py                 # the three BLAS-bound suite programs
    python benchmarks/compile_phases.py --only transformer

Each program runs in a new process with empty ``DSL_CACHE_DIR`` and ``NUMBA_CACHE_DIR`` (so the
runtime's ``gemm_rows`` is compiled too), twice: with the default ``DSL_COMPILE_JOBS`` (phases) and
with ``DSL_COMPILE_JOBS=1`` (per kernel, serial). Writes results/compile_phases.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = ("MLP training step", "second derivative", "transformer block")


def child(name: str, per_kernel: bool) -> None:
    """Time one cold first call; with ``per_kernel`` compile every kernel alone, in slot order."""
    import faulthandler

    faulthandler.dump_traceback_later(180, exit=True)  # a hang shows where, in the error below
    sys.path.insert(0, HERE)
    import suite_programs

    import compiler.codegen as codegen
    from runtime import precompile

    marks: dict[str, Any] = {"kernels": {}}
    real_prepare = codegen.prepare

    def timed_prepare(module: Any, slots: Any, weights: Any, entry: str, *rest: Any) -> Any:
        marks["prepare_start"] = time.perf_counter()
        if per_kernel:
            for name, signature in [*slots, *((entry, r) for r in rest[:1])]:  # the driver last
                t0 = time.perf_counter()
                precompile.compile_kernels(module, {name: [signature]})
                marks["kernels"][name] = marks["kernels"].get(name, 0.0) + time.perf_counter() - t0
        table = real_prepare(module, slots, weights, entry, *rest)
        marks["prepare_end"] = time.perf_counter()
        return table

    codegen.prepare = timed_prepare  # type: ignore[assignment]  # build_cpu_executable looks it up here
    prog = suite_programs.BUILDERS[name]()
    t0 = time.perf_counter()
    prog.dslc(*prog.args)
    end = time.perf_counter()
    print(
        json.dumps(
            {
                "first_call_s": end - t0,
                "before_s": marks["prepare_start"] - t0,
                "prepare_s": marks["prepare_end"] - marks["prepare_start"],
                "after_s": end - marks["prepare_end"],
                "kernels": marks["kernels"],
            }
        )
    )


def run(name: str, per_kernel: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="dslc-phases-") as cache:
        env = dict(os.environ, DSL_CACHE_DIR=cache, NUMBA_CACHE_DIR=os.path.join(cache, "numba"))
        if per_kernel:
            env["DSL_COMPILE_JOBS"] = "1"
        cmd = [sys.executable, os.path.abspath(__file__), "--child", name] + ["--per-kernel"] * per_kernel
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{name}{' (per kernel)' * per_kernel} failed:\n{out.stderr[-6000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Cold first call, phase by phase",
        "",
        f"- date: {result['date']}",
        f"- machine: {os.cpu_count()} cores",
        f"- command: `{result['command']}`",
        "- empty caches (Numba's too: the runtime's `gemm_rows` is compiled as well); one run each",
        "",
        "Default `DSL_COMPILE_JOBS` (helper processes compile a share of the functions): kernels = "
        "`runtime.precompile.prepare` (the kernels and the driver compiled ahead, then the kernel "
        "table); driver and run = the rest of the first call after it (the driver loads from "
        "Numba's cache).",
        "",
        "| program | first call s | before kernels s | kernels s | driver and run s |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, r in result["programs"].items():
        p = r["phases"]
        lines.append(
            f"| {name} | {p['first_call_s']:.2f} | {p['before_s']:.2f} | {p['prepare_s']:.2f} | "
            f"{p['after_s']:.2f} |"
        )
    lines += [
        "",
        "`DSL_COMPILE_JOBS=1`, each function compiled alone, in slot order, the driver (`run`) last "
        "(seconds, heaviest first; the first function to use a float32 math helper also compiles "
        "the helper):",
        "",
    ]
    for name, r in result["programs"].items():
        kernels = sorted(r["serial"]["kernels"].items(), key=lambda kv: -kv[1])
        total = sum(t for _, t in kernels)
        listed = ", ".join(f"{k} {t:.2f}" for k, t in kernels)
        lines.append(
            f"- {name}: total {total:.2f} s, first call {r['serial']['first_call_s']:.2f} s: {listed}"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="", help="program names (substring match, comma-separated)")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--per-kernel", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=os.path.join(HERE, "results", "compile_phases.md"))
    args = parser.parse_args()
    if args.child:
        child(args.child, args.per_kernel)
        return
    wanted = [w for w in args.only.split(",") if w]
    names = [n for n in PROGRAMS if not wanted or any(w in n for w in wanted)]
    result: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": "python benchmarks/compile_phases.py" + f" --only {args.only}" * bool(args.only),
        "programs": {},
    }
    for name in names:
        result["programs"][name] = {"phases": run(name, False), "serial": run(name, True)}
        p = result["programs"][name]["phases"]
        print(
            f"{name}: first call {p['first_call_s']:.2f} s, kernels {p['prepare_s']:.2f} s, "
            f"rest {p['after_s']:.2f} s"
        )
    with open(args.out, "w") as f:
        f.write(markdown(result))
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
