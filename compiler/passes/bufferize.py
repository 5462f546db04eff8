"""How the kernel stages print: the optimized IR annotated with what ``fuse``, ``rows`` and ``plan``
decided (the pipeline's ``fused``, ``row_fused``, ``planned`` and ``bufferized`` stages).

- ``fused``: each op computed in a kernel carries ``dsl.kernel`` (the index of its fusion group);
  ops without it were dropped (dead) or are inlined wherever they are read (index maps, literals).
- ``row_fused``: also ``dsl.band`` (the index of its band of row-fused kernels,
  ``compiler/passes/rows.py``) on the ops of a band's members, and ``dsl.buffer = "row"`` on a value
  the band keeps one row per thread instead of a buffer.
- ``planned`` (tensor types) and ``bufferized`` (memref types: the ``dsl.bufferized`` function
  attribute) carry the memory plan: for a value that gets a buffer either ``dsl.offset`` (its arena
  offset in bytes; with ``dsl.reuses = "%N"`` when it took over the block of operand ``%N`` in
  place), ``dsl.buffer = "result"`` (allocated fresh per call, returned to the caller),
  ``dsl.buffer = "arg K"`` (stored in argument K's memory: a direct write-back or a donated argument)
  or ``dsl.buffer = "row"``. A buffer stored in another shape than its own carries ``dsl.stored_as``
  (a row-block region's own buffer: one block of rows per thread, ``plan.resize_slots``, which the
  CPU code generator still applies after the pipeline). Ops without a buffer were fused into their
  kernel's loop. An op realizing a user's in-place request carries ``dsl.inplace_outcome``: the
  plan's verdict on it (``inplace_report.decide_request``), derived from these same offsets and reuses.
"""

from __future__ import annotations

from typing import Any

from compiler.ir.core import Block, Function, Op, Value
from compiler.ir.printer import BUFFERIZED
from compiler.passes.fuse import FusionPlan, value_names
from compiler.passes.plan import MemoryPlan


def annotate_kernels(func: Function, fusion: FusionPlan) -> Function:
    """The ``fused`` stage (and, once bands are formed, the ``row_fused`` one): ``dsl.kernel`` per op,
    ``dsl.band`` and ``dsl.buffer = "row"`` for row-fused kernels."""
    band_index = {id(b): i for i, b in enumerate(fusion.bands)}
    local = fusion.local
    ops = []
    for op in func.ops:
        group = fusion.group_of.get(op)
        if group is None:
            ops.append(op)
            continue
        attrs: dict[str, Any] = {**op.attrs, "dsl.kernel": group.index}
        band = fusion.band_of.get(group)
        if band is not None:
            attrs["dsl.band"] = band_index[id(band)]
        if op.results and op.results[0] in local:
            attrs["dsl.buffer"] = "row"
        ops.append(Op(op.prim, op.operands, attrs, op.results, op.loc, op.regions))
    return func.replace_body(Block(func.params, tuple(ops), func.results))


def annotate(func: Function, fusion: FusionPlan, plan: MemoryPlan, bufferized: bool = True) -> Function:
    """The ``bufferized`` stage (memref types), or with ``bufferized=False`` the ``planned`` one."""
    returned = set(func.results)
    rows = {r.value: r for r in plan.buffers}
    in_arg = {**plan.in_param, **plan.direct_writeback}
    local = fusion.local
    outcome = _request_outcomes(plan)
    ops = []
    for op in func.ops:
        attrs: dict[str, Any] = dict(op.attrs)
        group = fusion.group_of.get(op)
        if group is not None:
            attrs["dsl.kernel"] = group.index
        result = op.results[0] if op.results else None
        if result in plan.offsets:
            attrs["dsl.offset"] = plan.offsets[result]
        if result in rows and rows[result].reused_from:
            attrs["dsl.reuses"] = rows[result].reused_from
        elif result in plan.result_reuses:
            attrs["dsl.reuses"] = plan.result_reuses[result]
        if result in rows and rows[result].stored_as:
            attrs["dsl.stored_as"] = rows[result].stored_as
        if result in in_arg:
            attrs["dsl.buffer"] = f"arg {in_arg[result]}"
        elif result in plan.in_result:  # in the memory of result k (its in-place chain)
            attrs["dsl.buffer"] = f"result {list(func.results).index(plan.in_result[result])}"
        elif result in local:
            attrs["dsl.buffer"] = "row"
        elif result in returned and result not in plan.offsets:
            attrs["dsl.buffer"] = "result"
        if result in outcome:
            attrs["dsl.inplace_outcome"] = outcome[result]
        ops.append(Op(op.prim, op.operands, attrs, op.results, op.loc, op.regions))
    marks = {BUFFERIZED: True} if bufferized else {}
    fattrs = {**func.attrs, **marks, "dsl.arena_bytes": plan.peak_bytes}
    scratch = [
        f"{r.name}: {r.bytes} bytes at {r.offset} ({r.scratch_of})" for r in plan.buffers if r.scratch_of
    ]
    if scratch:  # the kernels' own scratch (the scratch pass): rows of the plan that are no value
        fattrs["dsl.scratch"] = "; ".join(scratch)
    return func.replace_body(Block(func.params, tuple(ops), func.results), attrs=fattrs)


def annotate_inplace(func: Function, fusion: FusionPlan | None, plan: MemoryPlan) -> Function:
    """The ``inplace`` pass of ``dslc opt`` (after ``plan``): each value that takes over an operand's
    buffer gets ``dsl.reuses = "%N"``; each user in-place request gets ``dsl.inplace_outcome`` and the
    reason."""
    reuses = {r.value: r.reused_from for r in plan.buffers if r.reused_from} | plan.result_reuses
    names = fusion.names if fusion is not None else value_names(func)
    reuses |= {v: names[x] for v, x in plan.writeback_donors(func).items()}
    outcome = _request_outcomes(plan)
    ops = []
    for op in func.ops:
        attrs: dict[str, Any] = dict(op.attrs)
        v = op.results[0] if op.results else None
        if v in reuses:
            attrs["dsl.reuses"] = reuses[v]
        if v in outcome:
            attrs["dsl.inplace_outcome"] = outcome[v]
        ops.append(Op(op.prim, op.operands, attrs, op.results, op.loc, op.regions))
    return func.replace_body(Block(func.params, tuple(ops), func.results))


def _request_outcomes(plan: MemoryPlan) -> dict[Value, str]:
    """``"<outcome>: <reason>"`` of each user request's value, as ``plan.inplace`` reports it."""
    return {d.new: f"{d.outcome}: {d.reason}" for d in plan.inplace if d.new is not None}
