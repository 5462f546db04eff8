"""Fusion: partition a function's ops into kernel groups; decide which values need a buffer.

A group is one kernel. Its *root* is its last op (except a matmul's epilogue, below); the other ops
are producers inlined into it: their scalar lowering (``prim.emit``) is called through ``ctx.read``
wherever the group reads them, so a chain such as ``exp(x * 2 + broadcast(b))`` is one loop nest
with no intermediate buffer.

Group kinds follow the root's primitive kind:
- ``LOOP``: an elementwise, movement or source root; iterates over the root's shape.
- ``REDUCE``: a reduction root; iterates over its operand's shape; producers of the operand
  (the prologue) are inlined.
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
key happen at the same index expression, which the code generator computes once (its memo); so
the number of element evaluations inlining costs is the sum, over the keys, of the evaluations of
the reading op. An elementwise, movement or source op that is not a function result, whose
readers are all LOOP or REDUCE groups reading it at no more than ``MAX_ACCESS_KEYS`` keys each,
is inlined:

1. a movement or source op into *every* group that reads it. Recomputing an index map or a literal
   costs index arithmetic only, and its operands are charged the recomputation through their own
   access keys; so a broadcast read by two reductions needs no full-size buffer (its small operand
   may);
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
from compiler.prims import elementwise as ew
from compiler.prims import movement as mv
from compiler.prims import source as src
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


_GROUP_OF_KIND = {
    Kind.ELEMENTWISE: GroupKind.LOOP,
    Kind.MOVEMENT: GroupKind.LOOP,
    Kind.SOURCE: GroupKind.LOOP,
    Kind.REDUCTION: GroupKind.REDUCE,
    Kind.CONTRACTION: GroupKind.CONTRACT,
}
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

    @property
    def shape(self) -> tuple[int, ...]:
        """The iteration space: the reduction operand's shape for REDUCE, else the root's shape."""
        if self.kind is GroupKind.REDUCE:
            return self.root.operands[0].type.shape
        return self.root.result.type.shape

    @property
    def reduced_axes(self) -> frozenset[int]:
        """The axes a REDUCE group's root reduces (empty for other kinds)."""
        if self.kind is not GroupKind.REDUCE:
            return frozenset()
        return frozenset(int(a) for a in self.root.attrs["axes"])

    def produces(self, value: Value) -> bool:
        return any(value in op.results for op in self.ops)


@dataclass(frozen=True)
class OperandView:
    """A matmul operand read as a strided view of ``source``'s (row-major) buffer: ``batch`` is the
    (size, stride) of each batch axis left after merging the contiguous ones and dropping those of
    size 1 (at most two), ``rows``/``cols`` the strides of the last two axes (in elements)."""

    source: Value
    batch: tuple[tuple[int, int], ...]
    rows: int
    cols: int

    def batch_offset(self, t: str) -> str:
        """The offset of batch element ``t`` (a flat index over the batch axes), as an expression."""
        terms, inner = [], 1
        for size, stride in reversed(self.batch):
            index = t if inner == 1 else f"({t} // {inner})"
            index = index if size * inner == math.prod(s for s, _ in self.batch) else f"({index} % {size})"
            terms.append(f"{index} * {stride}")
            inner *= size
        return " + ".join(reversed(terms)) or "0"


MAX_VIEW_BATCH_AXES = 2  # batch axes a strided matmul operand may keep after merging (CUDA's kernel)


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def reshaped_strides(
    shape: tuple[int, ...], strides: tuple[int, ...], new_shape: tuple[int, ...]
) -> tuple[int, ...] | None:
    """The strides of ``new_shape`` viewing the same elements as (``shape``, ``strides``) in row-major
    order, or ``None`` where that needs a copy (NumPy's no-copy reshape rule: each run of old axes
    merged or split must be contiguous within itself)."""
    if math.prod(shape) == 0:
        return contiguous_strides(new_shape)
    old = [(n, st) for n, st in zip(shape, strides, strict=True) if n != 1]
    new_strides = [0] * len(new_shape)
    oi = ni = 0
    while ni < len(new_shape) and oi < len(old):
        if new_shape[ni] == 1:
            ni += 1
            continue
        oj, nj = oi + 1, ni + 1
        n_old, n_new = old[oi][0], new_shape[ni]
        while n_old != n_new:
            if n_new < n_old:
                n_new *= new_shape[nj]
                nj += 1
            else:
                n_old *= old[oj][0]
                oj += 1
        if any(old[k][1] != old[k + 1][0] * old[k + 1][1] for k in range(oi, oj - 1)):
            return None
        new_strides[nj - 1] = old[oj - 1][1]
        for k in range(nj - 1, ni, -1):
            new_strides[k - 1] = new_strides[k] * new_shape[k]
        oi, ni = oj, nj
    return tuple(new_strides)


