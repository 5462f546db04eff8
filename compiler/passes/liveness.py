"""Liveness: where each value is read for the last time, and which operands die at each op.

A backward dataflow analysis solved with a worklist over blocks. Inside one block a single backward
sweep finds every value's last use, so the analysis is linear in the number of ops. Blocks meet in
two ways, and the worklist carries both:

- a region op reads, at its own position in the parent block, every value its regions read from
  outside (the region's live-in set): such a value is live across the op that owns the region;
- a region may run more than once (a loop body). Its live-out set is what it yields plus its own
  live-in set, because the next iteration reads those values again. So a value from outside never
  dies inside a region; the parent block decides where it dies. For a region that runs once this is
  merely conservative. Closed regions (``compiler/passes/regions.py``) take such values as block
  arguments, a loop's consts: those are live out of each of its regions too, and so is every
  argument of a while's condition, which its body then reads again (``_read_again``).

Blocks are processed children first (post-order ranks on a heap); a region whose live-in set changes
is processed again, then its parent. The fixpoint of a loop body is thus found by re-sweeping that
body alone, never the whole program. A function without regions is swept exactly once.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from compiler.ir.core import Block, Function, Op, Value
from compiler.passes.region_parts import take_apart
from compiler.prims import control

DIES_ATTR = "dsl.dies"
PARAM_POSITION = -1  # where a block's arguments are defined: before its first op


@dataclass
class BlockLiveness:
    """Liveness inside one block; positions index ``block.ops``."""

    position: dict[Op, int]
    last_use: dict[Value, int]  # len(block.ops) for values live out of the block
    live_in: frozenset[Value]  # values defined outside the block that it reads (its args excluded)
    live_out: frozenset[Value]


@dataclass
class Liveness:
    """Liveness of a function: ``position`` and ``last_use`` describe its top-level block.

    ``last_use[v]`` is the position of the last op reading ``v``; ``len(ops)`` for a value the
    function returns; the defining position for a value nobody reads (``-1`` for a parameter).
    A region op counts as reading every outside value its regions read. ``blocks`` holds the same
    facts for every block, nested regions included, in each block's own positions.
    """

    position: dict[Op, int]
    last_use: dict[Value, int]
    blocks: dict[Block, BlockLiveness] = field(default_factory=dict)
    # the block facts of each op of a region: an op's lookup is one probe, not a search of the
    # blocks (which made annotating every op quadratic with many loop bodies)
    _owner: dict[Op, BlockLiveness] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for info in self.blocks.values():
            if info.position is not self.position:
                self._owner.update(dict.fromkeys(info.position, info))

    def dies_at(self, op: Op) -> tuple[Value, ...]:
        """Operands of ``op`` (any block) whose last use is ``op``; deduplicated, in operand order."""
        position, last_use = self._facts_of(op)
        here = position[op]
        return tuple(dict.fromkeys(v for v in op.operands if last_use[v] == here))

    def live_across(self, pos: int) -> int:
        """How many top-level values are live just after the op at ``pos`` (O(n) per call)."""
        defined: dict[Value, int] = {}
        for op, i in self.position.items():
            defined.update(dict.fromkeys(op.results, i))
        return sum(1 for v, last in self.last_use.items() if defined.get(v, PARAM_POSITION) <= pos < last)

    def _facts_of(self, op: Op) -> tuple[dict[Op, int], dict[Value, int]]:
        """The positions and last uses of the block holding ``op``."""
        if op in self.position:
            return self.position, self.last_use
        info = self._owner.get(op)
        if info is not None:
            return info.position, info.last_use
        raise KeyError(f'"{op.prim.mlir_name}" at {op.loc} is not an op of the analyzed function')


def liveness(func: Function) -> Liveness:
    """Solve liveness for ``func`` and every region nested in it."""
    order, parent = _post_order(func.body)
    rank = {block: i for i, block in enumerate(order)}
    live_in: dict[Block, frozenset[Value]] = {block: frozenset() for block in order}
    read_again = _read_again(func)
    solved: dict[Block, BlockLiveness] = {}
    heap, queued = list(range(len(order))), set(range(len(order)))
    while heap:
        i = heapq.heappop(heap)
        queued.discard(i)
        block = order[i]
        is_region = block is not func.body
        # A region may run again: what it reads from outside stays live to its end (the back edge).
        live_out = frozenset(block.results) | (
            live_in[block] | read_again.get(block, frozenset()) if is_region else frozenset()
        )
        info = _sweep(block, live_out, live_in)
        solved[block] = info
        if info.live_in != live_in[block]:
            live_in[block] = info.live_in
            for dependent in (block, parent[block]) if is_region else ():
                if rank[dependent] not in queued:
                    queued.add(rank[dependent])
                    heapq.heappush(heap, rank[dependent])
    top = solved[func.body]
    return Liveness(top.position, top.last_use, solved)


def _read_again(func: Function) -> dict[Block, frozenset[Value]]:
    """The block arguments of each loop region that the loop reads again after the region ends: its
    consts (every iteration), and all a while's condition takes (its body runs on the same values)."""
    loops = (control.for_loop, control.while_loop, control.scan)
    out: dict[Block, frozenset[Value]] = {}
    for op in func.walk():
        if op.prim in loops:
            for block, region in zip(op.regions, take_apart(op).regions, strict=True):
                out[block] = frozenset(region.consts if region.steps else region.args)
    return out


