"""Buffer planning: in-place reuse and best-fit packing of every materialized value into one arena.

Time is kernel order: a buffer is live from the group that stores it to the last group that reads
it (both inclusive). Groups are visited in order; before a group's outputs are placed, every buffer
whose last reader ran earlier is back on the free list. A band of row-fused groups
(``compiler/passes/rows.py``) is one step: its members' buffers are all born where it starts and
all live until it ends, and the values it keeps per row get no buffer. Each output then gets, in
this order:

1. *in place*: the block of an input that dies at this group, when the group reads that input only
   at the element it writes (``FusionPlan.in_place_safe``: each element is read before it
   is overwritten), the sizes and element widths are equal, and the block is ours to overwrite
   (arena, a donated argument, or an argument the program mutates: its memory holds the chain of
   values leading to its new value, as NumPy's does); a user's in-place request is realized exactly
   this way;
2. *best fit*: the smallest free block that is large enough (a larger freed block is split), else
   new space at the top of the arena (64-byte aligned).

That online pass decides every in-place reuse and gives a first set of offsets. Packing is then redone
offline (``pack_by_size``), since every lifetime is known by then: the values chained by in-place reuse
are one block, and blocks are placed largest first, each at the best-fitting gap among the blocks
already placed that are live at the same time (the "greedy by size" of Pisarchyk and Lee, 2020). The
online pass fragments when a small buffer lands in a hole that a big one needed later; the offline
one places big blocks first. The plan keeps whichever arena is smaller (``DSL_NO_PACK_BY_SIZE=1``:
the online offsets only).

A returned value computed in place from an arena value that dies there (a scatter into a zeroed
buffer, ``x = zeros(n); x[i] += v; return x``) takes that value's whole chain of blocks out of the
arena into the result's own memory (``results_in_place``; not in loop bodies, whose results are
carries): the chain is written where the caller receives the result, and the result's kernel runs
in place there instead of copying the chain's last value over.

A value written back to an argument (``dsl.writeback``) is stored straight into the caller's array
when the argument's old value, and the value kept in its memory before (rule 1), are read by no
later group and only at identity by this one (``x[0] = a; x[2] = b``: both updates in the caller's
array, as in NumPy); otherwise it goes to fresh memory and the runtime copies it after the call.

What became of each user in-place request is read off the finished plan (``inplace_report.py``), and
read again after ``resize_slots``.

``inplace=False`` (``DSL_NO_INPLACE=1``) gives the reference plan: every buffer its own slot, no
in-place, no direct write-backs. Results returned to the caller are never planned: they are
allocated fresh per call, so a result never aliases the arena or an input.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from compiler.ir.core import Block, Function, Location, Op, Value
from compiler.ir.types import DType, TensorType
from compiler.passes.fuse import FusionPlan, Group, GroupKind, fuse
from compiler.passes.inplace_report import INPLACE_ATTR as INPLACE_ATTR  # read from here by other passes
from compiler.passes.inplace_report import (
    SCOPE_ATTR,
    InplaceDecision,
    InplaceRequest,
    find_requests,
    reads_old,
    report_requests,
)
from compiler.prims import dynamic as dyn
from compiler.prims import movement as mv
from compiler.prims import source
from compiler.prims.base import Primitive
from runtime.errors import VerificationError

ALIGNMENT = 64  # a cache line: keeps vector loads aligned and kernels off each other's lines


@dataclass
class BufferRow:
    name: str
    value: Value
    bytes: int
    offset: int  # in the arena; -1 when the value lives in a donated argument (``param``)
    live: tuple[int, int]  # (op position of the group that writes it, of the last group reading it)
    reused_from: str | None = None
    param: int | None = None  # index of the donated argument whose memory holds it
    result: Value | None = None  # the returned value whose memory holds it (``results_in_place``)
    # Not the value's size: what the code stores of it, and where (``resize_slots``).
    stored_as: str | None = None
    # Scratch of a kernel, not a value of the program (``place_scratch``): the kernel's name.
    scratch_of: str | None = None

    @property
    def in_arena(self) -> bool:
        return self.param is None and self.result is None


@dataclass
class MemoryPlan:
    peak_bytes: int
    naive_bytes: int
    buffers: list[BufferRow]
    inplace: list[InplaceDecision] = field(default_factory=list)
    offsets: dict[Value, int] = field(default_factory=dict)
    in_param: dict[Value, int] = field(default_factory=dict)  # value -> donated argument holding it
    direct_writeback: dict[Value, int] = field(default_factory=dict)  # value -> argument written into
    # A direct write-back -> the value kept in the argument's memory before it, which it overwrites
    # (absent: the argument's own old value).
    direct_over: dict[Value, Value] = field(default_factory=dict)
    mutated_args: frozenset[int] = frozenset()  # arguments the program mutates (their memory: rule 1)
    in_result: dict[Value, Value] = field(default_factory=dict)  # value -> the result holding it
    requests: list[InplaceRequest] = field(default_factory=list)  # the user's, judged into ``inplace``

    def writeback_donors(self, func: Function) -> dict[Value, Value]:
        """Each direct write-back -> the value whose memory it overwrites: the one kept in the
        argument's memory before it (``direct_over``), else the argument itself."""
        return {v: self.direct_over.get(v, func.params[k]) for v, k in self.direct_writeback.items()}

    @property
    def result_reuses(self) -> dict[Value, str]:
        """Each result computed in place over a chain kept in its memory (``in_result``) -> the name of
        the chain's last value, the operand it took over."""
        last: dict[Value, BufferRow] = {}
        for r in self.buffers:
            if r.result is not None and (r.result not in last or r.live[0] > last[r.result].live[0]):
                last[r.result] = r
        return {v: r.name for v, r in last.items()}

    def __str__(self) -> str:
        header = f"{'buffer':<10}{'bytes':>12}{'offset':>12}  {'live':<14}{'reused_from':<12}type"
        lines = [header, "-" * len(header)]
        for b in self.buffers:
            live = f"[{b.live[0]}, {b.live[1]}]"
            reused = b.reused_from or "-"
            where = str(b.offset) if b.in_arena else f"arg{b.param}" if b.result is None else "result"
            lines.append(f"{b.name:<10}{b.bytes:>12}{where:>12}  {live:<14}{reused:<12}{b.value.type}")
            if b.stored_as:
                lines.append(f"{'':<10}{b.stored_as}")
        # a saving only: tiny programs can plan more than naive, whose sizes are not 64-byte aligned
        saved = (
            f" ({self.naive_bytes / self.peak_bytes:.1f}x less)"
            if 0 < self.peak_bytes < self.naive_bytes
            else ""
        )
        lines.append(f"peak {self.peak_bytes} bytes, naive {self.naive_bytes} bytes{saved}")
        lines += [f"  {d}" for d in self.inplace]
        return "\n".join(lines)


