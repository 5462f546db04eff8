"""Dead-code elimination: an op whose results nobody reads goes (all primitives are pure), in loop and
branch bodies too, and so does the state of a region op that nothing needs.

Regions are closed (``compiler/passes/regions.py``), so a body's reads are its block arguments and a
region op's lanes (``compiler/passes/region_parts.py``) can be pruned one by one: a carry whose result
nobody reads and that no needed carry, yield or while condition reads inside (a fixpoint over the
regions), a scan's ys nobody reads, an ``if`` result nobody reads; then the xs and consts (an ``if``'s
operands) that the regions no longer read. The pruned op still satisfies its region rule.
"""

from __future__ import annotations

from compiler.ir.core import Block, Function, Op, Value
from compiler.passes.region_parts import take_apart


def dce(func: Function) -> Function:
    """Drop ops whose results are never read (walks backward from the function's results), inside
    loop and branch bodies too, and the lanes of region ops nobody needs (``_prune``)."""
    body = _dce_block(func.body)
    return func if body is func.body else func.replace_body(body)


def _dce_block(block: Block) -> Block:
    live: set[Value] = set(block.results)
    kept: list[Op] = []
    changed = False
    for op in reversed(block.ops):
        if not any(r in live for r in op.results):
            changed = True
            continue
        if op.regions:
            pruned = _prune(op, live)
            changed |= pruned is not op
            op = pruned
        kept.append(op)
        live.update(op.operands)
    return Block(block.args, tuple(reversed(kept)), block.results) if changed else block


def _prune(op: Op, live: set[Value]) -> Op:
    """``op`` without the state nobody needs: the results outside ``live`` that no other carry needs
    (a fixpoint over its regions: a carry is needed when its result is live or a needed yield, or a
    while's condition, reads it), then the xs and consts its regions no longer read."""
    parts = take_apart(op)
    n = len(parts.carries)
    carries = [r in live for r in parts.results[:n]]
    outs = [r in live for r in parts.results[n:]]
    while True:
        read: set[Value] = set()
        for region in parts.regions:
            wanted = region.yields  # a while's condition: always needed
            if region.steps:
                wanted = [v for v, w in zip(region.yields, carries + outs, strict=True) if w]
            read |= _reads(region.ops, wanted)
        grown = [
            w or any(region.carries[k] in read for region in parts.regions) for k, w in enumerate(carries)
        ]
        if grown == carries:
            break
        carries = grown
    for k in reversed(range(len(outs))):
        if not outs[k]:
            parts.drop_out(k)
    for k in reversed(range(n)):
        if not carries[k]:
            parts.drop_carry(k)
    changed = not (all(carries) and all(outs))
    read = set()
    for region in parts.regions:
        block = region.block()
        pruned = _dce_block(block)
        changed |= pruned is not block
        region.set_block(pruned)
        read |= _reads(region.ops, region.yields)
    for k in reversed(range(len(parts.xs))):
        if not any(region.xs[k] in read for region in parts.regions):
            parts.drop_x(k)
            changed = True
    for k in reversed(range(len(parts.consts))):
        if not any(region.consts[k] in read for region in parts.regions):
            parts.drop_const(k)
            changed = True
    return parts.build() if changed else op


def _reads(ops: list[Op], results: list[Value]) -> set[Value]:
    """The values a block's ops that ``results`` need read (a backward sweep; ``results`` included)."""
    live = set(results)
    for op in reversed(ops):
        if any(r in live for r in op.results):
            live.update(op.operands)
    return live
