"""Code generation: IR -> Numba source -> an ``Executable`` (``runtime.executable``)."""

from __future__ import annotations

from compiler.codegen.cpu import CpuProgram, generate_cpu
from compiler.ir.core import Function
from compiler.passes.fuse import FusionPlan, fuse
from compiler.passes.plan import MemoryPlan, check_no_overlap, plan_buffers
from runtime.executable import Executable
from runtime.module_cache import load_module


def build_cpu_executable(
    func: Function, inplace: bool = True, donate_argnums: tuple[int, ...] = (), sanitize: bool = False
) -> tuple[Executable, CpuProgram, FusionPlan, MemoryPlan]:
    """fuse -> plan -> generate_cpu -> load_module -> Executable, for optimized IR.

    ``sanitize``: check the plan for overlapping live buffers and poison each buffer when it dies.
    """
    fusion = fuse(func)
    plan = plan_buffers(func, fusion, inplace, donate_argnums)
    if sanitize:
        check_no_overlap(plan)
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
    )
    return executable, program, fusion, plan


__all__ = ["CpuProgram", "build_cpu_executable", "generate_cpu"]
