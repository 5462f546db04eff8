"""The CUDA kernel of an in-place window update (``compiler/kernel/window.py``): a grid-stride loop
over the update's elements only, each stored at its place in the window of the result, whose
buffer is the base's (the memory plan placed them at the same bytes). Elementwise ops fused into
the update are computed for the window's elements, as the update reads them."""

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
    linear,
    store,
    unflatten,
)
from compiler.kernel.ir import Expr, uses_of
from compiler.kernel.window import window_index


def window_kernel(spec: KernelSpec) -> CudaKernel | None:
    root = spec.group.root
    update = root.operands[1]
    shape = update.type.shape
    size = math.prod(shape)
    if size == 0:  # nothing replaced: the buffer already holds the result
        return None
    at = tuple(f"j{d}" for d in range(len(shape)))
    builder = spec.builder(None)
    corner = window_index(root, at, builder.value_at)
    value = builder.value_at(update, at)
    out = root.result
    dest = Access(spec.names[out], (linear([Expr(f"({e})", uses_of(e)) for e in corner], out.type.shape),))
    body = [*body_stmts(builder), store(dest, value)]
    loop = grid_loop("g", size, [*index_stmts(body, unflatten("g", at, shape)), *body])
    return spec.define([loop], spec.buffers, Launch(f"_grid({size})", "TPB"), "window", [builder])
