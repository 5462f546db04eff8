"""Loop benchmarks (issue 28): cold first calls of loop programs, and an RNN against JAX and PyTorch.

    python benchmarks/bench_loops.py --label after            # both parts; the record's section "after"
    python benchmarks/bench_loops.py --part cold --no-record  # (a) only, printed
    python benchmarks/bench_loops.py --part rnn --loss all    # (b), the loss over every step's h
    python benchmarks/bench_loops.py --quick --no-record      # a smoke run: small sizes, few calls

(a) Cold first call: each program in a new process with empty ``DSL_CACHE_DIR`` and
``NUMBA_CACHE_DIR``, phase by phase as ``compile_scaling.py`` measures it (its child is reused):

- ``mlp 100 (Python loop)``: the gradient of a 100-layer tanh MLP (64 wide, batch 32, float32; every
  layer's weight and bias an argument), ``compile_scaling.py``'s ``mlp 100``;
- ``mlp 100 (scan)``: the same gradient, the layers a ``dsl.scan`` over the stacked weights
  (100, 64, 64) and biases (100, 64);
- ``chain 525``: ``compile_scaling.py``'s 4,206-op unrolled program (a reduction every step);
- ``rnn T=256 (scan)``: part (b)'s dslc program.

Targets (issue 28): the scan MLP under 2 s, the 4,206-op program under 10 s. The two MLP forms'
gradients are first checked against float64 NumPy in this process.

(b) RNN: ``h = tanh(x_t @ Wx + h @ Wh + b)``, T=256, hidden 512, batch 64, inputs 512, float32; the
loss is the sum of squares of the last ``h`` (``--loss last``) or of every ``h`` (``--loss all``);
value and gradient w.r.t. ``(Wx, Wh, b)``: ``dsl.value_and_grad`` of ``dsl.scan``,
``jax.jit(jax.value_and_grad)`` of ``lax.scan``, PyTorch eager (a Python loop, autograd), and NumPy
with a hand-written backward (the same matmuls and no framework: a floor; its BLAS on one thread,
as dslc's calls are). All are checked against dslc's values in this process first. Then each is
timed in a process of its own (XLA's and PyTorch's worker threads stay alive and spin after their
calls and slow dslc's parallel kernels down when they share a process, see ``bench_suite.py``), the
frameworks interleaved round by round; a figure is the lowest of its round medians (each the median
of ``--calls`` calls after warm-up), so a burst of outside load spoils one round, not the figure.

Memory of intermediates (results and arguments excluded everywhere): dslc's planned peak
(``memory_plan().peak_bytes``) and the arena its executable allocated, XLA's temp bytes
(``memory_analysis().temp_size_in_bytes`` of the compiled program). PyTorch on CPU keeps no allocator
statistics: its figure is the bytes autograd saves for the backward (saved tensors' storages, the
inputs' excluded), a lower bound of its intermediates' peak. Results go to
``results/2026-11-25-loops.md``, in the section named by ``--label`` (replaced if there).
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
from collections.abc import Callable
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import compile_scaling  # noqa: E402

import dsl  # noqa: E402
import dsl.numpy as dnp  # noqa: E402

SCALING_BUILD = compile_scaling.build  # its programs (mlp, chain); ours are added in cold_child
FRAMEWORKS = ("dslc", "jax", "torch", "numpy")  # numpy: the hand-written backward, a floor
MLP_WIDTH, MLP_BATCH = 64, 32


# ---- the programs --------------------------------------------------------------------------------------


def mlp_params(layers: int) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
    """compile_scaling.py's MLP weights and input (the same draws)."""
    _, (params, x) = SCALING_BUILD("mlp", layers)
    return params, x


def mlp_scan_loss(stacked: tuple[Any, Any], x: Any) -> Any:
    def layer(h: Any, wb: tuple[Any, Any]) -> tuple[Any, None]:
        w, b = wb
        return dnp.tanh(h @ w + b), None

    h, _ = dsl.scan(layer, x, stacked)
    return (h * h).mean()


