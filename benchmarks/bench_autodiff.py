"""Autodiff benchmark: pruning the weight-gradient work of a second derivative (PyTorch PR 82544).

    python benchmarks/bench_autodiff.py [--quick] [--width 128] [--batch 4096] [--out FILE.md]

The program: d2u/dx2 of a 6-layer tanh MLP u: R -> R (float32) on a batch of points, by two nested
reverse sweeps (``grad`` of the sum of ``grad`` of the sum; the rows are independent).
- pruned: both sweeps differentiate w.r.t. the input only (what the user asked for);
- unpruned: the same program, but both sweeps also compute every weight gradient, which the caller
  discards (what an eager framework without pruning computes; PyTorch PR 82544 reported 1.90x on an
  A100 for this comparison).
Reported (medians of interleaved rounds after warm-up): both times and the speedup, the matmul count of
both optimized programs, and their planned peak memory against naive bytes. If ``jax`` is importable,
``jax.jit`` of the same nested ``jax.grad`` is measured in the same run (JAX is never a dependency).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dsl  # noqa: E402
import dsl.numpy as dnp  # noqa: E402

DEPTH = 6  # Linear layers; tanh between them
PYTORCH_SPEEDUP = 1.90


def u(params, x):
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = dnp.tanh(h)
    return h


@dsl.compile
def d2u_pruned(params, x):
    du = lambda x: dsl.grad(lambda x: u(params, x).sum())(x)  # noqa: E731
    return dsl.grad(lambda x: du(x).sum())(x)


@dsl.compile
def d2u_unpruned(params, x):
    def first(x, params):
        gx, gparams = dsl.grad(lambda x, p: u(p, x).sum(), argnums=(0, 1))(x, params)
        return gx.sum(), gparams

    (d2u, outer_gparams), inner_gparams = dsl.grad(first, argnums=(0, 1), has_aux=True)(x, params)
    return d2u, outer_gparams, inner_gparams


@dsl.compile
def tanh_only(x):
    return dnp.tanh(x)


def build(width: int, batch: int, seed: int = 0) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
    rng = np.random.default_rng(seed)
    sizes = [1] + [width] * (DEPTH - 1) + [1]
    params = [
        (
            (rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32),
            (0.1 * rng.standard_normal(n)).astype(np.float32),
        )
        for m, n in zip(sizes[:-1], sizes[1:])
    ]
    return params, rng.uniform(-2.0, 2.0, (batch, 1)).astype(np.float32)


def interleaved_medians(
    fns: dict[str, Callable[[], object]], rounds: int, per_round: int, warmup: int = 3
) -> dict[str, float]:
    """Median seconds per call; the variants alternate round by round so load changes hit them alike."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            for _ in range(per_round):
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def program_stats(fn: Any, *args: Any) -> dict[str, int]:
    lowered = fn.lower(*args)
    plan = lowered.memory_plan()
    optimized = lowered.ir("optimized")
    return {
        "matmuls": optimized.count('"dsl.matmul"'),
        "ops": optimized.count('"dsl.'),
        "peak": plan.peak_bytes,
        "naive": plan.naive_bytes,
    }


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(np.asarray(a, np.float64) - b).max() / max(np.abs(b).max(), 1e-30))


def jax_programs(params: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray) -> tuple[dict[str, Any], str]:
    """``jax.jit`` of the same nested grads (pruned and unpruned); raises ImportError without jax."""
    import jax
    import jax.numpy as jnp

    def ju(p, x):
        h = x
        for i, (w, b) in enumerate(p):
            h = h @ w + b
            if i < len(p) - 1:
                h = jnp.tanh(h)
        return h

    def pruned(p, x):
        du = lambda x: jax.grad(lambda x: ju(p, x).sum())(x)  # noqa: E731
        return jax.grad(lambda x: du(x).sum())(x)

    def unpruned(p, x):
        def first(x, p):
            gx, gp = jax.grad(lambda x, p: ju(p, x).sum(), argnums=(0, 1))(x, p)
            return gx.sum(), gp

        return jax.grad(first, argnums=(0, 1), has_aux=True)(x, p)

    jp, jx = jax.device_put(params), jax.device_put(x)
    fns = {}
    for name, fn in (("jax pruned", pruned), ("jax unpruned", unpruned)):
        jitted = jax.jit(fn)
        fns[name] = lambda jitted=jitted: jax.block_until_ready(jitted(jp, jx))
    return fns, jax.__version__


def jax_section(params, x, want: np.ndarray) -> tuple[dict[str, Callable[[], object]], str]:
    """JAX's callables (checked against dslc's result) and a version line, or none and the reason."""
    try:
        fns, version = jax_programs(params, x)
    except ImportError as err:
        reason = f"JAX skipped: not importable ({err})"
        print(reason)
        return {}, reason
    got = np.asarray(fns["jax pruned"]())
    err = rel_err(got, want)
    assert err < 1e-3, f"JAX and dslc disagree on d2u/dx2: {err:.2e}"
    return fns, f"jax {version} on CPU (not a dslc dependency); agrees with dslc to {err:.1e} relative"


