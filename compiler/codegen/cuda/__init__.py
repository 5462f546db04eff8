"""CUDA code generation: print the ``kernels`` pass's CUDA kernels (``compiler/kernel/cuda/``) as
``numba.cuda.jit`` functions, and a host driver.

The kernels pass decided everything a kernel does: every device buffer is *flat* (1-D, C order), so
kernels index ``x[i0 * 4 + i1]`` with strides known at compile time and the driver never reshapes;
LOOP groups are grid-stride loops; each reduction has its strategy (a thread or a block per output,
two passes, columns side by side: ``kernel/cuda/loops.py``); a band of the ``rows`` pass is one
kernel with its rows resident in a block (``kernel/cuda/bands.py``); matmuls are one shared kernel
per dtype, launched through ``runtime.cublas.matmul_launcher`` (cuBLAS where it can). The ``scratch``
pass placed every kernel's global scratch in the arena. There are no atomics, so every reduction is
deterministic. Constant arrays are copied to the device once and passed as kernel arguments.

Kernels call no other jitted function (helpers are inlined as text), so ``numba.cuda.compile_ptx``
compiles each of them without a driver. The module's ``bind(arena, stream)`` carves the arena
views and launch configurations once and returns ``run(outs..., params...)``, which launches the
kernels in order on ``stream`` and returns the (flat) results. Every launch goes through
``runtime.cuda_launch.fast_launch``, which after the first launch flattens only the arguments that
changed (the arena views never do).

The package: ``prelude.py`` (the module text every program starts with), ``printer.py`` (a kernel's
text), ``driver.py`` (``bind``/``run``), and this file, which prints a program.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.codegen.common import Level, program_facts
from compiler.codegen.cuda.driver import ENTRY, driver, host_reads, launch_count
from compiler.codegen.cuda.prelude import PRELUDE
from compiler.codegen.cuda.printer import kernel_text
from compiler.ir.core import Function
from compiler.ir.types import DType, TensorType
from compiler.kernel.cuda.build import CudaKernels, build_kernels, plan_scratch
from compiler.kernel.cuda.records import CudaKernel
from compiler.passes.fuse import FusionPlan, Group
from compiler.passes.loops import Loop
from compiler.passes.plan import MemoryPlan


@dataclass
class PrintedKernel:
    """A kernel of the module: its name, text and argument types (``(dtype, ndim)``, the PTX signature)."""

    name: str
    text: str
    arg_types: list[tuple[DType, int]]


@dataclass
class CudaProgram:
    source: str
    constants: dict[str, np.ndarray]
    entry: str
    kernels: list[PrintedKernel]  # every kernel of the module, in launch order
    n_results: int
    writeback: tuple[int, ...]
    arena_bytes: int
    direct_writeback: tuple[int, ...]
    result_types: list[TensorType]
    out_types: list[TensorType]  # results the runtime allocates and passes in, in driver order
    plan: MemoryPlan  # the plan the module follows (with the kernels' scratch)
    launches: int = 0  # kernel launches per call (``driver.launch_count``): the graphs' cost rule
    host_reads: bool = False  # the driver reads device values back (``driver.host_reads``): no graph
    blas: bool = False  # its float matmuls may run on cuBLAS (a captured graph gives them a workspace)


def generate_cuda(
    func: Function,
    fusion: FusionPlan,
    plan: MemoryPlan,
    kernels: CudaKernels | None = None,
    sanitize: bool = False,
    loops: dict[Group, Loop] | None = None,
) -> CudaProgram:
    """The module of a program planned for CUDA: the ``kernels`` and ``scratch`` passes' kernels
    (run here for a program planned without them) and ``plan``, the memory plan they follow."""
    if kernels is None:
        kernels, plan = plan_scratch(func, fusion, plan, build_kernels(func, fusion, plan, None), None)
    top = Level(func, fusion, plan, kernels, loops or {}, sanitize)
    levels = top.levels()
    outs = top.outs
    host = driver(top)
    every = list({k.name: k for level in levels for k in level.kernels.every()}.values())
    constants = {n: a for level in levels for n, a in level.kernels.pool.arrays.items()}
    texts = {k.name: kernel_text(k) for k in every}
    libraries = [_library_import(k, texts[k.name]) for k in every if k.shared]
    if libraries:
        libraries.insert(0, "from runtime.module_cache import load_module as _load_module  # noqa: E402\n")
    if every:
        libraries.insert(0, "from runtime.cuda_launch import fast_launch as _fast_launch  # noqa: E402\n")
    blas = any(k.wrapper for k in every)  # its float matmuls go through runtime/cublas.py
    if blas:
        libraries.insert(0, "from runtime.cublas import matmul_launcher as _matmul_launcher  # noqa: E402\n")
    own = [texts[k.name] for k in every if not k.shared]
    parts = [PRELUDE, "\n".join(libraries), _constants(constants), *own, host]
    return CudaProgram(
        source="\n\n\n".join(p for p in parts if p) + "\n",
        constants=constants,
        entry=ENTRY,
        kernels=[PrintedKernel(k.name, texts[k.name], k.arg_types) for k in every],
        plan=plan,
        launches=launch_count(top),
        host_reads=host_reads(top),
        blas=blas,
        **program_facts(func, plan, outs),
    )


def _library_import(kernel: CudaKernel, text: str) -> str:
    """A shared kernel lives in a module of its own (PRELUDE + its text, content-addressed in the
    module cache): every program that uses it gets the same dispatcher, compiled once per process
    and cached on disk across processes."""
    source = PRELUDE + "\n\n\n" + text + "\n"
    return f"{kernel.name} = _load_module({source!r}, {{}}).{kernel.name}"


def _constants(arrays: dict[str, np.ndarray]) -> str:
    if not arrays:
        return ""
    lines = ['with np.load(__file__[:-3] + ".npz") as _constants:']
    return "\n".join(lines + [f'    {name} = _constants["{name}"]' for name in arrays])


__all__ = ["ENTRY", "CudaProgram", "PrintedKernel", "generate_cuda"]
