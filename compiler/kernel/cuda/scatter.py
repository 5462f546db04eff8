"""The CUDA kernels of a SCATTER group (``compiler/prims/gather.py``): the base copied into the
result (a grid-stride loop; a copy onto itself when the result took the dying base's buffer), then a
follow kernel with a thread per *line* of the result (one position of the axes before and after
the indexed one), which goes through the updates in order and combines each one landing on its line
into it. No atomics: every element sees its updates in the order of the CPU's serial loop, so
repeated indices give the same bits on both backends. The work is the copy plus (lines) x (index
entries): an embedding's gradient (V, D) from N tokens is D threads of N steps; a scatter into a
flat array (``take_along_axis``'s gradient) is one thread of N steps after the parallel copy."""

from __future__ import annotations

import math

from compiler.kernel.cuda.loops import grid_loop
from compiler.kernel.cuda.records import CudaKernel, KernelSpec, Launch, kernel
from compiler.kernel.emit import typed
from compiler.kernel.ir import Access, For, Line, Stmt
from compiler.prims.gather import clamped


def scatter_kernel(spec: KernelSpec) -> CudaKernel | None:
    root = spec.group.root
    x, v, idx = root.operands
    out = root.result
    size = out.type.size
    if size == 0:
        return None
    axis = int(root.attrs["axis"])
    reducer = root.prim.reducer
    assert reducer is not None, f"{root.prim.name} has no combine"
    names = spec.names
    element = Access(names[x], ("g",))
    copy: list[Stmt] = [Line(f"{names[out]}[g] = {names[x]}[g]", (element,), (Access(names[out], ("g",)),))]
    first = spec.define(
        [grid_loop("g", size, copy, flat=True)], [x, out], Launch(f"_grid({size})", "TPB"), "loop", []
    )
    count = idx.type.size
    if count == 0:
        return first
    shape = out.type.shape
    n, post = shape[axis], math.prod(shape[axis + 1 :])
    lines = math.prod(shape[:axis]) * post
    dest = Access(names[out], (f"(p * {n} + j) * {post} + q",))
    update = Access(names[v], (f"(p * {count} + u) * {post} + q",))
    old, new = (f"{a.array}[{a.index[0]}]" for a in (dest, update))
    per_update: list[Stmt] = [
        Line(f"j = {names[idx]}[u]", (Access(names[idx], ("u",)),)),
        Line(f"j = {clamped('j', n)}"),
        Line(f"{old} = {typed(reducer.combine(old, new), out.type.dtype)}", (dest, update), (dest,)),
    ]
    body: list[Stmt] = [Line(f"p = l // {post}"), Line(f"q = l % {post}"), For("u", count, per_update)]
    args = [names[out], names[v], names[idx]]
    types = [(out.type.dtype, 1), (v.type.dtype, 1), (idx.type.dtype, 1)]
    launch = Launch(f"_grid({lines})", "TPB")
    first.follow.append(
        kernel(f"{spec.kernel_name}_2", args, types, [grid_loop("l", lines, body)], launch, "scatter")
    )
    return first