def _strided(chain: list[Op], source: Value) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(shape, strides) of the last value of ``chain`` (transposes and reshapes, in program order)
    as a view of ``source``'s contiguous buffer, or ``None`` where a reshape would need a copy."""
    shape = source.type.shape
    strides = contiguous_strides(shape)
    for op in chain:
        new_shape = op.result.type.shape
        if op.prim is mv.transpose:
            strides = tuple(strides[int(p)] for p in op.attrs["perm"])
        else:
            reshaped = reshaped_strides(shape, strides, new_shape)
            if reshaped is None:
                return None
            strides = reshaped
        shape = new_shape
    return shape, strides


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
    found = _strided(chain[::-1], v)
    return None if found is None else _matrix_view(v, *found)


def _matrix_view(source: Value, shape: tuple[int, ...], strides: tuple[int, ...]) -> OperandView | None:
    """(``shape``, ``strides``) in ``source``'s buffer as one matrix per batch element with a unit
    stride along its rows or its columns, or ``None``."""
    *batch_shape, r, c = shape
    *batch_strides, sr, sc = strides
    if c == 1:  # one column: any column stride reads it; rows at least one apart for BLAS
        sc, sr = 1, max(sr, 1) if r > 1 else 1
    elif r == 1:  # one row: read as rows of memory if its columns are adjacent, else as one column
        sr = c if sc == 1 else 1
    if sc != 1 and sr != 1:
        return None
    batch = _merged(batch_shape, batch_strides)
    if batch is None:
        return None
    return OperandView(source, batch, sr, sc)


def result_view(group: Group) -> OperandView | None:
    """Where a CONTRACT group's matmul writes its result: its own buffer (``None``), or, when the group
    ends in transposes and reshapes of the result (an epilogue, ``_Fuser._epilogue``), the strided
    view of the stored chain end that the result is: e.g. ``a = p @ v`` (B, H, T, dh) written straight
    into ``transpose(a, (0, 2, 1, 3)).reshape(B * T, D)``, one (T, dh) block per batch element with
    row stride D. A result whose columns are the strided axis is written as the transposed product."""
    if group.kind is not GroupKind.CONTRACT or group.ops[-1] is group.root:
        return None
    chain = group.ops[group.ops.index(group.root) + 1 :]
    return _result_view(group.root, chain) if all(_layout(op) for op in chain) else None


def _result_view(root: Op, chain: list[Op]) -> OperandView | None:
    """The matmul result of ``root`` as a strided view of the buffer of ``chain``'s last value."""
    end = chain[-1].result
    shape, strides = end.type.shape, contiguous_strides(end.type.shape)
    for op in reversed(chain):  # from the stored end back to the matmul result
        before = op.operands[0].type.shape
        if op.prim is mv.transpose:
            back = [0] * len(strides)
            for i, p in enumerate(op.attrs["perm"]):
                back[int(p)] = strides[i]
            strides = tuple(back)
        else:
            reshaped = reshaped_strides(shape, strides, before)
            if reshaped is None:
                return None
            strides = reshaped
        shape = before
    return _matrix_view(end, shape, strides)


@dataclass(frozen=True)
class Accumulation:
    """A CONTRACT group's elementwise epilogue ``out = alpha * (a @ b) + beta * source`` (gemm's alpha
    and beta, ``source`` read only at the element written): an SGD step ``w - lr * (h.T @ g)``."""

    source: Value
    alpha: float
    beta: float


def accumulation(group: Group) -> Accumulation | None:
    """The accumulation epilogue of a CONTRACT group (``_Fuser._epilogue``), if it has one."""
    if group.kind is not GroupKind.CONTRACT or group.ops[-1] is group.root:
        return None
    return _accumulation(group.root, group.ops[group.ops.index(group.root) + 1 :])


