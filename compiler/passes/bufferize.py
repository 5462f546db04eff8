"""The bufferized stage: the optimized IR annotated with the fusion and the memory plan.

Printed with memref types (the ``dsl.bufferized`` function attribute), each op carries:
``dsl.kernel`` (the kernel group that computes it), and for a value that gets a buffer either
``dsl.offset`` (its arena offset in bytes) or ``dsl.buffer = "result"`` (allocated fresh per call,
returned to the caller). Ops without a buffer were fused into their kernel's loop.
"""

from __future__ import annotations

from typing import Any

from compiler.ir.core import Block, Function, Op
from compiler.ir.printer import BUFFERIZED
from compiler.passes.fuse import FusionPlan
from compiler.passes.plan import MemoryPlan


def annotate(func: Function, fusion: FusionPlan, plan: MemoryPlan) -> Function:
    returned = set(func.results)
    ops = []
    for op in func.ops:
        attrs: dict[str, Any] = dict(op.attrs)
        group = fusion.group_of.get(op)
        if group is not None:
            attrs["dsl.kernel"] = group.index
        result = op.results[0] if op.results else None
        if result in plan.offsets:
            attrs["dsl.offset"] = plan.offsets[result]
        elif result in returned:
            attrs["dsl.buffer"] = "result"
        ops.append(Op(op.prim, op.operands, attrs, op.results, op.loc))
    fattrs = {**func.attrs, BUFFERIZED: True, "dsl.arena_bytes": plan.peak_bytes}
    return func.replace_body(Block(func.params, tuple(ops), func.results), attrs=fattrs)