def mlp_scan(layers: int) -> tuple[Any, tuple[Any, ...]]:
    params, x = mlp_params(layers)
    stacked = (np.stack([w for w, _ in params]), np.stack([b for _, b in params]))
    return dsl.compile(dsl.grad(mlp_scan_loss)), (stacked, x)


def mlp_reference(params: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray) -> list[np.ndarray]:
    """The MLP loss's gradient w.r.t. every weight and bias, in float64 NumPy."""
    hs = [x.astype(np.float64)]
    for w, b in params:
        hs.append(np.tanh(hs[-1] @ w + b))
    dh = 2 * hs[-1] / hs[-1].size
    grads: list[np.ndarray] = []
    for (w, _), h_in, h_out in zip(reversed(params), reversed(hs[:-1]), reversed(hs[1:])):
        dz = dh * (1 - h_out**2)
        grads[:0] = [h_in.T @ dz, dz.sum(axis=0)]
        dh = dz @ w.T
    return grads


class Rnn:
    """Part (b)'s sizes and inputs (the same draws in every process)."""

    def __init__(self, steps: int, hidden: int, batch: int, inputs: int, loss: str) -> None:
        self.steps, self.hidden, self.batch, self.inputs, self.loss = steps, hidden, batch, inputs, loss
        rng = np.random.default_rng(0)
        self.wx = (rng.standard_normal((inputs, hidden)) / np.sqrt(inputs)).astype(np.float32)
        self.wh = (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(np.float32)
        self.b = (0.1 * rng.standard_normal(hidden)).astype(np.float32)
        self.xs = rng.standard_normal((steps, batch, inputs)).astype(np.float32)
        self.h0 = np.zeros((batch, hidden), np.float32)

    def describe(self) -> str:
        loss = "the last h" if self.loss == "last" else "every h"
        return (
            f"T={self.steps}, hidden {self.hidden}, batch {self.batch}, inputs {self.inputs}, float32; "
            f"loss: the sum of squares of {loss}; value and gradient w.r.t. (Wx, Wh, b)"
        )

    def dslc(self) -> tuple[Callable[[], Any], Any]:
        last = self.loss == "last"

        def loss(params: Any, xs: Any, h0: Any) -> Any:
            wx, wh, b = params

            def cell(h: Any, x: Any) -> tuple[Any, Any]:
                h = dnp.tanh(x @ wx + h @ wh + b)
                return h, None if last else h

            h, hs = dsl.scan(cell, h0, xs)
            return (h * h).sum() if last else (hs * hs).sum()

        f = dsl.compile(dsl.value_and_grad(loss))
        args = ((self.wx, self.wh, self.b), self.xs, self.h0)
        return lambda: f(*args), (f, args)

    def jax(self) -> tuple[Callable[[], Any], Any]:
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_platforms", "cpu")
        last = self.loss == "last"

        def loss(params: Any, xs: Any, h0: Any) -> Any:
            wx, wh, b = params

            def cell(h: Any, x: Any) -> tuple[Any, Any]:
                h = jnp.tanh(x @ wx + h @ wh + b)
                return h, None if last else h

            h, hs = jax.lax.scan(cell, h0, xs)
            return (h * h).sum() if last else (hs * hs).sum()

        f = jax.jit(jax.value_and_grad(loss))
        args = jax.device_put(((self.wx, self.wh, self.b), self.xs, self.h0))
        return lambda: jax.block_until_ready(f(*args)), (f, args)

    def torch(self) -> tuple[Callable[[], Any], Any]:
        import torch

        torch.set_num_threads(os.cpu_count() or 1)
        params = [torch.from_numpy(a.copy()).requires_grad_(True) for a in (self.wx, self.wh, self.b)]
        xs, h0 = torch.from_numpy(self.xs), torch.from_numpy(self.h0)
        last = self.loss == "last"

        def step() -> Any:
            wx, wh, b = params
            h, total = h0, None
            for t in range(xs.shape[0]):
                h = torch.tanh(xs[t] @ wx + h @ wh + b)
                if not last:
                    total = (h * h).sum() if total is None else total + (h * h).sum()
            loss = (h * h).sum() if last else total
            return loss.detach(), torch.autograd.grad(loss, params)

        return step, (step, params)

    def numpy(self) -> tuple[Callable[[], Any], Any]:
        """The forward and a hand-written backward in NumPy (its BLAS): no framework's overhead, the
        same matmuls (two per step forward, three back), a floor for the others."""
        wx, wh, b, xs = self.wx, self.wh, self.b, self.xs
        last = self.loss == "last"

        def step() -> Any:
            hs = np.empty((len(xs) + 1, *self.h0.shape), np.float32)
            hs[0] = self.h0
            for t in range(len(xs)):
                hs[t + 1] = np.tanh(xs[t] @ wx + hs[t] @ wh + b)
            loss = (hs[-1] * hs[-1]).sum() if last else (hs[1:] * hs[1:]).sum()
            gwx, gwh, gb = np.zeros_like(wx), np.zeros_like(wh), np.zeros_like(b)
            dh = 2 * hs[-1] if last else np.zeros_like(self.h0)
            for t in reversed(range(len(xs))):
                if not last:
                    dh += 2 * hs[t + 1]
                dz = dh * (1 - hs[t + 1] * hs[t + 1])
                gwx += xs[t].T @ dz
                gwh += hs[t].T @ dz
                gb += dz.sum(axis=0)
                dh = dz @ wh.T
            return loss, (gwx, gwh, gb)

        return step, (step, ())


def leaves(x: Any) -> list[np.ndarray]:
    if isinstance(x, (list, tuple)):
        return [a for v in x for a in leaves(v)]
    if hasattr(x, "detach"):  # torch
        x = x.detach().numpy()
    return [np.asarray(x, np.float64)]


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-30))


