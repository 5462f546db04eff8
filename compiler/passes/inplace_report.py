"""What became of each user in-place request, read off the memory plan the code follows.

A request (an op carrying ``dsl.inplace``, set at trace time by ``dsl/array.py``) is judged on where
the array's value is stored before and after it, never on the request's op alone: fusion may compute
it inside another kernel, a chain of hand-overs may store it over the operand's block, a band may keep
it one row at a time, and the code generator may resize slots (``plan.resize_slots``). So the facts
that no change of offsets alters are gathered once per plan (``find_requests``) and the verdict is
re-derived whenever the plan changes (``report_requests``): ``explain_inplace``, ``strict_inplace``,
``memory_plan().inplace`` and the bufferized stage's ``dsl.inplace_outcome`` all read that verdict.

- ``in place``: the value after the request lives where the value before it did (same arena offset
  and size, or the same argument's memory);
- ``fused``: nothing was copied, because the new value has no buffer, or the old value never had one
  (``y = x * 2; y += 1`` is one kernel);
- ``copy``: the old value stays in its buffer while the new one is computed into other memory; the
  reason names the line still reading the old value where there is one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from compiler.ir.core import Function, Location, Op, Value
from compiler.ir.verify import WRITEBACK
from compiler.passes.fuse import FusionPlan
from compiler.prims import dynamic as dyn
from compiler.prims.base import Kind

if TYPE_CHECKING:
    from compiler.passes.plan import MemoryPlan

INPLACE_ATTR = "dsl.inplace"
# Set on a loop's or branch's body function (``compiler/passes/loops.py``): the prefix of the names its
# generated code defines.
SCOPE_ATTR = "dsl.scope"
# Requests that write a source into the array (``dsl/methods.py``, ``Array.__setitem__``): the ops
# computing the written value read the source, not the array; only an op putting it into part of the
# base (``update_slice``, ``dynamic_update_slice``: ``PARTIAL_UPDATES``) reads the array's old value.
WRITES_A_SOURCE = frozenset({"setitem", "copy_", "fill_", "zero_"})


@dataclass
class InplaceDecision:
    """One in-place decision: a user's request (``request``) or a reuse the compiler chose."""

    value: str
    loc: Location
    request: str | None
    target: str
    outcome: str  # "in place" | "fused" | "copy"
    reason: str
    blocker: Location | None = None  # the line that still needs the old value, for a "copy"
    new: Value | None = field(default=None, repr=False, compare=False)  # a request's value

    def __str__(self) -> str:
        who = f"{self.request} " if self.request else ""
        return f"{self.loc}: {who}{self.value} -> {self.outcome} ({self.target}): {self.reason}"


@dataclass(frozen=True)
class InplaceRequest:
    """A user's in-place request (an op carrying ``dsl.inplace``) and the facts its outcome is judged
    on that no later change of offsets alters. ``old`` is the array's value before the request where
    it was last stored (``_stored_before``): the request's first operand, or, when that was never
    stored, the value it was computed from in the same kernel; ``None`` when the request does not
    read the old value. ``home`` is where the new value lives: itself, or for a view that has no
    buffer of its own, its base. ``decide_request`` judges it on the plan the code follows."""

    request: str
    loc: Location
    new: Value
    old: Value | None
    home: Value
    new_name: str
    old_name: str
    new_returned: bool  # its home is a result: fresh memory unless written straight back
    old_returned: bool
    new_in_band: bool  # kept one row at a time inside a band (``rows.py``): no buffer
    old_param: int | None  # the old value is argument ``old_param`` (the caller's array)
    home_param: int | None  # the new value is a view of argument ``home_param``
    copy_reason: str  # why the old value is kept beside the new one, if the plan keeps it
    blocker: Location | None  # the line that still reads the old value after the request
    through: tuple[Value, ...] = ()  # the request's own earlier ops' values (a view's new elements)
    in_body: bool = False  # in a loop's or branch's body: its arguments are the carries, not the caller's


