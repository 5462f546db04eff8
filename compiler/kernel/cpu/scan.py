"""The CPU kernel of a SCAN group (``compiler/prims/scan.py``): a loop nest over the lines (every axis
but the scanned one, outermost first; the first loop parallel when the array is large and has
several lines), and inside it one serial walk along the line in scan order, the running value in a
local (float32 sums in float64). The operand's element is computed where it is read, producers
inlined (``loops.body``, as a reduction's prologue), and prologue values the group also stores are
stored there. O(n) work; each element is read before the result's element at the same position is
written, so the result may be the operand's buffer (in place)."""

from __future__ import annotations

import math

from compiler.kernel.cpu.loops import KernelSpec, body, store
from compiler.kernel.cpu.records import Kernel
from compiler.kernel.ir import For, Line, Stmt, nest
from compiler.passes.rows import PARALLEL_MIN_ELEMENTS
from compiler.prims.scan import running


def scan_kernel(spec: KernelSpec) -> Kernel | None:
    root = spec.group.root
    out = root.result
    shape = out.type.shape
    if out.type.size == 0:
        return None
    axis = int(root.attrs["axis"])
    n = shape[axis]
    extra = [v for v in spec.group.outputs if v is not out]  # prologue values stored as well
    b = body(spec, shape, extra, root.operands[0], flat=False)
    assert b is not None and b.target is not None
    walk = f"{n - 1} - t" if root.attrs["reverse"] else "t"
    start, step, value = running(root, b.target)
    idx = tuple(f"i{d}" for d in range(len(shape)))
    line: list[Stmt] = [
        Line(start),
        For("t", n, [Line(f"i{axis} = {walk}"), *b.stmts, Line(step), store(spec.locate(out, idx), value)]),
    ]
    outer = [d for d in range(len(shape)) if d != axis]
    parallel = bool(outer) and shape[outer[0]] > 1 and math.prod(shape) >= PARALLEL_MIN_ELEMENTS
    return spec.define(nest([f"i{d}" for d in outer], [shape[d] for d in outer], line, parallel), parallel)