def align(n: int) -> int:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def naive_bytes(func: Function) -> int:
    """What an eager NumPy run allocates for intermediates: every op result that is not returned, those
    of loop and branch bodies included, each once (an eager loop makes them again on every trip), except
    the values NumPy makes without allocating:

    - a constant: a Python scalar (NumPy broadcasts it, never making it full size) or an array the
      program captured, there before the run;
    - a view of its operand (``_VIEW_STRIDES``): a slice, transpose, broadcast or dynamic slice, and a
      reshape NumPy can make without copying (``movement.reshaped_strides``: of a transposed or
      broadcast array it copies, and that copy counts);
    - a user's in-place request (``dsl.inplace``): NumPy writes into the array's own memory, unless the
      value it overwrites is still read later (the program then kept a copy of it: the same bytes).

    Arguments and computed arrays are taken C-ordered (NumPy's order K can lay out an elementwise
    result of transposed operands otherwise, whose reshape it would then copy)."""
    returned = set(func.results)
    last_read = _last_reads(func)
    strides: dict[Value, Strides] = {}  # the values that own no memory: views and constants
    total = 0
    for pos, op in enumerate(func.walk()):
        view = _eager_view_strides(op, strides)
        if view is not None:
            strides[op.result] = view
            continue
        in_place = INPLACE_ATTR in op.attrs and op.results
        if in_place and not (reads_old(op) and last_read.get(op.operands[0], -1) > pos):
            continue
        total += sum(r.type.nbytes for r in op.results if r not in returned)
    return total


