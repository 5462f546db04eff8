"""A stable sort on CUDA of a scatter's update positions by the row each lands on (``row_of``: row
``n`` for a dropped update, after every real row),
for the sorted form of ``scatter.py``: an LSD radix sort, a counting sort per digit of the row,
least significant digit first, deterministic by construction and without atomics.

The positions ``0 .. count-1`` (in the order the previous pass left them) are cut into tiles of
``TILE`` consecutive entries, a block per tile (a loop over the tiles by block, so any grid sorts the
same); thread ``i`` of the block takes the tile's ``i``-th run of ``TILE / TPB`` consecutive
entries. A pass over one digit is three or four kernels:

- *count*: each thread counts its entries' digits into its own column of the block's counters in
  shared memory, ``cnt[d * TPB + i]`` (``radix`` counters a thread); the block scans them in that
  (digit, thread) order (``_block_scan``: each thread sums ``radix`` consecutive counters, a
  Hillis-Steele scan of those sums over the threads, each thread rewrites its counters), so
  ``cnt[d * TPB + i]`` is where thread ``i``'s first entry of digit ``d`` goes within the tile; the
  tile's count of digit ``d`` goes to the global table, laid out digit-major: ``hist[d * tiles + t]``;
- *scan*: the table turned into its exclusive prefix sums in that (digit, tile) order, so
  ``hist[d * tiles + t]`` is where tile ``t``'s first entry of digit ``d`` goes. Reduce then scan:
  the table is cut into chunks of ``SCAN_CHUNK`` counters, a block each; a *sums* kernel writes each
  chunk's total (only when there are several chunks), then the scan kernel's block for chunk ``c``
  adds up the totals before ``c`` and scans its chunk from there;
- *place*: each block counts and scans its tile again, then each thread walks its entries in order,
  writing each position at its digit's slot (the tile's base in the table plus the thread's place
  in the tile) and moving its own counter on. No two threads touch one counter.

Entries with one digit keep their order within a thread (walked in order), across the threads of a
tile (the block's scan puts thread ``i``'s before thread ``i + 1``'s) and across tiles (the table's
scan puts tile ``t``'s before tile ``t + 1``'s): each pass is stable, so after the last one the
positions are ordered by row and, within a row, in their original order. Integer sums are exact in
any order, so how the scans split their work over threads and blocks changes no result.

The sizes, by a cost estimate (an embedding gradient: 1,000,000 entries into 50,000 rows, 16 bits of
row; an H100: 132 SMs of 2,048 threads and 228 KB of shared memory, 270,336 threads):

- Before (a thread per tile of 256 entries, 8-bit digits, counters in the global table, one block
  scanning it): 2 passes; count and place ran 3,907 threads (1.4% of the GPU's), each a serial
  chain of 256 global read-modify-writes of its counters; the table was 1,000,192 counters (4 MB of
  scratch), zeroed, counted, then read twice and written once by one block (12 MB through one SM).
- ``TILE`` 1,024 (4 entries a thread of 256): 977 blocks, 250,000 threads (92% of the GPU's) whose
  serial work is 4 entries, 48 shared-memory steps over their counters and the block scan's 8
  steps; the table is 15,632 counters (62.5 KB). A tile of 4,096 would take 244 blocks (62,500
  threads: a quarter of the GPU, each with 16 entries' dependent loads in a row) for a 4x smaller
  table; 256 (one entry a thread) would spend 16 counter steps per entry.
- ``RADIX_BITS`` 4: a thread's 16 counters make 16 KB of shared memory a block, so an SM holds 8
  blocks (its full 2,048 threads). 8-bit digits would need 256 KB a block (more than an SM has);
  5 bits 32 KB (7 blocks) and 16-bit rows still take 4 passes. 6 bits in 16-bit counters (33 KB)
  would save a pass (25% of the bytes, 4 launches) for 4x the counter work of a thread (192 steps
  for its 4 entries). So 4 passes of 4 bits.
- Bytes per pass: the entries read three times (count; place counts again, then places), a 4-byte
  position and the 8-byte index it points at, and the positions written once: 40 MB, 160 MB for
  the sort (~55 us at 3 TB/s); the table's traffic (~0.3 MB a pass) is noise.
- ``SCAN_CHUNK`` 4,096 (16 counters a thread): this table is 4 chunks; a 1M-counter table (64M
  entries) 245 blocks.
- Launches: count, sums, scan, place a pass: 16 (6 before), ~7 us of host time each
  (``runtime/cuda_launch.py``), overlapping the kernels.

``RadixSort.work`` counts the global element steps (the entries' three reads, the table's five
passes) for the scatter's choice of form. The table, the chunk totals and the positions (two
arrays, passes alternate between them) are ``Scratch`` the ``scratch`` pass places in the memory
plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compiler.ir.types import DType
from compiler.kernel.cuda.loops import block_loop
from compiler.kernel.cuda.records import CudaKernel, Launch, Scratch, kernel
from compiler.kernel.ir import Access, Alloc, Barrier, For, If, Line, Stmt
from compiler.prims.gather import landing

RADIX_BITS = 4
"""The most bits of the row a pass sorts by (``radix`` counters a thread in shared memory)."""
TILE = 1024
"""Entries a block of the count and place kernels sorts (``TILE / TPB`` consecutive ones a thread)."""
SCAN_CHUNK = 4096
"""Counters of the table a block of the scan kernels takes."""


@dataclass(frozen=True)
class RadixSort:
    """The shape of the sort of ``count`` positions by rows ``0 .. n`` (``n``: dropped) on an axis
    of ``n``: ``passes`` digits of ``bits`` bits each, ``tiles`` tiles, the table's ``chunks``, and
    the integer type of the positions and counters."""

    count: int
    n: int

    @property
    def passes(self) -> int:
        return -(-self.row_bits // RADIX_BITS)

    @property
    def row_bits(self) -> int:  # rows 0 .. n: ``n`` is a dropped update's (``row_of``)
        return max(1, self.n.bit_length())

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
    def chunks(self) -> int:
        return -(-self.table // SCAN_CHUNK)

    @property
    def dtype(self) -> DType:
        return DType.i32 if self.count < 2**31 else DType.i64

    @property
    def launches(self) -> int:
        return self.passes * (3 + (self.chunks > 1))

    @property
    def work(self) -> int:
        """Global element steps: each pass reads the entries three times, and the table is written,
        read twice and written by the scan, and read by the place kernel."""
        return self.passes * (3 * self.count + 5 * self.table)


def row_of(idx: str, at: str, n: int) -> list[Stmt]:
    """Statements setting ``j`` to the row the update at position ``at`` lands on (``landing``:
    ``n`` for a dropped update)."""
    return [Line(f"j = {idx}[{at}]", (Access(idx, (at,)),)), Line(f"j = {landing('j', n)}")]


def sort_by_row(name: str, shape: RadixSort, idx: str, idx_dtype: DType) -> tuple[list[CudaKernel], Scratch]:
    """The kernels, in launch order, sorting the positions of ``idx`` (``shape.count`` entries) by
    their row (``row_of``), and the scratch holding the sorted positions after the last."""
    dtype = shape.dtype
    hist = Scratch(f"{name}_hist", shape.table, dtype)
    sums = Scratch(f"{name}_totals", shape.chunks, dtype) if shape.chunks > 1 else None
    perms = [Scratch(f"{name}_perm{k}", shape.count, dtype) for k in range(min(shape.passes, 2))]
    scan = [*([_chunk_sums(f"{name}_sums", hist, sums)] if sums else []), _scan(f"{name}_scan", hist, sums)]
    out: list[CudaKernel] = []
    for k in range(shape.passes):
        src = perms[(k + 1) % 2] if k else None  # the first pass sorts the positions themselves
        dst = perms[k % 2]
        count = _pass(f"{name}_count{k}", shape, k, idx, idx_dtype, src, hist, None)
        place = _pass(f"{name}_place{k}", shape, k, idx, idx_dtype, src, hist, dst)
        if k == 0:  # (the scan kernels repeat each pass: their scratch is the first count's)
            count.scratch += [hist, *([sums] if sums else [])]
        if k < 2:
            place.scratch.append(dst)
        out += [count, *scan, place]
    return out, perms[(shape.passes - 1) % 2]


def _block_scan(name: str, acc: str, excl: str | None, total: str | None = None) -> list[Stmt]:
    """The block's exclusive scan of one integer ``acc`` a thread, in thread order: ``excl`` the sum
    of the threads' before it (and ``total``, the block's). A Hillis-Steele scan in the shared
    array ``tot`` (``{name}_LOG`` steps of two barriers), a barrier after its last read."""
    return [
        Line(f"tot[tid] = {acc}"),
        Barrier(),
        For(
            "e",
            f"{name}_LOG",
            [
                Line("w = 1 << e"),
                Line("x = tot[tid - w] if tid >= w else 0"),
                Barrier(),
                Line("tot[tid] += x"),
                Barrier(),
            ],
        ),
        *([Line(f"{excl} = tot[tid] - {acc}")] if excl else []),
        *([Line(f"{total} = tot[TPB - 1]")] if total else []),
        Barrier(),
    ]


def _sort_kernel(
    name: str, args: list[str], types: list[tuple[DType, int]], body: Sequence[Stmt], blocks: int
) -> CudaKernel:
    """A kernel of the sort over ``blocks`` blocks of ``TPB`` threads, each with the block scan's
    shared array and its step count (a module constant: ``TPB`` is a power of two)."""
    head: list[Stmt] = [Alloc("tot", ("TPB",), DType.i64, shared=True), Line("tid = cuda.threadIdx.x")]
    k = kernel(name, args, types, [*head, *body], Launch(f"max(1, min({blocks}, MAXB))", "TPB"), "sort")
    k.constants.append((f"{name}_LOG", "TPB.bit_length() - 1"))
    return k


def _counter(p: str) -> list[Stmt]:
    """Statements setting ``c`` to where the block's counter ``p`` (in (digit, thread) order) lives
    in ``cnt``: a pad word after every 32, so the scan's threads, each reading ``radix`` consecutive
    counters, read from distinct banks of shared memory (a 16-way conflict without it)."""
    return [Line(f"c = {p}"), Line("c += c // 32")]


def _scan_counters(name: str, radix: int) -> list[Stmt]:
    """The block's counters ``cnt`` rewritten as their exclusive prefix sums in (digit, thread)
    order: thread ``tid`` sums its ``radix`` consecutive ones, the block scans those sums, then
    the thread rewrites its counters from its sum's place on; a barrier after."""

    def rake(body: list[Stmt]) -> For:  # thread tid's counters, in order
        return For("i", f"(tid + 1) * {radix}", [*_counter("i"), *body], f"tid * {radix}")

    return [
        Line("acc = 0"),
        rake([Line("acc += cnt[c]")]),
        *_block_scan(name, "acc", "run"),
        rake([Line("x = cnt[c]"), Line("cnt[c] = run"), Line("run += x")]),
        Barrier(),
    ]


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
    """Pass ``k``'s count kernel (``dst`` None: each tile's digit counts written to its column of
    the table) or place kernel (each entry written at its digit's slot in ``dst``). A block per tile
    ``t`` of ``m`` entries, thread ``tid`` taking ``[lo, hi)``: ``pos`` the position (``src``'s
    entry, or the entry's own number in the first pass), ``d`` its row's digit ``k``; the block's
    counters ``cnt`` (thread ``tid``'s of digit ``d``: ``d * TPB + tid``) counted, then scanned."""
    tiles, radix, h = shape.tiles, shape.radix, hist.name
    slot = Access(h, (f"d * {tiles} + t",))
    cell = f"{h}[{slot.index[0]}]"
    at = [Line(f"pos = {src.name}[s]", (Access(src.name, ("s",)),))] if src else [Line("pos = s")]
    digit = [*at, *row_of(idx, "pos", shape.n), Line(f"d = (j >> {k * shape.bits}) & {radix - 1}")]
    mine = _counter("d * TPB + tid")

    def walk(per_entry: list[Stmt]) -> For:  # the thread's entries, in order
        return For("s", "hi", [*digit, *mine, *per_entry], "lo")

    counted: list[Stmt] = [
        Line(f"m = min({TILE}, {shape.count} - t * {TILE})"),
        Line(f"lo = t * {TILE} + tid * {name}_PER"),
        Line(f"hi = min(lo + {name}_PER, t * {TILE} + m)"),
        For("d", radix, [*mine, Line("cnt[c] = 0")]),
        walk([Line("cnt[c] += 1")]),
        Barrier(),
        *_scan_counters(name, radix),
    ]
    first = [*_counter("d * TPB"), Line("first = cnt[c]")]  # where the tile's digit d starts
    if dst is None:  # the tile's count of digit d: up to where digit d + 1 starts
        total = [
            *first,
            Line("end = m"),
            If(f"d + 1 < {radix}", [*_counter("(d + 1) * TPB"), Line("end = cnt[c]")]),
        ]
        per_digit = [*total, Line(f"{cell} = end - first", (), (slot,))]
        after: list[Stmt] = [For("d", radix, per_digit, "tid", step="TPB"), Barrier()]
    else:  # digit d of the tile starts at its slot of the table: base[d] + the block's counter
        placed = Access(dst.name, ("o",))
        per_digit = [*first, Line(f"base[d] = {cell} - first", (slot,))]
        after = [
            For("d", radix, per_digit, "tid", step="TPB"),
            Barrier(),
            walk(
                [
                    Line("o = base[d] + cnt[c]"),
                    Line("cnt[c] += 1"),
                    Line(f"{dst.name}[o] = pos", (), (placed,)),
                ]
            ),
            Barrier(),
        ]
    int_arg = (shape.dtype, 1)
    args = [idx, *([src.name] if src else []), h, *([dst.name] if dst else [])]
    types = [(idx_dtype, 1), *([int_arg] if src else []), int_arg, *([int_arg] if dst else [])]
    shared = [Alloc("cnt", (f"{name}_CNT",), DType.i32, shared=True)]
    if dst is not None:
        shared.append(Alloc("base", (radix,), shape.dtype, shared=True))
    out = _sort_kernel(name, args, types, [*shared, block_loop("t", tiles, [*counted, *after])], tiles)
    out.constants += [
        (f"{name}_PER", f"({TILE} + TPB - 1) // TPB"),  # a thread's entries
        (f"{name}_CNT", f"{radix} * TPB + {radix} * TPB // 32"),  # the counters and their pad words
    ]
    return out


