"""Buffer planning: give every materialized intermediate an offset in one arena.

This is the simple plan: no reuse, each buffer its own 64-byte-aligned slot, so ``peak_bytes`` is
the sum of the materialized intermediates. The memory issue replaces ``assign_offsets`` with a
best-fit allocator over the live ranges already recorded here; nothing else has to change.

What is planned: op results that fusion materializes, minus function results (allocated fresh per
call, so a result never aliases the arena or an input) and minus zero-size values. Params are the
caller's buffers. Live ranges are in op positions of the kernels that touch the buffer: a buffer is
written when its group's root runs and is last read when the last group reading it runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compiler.ir.core import Function, Value
from compiler.passes.fuse import FusionPlan

ALIGNMENT = 64  # a cache line: keeps vector loads aligned and kernels off each other's lines


@dataclass
class BufferRow:
    name: str
    value: Value
    bytes: int
    offset: int
    live: tuple[int, int]  # (op position that writes it, last op position that reads it)
    reused_from: str | None = None


@dataclass
class MemoryPlan:
    peak_bytes: int
    naive_bytes: int
    buffers: list[BufferRow]
    inplace: list[object] = field(default_factory=list)
    offsets: dict[Value, int] = field(default_factory=dict)

    def __str__(self) -> str:
        header = f"{'buffer':<10}{'bytes':>12}{'offset':>12}  {'live':<14}{'reused_from':<12}type"
        lines = [header, "-" * len(header)]
        for b in self.buffers:
            live = f"[{b.live[0]}, {b.live[1]}]"
            reused = b.reused_from or "-"
            lines.append(f"{b.name:<10}{b.bytes:>12}{b.offset:>12}  {live:<14}{reused:<12}{b.value.type}")
        lines.append(f"peak {self.peak_bytes} bytes, naive {self.naive_bytes} bytes")
        return "\n".join(lines)


def align(n: int) -> int:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def plan_buffers(func: Function, fusion: FusionPlan) -> MemoryPlan:
    rows = _buffer_rows(func, fusion)
    peak = assign_offsets(rows)
    return MemoryPlan(
        peak_bytes=peak,
        naive_bytes=naive_bytes(func),
        buffers=rows,
        offsets={row.value: row.offset for row in rows},
    )


def naive_bytes(func: Function) -> int:
    """What an eager run allocates for intermediates: every op result that is not returned."""
    returned = set(func.results)
    return sum(r.type.nbytes for op in func.ops for r in op.results if r not in returned)


def _buffer_rows(func: Function, fusion: FusionPlan) -> list[BufferRow]:
    returned = set(func.results)
    last_read: dict[Value, int] = {}
    for group in fusion.groups:
        for v in group.inputs:
            last_read[v] = max(last_read.get(v, -1), group.root_pos)
    rows = []
    for group in fusion.groups:
        for v in group.outputs:
            if v in returned or v.type.nbytes == 0:
                continue
            live = (group.root_pos, last_read.get(v, group.root_pos))
            rows.append(BufferRow(fusion.names[v], v, v.type.nbytes, -1, live))
    return rows


def assign_offsets(rows: list[BufferRow]) -> int:
    """No reuse: buffers side by side in order. Returns the arena size."""
    top = 0
    for row in rows:
        row.offset = top
        top = align(top + row.bytes)
    return top
