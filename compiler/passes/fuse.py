"""Fusion: partition a function's ops into kernel groups; decide which values need a buffer.

A group is one kernel. Its *root* is its last op (except a matmul's epilogue, below); the other ops
are producers inlined into it: their scalar lowering (``prim.emit``) is called through ``ctx.read``
wherever the group reads them, so a chain such as ``exp(x * 2 + broadcast(b))`` is one loop nest
with no intermediate buffer.

Group kinds follow the root's primitive kind:
- ``LOOP``: an elementwise, movement or source root; iterates over the root's shape.
- ``REDUCE``: a reduction root; iterates over its operand's shape; producers of the operand
  (the prologue) are inlined. Fusion makes one reduction per group; the rows pass may join
  reductions over the same space and axes into one group with several (``Group.siblings``).
- ``SCATTER``: a scatter (``compiler/prims/gather.py``); reads materialized operands, combines its
  updates into a copy of its base (or into the base itself, in place) in a kernel of its own form.
- ``SCAN``: a cumulative sum or product (``compiler/prims/scan.py``); iterates over its operand's
  shape line by line, reading each element (producers of the operand inlined, as a reduction's
  prologue) before the result's element at the same position is written (so the result may be
  stored over a dying operand).
- ``CONTROL``: a loop or a branch (``compiler/prims/control.py``, closed by ``close_regions``): it
  reads its operands as buffers and stores every result (the loop's carries live in them while it
  runs); its bodies are programs of their own, compiled by the ``loops`` pass (``passes/loops.py``).
- ``CONTRACT``: a matmul; reads materialized operands (BLAS wants real arrays), or strided views of
  them (``contract_transposes``, the default): a chain of transposes and reshapes that only matmuls
  read, whose result is a strided view of its source buffer with one unit stride in the last two
  axes (``operand_view``), is inlined into the matmul's group. BLAS reads the view directly
  (leading dimension, transpose flag, an offset per batch element), as does the CUDA kernel:
  splitting attention heads, ``transpose(reshape(x @ w, (B, T, H, dh)), (0, 2, 1, 3))``, copies
  nothing. A matmul may also end in an *epilogue*, ops after its root that run in the same kernel:
  a chain of transposes and reshapes it writes its result through (``result_view``: merging heads),
  or a scale-and-add that gemm's alpha and beta compute (``accumulation``: an SGD step).

The fusion rule. Ops are visited in reverse program order, so every user of a value is placed
before the value itself. For each group that reads a value we record its *access keys*: the chain
of non-elementwise ops (index maps) between the group's root and the read. Reads with the same
key happen at the same index expression, which the code generator computes once (its memo); an
update of a window (``update_slice``, ``dynamic_update_slice``: ``prims.dynamic.PARTIAL_UPDATES``)
reads its base at its own index, so it adds no step to the base's key; a ``dynamic_slice`` is an
index map like any other (its index is computed at run time: never the group's own); so
the number of element evaluations inlining costs is the sum, over the keys, of the evaluations of
the reading op. An elementwise, movement or source op that is not a function result, whose
readers are all LOOP, REDUCE or SCAN groups reading it at no more than ``MAX_ACCESS_KEYS`` keys each,
is inlined:

1. a movement or source op into *every* group that reads it. Recomputing an index map or a literal
   costs index arithmetic only, and its operands are charged the recomputation through their own
   access keys; so a broadcast read by two reductions needs no full-size buffer (its small operand
   may). A random draw (``random_bits``) is recomputed the same way: its Threefry rounds are
   integer arithmetic on its position and a two-word key, and a draw is never stored. An update of
   a window that a reader reads back (``c[i] = c[i] * 2 + 1``: ``_reread_update``), or that the next
   update takes as its base (``y[0] = a; y[5] = b``), is no such map: it roots a group of its own,
   computed in place over its base's window (``kernel/window.py``), and a cheap elementwise op only
   its new elements read, reading nothing of its base, is computed in it (``_window_value``: no
   staging buffer of the window's size);
2. an elementwise op read by one group only, when inlining does not recompute it (evaluations <=
   its element count). An expensive value read at many indices (``exp(c)`` feeding a broadcast,
   both sides of a ``concatenate``) is therefore materialized;
3. a cheap elementwise op (no libm call) read by several groups, each at the identity index only,
   into each of them, when its operands are buffers anyway (params, reduction and matmul results,
   index maps of those): ``s = z - max(z)`` read by the softmax sum and by the backward is
   recomputed (one flop per element) instead of written to and read back from a full-size buffer.

Otherwise, if the earliest group that reads it reads it only at the identity index (same
iteration space, e.g. ``y = exp(x)`` used by ``y + 1`` and also returned or read by a later
kernel), it is computed in that group's loop and also stored; later groups read the buffer.
Otherwise it roots a new group. Reductions and matmuls always root a group. Dead ops (no users,
not returned) are dropped. Groups run in the order of their roots; a stored non-root value is
stored by the earliest group reading it, so every group runs after the groups whose buffers it
reads.
"""

