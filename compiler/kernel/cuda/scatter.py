"""The CUDA kernel of a SCATTER group (``compiler/prims/gather.py``): a thread per element of the
result (a grid-stride loop), which starts from the base's element and goes through the updates in
row-major order, combining those whose clamped index lands on it. No atomics: every element sees
its updates in the order of the CPU's serial loop, so repeated indices give the same bits on both
backends. The cost is (result elements) x (index entries) index comparisons: fine for the small
index arrays of embeddings and labels; a sorted, segmented form would pay for large ones."""

from __future__ import annotations

import math

from compiler.kernel.cuda.loops import grid_loop
from compiler.kernel.cuda.records import CudaKernel, KernelSpec, Launch, index_stmts, linear, store, unflatten
from compiler.kernel.emit import typed
from compiler.kernel.ir import Access, For, If, Line, Stmt
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
    shape = out.type.shape
    dtype = out.type.dtype
    n, count = shape[axis], idx.type.size
    names = spec.names
    i = [f"i{d}" for d in range(len(shape))]
    lead = linear(i[:axis], shape[:axis]) if axis else "0"
    trail_shape = shape[axis + 1 :]
    trail = linear(i[axis + 1 :], trail_shape) if trail_shape else "0"
    position = f"({lead} * {count} + u) * {math.prod(trail_shape)} + {trail}"
    update = Access(names[v], (position,))
    per_update: list[Stmt] = [
        Line(f"j = {names[idx]}[u]", (Access(names[idx], ("u",)),)),
        Line(f"j = {clamped('j', n)}"),
        If(
            f"j == {i[axis]}",
            [
                Line(
                    f"acc = {typed(reducer.combine('acc', update.array + f'[{position}]'), dtype)}", (update,)
                )
            ],
        ),
    ]
    body: list[Stmt] = [Line(f"acc = {names[x]}[g]", (Access(names[x], ("g",)),))]
    if count:
        body.append(For("u", count, per_update))
    body.append(store(Access(names[out], ("g",)), "acc"))
    loop = grid_loop("g", size, [*index_stmts(body, unflatten("g", i, shape)), *body], flat=True)
    return spec.define([loop], spec.buffers, Launch(f"_grid({size})", "TPB"), "scatter", [])
