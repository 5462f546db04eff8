"""Per-example Hessians (issue 29): ``vmap(jacfwd(jacrev(u)))`` of a 6-layer tanh MLP u: R^3 -> R.

    python benchmarks/bench_hessians.py [--batch 10000] [--width 32] [--rounds 7] [--out FILE.md]

The form of PyTorch PR 82544's comparison with functorch, in float32 on the CPU: dslc's
``dsl.vmap(dsl.jacfwd(dsl.jacrev(u)))``, JAX's ``jax.jit`` of the same form and PyTorch's
``torch.func.vmap(jacfwd(jacrev(u)))`` (eager; each measured only if importable). All three are
checked against each other before timing; rounds are interleaved and the median is kept. The
first call (tracing and compiling) is reported apart.
"""

from __future__ import annotations

import argparse
import os
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


def make_params(width: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    sizes = [3] + [width] * (DEPTH - 1) + [1]
    return [
        (
            (rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32),
            (0.1 * rng.standard_normal(n)).astype(np.float32),
        )
        for m, n in zip(sizes, sizes[1:])
    ]


def dslc_form(params: list[tuple[np.ndarray, np.ndarray]]) -> Callable[[np.ndarray], Any]:
    def u(x: Any) -> Any:
        h = x
        for k, (w, b) in enumerate(params):
            h = h @ w + b
            if k < DEPTH - 1:
                h = dnp.tanh(h)
        return h.sum()

    return dsl.vmap(dsl.jacfwd(dsl.jacrev(u)))


def jax_form(params: list[tuple[np.ndarray, np.ndarray]]) -> Callable[[np.ndarray], Any] | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None

    def u(x: Any) -> Any:
        h = x
        for k, (w, b) in enumerate(params):
            h = h @ w + b
            if k < DEPTH - 1:
                h = jnp.tanh(h)
        return h.sum()

    f = jax.jit(jax.vmap(jax.jacfwd(jax.jacrev(u))))
    return lambda x: f(x).block_until_ready()


def torch_form(params: list[tuple[np.ndarray, np.ndarray]]) -> Callable[[np.ndarray], Any] | None:
    try:
        import torch
        from torch.func import jacfwd, jacrev, vmap
    except ImportError:
        return None
    tparams = [(torch.from_numpy(w), torch.from_numpy(b)) for w, b in params]

    def u(x: Any) -> Any:
        h = x
        for k, (w, b) in enumerate(tparams):
            h = h @ w + b
            if k < DEPTH - 1:
                h = torch.tanh(h)
        return h.sum()

    f = vmap(jacfwd(jacrev(u)))

    def run(x: np.ndarray) -> Any:
        with torch.no_grad():
            return f(torch.from_numpy(x)).numpy()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", help="also write the table to this Markdown file")
    args = parser.parse_args()
    params = make_params(args.width)
    x = np.random.default_rng(1).standard_normal((args.batch, 3)).astype(np.float32)
    forms = {"dslc": dslc_form(params), "jax.jit": jax_form(params), "torch.func": torch_form(params)}
    forms = {k: v for k, v in forms.items() if v is not None}
    first, reference = {}, None
    for name, f in forms.items():
        t = time.perf_counter()
        out = np.asarray(f(x))
        first[name] = time.perf_counter() - t
        assert out.shape == (args.batch, 3, 3), (name, out.shape)
        if reference is None:
            reference = out
        np.testing.assert_allclose(out, reference, rtol=2e-3, atol=2e-4, err_msg=name)
    times: dict[str, list[float]] = {k: [] for k in forms}
    for _ in range(args.rounds):
        for name, f in forms.items():
            t = time.perf_counter()
            f(x)
            times[name].append(time.perf_counter() - t)
    load = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else ["?"]
    lines = [
        f"Per-example Hessians, vmap(jacfwd(jacrev(u))), 6-layer tanh MLP R^3 -> R, width {args.width}, "
        f"batch {args.batch}, float32, CPU ({os.cpu_count()} cores, load {' '.join(load)}), "
        f"median of {args.rounds} interleaved rounds",
        "",
        "| form | median (ms) | vs dslc | first call (s) |",
        "|---|---|---|---|",
    ]
    base = statistics.median(times["dslc"])
    for name in forms:
        m = statistics.median(times[name])
        lines.append(f"| {name} | {m * 1e3:.2f} | {m / base:.2f}x | {first[name]:.2f} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