# ---- (a) cold first calls ------------------------------------------------------------------------------

COLD = {
    "mlp 100 (Python loop)": ("mlp", 100),
    "mlp 100 (scan)": ("mlp-scan", 100),
    "chain 525": ("chain", 525),
    "rnn T=256 (scan, last h)": ("rnn-last", 256),
    "rnn T=256 (scan, every h)": ("rnn-all", 256),
}
COLD_QUICK = {
    "mlp 10 (Python loop)": ("mlp", 10),
    "mlp 10 (scan)": ("mlp-scan", 10),
    "chain 40": ("chain", 40),
    "rnn T=16 (scan, last h)": ("rnn-last", 16),
    "rnn T=16 (scan, every h)": ("rnn-all", 16),
}
QUICK_RNN = {"hidden": 64, "batch": 8, "inputs": 64}


def build(kind: str, size: int) -> tuple[Any, tuple[Any, ...]]:
    """compile_scaling.py's ``build``, with the scan MLP and part (b)'s RNN (``rnn-last``, ``rnn-all``:
    its loss over the last or every step; T=256 at part (b)'s sizes, shorter at ``--quick``'s)."""
    if kind == "mlp-scan":
        return mlp_scan(size)
    if kind.startswith("rnn-"):
        sizes = QUICK_RNN if size < 256 else {"hidden": 512, "batch": 64, "inputs": 512}
        _, (f, args) = Rnn(size, loss=kind.removeprefix("rnn-"), **sizes).dslc()
        return f, args
    return SCALING_BUILD(kind, size)


def cold_child(name: str) -> None:
    """One program's cold first call, by compile_scaling.py's child (which builds through ``build``)."""
    compile_scaling.PROGRAMS[name] = {**COLD, **COLD_QUICK}[name]
    compile_scaling.build = build
    compile_scaling.child(name, "auto")


def cold_run(name: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="dslc-loops-") as cache:
        env = dict(os.environ, DSL_CACHE_DIR=cache, NUMBA_CACHE_DIR=os.path.join(cache, "numba"))
        t0 = time.perf_counter()
        out = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--cold-child", name],
            env=env,
            capture_output=True,
            text=True,
        )
        process = time.perf_counter() - t0
    if out.returncode != 0:
        error = out.stderr.strip().splitlines()[-1:] or ["(no output)"]
        print(f"{name}: FAILED: {error[0][:300]}", flush=True)
        return {"error": error[0][:300]}
    row = dict(json.loads(out.stdout.strip().splitlines()[-1]))
    row["process_s"] = process
    return row


