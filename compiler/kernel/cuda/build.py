"""The ``kernels`` and ``scratch`` passes for the CUDA target: every fusion group (or band) of a
planned program as a ``CudaKernel`` (``loops.py``, ``bands.py``, ``matmul.py``), and the kernels'
global scratch placed in the memory plan (``plan.place_scratch``), so the arena the plan reports
is all the memory a call uses besides its arguments and results."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.ir.core import Function, Value
from compiler.ir.types import DType
from compiler.kernel.cuda.bands import band_kernel
from compiler.kernel.cuda.loops import loop_kernel, reduce_kernel
from compiler.kernel.cuda.matmul import matmul_kernel
from compiler.kernel.cuda.records import CudaKernel, KernelSpec, Scratch
from compiler.kernel.cuda.scan import scan_kernel
from compiler.kernel.cuda.scatter import scatter_kernel
from compiler.kernel.cuda.updates import window_kernel
from compiler.kernel.emit import ConstantPool, py_name
from compiler.kernel.window import window_updates
from compiler.passes.fuse import FusionPlan, Group, GroupKind
from compiler.passes.loops import SCOPE_ATTR
from compiler.passes.plan import MemoryPlan, align, best_gap, place_scratch


@dataclass
class CudaKernels:
    """The kernels of a program for CUDA, by the group where each is launched (a band's at its
    first member's group), with the names of the buffers and the module's constants."""

    names: dict[Value, str]
    pool: ConstantPool
    kernels: dict[Group, CudaKernel]

    def every(self) -> list[CudaKernel]:
        """Every kernel of the module once, in launch order (a shared kernel once)."""
        tops = self.kernels.values()
        return list({k.name: k for top in tops for k in (top, *top.follow)}.values())


def build_kernels(func: Function, fusion: FusionPlan, plan: MemoryPlan, options: Any) -> CudaKernels:
    """The ``kernels`` pass for CUDA: each group's (or band's) kernel. Float matmuls launch through
    ``runtime.cublas.matmul_launcher`` with the program's ``Options.precision``."""
    precision = getattr(options, "precision", "highest")
    scope = str(func.attrs.get(SCOPE_ATTR, ""))  # a loop body's (``passes/loops.py``)
    names = {v: scope + py_name(n) for v, n in fusion.names.items()}
    pool = ConstantPool(scope)
    kernels: dict[Group, CudaKernel] = {}
    windows = window_updates(func, fusion, plan)  # in place: only the window is written
    places = memory_places(func, plan)
    overlap = memory_overlap(places)

    def same_memory(v: Value, w: Value) -> bool:
        return v.type.nbytes == w.type.nbytes and places(v) is not None and places(v) == places(w)

    for group in fusion.groups:
        band = fusion.band_of.get(group)
        if band is not None:  # one kernel for the band, where its first member would run
            if group is band.groups[0]:
                kernels[group] = band_kernel(band, names, pool, overlap)
            continue
        spec = KernelSpec(group, names, pool, same_memory)
        kernel = window_kernel(spec) if group in windows else _WRITERS[group.kind](spec)
        if kernel is not None:
            if kernel.wrapper and precision != "highest":
                kernel.wrapper_args = (repr(precision),)
            kernels[group] = kernel
    return CudaKernels(names, pool, kernels)


def memory_places(func: Function, plan: MemoryPlan) -> Callable[[Value], tuple[str, int, int] | None]:
    """Where each value's buffer is under ``plan``: ``(kind, first, end)``, a range of arguments
    (``"param"``: a parameter, a value the plan writes into an argument or keeps in a donated one),
    of results (``"result"``: a result, a value the plan keeps in its memory, ``in_result``) or of
    arena bytes (``"arena"``); ``None`` for a value with no placement here (a band's kept row)."""
    params = {p: i for i, p in enumerate(func.params)}
    results = {v: i for i, v in enumerate(func.results)}

    def where(v: Value) -> tuple[str, int, int] | None:
        for table in (params, plan.direct_writeback, plan.in_param):
            if v in table:
                return "param", table[v], table[v] + 1
        if v in plan.in_result or v in results:
            k = results[plan.in_result.get(v, v)]
            return "result", k, k + 1
        if v in plan.offsets:
            return "arena", plan.offsets[v], plan.offsets[v] + v.type.nbytes
        return None

    return where