def _chunk_sums(name: str, hist: Scratch, sums: Scratch) -> CudaKernel:
    """A block per chunk of the table: its total in ``sums`` (its threads read it coalesced)."""
    h, size = hist.name, hist.size
    per_chunk = [
        Line("acc = 0"),
        For(
            "i",
            f"min((c + 1) * {SCAN_CHUNK}, {size})",
            [Line(f"acc += {h}[i]", (Access(h, ("i",)),))],
            f"c * {SCAN_CHUNK} + tid",
            step="TPB",
        ),
        *_block_scan(name, "acc", None, "total"),
        If("tid == 0", [Line(f"{sums.name}[c] = total", (), (Access(sums.name, ("c",)),))]),
    ]
    body = [block_loop("c", sums.size, per_chunk)]
    return _sort_kernel(name, [h, sums.name], [(hist.dtype, 1), (sums.dtype, 1)], body, sums.size)


def _scan(name: str, hist: Scratch, sums: Scratch | None) -> CudaKernel:
    """A block per chunk ``c`` of the table: the totals of the chunks before it added up (``sums``;
    none when the table is one chunk), then the chunk scanned from there, thread ``tid`` summing
    and rewriting its run ``[lo, hi)`` of ``SCAN_CHUNK / TPB`` consecutive counters."""
    h, size = hist.name, hist.size
    chunks = -(-size // SCAN_CHUNK)
    cell = Access(h, ("i",))
    offset: list[Stmt] = [Line("offset = 0")]
    if sums is not None:
        earlier = Line(f"acc += {sums.name}[i]", (Access(sums.name, ("i",)),))
        offset = [
            Line("acc = 0"),
            For("i", "c", [earlier], "tid", step="TPB"),
            *_block_scan(name, "acc", None, "offset"),
        ]
    per_chunk = [
        *offset,
        Line(f"lo = c * {SCAN_CHUNK} + tid * {name}_PER"),
        Line(f"hi = min(lo + {name}_PER, min((c + 1) * {SCAN_CHUNK}, {size}))"),
        Line("acc = 0"),
        For("i", "hi", [Line(f"acc += {h}[i]", (cell,))], "lo"),
        *_block_scan(name, "acc", "run"),
        Line("run += offset"),
        For(
            "i",
            "hi",
            [Line(f"x = {h}[i]", (cell,)), Line(f"{h}[i] = run", (), (cell,)), Line("run += x")],
            "lo",
        ),
    ]
    args = [h, *([sums.name] if sums else [])]
    types = [(hist.dtype, 1), *([(sums.dtype, 1)] if sums else [])]
    out = _sort_kernel(name, args, types, [block_loop("c", chunks, per_chunk)], chunks)
    out.constants.append((f"{name}_PER", f"({SCAN_CHUNK} + TPB - 1) // TPB"))
    return out