Strides = tuple[int, ...]  # in elements; 0 along an axis a broadcast repeats


def _slice_strides(op: Op, strides: Strides) -> Strides:
    return tuple(s * int(k) for s, k in zip(strides, op.attrs["stride"], strict=True))


def _broadcast_strides(op: Op, strides: Strides) -> Strides:
    shape, src = op.result.type.shape, op.operands[0].type.shape
    lead = len(shape) - len(src)
    kept = (0 if d != shape[lead + j] else s for j, (d, s) in enumerate(zip(src, strides, strict=True)))
    return (0,) * lead + tuple(kept)


# NumPy's views: each op -> the strides of its result over its operand 0's memory, or None where NumPy
# copies (a reshape merging axes of unlike strides). A gather has an ``unview`` too, but NumPy copies
# what integer arrays index.
_VIEW_STRIDES: dict[Primitive, Callable[[Op, Strides], Strides | None]] = {
    mv.reshape: mv.view_strides,
    mv.transpose: mv.view_strides,
    mv.slice_: _slice_strides,
    dyn.dynamic_slice: lambda op, strides: strides,
    mv.broadcast: _broadcast_strides,
}


def _eager_view_strides(op: Op, known: dict[Value, Strides]) -> Strides | None:
    """The strides of ``op``'s result where eager NumPy makes it without memory of its own (a view of
    ``op``'s operand, whose strides are ``known`` or C order, or a constant: a splat is a broadcast
    scalar), else None."""
    if op.prim is source.constant:
        shape = op.result.type.shape
        return (0,) * len(shape) if source.is_splat(op.attrs["value"]) else mv.contiguous_strides(shape)
    rule = _VIEW_STRIDES.get(op.prim)
    if rule is None:
        return None
    x = op.operands[0]
    return rule(op, known[x] if x in known else mv.contiguous_strides(x.type.shape))


def _last_reads(func: Function) -> dict[Value, int]:
    """Each value -> the position (in ``func.walk()`` order) of the last op reading it; a block's
    results are read after its last op."""
    last: dict[Value, int] = {}
    position = 0

    def visit(block: Block) -> None:
        nonlocal position
        for op in block.ops:
            for v in op.operands:
                last[v] = position
            position += 1
            for region in op.regions:
                visit(region)
        for v in block.results:
            last[v] = max(last.get(v, -1), position)

    visit(func.body)
    return last


def pack_by_size_enabled() -> bool:
    return os.environ.get("DSL_NO_PACK_BY_SIZE", "") in ("", "0")


def plan_buffers(
    func: Function,
    fusion: FusionPlan,
    inplace: bool = True,
    donate_argnums: tuple[int, ...] = (),
    pack_by_size: bool | None = None,
    results_in_place: bool = False,
) -> MemoryPlan:
    """``pack_by_size``: also pack offline, largest block first, and keep the smaller arena
    (default: on unless ``DSL_NO_PACK_BY_SIZE=1``). The reference plan (``inplace=False``) is never
    repacked: one slot per buffer."""
    planner = _Planner(func, fusion, inplace, donate_argnums, results_in_place)
    peak = planner.run()
    if pack_by_size is None:
        pack_by_size = pack_by_size_enabled()
    if inplace and pack_by_size:
        peak = repack_by_size(planner.rows, peak)
    plan = MemoryPlan(
        peak_bytes=peak,
        naive_bytes=naive_bytes(func),
        buffers=planner.rows,
        inplace=planner.decisions,
        offsets={r.value: r.offset for r in planner.rows if r.in_arena},
        in_param={r.value: r.param for r in planner.rows if r.param is not None},
        direct_writeback=planner.direct,
        direct_over=planner.direct_over,
        mutated_args=frozenset(planner.mutated_at),
        in_result={r.value: r.result for r in planner.rows if r.result is not None},
    )
    plan.requests = find_requests(func, fusion, plan, inplace)
    report_requests(plan)
    return plan