def find_requests(
    func: Function, fusion: FusionPlan, plan: MemoryPlan, inplace: bool
) -> list[InplaceRequest]:
    """Every user in-place request of ``func`` (ops carrying ``dsl.inplace``), in program order. One
    request may be several ops (``_units``): judged as one, from the array's value before its first
    op to the value after its last."""
    ops = [op for op in func.ops if INPLACE_ATTR in op.attrs and op.results]
    if not ops:
        return []
    params = {p: i for i, p in enumerate(func.params)}
    returned = set(func.results)
    stored = set(plan.offsets) | set(plan.in_param) | set(plan.direct_writeback) | set(params) | returned
    stored |= set(plan.in_result)
    producer = {r: op for op in func.ops for r in op.results}
    position = {op: i for i, op in enumerate(func.ops)}
    out = []
    for unit in _units(ops):
        op = unit[-1]
        request = str(op.attrs[INPLACE_ATTR])
        new = op.result
        reader = next((u for u in unit if reads_old(u)), None)
        old = None if reader is None else _stored_before(reader, producer, stored)
        home = new
        while home not in stored and home in producer and _is_view_of_the_array(producer[home]):
            home = producer[home].operands[0]
        blocker = None if old is None else _later_reader(op, old, fusion, position)
        if not inplace:
            reason = "in-place is off (inplace=False or DSL_NO_INPLACE=1): reference plan"
        elif blocker is not None:
            reason = f"the old value is still read later, at {blocker.loc}; computed into a copy"
        else:
            reason = _copy_reason(func, fusion, plan, old, home, home in returned, old in returned)
        old_name = "-" if old is None else fusion.names.get(old, "?")
        facts = (
            home in returned,
            old in returned,
            new in fusion.local,
            None if old is None else params.get(old),
            params.get(home),
        )
        where = (new, old, home, fusion.names.get(new, "?"), old_name)
        blocked_at = None if blocker is None else blocker.loc
        through = tuple(u.result for u in unit[:-1])
        body = SCOPE_ATTR in func.attrs
        out.append(InplaceRequest(request, op.loc, *where, *facts, reason, blocked_at, through, body))
    return out


def overwritten(ops: tuple[Op, ...] | list[Op]) -> set[Value]:
    """The values the user's in-place requests among ``ops`` write over: each array's value just
    before a request that reads it (followed back through the request's own ops on its line and
    through views, as ``_stored_before`` follows them). The optimizer keeps each its own op
    (``simplify``: never merged by CSE, never replaced by an equal value such as ``x`` for
    ``x.copy()`` or ``x * 1.0``): merged, the user's array would share its value with another one
    the program still reads, and the request would be judged a copy that only the merge forced."""
    producer = {r: op for op in ops for r in op.results}
    out = set()
    for op in ops:
        if INPLACE_ATTR not in op.attrs or not op.results or not reads_old(op):
            continue
        v = op.operands[0]
        p = producer.get(v)
        while p is not None and p.operands and INPLACE_ATTR not in p.attrs and not p.regions:
            if p.loc != op.loc and p.prim.memory.view_of != 0:
                break
            v = p.operands[0]
            p = producer.get(v)
        out.add(v)
    return out


def _units(ops: list[Op]) -> list[list[Op]]:
    """The requests' ops grouped by request: an in-place update of a view is the new elements
    computed, viewed back to the base's window and written into the base (``y[0].add_(1)``: ``add``,
    ``reshape``, ``update_slice``), each op of one statement reading the one before."""
    units: list[list[Op]] = []
    for op in ops:
        key = (op.loc, op.attrs[INPLACE_ATTR])
        # (not always the last unit: scheduling may move a request's first op, the new elements,
        # before another request's ops)
        unit = next(
            (
                u
                for u in reversed(units)
                if (u[-1].loc, u[-1].attrs[INPLACE_ATTR]) == key and u[-1].result in op.operands
            ),
            None,
        )
        if unit is not None:
            unit.append(op)
        else:
            units.append([op])
    position = {op: i for i, op in enumerate(ops)}
    return sorted(units, key=lambda u: position[u[-1]])  # in the order the requests complete


