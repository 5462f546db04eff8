"""dslc's compiled matmuls against ``jax.jit`` and PyTorch on the benchmark suite's matmul shapes.

    python benchmarks/bench_gemm_peers.py [--rounds 3] [--repeats 200]

Each shape of ``bench_blas.SHAPES`` (the MLP's layers and weight gradients, the second derivative's
4096x128x128, the transformer's projections) is one compiled ``x @ y`` (``x.T @ y`` for a weight
gradient). Every framework runs in a new process of its own (thread pools of different frameworks
slow each other in one process), the frameworks interleaved over ``--rounds``; the figure is
GFLOP/s at the median call time, the best round kept. This is the matmul alone with its operands
hot in cache: inside a program the same kernels run slower (results/suite.md's matmul floor). The
result goes to ``results/gemm_peers.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_blas import SHAPES  # noqa: E402  # (m, k, n, x stored transposed): the suite's products
from bench_suite import available, median_time, write_report  # noqa: E402


def _operands(m: int, k: int, n: int, transposed: bool) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((k, m) if transposed else (m, k)).astype(np.float32)
    return x, rng.standard_normal((k, n)).astype(np.float32)


def _call(framework: str, m: int, k: int, n: int, transposed: bool) -> Callable[[], Any]:
    x, y = _operands(m, k, n, transposed)
    fn = (lambda x, y: x.T @ y) if transposed else (lambda x, y: x @ y)
    if framework == "dslc":
        import dsl

        f = dsl.compile(fn)
        return lambda: f(x, y)
    if framework == "jax":
        import jax

        jf = jax.jit(fn)
        xj, yj = jax.device_put(x), jax.device_put(y)
        return lambda: jf(xj, yj).block_until_ready()
    import torch

    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    return lambda: fn(xt, yt)


def child(framework: str, repeats: int) -> None:
    """One framework, every shape: median seconds per call, as JSON on the last line."""
    print(json.dumps([median_time(_call(framework, *shape), repeats) for shape in SHAPES]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "gemm_peers.md"))
    args = parser.parse_args()
    if args.child:
        child(args.child, args.repeats)
        return
    frameworks = ["dslc"] + [f for f in ("jax", "torch") if available(f) is None]
    best: dict[str, list[float]] = {f: [float("inf")] * len(SHAPES) for f in frameworks}
    for _ in range(args.rounds):
        for f in frameworks:
            cmd = [sys.executable, os.path.abspath(__file__), "--child", f, "--repeats", str(args.repeats)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            medians = json.loads(out.stdout.strip().splitlines()[-1])
            best[f] = [min(a, b) for a, b in zip(best[f], medians)]
    lines = [
        "# Matmuls alone: dslc against JAX and PyTorch",
        "",
        f"- date: {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores",
        f"- command: `python benchmarks/bench_gemm_peers.py --rounds {args.rounds} --repeats {args.repeats}`",
        "- GFLOP/s at the median of the calls, best of the rounds; each framework in a new process",
        "",
        "| m x k x n | " + " | ".join(f"{f} GFLOP/s" for f in frameworks) + " |",
        "|---|" + "---:|" * len(frameworks),
    ]
    for i, (m, k, n, transposed) in enumerate(SHAPES):
        rates = [2 * m * k * n / best[f][i] / 1e9 for f in frameworks]
        label = f"{m}x{k}x{n}" + " (x.T @ y)" * transposed
        lines.append(f"| {label} | " + " | ".join(f"{r:.1f}" for r in rates) + " |")
    write_report("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
