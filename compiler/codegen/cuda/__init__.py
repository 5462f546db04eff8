"""CUDA code generation: one ``numba.cuda.jit`` kernel per fusion group and a host driver.

The same fusion plan, memory plan and scalar lowerings (``prim.emit`` through ``BodyBuilder``) as
the CPU backend; only the scaffolding differs:

- every device buffer is *flat* (1-D, C order): kernels index ``x[i0 * 4 + i1]`` with strides known
  at compile time, so the driver never reshapes, and a read at the group's own index of a value of
  the group's shape is simply ``x[g]``;
- LOOP groups are grid-stride loops over the flat iteration space; the multi-dimensional index
  ``i0, i1, ...`` is computed from ``g`` only where some read needs it (a broadcast, a transpose...);
- REDUCE groups: a small reduced extent is a serial loop per output element (one thread each);
  a large one gets a block per output element and a shared-memory tree; a large reduction into few
  outputs is split in two passes (fixed chunks -> partials -> a tree per output); one that keeps the
  innermost axis (a bias gradient) gives each warp consecutive outputs, so it reads whole row
  segments, in chunks -> partials -> an in-order combine per output. There are no
  atomics, so every reduction is deterministic: the same inputs give bit-identical results;
- CONTRACT groups: a matmul tiled through shared memory with a register tile per thread, batched
  over ``blockIdx.z``, one kernel per dtype shared by every matmul; float matmuls are launched
  through ``runtime.cublas.matmul_launcher``, which runs cuBLAS instead where it can (a GPU with
  libcublas, BLAS-compatible strides: ``runtime/cublas.py``);
- a band of the ``rows`` pass (consecutive LOOP/REDUCE groups over the same rows) is one kernel,
  its rows resident in a block (``bands.py``);
- constant arrays are copied to the device once and passed as kernel arguments (no 64 KiB
  constant-memory limit).

Kernels call no other jitted function (helpers are inlined as text), so ``numba.cuda.compile_ptx``
compiles each of them without a driver. The module's ``bind(arena, stream)`` carves the arena
views and launch configurations once and returns ``run(outs..., params...)``, which launches the
kernels in order on ``stream`` and returns the (flat) results. Every launch goes through
``runtime.cuda_launch.fast_launch``, which after the first launch flattens only the arguments that
changed (the arena views never do).

Launch sizes come from the module constants ``TPB`` (threads per block), ``MAXB`` (blocks of a
grid-stride launch) and ``TILE`` (matmul tile), smaller under the CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``), where every thread is a Python thread.

The package: ``prelude.py`` (the module text every program starts with), ``kernel.py`` (the kernel
record, flat indexing, a group's ``KernelSpec``, the block tree), ``loops.py`` (LOOP and REDUCE
groups), ``matmul.py`` (CONTRACT groups), ``bands.py`` (row-fused bands), ``driver.py``
(``bind``/``run``), and this file, which prints a program.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from compiler.codegen.common import caller_allocated, program_facts, py_name
from compiler.codegen.cuda.bands import band_kernel
from compiler.codegen.cuda.driver import ENTRY, driver
from compiler.codegen.cuda.kernel import CudaKernel, KernelSpec, linear, numba_type, unflatten
from compiler.codegen.cuda.loops import loop_kernel, reduce_kernel
from compiler.codegen.cuda.matmul import matmul_kernel
from compiler.codegen.cuda.prelude import PRELUDE
from compiler.ir.core import Function
from compiler.ir.types import TensorType
from compiler.kernel.emit import ConstantPool
from compiler.passes.fuse import FusionPlan, Group, GroupKind
from compiler.passes.plan import MemoryPlan


@dataclass
class CudaProgram:
    source: str
    constants: dict[str, np.ndarray]
    entry: str
    kernels: list[CudaKernel]  # every kernel of the module, in launch order
    n_results: int
    writeback: tuple[int, ...]
    arena_bytes: int
    direct_writeback: tuple[int, ...]
    result_types: list[TensorType]
    out_types: list[TensorType]  # results the runtime allocates and passes in, in driver order


def generate_cuda(
    func: Function, fusion: FusionPlan, plan: MemoryPlan, sanitize: bool = False
) -> CudaProgram:
    names = {v: py_name(n) for v, n in fusion.names.items()}
    pool = ConstantPool()
    kernels: dict[Group, CudaKernel] = {}
    for group in fusion.groups:
        band = fusion.band_of.get(group)
        if band is not None:  # one kernel for the band, where its first member would run
            if group is band.groups[0]:
                kernels[group] = band_kernel(band, names, pool)
            continue
        kernel = _WRITERS[group.kind](KernelSpec(group, names, pool))
        if kernel is not None:
            kernels[group] = kernel
    outs = caller_allocated(func, plan)
    host = driver(func, fusion, plan, kernels, names, outs, pool, sanitize)
    every = list({k.name: k for top in kernels.values() for k in (top, *top.follow)}.values())
    libraries = [_library_import(k) for k in every if k.shared]
    if libraries:
        libraries.insert(0, "from runtime.module_cache import load_module as _load_module  # noqa: E402\n")
    if every:
        libraries.insert(0, "from runtime.cuda_launch import fast_launch as _fast_launch  # noqa: E402\n")
    if any(k.wrapper for k in every):
        libraries.insert(0, "from runtime.cublas import matmul_launcher as _matmul_launcher  # noqa: E402\n")
    own = [k.text for k in every if not k.shared]
    parts = [PRELUDE, "\n".join(libraries), _constants(pool), *own, host]
    return CudaProgram(
        source="\n\n\n".join(p for p in parts if p) + "\n",
        constants=dict(pool.arrays),
        entry=ENTRY,
        kernels=every,
        **program_facts(func, plan, outs),
    )


def _library_import(kernel: CudaKernel) -> str:
    """A shared kernel lives in a module of its own (PRELUDE + its text, content-addressed in the
    module cache): every program that uses it gets the same dispatcher, compiled once per process
    and cached on disk across processes."""
    source = PRELUDE + "\n\n\n" + kernel.text + "\n"
    return f"{kernel.name} = _load_module({source!r}, {{}}).{kernel.name}"


def _constants(pool: ConstantPool) -> str:
    if not pool.arrays:
        return ""
    lines = ['with np.load(__file__[:-3] + ".npz") as _constants:']
    return "\n".join(lines + [f'    {name} = _constants["{name}"]' for name in pool.arrays])


_WRITERS: dict[GroupKind, Callable[[KernelSpec], CudaKernel | None]] = {
    GroupKind.LOOP: loop_kernel,
    GroupKind.REDUCE: reduce_kernel,
    GroupKind.CONTRACT: matmul_kernel,
}


__all__ = [
    "ENTRY",
    "CudaKernel",
    "CudaProgram",
    "KernelSpec",
    "generate_cuda",
    "linear",
    "numba_type",
    "unflatten",
]
