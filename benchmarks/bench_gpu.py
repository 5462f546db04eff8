"""GPU benchmark (issue 27): the six suite programs at two sizes against JAX (jit), PyTorch eager and
torch.compile on the same GPU, in one run.

    python benchmarks/bench_gpu.py [--sizes gpu,cpu] [--programs chain,layer] [--rounds 3]
        [--peers jax,torch,torch.compile] [--budget-s 0] [--warm-jobs 0] [--out benchmarks/results/gpu.md]
    python benchmarks/bench_gpu.py --sim [--out FILE.md]   # tiny sizes in the CUDA simulator, no timings

``--rounds 0`` (the simulator's default) checks values and reads the memory plans only; with rounds in
the simulator every figure is measured but says nothing (a smoke test of the timing code).

Sizes: "cpu" is the CPU suite's (``suite_programs.BUILDERS``), "gpu" the table of issue 27
(``cuda_plans.GPU_BUILDERS``); ``--programs`` takes parts of names. Each program at each size runs in a
new process of its own (one failure, or one framework's memory pool, stays there). In it:
- every framework gets its own copy of the inputs on the device (``bench_suite.Runner``); the first
  call's values (a training step's updated parameters included) are compared with dslc's before
  anything is timed; a missing peer, a failing one (torch.compile's error's first line) or one whose
  values differ is a note, and the rest runs;
- wall time: the median of every synchronized call (from the call to the device's end of its work)
  over ``--rounds`` rounds, the frameworks interleaved, after warm-up calls;
- GPU time: the sum of the durations of the kernels, copies and fills of a call, and how many a call
  launches, from ``torch.profiler`` (Kineto/CUPTI: it records every CUDA activity of the process,
  Numba's and XLA's included); dslc's host cost is its wall time less its GPU time;
- the roofline: minimal bytes (inputs read once, outputs written once) over the device's copy
  bandwidth (400 MB read and written: the faster of a memcpy and PyTorch's elementwise kernel,
  ``gpu_measure.copy_bandwidth``), as a fraction of each framework's time;
- intermediates: dslc's ``memory_plan()`` for ``target="cuda"`` against XLA's temp bytes
  (``cuda_plans.py``'s functions).
The tables are ``gpu_report.py``'s; the rows are also written as JSON beside them.
Float32 matmuls at full float32 precision everywhere: TF32 off in PyTorch, ``jax_default_matmul_precision
= "highest"``. JAX's memory is not preallocated (it shares the GPU with Numba and PyTorch).

Budget (one device call): each process imports JAX and PyTorch (~5 s) and compiles the program four
times (torch.compile's fwd+bwd dominates: ~10-40 s); ``--budget-s`` stops starting new programs after
that many seconds (those left are noted; the file is rewritten after every program), and
``--warm-jobs N`` first compiles every program N at a time without timing, filling the dslc, Numba,
JAX and Inductor caches the timed processes then read.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

SIM = "--sim" in sys.argv
if SIM:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX shares the GPU with Numba, PyTorch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import cuda_plans  # noqa: E402
import numpy as np  # noqa: E402
import suite_programs as sp  # noqa: E402
from bench_suite import Runner, compare, copy_tree, versions  # noqa: E402
from gpu_report import LABELS, PEERS, markdown  # noqa: E402

from runtime.devices import cuda_available  # noqa: E402

SIM_BUILDERS: dict[str, Callable[[], sp.Program]] = {
    "elementwise chain": lambda: sp.chain_program(1000),
    "softmax + cross-entropy": lambda: sp.xent_program(8, 16),
    "layer norm": lambda: sp.layernorm_program(8, 16),
    "MLP training step": lambda: sp.mlp_program(8, [16] * 7),
    "second derivative": lambda: sp.d2u_program(8, 16),
    "transformer block": lambda: sp.transformer_program(2, 4, 8, 2),
}
SIZES = {**cuda_plans.SIZES, "sim": SIM_BUILDERS}
ROUND_S = 0.2  # seconds of timed calls per framework and round
JAX_CACHE = "/tmp/bench_gpu_jax_cache"


class GpuRunner(Runner):
    """One framework's callable on its own copy of the inputs on the device: dslc compiled for
    ``target="cuda"`` on Numba device arrays, PyTorch (eager, or through ``torch.compile``) on CUDA
    tensors, JAX on its default device (the CPU for all of them but dslc in the simulator)."""

    torch_device = "cpu" if SIM else "cuda"

    def __init__(self, prog: sp.Program, framework: str) -> None:
        self.compiled = framework == "torch.compile"
        super().__init__(prog, "torch" if self.compiled else framework)

    def _convert(self, args: Any) -> Any:
        if self.framework == "dslc":
            from numba import cuda

            return copy_tree(args, cuda.to_device)
        return super()._convert(args)

    def _build(self) -> Callable[..., Any]:
        if self.framework == "dslc":
            from gpu_measure import on_gpu

            return on_gpu(self.prog.dslc)
        fn = super()._build()
        if self.compiled:
            import torch

            return torch.compile(fn, dynamic=False)
        return fn


@functools.cache
def unavailable(framework: str) -> str | None:
    """Why a peer cannot run here (None: it can), with its float32 matmuls set to full precision
    (once per process: JAX's platform is fixed by its first use)."""
    try:
        if framework == "jax":
            import jax

            if SIM:
                jax.config.update("jax_platforms", "cpu")
            jax.config.update("jax_default_matmul_precision", "highest")
            jax.config.update("jax_compilation_cache_dir", JAX_CACHE)  # read by the timed processes
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
            if not SIM and jax.default_backend() != "gpu":
                return f"JAX {jax.__version__} has no GPU backend here: `pip install 'jax[cuda13]'`"
        else:
            import torch

            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            if not SIM and not torch.cuda.is_available():
                return f"PyTorch {torch.__version__} sees no GPU"
    except ImportError as err:
        return f"not installed ({err})"
    return None


def first_line(err: BaseException) -> str:
    """An error's first line (with the next one where the first only introduces it: "... raised:")."""
    lines = [s.strip() for s in str(err).strip().splitlines() if s.strip()] or [""]
    text = " ".join(lines[:2]) if lines[0].endswith(":") else lines[0]
    return f"{type(err).__name__}: {text}"[:240]


def nbytes(x: Any) -> int:
    """Bytes of the arrays of a structure (NumPy or device arrays, tensors)."""
    if isinstance(x, dict):
        return sum(nbytes(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return sum(nbytes(v) for v in x)
    return int(getattr(x, "nbytes", 0))


def check_peers(prog: sp.Program, peers: list[str], row: dict[str, Any]) -> dict[str, Runner]:
    """dslc and every peer that runs and agrees with dslc's values; the others get a note in ``row``."""
    ours = GpuRunner(prog, "dslc")
    want = ours.check()
    runners: dict[str, Runner] = {"dslc": ours}
    row["frameworks"]["dslc"] = {}
    for peer in peers:
        why = unavailable(peer)
        if why is not None:
            row["frameworks"][peer] = {"missing": why}
            continue
        try:
            runner = GpuRunner(prog, peer)
            got = runner.check()
        except Exception as err:  # torch.compile of a double backward, a peer's out-of-memory, ...
            row["frameworks"][peer] = {"fails": first_line(err)}
            continue
        try:
            err_max = compare(prog, LABELS[peer], got, want[: len(got)])
        except AssertionError as err:
            row["frameworks"][peer] = {"differs": first_line(err)}
            continue
        row["frameworks"][peer] = {"max_rel_err": err_max}
        runners[peer] = runner
    return runners


KERNELS_SHOWN = 6  # each framework's longest GPU operations per call, by name (the report's last table)


def time_all(prog: sp.Program, runners: dict[str, Runner], rounds: int, row: dict[str, Any]) -> None:
    """Wall and GPU time per call of each framework (the frameworks interleaved in each round), the
    copy bandwidth and the program's minimal bytes (inputs read once, outputs written once)."""
    from gpu_measure import copy_bandwidth, device_time, synced_times
    from numba import cuda

    times: dict[str, list[float]] = {f: [] for f in runners}
    first = {f: max(synced_times(r.call, 1)[0], 1e-6) for f, r in runners.items()}
    repeats = {f: max(5, min(100, int(ROUND_S / t))) for f, t in first.items()}
    for _ in range(rounds):
        for f, r in runners.items():
            times[f] += synced_times(r.call, repeats[f])
    for f, r in runners.items():
        entry = row["frameworks"][f]
        entry["ms"], entry["min_ms"] = 1e3 * statistics.median(times[f]), 1e3 * min(times[f])
        entry["calls"] = len(times[f])
        by_name: dict[str, list[float]] = {}
        try:
            gpu_s, launches = device_time(r.call, max(3, repeats[f] // 4), by_name)
        except Exception as err:  # no PyTorch, or no CUPTI
            entry["gpu_note"] = first_line(err)
            continue
        if launches:
            entry["gpu_ms"], entry["launches"] = 1e3 * gpu_s, launches
            top = sorted(by_name.items(), key=lambda kv: -kv[1][0])[:KERNELS_SHOWN]
            entry["kernels"] = [[name, 1e3 * sec, count] for name, (sec, count) in top]
        else:
            entry["gpu_note"] = "the profiler recorded none of its kernels"
    probe = cuda.device_array(10**4 if SIM else 10**8, np.float32)
    bandwidth, row["copy_how"] = copy_bandwidth(probe, 20)
    row["copy_GBps"], row["copy_MB"] = bandwidth / 1e9, probe.nbytes / 1e6
    written = nbytes(runners["dslc"].call()) + (nbytes(prog.args[0]) if prog.mutates else 0)
    row["min_bytes"] = nbytes(prog.args) + written


def device_info() -> dict[str, Any]:
    if SIM:
        return {"device": "CUDA simulator"}
    from numba import cuda

    device = cuda.get_current_device()
    name = device.name.decode() if isinstance(device.name, bytes) else str(device.name)
    memory = cuda.current_context().get_memory_info()[1]
    cc = "".join(map(str, device.compute_capability))
    return {"device": f"{name} (sm_{cc}, {memory / 2**30:.0f} GiB)"}


def measure(size: str, name: str, peers: list[str], rounds: int, warm: bool) -> dict[str, Any]:
    """One program at one size: values, times, roofline and intermediates (``warm``: compiles only)."""
    row: dict[str, Any] = {"size": size, "program": name, "frameworks": {}}
    try:
        prog = SIZES[size][name]()
        row["description"] = prog.description
        runners = check_peers(prog, peers, row)
        if warm:
            return row
        row |= device_info()
        if rounds:
            time_all(prog, runners, rounds, row)
        del runners
        row["planned_peak"] = cuda_plans.cuda_plan(prog)[0].peak_bytes
        if "jax" in peers and unavailable("jax") is None:
            import jax

            row["xla_temp"], row["xla_backend"] = cuda_plans.xla_temp_bytes(prog), jax.default_backend()
    except Exception as err:  # dslc failed: the row says how, the other programs run
        row["error"] = first_line(err)
        traceback.print_exc()
    return row


# ---- driving the processes --------------------------------------------------------------------------------


def run_child(size: str, name: str, opts: argparse.Namespace, warm: bool = False) -> dict[str, Any]:
    """``measure`` in a new process (its progress and errors on this process's stderr)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", f"{size}:{name}", "--peers", opts.peers]
    cmd += ["--rounds", str(opts.rounds)] + ["--warm"] * warm + ["--sim"] * SIM
    row: dict[str, Any] = {"size": size, "program": name, "frameworks": {}}
    try:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=opts.child_timeout)
    except subprocess.TimeoutExpired:
        return row | {"error": f"not finished after {opts.child_timeout} s (--child-timeout)"}
    last = done.stdout.strip().splitlines()[-1:] if done.stdout.strip() else []
    if done.returncode != 0 or not last or not last[0].startswith("{"):
        return row | {"error": f"its process ended with status {done.returncode}"}
    return json.loads(last[0])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="gpu,cpu", help="comma-separated: gpu, cpu")
    parser.add_argument("--programs", default="", help="comma-separated parts of program names")
    parser.add_argument("--peers", default="jax,torch" if SIM else ",".join(PEERS))
    parser.add_argument("--rounds", type=int, default=0 if SIM else 3, help="0: values and memory only")
    parser.add_argument("--budget-s", type=float, default=0, help="start no program after this (0: none)")
    parser.add_argument("--warm-jobs", type=int, default=0, help="compile every program first, N at once")
    parser.add_argument("--child-timeout", type=float, default=400)
    parser.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=not SIM)
    parser.add_argument("--out", default="" if SIM else os.path.join(HERE, "results", "gpu.md"))
    parser.add_argument("--sim", action="store_true", help="tiny sizes in the CUDA simulator, no timings")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--warm", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    peers = [p for p in opts.peers.split(",") if p]
    if opts.child:
        size, name = opts.child.split(":", 1)
        print(json.dumps(measure(size, name, peers, opts.rounds, opts.warm)))
        return
    if not SIM and not cuda_available():
        sys.exit(
            "bench_gpu: no usable NVIDIA GPU here (numba.cuda.is_available() is False); --sim runs it here"
        )
    wanted = [p.strip().lower() for p in opts.programs.split(",") if p.strip()]
    sizes = ["sim"] if SIM else opts.sizes.split(",")
    configs = [(s, n) for s in sizes for n in SIZES[s] if not wanted or any(w in n.lower() for w in wanted)]
    command = " ".join(["python benchmarks/bench_gpu.py", *sys.argv[1:]])
    meta: dict[str, Any] = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
    meta |= {"command": command, "rounds": opts.rounds, "versions": versions() | numba_cuda_version()}
    start = time.perf_counter()

    def warm(config: tuple[str, str]) -> None:  # started in the budget's first half only
        if not opts.budget_s or time.perf_counter() - start < opts.budget_s / 2:
            run_child(*config, opts, warm=True)

    if opts.warm_jobs and opts.isolate:
        with ThreadPoolExecutor(opts.warm_jobs) as pool:
            list(pool.map(warm, configs))
        meta["warm_s"] = time.perf_counter() - start
    rows: list[dict[str, Any]] = []
    for size, name in configs:
        if opts.budget_s and time.perf_counter() - start > opts.budget_s:
            why = f"not run: the budget of {opts.budget_s:g} s (--budget-s) was spent"
            rows.append({"size": size, "program": name, "frameworks": {}, "skipped": why})
            continue
        began = time.perf_counter()
        measured = (
            run_child(size, name, opts) if opts.isolate else measure(size, name, peers, opts.rounds, False)
        )
        rows.append(measured | {"seconds": time.perf_counter() - began})
        print(json.dumps(rows[-1]), flush=True)
        write(rows, meta, opts.out)
    text = markdown(rows, meta)
    print(text)
    bad = [r for r in rows if "error" in r or any("differs" in e for e in r["frameworks"].values())]
    sys.exit(1 if bad else 0)


def numba_cuda_version() -> dict[str, str]:
    from importlib import metadata

    try:
        return {"numba-cuda": metadata.version("numba-cuda")}
    except metadata.PackageNotFoundError:
        return {"numba-cuda": "not installed"}


def write(rows: list[dict[str, Any]], meta: dict[str, Any], out: str) -> None:
    """The Markdown table and the rows as JSON beside it (rewritten after every program)."""
    if not out:
        return
    with open(out, "w") as f:
        f.write(markdown(rows, meta))
    with open(os.path.splitext(out)[0] + ".json", "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