@dataclass(frozen=True)
class Planner:
    """The kernel passes as the pipeline runs them for one target and set of options: ``fuse`` ->
    ``bands`` (the rows pass: ``rows.form_bands`` with the target's roles, or None where the target
    prints no bands or row fusion is off) -> ``plan_buffers`` -> ``finish`` (the target's kernel
    passes' changes to the plan: row-block regions' resized slots, the kernels' scratch). The
    pipeline's ``fuse``, ``rows`` and ``plan`` passes call its steps, and ``remat`` and ``schedule``
    score their candidates with ``peak``, so they optimize the plan that ships."""

    inplace: bool = True
    donate_argnums: tuple[int, ...] = ()
    contract_transposes: bool = True
    recompute: bool = True
    pack_by_size: bool | None = None  # None: DSL_NO_PACK_BY_SIZE decides
    bands: Callable[[Function, FusionPlan], None] | None = None
    finish: Callable[[Function, FusionPlan, MemoryPlan], MemoryPlan] | None = None
    results_in_place: bool = False  # a returned value's in-place chain in the result's memory

    def fuse(self, func: Function) -> FusionPlan:
        return fuse(func, self.contract_transposes, self.recompute)

    def form_bands(self, func: Function, fusion: FusionPlan) -> None:
        if self.bands is not None:
            self.bands(func, fusion)

    def plan_buffers(self, func: Function, fusion: FusionPlan) -> MemoryPlan:
        return plan_buffers(
            func, fusion, self.inplace, self.donate_argnums, self.pack_by_size, self.results_in_place
        )

    def shipped(self, func: Function) -> tuple[FusionPlan, MemoryPlan]:
        """Fusion (with bands) and memory plan of optimized IR, as the pipeline would make them."""
        fusion = self.fuse(func)
        self.form_bands(func, fusion)
        plan = self.plan_buffers(func, fusion)
        return fusion, plan if self.finish is None else self.finish(func, fusion, plan)

    def peak(self, func: Function) -> int:
        """The arena the shipped plan of ``func`` needs."""
        return self.shipped(func)[1].peak_bytes


def repack_by_size(rows: list[BufferRow], online_peak: int) -> int:
    """Offline packing of the arena rows: a chain of in-place reuses is one block (same offset, its
    lifetimes joined end to start); blocks are placed largest first (then earliest), each at the
    smallest gap between the blocks placed so far that are live at the same time, else above them.
    Rewrites the rows' offsets and returns the new arena size when it is smaller than
    ``online_peak``; else leaves the rows alone and returns ``online_peak``."""
    blocks = _reuse_chains([r for r in rows if r.in_arena])
    order = sorted(blocks, key=lambda b: (-align(b[0].bytes), b[0].live[0]))
    n = len(order)
    starts, ends = np.empty(n, np.int64), np.empty(n, np.int64)
    offsets, sizes = np.empty(n, np.int64), np.empty(n, np.int64)
    for i, chain in enumerate(order):
        start, end, size = chain[0].live[0], max(r.live[1] for r in chain), align(chain[0].bytes)
        live = (starts[:i] <= end) & (ends[:i] >= start)  # lifetimes are inclusive kernel positions
        offsets[i] = best_gap(offsets[:i][live], sizes[:i][live], size)
        starts[i], ends[i], sizes[i] = start, end, size
    peak = int((offsets + sizes).max()) if n else 0
    if peak >= online_peak:
        return online_peak
    for chain, offset in zip(order, offsets.tolist()):
        for r in chain:
            r.offset = offset
    return peak


def best_gap(offsets: np.ndarray, sizes: np.ndarray, size: int) -> int:
    """The offset of the smallest hole of at least ``size`` bytes below, between or above the
    occupied ranges ``[offset, offset + size)`` (which may overlap each other)."""
    best, best_room, cursor = -1, -1, 0
    for i in np.argsort(offsets, kind="stable").tolist():
        room = int(offsets[i]) - cursor
        if room >= size and (best < 0 or room < best_room):
            best, best_room = cursor, room
        cursor = max(cursor, int(offsets[i] + sizes[i]))
    return cursor if best < 0 else best


