"""The CUDA kernels of a SCATTER group (``compiler/prims/gather.py``): the base copied into the
result (a grid-stride loop; none when the plan stores the result over the dying base, in place:
``KernelSpec.same_memory``), then
the updates combined into it in the order of the CPU's serial loop, so repeated indices give the
same bits on both backends and on every run (deterministic scatter-add, no float atomics). Three
forms, two of them chosen by sizes (``sorts``):

The *walk* (small scatters: one follow kernel, no scratch): threads each *own* some elements of
the result and go through all the updates in order, combining each one that lands on an owned
element. A *line* of the result is one position of the axes before and after the indexed one (an
embedding gradient (V, D) has D lines of V elements); its ``n`` elements along the indexed axis are
cut into ``blocks`` blocks of ``rows`` consecutive elements, and a thread owns one block of one
line. The serial form (``blocks`` 1: a thread per line walking every update) uses ``lines``
threads: too few to fill a GPU for the common embedding-gradient shape. The blocked form uses
``lines * blocks`` threads, about ``THREADS``: each still reads every index (the same one at the
same step across the grid: a broadcast load) but only combines the updates landing in its block.
Its work is the copy plus (threads) x (index entries) compares plus one combine per update element.

The *direct* form (an index naming each element at most once, ``gather.UNIQUE``: a label per row's
gradient): a thread per update element combines it into its element.

The *sorted* form (large scatters): the update positions sorted stably by the row they land on
(``sort.py``: a radix sort by blocks of threads, no atomics), each row's *segment* of the sorted
positions marked (its first and one-past-last entry: ``bounds``, zeroed with the copy, so a row
without updates has an empty one), then a thread per result element combining its segment's updates
in the sorted order, which within a row is the original order: the CPU's bits. Its work is
O(updates + result): the sort (a few passes over the index), the marks, and one combine per update
element plus two bound reads per result element. A row with many updates is still walked by one thread per
element (the serial order is the contract), as in the walk.
"""

from __future__ import annotations

import math

from compiler.ir.core import Value
from compiler.kernel.cuda.loops import grid_loop
from compiler.kernel.cuda.records import CudaKernel, KernelSpec, Launch, Scratch, kernel
from compiler.kernel.cuda.sort import RadixSort, row_of, sort_by_row
from compiler.kernel.emit import typed
from compiler.kernel.ir import Access, For, If, Line, Stmt
from compiler.prims.base import Reducer
from compiler.prims.gather import UNIQUE

THREADS = 1 << 16
"""Threads the walk's blocked form aims at: enough resident warps to hide the walk's load latency on
any current GPU (an H100 holds 270,336 threads; a T4 40,960)."""
SORT_STEP = 8
"""What one step of the sorted form (a dependent load, a counter's read-modify-write) costs in the
choice, in the walk's compares (a broadcast load and a compare each)."""
LAUNCH_WORK = 1 << 22
"""What one kernel launch costs in the choice, in the walk's compares (a few microseconds of a GPU)."""


