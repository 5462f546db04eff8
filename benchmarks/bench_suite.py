"""Benchmark suite (issue 7): dslc against NumPy, JAX (jax.jit on CPU) and PyTorch eager, in one run.

    python benchmarks/bench_suite.py [--quick] [--only NAME,...] [--out benchmarks/results/suite.md]

For each program of ``suite_programs.py``: results are checked equal (allclose) across dslc, NumPy
(forward value), JAX and PyTorch before anything is timed; then each framework is timed in a new
process of its own (median of repeated runs after warm-up; JAX's and PyTorch's worker threads would
otherwise slow the next framework's calls) and ratios are taken within the run. Also: the elementwise chain's
fraction of memory bandwidth (a NumPy copy of the same bytes, measured in the same run), memory
(dslc's planned peak and arena against ``memory_analysis()`` temp bytes of JAX's compiled program),
cold and warm first-call latency per program in fresh processes, the pass pipeline's time on
synthetic programs of 1k-100k ops, and the tiny-function call overhead. JAX and PyTorch are optional
(``pip install -e '.[bench]'``); a missing one is noted in the table. Writes suite.md and suite.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import machine_peak  # noqa: E402
import suite_compile  # noqa: E402
import suite_programs  # noqa: E402
from suite_programs import Program  # noqa: E402

import dsl  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FRAMEWORKS = ("dslc", "numpy", "jax", "torch")


def median_time(
    fn: Callable[[], object], repeats: int, warmup: int = 3, warmup_s: float = 1.0, budget_s: float = 20.0
) -> float:
    """Median seconds per call after warm-up: at least ``warmup`` calls and ``warmup_s`` seconds (at
    most 50 calls). A new process's first calls are slow for a while on this VM (the elementwise
    chain: ~45 ms for its first 6 calls after compiling, 4 ms after), for every framework. Stops
    early once ``budget_s`` is spent (at least 3 timed calls)."""
    start = time.perf_counter()
    for k in range(50):
        if k >= warmup and time.perf_counter() - start >= warmup_s:
            break
        fn()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < repeats and (len(times) < 3 or time.perf_counter() - start < budget_s):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


# ---- running each framework on the same inputs ------------------------------------------------------


def leaves(x: Any) -> list[np.ndarray]:
    """Arrays of a result structure in a fixed order (dicts by sorted key), as float64 NumPy arrays."""
    if isinstance(x, dict):
        return [a for k in sorted(x) for a in leaves(x[k])]
    if isinstance(x, (list, tuple)):
        return [a for v in x for a in leaves(v)]
    if hasattr(x, "detach"):  # torch
        x = x.detach().cpu().numpy()
    if hasattr(x, "copy_to_host"):  # a Numba device array
        x = x.copy_to_host()
    return [np.asarray(x, np.float64)]


def copy_tree(x: Any, to: Callable[[Any], Any] = np.copy) -> Any:
    """``to`` applied to every array leaf (NumPy or torch) of a structure."""
    if isinstance(x, dict):
        return {k: copy_tree(v, to) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(copy_tree(v, to) for v in x)
    return to(x) if isinstance(x, np.ndarray) or hasattr(x, "detach") else x


class Runner:
    """One framework's callable on its own copy of the inputs; ``call()`` runs once, ``check()`` returns
    the values compared across frameworks (a training step's updated parameters included)."""

    torch_device = "cpu"  # where PyTorch's inputs live

    def __init__(self, prog: Program, framework: str) -> None:
        self.prog, self.framework = prog, framework
        self.args = self._convert(copy_tree(prog.args))
        self.fn = self._build()
        self.state: list[Any] = []  # JAX's donated parameters of a training step

    def _convert(self, args: Any) -> Any:
        if self.framework == "jax":
            import jax

            return jax.device_put(args)
        if self.framework == "torch":
            import torch

            conv = copy_tree(args, lambda a: torch.from_numpy(a).to(self.torch_device))
            if self.prog.mutates:  # the parameters are leaf tensors updated by the step
                conv = (copy_tree(conv[0], lambda t: t.requires_grad_(True)), *conv[1:])
            return conv
        return args

    def _build(self) -> Callable[..., Any]:
        if self.framework == "dslc":
            return self.prog.dslc
        if self.framework == "numpy":
            return self.prog.numpy
        make = self.prog.jax if self.framework == "jax" else self.prog.torch
        assert make is not None
        return make()

    def call(self) -> Any:
        if self.framework == "jax":
            import jax

            if self.prog.mutates:
                args = (self.state[-1] if self.state else self.args[0], *self.args[1:])
                out = self.fn(*args)
                self.state[:] = [out[1]]
            else:
                out = self.fn(*self.args)
            return jax.block_until_ready(out)
        return self.fn(*self.args)

    def check(self) -> list[np.ndarray]:
        out = self.call()
        if self.framework == "dslc" and self.prog.mutates:
            return leaves(out) + leaves(self.args[0])
        if self.framework == "torch" and self.prog.mutates:
            return leaves(out[0]) + leaves(out[1])
        return leaves(out)


def compare(prog: Program, name: str, got: list[np.ndarray], want: list[np.ndarray]) -> float:
    """Max relative error over all values; fails loudly if any value is not allclose."""
    assert len(got) == len(want), f"{prog.name}: {name} returned {len(got)} values, dslc {len(want)}"
    worst = 0.0
    for i, (g, w) in enumerate(zip(got, want)):
        g = g.reshape(w.shape) if g.size == w.size else g
        scale = max(float(np.abs(w).max(initial=0.0)), 1e-30)
        np.testing.assert_allclose(
            g, w, rtol=prog.tol, atol=prog.tol * scale, err_msg=f"{prog.name}: {name} value {i}"
        )
        worst = max(worst, float(np.abs(g - w).max(initial=0.0)) / scale)
    return worst


def available(framework: str) -> str | None:
    """None if usable, else why not."""
    try:
        if framework == "jax":
            import jax

            jax.config.update("jax_platforms", "cpu")
        elif framework == "torch":
            import torch

            torch.set_num_threads(os.cpu_count() or 1)
    except ImportError as err:
        return f"not installed ({err}); `pip install -e '.[bench]'`"
    return None


def child_times(
    prog: Program, repeats: int, missing: dict[str, str], rounds: int = 1
) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Every framework's median on ``prog``, each in a new process (``time_in_child``), and a NumPy
    copy of the same bytes for the bandwidth figure. With ``rounds`` > 1 every framework is timed
    once per round, the frameworks interleaved, and its figure is the lowest of its round medians:
    on a shared VM a burst of outside load then spoils one round of one framework, not its figure.
    Returns the figures and every round's medians."""
    names = [f for f in FRAMEWORKS if f not in missing] + (["copy"] if prog.bytes_moved else [])
    per_round: dict[str, list[float]] = {f: [] for f in names}
    for _ in range(rounds):
        for f in names:
            per_round[f].append(time_in_child(prog.name, f, repeats))
    return {f: min(ts) for f, ts in per_round.items()}, per_round


def run_program(
    prog: Program,
    repeats: int,
    missing: dict[str, str],
    timed: dict[str, float] | None = None,
    gemm_s: float | None = None,
    peak_s: float | None = None,
) -> dict[str, Any]:
    """Checks every framework against dslc and reads the memory figures in this process; times come
    from ``timed`` (``child_times``, taken before this process ran any framework), or without it
    (``--quick``) from this process, a smoke run only."""
    row: dict[str, Any] = {"program": prog.name, "description": prog.description, "times": {}, "notes": []}
    runners = {f: Runner(prog, f) for f in FRAMEWORKS if f not in missing}
    want = runners["dslc"].check()
    errs = {}
    for f, r in runners.items():
        if f == "dslc":
            continue
        got = r.check()
        errs[f] = compare(
            prog, f, got[:1] if f == "numpy" and prog.numpy_is_forward else got, want[: len(got)]
        )
    row["max_rel_err"] = errs
    for f, r in runners.items():  # each framework alone in a fresh process (see time_in_child)
        row["times"][f] = timed[f] if timed is not None else median_time(r.call, repeats)
    for f, why in missing.items():
        row["notes"].append(f"{f} skipped: {why}")
    if prog.numpy_is_forward:
        row["notes"].append("NumPy: forward value only (hand-written)")
    if prog.bytes_moved:
        x, out = prog.args[0], np.empty_like(prog.args[0])
        copy = timed["copy"] if timed is not None else median_time(lambda: np.copyto(out, x), repeats)
        row["copy_s"] = copy
        row["bandwidth_fraction"] = copy / row["times"]["dslc"]
        row["dslc_GBps"] = prog.bytes_moved / row["times"]["dslc"] / 1e9
        row["copy_GBps"] = prog.bytes_moved / copy / 1e9
    flops = matmul_flops(prog.dslc.lower(*prog.args).ir("optimized"))
    if flops:
        gemm = gemm_s if gemm_s is not None else median_time(_numpy_gemm(), repeats)
        row["matmul_flops"] = flops
        row["gemm_GFLOPs"] = 2 * GEMM_N**3 / gemm / 1e9
        row["matmul_floor_s"] = flops / (row["gemm_GFLOPs"] * 1e9)
        if peak_s is not None:
            row["peak_GFLOPs"] = 1 / peak_s
            row["peak_floor_s"] = flops * peak_s / 1e9
    row["memory"] = memory(prog, runners.get("jax"))
    return row


def _numpy_gemm() -> Callable[[], Any]:
    a = np.random.default_rng(0).standard_normal((GEMM_N, GEMM_N)).astype(np.float32)
    c = np.empty_like(a)
    return lambda: np.matmul(a, a, out=c)


GEMM_N = 2048  # the machine's float32 matmul rate: NumPy's BLAS (all cores) on GEMM_N^3


def matmul_flops(ir_text: str) -> int:
    """Floating-point operations of the matmuls in a dslc program's optimized IR (2 m n k per batch
    element): the arithmetic no framework computing the same products avoids."""
    total = 0
    for a, res in re.findall(
        r'"dsl\.matmul".*?: \(tensor<([0-9x]+)x\w+>, tensor<[^>]*>\) -> tensor<([0-9x]+)x\w+>', ir_text
    ):
        k = int(a.split("x")[-1])
        total += 2 * math.prod(int(d) for d in res.split("x")) * k
    return total


def time_in_child(name: str, framework: str, repeats: int) -> float:
    """Median seconds per call of one framework on one program, measured in a new process where no
    other framework ever ran: PyTorch's and XLA's worker threads stay alive (and spin) after their
    calls and slowed dslc's parallel kernels by up to 15x when they shared a process."""
    cmd = [sys.executable, os.path.abspath(__file__), "--time-child", f"{name}:{framework}:{repeats}"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"timing {framework} on {name} failed:\n{out.stderr[-3000:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["seconds"])


def time_child(spec: str) -> None:
    """Child process of ``time_in_child``: ``copy`` times a NumPy copy of the program's first input."""
    name, framework, repeats = spec.rsplit(":", 2)
    prog = suite_programs.BUILDERS[name]()
    if framework == "copy":
        x = prog.args[0]
        out = np.empty_like(x)
        seconds = median_time(lambda: np.copyto(out, x), int(repeats))
    elif framework == "gemm":
        seconds = median_time(_numpy_gemm(), int(repeats))
    elif framework == "peak":  # seconds per GFLOP at the FMA peak
        seconds = 1 / machine_peak.fma_peak_gflops()
    else:
        if framework in ("jax", "torch"):
            available(framework)
        seconds = median_time(Runner(prog, framework).call, int(repeats))
    print(json.dumps({"seconds": seconds}))


def memory(prog: Program, jax_runner: Runner | None) -> dict[str, Any]:
    lowered = prog.dslc.lower(*prog.args)
    plan = lowered.memory_plan()
    arenas = [e.run.arena.nbytes for e in prog.dslc._cache.values()]  # the executable that ran
    out: dict[str, Any] = {"planned_peak": plan.peak_bytes, "naive": plan.naive_bytes, "arena": max(arenas)}
    # kernels: not helpers, not the driver; a parallel kernel and its chunk function are one (the
    # driver runs a kernel's chunks itself when it has nothing to do around them: chunks alone)
    out["kernels"] = len(set(re.findall(r"^def (k\w+?)(?:_chunk)?\(", lowered.source(), re.M)))
    out["matmul_calls"] = len(re.findall(r"# gemm_rows\w*$", lowered.source(), re.M))  # runtime.blas
    if jax_runner is not None:
        compiled = jax_runner.fn.lower(*jax_runner.args).compile()
        analysis = compiled.memory_analysis()
        out["jax_temp"] = int(analysis.temp_size_in_bytes) if analysis is not None else None
    return out


# ---- machine and versions -----------------------------------------------------------------------------


def cpu_model() -> str:
    """The CPU's name and its widest vector extension (hosts of one name differ: AVX2 or AVX-512,
    and the float32 math runs at twice the width on the second)."""
    model, flags = "", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and not model:
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    model = model or platform.processor() or platform.machine()
    vector = next((name for flag, name in (("avx512f", "AVX-512"), ("avx2", "AVX2")) if flag in flags), "")
    return f"{model} ({vector})" if vector else model


def versions() -> dict[str, str]:
    import numba

    out = {"python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__}
    for name in ("jax", "torch"):
        try:
            out[name] = __import__(name).__version__
        except ImportError:
            out[name] = "not installed"
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True)
        out["dslc"] = sha.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except OSError:
        out["dslc"] = "unknown"
    return out


def machine() -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "platform": platform.platform(), "load": load}


# ---- the report -----------------------------------------------------------------------------------------


def fmt_ms(t: float | None) -> str:
    return "-" if t is None else f"{1e3 * t:.2f}"


def ratio(row: dict[str, Any], peer: str) -> str:
    t = row["times"]
    return f"{t['dslc'] / t[peer]:.2f}" if peer in t else "skipped"


def paired_ratios(result: dict[str, Any], name: str, peer: str) -> list[float]:
    """dslc / peer in each round, the two timed one after the other: on a VM whose speed drifts
    (1.5x between runs here), the ratio of neighbours in time moves less than either time."""
    per_round = result.get("round_medians", {}).get(name, {})
    return [d / p for d, p in zip(per_round.get("dslc", []), per_round.get(peer, []))]


def paired(rs: list[float]) -> str:
    """Per-round ratios (``paired_ratios``) as ``median [lowest-highest]`` ("-" without rounds)."""
    if len(rs) < 2:
        return "-"
    return f"{statistics.median(rs):.2f} [{min(rs):.2f}-{max(rs):.2f}]"


def markdown(result: dict[str, Any], command: str) -> str:
    m, v = result["machine"], result["versions"]
    lines = [
        "# Benchmark suite (issue 7)",
        "",
        f"- date: {result['date']}",
        f"- machine: {m['cpu']}, {m['cores']} cores, {m['platform']}; load average at start "
        f"{m['load'][0]:.2f}",
        "- versions: " + ", ".join(f"{k} {val}" for k, val in v.items()),
        f"- command: `{command}`",
        "- time: median of repeated calls after warm-up, each framework timed in a new process of its own"
        + (
            f", {result['rounds']} rounds with the frameworks interleaved, the lowest round median kept "
            "(every round's medians are in the .json)"
            if result.get("rounds", 1) > 1
            else ""
        )
        + "; dslc/peer < 1 means dslc is faster; per round: the ratio of the two times of each round "
        "(timed one after the other), median [lowest-highest] over the rounds",
        "",
        "| program | dslc ms | NumPy fwd ms | JAX ms | PyTorch ms | dslc/JAX | dslc/PyTorch "
        "| dslc/JAX per round | dslc/PyTorch per round | max rel err |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in result["programs"]:
        t = row["times"]
        err = ", ".join(f"{k} {e:.1e}" for k, e in row["max_rel_err"].items())
        lines.append(
            f"| {row['program']} | {fmt_ms(t['dslc'])} | {fmt_ms(t.get('numpy'))} | {fmt_ms(t.get('jax'))} | "
            f"{fmt_ms(t.get('torch'))} | {ratio(row, 'jax')} | {ratio(row, 'torch')} | "
            f"{paired(paired_ratios(result, row['program'], 'jax'))} | "
            f"{paired(paired_ratios(result, row['program'], 'torch'))} | {err} |"
        )
    lines += ["", "Programs:", ""]
    lines += [f"- {row['program']}: {row['description']}" for row in result["programs"]]
    for row in result["programs"]:
        if "bandwidth_fraction" in row:
            share = 100 * row["bandwidth_fraction"]
            lines.append(
                f"- {row['program']}: dslc {row['dslc_GBps']:.1f} GB/s = {share:.0f}% "
                f"of a NumPy copy of the same bytes ({row['copy_GBps']:.1f} GB/s, measured in this run)"
            )
    notes = sorted({n for row in result["programs"] for n in row["notes"]})
    lines += [f"- {n}" for n in notes]
    lines += [
        "",
        "## Memory",
        "",
        "| program | dslc kernels + matmul calls | planned peak | arena | naive | JAX temp bytes "
        "| planned / JAX |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["programs"]:
        mem = row["memory"]
        jt = mem.get("jax_temp")
        rel = f"{mem['planned_peak'] / jt:.2f}" if jt else "-"
        lines.append(
            f"| {row['program']} | {mem['kernels']} + {mem.get('matmul_calls', 0)} | "
            f"{mem['planned_peak']:,} | {mem['arena']:,} | "
            f"{mem['naive']:,} | {'-' if jt is None else f'{jt:,}'} | {rel} |"
        )
    lines += floor_table(result)
    lines += suite_compile.markdown(result["compile"])
    lines += targets(result)
    lines += [
        "",
        "## Notes",
        "",
        "- Timings on this VM move by up to 1.5x between runs, for every framework (JAX's MLP step: 12.4 and",
        "  22.7 ms in two runs on 2026-11-22): hence the interleaved rounds, the lowest kept; compare ratios",
        "  within one run, at a low load average (printed above).",
        "  With other busy processes on the cores, dslc's spinning OpenMP workers cost ~25% on the MLP step",
        "  (`OMP_WAIT_POLICY=PASSIVE` is then better, docs/flags.md). Beside a process taking half a core,",
        "  dslc slows a little more than JAX (a preempted thread holds up every fork-join kernel):",
        "  `python benchmarks/bench_contention.py` (results/contention.md).",
        "- Per round: a burst of outside load slows whichever framework is running; the ratio of two",
        "  neighbours in time cancels slow drift but not such a burst, hence its range beside the median.",
        "- Every child process imports `suite_programs` and so `runtime`, whose malloc tuning",
        "  (`DSL_MALLOC_TUNING`, freed memory kept instead of fresh pages per call) then applies to every",
        "  framework alike: JAX, PyTorch and NumPy results are timed with it too.",
        "- The effect of each code-generation optimization, switched off one at a time:",
        "  `python benchmarks/bench_optimizations.py` (results/suite_optimizations.md); where the time goes",
        "  kernel by kernel: `python benchmarks/profile_kernels.py PROGRAM`.",
    ]
    return "\n".join(lines) + "\n"


def floor_table(result: dict[str, Any]) -> list[str]:
    """The matmul floors: each program's matmul arithmetic at this machine's float32 matmul rate
    (NumPy's BLAS on all cores) and at its FMA peak (``machine_peak.py``: FMAs on registers only,
    every core), both measured in the same run. No framework doing the same products in float32 runs
    faster than the peak floor, so a ratio target below peak floor / peer cannot be met at all."""
    rows = [r for r in result["programs"] if r.get("matmul_flops")]
    if not rows:
        return []
    rate, peak = rows[0]["gemm_GFLOPs"], rows[0].get("peak_GFLOPs")
    lines = [
        "",
        "## Matmul floor",
        "",
        f"Float32 matmul rate of this machine, measured in this run: {rate:.0f} GFLOP/s "
        f"(NumPy's BLAS, {GEMM_N}^3, all cores). floor = the program's matmul FLOPs at that rate;",
        "floor / peer is the lowest ratio to that peer an implementation of the same products at the",
        "BLAS's rate can reach.",
    ]
    if peak:
        lines += [
            f"Float32 FMA peak of this machine, measured in this run: {peak:.0f} GFLOP/s (`python "
            "benchmarks/machine_peak.py`:",
            "independent vector FMAs on registers, one thread per core). peak floor = the matmul FLOPs at",
            "the peak: no float32 implementation of the same products, by any library, runs faster, so a",
            "target below peak floor / peer cannot be met on this machine.",
        ]
    lines += [
        "",
        "| program | matmul GFLOP | floor ms | peak floor ms | dslc ms | dslc / floor | dslc / peak floor "
        "| floor / JAX | floor / PyTorch | peak floor / PyTorch |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        t, floor, top = r["times"], r["matmul_floor_s"], r.get("peak_floor_s")

        def rel(peer: str, f: float | None, t: dict[str, float] = t) -> str:
            return f"{f / t[peer]:.2f}" if t.get(peer) and f else "-"

        top_ms = f"{1e3 * top:.2f}" if top else "-"
        per_top = f"{t['dslc'] / top:.2f}" if top else "-"
        lines.append(
            f"| {r['program']} | {r['matmul_flops'] / 1e9:.2f} | {1e3 * floor:.2f} | {top_ms} | "
            f"{fmt_ms(t['dslc'])} | {t['dslc'] / floor:.2f} | {per_top} | {rel('jax', floor)} | "
            f"{rel('torch', floor)} | {rel('torch', top)} |"
        )
    return lines


def targets(result: dict[str, Any]) -> list[str]:
    """Issue 7's targets, each with the figure measured in this run and whether it is met."""
    rows: list[tuple[str, str, bool | None]] = []
    by_name = {r["program"]: r for r in result["programs"]}

    def ratio_row(name: str, peer: str, limit: float) -> None:
        t = by_name[name]["times"] if name in by_name else {}
        if peer in t:
            value = t["dslc"] / t[peer]
            rs = paired_ratios(result, name, peer)
            rounds = f" (per round {paired(rs)}, {sum(r <= limit for r in rs)} of {len(rs)})"
            figure = f"{value:.2f}" + rounds * bool(rs)
            top = by_name[name].get("peak_floor_s")
            if top:  # the lowest ratio any float32 implementation reaches here (``floor_table``)
                bound = top / t[peer]
                figure += f"; peak floor / {peer} {bound:.2f}" + " (unreachable here)" * (bound > limit)
            rows.append((f"{name}: dslc / {peer} <= {limit}", figure, value <= limit))

    if "elementwise chain" in by_name:
        chain = by_name["elementwise chain"]
        share = chain["bandwidth_fraction"]
        rows.append(("elementwise chain: >= 80% of copy bandwidth", f"{100 * share:.0f}%", share >= 0.8))
        ratio_row("elementwise chain", "jax", 1.0)
    for name in ("MLP training step", "softmax + cross-entropy", "layer norm", "transformer block"):
        ratio_row(name, "jax", 1.0)
        ratio_row(name, "torch", 0.6)
    ratio_row("second derivative", "jax", 1.0)
    for r in result["programs"]:
        mem = r["memory"]
        if mem.get("jax_temp"):
            ok = mem["planned_peak"] <= mem["jax_temp"]
            rows.append((f"{r['program']}: planned peak <= JAX temp bytes", f"{mem['planned_peak']:,}", ok))
    first = result["compile"]["first_call"].get("MLP training step")
    if first:
        warm = first["warm"]["first_call_s"]
        rows.append(
            ("MLP training step: first call, new process, warm cache <= 1 s", f"{warm:.2f} s", warm <= 1)
        )
    overhead = result["compile"]["call_overhead_s"]
    rows.append(("tiny-function call overhead <= 10 us", f"{1e6 * overhead:.2f} us", overhead <= 10e-6))
    lines = ["", "## Targets (issue 7)", "", "| target | measured | met |", "|---|---:|---|"]
    lines += [f"| {t} | {v} | {'yes' if ok else 'no'} |" for t, v, ok in rows]
    return lines


def write_report(text: str, path: str) -> None:
    """Print a benchmark's Markdown report and write it to ``path``."""
    print(text)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def tiny_overhead(n: int) -> float:
    tiny = dsl.compile(lambda x: x + 1.0)
    one = np.ones(1, np.float32)
    tiny(one)
    best = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            tiny(one)
        best.append((time.perf_counter() - t0) / n)
    return min(best)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: fewer repeats, all in one process, no first calls"
    )
    parser.add_argument("--only", default="", help="comma-separated program names (substring match)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="time every framework this many times, interleaved; keep the lowest",
    )
    parser.add_argument("--no-compile-times", action="store_true", help="skip first-call subprocesses")
    parser.add_argument("--first-call", default="", help=argparse.SUPPRESS)  # child process modes
    parser.add_argument("--time-child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--render", action="store_true", help="rewrite the .md from the .json only")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "suite.md"))
    args = parser.parse_args()
    if args.first_call:
        suite_compile.first_call_child(args.first_call)
        return
    if args.time_child:
        time_child(args.time_child)
        return
    if args.render:
        with open(os.path.splitext(args.out)[0] + ".json") as f:
            saved = json.load(f)
        with open(args.out, "w") as f:
            f.write(markdown(saved, saved["command"]))
        return
    command = "python benchmarks/bench_suite.py" + " --quick" * args.quick
    command += f" --only {args.only}" * bool(args.only) + " --no-compile-times" * args.no_compile_times
    command += f" --rounds {args.rounds}" * (args.rounds != 3)
    repeats = 5 if args.quick else 15
    missing = {f: why for f in ("jax", "torch") if (why := available(f)) is not None}
    result: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "versions": versions(),
        "command": command,
        "programs": [],
    }
    wanted = [w for w in args.only.split(",") if w]
    progs = [
        b() for name, b in suite_programs.BUILDERS.items() if not wanted or any(w in name for w in wanted)
    ]
    # Every timing first, in child processes, while this process has run no framework: JAX's and
    # PyTorch's worker threads stay alive (and spin) after their first calls here, and would load
    # the cores the children are timed on. Checks and memory figures come after.
    timed: dict[str, dict[str, float]] = {}
    rounds: dict[str, dict[str, list[float]]] = {}
    gemm_s = peak_s = None
    if not args.quick:
        for prog in progs:
            timed[prog.name], rounds[prog.name] = child_times(prog, repeats, missing, args.rounds)
            print(f"== {prog.name}: {json.dumps(rounds[prog.name])}", flush=True)
        if progs:  # the machine's matmul rate and FMA peak (``floor_table``)
            gemm_s = min(time_in_child(progs[0].name, "gemm", repeats) for _ in range(args.rounds))
            peak_s = min(time_in_child(progs[0].name, "peak", repeats) for _ in range(args.rounds))
    elif progs:  # --quick: in this process, once for every program
        peak_s = 1 / machine_peak.fma_peak_gflops(rounds=1)
    result["rounds"] = args.rounds
    result["round_medians"] = rounds
    names = [] if args.quick or args.no_compile_times else [p.name for p in progs]
    result["compile"] = suite_compile.measure(names, args.quick, tiny_overhead(5000 if args.quick else 20000))
    for prog in progs:
        result["programs"].append(run_program(prog, repeats, missing, timed.get(prog.name), gemm_s, peak_s))
    write_report(markdown(result, command), args.out)
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump(result, f, indent=2, default=float)


if __name__ == "__main__":
    main()
