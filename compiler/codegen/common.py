"""What both backends' code generators share: names of buffers in generated code, shape literals,
the sanitizer's poison, and which results the caller allocates (the driver skeleton's facts)."""

from __future__ import annotations

import math

import numpy as np

from compiler.ir.core import Function, Value
from compiler.ir.types import DType
from compiler.kernel.emit import py_name, shape_literal
from compiler.passes.fuse import FusionPlan, Group
from compiler.passes.plan import BufferRow, MemoryPlan

__all__ = ["caller_allocated", "poison_after", "poison_value", "py_name", "shape_literal"]


def poison_value(dtype: DType) -> float | int | bool:
    """What the sanitizer writes into a dead buffer: NaN, or a value no test program produces."""
    if dtype.is_float:
        return math.nan
    return True if dtype.is_bool else int(np.iinfo(dtype.np).min) + 7


def poison_after(fusion: FusionPlan, plan: MemoryPlan) -> dict[Group, list[BufferRow]]:
    """Sanitizer: the arena buffers to poison after each group, i.e. those whose value dies there
    and whose block is not handed on in place to a value of that group."""
    handed_on = {r.reused_from for r in plan.buffers if r.reused_from}
    by_pos = {g.root_pos: g for g in fusion.groups}
    out: dict[Group, list[BufferRow]] = {}
    for row in plan.buffers:
        if row.param is None and row.name not in handed_on and row.live[1] in by_pos:
            out.setdefault(by_pos[row.live[1]], []).append(row)
    return out


def caller_allocated(func: Function, plan: MemoryPlan) -> list[Value]:
    """Results the runtime allocates with NumPy before the call and passes to the driver.

    NumPy's allocator asks the kernel for huge pages on large arrays, so first-touch page faults
    of a fresh 40 MB result cost a fraction of what Numba's ``np.empty`` inside the driver costs.
    Params and repeated results are excluded: the driver copies those (results never alias).
    """
    seen = set(func.params)
    outs = []
    for v in func.results:
        if v not in seen and v not in plan.offsets and v not in plan.direct_writeback:
            outs.append(v)
        seen.add(v)
    return outs
