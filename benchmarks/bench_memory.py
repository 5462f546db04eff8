"""Memory benchmark: how much arena the planner needs, against an eager run and the reference plan.

    python benchmarks/bench_memory.py [--out benchmarks/results/memory.md]

For each program: the bytes an eager run allocates for intermediates (``naive_bytes``), the planned
arena with reuse and in-place on (``peak_bytes``), and the reference plan's arena (``inplace=False``:
no reuse, no in-place). Also checks that each executable allocated exactly the planned arena (at
least 1 byte) and that the in-place plan computes what NumPy computes. Results and inputs are never
counted: they belong to the caller. Sizes are fixed, so bytes do not vary between runs or machines.
Target (issue): planned peak <= naive / 2 on the MLP and softmax + cross-entropy programs.

Against MLIR (when ``mlir-opt`` is installed): each optimized program is exported to upstream MLIR
(``compiler/codegen/mlir_export.py``) and bufferized by ``mlir-opt --one-shot-bufferize`` (function
boundaries included), alone and after MLIR's elementwise fusion; the tables count the
``memref.alloc`` left and the bytes they allocate (one-shot-bufferize reuses no memory), next to our
buffers: the planned intermediates plus the results, which we allocate per call.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import os
import platform
import shutil
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import dsl  # noqa: E402
import dsl.numpy as dnp  # noqa: E402
from compiler.codegen.mlir_export import (  # noqa: E402
    FUSE_THEN_BUFFERIZE,
    ONE_SHOT_BUFFERIZE,
    count_allocs,
    export_module,  # noqa: E402
)

TARGET_PROGRAMS = {"mlp", "softmax_xent"}


def mlp(x, w1, b1, w2, b2, w3, b3):
    h = dsl.nn.relu(x @ w1 + b1)
    h = dsl.nn.relu(h @ w2 + b2)
    return h @ w3 + b3


def mlp_numpy(x, w1, b1, w2, b2, w3, b3):
    h = np.maximum(x @ w1 + b1, 0)
    h = np.maximum(h @ w2 + b2, 0)
    return h @ w3 + b3


def softmax_xent(logits, onehot):
    z = logits - logits.max(axis=-1, keepdims=True)
    e = dnp.exp(z)
    probs = e / e.sum(axis=-1, keepdims=True)
    return -(onehot * dnp.log(probs)).sum(axis=-1).mean()


def softmax_xent_numpy(logits, onehot):
    z = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(z)
    probs = e / e.sum(axis=-1, keepdims=True)
    return -(onehot * np.log(probs)).sum(axis=-1).mean()


def layer_norm(x, gamma, beta):
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=-1, keepdims=True)
    return d / dnp.sqrt(var + 1e-5) * gamma + beta


def layer_norm_numpy(x, gamma, beta):
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=-1, keepdims=True)
    return d / np.sqrt(var + np.float32(1e-5)) * gamma + beta


def chain(x):
    a = x * 1.5
    b = a + 0.5
    c = b * x
    d = c - 2.0
    e = x * x
    f = e + 1.0
    g = d / f
    return dnp.maximum(g, 0.0)


def chain_numpy(x):
    f32 = np.float32
    return np.maximum((((x * f32(1.5)) + f32(0.5)) * x - f32(2.0)) / (x * x + f32(1.0)), f32(0.0))


def attention(q, k, v):
    return dsl.nn.softmax(q @ k.T / 8.0) @ v


def attention_numpy(q, k, v):
    s = q @ k.T / np.float32(8.0)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True) @ v


@dataclass
class Case:
    name: str
    description: str
    fn: Callable[..., Any]
    reference: Callable[..., Any]
    args: tuple[np.ndarray, ...]


def cases() -> list[Case]:
    rng = np.random.default_rng(0)

    def f32(*shape: int, scale: float = 1.0) -> np.ndarray:
        return (scale * rng.standard_normal(shape)).astype(np.float32)

    mlp_args = (f32(1024, 784), f32(784, 1024, scale=784**-0.5), f32(1024), f32(1024, 1024, scale=1024**-0.5))
    mlp_args += (f32(1024), f32(1024, 10, scale=1024**-0.5), f32(10))
    onehot = np.eye(1000, dtype=np.float32)[rng.integers(0, 1000, 1024)]
    return [
        Case("mlp", "3-layer MLP forward, x [1024, 784], 784-1024-1024-10 f32", mlp, mlp_numpy, mlp_args),
        Case(
            "softmax_xent",
            "softmax + cross-entropy forward, logits [1024, 1000] f32, one-hot labels",
            softmax_xent,
            softmax_xent_numpy,
            (f32(1024, 1000), onehot),
        ),
        Case(
            "layer_norm",
            "layer norm forward, x [1024, 1024] f32",
            layer_norm,
            layer_norm_numpy,
            (f32(1024, 1024), f32(1024), f32(1024)),
        ),
        Case("chain", "8-op elementwise chain, 1e6 f32", chain, chain_numpy, (f32(10**6),)),
        Case(
            "attention",
            "attention block forward, q, k, v [256, 64] f32: softmax(q k^T / 8) v",
            attention,
            attention_numpy,
            (f32(256, 64), f32(256, 64), f32(256, 64)),
        ),
    ]


@dataclass
class Row:
    case: Case
    naive: int
    peak: int
    reference_peak: int
    arena_ok: bool
    numpy_peak: int
    plan: Any
    ours_buffers: int  # planned intermediates + results
    result_bytes: int
    mlir: dict[str, tuple[int, int]]  # pipeline -> (memref.alloc count, bytes), empty without mlir-opt


def measure(case: Case) -> Row:
    """Plan both ways, check each arena against its plan and each result against NumPy."""
    want = case.reference(*case.args)
    lowered = {}
    for inplace in (True, False):
        compiled = dsl.compile(case.fn, inplace=inplace)
        np.testing.assert_allclose(compiled(*case.args), want, rtol=2e-3, atol=2e-3)
        lowered[inplace] = compiled.lower(*case.args)  # the cached program that just ran
    plan, ref_plan = lowered[True].memory_plan(), lowered[False].memory_plan()
    arena_ok = all(
        lo._program.executable.arena.nbytes == max(lo.memory_plan().peak_bytes, 1) for lo in lowered.values()
    )
    func = lowered[True]._program.stages["optimized"]
    results = {v for v in func.results if v not in set(func.params)}
    return Row(
        case,
        plan.naive_bytes,
        plan.peak_bytes,
        ref_plan.peak_bytes,
        arena_ok,
        numpy_peak(case),
        plan,
        len(plan.buffers) + len(results),
        sum(v.type.nbytes for v in results),
        mlir_allocs(export_module([func])),
    )


def find_mlir_opt() -> str | None:
    """``mlir-opt`` on PATH, else ``mlir-opt-22``, else the newest ``/usr/lib/llvm-*/bin/mlir-opt``."""
    found = shutil.which("mlir-opt") or shutil.which("mlir-opt-22")
    versions = sorted(
        glob.glob("/usr/lib/llvm-*/bin/mlir-opt"), key=lambda p: int(p.split("-")[1].split("/")[0])
    )
    return found or (versions[-1] if versions else None)


MLIR_PIPELINES = {
    "one-shot-bufferize": (ONE_SHOT_BUFFERIZE,),
    "fuse + one-shot-bufferize": FUSE_THEN_BUFFERIZE,
}


def mlir_allocs(text: str) -> dict[str, tuple[int, int]]:
    """``memref.alloc`` count and bytes after each MLIR pipeline ({} when mlir-opt is missing)."""
    mlir_opt = find_mlir_opt()
    if mlir_opt is None:
        return {}
    out = {}
    for name, flags in MLIR_PIPELINES.items():
        proc = subprocess.run([mlir_opt, *flags], input=text, capture_output=True, text=True, check=True)
        out[name] = count_allocs(proc.stdout)
    return out


def numpy_peak(case: Case) -> int:
    """Peak bytes NumPy allocates running the program eagerly (its result included; NumPy reports
    its data buffers to tracemalloc). Context for the table: eager NumPy frees temporaries as it
    goes, so it needs far less than ``naive_bytes``."""
    case.reference(*case.args)  # warm-up: first-call allocations are not the program's
    tracemalloc.start()
    try:
        case.reference(*case.args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def size(n: int) -> str:
    return f"{n:,}"


def ratio(naive: int, peak: int) -> str:
    return f"{naive / peak:.2f}x" if peak else "inf (no arena)"


def report(rows: list[Row]) -> list[str]:
    lines = [
        "| program | naive bytes | peak bytes (in-place) | peak bytes (inplace=False) | naive/peak | "
        "naive/peak (inplace=False) | arena == plan | peak <= naive/2 | NumPy eager peak bytes |",
        "|---|---:|---:|---:|---:|---:|---|---|---:|",
    ]
    for r in rows:
        met = "met" if 2 * r.peak <= r.naive else "not met"
        target = f"**{met}** (target)" if r.case.name in TARGET_PROGRAMS else met
        lines.append(
            f"| {r.case.description} | {size(r.naive)} | {size(r.peak)} | {size(r.reference_peak)} | "
            f"{ratio(r.naive, r.peak)} | {ratio(r.naive, r.reference_peak)} | "
            f"{'yes' if r.arena_ok else 'NO'} | {target} | {size(r.numpy_peak)} |"
        )
    return lines


def report_mlir(rows: list[Row]) -> list[str]:
    """Our buffers next to the ``memref.alloc`` MLIR's one-shot-bufferize leaves for the same program."""
    if not rows[0].mlir:
        return ["mlir-opt not found: no comparison with MLIR (apt-get install mlir-22-tools)."]
    names = list(MLIR_PIPELINES)
    lines = [
        "| program | our buffers (planned + results) | our bytes (peak + results) | "
        + " | ".join(f"memref.alloc ({n}) | alloc bytes ({n})" for n in names)
        + " |",
        "|---|---:|---:|" + "---:|---:|" * len(names),
    ]
    for r in rows:
        cells = " | ".join(f"{r.mlir[n][0]} | {size(r.mlir[n][1])}" for n in names)
        lines.append(f"| {r.case.name} | {r.ours_buffers} | {size(r.peak + r.result_bytes)} | {cells} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "memory.md"))
    args = parser.parse_args()
    rows = [measure(case) for case in cases()]

    import numba

    lines = [
        "# Memory benchmark",
        "",
        f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        f"- python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}",
        "- command: `python benchmarks/bench_memory.py`",
        "",
        "Bytes of intermediates only (inputs and results belong to the caller). naive: every intermediate "
        "value its own buffer, as an eager run allocates; peak: the planned arena. "
        "Target (issue): peak <= naive/2 on the MLP and softmax + cross-entropy programs. "
        "naive leaves out what an eager NumPy run makes without memory (scalar constants, views, in-place "
        "updates; `compiler/passes/plan.py: naive_bytes`); the last column is what NumPy really peaks at "
        "(tracemalloc, its result included), for context.",
        "",
        *report(rows),
        "",
        "## Against MLIR's one-shot-bufferize",
        "",
        "Each optimized program exported to upstream MLIR (`dslc compile --emit mlir`) and bufferized "
        'by `mlir-opt --one-shot-bufferize="bufferize-function-boundaries '
        'function-boundary-type-conversion=identity-layout-map"`, alone and after '
        "`--linalg-fuse-elementwise-ops --canonicalize --cse --eliminate-empty-tensors`. MLIR allocates "
        "each result inside the function, so our side counts the results too. One-shot-bufferize does not "
        "share memory between allocations: its bytes are the sum of every `memref.alloc`, ours the arena "
        "peak.",
        "",
        *report_mlir(rows),
        "",
        "## Plans (in-place on)",
        "",
    ]
    for r in rows:
        # Source locations relative to the repository, so the record names no machine's paths.
        plan = str(r.plan).replace(ROOT + os.sep, "")
        lines += [f"### {r.case.name}", "", "```", plan, "```", ""]
    text = "\n".join(lines)
    print(text)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)
    if not all(r.arena_ok for r in rows):
        sys.exit("an executable's arena differs from its planned peak")


if __name__ == "__main__":
    main()