def _reuse_chains(rows: list[BufferRow]) -> list[list[BufferRow]]:
    """Rows grouped by in-place hand-over: a row that took over another arena row's block follows it
    (each block is handed over at most once: the donor dies where the taker is written)."""
    by_name = {r.name: r for r in rows}
    next_of = {r.reused_from: r for r in rows if r.reused_from in by_name}
    chains = []
    for head in (r for r in rows if r.reused_from not in by_name):
        chain = [head]
        while chain[-1].name in next_of:
            chain.append(next_of[chain[-1].name])
        chains.append(chain)
    return chains


class _FreeList:
    """Free arena blocks as sorted, coalesced (offset, size) pairs; best-fit allocation."""

    def __init__(self) -> None:
        self.blocks: list[tuple[int, int]] = []
        self.top = 0

    def alloc(self, size: int) -> int:
        size = align(size)
        best = -1
        for i, (_, free) in enumerate(self.blocks):
            if free >= size and (best < 0 or free < self.blocks[best][1]):
                best = i
        if best < 0:
            offset, self.top = self.top, self.top + size
            return offset
        offset, free = self.blocks.pop(best)
        if free > size:
            bisect.insort(self.blocks, (offset + size, free - size))
        return offset

    def free(self, offset: int, size: int) -> None:
        size = align(size)
        i = bisect.bisect(self.blocks, (offset, size))
        self.blocks.insert(i, (offset, size))
        # Coalesce with the right, then the left neighbour.
        if i + 1 < len(self.blocks) and offset + size == self.blocks[i + 1][0]:
            size += self.blocks.pop(i + 1)[1]
            self.blocks[i] = (offset, size)
        if i > 0 and self.blocks[i - 1][0] + self.blocks[i - 1][1] == offset:
            prev_offset, prev_size = self.blocks.pop(i - 1)
            self.blocks[i - 1] = (prev_offset, prev_size + size)