def _accumulation(root: Op, ops: list[Op]) -> Accumulation | None:
    """``ops`` (program order, after the matmul ``root``) compute ``alpha * M + beta * X`` from the
    matmul result ``M``, scalar constants and one other value ``X`` of the result's type, and nothing
    else: the last op adds or subtracts, the ``M`` side is ``M`` scaled by constants and negations."""
    produced = {op.result: op for op in ops}
    used: set[Op] = set()
    m = root.result

    def constant(v: Value) -> float | None:
        op = produced.get(v)
        if op is not None and op.prim is mv.broadcast:
            inner = constant(op.operands[0])
            if inner is not None:
                used.add(op)
            return inner
        if op is None or op.prim is not src.constant or not src.is_splat(op.attrs["value"]):
            return None
        used.add(op)
        return float(op.attrs["value"].flat[0])

    def scale(v: Value) -> float | None:  # v = scale * M
        if v is m:
            return 1.0
        op = produced.get(v)
        found: float | None = None
        if op is not None and op.prim is ew.neg:
            inner = scale(op.operands[0])
            found = None if inner is None else -inner
        elif op is not None and op.prim is ew.mul:
            for c, t in (op.operands, op.operands[::-1]):
                k, inner = constant(c), scale(t)
                if k is not None and inner is not None:
                    found = k * inner
                    break
        if op is not None and found is not None:
            used.add(op)
        return found

    end = ops[-1]
    if end.prim not in (ew.add, ew.sub):
        return None
    a, b = end.operands
    found: Accumulation | None = None
    for t, x, sign_t, sign_x in ((a, b, 1.0, 1.0), (b, a, 1.0 if end.prim is ew.add else -1.0, 1.0)):
        if end.prim is ew.sub and t is a:
            sign_x = -1.0
        k = scale(t)
        if k is not None and x not in produced and x is not m and x.type == end.result.type:
            found = Accumulation(x, sign_t * k, sign_x)
            break
    if found is None or used | {end} != set(ops):
        return None
    return found


