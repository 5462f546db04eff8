"""Block reductions as warp shuffles against the shared-memory tree (``DSL_CUDA_SHUFFLE``, issue 27),
on a GPU: layer norm forward+backward (16384x4096) and softmax + cross-entropy (16384x8192) at the
GPU sizes, and two plain reductions of 512 MB (row sums: a block per row; a full sum: the split
reduction). Each program is compiled both ways; the values must agree (allclose) and each form must
give the same bits on two calls; then the two forms are timed in alternating rounds (medians of
synchronized calls, inputs on the device) and the table prints both and their ratio.

    python benchmarks/cuda_shuffle.py [--out FILE.md] [--rounds 5] [--small]

``--small``: tiny shapes, to try the script in the simulator (``NUMBA_ENABLE_CUDASIM=1``, where both
forms run the tree).
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import suite_programs as sp  # noqa: E402
from gpu_measure import median_time  # noqa: E402
from numba import cuda  # noqa: E402

import dsl  # noqa: E402

Case = tuple[Callable[..., Any], tuple[np.ndarray, ...]]


def _suite(prog: sp.Program) -> Case:
    return getattr(prog.dslc, "_fn", prog.dslc), prog.args


def _f32(*shape: int) -> np.ndarray:
    return np.random.default_rng(3).standard_normal(shape).astype(np.float32)


def cases(small: bool) -> dict[str, Callable[[], Case]]:
    rows, width, classes, n = (64, 48, 40, 1 << 12) if small else (16384, 4096, 8192, 1 << 27)
    return {
        f"layer norm {rows}x{width}": lambda: _suite(sp.layernorm_program(rows, width)),
        f"softmax + cross-entropy {rows}x{classes}": lambda: _suite(sp.xent_program(rows, classes)),
        f"row sums {rows}x{classes}": lambda: (lambda x: x.sum(axis=1), (_f32(rows, classes),)),
        f"sum of {n:,}": lambda: (lambda x: x.sum(), (_f32(n),)),
    }


def _host(values: Any) -> list[np.ndarray]:
    if isinstance(values, tuple | list):
        return [x for v in values for x in _host(v)]
    return [np.asarray(values.copy_to_host() if hasattr(values, "copy_to_host") else values)]


def compiled(fn: Callable[..., Any], args: list[Any], shuffle: bool) -> tuple[Any, list[np.ndarray]]:
    """``fn`` compiled for CUDA with block reductions as shuffles or as the tree (the kernel builder
    reads ``DSL_CUDA_SHUFFLE`` when the first call compiles), and its results, checked to be the same
    bits on a second call."""
    saved = os.environ.get("DSL_CUDA_SHUFFLE")
    os.environ["DSL_CUDA_SHUFFLE"] = "1" if shuffle else "0"
    try:
        f = dsl.compile(lambda *a: fn(*a), target="cuda")
        first = _host(f(*args))
    finally:
        if saved is None:
            del os.environ["DSL_CUDA_SHUFFLE"]
        else:
            os.environ["DSL_CUDA_SHUFFLE"] = saved
    for a, b in zip(first, _host(f(*args)), strict=True):
        np.testing.assert_array_equal(a, b, err_msg="not deterministic run to run")
    return f, first


def measure(name: str, case: Case, rounds: int) -> dict[str, Any]:
    fn, host_args = case
    args = [cuda.to_device(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else a for a in host_args]
    tree, want = compiled(fn, args, False)
    shuffled, got = compiled(fn, args, True)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * max(1.0, float(np.max(np.abs(w)))))
    times: dict[str, list[float]] = {"tree": [], "shuffle": []}
    for _ in range(rounds):  # alternating, so that clock and load changes fall on both
        for form, f in (("tree", tree), ("shuffle", shuffled)):
            times[form].append(1e3 * median_time(lambda f=f: f(*args), 10, warmup=2))
    row = {"program": name, **{form: statistics.median(ms) for form, ms in times.items()}}
    print(row, flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default="", help="write the table to this Markdown file")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of 10 timed calls per form")
    parser.add_argument("--small", action="store_true", help="tiny shapes (a try in the simulator)")
    parser.add_argument("--only", default="", help="programs whose name contains this")
    opts = parser.parse_args()
    rows = [
        measure(name, build(), opts.rounds)
        for name, build in cases(opts.small).items()
        if opts.only.lower() in name.lower()
    ]
    device = getattr(cuda.get_current_device(), "name", "the CUDA simulator")
    device = device.decode() if isinstance(device, bytes) else device
    lines = [
        f"Device: {device}. Median ms per synchronized call, inputs on the device.",
        "",
        "| program | tree ms | shuffle ms | shuffle / tree |",
        "|---|---:|---:|---:|",
        *(
            f"| {r['program']} | {r['tree']:.3f} | {r['shuffle']:.3f} | {r['shuffle'] / r['tree']:.2f} |"
            for r in rows
        ),
    ]
    text = "\n".join(lines)
    print(text)
    if opts.out:
        stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        with open(opts.out, "w") as f:
            f.write(f"`python benchmarks/cuda_shuffle.py`, {stamp}\n\n{text}\n")


if __name__ == "__main__":
    main()
