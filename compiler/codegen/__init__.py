"""Code generation: print the pipeline's planned program as Numba source; load it as an executable.

A code generator takes the pipeline's final state (``compiler.compilation.Compilation``: the
optimized function, its fusion plan with bands, its memory plan) and makes no decision about
memory. Printing needs no device (``generate``, ``cuda_program``, ``compile_ptx``); loading a CUDA
program (``load``) does.
"""

from __future__ import annotations

import os
from typing import Any

from compiler.codegen.cpu import CpuProgram, generate_cpu
from compiler.codegen.cuda import CudaProgram, generate_cuda
from compiler.compilation import Compilation
from compiler.passes.fuse import FusionPlan
from compiler.passes.plan import MemoryPlan
from runtime.devices import require_device
from runtime.executable import Executable
from runtime.module_cache import load_module
from runtime.precompile import prepare


def _planned(program: Compilation) -> tuple[FusionPlan, MemoryPlan]:
    if program.fusion is None or program.plan is None:
        raise ValueError("code generation takes a planned program (compiler.pipeline.plan_program)")
    return program.fusion, program.plan


def generate(program: Compilation) -> tuple[CpuProgram | CudaProgram, MemoryPlan]:
    """The generated module of ``program`` for its target, and the memory plan that code follows
    (the pipeline's: the ``regions`` pass's where it resized slots). The CPU prints the ``kernels``
    pass's kernels (built here for a program planned without it)."""
    fusion, plan = _planned(program)
    if program.options.target == "cuda":
        cuda = generate_cuda(
            program.func, fusion, plan, program.kernels, program.options.sanitize, program.loops
        )
        return cuda, cuda.plan
    generated = generate_cpu(program.func, fusion, plan, program.options, program.kernels, program.loops)
    return generated, generated.plan


def load(program: Compilation, generated: CpuProgram | CudaProgram) -> Any:
    """The executable of a generated module (a CUDA one needs a GPU or the simulator)."""
    if isinstance(generated, CudaProgram):
        return _cuda_executable(program, generated)
    return _cpu_executable(program, generated)


def _cpu_executable(program: Compilation, generated: CpuProgram) -> Executable:
    func = program.func
    module = load_module(generated.source, generated.constants)
    return Executable(
        getattr(module, generated.entry),
        generated.arena_bytes,
        generated.n_results,
        generated.writeback,
        [(p.type.shape, p.type.dtype.np) for p in func.params],
        name=func.name,
        out_types=[(t.shape, t.dtype.np) for t in generated.out_types],
        direct_writeback=generated.direct_writeback,
        args_written=generated.args_written,
        arg_names=func.arg_names,
        donated=program.options.donate_argnums,
        prepare=lambda: prepare(
            module,
            generated.kernel_slots,
            generated.kernel_weights,
            generated.compiled_entry,
            generated.entry_signature,
        ),
    )


def _cuda_executable(program: Compilation, generated: CudaProgram) -> Any:
    from runtime.cuda_executable import CudaExecutable

    require_device("cuda")
    func = program.func
    module = load_module(generated.source, generated.constants)
    return CudaExecutable(
        module,
        generated.entry,
        generated.arena_bytes,
        generated.n_results,
        generated.writeback,
        [(p.type.shape, p.type.dtype.np) for p in func.params],
        [(t.shape, t.dtype.np) for t in generated.result_types],
        out_types=[(t.shape, t.dtype.np) for t in generated.out_types],
        name=func.name,
        direct_writeback=generated.direct_writeback,
        arg_names=func.arg_names,
        donated=program.options.donate_argnums,
        launches=generated.launches,
        host_reads=generated.host_reads,
        blas=generated.blas,
    )


def build_cpu_executable(program: Compilation) -> tuple[Executable, CpuProgram, FusionPlan, MemoryPlan]:
    """generate_cpu -> load_module -> Executable, for a program planned for the CPU; also the
    generated module, and the fusion and memory plan its code follows."""
    fusion, _ = _planned(program)
    generated, plan = generate(program)
    assert isinstance(generated, CpuProgram)
    return _cpu_executable(program, generated), generated, fusion, plan


def build_cuda_executable(program: Compilation) -> tuple[Any, CudaProgram, FusionPlan, MemoryPlan]:
    """generate_cuda -> load_module -> ``CudaExecutable`` (needs a GPU or the simulator)."""
    fusion, plan = _planned(program)
    generated = cuda_program(program)
    return _cuda_executable(program, generated), generated, fusion, plan


def cuda_program(program: Compilation) -> CudaProgram:
    """The CUDA code of a program planned for CUDA, without building an executable (no GPU needed)."""
    fusion, plan = _planned(program)
    return generate_cuda(program.func, fusion, plan, program.kernels, program.options.sanitize, program.loops)


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
        dispatcher = getattr(module, kernel.name)
        bounds = dispatcher.targetoptions.get("launch_bounds")  # (``CudaKernel.min_blocks``)
        if library is None:  # type and lower once; NVVM then runs once per compute capability
            library = _LOWERED[key] = _lower_kernel(cuda, dispatcher.py_func, sig, bounds)
        if library is None:
            out[kernel.name], _ = cuda.compile_ptx(dispatcher.py_func, sig, cc=cc, launch_bounds=bounds)
        else:
            (out[kernel.name],) = library.get_asm_strs(cc=cc)
    return out


_LOWERED: dict[Any, Any] = {}  # kernel text and signature -> its Numba code library (LLVM IR)


def _lower_kernel(cuda: Any, py_func: Any, sig: tuple[Any, ...], bounds: Any = None) -> Any:
    """numba-cuda's code library of a kernel (what ``compile_ptx`` builds before NVVM) with its
    launch bounds, or ``None`` where this numba-cuda lacks the internal entry point (then
    ``compile_ptx`` runs per arch)."""
    try:
        from numba.cuda.compiler import _compile_pyfunc_with_fixup  # type: ignore[attr-defined]
    except ImportError:
        return None
    library, _ = _compile_pyfunc_with_fixup(
        py_func, sig, device=False, abi="numba", cc=(8, 0), launch_bounds=bounds
    )
    return library


__all__ = [
    "CpuProgram",
    "CudaProgram",
    "build_cpu_executable",
    "build_cuda_executable",
    "compile_ptx",
    "cuda_program",
    "generate",
    "generate_cpu",
    "generate_cuda",
    "load",
]