from __future__ import annotations

import enum
import math
from collections import defaultdict
from dataclasses import dataclass, field

from compiler.ir.core import Function, Op, Value
from compiler.passes.matmul_views import MAX_VIEW_BATCH_AXES as MAX_VIEW_BATCH_AXES  # read from here too
from compiler.passes.matmul_views import (
    Accumulation,
    OperandView,
    accumulation_of,
    matrix_view,
    result_view_of,
    through,
)
from compiler.prims import control
from compiler.prims import dynamic as dyn
from compiler.prims import elementwise as ew
from compiler.prims import movement as mv
from compiler.prims.base import Kind

MAX_ACCESS_KEYS = 16
RECOMPUTE_DEPTH = 3  # index maps between a recomputed op and the buffers it reads

# A read's position relative to its group root: ((op position, operand index), ...) along the path.
AccessKey = tuple[tuple[int, int], ...]
IDENTITY: AccessKey = ()


class GroupKind(enum.Enum):
    LOOP = "loop"
    REDUCE = "reduce"
    CONTRACT = "contract"
    SCATTER = "scatter"
    SCAN = "scan"
    CONTROL = "control"


_GROUP_OF_KIND = {
    Kind.ELEMENTWISE: GroupKind.LOOP,
    Kind.MOVEMENT: GroupKind.LOOP,
    Kind.SOURCE: GroupKind.LOOP,
    Kind.REDUCTION: GroupKind.REDUCE,
    Kind.CONTRACTION: GroupKind.CONTRACT,
    Kind.SCATTER: GroupKind.SCATTER,
    Kind.SCAN: GroupKind.SCAN,
    Kind.CONTROL: GroupKind.CONTROL,
}
# groups whose producers may be inlined
_INLINING = frozenset({GroupKind.LOOP, GroupKind.REDUCE, GroupKind.SCAN})
_INLINABLE = frozenset({Kind.ELEMENTWISE, Kind.MOVEMENT, Kind.SOURCE})
_INDEX_MAPS = frozenset({Kind.MOVEMENT, Kind.SOURCE})


