"""Rematerialization: recompute a cheap stored value in the later kernels that read it, instead of
keeping its buffer alive until the last of them.

Fusion stores a value that several kernels read (``1 - t * t`` of a tanh's derivative, read by both
backward passes of a second derivative; ``0.5 * h`` of a GELU, read by the forward and the backward).
When the value is cheap (elementwise: arithmetic, or a float32 function with a vectorized polynomial,
``ew.cheap_to_recompute``, as fusion's rule) and the buffers it is computed from are live at a
later reader anyway, recomputing it there costs a few flops per element and frees its buffer from the
kernel that stores it to that reader. Fusion's own recompute rule (``fuse``, rule 3) does this only
when the operands are buffers by their kind (params, reduction and matmul results); this pass asks
the plan instead: an operand qualifies when a kernel at or after the reader still reads its buffer.

For each stored value ``v`` (cheap elementwise, not returned, not a user's in-place request) and each
later kernel ``g`` (LOOP or REDUCE) whose elementwise or reduction ops read ``v``'s buffer along one
index path (so the copy is evaluated once per element, like its reader), a copy of ``v``'s
op is placed before ``g``'s first read of it, and ``g`` reads the copy: fusion then computes it inside
``g``'s loop. An operand of the copy is read as it is when it is a parameter, a buffer read at or after
``g`` anyway, or an index map or literal (fusion recomputes those wherever they are read) over such
values; a cheap elementwise operand that has no buffer is copied too (up to ``DEPTH`` levels), and so
is a stored one that ``g`` recomputes as well (one copy per value and reader, shared): a tanh-form
GELU's backward then recomputes ``t`` for both ``1 + t`` and ``1 - t * t``, and neither keeps the
stored ``t`` alive (the transformer block at issue 27's size: 839 MB planned -> 705 MB, XLA 772 MB).

The rewritten function is fused, row-fused and planned as the pipeline will ship it (``plan.Planner``),
and kept only when its planned peak is smaller: the pass never makes the plan bigger. Every copy
computes, element for element, the same operations on the same values as the op it copies, so
results are bit-identical. ``Options.remat`` / ``DSL_NO_REMAT=1`` switch it off.
"""

from __future__ import annotations

from collections import defaultdict

from compiler.ir.core import Block, Function, Op, Value
from compiler.passes.fuse import FusionPlan, Group, GroupKind
from compiler.passes.plan import INPLACE_ATTR, Planner
from compiler.prims import elementwise as ew
from compiler.prims.base import Kind

DEPTH = 8  # elementwise and index-map levels a copy may reach back through (a tanh-form GELU's: 8)
_AT_OWN_INDEX = frozenset({Kind.ELEMENTWISE, Kind.REDUCTION})  # readers that read v where they compute


def rematerialize(func: Function, planner: Planner | None = None) -> Function:
    """``func`` with cheap stored values recomputed in their later readers, when that shrinks the plan
    ``planner`` makes (default: ``Planner()``, no bands)."""
    if any(op.regions for op in func.ops):
        return func
    planner = planner or Planner()
    fusion = planner.fuse(func)
    copies = _Copier(func, fusion).run()
    if not copies:
        return func
    ops: list[Op] = []
    for op in func.ops:
        before, reads = copies.get(op, ([], {}))
        ops += before
        ops.append(op.with_operands(tuple(reads.get(v, v) for v in op.operands)) if reads else op)
    candidate = func.replace_body(Block(func.params, tuple(ops), func.results))
    if planner.peak(candidate) < planner.peak(func):
        return candidate
    return func


def _cheap(op: Op) -> bool:
    return op.prim.kind is Kind.ELEMENTWISE and ew.cheap_to_recompute(op) and INPLACE_ATTR not in op.attrs