def check_mlps(layers: int) -> str:
    """Both MLP forms' gradients against float64 NumPy (raises if either is off)."""
    params, x = mlp_params(layers)
    want = mlp_reference(params, x)
    f, args = SCALING_BUILD("mlp", layers)
    got_loop = leaves(f(*args))
    g, sargs = mlp_scan(layers)
    gw, gb = g(*sargs)
    got_scan = [
        a for k in range(layers) for a in (np.asarray(gw[k], np.float64), np.asarray(gb[k], np.float64))
    ]
    errs = {
        form: max(rel_err(a, w) for a, w in zip(got, want, strict=True))
        for form, got in (("Python loop", got_loop), ("scan", got_scan))
    }
    for form, err in errs.items():
        assert err < 1e-3, f"mlp {layers} ({form}): gradient off float64 NumPy by {err:.1e} relative"
    return ", ".join(f"{form} {err:.1e}" for form, err in errs.items())


# ---- (b) the RNN against JAX and PyTorch ---------------------------------------------------------------


def rnn_of(args: argparse.Namespace) -> Rnn:
    if args.quick:
        return Rnn(16, loss=args.loss, **QUICK_RNN)
    return Rnn(args.steps, args.hidden, args.batch, args.inputs, args.loss)


def available(framework: str) -> str | None:
    """None if the framework can run here, else why not."""
    try:
        __import__(framework)
    except ImportError as err:
        return f"not installed ({err})"
    return None


def torch_saved_bytes(step: Callable[[], Any], inputs: list[Any]) -> int:
    """Bytes of the storages autograd saves for the backward during one call, the inputs' excluded."""
    import torch

    given = {t.untyped_storage().data_ptr() for t in inputs}
    saved: dict[int, int] = {}

    def pack(t: Any) -> Any:
        storage = t.untyped_storage()
        if storage.data_ptr() not in given:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step()
    return sum(saved.values())


def check_rnn(rnn: Rnn, missing: dict[str, str]) -> dict[str, Any]:
    """Every framework's values against dslc's (raises if one is off), and the memory figures."""
    call, (f, args) = rnn.dslc()
    want = leaves(call())
    plan = f.lower(*args).memory_plan()
    out: dict[str, Any] = {
        "errors": {},
        "memory": {
            "dslc planned peak": plan.peak_bytes,
            "dslc arena": max(e.run.arena.nbytes for e in f._cache.values()),
            "dslc naive (every value its own buffer)": plan.naive_bytes,
        },
    }
    for framework in FRAMEWORKS[1:]:
        if framework in missing:
            continue
        call, (g, gargs) = getattr(rnn, framework)()
        got = leaves(call())
        errors = [rel_err(a, w) for a, w in zip(got, want, strict=True)]
        assert max(errors) < 2e-3, f"RNN: {framework} and dslc disagree: {errors} (loss, Wx, Wh, b)"
        out["errors"][framework] = max(errors)
        if framework == "jax":
            analysis = g.lower(*gargs).compile().memory_analysis()
            out["memory"]["XLA temp"] = int(analysis.temp_size_in_bytes)
        elif framework == "torch":
            import torch

            inputs = [*gargs, torch.from_numpy(rnn.xs), torch.from_numpy(rnn.h0)]
            out["memory"]["PyTorch saved for backward (lower bound)"] = torch_saved_bytes(call, inputs)
    return out


def median_time(fn: Callable[[], object], calls: int, warmup_s: float = 1.0) -> float:
    """Median seconds per call after warm-up (at least 3 calls and ``warmup_s`` seconds, at most 20)."""
    start = time.perf_counter()
    for k in range(20):
        if k >= 3 and time.perf_counter() - start >= warmup_s:
            break
        fn()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def time_child(framework: str, args: argparse.Namespace) -> None:
    call, _ = getattr(rnn_of(args), framework)()
    print(json.dumps({"seconds": median_time(call, args.calls)}))


