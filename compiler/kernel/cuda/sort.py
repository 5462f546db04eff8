"""A stable sort on CUDA of a scatter's update positions by the row each lands on (its clamped index),
for the sorted form of ``scatter.py``: an LSD radix sort, a counting sort per digit of the row,
least significant digit first, deterministic by construction and without atomics.

The positions ``0 .. count-1`` (in the order the previous pass left them) are cut into tiles of
``TILE`` consecutive entries, one thread per tile (a grid-stride loop over the tiles, so any launch
size sorts the same). A pass over one digit is three kernels:

- *count*: tile ``t``'s thread counts the digits of its entries into column ``t`` of a table laid
  out digit-major, ``hist[d * tiles + t]``;
- *scan*: one block turns the table into its exclusive prefix sums in that (digit, tile) order, so
  ``hist[d * tiles + t]`` is where tile ``t``'s first entry of digit ``d`` goes;
- *place*: tile ``t``'s thread walks its entries in order, writing each position at its digit's slot
  and moving the slot on. The column is the thread's own, so no two threads touch one counter.

Entries with one digit keep their order within a tile (walked in order) and across tiles (the scan
puts tile ``t``'s before tile ``t + 1``'s): each pass is stable, so after the last one the positions
are ordered by row and, within a row, in their original order. Integer sums are exact in any order,
so the scan's split over a block's threads changes no result.

Work: per pass, the entries read twice (count, place) and the table (``radix * tiles`` counters)
zeroed and scanned; ``passes`` is the row index's bits over ``RADIX_BITS``, split evenly (a
50,000-row table: two passes of 8 bits). The table, the positions (two arrays, passes alternate
between them) are ``Scratch`` the ``scratch`` pass places in the memory plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.ir.types import DType
from compiler.kernel.cuda.loops import grid_loop
from compiler.kernel.cuda.records import CudaKernel, Launch, Scratch, kernel
from compiler.kernel.ir import Access, Alloc, Barrier, For, If, Line, Stmt
from compiler.prims.gather import clamped

RADIX_BITS = 8
"""The most bits of the row a pass sorts by (a table of 256 counters per tile)."""
TILE = 256
"""Entries per thread of the count and place kernels (the table has ``radix`` counters per tile)."""


@dataclass(frozen=True)
class RadixSort:
    """The shape of the sort of ``count`` positions by rows ``0 .. n-1``: ``passes`` digits of
    ``bits`` bits each, ``tiles`` tiles, and the integer type of the positions and counters."""

    count: int
    n: int

    @property
    def passes(self) -> int:
        return -(-self.row_bits // RADIX_BITS)

    @property
    def row_bits(self) -> int:
        return max(1, (self.n - 1).bit_length())

    @property
    def bits(self) -> int:
        return -(-self.row_bits // self.passes)

    @property
    def radix(self) -> int:
        return 1 << self.bits

    @property
    def tiles(self) -> int:
        return -(-self.count // TILE)

    @property
    def table(self) -> int:
        return self.radix * self.tiles

    @property
    def dtype(self) -> DType:
        return DType.i32 if self.count < 2**31 else DType.i64

    @property
    def launches(self) -> int:
        return 3 * self.passes

    @property
    def work(self) -> int:
        """Element steps: each pass reads the entries twice and zeroes and scans the table."""
        return self.passes * (2 * self.count + 3 * self.table)


def row_of(idx: str, at: str, n: int) -> list[Stmt]:
    """Statements setting ``j`` to the row the update at position ``at`` lands on (clamped)."""
    return [Line(f"j = {idx}[{at}]", (Access(idx, (at,)),)), Line(f"j = {clamped('j', n)}")]


def sort_by_row(name: str, shape: RadixSort, idx: str, idx_dtype: DType) -> tuple[list[CudaKernel], Scratch]:
    """The kernels, in launch order, sorting the positions of ``idx`` (``shape.count`` entries) by
    their clamped row, and the scratch holding the sorted positions after the last."""
    dtype = shape.dtype
    hist = Scratch(f"{name}_hist", shape.table, dtype)
    perms = [Scratch(f"{name}_perm{k}", shape.count, dtype) for k in range(min(shape.passes, 2))]
    scan = _scan(f"{name}_scan", hist, dtype)
    out: list[CudaKernel] = []
    for k in range(shape.passes):
        src = perms[(k + 1) % 2] if k else None  # the first pass sorts the positions themselves
        dst = perms[k % 2]
        count = _pass(f"{name}_count{k}", shape, k, idx, idx_dtype, src, hist, None)
        place = _pass(f"{name}_place{k}", shape, k, idx, idx_dtype, src, hist, dst)
        if k == 0:
            count.scratch.append(hist)
        if k < 2:
            place.scratch.append(dst)
        out += [count, scan, place]
    return out, perms[(shape.passes - 1) % 2]


def _pass(
    name: str,
    shape: RadixSort,
    k: int,
    idx: str,
    idx_dtype: DType,
    src: Scratch | None,
    hist: Scratch,
    dst: Scratch | None,
) -> CudaKernel:
    """Pass ``k``'s count kernel (``dst`` None: each tile's digits counted into its column of the
    table) or place kernel (each entry written at its digit's slot in ``dst``, the slot moved on).
    A thread per tile walks its entries in order: ``pos`` the position (``src``'s entry, or the
    entry's own number in the first pass), ``d`` its row's digit ``k``."""
    tiles, h = shape.tiles, hist.name
    slot = Access(h, (f"d * {tiles} + t",))
    cell = f"{h}[{slot.index[0]}]"
    if dst is None:
        per_entry = [Line(f"{cell} += 1", (slot,), (slot,))]
        before: list[Stmt] = [For("d", shape.radix, [Line(f"{cell} = 0", (), (slot,))])]
    else:
        per_entry = [
            Line(f"o = {cell}", (slot,)),
            Line(f"{cell} = o + 1", (), (slot,)),
            Line(f"{dst.name}[o] = pos", (), (Access(dst.name, ("o",)),)),
        ]
        before = []
    at = [Line(f"pos = {src.name}[s]", (Access(src.name, ("s",)),))] if src else [Line("pos = s")]
    digit = Line(f"d = (j >> {k * shape.bits}) & {shape.radix - 1}")
    entries = [*at, *row_of(idx, "pos", shape.n), digit, *per_entry]
    walk = For("s", f"min((t + 1) * {TILE}, {shape.count})", entries, f"t * {TILE}")
    int_arg = (shape.dtype, 1)
    args = [idx, *([src.name] if src else []), h, *([dst.name] if dst else [])]
    types = [(idx_dtype, 1), *([int_arg] if src else []), int_arg, *([int_arg] if dst else [])]
    body = [grid_loop("t", tiles, [*before, walk])]
    return kernel(name, args, types, body, Launch(f"_grid({tiles})", "TPB"), "sort")


def _scan(name: str, hist: Scratch, dtype: DType) -> CudaKernel:
    """One block: each thread sums a contiguous chunk of the table, thread 0 scans the chunks' sums
    in shared memory, then each thread rewrites its chunk as exclusive prefix sums."""
    h, size = hist.name, hist.size
    cell = Access(h, ("i",))
    body: list[Stmt] = [
        Alloc("sm", ("TPB",), DType.i64, shared=True),
        Line("tid = cuda.threadIdx.x"),
        Line(f"c = ({size} + cuda.blockDim.x - 1) // cuda.blockDim.x"),
        Line("lo = min(tid * c, " + str(size) + ")"),
        Line(f"hi = min(lo + c, {size})"),
        Line("acc = 0"),
        For("i", "hi", [Line(f"acc += {h}[i]", (cell,))], "lo"),
        Line("sm[tid] = acc"),
        Barrier(),
        If(
            "tid == 0",
            [
                Line("run = 0"),
                For("i", "cuda.blockDim.x", [Line("x = sm[i]"), Line("sm[i] = run"), Line("run += x")]),
            ],
        ),
        Barrier(),
        Line("run = sm[tid]"),
        For(
            "i",
            "hi",
            [Line(f"x = {h}[i]", (cell,)), Line(f"{h}[i] = run", (), (cell,)), Line("run += x")],
            "lo",
        ),
    ]
    return kernel(name, [h], [(dtype, 1)], body, Launch("1", "TPB"), "sort")