def _sweep(
    block: Block, live_out: frozenset[Value], region_live_in: dict[Block, frozenset[Value]]
) -> BlockLiveness:
    """One backward pass over ``block``: the first read met walking backwards is the last use."""
    ops = block.ops
    last_use = dict.fromkeys(live_out, len(ops))
    live = set(live_out)
    for i in range(len(ops) - 1, -1, -1):
        op = ops[i]
        for r in op.results:
            if r in live:
                live.discard(r)  # above its definition the value does not exist
            else:
                last_use[r] = i  # dead: nobody reads it
        for v in _reads(op, region_live_in):
            if v not in live:
                live.add(v)
                last_use[v] = i
    for arg in block.args:
        if arg in live:
            live.discard(arg)
        else:
            last_use[arg] = PARAM_POSITION
    position = {op: i for i, op in enumerate(ops)}
    return BlockLiveness(position, last_use, frozenset(live), live_out)


def _reads(op: Op, region_live_in: dict[Block, frozenset[Value]]) -> Iterable[Value]:
    """The values ``op`` reads at its position: its operands and whatever its regions read from outside."""
    if not op.regions:
        return op.operands
    return _operands_and_captures(op, region_live_in)


def _operands_and_captures(op: Op, region_live_in: dict[Block, frozenset[Value]]) -> Iterator[Value]:
    yield from op.operands
    for region in op.regions:
        yield from region_live_in[region]


def _post_order(body: Block) -> tuple[list[Block], dict[Block, Block]]:
    """Every block, nested regions before the block holding them, and each region's parent block."""
    order: list[Block] = []
    parent: dict[Block, Block] = {}
    stack: list[tuple[Block, bool]] = [(body, False)]
    while stack:  # iterative: deep nesting must not hit Python's recursion limit
        block, children_done = stack.pop()
        if children_done:
            order.append(block)
            continue
        stack.append((block, True))
        for op in block.ops:
            for region in op.regions:
                parent[region] = block
                stack.append((region, False))
    return order, parent


def annotate_liveness(func: Function) -> Function:
    """``dsl.dies = array<i64: k, ...>`` on each op: the operand indices whose value dies there.

    A value read twice by the op that kills it is listed at both indices (``add(%a, %a)`` -> 0, 1).
    The attribute is left off ops where nothing dies.
    """
    info = liveness(func)
    return func.replace_body(_annotate_block(func.body, info))


def _annotate_block(block: Block, info: Liveness) -> Block:
    ops = []
    for op in block.ops:
        dying = set(info.dies_at(op))
        attrs = {k: v for k, v in op.attrs.items() if k != DIES_ATTR}
        indices = tuple(k for k, v in enumerate(op.operands) if v in dying)
        if indices:
            attrs[DIES_ATTR] = indices
        regions = tuple(_annotate_block(region, info) for region in op.regions)
        ops.append(Op(op.prim, op.operands, attrs, op.results, op.loc, regions))
    return Block(block.args, tuple(ops), block.results)