class _Planner:
    def __init__(
        self, func: Function, fusion: FusionPlan, inplace: bool, donate: tuple[int, ...], adopt: bool = False
    ) -> None:
        self.func = func
        self.adopt = adopt and inplace  # results_in_place
        self.fusion = fusion
        self.inplace = inplace
        self.returned = set(func.results)
        self.params = {p: i for i, p in enumerate(func.params)}
        self.donated = {func.params[i] for i in donate if 0 <= i < len(func.params)}
        # Arguments the program mutates: their memory is ours to overwrite (rule 1), but not a loop
        # body's (its write-backs are carries, whose buffers the loop code alternates).
        mutated = () if SCOPE_ATTR in func.attrs else func.attrs.get("dsl.writeback", ())
        self.mutated_at = {int(i) for i in mutated}
        self.local = fusion.local  # kept per row inside a band (``rows.py``): no buffer
        self.last_read: dict[Value, int] = {}
        for group in fusion.groups:
            for v in group.inputs:
                self.last_read[v] = max(self.last_read.get(v, -1), fusion.time(group)[1])
        end = max((g.root_pos for g in fusion.groups), default=0) + 1
        for v in func.results:  # a returned argument is copied as the driver returns: read at the end
            if v in self.params:
                self.last_read[v] = end
        self.rows: list[BufferRow] = []
        self.row_of: dict[Value, BufferRow] = {}
        self.decisions: list[InplaceDecision] = []
        self.direct: dict[Value, int] = {}
        self.direct_over: dict[Value, Value] = {}
        self.writeback = _writeback_params(func)
        # A write-back that cannot go straight into the caller's array (``x += x.T``) is an
        # intermediate of the arena, copied into the caller's array as the call returns (read then).
        # (A loop body's write-backs are its carries: the loop code alternates a carry that cannot be
        # written in place with a temporary of its own, ``passes/loops.py``.)
        once = [v for v in self.writeback if list(func.results).count(v) == 1 and v not in self.params]
        self.staged = set() if SCOPE_ATTR in func.attrs else set(once)
        for v in self.staged:
            self.last_read[v] = end
        self.free = _FreeList()
        self.control = {v for g in fusion.groups if g.kind is GroupKind.CONTROL for v in g.outputs}

    def run(self) -> int:
        """Groups in order; a band's members all place their outputs before any block is freed."""
        for group in self.fusion.groups:
            self.place_outputs(group)
            band = self.fusion.band_of.get(group)
            if band is None:
                self.release(group)
            elif group is band.groups[-1]:
                for member in band.groups:
                    self.release(member)
        return self.free.top

    def place_outputs(self, group: Group) -> None:
        taken: set[Value] = set()
        for v in group.outputs:
            if v in self.writeback and self.inplace and self.can_write_directly(v, group):
                self.direct[v] = self.writeback[v]
                continue
            if v in self.returned and self.adopt and v.type.nbytes:
                self.adopt_chain(v, group, taken)
            if (v in self.returned and v not in self.staged) or v.type.nbytes == 0 or v in self.local:
                continue
            born, end = self.fusion.time(group)
            live = (born, self.last_read.get(v, end))
            row = BufferRow(self.fusion.names[v], v, v.type.nbytes, -1, live)
            donor = self.donor(v, group, taken) if self.inplace else None
            if donor is None:
                row.offset = self.free.alloc(row.bytes)
            else:
                taken.add(donor)
                self.take_block(row, donor, group)
            self.rows.append(row)
            self.row_of[v] = row

    def donor(self, v: Value, group: Group, taken: set[Value]) -> Value | None:
        """An input of ``group`` whose block ``v`` may overwrite (rule 1 of the module docstring)."""
        for x in group.inputs:
            if x in taken or self.last_read.get(x) != self.fusion.time(group)[1]:
                continue
            if not self.band_allows_overwrite(x, group):
                continue
            if (group.kind is GroupKind.CONTROL or v in self.staged) and self.in_mutated(x):
                # (a loop's or branch's carries stay out of it: their code copies them; so does a
                # write-back that could not go straight back: it is copied into that memory)
                continue
            # (a mutated argument's memory, unless its new value already went there: same kernel)
            went = x in self.params and self.params[x] in self.direct.values()
            mutated = self.params.get(x) in self.mutated_at and v not in self.returned and not went
            ours = x in self.donated or mutated
            owned = x in self.row_of or (ours and not self.row_of_param_used(x))
            same = x.type.nbytes == v.type.nbytes and x.type.dtype.itemsize == v.type.dtype.itemsize
            if owned and same and self.fusion.in_place_safe(x, v, group):
                return x
        return None

    def adopt_chain(self, v: Value, group: Group, taken: set[Value]) -> None:
        """Result ``v`` computed in place from an arena value that dies at ``group``: that value's
        chain of blocks moves into ``v``'s memory (the module docstring)."""
        if list(self.func.results).count(v) != 1 or v in self.params or v in self.writeback:
            return
        donor = self.donor(v, group, taken)
        if donor is None or donor not in self.row_of or not self.row_of[donor].in_arena:
            return
        by_name = {r.name: r for r in self.rows}
        chain = [self.row_of[donor]]
        while chain[-1].reused_from in by_name and by_name[chain[-1].reused_from].in_arena:
            chain.append(by_name[chain[-1].reused_from])
        if any(r.value in self.control for r in chain):
            return  # a loop's or branch's carries: their buffers are the loop code's
        taken.add(donor)
        del self.row_of[donor]  # its block is never freed online (a band may still read it):
        for r in chain:  # the offline packing (``repack_by_size``) leaves the chain out of the arena
            r.result, r.offset = v, -1
        name = self.fusion.names[donor]
        self.decisions.append(
            InplaceDecision(
                self.fusion.names[v],
                _loc_of(v, group),
                None,
                name,
                "in place",
                "its operand dies here and is read only at the element being written; the operand "
                "was computed in the result's own memory",
            )
        )

    def band_allows_overwrite(self, x: Value, group: Group) -> bool:
        """Inside a band, ``group`` may overwrite ``x`` row by row only if every other member that
        reads ``x`` runs before it and reads only the row being computed (rows interleave)."""
        band = self.fusion.band_of.get(group)
        if band is None:
            return True
        readers = band.aligned.get(x, {})
        return all(g is group or (aligned and g.index < group.index) for g, aligned in readers.items())

    def in_mutated(self, x: Value) -> bool:
        """Whether ``x`` is an argument the program mutates, or a value kept in one's memory."""
        row = self.row_of.get(x)
        return self.params.get(x) in self.mutated_at or (row is not None and row.param in self.mutated_at)

    def row_of_param_used(self, param: Value) -> bool:
        return any(r.param == self.params[param] for r in self.rows)

    def take_block(self, row: BufferRow, donor: Value, group: Group) -> None:
        name = self.fusion.names[donor]
        if donor in self.row_of:
            source = self.row_of.pop(donor)  # the block moves to the new value: not freed
            row.offset, row.param = source.offset, source.param
            # Handed over where the donor is last read: a band's member, born at the band's start,
            # would otherwise be shown live beside the value it overwrites row by row.
            row.live = (max(row.live[0], source.live[1]), row.live[1])
        else:
            row.param = self.params[donor]
        row.reused_from = name
        self.decisions.append(
            InplaceDecision(
                row.name,
                _loc_of(row.value, group),
                None,
                name,
                "in place",
                "its operand dies here and is read only at the element being written",
            )
        )

    def release(self, group: Group) -> None:
        """Free the blocks of values whose last reader is ``group`` (after its outputs are placed).
        The reference plan never frees: every buffer keeps its own slot."""
        if not self.inplace:
            return
        end = self.fusion.time(group)[1]
        for v in group.inputs:
            row = self.row_of.get(v)
            if row is not None and self.last_read.get(v) == end:
                del self.row_of[v]
                if row.in_arena:
                    self.free.free(row.offset, row.bytes)
        for v in group.outputs:  # stored but never read again (a value kept only for a later group)
            row = self.row_of.get(v)
            if row is not None and v not in self.last_read:
                del self.row_of[v]
                if row.in_arena:
                    self.free.free(row.offset, row.bytes)

    def can_write_directly(self, v: Value, group: Group) -> bool:
        """The write-back of argument ``p`` may go straight into the caller's array: neither ``p`` nor
        the value its memory holds now (``holder``, rule 1) is read after ``group``, nor by it at
        other elements than it writes. A holder it overwrites is recorded (``direct_over``)."""
        index = self.writeback[v]
        param = self.func.params[index]
        if list(self.func.results).count(v) != 1:
            return False  # also returned as a result: results must not alias the caller's arrays
        end = self.fusion.time(group)[1]
        holder = next((u for u, r in self.row_of.items() if r.param == index), None)
        if holder is not None and (group.kind is GroupKind.CONTROL or holder in group.outputs):
            return False  # (``donor``: a carry stays out of a mutated argument's memory; a sibling
            # output the kernel stores there too would race with the write-back)
        for old in (param,) if holder is None else (param, holder):
            if self.last_read.get(old, -1) > end or not self.band_allows_overwrite(old, group):
                return False
            if old.type.nbytes != v.type.nbytes or not self.fusion.in_place_safe(old, v, group):
                return False
        if v.type != param.type:
            return False
        if holder is not None:  # (its memory goes on to the write-back: not freed)
            del self.row_of[holder]
            self.direct_over[v] = holder
        return True


