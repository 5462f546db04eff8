"""In-place window updates: an update of a window (``update_slice``, ``dynamic_update_slice``:
``prims.dynamic.PARTIAL_UPDATES``) whose result the memory plan stores over its base's buffer
writes only the window.

Such an update's kernel would otherwise loop over every element of the base, copying each element
outside the window onto itself: ``c[i] = v`` in a loop then costs the whole array per iteration.
When the base's buffer already holds the base, the elements outside the window are already right,
and a kernel over the window's elements (the update's shape) is enough: element ``j`` of the update
goes to ``corner + j`` (``stride * j`` for a strided static window), the corner wrapped and clamped
exactly as the scalar lowering clamps it.

The decision (``window_updates``) is made by the ``kernels`` pass of each target from the fusion
and memory plans, for a group when
- it is a LOOP group whose root is a partial update and whose only output is that root's result:
  another output of the group (a value computed over the base's whole iteration space and stored
  as well) must still be written whole, so such a group keeps the full loop. Elementwise ops fused
  into the update (the new window's values: ``c[i] * 2 + 1``) are computed for the window's
  elements only, as the update reads them;
- not a band member (a band's kernel is written row by row for all its members);
- the result takes over the buffer of the root's base operand itself (``MemoryPlan``: the result's
  row ``reused_from`` the base, the base kept in the memory of the function's result the update is
  (``result_reuses``), or the base is an argument written back directly into the caller's array),
  not of some other input the base was computed from (``exp(c)`` updated in c's buffer needs every
  element computed).

The planner only computes an update over its base when the group reads the base at the element
being written and nowhere else (``FusionPlan.in_place_safe``), so the window kernel, which no
longer reads the base at all outside what the update's own value reads, never reads an element
another iteration writes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from compiler.ir.core import Function, Op, Value
from compiler.kernel.ir import Expr, uses_of
from compiler.passes.fuse import FusionPlan, Group, GroupKind
from compiler.passes.plan import MemoryPlan
from compiler.prims import dynamic as dyn
from compiler.prims import movement as mv


def window_updates(func: Function, fusion: FusionPlan, plan: MemoryPlan) -> set[Group]:
    """The groups whose kernel writes only the window of their root update (the module docstring)."""
    by_name = {n: v for v, n in fusion.names.items()}
    donor = {r.value: by_name[r.reused_from] for r in plan.buffers if r.reused_from in by_name}
    donor.update(plan.writeback_donors(func))
    donor.update({v: by_name[n] for v, n in plan.result_reuses.items() if n in by_name})  # (result memory)
    out = set()
    for group in fusion.groups:
        root = group.root
        if group.kind is not GroupKind.LOOP or root.prim not in dyn.PARTIAL_UPDATES:
            continue
        if group in fusion.band_of or group.outputs != [root.result]:
            continue
        base = root.operands[0]
        if base in group.inputs and donor.get(root.result) is base:
            out.add(group)
    return out


def window_index(
    op: Op, at: Sequence[str], start: Callable[[Value, tuple[str, ...]], str]
) -> tuple[str, ...]:
    """The index in ``op``'s result (a partial update) of element ``at`` of its update; ``start``:
    the expression of a start operand (a dynamic update's) at an index (a start per row is read at
    the row of ``at``, on axes the window spans whole). Each entry records the variables of ``at``
    it uses (an ``Expr``)."""
    base, update = (v.type for v in op.operands[:2])
    if op.prim is mv.update_slice:
        starts = (int(s) for s in op.attrs["start"])
        strides = (int(s) for s in op.attrs["stride"])
        return tuple(
            Expr(
                f"{j}" if (s, st) == (0, 1) else f"{s} + {j}" if st == 1 else f"{s} + {st} * {j}", uses_of(j)
            )
            for j, s, st in zip(at, starts, strides, strict=True)
        )
    assert op.prim is dyn.dynamic_update_slice, f"{op.prim.name} is no window update"
    out = []
    for axis, (j, d, n) in enumerate(zip(at, base.shape, update.shape, strict=True)):
        if n == d:  # the window spans the axis: it starts at 0
            out.append(j)
        else:
            s = op.operands[2 + axis]
            row = tuple(at[: s.type.rank])
            corner = dyn.clamped_start(start(s, row), d, n)
            out.append(Expr(f"{corner} + {j}", uses_of(j).union(*(uses_of(r) for r in row))))
    return tuple(out)
