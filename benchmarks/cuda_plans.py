"""The CUDA target's planned intermediates against XLA's temp bytes, for the six suite programs at the
CPU suite's sizes and at the GPU sizes of issue 27 (chain 10^8, softmax + cross-entropy 16384x8192,
layer norm 16384x4096, MLP step 6x1024 batch 4096, second derivative width 512 batch 65536,
transformer block B=16 T=512 D=1024). Needs no GPU: ``lower(...)`` for ``target="cuda"`` plans the
arena (its kernels' scratch included) on any machine.

    python benchmarks/cuda_plans.py [--sizes cpu,gpu] [--only NAME] [--out FILE.md]

XLA's figure is ``memory_analysis().temp_size_in_bytes`` of ``jax.jit(...).lower(...).compile()`` on
JAX's CPU backend (the machine this runs on): an approximation of the GPU's, which needs a GPU.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import suite_programs as sp  # noqa: E402

import dsl  # noqa: E402

GPU_BUILDERS: dict[str, Callable[[], sp.Program]] = {
    "elementwise chain": lambda: sp.chain_program(10**8),
    "softmax + cross-entropy": lambda: sp.xent_program(16384, 8192),
    "layer norm": lambda: sp.layernorm_program(16384, 4096),
    "MLP training step": lambda: sp.mlp_program(4096, [1024] * 7),
    "second derivative": lambda: sp.d2u_program(512, 65536),
    "transformer block": lambda: sp.transformer_program(16, 512, 1024, 4),
}
SIZES = {"cpu": sp.BUILDERS, "gpu": GPU_BUILDERS}


def cuda_plan(prog: sp.Program) -> Any:
    """The memory plan of the program's function compiled for ``target="cuda"`` (no GPU needed)."""
    inner = getattr(prog.dslc, "_fn", prog.dslc)
    return dsl.compile(lambda *a: inner(*a), target="cuda").lower(*prog.args).memory_plan()


def xla_temp_bytes(prog: sp.Program) -> int | None:
    """XLA's temp bytes for the JAX form of the program, compiled for JAX's CPU backend."""
    if prog.jax is None:
        return None
    import jax

    fn = prog.jax()
    args = prog.jax_args(prog.args) if prog.jax_args is not None else prog.args
    abstract = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype), args)
    analysis = fn.lower(*abstract).compile().memory_analysis()
    return None if analysis is None else int(analysis.temp_size_in_bytes)


def row(size: str, name: str, prog: sp.Program) -> dict[str, Any]:
    plan = cuda_plan(prog)
    scratch = sum(r.bytes for r in plan.buffers if r.scratch_of is not None)
    largest = max((r.bytes for r in plan.buffers if r.scratch_of is None), default=0)
    return {
        "size": size,
        "program": name,
        "description": prog.description,
        "peak": plan.peak_bytes,
        "scratch": scratch,
        "largest": largest,
        "xla": xla_temp_bytes(prog),
    }


def table(rows: list[dict[str, Any]]) -> str:
    import jax

    backend = jax.default_backend().upper()  # the backend XLA's temp bytes are for: CPU, or GPU on a GPU
    lines = [
        "| program | size | planned peak | of which kernels' scratch | largest value | XLA temp "
        f"({backend}) "
        "| planned / XLA |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        xla = r["xla"]
        ratio = "-" if not xla else f"{r['peak'] / xla:.2f}"
        lines.append(
            f"| {r['program']} | {r['size']} | {r['peak']:,} | {r['scratch']:,} | {r['largest']:,} "
            f"| {'-' if xla is None else f'{xla:,}'} | {ratio} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="cpu,gpu", help="comma-separated: cpu, gpu")
    parser.add_argument("--only", default="", help="programs whose name contains this")
    parser.add_argument("--out", default="", help="write the table to this Markdown file")
    opts = parser.parse_args()
    rows = []
    for size in opts.sizes.split(","):
        for name, build in SIZES[size].items():
            if opts.only.lower() in name.lower():
                rows.append(row(size, name, build()))
                print(rows[-1], flush=True)
    text = table(rows)
    print(text)
    if opts.out:
        stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        with open(opts.out, "w") as f:
            f.write(f"`python benchmarks/cuda_plans.py`, {stamp}\n\n{text}\n")


if __name__ == "__main__":
    main()
