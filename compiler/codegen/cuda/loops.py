"""LOOP and REDUCE groups as CUDA kernels: a grid-stride loop over the flat iteration space; a
reduction as a serial loop per output, a block per output with a shared-memory tree, two passes
(chunks -> partials -> a tree per output) or, keeping the innermost axis, warps over consecutive
outputs (``column_reduce``). No atomics: every order is fixed."""

from __future__ import annotations

import math
from collections.abc import Callable

from compiler.codegen.cuda.kernel import (
    CudaKernel,
    KernelSpec,
    block_tree,
    index_lines,
    kernel,
    linear,
    numba_type,
    unflatten,
)
from compiler.kernel.emit import indent, literal, typed

BLOCK_REDUCE_MIN = 128  # reduced extents at least this big get a block (and a tree) per output
SPLIT_MIN = 1 << 16  # ... and at least this big, into fewer outputs than SPLIT_OUTPUTS, two passes
SPLIT_OUTPUTS = 64
SPLIT_CHUNK = 1 << 13  # elements per partial in a split reduction
COLUMN_CHUNK = 256  # reduced positions per partial in a reduction that keeps the innermost axis


def loop_kernel(spec: KernelSpec) -> CudaKernel | None:
    shape = spec.group.shape
    size = math.prod(shape)
    if size == 0:
        return None
    idx = [f"i{d}" for d in range(len(shape))]
    builder = spec.builder("g")
    stores = []
    for v in spec.group.outputs:
        stores.append(f"{spec.names[v]}[g] = {builder.value_at(v, tuple(idx))}")
    body = builder.lines + stores
    loop = [
        f"for g in range(cuda.grid(1), {size}, cuda.gridsize(1)):",
        *indent(index_lines(body, unflatten("g", idx, shape)) + body, 1),
    ]
    return spec.define(loop, spec.buffers, f"[_grid({size}), TPB, stream]")


