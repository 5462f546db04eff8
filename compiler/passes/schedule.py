"""Memory-aware op scheduling: reorder a function's ops so that its planned arena is smaller.

Fusion runs kernels (groups) in the order of their roots, and the planner keeps a buffer from the
kernel that stores it to the last kernel that reads it. So the order of the ops decides how long
each buffer lives: the SGD update of a weight traced after the whole backward keeps every weight
gradient alive to the end, where running it as soon as its gradient exists frees each one at once;
a value traced early (``ones * r`` in the forward) but read only by the backward occupies its buffer
the whole forward.

The pass works on the kernels of the current order (``fuse``): a kernel depends on the kernels that
store the buffers it reads. Two list schedulers walk that graph, each picking among the ready kernels
the one whose run changes the live bytes least (ties: original order):

- *forward*: ready = every producer ran; cost = bytes it stores (read later) - bytes of the inputs
  it is the last reader of. Frees early: an update runs as soon as its gradient is ready.
- *reverse*: from the end, ready = every reader placed; cost = bytes of its inputs not yet live
  - bytes of its outputs (they start here). Allocates late: a value runs just before its first reader.

Ordering constraints beyond data flow are kept as soft edges (a kernel waits for them unless nothing
else is ready): the new value of an argument (``dsl.writeback``) runs after every other reader of the
argument's old value, so it can still be written straight into the caller's array; a user's in-place
request (``dsl.inplace``) runs after the other readers of the value it overwrites, so it stays in place.

The ops are then emitted kernel by kernel (an index map inlined into several kernels with the first of
them), every candidate order (the original one included) is fused, row-fused and planned as the
pipeline will ship it (``plan.Planner``: the same steps and options as its later passes), and the
order with the smallest planned peak is kept; on a tie, the original. The pass never makes the plan bigger,
and every op computes what it computed before, only the order of independent kernels changes (a
reduction the new order moves into or out of a band of row-fused kernels sums its terms in another
order: results agree to rounding). ``Options.schedule`` / ``DSL_NO_SCHEDULE=1`` switch it off.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable
from itertools import product

from compiler.ir.core import Block, Function, Op, Value
from compiler.ir.verify import WRITEBACK
from compiler.passes.fuse import FusionPlan, Group
from compiler.passes.plan import INPLACE_ATTR, Planner


def planned_peak(func: Function, inplace: bool = True, donate_argnums: tuple[int, ...] = ()) -> int:
    """The arena of ``func``'s plan without bands (the CUDA target's, and ``dslc opt``'s default)."""
    return Planner(inplace, donate_argnums).peak(func)


def schedule_for_memory(func: Function, planner: Planner | None = None, rounds: int = 3) -> Function:
    """``func`` with its ops in the candidate order of smallest planned peak (module docstring), each
    candidate planned by ``planner`` (default: ``Planner()``, no bands). A new order can change the
    fusion (which kernel stores a shared value), so the chosen order is scheduled again, up to
    ``rounds`` times, while that still shrinks the peak."""
    planner = planner or Planner()
    if not planner.inplace or len(func.ops) < 3 or any(op.regions for op in func.ops):
        return func  # the reference plan gives every buffer its own slot: order cannot matter
    peak = planner.peak(func)
    for _ in range(rounds):
        func, new_peak = _best_order(func, peak, planner)
        if new_peak == peak:
            break
        peak = new_peak
    return func


def _best_order(func: Function, peak: int, planner: Planner) -> tuple[Function, int]:
    fusion = planner.fuse(func)
    graph = _KernelGraph(func, fusion)
    best, best_peak = func, peak
    tried = [list(range(len(fusion.groups)))]
    for scheduler, greedy in product((graph.forward_order, graph.reverse_order), (True, False)):
        order = scheduler(greedy)
        if order in tried:
            continue
        tried.append(order)
        candidate = func.replace_body(Block(func.params, _emit(func, fusion, order), func.results))
        candidate_peak = planner.peak(candidate)
        if candidate_peak < best_peak:
            best, best_peak = candidate, candidate_peak
    return best, best_peak


def _emit(func: Function, fusion: FusionPlan, order: list[int]) -> tuple[Op, ...]:
    """The ops kernel by kernel in ``order``; each op with the first kernel holding it, in program
    order inside a kernel (so every operand is defined before it is read). Dead ops go last."""
    emitted: dict[Op, None] = {}
    for index in order:
        for op in fusion.groups[index].ops:
            emitted.setdefault(op, None)
    for op in func.ops:  # dead ops (no kernel): after everything they could read
        emitted.setdefault(op, None)
    return tuple(emitted)