def blocking(lines: int, n: int) -> tuple[int, int]:
    """(blocks, rows): each of ``lines`` lines of ``n`` elements cut into ``blocks`` blocks of ``rows``
    elements (the last one shorter), ``lines * blocks`` about ``THREADS`` at most."""
    blocks = max(1, min(n, THREADS // max(lines, 1)))
    rows = -(-n // blocks)
    return -(-n // rows), rows


def walk_work(lines: int, n: int, count: int) -> int:
    """The walk's compares: each of its threads reads every index."""
    return lines * blocking(lines, n)[0] * count


def sorted_work(lines: int, n: int, count: int) -> int:
    """The sorted form's work beyond the combines both forms do, in walk compares: the sort, the
    marks, zeroing the bounds and reading them per result element, and its launches."""
    sort = RadixSort(count, n)
    steps = sort.work + count + 2 * n + 2 * lines * n
    return SORT_STEP * steps + LAUNCH_WORK * (sort.launches + 2)


def sorts(lines: int, n: int, count: int) -> bool:
    """Whether a scatter of ``count`` index entries into ``lines`` lines of ``n`` takes the sorted
    form (less work than the walk's; an embedding gradient of 20,000 tokens does)."""
    return walk_work(lines, n, count) > sorted_work(lines, n, count)


def scatter_kernel(spec: KernelSpec) -> CudaKernel | None:
    root = spec.group.root
    x, v, idx = root.operands
    out = root.result
    size = out.type.size
    if size == 0:
        return None
    axis = int(root.attrs["axis"])
    names = spec.names
    element = Access(names[x], ("g",))
    copy = grid_loop(
        "g",
        size,
        [Line(f"{names[out]}[g] = {names[x]}[g]", (element,), (Access(names[out], ("g",)),))],
        flat=True,
    )
    launch = Launch(f"_grid({size})", "TPB")
    in_place = spec.same_memory(x, out)
    count = idx.type.size
    if count == 0:
        return None if in_place else spec.define([copy], [x, out], launch, "loop", [])
    shape = out.type.shape
    n, post = shape[axis], math.prod(shape[axis + 1 :])
    lines = math.prod(shape[:axis]) * post
    if sorts(lines, n, count) and not root.attrs.get(UNIQUE):
        return _sorted(spec, [] if in_place else [copy], launch, n, post, count)
    # no two updates land on one element: each combined by its own thread; else the walk
    combine = (_direct if root.attrs.get(UNIQUE) else _walk)(spec, n, post, lines, count)
    if in_place:
        return combine
    first = spec.define([copy], [x, out], launch, "loop", [])
    first.follow.append(combine)
    return first


def _combine(
    reducer: Reducer,
    acc: str,
    new: str,
    out: Value,
    reads: tuple[Access, ...],
    writes: tuple[Access, ...] = (),
) -> Line:
    """``acc = combine(acc, new)`` in the result's dtype."""
    return Line(f"{acc} = {typed(reducer.combine(acc, new), out.type.dtype)}", reads, writes)


def _walk(spec: KernelSpec, n: int, post: int, lines: int, count: int) -> CudaKernel:
    """Threads owning blocks of rows of a line, each reading every index in order."""
    root = spec.group.root
    _, v, idx = root.operands
    out, names = root.result, spec.names
    reducer = root.prim.reducer
    assert reducer is not None, f"{root.prim.name} has no combine"
    blocks, rows = blocking(lines, n)
    dest = Access(names[out], (f"(p * {n} + j) * {post} + q",))
    update = Access(names[v], (f"(p * {count} + u) * {post} + q",))
    old, new = (f"{a.array}[{a.index[0]}]" for a in (dest, update))
    combine = _combine(reducer, old, new, out, (dest, update), (dest,))
    per_update = row_of(names[idx], "u", n)
    if blocks == 1:  # a thread per line, every update its own
        body: list[Stmt] = [
            Line(f"p = l // {post}"),
            Line(f"q = l % {post}"),
            For("u", count, [*per_update, If(f"j < {n}", [combine])]),  # (j == n: dropped)
        ]
    else:  # thread t: line t % lines, the rows [lo, lo + rows) of it (consecutive threads: consecutive q)
        where = [
            Line(f"lo = (l // {lines}) * {rows}"),
            Line(f"p = (l % {lines}) // {post}"),
            Line(f"q = l % {post}"),
        ]
        if rows == 1:  # one element: combined in a register, stored once
            mine = Access(names[out], (f"(p * {n} + lo) * {post} + q",))
            acc = _combine(reducer, "acc", new, out, (update,))
            body = [
                *where,
                Line(f"acc = {mine.array}[{mine.index[0]}]", (mine,)),
                For("u", count, [*per_update, If("j == lo", [acc])]),
                Line(f"{mine.array}[{mine.index[0]}] = acc", (), (mine,)),
            ]
        else:
            inside = f"lo <= j and j < lo + {rows} and j < {n}"  # (the last block may end past n)
            body = [*where, For("u", count, [*per_update, If(inside, [combine])])]
    args = [names[out], names[v], names[idx]]
    types = [(out.type.dtype, 1), (v.type.dtype, 1), (idx.type.dtype, 1)]
    threads = lines * blocks
    launch = Launch(f"_grid({threads})", "TPB")
    return kernel(f"{spec.kernel_name}_2", args, types, [grid_loop("l", threads, body)], launch, "scatter")


def _direct(spec: KernelSpec, n: int, post: int, lines: int, count: int) -> CudaKernel:
    """A scatter whose index entries name distinct elements (``gather.UNIQUE``): a thread per update
    element combines it into its element, which no other update touches (the same bits as the
    serial loop, without the walk's reads of every index or the sorted form's sort)."""
    root = spec.group.root
    _, v, idx = root.operands
    out, names = root.result, spec.names
    reducer = root.prim.reducer
    assert reducer is not None, f"{root.prim.name} has no combine"
    dest = Access(names[out], (f"(p * {n} + j) * {post} + q",))
    update = Access(names[v], (f"(p * {count} + u) * {post} + q",))
    old, new = (f"{a.array}[{a.index[0]}]" for a in (dest, update))
    body: list[Stmt] = [
        Line(f"q = t % {post}"),
        Line(f"u = (t // {post}) % {count}"),
        Line(f"p = t // ({post} * {count})"),
        *row_of(names[idx], "u", n),
        If(f"j < {n}", [_combine(reducer, old, new, out, (dest, update), (dest,))]),
    ]
    threads = (lines // post) * count * post
    args = [names[out], names[v], names[idx]]
    types = [(out.type.dtype, 1), (v.type.dtype, 1), (idx.type.dtype, 1)]
    launch = Launch(f"_grid({threads})", "TPB")
    return kernel(f"{spec.kernel_name}_2", args, types, [grid_loop("t", threads, body)], launch, "scatter")


def _sorted(spec: KernelSpec, copy: list[For], launch: Launch, n: int, post: int, count: int) -> CudaKernel:
    """The copy (if any) and the bounds zeroed, the sort of the update positions by row, the marks of each
    row's segment, then a thread per result element combining its segment in order."""
    x, _, idx = spec.group.root.operands
    out = spec.group.root.result
    sort = RadixSort(count, n)
    bounds = Scratch(f"{spec.kernel_name}_bounds", 2 * n, sort.dtype)  # row r: [bounds[r], bounds[n + r])
    zero = grid_loop("r", 2 * n, [Line(f"{bounds.name}[r] = 0", (), (Access(bounds.name, ("r",)),))])
    if not copy:  # in place: the launch zeroes the bounds only
        launch = Launch(f"_grid({2 * n})", "TPB")
    first = spec.define([*copy, zero], [x, out] if copy else [], launch, "loop", [], scratch=[bounds])
    kernels, perm = sort_by_row(spec.kernel_name, sort, spec.names[idx], idx.type.dtype)
    first.follow += [*kernels, _marks(spec, sort, perm, bounds), _segments(spec, post, perm, bounds, launch)]
    return first


def _marks(spec: KernelSpec, sort: RadixSort, perm: Scratch, bounds: Scratch) -> CudaKernel:
    """A thread per sorted entry ``s``: the first of its row's segment if the entry before lands on
    another row (its ``bounds[r]``), the last if the entry after does (``bounds[n + r]``). Each bound
    has one writer."""
    idx = spec.group.root.operands[2]
    i, p, b, n, count = spec.names[idx], perm.name, bounds.name, sort.n, sort.count

    def row_at(s: str, var: str) -> list[Stmt]:
        return [Line(f"pos = {p}[{s}]", (Access(p, (s,)),)), *row_of(i, "pos", n), Line(f"{var} = j")]

    marks = [
        *row_at("s", "r"),
        Line("prev = -1"),
        If("s > 0", row_at("s - 1", "prev")),
        If(f"prev != r and r < {n}", [Line(f"{b}[r] = s", (), (Access(b, ("r",)),))]),
        Line(f"after = {n}"),
        If(f"s < {count - 1}", row_at("s + 1", "after")),
        If(f"after != r and r < {n}", [Line(f"{b}[{n} + r] = s + 1", (), (Access(b, (f"{n} + r",)),))]),
    ]
    int_arg = (sort.dtype, 1)
    return kernel(
        f"{spec.kernel_name}_marks",
        [i, p, b],
        [(idx.type.dtype, 1), int_arg, int_arg],
        [grid_loop("s", count, marks)],
        Launch(f"_grid({count})", "TPB"),
        "scatter",
    )


def _segments(spec: KernelSpec, post: int, perm: Scratch, bounds: Scratch, launch: Launch) -> CudaKernel:
    """A thread per result element (consecutive threads: consecutive positions after the axis, so
    the updates' rows are read coalesced): its row's segment of sorted positions combined into it
    in order, in a register; an element no update lands on is left as copied."""
    root = spec.group.root
    _, v, idx = root.operands
    out = root.result
    reducer = root.prim.reducer
    assert reducer is not None, f"{root.prim.name} has no combine"
    o, p, b = spec.names[out], perm.name, bounds.name
    n, count = out.type.shape[int(root.attrs["axis"])], idx.type.size
    update = Access(spec.names[v], (f"(g // {n * post} * {count} + u) * {post} + g % {post}",))
    segment: list[Stmt] = [
        Line(f"u = {p}[s]", (Access(p, ("s",)),)),
        _combine(reducer, "acc", f"{update.array}[{update.index[0]}]", out, (update,)),
    ]
    mine = Access(o, ("g",))
    per_element: list[Stmt] = [
        Line(f"r = g // {post} % {n}"),
        Line(f"lo = {b}[r]", (Access(b, ("r",)),)),
        Line(f"hi = {b}[{n} + r]", (Access(b, (f"{n} + r",)),)),
        If(
            "lo < hi",
            [
                Line(f"acc = {o}[g]", (mine,)),
                For("s", "hi", segment, "lo"),
                Line(f"{o}[g] = acc", (), (mine,)),
            ],
        ),
    ]
    args = [o, spec.names[v], p, b]
    int_arg = (perm.dtype, 1)
    types = [(out.type.dtype, 1), (v.type.dtype, 1), int_arg, int_arg]
    body = [grid_loop("g", out.type.size, per_element)]
    return kernel(f"{spec.kernel_name}_segments", args, types, body, launch, "scatter")