@dataclass(eq=False)
class Group:
    """One kernel: ``ops`` in program order, the last being ``root``; except a CONTRACT group with an
    epilogue (``result_view``, ``accumulation``): its root is the matmul, the epilogue's ops follow."""

    kind: GroupKind
    root: Op
    root_pos: int
    ops: list[Op] = field(default_factory=list)
    outputs: list[Value] = field(default_factory=list)  # values this kernel stores (root first)
    inputs: list[Value] = field(default_factory=list)  # buffers it reads (params or other outputs)
    index: int = -1  # position in execution order
    # A REDUCE group's further reductions over the same iteration space and axes, whose results it
    # stores too, in one pass over what they read (a multi-output reduction: ``rows.reductions_together``)
    siblings: list[Op] = field(default_factory=list)

    @property
    def shape(self) -> tuple[int, ...]:
        """The iteration space: the reduction operand's shape for REDUCE, else the root's shape."""
        if self.kind is GroupKind.REDUCE:
            return self.root.operands[0].type.shape
        if self.kind is GroupKind.CONTROL:
            return ()
        return self.root.result.type.shape

    @property
    def reduced_axes(self) -> frozenset[int]:
        """The axes a REDUCE group's root reduces (empty for other kinds)."""
        if self.kind is not GroupKind.REDUCE:
            return frozenset()
        return frozenset(int(a) for a in self.root.attrs["axes"])

    @property
    def reductions(self) -> list[Op]:
        """A REDUCE group's reductions: its root, then its ``siblings`` (empty for other kinds)."""
        return [self.root, *self.siblings] if self.kind is GroupKind.REDUCE else []

    def produces(self, value: Value) -> bool:
        return any(value in op.results for op in self.ops)


def operand_view(group: Group, pos: int, extra: Op | None = None) -> OperandView | None:
    """How ``group`` (CONTRACT) reads its root's operand ``pos``: through the transposes and reshapes
    inlined into it (and ``extra``, an op about to be), as a strided view of the buffer the chain
    starts from; ``None`` if that is no single strided matrix per batch element with a unit stride
    (then the chain cannot be inlined)."""
    inside = {op.result: op for op in group.ops if op is not group.root}
    if extra is not None:
        inside[extra.result] = extra
    v, chain = group.root.operands[pos], []
    while v in inside:
        chain.append(inside[v])
        v = inside[v].operands[0]
    strides = through(chain[::-1], v.type.shape)
    return None if strides is None else matrix_view(v, group.root.operands[pos].type.shape, strides)


def _epilogue(group: Group) -> list[Op]:
    """The ops of a CONTRACT group after its matmul root (empty for other groups)."""
    if group.kind is not GroupKind.CONTRACT:
        return []
    return group.ops[group.ops.index(group.root) + 1 :]


def result_view(group: Group) -> OperandView | None:
    """Where a CONTRACT group's matmul writes its result: its own buffer (``None``), or, when the group
    ends in transposes and reshapes of the result (an epilogue, ``_Fuser._merge_epilogues``), the
    strided view of the stored chain end that the result is: e.g. ``a = p @ v`` (B, H, T, dh) written
    straight into ``transpose(a, (0, 2, 1, 3)).reshape(B * T, D)``, one (T, dh) block per batch
    element with row stride D. A result whose columns are the strided axis is written as the
    transposed product."""
    chain = _epilogue(group)
    if not chain or not all(op.prim in mv.STRIDED_VIEWS for op in chain):
        return None
    return result_view_of(group.root, chain)


def matmul_views(group: Group) -> tuple[OperandView, OperandView, OperandView]:
    """How a CONTRACT group's matmul reads its two operands and writes its result, each a strided
    view of a buffer: an operand that is a buffer itself is its own contiguous view, and the result
    goes through its layout epilogue (``result_view``) or row-major into the stored value (the
    root's result, or the value its accumulation epilogue computes)."""
    x, y = (operand_view(group, pos) for pos in range(2))
    assert x is not None and y is not None, "fusion inlined a layout chain that is no strided view"
    out = result_view(group)
    if out is None:
        *batch, m, n = group.root.result.type.shape
        nb = math.prod(batch)
        out = OperandView(group.outputs[0], ((nb, m * n),) if nb > 1 else (), n, 1)
    return x, y, out


def accumulation(group: Group) -> Accumulation | None:
    """The accumulation epilogue of a CONTRACT group (``_Fuser._merge_epilogues``), if it has one."""
    chain = _epilogue(group)
    return accumulation_of(group.root, chain) if chain else None


