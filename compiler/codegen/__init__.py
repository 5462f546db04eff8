"""Code generation: IR -> Numba source -> an ``Executable`` (``runtime.executable``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from compiler.codegen import cpu
from compiler.codegen.cpu import CpuProgram, generate_cpu
from compiler.codegen.cuda import CudaProgram, generate_cuda
from compiler.ir.core import Function
from compiler.passes import rows
from compiler.passes.fuse import FusionPlan, Group, fuse
from compiler.passes.plan import MemoryPlan, check_no_overlap, plan_buffers
from compiler.pipeline import paused_gc
from runtime.executable import Executable
from runtime.module_cache import load_module
from runtime.precompile import prepare


def _planned(
    func: Function,
    inplace: bool,
    donate_argnums: tuple[int, ...],
    sanitize: bool = False,
    band_role: Callable[[Group], str | None] | None = None,
    compute_once: bool = True,
) -> tuple[FusionPlan, MemoryPlan]:
    """Fusion and memory plan of optimized IR; ``band_role``: the backend's row-fusion roles
    (``rows.form_bands``; the CPU backend's, while its ``row_fusion`` switch is on), and
    ``compute_once`` its ``row_compute_once`` switch. ``sanitize`` also checks the plan for
    overlapping live buffers."""
    with paused_gc():
        fusion = fuse(func)
        if band_role is not None:
            rows.form_bands(func, fusion, band_role, compute_once)
        plan = plan_buffers(func, fusion, inplace, donate_argnums)
    if sanitize:
        check_no_overlap(plan)
    return fusion, plan


def build_cpu_executable(
    func: Function, inplace: bool = True, donate_argnums: tuple[int, ...] = (), sanitize: bool = False
) -> tuple[Executable, CpuProgram, FusionPlan, MemoryPlan]:
    """fuse -> plan -> generate_cpu -> load_module -> Executable, for optimized IR.

    ``sanitize``: check the plan for overlapping live buffers and poison each buffer when it dies.
    """
    role = cpu.band_role if "row_fusion" in cpu.OPTIMIZATIONS else None
    once = "row_compute_once" in cpu.OPTIMIZATIONS
    fusion, plan = _planned(func, inplace, donate_argnums, sanitize, role, once)
    program = generate_cpu(func, fusion, plan, sanitize)
    module = load_module(program.source, program.constants)
    executable = Executable(
        getattr(module, program.entry),
        program.arena_bytes,
        program.n_results,
        program.writeback,
        [(p.type.shape, p.type.dtype.np) for p in func.params],
        name=func.name,
        out_types=[(t.shape, t.dtype.np) for t in program.out_types],
        direct_writeback=program.direct_writeback,
        arg_names=func.arg_names,
        donated=donate_argnums,
        prepare=lambda: prepare(
            module, program.kernel_slots, program.kernel_weights, program.entry, program.entry_signature
        ),
    )
    return executable, program, fusion, program.plan


def build_cuda_executable(
    func: Function, inplace: bool = True, donate_argnums: tuple[int, ...] = (), sanitize: bool = False
) -> tuple[Any, CudaProgram, FusionPlan, MemoryPlan]:
    """fuse -> plan -> generate_cuda -> load_module -> ``CudaExecutable`` (needs a GPU or the simulator)."""
    from runtime.cuda_executable import CudaExecutable

    fusion, plan = _planned(func, inplace, donate_argnums, sanitize)
    program = generate_cuda(func, fusion, plan, sanitize)
    module = load_module(program.source, program.constants)
    executable = CudaExecutable(
        module,
        program.entry,
        program.arena_bytes,
        program.n_results,
        program.writeback,
        [(p.type.shape, p.type.dtype.np) for p in func.params],
        [(t.shape, t.dtype.np) for t in program.result_types],
        out_types=[(t.shape, t.dtype.np) for t in program.out_types],
        name=func.name,
        direct_writeback=program.direct_writeback,
        arg_names=func.arg_names,
        donated=donate_argnums,
    )
    return executable, program, fusion, plan


def cuda_program(func: Function, inplace: bool = True, donate_argnums: tuple[int, ...] = ()) -> CudaProgram:
    """The CUDA code for optimized IR, without building an executable (no GPU needed)."""
    return generate_cuda(func, *_planned(func, inplace, donate_argnums))


def compile_ptx(program: CudaProgram, cc: tuple[int, int] = (9, 0)) -> dict[str, str]:
    """PTX for compute capability ``cc`` of every kernel of ``program``, by kernel name.

    Runs NVVM from the ``cuda`` extra's wheels (``numba.cuda.compile_ptx``): no GPU or driver needed,
    but not inside the CUDA simulator.
    """
    import numba
    from numba import types

    from runtime.cuda_executable import cuda_module
    from runtime.errors import DeviceError

    cuda = cuda_module()
    if not hasattr(cuda, "compile_ptx") or os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        raise DeviceError("PTX needs NVVM (pip install 'dslc[cuda]'), and not the CUDA simulator")
    module = load_module(program.source, program.constants)
    out = {}
    for kernel in program.kernels:
        sig = tuple(
            types.Array(numba.from_dtype(d.np), ndim, "C") if ndim else numba.from_dtype(d.np)
            for d, ndim in kernel.arg_types
        )
        key = (kernel.text, tuple(kernel.arg_types))
        library = _LOWERED.get(key)
        if library is None:  # type and lower once; NVVM then runs once per compute capability
            library = _LOWERED[key] = _lower_kernel(cuda, getattr(module, kernel.name).py_func, sig)
        if library is None:
            out[kernel.name], _ = cuda.compile_ptx(getattr(module, kernel.name).py_func, sig, cc=cc)
        else:
            (out[kernel.name],) = library.get_asm_strs(cc=cc)
    return out


_LOWERED: dict[Any, Any] = {}  # kernel text and signature -> its Numba code library (LLVM IR)


def _lower_kernel(cuda: Any, py_func: Any, sig: tuple[Any, ...]) -> Any:
    """numba-cuda's code library of a kernel (what ``compile_ptx`` builds before NVVM), or ``None``
    where this numba-cuda lacks the internal entry point (then ``compile_ptx`` runs per arch)."""
    try:
        from numba.cuda.compiler import _compile_pyfunc_with_fixup  # type: ignore[attr-defined]
    except ImportError:
        return None
    library, _ = _compile_pyfunc_with_fixup(py_func, sig, device=False, abi="numba", cc=(8, 0))
    return library


__all__ = [
    "CpuProgram",
    "CudaProgram",
    "build_cpu_executable",
    "build_cuda_executable",
    "compile_ptx",
    "cuda_program",
    "generate_cpu",
    "generate_cuda",
]
