"""The CUDA target's planned intermediates against XLA's temp bytes, for the six suite programs at the
CPU suite's sizes and at the GPU sizes of issue 27 (chain 10^8, softmax + cross-entropy 16384x8192,
layer norm 16384x4096, MLP step 6x1024 batch 4096, second derivative width 512 batch 65536,
transformer block B=16 T=512 D=1024). Needs no GPU: ``lower(...)`` for ``target="cuda"`` plans the
arena (its kernels' scratch included) on any machine.

    python benchmarks/cuda_plans.py [--sizes cpu,gpu] [--only NAME] [--out FILE.md] [--time]

XLA's figure is ``memory_analysis().temp_size_in_bytes`` of ``jax.jit(...).lower(...).compile()`` on
JAX's backend (the machine this runs on: its GPU where there is one, else the CPU's approximation).

A program with a band of row-fused kernels gets a row per ``--forms`` value (``FORMS``): "auto"
(``Options.band_columns``'s default, the rows pass's cost model: by default a band's column
reductions run after its rows as a column kernel that re-reads its inputs, those sharing inputs in
one kernel with an output each), "apart" (the same with ``sibling_reductions=False``: a column
kernel per reduction), "kernel" (every column reduction that can leaves the band) and "band" (the
one-pass form: partial rows per block). ``--time`` (needs a GPU) adds each row's median
milliseconds per call, inputs on the device, after the values of the forms are checked to agree:
the A/B of the forms.
``--row-max N`` lets bands take rows of up to N elements (CUDA's ``Target.row_max``, 4096): softmax +
cross-entropy at 16384x8192 becomes one band from 8192 (an experiment to time before changing it).
"""

from __future__ import annotations

import argparse
import dataclasses
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
from compiler.compilation import TARGETS, option_defaults  # noqa: E402

GPU_BUILDERS: dict[str, Callable[[], sp.Program]] = {
    "elementwise chain": lambda: sp.chain_program(10**8),
    "softmax + cross-entropy": lambda: sp.xent_program(16384, 8192),
    "layer norm": lambda: sp.layernorm_program(16384, 4096),
    "MLP training step": lambda: sp.mlp_program(4096, [1024] * 7),
    "second derivative": lambda: sp.d2u_program(512, 65536),
    "transformer block": lambda: sp.transformer_program(16, 512, 1024, 4),
}
SIZES = {"cpu": sp.BUILDERS, "gpu": GPU_BUILDERS}
FORMS: dict[str, dict[str, Any]] = {  # the options of each form
    "auto": {"band_columns": "auto"},
    "apart": {"band_columns": "auto", "sibling_reductions": False},
    "kernel": {"band_columns": "kernel"},
    "band": {"band_columns": "band"},
}


def cuda_compiled(prog: sp.Program, form: str) -> Any:
    """The program's function compiled for ``target="cuda"`` with ``FORMS[form]``."""
    inner = getattr(prog.dslc, "_fn", prog.dslc)
    with option_defaults(**FORMS[form]):
        return dsl.compile(lambda *a: inner(*a), target="cuda")


def cuda_plan(prog: sp.Program, form: str = "auto") -> tuple[Any, bool]:
    """The memory plan of the program compiled for ``target="cuda"`` (no GPU needed), and whether
    it has a band (``_rows`` kernels)."""
    with option_defaults(**FORMS[form]):
        lowered = cuda_compiled(prog, form).lower(*prog.args)
        return lowered.memory_plan(), "_rows(" in lowered.source()


def median_ms(prog: sp.Program, form: str, want: list[np.ndarray] | None) -> tuple[float, list[np.ndarray]]:
    """Median milliseconds of a synchronized call, inputs on the device (a GPU only), after checking
    the results against ``want`` (the other form's) where given."""
    from gpu_measure import median_time
    from numba import cuda

    fn = cuda_compiled(prog, form)
    args = [cuda.to_device(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else a for a in prog.args]
    got = [np.asarray(v.copy_to_host() if hasattr(v, "copy_to_host") else v) for v in _flat(fn(*args))]
    for g, w in zip(got, want or got, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * max(1.0, float(np.max(np.abs(w)))))
    return 1e3 * median_time(lambda: fn(*args), 30, warmup=3), got


def _flat(values: Any) -> list[Any]:
    if isinstance(values, tuple | list):
        return [x for v in values for x in _flat(v)]
    return [values]


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


def rows_of(size: str, name: str, prog: sp.Program, forms: list[str], timed: bool) -> list[dict[str, Any]]:
    """A row per form (``FORMS``; one row for a program without a band)."""
    out: list[dict[str, Any]] = []
    xla = xla_temp_bytes(prog)
    want = None
    for form in forms:
        plan, banded = cuda_plan(prog, form)
        scratch = sum(r.bytes for r in plan.buffers if r.scratch_of is not None)
        largest = max((r.bytes for r in plan.buffers if r.scratch_of is None), default=0)
        ms = None
        if timed:
            ms, got = median_ms(prog, form, want)
            want = want or got
        label = name if form == forms[0] else f"{name} ({form})"
        out.append(
            {
                "size": size,
                "program": label,
                "description": prog.description,
                "peak": plan.peak_bytes,
                "scratch": scratch,
                "largest": largest,
                "xla": xla,
                "ms": ms,
            }
        )
        if not banded:
            break
    return out


def table(rows: list[dict[str, Any]]) -> str:
    import jax

    backend = jax.default_backend().upper()  # the backend XLA's temp bytes are for: CPU, or GPU on a GPU
    lines = [
        "| program | size | planned peak | of which kernels' scratch | largest value | XLA temp "
        f"({backend}) "
        "| planned / XLA | median ms (GPU) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        xla = r["xla"]
        ratio = "-" if not xla else f"{r['peak'] / xla:.2f}"
        ms = "-" if r["ms"] is None else f"{r['ms']:.3f}"
        lines.append(
            f"| {r['program']} | {r['size']} | {r['peak']:,} | {r['scratch']:,} | {r['largest']:,} "
            f"| {'-' if xla is None else f'{xla:,}'} | {ratio} | {ms} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="cpu,gpu", help="comma-separated: cpu, gpu")
    parser.add_argument("--only", default="", help="programs whose name contains this")
    parser.add_argument("--out", default="", help="write the table to this Markdown file")
    parser.add_argument("--forms", default="auto,apart,band", help="forms of a program with a band (FORMS)")
    parser.add_argument("--time", action="store_true", help="time each row on the GPU (needs one)")
    parser.add_argument("--row-max", type=int, default=0, help="CUDA bands' longest row (0: the target's)")
    opts = parser.parse_args()
    if opts.row_max:
        TARGETS["cuda"] = dataclasses.replace(TARGETS["cuda"], row_max=opts.row_max)
    rows = []
    for size in opts.sizes.split(","):
        for name, build in SIZES[size].items():
            if opts.only.lower() in name.lower():
                for r in rows_of(size, name, build(), opts.forms.split(","), opts.time):
                    rows.append(r)
                    print(r, flush=True)
    text = table(rows)
    print(text)
    if opts.out:
        stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        with open(opts.out, "w") as f:
            f.write(f"`python benchmarks/cuda_plans.py`, {stamp}\n\n{text}\n")


if __name__ == "__main__":
    main()