def _copy_reason(
    func: Function,
    fusion: FusionPlan,
    plan: MemoryPlan,
    old: Value | None,
    home: Value,
    returned: bool,
    old_returned: bool,
) -> str:
    """Why the planner did not store the new value (``home``) over ``old`` when no later kernel reads
    ``old``: the first of these that holds, in the order the planner asks."""
    if old_returned:  # in a loop body: the old carry yielded as a row of ys (a gradient's residual)
        what = " of the loop body (a row of its ys; under a gradient, the value its backward reads)"
        where = what if SCOPE_ATTR in func.attrs else ""
        return f"the old value is also a result{where}, so the new value is computed into other memory"
    body = SCOPE_ATTR in func.attrs  # a loop's or branch's body: its caller is the loop
    kernel = next((g for g in fusion.groups if home in g.outputs), None)  # the kernel storing it
    if old is not None and kernel is not None and not fusion.in_place_safe(old, home, kernel):
        return OTHER_ELEMENTS  # (``x += x.T``: written straight back, it would read what it wrote)
    if returned:
        if body:
            return "the value is yielded by the body (a carry or a row of ys): fresh memory"
        return "the value is returned (or written back) to the caller: fresh memory"
    if old in func.params:
        if func.params.index(old) in {int(i) for i in func.attrs.get(WRITEBACK, ())}:
            if body:
                return "the old value is the loop's carry, which only the body's final value is written into"
            return (
                "the old value is the caller's array, which only the argument's final value is written into"
            )
        return (
            "the old value is a value of the enclosing block, which it still owns"
            if body
            else ("the old value is an input the caller still owns")
        )
    name = fusion.names.get(old, "") if old is not None else ""
    taker = next((r for r in plan.buffers if name and r.reused_from == name and r.value is not home), None)
    if taker is not None:  # another output of the kernel took the dying block first
        op = next((o for o in func.ops if taker.value in o.results), None)
        at = f" ({op.prim.name}, {op.loc})" if op is not None else ""
        return f"its memory went to {taker.name}{at}, which the same kernel computes from it: fresh memory"
    return OTHER_ELEMENTS


OTHER_ELEMENTS = "its kernel reads the old value at other elements than it writes"


def reads_old(op: Op) -> bool:
    """Whether the request's op ``op`` reads the array's value before the request (its operand 0)."""
    if not op.operands:
        return False
    if str(op.attrs[INPLACE_ATTR]) in WRITES_A_SOURCE:  # a window or the indexed elements keep the rest
        return op.prim in dyn.PARTIAL_UPDATES or op.prim.kind is Kind.SCATTER
    return True


def _is_view_of_the_array(op: Op) -> bool:
    """``op``'s result is a view of its operand 0 that holds the array's value (not a view of the
    source a ``setitem`` or ``copy_`` writes, which lives in the source's storage)."""
    return op.prim.memory.view_of == 0 and (INPLACE_ATTR not in op.attrs or reads_old(op))


def _stored_before(op: Op, producer: dict[Value, Op], stored: set[Value]) -> Value:
    """The array's value before the request ``op`` as it was last stored. Followed back from ``op``'s
    first operand (the array's value before the write) while that was never stored: through the
    request's own unmarked ops (on the request's line: ``scale_(2, bias=1)`` is a multiply then an
    add), through earlier in-place requests on the array fused into the same kernel, and through
    views (they share their base's storage). It stops at a stored value or at a value an ordinary op
    computed without storing it: then the array never had a buffer before the request."""
    request_loc = op.loc
    v = op.operands[0]
    while v not in stored:
        p = producer.get(v)
        if p is None or not p.operands:
            break
        earlier_request = INPLACE_ATTR in p.attrs
        own = p.loc == request_loc or p.prim.memory.view_of == 0
        if not (earlier_request or own) or (earlier_request and not reads_old(p)):
            break
        if earlier_request:
            request_loc = p.loc
        v = p.operands[0]
    return v


def _later_reader(op: Op, old: Value, fusion: FusionPlan, position: dict[Op, int]) -> Op | None:
    """An op reading ``old`` in a kernel that runs after the one computing the request ``op``."""
    group = fusion.group_of.get(op)
    for later in fusion.groups:
        runs_after = later.index > group.index if group is not None else later.root_pos > position[op]
        if runs_after and later is not group and old in later.inputs:
            return next((x for x in later.ops if old in x.operands), later.root)
    return None


