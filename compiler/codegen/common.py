"""The driver skeleton both backends print: where each stored value's buffer is and when it must exist
(``allocations``), which results the caller allocates, which the driver copies (``returned``), and
the sanitizer's poison; and the names of buffers in generated code."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.ir.core import Function, Value
from compiler.ir.types import DType
from compiler.kernel.emit import py_name, shape_literal
from compiler.passes.fuse import FusionPlan, Group
from compiler.passes.inplace_report import SCOPE_ATTR
from compiler.passes.loops import Body, Loop, Route
from compiler.passes.plan import BufferRow, MemoryPlan, caller_allocated

__all__ = [
    "Level",
    "Placement",
    "Route",
    "body_lines",
    "carry_swaps",
    "initial_copies",
    "allocations",
    "caller_allocated",
    "program_facts",
    "placement",
    "poison_after",
    "poison_value",
    "py_name",
    "returned",
    "shape_literal",
]


def poison_value(dtype: DType) -> float | int | bool:
    """What the sanitizer writes into a dead buffer: NaN, or a value no test program produces."""
    if dtype.is_float:
        return math.nan
    return True if dtype.is_bool else int(np.iinfo(dtype.np).min) + 7


def poison_after(fusion: FusionPlan, plan: MemoryPlan) -> dict[Group, list[BufferRow]]:
    """Sanitizer: the arena buffers to poison after each group, i.e. those whose value dies there
    and whose block is not handed on in place to a value of that group."""
    handed_on = {r.reused_from for r in plan.buffers if r.reused_from}
    by_pos = {g.root_pos: g for g in fusion.groups}
    out: dict[Group, list[BufferRow]] = {}
    for row in plan.buffers:
        if row.in_arena and row.name not in handed_on and row.live[1] in by_pos:
            out.setdefault(by_pos[row.live[1]], []).append(row)
    return out


@dataclass(frozen=True)
class Placement:
    """Where a stored value's buffer is, for the driver: ``kind`` is ``"argument"`` (the new value of
    argument ``param``, written into the caller's array), ``"donated"`` (in donated argument
    ``param``'s memory), ``"result"`` (in the memory of the caller-allocated result ``result``:
    ``MemoryPlan.in_result``), ``"arena"`` (at ``offset``; ``nbytes`` the slot's size when the regions
    pass resized it to one block of rows per thread, else None) or ``"fresh"`` (a function result
    allocated per call, or a zero-size value)."""

    value: Value
    kind: str
    param: int = -1
    offset: int = -1
    nbytes: int | None = None
    result: Value | None = None


def placement(v: Value, plan: MemoryPlan, resized: dict[Value, int]) -> Placement:
    """``v``'s placement; ``resized``: the arena slots the regions pass resized, by value."""
    if v in plan.direct_writeback:
        return Placement(v, "argument", param=plan.direct_writeback[v])
    if v in plan.in_param:
        return Placement(v, "donated", param=plan.in_param[v])
    if v in plan.in_result:
        return Placement(v, "result", result=plan.in_result[v])
    if v in plan.offsets:
        return Placement(v, "arena", offset=plan.offsets[v], nbytes=resized.get(v))
    return Placement(v, "fresh")


def allocations(
    func: Function,
    fusion: FusionPlan,
    plan: MemoryPlan,
    outs: list[Value],
    hoist: dict[Group, list[Group]] | None = None,
) -> dict[Group, list[Placement]]:
    """The driver skeleton both backends print: per group, the buffers that must exist before its
    kernel runs (a band's, every member's, where its first member runs; a row-block region's, every
    member's, where it starts: ``hoist``), without the results the caller passes in (``outs``) and
    the values a band keeps per row (no buffer)."""
    passed_in, local = set(outs), fusion.local
    resized = {r.value: r.bytes for r in plan.buffers if r.stored_as}
    out: dict[Group, list[Placement]] = {}
    hoisted: set[Group] = set()
    for group in fusion.groups:
        for g in [] if group in hoisted else (hoist or {}).get(group, [group]):
            hoisted.add(g)
            band = fusion.band_of.get(g)
            if band is None or g is band.groups[0]:
                stored = [v for b in (band.groups if band else [g]) for v in b.outputs]
                out.setdefault(group, []).extend(
                    placement(v, plan, resized) for v in stored if v not in passed_in and v not in local
                )
    return out