def _loc_of(v: Value, group: Group) -> Location:
    """The user's line of the op computing ``v`` in ``group`` (a kernel's root is its last op, which
    may be another line's)."""
    return next((op.loc for op in group.ops if v in op.results), group.root.loc)


def _writeback_params(func: Function) -> dict[Value, int]:
    indices = tuple(int(i) for i in func.attrs.get("dsl.writeback", ()))
    tail = func.results[len(func.results) - len(indices) :] if indices else ()
    return dict(zip(tail, indices))


def resize_slots(plan: MemoryPlan, slots: dict[int, tuple[int, str]]) -> None:
    """Give each arena slot at an offset of ``slots`` a new size (``offset -> (bytes, why)``) and move
    every row above it by the difference, so the arena closes over what a slot gave up (or opens for
    what it took); ``peak_bytes`` follows. The code generator calls this once it knows that a slot's
    values are stored in another shape than their own (a row-block region's own buffers: one block
    of rows per thread). Every row at a resized slot's offset must have the slot's size and no other
    row may overlap it at any time; then rows that overlapped before overlap in the same way after,
    and no two rows come to overlap (each row lies wholly below or wholly above each slot)."""
    if not slots:
        return
    arena = [r for r in plan.buffers if r.in_arena]
    starts, moves, resized = [], [0], []
    for offset, (nbytes, why) in sorted(slots.items()):
        size = max((align(r.bytes) for r in arena if r.offset == offset), default=0)
        inside = [r for r in arena if r.offset < offset + size and offset < r.offset + r.bytes]
        if not size or any(r.offset != offset or align(r.bytes) != size for r in inside):
            raise VerificationError(f"memory plan: no arena slot of its own at offset {offset}")
        resized += [(r, nbytes, why) for r in inside]
        starts.append(offset)
        moves.append(moves[-1] + align(nbytes) - size)
    for r, nbytes, why in resized:
        r.bytes, r.stored_as = nbytes, why
    for r in arena:
        r.offset += moves[bisect.bisect_left(starts, r.offset)]
    plan.offsets = {r.value: r.offset for r in arena}
    plan.peak_bytes = max((r.offset + align(r.bytes) for r in arena), default=0)
    report_requests(plan)


