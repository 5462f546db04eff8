"""The CUDA kernel of a SCAN group (``compiler/prims/scan.py``): a thread per line along the scanned
axis (a grid-stride loop over the lines), each walking its line serially in scan order with the
running value in a register (float32 sums in float64), as the CPU kernel does: the same order, so
the same bits on both backends, and O(n) work. The operand's element is computed where it is read,
producers inlined (as a reduction's prologue). Neighbouring threads take neighbouring lines, so a
scan over a leading axis reads coalesced; one over the last axis does not (a block-wide scan per
line would, for long lines with few of them)."""

from __future__ import annotations

import math

from compiler.kernel.cuda.loops import grid_loop
from compiler.kernel.cuda.records import (
    Access,
    CudaKernel,
    KernelSpec,
    Launch,
    body_stmts,
    index_stmts,
    store,
    unflatten,
)
from compiler.kernel.ir import For, Line, Stmt
from compiler.prims.scan import running


def scan_kernel(spec: KernelSpec) -> CudaKernel | None:
    root = spec.group.root
    out = root.result
    shape = out.type.shape
    size = out.type.size
    if size == 0:
        return None
    axis = int(root.attrs["axis"])
    n = shape[axis]
    trail = math.prod(shape[axis + 1 :])
    count = size // n
    idx = tuple(f"i{d}" for d in range(len(shape)))
    builder = spec.builder("p")  # reads at the element being written use its flat position
    target = builder.value_at(root.operands[0], idx)
    extra = [v for v in spec.group.outputs if v is not out]  # prologue values stored as well
    stores = [store(Access(spec.names[v], ("p",)), builder.value_at(v, idx)) for v in extra]
    start, step, value = running(root, target)
    walk = f"({n - 1} - t)" if root.attrs["reverse"] else "t"
    per_element: list[Stmt] = [
        *body_stmts(builder),
        *stores,
        Line(step),
        store(Access(spec.names[out], ("p",)), value),
    ]
    # the line g's other indices, then the element's axis index and flat position
    others = [f"i{d}" for d in range(len(shape)) if d != axis]
    lines_shape = [shape[d] for d in range(len(shape)) if d != axis]
    base = f"(g // {trail}) * {n * trail} + g % {trail}" if trail != 1 else f"g * {n}"
    position = f"base + {walk} * {trail}" if trail != 1 else f"base + {walk}"
    inner: list[Stmt] = [Line(f"i{axis} = {walk}"), Line(f"p = {position}"), *per_element]
    line: list[Stmt] = [Line(f"base = {base}"), Line(start), For("t", n, inner)]
    loop = grid_loop("g", count, [*index_stmts(line, unflatten("g", others, lines_shape)), *line])
    return spec.define([loop], spec.buffers, Launch(f"_grid({count})", "TPB"), "scan", [builder])
