"""Loop-invariant code motion: an op of a loop body that reads only the loop's consts, constants and
other invariant values computes the same value every iteration, so it runs once, before the loop.

``hoist_invariants`` is called by ``simplify`` on each ``for``, ``while`` and ``scan`` (taken apart:
``compiler/passes/region_parts.py``) after it has simplified the loop's regions, which have already
hoisted what they could out of the loops nested in them: an invariant of an inner loop that is
invariant in the outer one too keeps moving out, one loop per level, as far as it can go.

What moves: every op whose operands are all invariant, region ops included (a loop over consts
only), except
- a ``while`` loop, or an op holding one: the enclosing loop may run zero times, and a ``while`` run
  before it might not end;
- an op carrying a user's in-place request (``dsl.inplace``): it stays where the user wrote it;
- a constant: nothing to save, and a body's constants are what folding inside it works with (an
  invariant op that reads one takes a copy of it along).

Nothing moves out of an ``if`` (its branch might not be taken). All primitives are pure and total
(no traps: a float op gives inf or NaN, an integer division by zero a defined value), so computing
an invariant once even when the loop runs zero times changes no result.
"""

from __future__ import annotations

from compiler.ir.core import Op, Value, clone_ops
from compiler.passes.region_parts import Parts, Region
from compiler.prims import control, source

INPLACE_ATTR = "dsl.inplace"


def hoist_invariants(parts: Parts) -> list[Op]:
    """Move the invariant ops of ``parts``'s regions out: returns their copies reading the loop's
    operands (to be placed before it); each value the region still reads becomes a new const."""
    if not parts.is_loop:
        return []
    hoisted: list[Op] = []
    for r, region in enumerate(parts.regions):
        moving, staying = _split(region)
        if not any(op.prim is not source.constant for op in moving):
            continue
        mapping: dict[Value, Value] = dict(zip(region.consts, parts.consts, strict=True))
        hoisted += clone_ops(moving, mapping)
        region.ops = staying
        still_read = {v for op in staying for v in op.operands} | set(region.yields)
        for op in moving:
            for v in op.results:
                if op.prim is not source.constant and v in still_read:
                    # the region's value becomes its argument of the new const lane
                    parts.add_const(mapping[v], {r: v})
    return hoisted


def _split(region: Region) -> tuple[list[Op], list[Op]]:
    """The region's ops that move (constants among them are copied, not moved) and those that stay."""
    invariant: set[Value] = set(region.consts)
    moving: list[Op] = []
    staying: list[Op] = []
    for op in region.ops:
        if _movable(op) and all(v in invariant for v in op.operands):
            invariant.update(op.results)
            moving.append(op)
            if op.prim is source.constant:
                staying.append(op)
        else:
            staying.append(op)
    return moving, staying


def _movable(op: Op) -> bool:
    return INPLACE_ATTR not in op.attrs and op.prim is not control.while_loop and not _holds_while(op)


def _holds_while(op: Op) -> bool:
    return any(inner.prim is control.while_loop or _holds_while(inner) for b in op.regions for inner in b.ops)