def time_in_child(framework: str, args: argparse.Namespace) -> float:
    """One framework's median in a new process where no other framework ever ran."""
    cmd = [sys.executable, os.path.abspath(__file__), "--time-child", framework, "--calls", str(args.calls)]
    cmd += ["--steps", str(args.steps), "--hidden", str(args.hidden), "--batch", str(args.batch)]
    cmd += ["--inputs", str(args.inputs), "--loss", args.loss] + ["--quick"] * args.quick
    # NumPy's OpenBLAS on one thread, as dslc calls it: on this busy 2-core VM its own threads made
    # the RNN's (64, 512) x (512, 512) products 30-90x slower (17-46 ms each against 0.5-1 ms)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1") if framework == "numpy" else None
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"timing {framework} failed:\n{out.stderr[-3000:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["seconds"])


def rnn_part(args: argparse.Namespace) -> dict[str, Any]:
    rnn = rnn_of(args)
    missing = {f: why for f in FRAMEWORKS[1:] if (why := available(f)) is not None}
    result: dict[str, Any] = {"description": rnn.describe(), "missing": missing, **check_rnn(rnn, missing)}
    print(f"RNN values agree with dslc's: {result['errors']}", flush=True)
    frameworks = [f for f in FRAMEWORKS if f not in missing]
    rounds: dict[str, list[float]] = {f: [] for f in frameworks}
    for _ in range(args.rounds):
        for framework in frameworks:
            rounds[framework].append(time_in_child(framework, args))
            print(f"{framework:6s} {1e3 * rounds[framework][-1]:9.2f} ms", flush=True)
    result["rounds"] = rounds
    result["times"] = {f: min(ts) for f, ts in rounds.items()}
    return result


# ---- the record ----------------------------------------------------------------------------------------


def load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3]) if os.path.exists("/proc/loadavg") else "?"


def commit() -> str:
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "compiler", "dsl", "runtime"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
    except OSError:
        return "unknown"
    if sha.returncode:
        return "unknown (not a git checkout)"
    return sha.stdout.strip() + (
        " with uncommitted changes to compiler/, dsl/ or runtime/" * bool(dirty.stdout.strip())
    )


def cold_table(rows: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        "| program | ops | kernels | driver | trace s | passes s | codegen s | Numba s | first call s "
        "| process s | second call ms |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        if "error" in r:
            lines.append(f"| {name} | failed: `{r['error']}` |" + " |" * 9)
            continue
        lines.append(
            f"| {name} | {r['ops']} | {r['kernels']} | {r['driver']} | {r['trace_s']:.2f} | "
            f"{r['passes_s']:.2f} | "
            f"{r['codegen_s']:.2f} | {r['numba_s']:.2f} | {r['first_call_s']:.2f} | {r['process_s']:.2f} | "
            f"{r['second_call_ms']:.3f} |"
        )
    return lines


def rnn_tables(r: dict[str, Any]) -> list[str]:
    t = r["times"]
    lines = [
        "| framework | time per call ms (lowest round median) | round medians ms | / dslc |",
        "|---|---:|---|---:|",
    ]
    for framework, seconds in t.items():
        medians = ", ".join(f"{1e3 * s:.1f}" for s in r["rounds"][framework])
        lines.append(f"| {framework} | {1e3 * seconds:.1f} | {medians} | {seconds / t['dslc']:.2f} |")
    lines += ["", "| intermediates | bytes | MiB |", "|---|---:|---:|"]
    lines += [f"| {k} | {v:,} | {v / 2**20:.1f} |" for k, v in r["memory"].items()]
    return lines


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"## {result['label']}",
        "",
        f"- date: {result['date']}; dslc {result['commit']}",
        f"- machine: {result['machine']}",
        f"- command: `{result['command']}`",
    ]
    if "cold" in result:
        lines += [
            "",
            f"### (a) Cold first call (load average before: {result['cold_load']})",
            "",
            "Each program in a new process with empty `DSL_CACHE_DIR` and `NUMBA_CACHE_DIR`, one run each; "
            "first call s: tracing to the first result (compile_scaling.py's phases); process s: the "
            "whole process, Python's imports included. Targets: the scan MLP under 2 s, the 4,206-op "
            f"chain under 10 s. MLP gradients against float64 NumPy (max relative): {result['mlp_check']}.",
            "",
            *cold_table(result["cold"]),
        ]
    if "rnn" in result:
        r = result["rnn"]
        errors = ", ".join(f"{f} {e:.1e}" for f, e in r["errors"].items()) or "no peer installed"
        skipped = "".join(f"; {f} skipped: {why}" for f, why in r["missing"].items())
        lines += [
            "",
            f"### (b) RNN forward and backward (load average before: {result['rnn_load']})",
            "",
            f"{r['description']}. Values (loss and gradients) against dslc's, max relative: "
            f"{errors}{skipped}. "
            "Each framework timed in a process of its own, the frameworks interleaved round by round.",
            "",
            *rnn_tables(r),
        ]
    lines.append(f"\n- load average after: {result['load_after']}")
    return "\n".join(lines) + "\n"