def place_scratch(
    plan: MemoryPlan, needs: list[tuple[str, str, int, DType, tuple[int, int]]], own_slots: bool = False
) -> MemoryPlan:
    """A copy of ``plan`` with the kernels' global scratch in the arena: each need ``(name, kernel,
    bytes, dtype, live)`` (a split reduction's partials, a band's rows past shared memory) is live
    while its kernel runs and gets the best-fitting gap among the rows live at the same time (else
    the top of the arena), largest first, like the values' blocks (``repack_by_size``). Scratch
    that no value needs at the same time costs no arena at all. ``own_slots``: each need a slot of
    its own above every row (the reference plan, ``inplace=False``)."""
    if not needs:
        return plan
    rows = [replace(r) for r in plan.buffers]
    placed = [r for r in rows if r.in_arena]
    for name, kernel, nbytes, dtype, live in sorted(needs, key=lambda n: (-n[2], n[0])):
        busy = [r for r in placed if own_slots or (r.live[0] <= live[1] and live[0] <= r.live[1])]
        busy.sort(key=lambda r: r.offset)
        offsets = np.array([r.offset for r in busy], dtype=np.int64)
        sizes = np.array([align(r.bytes) for r in busy], dtype=np.int64)
        offset = best_gap(offsets, sizes, align(nbytes))
        value = Value(TensorType((nbytes // dtype.itemsize,), dtype))
        row = BufferRow(name, value, nbytes, offset, live, scratch_of=kernel)
        rows.append(row)
        placed.append(row)
    peak = max((r.offset + align(r.bytes) for r in placed), default=0)
    return replace(plan, buffers=rows, peak_bytes=max(plan.peak_bytes, peak))


def check_no_overlap(plan: MemoryPlan) -> None:
    """Sanitizer: no two buffers live at the same time share arena bytes (except a value and the
    operand whose block it took over in place at the kernel where that operand dies)."""
    active: list[BufferRow] = []
    for row in sorted((r for r in plan.buffers if r.in_arena), key=lambda r: r.live[0]):
        active = [a for a in active if a.live[1] >= row.live[0]]
        for a in active:
            bytes_overlap = a.offset < row.offset + row.bytes and row.offset < a.offset + a.bytes
            handed_on = row.reused_from == a.name and row.live[0] <= a.live[1] <= row.live[1]
            if bytes_overlap and not handed_on:
                raise VerificationError(
                    f"memory plan: {a.name} (bytes {a.offset}..{a.offset + a.bytes}, live {a.live}) and "
                    f"{row.name} (bytes {row.offset}..{row.offset + row.bytes}, live {row.live}) overlap"
                )
        active.append(row)


def caller_allocated(func: Function, plan: MemoryPlan) -> list[Value]:
    """Results the runtime allocates with NumPy before the call and passes to the driver.

    NumPy's allocator asks the kernel for huge pages on large arrays, so first-touch page faults
    of a fresh 40 MB result cost a fraction of what Numba's ``np.empty`` inside the driver costs.
    Params and repeated results are excluded: the driver copies those (results never alias).
    """
    seen = set(func.params)
    outs = []
    for v in func.results:
        if v not in seen and v not in plan.offsets and v not in plan.direct_writeback:
            outs.append(v)
        seen.add(v)
    return outs