@dataclass(eq=False)
class Band:
    """Consecutive groups run as one kernel, row by row of their shared leading axis
    (``compiler/passes/rows.py``): each row's work for every member runs while the row is in cache.

    ``local``: values stored and read only inside the band, at the row being computed: one row of
    scratch per thread instead of a buffer. ``aligned``: per value read by the band, per member
    reading it, whether every read is at the row being computed (the planner's in-place rule).
    """

    groups: list[Group]
    rows: int
    local: set[Value] = field(default_factory=set)
    tail: set[Group] = field(default_factory=set)  # members run once, after the rows
    aligned: dict[Value, dict[Group, bool]] = field(default_factory=dict)

    @property
    def start(self) -> int:
        return self.groups[0].root_pos

    @property
    def end(self) -> int:
        return self.groups[-1].root_pos


@dataclass
class FusionPlan:
    groups: list[Group]  # execution order
    group_of: dict[Op, Group]  # an inlined index map read by several groups: the first of them
    materialized: set[Value]  # op results that need a buffer (params are buffers already)
    dead: list[Op]
    names: dict[Value, str]  # printer-style names: %argN, %N
    # value -> group reading it -> the access keys of those reads (IDENTITY: at the group's own index)
    access: dict[Value, dict[Group, frozenset[AccessKey]]] = field(default_factory=dict)
    bands: list[Band] = field(default_factory=list)  # row fusion: empty unless rows.form_bands ran
    band_of: dict[Group, Band] = field(default_factory=dict)
    ops: list[Op] = field(default_factory=list)  # the function's, by position (access keys name them)

    @property
    def local(self) -> set[Value]:
        """Values kept per row inside a band: no buffer."""
        return {v for band in self.bands for v in band.local}

    def time(self, group: Group) -> tuple[int, int]:
        """When ``group``'s buffers are born and when its reads end: its own position, or for a band
        member the band's first and last positions (rows of all members interleave)."""
        band = self.band_of.get(group)
        return (group.root_pos, group.root_pos) if band is None else (band.start, band.end)

    def in_place_safe(self, old: Value, new: Value, group: Group) -> bool:
        """``group`` may store ``new`` over ``old``: both span its iteration space, and it reads
        ``old`` (if at all) only at the element being written, before writing it (a loop body
        computes every value of an element before its stores). That is a fact of the whole kernel,
        not of one primitive: a read is at the element written when every op between it and the
        root is elementwise (its access key is ``IDENTITY``, ``_record_operand_reads``)."""
        if group.kind is GroupKind.CONTROL:
            return _carried(group.root, old, new)
        if group.kind is GroupKind.CONTRACT:  # gemm reads C at the element it writes: beta * C + ...
            acc = accumulation(group)
            operands = {view.source for pos in range(2) if (view := operand_view(group, pos)) is not None}
            return acc is not None and old is acc.source and old not in operands and old.type == new.type
        keys = self.access.get(old, {}).get(group, frozenset({IDENTITY}))
        if not old.type.shape == new.type.shape == group.shape:
            # an arena buffer (row-major) read through reshapes only (``h.reshape(-1).add_(1)``):
            # element k in row-major order is the k-th of its block, where the k-th of ``new`` goes
            flat = old in self.materialized and old.type.size == new.type.size
            flat = flat and new.type.shape == group.shape
            return flat and all(key and self.reshapes_only(key) for key in keys)
        return all(key == IDENTITY or self.same_window(key, old, group) for key in keys)

    def reshapes_only(self, key: AccessKey) -> bool:
        """A read through reshapes of the value alone (row-major: at the same position in its order)."""
        return all(self.ops[pos].prim is mv.reshape and k == 0 for pos, k in key)

    def same_window(self, key: AccessKey, old: Value, group: Group) -> bool:
        """``key`` reads ``old`` in the window that ``group``'s root (an update of ``old``'s window)
        replaces, at the element it writes: through the root's update operand, elementwise ops and
        reshapes (from the window's shape back to it: row-major, so the identity), to a slice of
        ``old`` with the root's own window (``c[i] = c[i] * 2 + 1``, ``c[i] += v``). Elsewhere the
        root selects its base, so a read there is never used."""
        root = group.root
        if root.prim not in dyn.PARTIAL_UPDATES or root.operands[0] is not old or not self.ops:
            return False
        if len(key) < 2 or key[0] != (group.root_pos, 1) or any(k != 0 for _, k in key[1:]):
            return False  # (the update operand read as it is: x[::-1] = x reads old elsewhere)
        *views, read = (self.ops[pos] for pos, _ in key[1:])
        if any(op.prim is not mv.reshape for op in views) or read.operands[0] is not old:
            return False
        window = root.operands[1].type.shape
        if read.prim is dyn.dynamic_slice and root.prim is dyn.dynamic_update_slice:
            return read.result.type.shape == window and read.operands[1:] == root.operands[2:]
        if read.prim is mv.slice_ and root.prim is mv.update_slice:
            return all(list(read.attrs[a]) == list(root.attrs[a]) for a in ("start", "limit", "stride"))
        return False

    def __str__(self) -> str:
        lines = []
        for g in self.groups:
            ops = " ".join(self.names[op.results[0]] for op in g.ops if op.results)
            outs = ", ".join(self.names[v] for v in g.outputs)
            ins = ", ".join(self.names[v] for v in g.inputs) or "-"
            shape = "x".join(map(str, g.shape)) or "scalar"
            lines.append(f"group {g.index} {g.kind.value} [{shape}]: {ops}  stores {outs}  reads {ins}")
        return "\n".join(lines)