def record(path: str, section: str) -> None:
    """Writes ``section`` into the record, replacing a section of the same heading."""
    heading = section.splitlines()[0]
    title = "# Loop benchmarks (issue 28): `benchmarks/bench_loops.py`\n"
    text = open(path).read() if os.path.exists(path) else title
    parts = text.split("\n## ")
    head, sections = parts[0], ["## " + p for p in parts[1:]]
    kept = [s for s in sections if s.splitlines()[0] != heading]
    with open(path, "w") as f:
        f.write("\n".join([head.rstrip() + "\n", *[s.rstrip() + "\n" for s in kept], section]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--part", default="both", choices=("both", "cold", "rnn"))
    parser.add_argument(
        "--quick", action="store_true", help="small sizes, one round, few calls (a smoke run)"
    )
    parser.add_argument("--steps", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--inputs", type=int, default=512)
    parser.add_argument(
        "--loss", default="last", choices=("last", "all"), help="squares of the last h or of all"
    )
    parser.add_argument("--rounds", type=int, default=3, help="timing rounds (each framework once per round)")
    parser.add_argument("--calls", type=int, default=10, help="timed calls per framework and round")
    parser.add_argument(
        "--only", default="", help="cold programs: names or kinds (mlp, mlp-scan, chain, rnn-last, rnn-all)"
    )
    parser.add_argument("--label", default="run", help="the record's section heading")
    parser.add_argument("--no-record", action="store_true", help="print only; leave the record alone")
    parser.add_argument("--out", default=os.path.join(HERE, "results", "2026-11-25-loops.md"))
    parser.add_argument("--cold-child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--time-child", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cold_child:
        cold_child(args.cold_child)
        return
    if args.time_child:
        time_child(args.time_child, args)
        return
    if args.quick:
        args.rounds, args.calls = 1, 3
    result: dict[str, Any] = {
        "label": args.label,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": commit(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "command": "python benchmarks/bench_loops.py " + " ".join(sys.argv[1:]),
    }
    if args.part in ("both", "cold"):
        programs = COLD_QUICK if args.quick else COLD
        wanted = [w for w in args.only.split(",") if w]
        names = [n for n in programs if not wanted or any(w in (n, programs[n][0]) for w in wanted)]
        names = [n for n in names if programs[n][0] in ("mlp", "mlp-scan", "chain", f"rnn-{args.loss}")]
        layers = [size for n, (kind, size) in programs.items() if kind == "mlp" and n in names]
        result["mlp_check"] = check_mlps(layers[0]) if layers else "not run"
        result["cold_load"] = load()
        result["cold"] = {}
        for name in names:
            result["cold"][name] = r = cold_run(name)
            if "error" not in r:
                print(f"{name:22s} ops {r['ops']:5d}  first call {r['first_call_s']:7.2f} s", flush=True)
    if args.part in ("both", "rnn"):
        result["rnn_load"] = load()
        result["rnn"] = rnn_part(args)
    result["load_after"] = load()
    text = markdown(result)
    print(text)
    if not args.no_record:
        record(args.out, text)


if __name__ == "__main__":
    main()