def _merged(shape: list[int], strides: list[int]) -> tuple[tuple[int, int], ...] | None:
    """Batch axes as (size, stride), size-1 axes dropped and contiguous neighbours merged; ``None``
    beyond ``MAX_VIEW_BATCH_AXES``."""
    batch: list[tuple[int, int]] = []
    for size, stride in zip(shape, strides, strict=True):
        if size == 1:
            continue
        if batch and batch[-1][1] == size * stride:
            batch[-1] = (batch[-1][0] * size, stride)
        else:
            batch.append((size, stride))
    return tuple(batch) if len(batch) <= MAX_VIEW_BATCH_AXES else None


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
    bands: list[Band] = field(default_factory=list)  # row fusion (CPU): empty unless rows.form_bands ran
    band_of: dict[Group, Band] = field(default_factory=dict)

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
        computes every value of an element before its stores)."""
        if group.kind is GroupKind.CONTRACT:  # gemm reads C at the element it writes: beta * C + ...
            acc = accumulation(group)
            operands = {view.source for pos in range(2) if (view := operand_view(group, pos)) is not None}
            return acc is not None and old is acc.source and old not in operands and old.type == new.type
        if not old.type.shape == new.type.shape == group.shape:
            return False
        return self.access.get(old, {}).get(group, frozenset({IDENTITY})) <= {IDENTITY}

    def __str__(self) -> str:
        lines = []
        for g in self.groups:
            ops = " ".join(self.names[op.result] for op in g.ops)
            outs = ", ".join(self.names[v] for v in g.outputs)
            ins = ", ".join(self.names[v] for v in g.inputs) or "-"
            shape = "x".join(map(str, g.shape)) or "scalar"
            lines.append(f"group {g.index} {g.kind.value} [{shape}]: {ops}  stores {outs}  reads {ins}")
        return "\n".join(lines)


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


def _layout(op: Op) -> bool:
    return op.prim is mv.transpose or op.prim is mv.reshape


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
            (value,) = op.results
            if not self.users[value] and value not in self.returned:
                dead.append(op)
                continue
            self._place(op, pos)
            for group in self.placed[op]:
                self._record_operand_reads(op, pos, group)
        unique = {id(g): g for groups in self.placed.values() for g in groups}
        groups = sorted(unique.values(), key=lambda g: g.root_pos)
        for g in groups:
            g.ops.reverse()  # they were added in reverse program order
        if self.contract_transposes:
            groups = self._merge_accumulations(groups)
        for i, g in enumerate(groups):
            g.index = i
            g.inputs = self._inputs_of(g)
        group_of = {op: groups[0] for op, groups in self.placed.items()}
        access = {
            v: {g: frozenset(keys) for g, keys in by_group.items()} for v, by_group in self.reads.items()
        }
        names = value_names(self.func)
        return FusionPlan(groups, group_of, self.materialized, dead[::-1], names, access)

    def _place(self, op: Op, pos: int) -> None:
        value = op.result
        reads = self.reads[value]
        epilogue = self._epilogue(op)
        if epilogue is not None:  # the matmul writes straight into its layout chain's stored end
            epilogue.kind, epilogue.root = GroupKind.CONTRACT, op
            epilogue.ops.append(op)
            self.placed[op] = [epilogue]
            return
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

    def _merge_accumulations(self, groups: list[Group]) -> list[Group]:
        """A float matmul whose result only one loop group reads, and only to scale it and add
        another value of its type (``accumulation``: ``w - lr * (h.T @ g)``), takes that group's ops
        as its epilogue and runs in its place: gemm's alpha and beta do the loop's work, and the
        matmul's result needs no buffer. (After placement: the loop's constants are inlined by then.)"""
        merged: dict[Group, Group] = {}
        for c in groups:
            m = c.root.result
            if c.kind is not GroupKind.CONTRACT or c.ops[-1] is not c.root or m in self.returned:
                continue
            readers = self.reads.get(m, {})
            if not m.type.dtype.is_float or c.root.operands[0].type.shape[-1] == 0 or len(readers) != 1:
                continue
            (g,) = readers
            if g in merged or g.kind is not GroupKind.LOOP or g.outputs != [g.root.result]:
                continue  # (a loop adding two matmul results takes one of them)
            if g.shape != m.type.shape:
                continue
            if _accumulation(c.root, g.ops) is None:
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

    def _epilogue(self, op: Op) -> Group | None:
        """The group ``op`` (a matmul) joins as its root when its result is read only by a group that
        just copies it through transposes and reshapes into a stored value that ``op`` can write as
        a strided view (``result_view``): the copy kernel and the result's buffer go away."""
        value = op.result
        reads = self.reads[value]
        if not self.contract_transposes or op.prim.kind is not Kind.CONTRACTION or value in self.returned:
            return None
        if len(reads) != 1 or len(self.users[value]) != 1:
            return None
        (group,) = reads
        chain = group.ops[::-1]  # still in reverse program order while fusing
        if group.kind is not GroupKind.LOOP or group.outputs != [group.root.result]:
            return None
        if not all(_layout(c) for c in chain) or chain[0].operands[0] is not value:
            return None
        if any(b.operands[0] is not a.result for a, b in zip(chain, chain[1:])):
            return None
        return group if _result_view(op, chain) is not None else None

    def _fusion_targets(self, op: Op, reads: dict[Group, dict[AccessKey, int]]) -> tuple[list[Group], bool]:
        """The groups to inline ``op`` into (and whether it must also be stored), per the module rules."""
        if op.prim.kind not in _INLINABLE or not reads:
            return [], False
        value = op.result
        if (
            self.contract_transposes
            and value not in self.returned
            and _layout(op)
            and all(g.kind is GroupKind.CONTRACT for g in reads)
            and all(operand_view(g, k, op) is not None for g in reads for k in range(2))
        ):
            return list(reads), False  # a strided view for BLAS: no copy, no buffer
        inlinable = value not in self.returned and all(
            g.kind is not GroupKind.CONTRACT and len(keys) <= MAX_ACCESS_KEYS for g, keys in reads.items()
        )
        if inlinable and op.prim.kind in _INDEX_MAPS:
            return list(reads), False
        if inlinable and self.recompute and self._recomputable(op, reads):
            return list(reads), False
        if inlinable and len(reads) == 1:
            ((group, keys),) = reads.items()
            if sum(keys.values()) <= value.type.size:
                return [group], False
        first = min(reads, key=lambda g: g.root_pos)
        if first.kind is not GroupKind.CONTRACT and set(reads[first]) == {IDENTITY}:
            return [first], True
        return [], False

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
        if producer is None or producer.prim.kind in (Kind.REDUCTION, Kind.CONTRACTION):
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
        elif group.kind is GroupKind.REDUCE and op is group.root:
            own, same_index = {IDENTITY: op.operands[0].type.size}, True  # operand's own index space
        else:
            own = self.reads[op.result][group]
            same_index = op.prim.kind is Kind.ELEMENTWISE  # reads its operands at its own index
        for k, operand in enumerate(op.operands):
            moved = dict(own) if same_index else {key + ((pos, k),): n for key, n in own.items()}
            self.reads[operand].setdefault(group, {}).update(moved)

    def _inputs_of(self, group: Group) -> list[Value]:
        inside = {op.result for op in group.ops}
        seen: dict[Value, None] = {}
        for op in group.ops:
            for v in op.operands:
                if v not in inside:
                    seen[v] = None
        return list(seen)