def _carried(op: Op, old: Value, new: Value) -> bool:
    """A loop may keep its carry ``new`` in the block of its initial value ``old``: it copies each
    initial value into its carry's buffer before the first iteration (nothing to copy then), and
    ``old`` is no other operand of the loop (a const or an ``xs`` the body reads all along)."""
    return op.operands.count(old) == 1 and old.type == new.type and (old, new) in control.carried(op)


def value_names(func: Function) -> dict[Value, str]:
    """Names as ``compiler/ir/printer.py`` prints them."""
    names = {v: f"%arg{i}" for i, v in enumerate(func.params)}
    counter = 0
    for op in func.ops:
        if not op.results:
            continue
        for i, r in enumerate(op.results):
            names[r] = f"%{counter}" if len(op.results) == 1 else f"%{counter}#{i}"
        counter += 1
    return names


def fuse(func: Function, contract_transposes: bool = True, recompute: bool = True) -> FusionPlan:
    """``recompute``: rule 3 of the module docstring (False: such ops are stored, as before it).
    ``contract_transposes``: a transpose of the last two axes that only matmuls read is placed in
    their CONTRACT groups (``Group.ops`` = [transpose, matmul]) instead of being copied into a buffer:
    the kernel hands BLAS the transposed view of the transpose's operand (the CUDA matmul reads it with
    swapped strides). Every backend reads such a matmul operand through the inlined transpose.
    """
    return _Fuser(func, contract_transposes, recompute).run()


def swaps_last_two(op: Op) -> bool:
    """A transpose that exchanges the last two axes and keeps every batch axis in place."""
    if op.prim is not mv.transpose:
        return False
    n = len(op.result.type.shape)
    return n >= 2 and tuple(int(p) for p in op.attrs["perm"]) == (*range(n - 2), n - 1, n - 2)


