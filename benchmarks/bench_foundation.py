"""Foundation benchmark: dslc against NumPy on the same machine, in one run.

    python benchmarks/bench_foundation.py [--quick] [--out benchmarks/results/foundation.md]

Measures (medians of repeated runs after warm-up):
- an 8-op elementwise chain over 10^7 float32 values (fused into one kernel by dslc);
- a 3-layer MLP forward pass (BLAS-bound);
- the per-call overhead of a tiny compiled function.
Targets (issue 2): chain >= 3x faster than NumPy, MLP within 1.1x of NumPy, overhead < 20 us.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dsl  # noqa: E402
import dsl.numpy as dnp  # noqa: E402


def median_time(fn: Callable[[], object], repeats: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def chain_numpy(x):
    a = x * np.float32(1.5)
    b = a + np.float32(0.5)
    c = b * x
    d = c - np.float32(2.0)
    e = x * x
    f = e + np.float32(1.0)
    g = d / f
    return np.maximum(g, np.float32(0.0))


@dsl.compile
def chain_dsl(x):
    a = x * 1.5
    b = a + 0.5
    c = b * x
    d = c - 2.0
    e = x * x
    f = e + 1.0
    g = d / f
    return dnp.maximum(g, 0.0)


def mlp_numpy(x, w1, b1, w2, b2, w3, b3):
    h = np.maximum(x @ w1 + b1, 0)
    h = np.maximum(h @ w2 + b2, 0)
    return h @ w3 + b3


@dsl.compile
def mlp_dsl(x, w1, b1, w2, b2, w3, b3):
    h = dsl.nn.relu(x @ w1 + b1)
    h = dsl.nn.relu(h @ w2 + b2)
    return h @ w3 + b3


@dsl.compile
def tiny(x):
    return x + 1.0


def copy_bandwidth(x: np.ndarray, repeats: int) -> float:
    """Bytes moved per second by a NumPy copy (read + write), the machine's practical bandwidth."""
    out = np.empty_like(x)
    t = median_time(lambda: np.copyto(out, x), repeats)
    return 2 * x.nbytes / t


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "foundation.md"))
    args = parser.parse_args()
    repeats = 5 if args.quick else 20
    rng = np.random.default_rng(0)
    rows = []

    x = rng.standard_normal(10**7).astype(np.float32)
    np.testing.assert_allclose(chain_dsl(x), chain_numpy(x), rtol=1e-5, atol=1e-6)
    t_np = median_time(lambda: chain_numpy(x), repeats)
    t_dsl = median_time(lambda: chain_dsl(x), repeats)
    bw = copy_bandwidth(x, repeats)
    chain_bw = 2 * x.nbytes / t_dsl
    rows.append(("elementwise chain, 8 ops, 1e7 f32", t_np, t_dsl, "speedup >= 3x"))

    sizes = [(784, 1024), (1024, 1024), (1024, 10)]
    params = []
    for m, n in sizes:
        params += [(rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32), np.zeros(n, np.float32)]
    xb = rng.standard_normal((1024, 784)).astype(np.float32)
    np.testing.assert_allclose(mlp_dsl(xb, *params), mlp_numpy(xb, *params), rtol=1e-3, atol=1e-3)
    t_np_mlp = median_time(lambda: mlp_numpy(xb, *params), repeats)
    t_dsl_mlp = median_time(lambda: mlp_dsl(xb, *params), repeats)
    rows.append(
        ("3-layer MLP forward, batch 1024, 784-1024-1024-10 f32", t_np_mlp, t_dsl_mlp, "ratio <= 1.1")
    )

    one = np.ones(1, np.float32)
    tiny(one)
    n = 20000
    t0 = time.perf_counter()
    for _ in range(n):
        tiny(one)
    overhead = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    for _ in range(n):
        np.add(one, 1.0)
    np_overhead = (time.perf_counter() - t0) / n

    import numba

    lines = [
        "# Foundation benchmark",
        "",
        f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        f"- python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}",
        f"- command: `python benchmarks/bench_foundation.py{' --quick' if args.quick else ''}`",
        "",
        "| program | NumPy ms | dslc ms | NumPy/dslc | target |",
        "|---|---:|---:|---:|---|",
    ]
    for name, a, b, target in rows:
        lines.append(f"| {name} | {1e3 * a:.2f} | {1e3 * b:.2f} | {a / b:.2f}x | {target} |")
    lines += [
        "",
        f"- elementwise chain bandwidth: {chain_bw / 1e9:.1f} GB/s = {100 * chain_bw / bw:.0f}% of a NumPy "
        f"copy ({bw / 1e9:.1f} GB/s)",
        f"- tiny-function call overhead: {1e6 * overhead:.2f} us per call (target < 20 us); "
        f"np.add on one element: {1e6 * np_overhead:.2f} us",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)
    results = {
        "rows": [{"program": r[0], "numpy_s": r[1], "dslc_s": r[2], "target": r[3]} for r in rows],
        "chain_bandwidth_Bps": chain_bw,
        "copy_bandwidth_Bps": bw,
        "call_overhead_s": overhead,
    }
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