def decide_request(r: InplaceRequest, plan: MemoryPlan) -> InplaceDecision:
    """The outcome of request ``r`` in ``plan``: ``in place`` when the value after the request lives
    where the value before it did (same arena offset and size, or the same argument's memory);
    ``fused`` when there was nothing to copy (the new value has no buffer, or the old value never had
    one: both live only inside one kernel); else ``copy``: the old value stays in its buffer and the
    new one is computed into other memory, for ``r.copy_reason``."""
    decision = InplaceDecision(r.new_name, r.loc, r.request, r.old_name, "fused", "", new=r.new)
    new_at = _storage_of(r.home, plan, r.new_returned, r.home_param)
    old_at = None if r.old is None else _storage_of(r.old, plan, r.old_returned, r.old_param)
    # (the new elements' own memory: not the buffer they were computed into in place, the array's)
    through = [b for b in plan.buffers if b.value in r.through and b.in_arena]
    staged = sum(b.bytes for b in through if _storage_of(b.value, plan, False, None) not in (new_at, old_at))
    if new_at is None:
        decision.reason = (
            "kept one row at a time inside its band of row-fused kernels: needs no buffer"
            if r.new_in_band
            else "computed inside its kernel's loop: needs no buffer"
        )
        if staged:  # (``x[1:] += 1`` read by a later kernel: the window's new elements are stored)
            decision.reason = (
                "the array's new value is computed inside the kernel that reads it next, from new "
                f"elements computed first into {staged} bytes"
            )
    elif r.old is None:
        decision.outcome = "in place"
        decision.reason = "writes the array without reading its old value: nothing to copy"
    elif old_at is None:
        decision.reason = f"the old value {r.old_name} is never stored (computed in the same kernel): no copy"
    elif new_at == old_at:
        decision.outcome, decision.reason = "in place", _where_in_place(r, plan)
        if staged:
            decision.reason += f"; the new elements are computed first into {staged} bytes"
    else:
        decision.outcome, decision.reason, decision.blocker = "copy", r.copy_reason, r.blocker
    return decision


def _storage_of(v: Value, plan: MemoryPlan, returned: bool, param: int | None) -> tuple[object, ...] | None:
    """Where ``v`` is stored in ``plan``: an argument's memory, an arena slot (offset and size), its
    own result memory, or nowhere (``None``: computed inside a kernel)."""
    if v in plan.direct_writeback:
        return ("arg", plan.direct_writeback[v])
    if v in plan.in_param:
        return ("arg", plan.in_param[v])
    if v in plan.in_result:
        return ("result", plan.in_result[v])
    if v in plan.offsets:
        return ("arena", plan.offsets[v], next(r.bytes for r in plan.buffers if r.value is v))
    if param is not None:
        return ("arg", param)
    return ("result", v) if returned else None


def _where_in_place(r: InplaceRequest, plan: MemoryPlan) -> str:
    if r.home is not r.new:
        return f"a view of the buffer of {r.old_name}: nothing moves"
    if r.new in plan.direct_writeback:
        return (
            "written straight into the loop's carry"
            if r.in_body
            else "written straight into the caller's array (when C-contiguous; another layout is "
            "copied in and back)"
        )
    if r.new in plan.in_param:
        k = plan.in_param[r.new]
        if k in plan.mutated_args:
            return f"kept in the memory of argument {k}, which the program mutates"
        return f"kept in the memory of donated argument {k}"
    row = next((b for b in plan.buffers if b.value is r.new), None)
    if row is None:  # a result, computed where its operand already was (``MemoryPlan.in_result``)
        return f"stored over {r.old_name}, which the plan keeps in the result's own memory"
    if row.reused_from == r.old_name:
        return f"reuses the buffer of {r.old_name}"
    return f"stored over the buffer of {r.old_name} (offset {row.offset}), handed over in place"


def report_requests(plan: MemoryPlan) -> None:
    """Re-derive the outcome of every user request from ``plan`` as it is now (``plan.inplace``'s
    request rows); run whenever the plan changes, so the report cannot disagree with it."""
    chosen = [d for d in plan.inplace if not d.request]
    own = {r.new for r in plan.requests}
    nested = [d for d in plan.inplace if d.request and d.new not in own]  # loop bodies' (passes/loops.py)
    plan.inplace = chosen + [decide_request(r, plan) for r in plan.requests] + nested