def tanh_probe(width: int, batch: int, repeats: int) -> tuple[float, float]:
    """One (batch, width) f32 tanh: dslc's compiled kernel against np.tanh (the elementwise floor)."""
    a = np.random.default_rng(1).standard_normal((batch, width)).astype(np.float32)
    out = np.empty_like(a)
    t = interleaved_medians({"dslc": lambda: tanh_only(a), "numpy": lambda: np.tanh(a, out=out)}, 3, repeats)
    return t["dslc"], t["numpy"]


def tanh_adjusted(times: dict[str, float], n_tanh: int, gap: float) -> str:
    """The speedup if dslc's tanh kernels ran at np.tanh's speed (an estimate, not a measurement)."""
    pruned, unpruned = (times[f"dslc {k}"] - n_tanh * gap for k in ("pruned", "unpruned"))
    return (
        f"- estimate with tanh at np.tanh's speed: pruned {1e3 * pruned:.1f} ms, unpruned "
        f"{1e3 * unpruned:.1f} ms, speedup {unpruned / pruned:.2f}x"
    )


def format_markdown(args: argparse.Namespace, rows: list[tuple[str, float]], stats, extra: list[str]) -> str:
    import numba

    t = dict(rows)
    speedup = t["dslc unpruned"] / t["dslc pruned"]
    quick = " --quick" if args.quick else ""
    lines = [
        "# Autodiff benchmark: second derivative of a 6-layer tanh MLP w.r.t. its input",
        "",
        f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, no GPU, {platform.platform()}",
        f"- python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}, "
        f"dslc {importlib.metadata.version('dslc')}",
        f"- command: `python benchmarks/bench_autodiff.py --width {args.width} --batch {args.batch}{quick}`",
        f"- model: 1 -> {args.width} x5 -> 1, tanh, float32, batch {args.batch}; "
        "d2u/dx2 by grad of the sum of grad of the sum",
        "",
        "| program | median ms | unpruned / pruned |",
        "|---|---:|---:|",
    ]
    for name, sec in rows:
        base = name.removesuffix(" pruned") + " unpruned"
        ratio = f"{t[base] / sec:.2f}x" if name.endswith(" pruned") and base in t else ""
        lines.append(f"| {name} | {1e3 * sec:.2f} | {ratio} |")
    lines += ["", "| dslc program | matmuls | ops | planned peak bytes | naive bytes | naive / peak |"]
    lines.append("|---|---:|---:|---:|---:|---:|")
    for name, s in stats.items():
        lines.append(
            f"| {name} | {s['matmuls']} | {s['ops']} | {s['peak']:,} | {s['naive']:,} | "
            f"{s['naive'] / s['peak']:.2f}x |"
        )
    verdict = "meets" if speedup >= PYTORCH_SPEEDUP else "is below"
    lines += [
        "",
        f"- dslc pruning speedup {speedup:.2f}x {verdict} the target of {PYTORCH_SPEEDUP:.2f}x "
        "(PyTorch PR 82544, A100, batch 10,000)",
        *extra,
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "autodiff.md"))
    args = parser.parse_args()
    rounds, per_round = (3, 3) if args.quick else (8, 5)
    params, x = build(args.width, args.batch)

    want = d2u_pruned(params, x)
    err = rel_err(d2u_unpruned(params, x)[0], want)
    assert err < 1e-4, f"pruned and unpruned programs disagree: {err:.2e}"
    fns: dict[str, Callable[[], object]] = {
        "dslc pruned": lambda: d2u_pruned(params, x),
        "dslc unpruned": lambda: d2u_unpruned(params, x),
    }
    jax_fns, jax_line = jax_section(params, x, want)
    times = interleaved_medians(fns, rounds, per_round)
    if jax_fns:  # measured apart: XLA's worker threads would otherwise slow the next dslc call down
        times.update(interleaved_medians(jax_fns, rounds, per_round))
    stats = {
        name: program_stats(fn, params, x)
        for name, fn in (("pruned", d2u_pruned), ("unpruned", d2u_unpruned))
    }
    dslc_tanh, np_tanh = tanh_probe(args.width, args.batch, per_round)
    extra = [
        f"- {jax_line}",
        f"- pruned and unpruned dslc results agree to {err:.1e} relative",
        f"- one tanh over ({args.batch}, {args.width}) f32: dslc {1e3 * dslc_tanh:.2f} ms, "
        f"np.tanh {1e3 * np_tanh:.2f} ms; each program evaluates {DEPTH - 1} tanh",
        tanh_adjusted(times, DEPTH - 1, dslc_tanh - np_tanh),
    ]
    text = format_markdown(args, list(times.items()), stats, extra)
    print(text)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