def memory_overlap(where: Callable[[Value], tuple[str, int, int] | None]) -> Callable[[Value, Value], bool]:
    """Whether two values' buffers share bytes (``memory_places``: the same argument or result, or
    overlapping arena slots); a value with no placement shares with nothing."""

    def overlap(v: Value, w: Value) -> bool:
        a, b = where(v), where(w)
        return a is not None and b is not None and a[0] == b[0] and a[1] < b[2] and b[1] < a[2]

    return overlap


def plan_scratch(
    func: Function, fusion: FusionPlan, plan: MemoryPlan, program: CudaKernels, options: Any
) -> tuple[CudaKernels, MemoryPlan]:
    """The ``scratch`` pass for CUDA: each kernel's scratch (and its follow kernels') a row of the
    memory plan, live while the group it runs at is (``fusion.time``); the scratch learns its offset.
    Scratch of a launch sequence (a kernel and those that follow it) that no kernel of the sequence
    uses at once shares bytes: one row for the sequence (``_shared_scratch``)."""
    needs = []
    by_name: dict[str, tuple[Scratch, ...]] = {}
    for group, top in program.kernels.items():
        chain = [top, *top.follow]
        size, local = _shared_scratch(chain)
        if size < sum(align(s.nbytes) for s, _ in local):
            name = f"{top.name}_scratch"
            needs.append((name, top.name, size, DType.f64, fusion.time(group)))
            by_name[name] = tuple(s for s, _ in local)
            for s, offset in local:
                s.offset = offset  # within the sequence's row, placed below
            continue
        for k in chain:
            for s in k.scratch:
                needs.append((s.name, k.name, s.nbytes, s.dtype, fusion.time(group)))
                by_name[s.name] = (s,)
                s.offset = 0
    planned = place_scratch(plan, needs)
    for row in planned.buffers:
        if row.scratch_of is not None and row.name in by_name:  # (not a loop's arena: passes/loops.py)
            for s in by_name[row.name]:
                s.offset += row.offset
    return program, planned


def _shared_scratch(chain: list[CudaKernel]) -> tuple[int, list[tuple[Scratch, int]]]:
    """Offsets for the scratch of a launch sequence in one block of bytes, and its size: a scratch is
    in use from the kernel that owns it to the last kernel of the sequence that reads it (a band's
    partials until their combine, a column kernel's until its second pass); two in use at no common
    kernel may share bytes (the launches run one after the other on one stream)."""
    spans = []
    for i, k in enumerate(chain):
        for s in k.scratch:
            last = max(j for j, other in enumerate(chain) if s.name in other.args)
            spans.append((s, i, last))
    local: list[tuple[Scratch, int]] = []
    placed: list[tuple[int, int, int, int]] = []  # offset, bytes, first, last
    for s, first, last in spans:
        busy = [(o, n) for o, n, a, b in placed if a <= last and first <= b]
        offsets, sizes = (np.array([x[k] for x in busy], dtype=np.int64) for k in (0, 1))
        offset = best_gap(offsets, sizes, align(s.nbytes))  # as the planner places its blocks
        placed.append((offset, align(s.nbytes), first, last))
        local.append((s, offset))
    return max((o + n for o, n, _, _ in placed), default=0), local


_WRITERS: dict[GroupKind, Callable[[KernelSpec], CudaKernel | None]] = {
    GroupKind.LOOP: loop_kernel,
    GroupKind.REDUCE: reduce_kernel,
    GroupKind.CONTRACT: matmul_kernel,
    GroupKind.SCATTER: scatter_kernel,
    GroupKind.SCAN: scan_kernel,
    GroupKind.CONTROL: lambda spec: None,  # a loop: the driver runs its bodies' kernels
}
