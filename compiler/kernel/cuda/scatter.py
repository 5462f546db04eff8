"""The CUDA kernels of a SCATTER group (``compiler/prims/gather.py``): the base copied into the
result (a grid-stride loop; a copy onto itself when the result took the dying base's buffer), then a
follow kernel whose threads each *own* some elements of the result and go through the updates in
their order, combining each one that lands on an owned element into it. No atomics, no sort: every
element sees its updates in the order of the CPU's serial loop, so repeated indices give the same
bits on both backends and on every run (deterministic scatter-add).

Who owns what: a *line* of the result is one position of the axes before and after the indexed one
(an embedding gradient (V, D) has D lines of V elements); its ``n`` elements along the indexed axis
are cut into ``blocks`` blocks of ``rows`` consecutive elements, and a thread owns one block of one
line. The serial form (``blocks`` 1: a thread per line walking every update, the first form) uses
``lines`` threads: too few to fill a GPU for the common embedding-gradient shape (many updates,
a few hundred lines). The blocked form uses ``lines * blocks`` threads, about ``THREADS``: each
still reads every index (the same one at the same step across the grid: a broadcast load) but only
combines the updates landing in its block, so the updates are applied ``blocks`` ways in parallel
and the walk's cost per step is a compare. ``blocks`` grows while ``lines * blocks`` stays within
``THREADS`` (a GPU's worth of resident threads), up to one element per thread; a result with as
many lines as that keeps the serial form. The work is the copy plus (threads) x (index entries)
compares plus one combine per update (in a register when a thread owns one element).
"""

from __future__ import annotations

import math

from compiler.kernel.cuda.loops import grid_loop
from compiler.kernel.cuda.records import CudaKernel, KernelSpec, Launch, kernel
from compiler.kernel.emit import typed
from compiler.kernel.ir import Access, For, If, Line, Stmt
from compiler.prims.gather import clamped

THREADS = 1 << 16
"""Threads the blocked form aims at: enough resident warps to hide the walk's load latency on any
current GPU (an H100 holds 270,336 threads; a T4 40,960)."""


def blocking(lines: int, n: int) -> tuple[int, int]:
    """(blocks, rows): each of ``lines`` lines of ``n`` elements cut into ``blocks`` blocks of ``rows``
    elements (the last one shorter), ``lines * blocks`` about ``THREADS`` at most."""
    blocks = max(1, min(n, THREADS // max(lines, 1)))
    rows = -(-n // blocks)
    return -(-n // rows), rows


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
    blocks, rows = blocking(lines, n)
    dest = Access(names[out], (f"(p * {n} + j) * {post} + q",))
    update = Access(names[v], (f"(p * {count} + u) * {post} + q",))
    old, new = (f"{a.array}[{a.index[0]}]" for a in (dest, update))
    combine: Stmt = Line(
        f"{old} = {typed(reducer.combine(old, new), out.type.dtype)}", (dest, update), (dest,)
    )
    per_update: list[Stmt] = [
        Line(f"j = {names[idx]}[u]", (Access(names[idx], ("u",)),)),
        Line(f"j = {clamped('j', n)}"),
    ]
    if blocks == 1:  # a thread per line, every update its own
        body: list[Stmt] = [
            Line(f"p = l // {post}"),
            Line(f"q = l % {post}"),
            For("u", count, [*per_update, combine]),
        ]
    else:  # thread t: line t % lines, the rows [lo, lo + rows) of it (consecutive threads: consecutive q)
        where = [
            Line(f"lo = (l // {lines}) * {rows}"),
            Line(f"p = (l % {lines}) // {post}"),
            Line(f"q = l % {post}"),
        ]
        if rows == 1:  # one element: combined in a register, stored once
            mine = Access(names[out], (f"(p * {n} + lo) * {post} + q",))
            acc = Line(f"acc = {typed(reducer.combine('acc', new), out.type.dtype)}", (update,))
            body = [
                *where,
                Line(f"acc = {mine.array}[{mine.index[0]}]", (mine,)),
                For("u", count, [*per_update, If("j == lo", [acc])]),
                Line(f"{mine.array}[{mine.index[0]}] = acc", (), (mine,)),
            ]
        else:
            body = [*where, For("u", count, [*per_update, If(f"lo <= j and j < lo + {rows}", [combine])])]
    args = [names[out], names[v], names[idx]]
    types = [(out.type.dtype, 1), (v.type.dtype, 1), (idx.type.dtype, 1)]
    threads = lines * blocks
    launch = Launch(f"_grid({threads})", "TPB")
    first.follow.append(
        kernel(f"{spec.kernel_name}_2", args, types, [grid_loop("l", threads, body)], launch, "scatter")
    )
    return first