def reduce_kernel(spec: KernelSpec) -> CudaKernel | None:
    root = spec.group.root
    out = root.result
    if out.type.size == 0:
        return None
    shape = spec.group.shape
    axes = {int(a) for a in root.attrs["axes"]}
    kept = [d for d in range(len(shape)) if d not in axes]
    red = [d for d in range(len(shape)) if d in axes]
    n_out = math.prod(shape[d] for d in kept)
    n_red = math.prod(shape[d] for d in red)
    trailing = red == list(range(len(kept), len(shape)))  # the flat position is o * n_red + r
    builder = spec.builder("g" if trailing else None)
    idx = tuple(f"i{d}" for d in range(len(shape)))
    target = builder.value_at(root.operands[0], idx)
    extra = [v for v in spec.group.outputs if v is not out]  # prologue values stored as well
    stores = [f"{spec.names[v]}[{linear(idx, shape)}] = {builder.value_at(v, idx)}" for v in extra]
    reducer = root.prim.reducer
    assert reducer is not None, f"{root.prim.name} has no reducer"
    dtype = out.type.dtype
    wide = reducer.accumulator(dtype)  # partial results, shared memory and scratch (f32 sums: f64)
    identity = literal(reducer.identity(dtype), wide)

    def combine(acc: str, x: str) -> str:
        return f"{acc} = {typed(reducer.combine(acc, x), wide)}"

    body = builder.lines + stores
    inner = body + [combine("acc", target if wide is dtype else typed(target, wide))]
    kept_ix = unflatten("o", [f"i{d}" for d in kept], [shape[d] for d in kept])
    red_ix = unflatten("r", [f"i{d}" for d in red], [shape[d] for d in red])
    flat = [("g", f"o * {n_red} + r" if n_out > 1 else "r")] if trailing else []

    def accumulate(r_range: str) -> list[str]:
        per_r = index_lines(inner, red_ix + flat) + inner
        return [f"acc = {identity}", f"for r in {r_range}:", *indent(per_r, 1)]

    o_index = index_lines(inner, kept_ix)
    o_name = spec.names[out]
    if n_red < BLOCK_REDUCE_MIN:  # one thread per output element, a serial loop
        lines = [
            f"for o in range(cuda.grid(1), {n_out}, cuda.gridsize(1)):",
            *indent([*o_index, *accumulate(f"range({n_red})"), f"{o_name}[o] = {typed('acc', dtype)}"], 1),
        ]
        return spec.define(lines, spec.buffers, f"[_grid({n_out}), TPB, stream]")
    tree = block_tree(wide, reducer.combine)
    result = typed("sm[0]", dtype)  # the tree's result as the output's dtype
    if kept and kept[-1] == len(shape) - 1 and shape[-1] >= 8:  # the innermost axis kept: side by side
        return column_reduce(spec, o_index, accumulate, combine, identity, n_out, n_red)
    if n_red < SPLIT_MIN or n_out >= SPLIT_OUTPUTS:  # a block per output element
        lines = [
            f"sm = cuda.shared.array(TPB, {numba_type(wide)})",
            "tid = cuda.threadIdx.x",
            f"for o in range(cuda.blockIdx.x, {n_out}, cuda.gridDim.x):",
            *indent(
                [
                    *o_index,
                    *accumulate(f"range(tid, {n_red}, cuda.blockDim.x)"),
                    *tree,
                    "if tid == 0:",
                    f"    {o_name}[o] = {result}",
                    "cuda.syncthreads()",
                ],
                1,
            ),
        ]
        return spec.define(lines, spec.buffers, f"[max(1, min({n_out}, MAXB)), TPB, stream]")
    # Two passes: fixed chunks of the reduced extent into partials, then each output in order.
    chunks = -(-n_red // SPLIT_CHUNK)
    part = f"{spec.kernel_name}_part"
    lines = [
        f"sm = cuda.shared.array(TPB, {numba_type(wide)})",
        "tid = cuda.threadIdx.x",
        f"for q in range(cuda.blockIdx.x, {n_out * chunks}, cuda.gridDim.x):",
        *indent(
            [
                f"o = q // {chunks}",
                f"c = q % {chunks}",
                *o_index,
                *accumulate(f"range(c * {SPLIT_CHUNK} + tid, min((c + 1) * {SPLIT_CHUNK}, {n_red}), TPB)"),
                *tree,
                "if tid == 0:",
                f"    {part}[q] = sm[0]",
                "cuda.syncthreads()",
            ],
            1,
        ),
    ]
    first = spec.define(
        lines,
        spec.group.inputs + extra,
        f"[max(1, min({n_out * chunks}, MAXB)), TPB, stream]",
        scratch=[(part, n_out * chunks, wide)],
        name=f"{spec.kernel_name}_1",
    )
    finish = [  # a block per output: threads take fixed chunks, then the tree (a fixed order)
        f"sm = cuda.shared.array(TPB, {numba_type(wide)})",
        "tid = cuda.threadIdx.x",
        f"for o in range(cuda.blockIdx.x, {n_out}, cuda.gridDim.x):",
        f"    acc = {identity}",
        f"    for c in range(tid, {chunks}, cuda.blockDim.x):",
        f"        x = {part}[o * {chunks} + c]",
        f"        {combine('acc', 'x')}",
        *indent([*tree, "if tid == 0:", f"    {o_name}[o] = {result}", "cuda.syncthreads()"], 1),
    ]
    part_types = [(wide, 1), (dtype, 1)]
    launch = f"[max(1, min({n_out}, MAXB)), TPB, stream]"
    second = kernel(f"{spec.kernel_name}_2", [part, o_name], part_types, finish, launch)
    first.follow.append(second)
    return first


def column_reduce(
    spec: KernelSpec,
    o_index: list[str],
    accumulate: Callable[[str], list[str]],
    combine: Callable[[str, str], str],
    identity: str,
    n_out: int,
    n_red: int,
) -> CudaKernel:
    """A reduction that keeps the innermost axis (a bias gradient: the sum over a batch's rows).
    A block of ``COLS x LANES`` threads takes ``COLS`` consecutive outputs and ``COLUMN_CHUNK``
    reduced positions: each warp reads whole consecutive row segments (a block per output would read
    one element per row, a sector each). Lane ``y`` of a column takes positions ``y, y + LANES...``
    of the chunk; the lanes are combined in order into a partial per (chunk, output), and a second
    kernel combines each output's partials in chunk order: a fixed order, deterministic."""
    out = spec.group.root.result
    dtype = out.type.dtype
    reducer = spec.group.root.prim.reducer
    assert reducer is not None, f"{spec.group.root.prim.name} has no reducer"
    wide = reducer.accumulator(dtype)  # of the partials, as in _reduce_kernel
    chunks = -(-n_red // COLUMN_CHUNK)
    tiles = f"(({n_out} + COLS - 1) // COLS)"
    part = f"{spec.kernel_name}_part"
    first_range = f"range(c * {COLUMN_CHUNK} + ty, min((c + 1) * {COLUMN_CHUNK}, {n_red}), LANES)"
    lines = [
        f"sm = cuda.shared.array(SLOTS, {numba_type(wide)})",
        "tx = cuda.threadIdx.x",
        "ty = cuda.threadIdx.y",
        f"for q in range(cuda.blockIdx.x, {tiles} * {chunks}, cuda.gridDim.x):",
        *indent(
            [
                f"c = q // {tiles}",
                f"o = (q % {tiles}) * COLS + tx",
                f"acc = {identity}",
                f"if o < {n_out}:",
                *indent([*o_index, *accumulate(first_range)], 1),
                "sm[ty * COLS + tx] = acc",
                "cuda.syncthreads()",
                f"if ty == 0 and o < {n_out}:",
                "    for y in range(1, LANES):",
                "        x = sm[y * COLS + tx]",
                f"        {combine('acc', 'x')}",
                f"    {part}[c * {n_out} + o] = acc",
                "cuda.syncthreads()",
            ],
            1,
        ),
    ]
    launch = f"[max(1, min({tiles} * {chunks}, MAXB)), (COLS, LANES), stream]"
    extra = [v for v in spec.group.outputs if v is not out]
    first = spec.define(
        lines,
        spec.group.inputs + extra,
        launch,
        scratch=[(part, n_out * chunks, wide)],
        name=f"{spec.kernel_name}_1",
    )
    o_name = spec.names[out]
    finish = [  # a thread per output: its partials in chunk order (consecutive outputs side by side)
        f"for o in range(cuda.grid(1), {n_out}, cuda.gridsize(1)):",
        f"    acc = {identity}",
        f"    for c in range({chunks}):",
        f"        x = {part}[c * {n_out} + o]",
        f"        {combine('acc', 'x')}",
        f"    {o_name}[o] = {typed('acc', dtype)}",
    ]
    launch = f"[_grid({n_out}), TPB, stream]"
    second = kernel(f"{spec.kernel_name}_2", [part, o_name], [(wide, 1), (dtype, 1)], finish, launch)
    first.follow.append(second)
    return first