class _Copier:
    def __init__(self, func: Function, fusion: FusionPlan) -> None:
        self.func = func
        self.fusion = fusion
        self.params = set(func.params)
        self.returned = set(func.results)
        self.producer = {r: op for op in func.ops for r in op.results}
        self.last_read: dict[Value, int] = {}
        self.readers: dict[Value, list[Group]] = defaultdict(list)
        for g in fusion.groups:
            for v in g.inputs:
                self.last_read[v] = max(self.last_read.get(v, -1), g.root_pos)
                self.readers[v].append(g)
        self.position = {op: k for k, op in enumerate(func.ops)}
        # per reader group: a value's copy there and the position of the op it is placed before
        self.made_in: dict[Group, dict[Value, tuple[Value, int]]] = defaultdict(dict)
        self.known: dict[tuple[Value, int, int], bool] = {}

    def run(self) -> dict[Op, tuple[list[Op], dict[Value, Value]]]:
        """Consumer op -> (copies to place before it, operand -> copy it reads instead)."""
        out: dict[Op, tuple[list[Op], dict[Value, Value]]] = {}
        for op in self.func.ops:
            v = op.results[0] if len(op.results) == 1 else None
            if v is None or v not in self.fusion.materialized or v in self.returned or not _cheap(op):
                continue
            for g in self.readers.get(v, ()):
                if not self._recomputable_in(v, g):
                    continue
                new_ops: list[Op] = []
                first = next(c for c in g.ops if v in c.operands)
                copy = self._copy(op, g, self.position[first], new_ops)
                out.setdefault(first, ([], {}))[0].extend(new_ops)
                for c in g.ops:
                    if v in c.operands:
                        out.setdefault(c, ([], {}))[1][v] = copy
        return out

    def _recomputable_in(self, v: Value, g: Group) -> bool:
        if g.kind is GroupKind.CONTRACT or len(self.fusion.access.get(v, {}).get(g, ())) != 1:
            return False  # one index path: the copy is evaluated once per element, like the reader
        if not all(c.prim.kind in _AT_OWN_INDEX for c in g.ops if v in c.operands):
            return False
        return all(self._available(a, g, DEPTH) for a in self.producer[v].operands)

    def _available(self, a: Value, g: Group, depth: int) -> bool:
        """``g`` may read ``a`` (or a copy of it) without keeping any buffer alive longer."""
        key = (a, g.root_pos, depth)  # (memoized: an expression DAG reads a value along many paths)
        if key not in self.known:
            self.known[key] = self._available_now(a, g, depth)
        return self.known[key]

    def _available_now(self, a: Value, g: Group, depth: int) -> bool:
        if a in self.params or a in self.returned:
            return True
        if a in self.fusion.materialized:
            return self.last_read.get(a, -1) >= g.root_pos
        op = self.producer[a]
        if op.prim.kind is Kind.SOURCE:
            return True
        inlinable = op.prim.kind is Kind.MOVEMENT or _cheap(op)
        return inlinable and depth > 0 and all(self._available(x, g, depth - 1) for x in op.operands)

    def _copy(self, op: Op, g: Group, at: int, new_ops: list[Op]) -> Value:
        """A copy of ``op`` for ``g``, placed before the op at position ``at``. Its unstored cheap
        elementwise operands are copied too, and so are its stored ones that ``g`` recomputes
        itself (a GELU's ``1 + t`` beside its ``t * t`` in the backward: read from the stored
        ``t``, the copy of ``1 + t`` would keep ``t``'s buffer alive for nothing). A copy already
        made for ``g`` and placed no later is shared."""
        shared = self.made_in[g].get(op.result)
        if shared is not None and shared[1] <= at:
            return shared[0]
        operands = []
        for a in op.operands:
            producer = self.producer.get(a)
            if producer is not None and producer.prim.kind is Kind.ELEMENTWISE and a not in self.params:
                ours = a not in self.returned and _cheap(producer) and self._recomputable_in(a, g)
                if a not in self.fusion.materialized or ours:
                    a = self._copy(producer, g, at, new_ops)
            operands.append(a)
        attrs = {k: x for k, x in op.attrs.items() if k != INPLACE_ATTR}
        copy = Op(op.prim, tuple(operands), attrs, (Value(op.result.type),), op.loc)
        new_ops.append(copy)
        self.made_in[g][op.result] = (copy.result, at)
        return copy.result
