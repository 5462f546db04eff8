"""The CPU kernel of a SCAN group (``compiler/prims/scan.py``): a loop nest over the lines (every axis
but the scanned one, outermost first; the first loop parallel when the array is large and has
several lines), and inside it one serial walk along the line in scan order, the running value in a
local (float32 sums in float64). O(n) work; each element is read before the result's element at
the same position is written, so the result may be the operand's buffer (in place)."""

from __future__ import annotations

import math

from compiler.kernel.cpu.loops import KernelSpec, store
from compiler.kernel.cpu.records import Kernel
from compiler.kernel.emit import subscript
from compiler.kernel.ir import Access, For, Line, Stmt, nest
from compiler.passes.rows import PARALLEL_MIN_ELEMENTS
from compiler.prims.scan import running


def scan_kernel(spec: KernelSpec) -> Kernel | None:
    root = spec.group.root
    (x,) = root.operands
    out = root.result
    shape = out.type.shape
    if out.type.size == 0:
        return None
    axis = int(root.attrs["axis"])
    n = shape[axis]
    px, po = spec.param(x), spec.param(out)
    idx = tuple("j" if d == axis else f"i{d}" for d in range(len(shape)))
    walk = f"({n - 1} - t)" if root.attrs["reverse"] else "t"
    start, step, value = running(root, subscript(px, idx))
    line: list[Stmt] = [
        Line(start),
        For(
            "t",
            n,
            [
                Line(f"j = {walk}"),
                Line(step, (Access(px, idx),)),
                store(Access(po, idx), value),
            ],
        ),
    ]
    outer = [d for d in range(len(shape)) if d != axis]
    parallel = bool(outer) and shape[outer[0]] > 1 and math.prod(shape) >= PARALLEL_MIN_ELEMENTS
    body = nest([f"i{d}" for d in outer], [shape[d] for d in outer], line, parallel)
    return spec.define(body, parallel)
