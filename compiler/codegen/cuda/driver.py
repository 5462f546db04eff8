"""The host driver of a CUDA program: ``bind(arena, stream)`` carves the arena views, copies the
constants and configures every launch once, and returns ``run(outs..., params...)``, which launches the
kernels in order."""

from __future__ import annotations

from compiler.codegen.common import allocations, poison_after, poison_value, returned
from compiler.codegen.cuda.printer import launch_text
from compiler.ir.core import Function, Value
from compiler.ir.types import DType
from compiler.kernel.cuda.build import CudaKernels
from compiler.kernel.emit import indent, literal, np_type
from compiler.passes.fuse import FusionPlan
from compiler.passes.plan import MemoryPlan

ENTRY = "bind"


def _flat_view(base: str, offset: int, nbytes: int, dtype: DType) -> str:
    return f"{base}[{offset}:{offset + nbytes}].view({np_type(dtype)})"


def driver(
    func: Function,
    fusion: FusionPlan,
    plan: MemoryPlan,
    program: CudaKernels,
    outs: list[Value],
    sanitize: bool,
) -> str:
    """``bind(arena, stream)``: arena views (the kernels' scratch among them), device constants and
    launchers, once; returns ``run(outs..., params...)`` launching every kernel in order."""
    names, pool, kernels = program.names, program.pool, program.kernels
    arg_names = [names[p] for p in func.params]
    setup: list[str] = []
    body: list[str] = []
    for name in pool.arrays:
        setup.append(f"{name}_d = cuda.to_device({name}, stream=stream)")
    poison = poison_after(fusion, plan) if sanitize else {}
    launchers = 0
    allocated = allocations(func, fusion, plan, outs)
    for group in fusion.groups:
        for p in allocated.get(group, []):
            name, t = names[p.value], p.value.type
            if p.kind == "argument":
                body.append(f"{name} = {arg_names[p.param]}")
            elif p.kind == "donated":
                src = f"{arg_names[p.param]}.view(np.uint8)"
                body.append(f"{name} = {_flat_view(src, 0, t.nbytes, t.dtype)}")
            elif p.kind == "arena":  # (views made once, in bind)
                setup.append(f"{name} = {_flat_view('arena', p.offset, t.nbytes, t.dtype)}")
            else:  # a function result (fresh per call) or a zero-size value
                body.append(f"{name} = cuda.device_array({t.size}, {np_type(t.dtype)}, stream=stream)")
        top = kernels.get(group)
        for kernel in (top, *top.follow) if top is not None else ():
            for s in kernel.scratch:
                assert s.offset >= 0, f"{s.name}: scratch not placed (the scratch pass)"
                setup.append(f"{s.name} = {_flat_view('arena', s.offset, s.nbytes, s.dtype)}")
            launcher = f"L{launchers}"
            launchers += 1
            configured = f"_fast_launch({kernel.name}{launch_text(kernel)})"  # runtime/cuda_launch.py
            if kernel.wrapper:
                configured = f"{kernel.wrapper}({configured}, stream)"
            setup.append(f"{launcher} = {configured}")
            args = [a + "_d" if a in pool.arrays else a for a in kernel.args]
            body.append(f"{launcher}({', '.join(args)})")
        for row in poison.get(group, []):
            dtype = row.value.type.dtype
            view = _flat_view("arena", row.offset, row.bytes, dtype)
            value = literal(poison_value(dtype), dtype)
            body.append(f"_fill[_grid({row.bytes // dtype.itemsize}), TPB, stream]({view}, {value})")
    results = [f"_dup({names[v]}, stream)" if copy else names[v] for v, copy in returned(func)]
    ret = "(" + ", ".join(results) + ("," if len(results) == 1 else "") + ")"
    params = [*(names[v] for v in outs), *arg_names]
    run = [f"def run({', '.join(params)}):", *indent([*body, f"return {ret}"], 1)]
    lines = [f"def {ENTRY}(arena, stream):", *indent([*setup, "", *run, "", "return run"], 1)]
    return "\n".join(lines)
