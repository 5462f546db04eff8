"""The machine's float32 arithmetic peak: fused multiply-adds on registers only, on every core.

    python benchmarks/machine_peak.py [--threads N]

A loop of ``ACCUMULATORS`` independent vector FMAs (``llvm.fma`` on the host's widest vectors, 16
floats with AVX-512, else 8) compiled by llvmlite for this CPU, run on one Python thread per core
(the ctypes call releases the GIL). Nothing is loaded or stored in the loop, so the figure is what
the cores' FMA units can do at the clock they hold under load: no matmul, by any library, runs
faster. ``bench_suite.py`` divides each program's matmul FLOPs by it for the *peak floor*.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import threading
import time
from typing import Any

import llvmlite.binding as llvm

ACCUMULATORS = 12  # independent chains: more than FMA latency x FMA units on AVX-512 cores (4 x 2)


def _lanes() -> int:
    return 16 if llvm.get_host_cpu_features().get("avx512f", False) else 8


def _module_text(lanes: int) -> str:
    """``float peak(i64 n)``: ``n`` steps of ``ACCUMULATORS`` FMAs on ``<lanes x float>``, each chain
    started from different values (identical chains would be merged by the optimizer)."""
    vt = f"<{lanes} x float>"
    fma = f"llvm.fma.v{lanes}f32"
    lines = ["define float @peak(i64 %n) {", "entry:", "  br label %loop", "loop:"]
    lines.append("  %i = phi i64 [0, %entry], [%next, %loop]")
    for a in range(ACCUMULATORS):
        start = ", ".join(f"float {1.0 + a + lane / 64!r}" for lane in range(lanes))  # exact in f32
        lines.append(f"  %a{a} = phi {vt} [<{start}>, %entry], [%b{a}, %loop]")
    mul = ", ".join("float 0.5" for _ in range(lanes))
    add = ", ".join("float 0.25" for _ in range(lanes))
    step = f"{vt} <{mul}>, {vt} <{add}>"  # x * 0.5 + 0.25: every chain settles at 0.5, no overflow
    lines += [f"  %b{a} = call {vt} @{fma}({vt} %a{a}, {step})" for a in range(ACCUMULATORS)]
    lines += ["  %next = add i64 %i, 1", "  %more = icmp ult i64 %next, %n"]
    lines.append("  br i1 %more, label %loop, label %done")
    lines.append("done:")
    total = "%b0"
    for a in range(1, ACCUMULATORS):
        lines.append(f"  %s{a} = fadd {vt} {total}, %b{a}")
        total = f"%s{a}"
    lines += [f"  %r = extractelement {vt} {total}, i32 0", "  ret float %r", "}"]
    lines.append(f"declare {vt} @{fma}({vt}, {vt}, {vt})")
    return "\n".join(lines)


_COMPILED: dict[str, Any] = {}


def _kernel() -> tuple[Any, int]:
    """The compiled loop (kept alive with its engine) and its vector width."""
    if "fn" not in _COMPILED:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        lanes = _lanes()
        module = llvm.parse_assembly(_module_text(lanes))
        module.verify()
        target = llvm.Target.from_default_triple()
        machine = target.create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3
        )
        engine = llvm.create_mcjit_compiler(module, machine)
        engine.finalize_object()
        fn = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64)(engine.get_function_address("peak"))
        _COMPILED.update(fn=fn, engine=engine, lanes=lanes)
    return _COMPILED["fn"], _COMPILED["lanes"]


def fma_peak_gflops(threads: int | None = None, seconds: float = 0.25, rounds: int = 3) -> float:
    """Float32 GFLOP/s of the FMA loop on ``threads`` threads (default: every core), the best of
    ``rounds`` runs of about ``seconds`` each (an FMA counts as two FLOPs)."""
    fn, lanes = _kernel()
    threads = threads or os.cpu_count() or 1
    per_step = ACCUMULATORS * lanes * 2
    t0 = time.perf_counter()
    fn(1_000_000)  # calibrate on one thread
    steps = max(int(seconds * 1_000_000 / max(time.perf_counter() - t0, 1e-6)), 1_000_000)
    best = 0.0
    for _ in range(rounds):
        workers = [threading.Thread(target=fn, args=(steps,)) for _ in range(threads)]
        t0 = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        best = max(best, steps * per_step * threads / (time.perf_counter() - t0) / 1e9)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=0, help="threads (default: one per core)")
    args = parser.parse_args()
    threads = args.threads or os.cpu_count() or 1
    print(f"float32 FMA peak, {threads} thread(s): {fma_peak_gflops(threads):.1f} GFLOP/s")


if __name__ == "__main__":
    main()