class _Fuser:
    def __init__(self, func: Function, contract_transposes: bool = True, recompute: bool = True) -> None:
        self.func = func
        self.contract_transposes = contract_transposes
        self.recompute = recompute
        self.returned = set(func.results)
        self.users: dict[Value, list[Op]] = defaultdict(list)
        self.producer = {r: op for op in func.ops for r in op.results}
        for op in func.ops:
            for v in op.operands:
                self.users[v].append(op)
        # value -> reading group -> access key -> element evaluations at that key
        self.reads: dict[Value, dict[Group, dict[AccessKey, int]]] = defaultdict(dict)
        self.placed: dict[Op, list[Group]] = {}  # an index map may be inlined into several groups
        self.materialized: set[Value] = set()

    def run(self) -> FusionPlan:
        dead = []
        for pos in reversed(range(len(self.func.ops))):
            op = self.func.ops[pos]
            if not any(self.users[v] or v in self.returned for v in op.results):
                dead.append(op)
                continue
            if op.regions:
                self._place_control(op, pos)
                continue
            self._place(op, pos)
            for group in self.placed[op]:
                self._record_operand_reads(op, pos, group)
        unique = {id(g): g for groups in self.placed.values() for g in groups}
        groups = sorted(unique.values(), key=lambda g: g.root_pos)
        for g in groups:
            g.ops.reverse()  # they were added in reverse program order
        if self.contract_transposes:
            groups = self._merge_epilogues(groups)
        for i, g in enumerate(groups):
            g.index = i
            g.inputs = self._inputs_of(g)
        group_of = {op: groups[0] for op, groups in self.placed.items()}
        access = {
            v: {g: frozenset(keys) for g, keys in by_group.items()} for v, by_group in self.reads.items()
        }
        names = value_names(self.func)
        plan = FusionPlan(groups, group_of, self.materialized, dead[::-1], names, access)
        plan.ops = list(self.func.ops)
        return plan

    def _place_control(self, op: Op, pos: int) -> None:
        """A loop or branch: a group of its own that reads its operands as buffers, at no index of
        its own (nothing is inlined into it), and stores every result."""
        group = Group(GroupKind.CONTROL, op, pos, [op], list(op.results))
        self.materialized.update(op.results)
        self.placed[op] = [group]
        for k, operand in enumerate(op.operands):
            self.reads[operand].setdefault(group, {})[((pos, k),)] = operand.type.size

    def _place(self, op: Op, pos: int) -> None:
        value = op.result
        reads = self.reads[value]
        targets, store = self._fusion_targets(op, reads)
        if not targets:
            targets, store = [Group(_GROUP_OF_KIND[op.prim.kind], op, pos)], True
            if targets[0].kind is GroupKind.LOOP:
                reads[targets[0]] = {IDENTITY: value.type.size}
        for group in targets:
            group.ops.append(op)
        self.placed[op] = targets
        if store:
            targets[0].outputs.append(value)
            self.materialized.add(value)

    def _merge_epilogues(self, groups: list[Group]) -> list[Group]:
        """A matmul whose result only one loop group reads, that group storing only its own root,
        takes that group's ops as its epilogue and runs in its place, when the group
        - copies the result through transposes and reshapes into a value the matmul can write as a
          strided view (``result_view``: attention's head merge), or
        - only scales the (float) result and adds another value of its type (``accumulation``:
          ``w - lr * (h.T @ g)``, gemm's alpha and beta).
        The loop kernel and the matmul result's buffer go away. (After placement: the group's
        constants and index maps are inlined into it by then.)"""
        merged: dict[Group, Group] = {}
        for c in groups:
            if c.kind is not GroupKind.CONTRACT or c.ops[-1] is not c.root or c.root.result in self.returned:
                continue
            m = c.root.result
            readers = self.reads.get(m, {})
            if len(readers) != 1 or len(self.users[m]) != 1:
                continue
            (g,) = readers
            if g in merged or g.kind is not GroupKind.LOOP or g.outputs != [g.root.result]:
                continue  # (a loop adding two matmul results takes one of them)
            if not (self._layout_epilogue(c.root, g.ops) or self._accumulation_epilogue(c.root, g)):
                continue
            c.ops += g.ops
            c.outputs = list(g.outputs)
            c.root_pos = g.root_pos
            self.materialized.discard(m)
            merged[g] = c
        if not merged:
            return groups
        for op, placed in self.placed.items():
            self.placed[op] = [merged.get(g, g) for g in placed]
        for by_group in self.reads.values():
            for g, c in merged.items():
                if g in by_group:
                    by_group.setdefault(c, {}).update(by_group.pop(g))
        return sorted((g for g in groups if g not in merged), key=lambda g: g.root_pos)

    @staticmethod
    def _layout_epilogue(root: Op, chain: list[Op]) -> bool:
        """``chain`` is a line of transposes and reshapes from ``root``'s result that ``root`` can
        write through (``result_view``)."""
        if not all(op.prim in mv.STRIDED_VIEWS for op in chain) or chain[0].operands[0] is not root.result:
            return False
        if any(b.operands[0] is not a.result for a, b in zip(chain, chain[1:])):
            return False
        return result_view_of(root, chain) is not None

    @staticmethod
    def _accumulation_epilogue(root: Op, group: Group) -> bool:
        m = root.result
        return (
            m.type.dtype.is_float
            and root.operands[0].type.shape[-1] > 0
            and group.shape == m.type.shape
            and accumulation_of(root, group.ops) is not None
        )

    def _fusion_targets(self, op: Op, reads: dict[Group, dict[AccessKey, int]]) -> tuple[list[Group], bool]:
        """The groups to inline ``op`` into (and whether it must also be stored), per the module rules."""
        if op.prim.kind not in _INLINABLE or not reads:
            return [], False
        value = op.result
        if (
            self.contract_transposes
            and value not in self.returned
            and op.prim in mv.STRIDED_VIEWS
            and all(g.kind is GroupKind.CONTRACT for g in reads)
            and all(operand_view(g, k, op) is not None for g in reads for k in range(2))
        ):
            return list(reads), False  # a strided view for BLAS: no copy, no buffer
        inlinable = value not in self.returned and all(
            g.kind in _INLINING and len(keys) <= MAX_ACCESS_KEYS for g, keys in reads.items()
        )
        if self._reread_update(op, reads):
            return [], False  # roots a group of its own, over its window (``kernel/window.py``)
        if inlinable and op.prim.kind in _INDEX_MAPS:
            return list(reads), False
        if inlinable and self.recompute and self._recomputable(op, reads):
            return list(reads), False
        if inlinable and self._window_value(op, reads):
            return list(reads), False
        if inlinable and len(reads) == 1:
            ((group, keys),) = reads.items()
            if sum(keys.values()) <= value.type.size:
                return [group], False
        first = min(reads, key=lambda g: g.root_pos)
        if first.kind in _INLINING and set(reads[first]) == {IDENTITY}:
            return [first], True
        return [], False

    @staticmethod
    def _reread_update(op: Op, reads: dict[Group, dict[AccessKey, int]]) -> bool:
        """An update of a window that a group reads other than at the element it writes (its window
        read back: ``c[i] = c[i] * 2 + 1``): no index map to recompute in its readers. Inlined, a
        chain of such updates (a loop's) selects through every earlier update at every element;
        stored, each is computed over its base in place, over the window only
        (``compiler/kernel/window.py``). So is an update that the next update of a window takes as
        its base (``y[0] = a; y[5] = b``): inlined, the pair would be one loop over the whole array."""
        return op.prim in dyn.PARTIAL_UPDATES and any(
            set(keys) != {IDENTITY} or _updates(group.root, op) for group, keys in reads.items()
        )

    def _window_value(self, op: Op, reads: dict[Group, dict[AccessKey, int]]) -> bool:
        """A cheap elementwise op that only an update's new elements read (``y[0] = a`` copies ``a``,
        ``c[i] = 2 * v``): computed in the update's kernel, at the window's elements when the update
        runs over its window in place (``kernel/window.py``), instead of into a staging buffer of
        the window's size first. Not when it may read the update's base or an earlier version of it
        (through ops inlined with it): it would read elements this or an earlier update overwrites
        in place, or keep the earlier updates from being in place."""
        if len(reads) != 1 or op.prim.kind is not Kind.ELEMENTWISE or not ew.cheap_to_recompute(op):
            return False
        ((group, keys),) = reads.items()
        root = group.root
        if root.prim not in dyn.PARTIAL_UPDATES or not all(key[:1] == ((group.root_pos, 1),) for key in keys):
            return False
        versions, v = set(), root.operands[0]  # the base and the values earlier updates wrote it over
        while True:
            versions.add(v)
            producer = self.producer.get(v)
            if producer is None or producer.prim not in dyn.PARTIAL_UPDATES:
                break
            v = producer.operands[0]
        seen: set[Value] = set()
        todo = list(op.operands)
        while todo:
            v = todo.pop()
            if v in versions:  # (``t = y[0] * 2; y[0] = y[1]; y[1] = t``: t is computed first)
                return False
            producer = self.producer.get(v)
            if v in seen or producer is None or producer.prim.kind not in (Kind.ELEMENTWISE, *_INDEX_MAPS):
                continue  # a parameter or a buffer another group computes before
            seen.add(v)
            todo.extend(producer.operands)
        return True

    def _recomputable(self, op: Op, reads: dict[Group, dict[AccessKey, int]]) -> bool:
        """Rule 3: a cheap elementwise op read at the identity index only, whose operands are buffers
        anyway (params, reduction and matmul results, index maps of those) or cheap arithmetic on such
        buffers (recomputed with it)."""
        return (
            op.prim.kind is Kind.ELEMENTWISE
            and ew.cheap_to_recompute(op)
            and all(set(keys) == {IDENTITY} for keys in reads.values())
            and all(self._stored_anyway(v, RECOMPUTE_DEPTH) or self._cheap_of_stored(v) for v in op.operands)
        )

    def _cheap_of_stored(self, value: Value) -> bool:
        """``value`` is arithmetic (no transcendental function) on buffers: ``z - max(z)`` under ``exp``."""
        producer = self.producer.get(value)
        return (
            producer is not None
            and value not in self.returned
            and producer.prim.kind is Kind.ELEMENTWISE
            and producer.prim not in ew.TRANSCENDENTAL
            and all(self._stored_anyway(v, RECOMPUTE_DEPTH) for v in producer.operands)
        )

    def _stored_anyway(self, value: Value, depth: int) -> bool:
        producer = self.producer.get(value)
        if producer is None or producer.prim.kind in (
            Kind.REDUCTION,
            Kind.CONTRACTION,
            Kind.SCAN,
            Kind.CONTROL,
        ):
            return True
        return (
            depth > 0
            and producer.prim.kind in _INDEX_MAPS
            and all(self._stored_anyway(v, depth - 1) for v in producer.operands)
        )

    def _record_operand_reads(self, op: Op, pos: int, group: Group) -> None:
        """Charge the operands of ``op`` with the reads ``group`` makes of them."""
        if group.kind is GroupKind.CONTRACT:
            own, same_index = {IDENTITY: 0}, True  # CONTRACT groups never inline: numbers unused
        elif group.kind is GroupKind.SCATTER:  # reads its base at the element it writes, the rest not
            own, same_index = {IDENTITY: 0}, False
        elif group.kind in (GroupKind.REDUCE, GroupKind.SCAN) and op is group.root:
            own, same_index = {IDENTITY: op.operands[0].type.size}, True  # operand's own index space
        else:
            own = self.reads[op.result][group]
            same_index = op.prim.kind is Kind.ELEMENTWISE  # reads its operands at its own index
        # reads its base at the element it writes
        base_at_own = op.prim in dyn.PARTIAL_UPDATES or op.prim.kind is Kind.SCATTER
        for k, operand in enumerate(op.operands):
            at_own = same_index or (base_at_own and k == 0)
            moved = dict(own) if at_own else {key + ((pos, k),): n for key, n in own.items()}
            self.reads[operand].setdefault(group, {}).update(moved)

    def _inputs_of(self, group: Group) -> list[Value]:
        inside = {r for op in group.ops for r in op.results}
        seen: dict[Value, None] = {}
        for op in group.ops:
            for v in op.operands:
                if v not in inside:
                    seen[v] = None
        return list(seen)


def _updates(root: Op, op: Op) -> bool:
    """Whether ``root`` is an update of a window of ``op``'s result (takes it as its base)."""
    return root.prim in dyn.PARTIAL_UPDATES and root.operands[0] is op.result