class _KernelGraph:
    """Kernels as nodes; ``size`` of each buffer the planner will place; readers of each buffer."""

    def __init__(self, func: Function, fusion: FusionPlan) -> None:
        groups = fusion.groups
        self.n = len(groups)
        index = {id(g): i for i, g in enumerate(groups)}
        returned, params = set(func.results), set(func.params)
        self.stores: list[list[Value]] = [list(g.outputs) for g in groups]
        self.reads: list[list[Value]] = [list(g.inputs) for g in groups]
        producer = {v: index[id(g)] for g in groups for v in g.outputs}
        self.readers: dict[Value, list[int]] = defaultdict(list)
        for i, g in enumerate(groups):
            for v in g.inputs:
                self.readers[v].append(i)
        self.size = {
            v: v.type.nbytes
            for g in groups
            for v in g.outputs
            if v not in returned and v not in params and self.readers.get(v)
        }
        self.preds: list[set[int]] = [{producer[v] for v in g.inputs if v in producer} for g in groups]
        self.soft: list[set[int]] = [set() for _ in groups]  # kernel -> kernels it should follow
        for i, g in enumerate(groups):
            for target in _overwritten(func, fusion, g):
                self.soft[i] |= {r for r in self.readers.get(target, ()) if r != i}
        self.succs: list[set[int]] = [set() for _ in groups]
        self.soft_succs: list[set[int]] = [set() for _ in groups]
        for i in range(self.n):
            for p in self.preds[i]:
                self.succs[p].add(i)
            for p in self.soft[i]:
                self.soft_succs[p].add(i)

    def forward_order(self, greedy: bool = True) -> list[int]:
        unread = {v: len(r) for v, r in self.readers.items()}

        def cost(i: int) -> int:
            born = sum(self.size.get(v, 0) for v in self.stores[i])
            return born - sum(self.size.get(v, 0) for v in self.reads[i] if unread[v] == 1)

        def placed(i: int) -> list[int]:
            changed = []
            for v in self.reads[i]:
                unread[v] -= 1
                if unread[v] == 1 and v in self.size:  # its last reader now frees it
                    changed += [r for r in self.readers[v] if r != i]
            return changed

        return _list_schedule(
            self.n, self.preds, self.succs, self.soft, self.soft_succs, cost, placed, greedy=greedy
        )

    def reverse_order(self, greedy: bool = True) -> list[int]:
        live: set[Value] = set()

        def cost(i: int) -> int:
            born = sum(self.size.get(v, 0) for v in self.reads[i] if v not in live)
            return born - sum(self.size.get(v, 0) for v in self.stores[i])

        def placed(i: int) -> list[int]:
            changed = []
            for v in self.reads[i]:
                if v not in live:
                    live.add(v)
                    if v in self.size:  # the other readers no longer make it live
                        changed += [r for r in self.readers[v] if r != i]
            return changed

        order = _list_schedule(
            self.n, self.succs, self.preds, self.soft_succs, self.soft, cost, placed, True, greedy
        )
        return order[::-1]


def _list_schedule(
    n: int,
    preds: list[set[int]],
    succs: list[set[int]],
    soft: list[set[int]],
    soft_succs: list[set[int]],
    cost: Callable[[int], int],
    placed: Callable[[int], list[int]],
    latest_first: bool = False,
    greedy: bool = True,
) -> list[int]:
    """List scheduling: repeatedly place the ready node of least ``cost``, then first in original
    order (lowest index, or highest with ``latest_first``); with ``greedy=False``, the first ready node
    in original order unless some ready node has a negative cost (it frees more than it takes), so
    the original order changes only where that saves memory. A node is ready when its ``preds`` are
    placed, and its ``soft`` ones too unless no node is ready otherwise. ``placed(i)`` updates the
    cost model and returns the nodes whose cost changed. Costs are kept in a heap with stale entries
    skipped, so a step costs O(log n) plus the nodes it changes."""
    missing = [len(p) for p in preds]
    soft_missing = [len(s) for s in soft]
    done = [False] * n
    tie = (lambda i: -i) if latest_first else (lambda i: i)
    ready: list[tuple[int, int, int, int]] = []  # (priority, tie, node, cost), soft constraints met
    waiting: set[int] = set()  # data-ready, soft constraints not met
    current: dict[int, int] = {}

    def push(i: int) -> None:
        current[i] = c = cost(i)
        heapq.heappush(ready, (c if greedy else min(c, 0), tie(i), i, c))

    for i in range(n):
        if missing[i] == 0:
            push(i) if soft_missing[i] == 0 else waiting.add(i)
    order: list[int] = []
    while len(order) < n:
        while ready and (done[ready[0][2]] or ready[0][3] != current[ready[0][2]]):
            heapq.heappop(ready)
        if ready:
            i = heapq.heappop(ready)[2]
        else:  # only soft constraints left to wait for: break them in original order
            i = min(waiting, key=tie)
            waiting.discard(i)
        done[i] = True
        order.append(i)
        for j in placed(i):
            if not done[j] and j in current:
                push(j)
        for j in soft_succs[i]:
            soft_missing[j] -= 1
            if soft_missing[j] == 0 and j in waiting:
                waiting.discard(j)
                push(j)
        for j in succs[i]:
            missing[j] -= 1
            if missing[j] == 0:
                push(j) if soft_missing[j] == 0 else waiting.add(j)
    return order


def _overwritten(func: Function, fusion: FusionPlan, group: Group) -> list[Value]:
    """Values whose storage ``group`` means to overwrite: the old value of an argument it writes
    back, the target of a user's in-place request it realizes."""
    writeback = tuple(int(i) for i in func.attrs.get(WRITEBACK, ()))
    tail = func.results[len(func.results) - len(writeback) :] if writeback else ()
    new_value_of = dict(zip(tail, writeback))
    out = [func.params[new_value_of[v]] for v in group.outputs if v in new_value_of]
    out += [op.operands[0] for op in group.ops if INPLACE_ATTR in op.attrs and op.operands]
    return out