def returned(func: Function) -> list[tuple[Value, bool]]:
    """The function's results, each with whether the driver returns a copy (an argument, or a value
    returned twice: results never alias anything). A write-back (the results' tail) is read only by
    the executable, which copies it into the caller's array: one that is also a public result is
    that result, not a copy of it (``a += 1; return a``)."""
    out, seen = [], set(func.params)
    # (a loop's body: its write-backs are carries, which the loop code moves)
    writebacks = 0 if SCOPE_ATTR in func.attrs else len(func.attrs.get("dsl.writeback", ()))
    first_writeback = len(func.results) - writebacks
    for k, v in enumerate(func.results):
        out.append((v, v in func.params if k >= first_writeback else v in seen))
        seen.add(v)
    return out


def program_facts(func: Function, plan: MemoryPlan, outs: list[Value]) -> dict[str, Any]:
    """The fields both backends' program records (``CpuProgram``, ``CudaProgram``) take from the
    function and its plan: results, write-backs, the arena's size, the caller-allocated results."""
    return dict(
        n_results=len(func.results),
        writeback=tuple(int(i) for i in func.attrs.get("dsl.writeback", ())),
        arena_bytes=plan.peak_bytes,
        direct_writeback=tuple(sorted(plan.direct_writeback.values())),
        result_types=[v.type for v in func.results],
        out_types=[v.type for v in outs],
    )


@dataclass
class Level:
    """A program a driver runs: the function itself, or a loop's body (``passes/loops.py``), with its
    plan, its target's kernels and the loops it holds in turn."""

    func: Function
    fusion: FusionPlan
    plan: MemoryPlan
    kernels: Any  # the target's kernels (CpuKernels, CudaKernels): ``names``, ``pool``, ``kernels``
    loops: dict[Group, Loop]
    sanitize: bool

    @property
    def outs(self) -> list[Value]:
        return caller_allocated(self.func, self.plan)

    @property
    def poison(self) -> dict[Group, list[BufferRow]]:
        return poison_after(self.fusion, self.plan) if self.sanitize else {}

    def body(self, body: Body) -> Level:
        p = body.program
        assert p.fusion is not None and p.plan is not None and p.kernels is not None
        return Level(body.func, p.fusion, p.plan, p.kernels, p.loops, self.sanitize)

    def levels(self) -> list[Level]:
        """This program and every loop body in it, nested ones included."""
        out = [self]
        for loop in self.loops.values():
            for body in loop.bodies:
                out += self.body(body).levels()
        return out


def initial_copies(outer: Level, loop: Loop) -> list[tuple[Value, Value]]:
    """The ``(carry, init)`` pairs a driver copies before a loop's first iteration: all but those whose
    carry took its dying initial value's block (in place: nothing to copy)."""
    rows = {r.value: r for r in outer.plan.buffers}
    out = []
    for init, carry in zip(loop.inits, loop.carries, strict=True):
        row = rows.get(carry)
        if row is None or row.reused_from != outer.fusion.names[init]:
            out.append((carry, init))
    return out


def carry_swaps(loop: Loop, scope: str) -> dict[int, tuple[str, str]]:
    """The names a driver gives each carry with a temporary (``Loop.temps``): the buffer holding its
    current value and the one its next value goes to. They start as the carry's buffer and the
    temporary and swap after every iteration, so a new carry its body cannot write in place (a
    matmul's) costs no copy per iteration, one at most after the loop."""
    return {j: (f"{scope}cur{j}", f"{scope}nxt{j}") for j in sorted(loop.temps)}


def body_lines(
    loop: Loop,
    body: Body,
    names: dict[Value, str],
    buffer: Callable[[Value | None, str, int, bool], str],
    copy: Callable[[str, str, Value], list[str]],
    swaps: dict[int, tuple[str, str]],
    flip: str,
) -> tuple[list[str], list[str]]:
    """The driver lines around one run of ``body`` (``names``: its generated names): binding its
    parameters and bound results to the loop's buffers (``buffer``: the printer's spelling of a
    loop buffer), and after it the copies of its other results (``copy(dst, src, value)``) and the
    swap of the carries with temporaries (``carry_swaps``)."""
    bind = [
        f"{names[p]} = {buffer(loop.reads(kind, j), kind, j, False)}"
        for p, (kind, j) in zip(body.func.params, body.params, strict=True)
    ]
    after: list[str] = []
    for r in body.routes():
        target = buffer(loop.writes(r.kind, r.j), r.kind, r.j, r.temp)
        if r.bound:  # the body's kernels write it there
            bind.append(f"{names[r.value]} = {target}")
        else:
            after += copy(target, names[r.value], r.value)
    if body.role == "body" and swaps:  # the new carries become the current ones
        after += [f"{c}, {n} = {n}, {c}" for c, n in swaps.values()] + [f"{flip} = not {flip}"]
    return bind, after
