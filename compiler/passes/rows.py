"""Row fusion: consecutive kernel groups that share their leading axis run as one kernel, row by row.

Layer norm's forward and backward is a dozen kernels over the same ``(rows, width)`` array: a row
sum, the centred values, a second row sum, the normalized values, the gradients. Run one after the
other, each streams the whole array through memory. Run as one band (``Band``), each row's work for
every member runs while the row is in cache, and a value that only the band reads, only at the row
being computed (the centred row, the row's mean), needs one row of scratch per thread instead of a
full buffer: fewer passes over memory and a smaller arena.

A group may join the band that ends just before it when

- it is a LOOP or REDUCE group (matmuls keep their BLAS kernels) that the backend writes as a loop
  nest (``role``: ``band_role`` with the target's NumPy-kernel test), its iteration space has the band's
  leading extent, and, for a reduction, the reduced axes are either trailing axes without axis 0 (a
  row reduction: its result for row ``i`` is ready after row ``i``) or include axis 0 (a column or
  full reduction: each thread accumulates partial results over its rows, combined in a fixed order
  after the band, so no member may read the result inside the band);
- every value it reads that an earlier member produces is read at the row being computed: its index
  expression for axis 0 is the loop's own row index (found by lowering the group's body
  symbolically, with the same ``BodyBuilder`` the backends use).

A small group that cannot run row by row (the loss of a softmax divided by the batch size) may
still join as a *tail* when it reads nothing the band computes row by row: it runs once, after the
loop, so the rows before and after it stay in one band.

A transcendental value that fusion recomputes in several members (softmax's ``exp(z - max)``, once
for the row sum and once for the gradient) is computed once per row instead, by the first of them,
and kept in the row scratch for the others (``_compute_once``).

A column reduction (over axis 0, keeping the others) may leave the band's rows for a kernel
of its own after them (``columns_after``, where the target asks: CUDA): it re-reads the band's
full-size inputs and the per-row values the band then stores (a layer norm's mean and deviation,
small) and recomputes its prologue (``xhat * dy``), as a tail member, in place of a partial row per
block of the band that every row the block takes reads and writes. The target's ``BandCosts``
give the sizes the choice weighs: bytes re-read against the partials' traffic and memory. With the
same sizes, a row the band keeps past the target's fast memory that is cheap to compute again is
computed by its readers instead (``rows_in_fast_memory``).

Reads of values produced before the band may be at any row. The memory planner sees a band as one
step (``FusionPlan.time``): every buffer a member writes is born where the band starts, every buffer
a member reads lives until it ends, so no two buffers of a band share bytes; a member may still
store its result over an operand it is the last to read (in place) when every other member reads
that operand only at the row being computed, before it (``Band.aligned``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from compiler.ir.core import Function, Op, Value
from compiler.kernel.emit import BodyBuilder, ConstantPool
from compiler.passes.fuse import IDENTITY, Band, FusionPlan, Group, GroupKind
from compiler.prims import elementwise as ew
from compiler.prims.base import Kind
from compiler.prims.dynamic import PARTIAL_UPDATES

MEMBER, TAIL = "member", "tail"  # the roles ``band_role`` gives a group (None: neither)
ROW = "i0"  # the loop variable of a group's leading axis (``emit.ROW``): the row a band computes
# How the kernels of a band run row by row, which decides what may join one (the CPU code generator
# follows the same numbers): groups of at least PARALLEL_MIN_ELEMENTS elements run their rows in
# parallel, in REDUCE_CHUNKS fixed chunks (fixed: results do not vary with the thread count); a
# reduction over axis 0 keeps a partial result per chunk, at most PARTIALS_MAX_ELEMENTS in all.
PARALLEL_MIN_ELEMENTS = 1 << 16
REDUCE_CHUNKS = 16
PARTIALS_MAX_ELEMENTS = 1 << 20
# A band holds at most this many groups: a longer run of row-local groups (an unrolled loop of row
# normalizations) becomes several bands, each a kernel of bounded size, and equal ones one shared
# function, instead of one kernel whose compile grows with the program (40 unrolled steps: one
# 36,000-character kernel, 47 s to compile; benchmarks/results/compile_scaling.md).
BAND_MAX_GROUPS = 16


def band_role(group: Group, numpy_kernel: Callable[[Group], bool], row_max: int | None = None) -> str | None:
    """The row-fusion role of ``group``: ``MEMBER`` for a group written as a loop nest (not a NumPy
    kernel: ``numpy_kernel``, the target's own test) whose reduction over axis 0, if any, keeps a
    partial result per chunk of rows within ``PARTIALS_MAX_ELEMENTS``; ``TAIL`` for a small loop nest
    that can run serially after a band's loop; else None. ``row_max``: the target's longest row
    (elements after the leading axis; CUDA keeps a band's rows in a block's shared memory)."""
    if (
        group.kind not in (GroupKind.LOOP, GroupKind.REDUCE)
        or math.prod(group.shape) == 0
        or numpy_kernel(group)
        or group.root.prim in PARTIAL_UPDATES  # a window update loops over its window (kernel/window.py)
    ):
        return None
    if row_max is not None and math.prod(group.shape[1:]) > row_max:
        return None
    if 0 in group.reduced_axes and REDUCE_CHUNKS * group.root.result.type.size > PARTIALS_MAX_ELEMENTS:
        return None
    if group.shape and group.shape[0] >= 2:
        return MEMBER
    small = group.kind is GroupKind.LOOP and math.prod(group.shape) < PARALLEL_MIN_ELEMENTS
    return TAIL if small else None


@dataclass(frozen=True)
class BandCosts:
    """A target's sizes for a band's column reductions (``columns_after``) and kept rows
    (``rows_in_fast_memory``).

    ``partial_rows(band)``: the partial rows per output a band keeps for a column reduction it runs
    itself (its blocks times its row slots: the scratch, each row of which every row the block
    takes reads and writes). ``chunks(rows, columns)``: the row chunks a column kernel after the
    band splits its rows into (a partial row each, combined in chunk order). ``row_bytes(band)``:
    the bytes of kept rows a row slot of the band holds in fast memory (a block's shared memory);
    rows past it cost a row of global scratch per slot. ``always``: every column reduction that
    can leave a band does (the cost model off; ``Options.band_columns``). ``siblings(shape,
    axes)``: the target runs reductions of ``shape`` over ``axes`` in one kernel with several
    outputs (``reductions_together``); None: each in a kernel of its own."""

    partial_rows: Callable[[Band], int]
    chunks: Callable[[int, int], int]
    row_bytes: Callable[[Band], int]
    always: bool = False
    siblings: Callable[[tuple[int, ...], frozenset[int]], bool] | None = None


ReadsCache = dict[tuple[object, ...], dict[Value, bool]]  # a group's ops and outputs -> ``_reads``


def form_bands(
    func: Function,
    fusion: FusionPlan,
    role: Callable[[Group], str | None],
    compute_once: bool = True,
    cache: ReadsCache | None = None,
    columns: BandCosts | None = None,
) -> None:
    """Group ``fusion.groups`` into bands of two or more members (``fusion.bands``, ``band_of``) and
    mark the values each band keeps per row (``Band.local``).

    ``role(group)``: ``MEMBER`` if the backend can run the group row by row, ``TAIL`` if it can run it
    serially after a band's loop (a small loop nest: a loss divided by the batch size), else None
    (``band_role``).
    A tail joins the band before it when it reads no value the band computes row by row: its results
    exist only after the loop, like a column reduction's, and row members after it may not read them.
    So softmax's forward and backward stay one band around the loss's division.

    ``compute_once``: a transcendental value several members recompute is computed by the first and
    kept per row for the others (``_compute_once``).

    ``columns``: the target's sizes for running a column reduction after a band's rows, as a kernel
    of its own (``columns_after``); None: every band computes its column reductions itself.
    """
    returned = set(func.results)
    bands: list[Band] = []
    current: Band | None = None
    for g in fusion.groups:
        kind = role(g)
        rows = _rows(g) if kind == MEMBER else None
        reads = _reads(g, cache) if kind is not None else {}
        if kind == TAIL and current is not None and _may_follow(current, reads):
            current.groups.append(g)
            current.tail.add(g)
            for v in reads:
                current.aligned.setdefault(v, {})[g] = False  # it runs after every row
            continue
        if rows is None:
            _close(current, bands)
            current = None
            continue
        full = current is not None and len(current.groups) >= BAND_MAX_GROUPS
        if current is None or full or current.rows != rows or not _may_join(current, g, reads):
            _close(current, bands)
            current = Band([], rows)
        current.groups.append(g)
        for v, aligned in reads.items():
            current.aligned.setdefault(v, {})[g] = aligned
    _close(current, bands)
    for band in bands:
        if compute_once:
            _compute_once(band, returned)
        if columns is not None:
            columns_after(func, fusion, band, columns)
    readers = _readers(fusion)
    for band in bands:
        members = set(band.groups)
        for g in band.groups:
            for v in g.outputs:
                if (
                    not _late(band, g, v)
                    and v not in returned
                    and v in readers
                    and all(r in members and r not in band.tail for r in readers[v])
                ):
                    band.local.add(v)
        if columns is not None:
            rows_in_fast_memory(func, fusion, band, columns.row_bytes(band), readers)
        for g in band.groups:
            fusion.band_of[g] = band
    fusion.bands = bands
    fusion.materialized -= fusion.local
    if columns is not None and columns.siblings is not None:
        reductions_together(func, fusion, columns.siblings)


def _readers(fusion: FusionPlan) -> dict[Value, list[Group]]:
    readers: dict[Value, list[Group]] = {}
    for g in fusion.groups:
        for v in g.inputs:
            readers.setdefault(v, []).append(g)
    return readers


def _close(band: Band | None, bands: list[Band]) -> None:
    """Keep ``band`` if it has two row members or more (trailing tails run as their own kernels)."""
    if band is None:
        return
    while band.groups and band.groups[-1] in band.tail:
        dropped = band.groups.pop()
        band.tail.discard(dropped)
        for readers in band.aligned.values():
            readers.pop(dropped, None)
    if len(band.groups) - len(band.tail) > 1:
        bands.append(band)


def _rows(group: Group) -> int | None:
    """The leading extent of ``group``'s iteration space if it can be a band member, else None."""
    shape = group.shape
    if group.kind not in (GroupKind.LOOP, GroupKind.REDUCE) or len(shape) == 0 or shape[0] < 2:
        return None
    if any(d == 0 for d in shape):
        return None
    axes = group.reduced_axes
    if 0 not in axes and axes != set(range(min(axes, default=len(shape)), len(shape))):
        return None  # reduces inner axes but keeps a later one: not a row reduction
    return shape[0]


def _late(band: Band, group: Group, value: Value) -> bool:
    """``value`` exists only after the band's loop: a tail's result, or the result of a reduction
    over axis 0 (the prologue values such a reduction also stores are ready row by row)."""
    if group in band.tail:
        return True
    return 0 in group.reduced_axes and any(value is op.result for op in group.reductions)


def _may_join(band: Band, group: Group, reads: dict[Value, bool]) -> bool:
    for member in band.groups:
        for v in member.outputs:
            if v in reads and (_late(band, member, v) or not reads[v]):
                return False
    return True


def _may_follow(band: Band, reads: dict[Value, bool]) -> bool:
    """A tail reads only values from before the band or that exist after its loop."""
    return all(_late(band, m, v) for m in band.groups for v in m.outputs if v in reads)


def _compute_once(band: Band, returned: set[Value]) -> None:
    """A transcendental value (``exp``, ``tanh`` ...) that fusion recomputes in several row members
    (cheap to recompute against a buffer, ``fuse``) is computed once per row instead: the first
    member that computes it stores it into the band's row scratch, and the later ones read it there.
    Softmax + cross-entropy computes ``exp(z - max)`` for the row sum and again for the gradient; a
    row of scratch per thread is cheaper than the second ``exp``.

    The first member must evaluate the value at its own index over the whole value (so every
    element of the row is stored), the later ones only at the row being computed."""
    members = [g for g in band.groups if g not in band.tail]
    computing: dict[Value, list[Group]] = {}
    for g in members:
        for op in g.ops:
            v = op.result
            if op.prim in ew.TRANSCENDENTAL and v not in g.outputs and v not in returned:
                computing.setdefault(v, []).append(g)
    for v, groups in computing.items():
        first, later = groups[0], groups[1:]
        if not later or v.type.shape != first.shape or v.type.shape[0] != band.rows:
            continue
        own_index = tuple(f"i{d}" for d in range(len(first.shape)))
        if _loads(first, v).get(v, set()) != {own_index}:
            continue
        if not all(at and at[0] == ROW for g in later for at in _loads(g, v).get(v, set())):
            continue
        first.outputs.append(v)
        for g in later:
            g.ops = [op for op in g.ops if op.result is not v]
            g.inputs.append(v)
            band.aligned.setdefault(v, {})[g] = True
        band.local.add(v)


def _loads(group: Group, hidden: Value | None = None) -> dict[Value, set[tuple[str, ...]]]:
    """The indices at which ``group``'s body reads each buffer (``hidden``: an inlined value read as
    if it were a buffer), found by lowering the body symbolically."""
    # the kernel level's scalar lowering (the one the kernels pass builds bodies with), run symbolically
    idx = tuple(f"i{d}" for d in range(len(group.shape)))
    reads: dict[Value, set[tuple[str, ...]]] = {}

    def load(v: Value, at: tuple[str, ...]) -> str:
        reads.setdefault(v, set()).add(tuple(at))
        return "x"

    inlined = {op.result: op for op in group.ops if op.result is not hidden}
    builder = BodyBuilder(inlined, load, ConstantPool())
    results = {op.result for op in group.reductions}
    for op in group.reductions:
        builder.value_at(op.operands[0], idx)
    for v in group.outputs:
        if v not in results:
            builder.value_at(v, idx)
    return reads


def _reads(group: Group, cache: ReadsCache | None = None) -> dict[Value, bool]:
    """Each buffer ``group`` reads, and whether every read is at the row being computed. ``cache``:
    answers for groups of the same ops and outputs (a group's body is lowered from nothing else),
    shared by the candidate programs that remat and schedule plan: they repeat most kernels."""
    key = (group.kind, *group.ops, None, *group.outputs)
    if cache is not None and key in cache:
        return cache[key]
    reads = {v: all(at and at[0] == ROW for at in ats) for v, ats in _loads(group).items()}
    if cache is not None:
        cache[key] = reads
    return reads


# ---- column reductions after the band ----------------------------------------------------------------

_RECOMPUTABLE = frozenset({Kind.ELEMENTWISE, Kind.MOVEMENT, Kind.SOURCE})
_RECOMPUTE_MAX_OPS = 64  # a longer prologue to compute again: the reduction stays in the band


@dataclass
class _Recompute:
    """What a column reduction reads once it leaves its band's rows: ``ops``, the band's values it
    computes again from ``leaves`` (buffers: the band's inputs and the per-row values the band then
    stores); ``dropped``, members' stored values that only it read (no longer stored)."""

    ops: set[Op]
    leaves: list[Value]
    dropped: dict[Value, Group]


def columns_after(func: Function, fusion: FusionPlan, band: Band, costs: BandCosts) -> None:
    """Each column reduction of ``band`` (a member over axis 0 alone that stores only its result)
    that the cost model sends after the rows becomes a tail: a kernel of its own after the band's
    rows (XLA's second pass) that reads the band's full-size inputs and the per-row values the band
    then stores, and computes its prologue again from them. In the band it keeps a partial row per
    block slot (``costs.partial_rows``) that each row the slot takes reads and writes; after it, it
    re-reads its full-size leaves once and keeps a partial row per chunk of rows (``costs.chunks``).
    At least two row members stay in the band (else it would be none)."""
    producer = {r: op for op in func.ops for r in op.results}
    position = {op: i for i, op in enumerate(func.ops)}
    outside = set(func.params) | set(func.results)
    for g in [m for m in band.groups if m not in band.tail and m.reduced_axes == {0}]:
        if len(band.groups) - len(band.tail) <= 2:
            return
        if g.outputs != [g.root.result] or len(g.shape) < 2:
            continue  # it stores prologue values the rows read
        found = _recompute(fusion, band, g, producer, outside)
        if found is not None and (costs.always or _after_pays(band, g, found, costs)):
            _move_after(fusion, band, g, found, position)


def _per_row(v: Value, band: Band) -> bool:
    shape = v.type.shape
    return bool(shape) and shape[0] == band.rows and math.prod(shape[1:]) == 1


def _recompute(
    fusion: FusionPlan, band: Band, g: Group, producer: dict[Value, Op], outside: set[Value]
) -> _Recompute | None:
    """Walk ``g``'s reads back to buffers it may read after the band: a value from before the band,
    one with a buffer anyway (``outside``: a parameter or result; or read by a kernel outside the
    band), or a per-row value (which the band then stores). A full-size value the band keeps per row
    is computed again from its operands (elementwise and index-map ops only; else None: ``g`` stays
    in the band)."""
    members = set(band.groups)
    made_by = {v: m for m in band.groups for v in m.outputs}
    readers = _readers(fusion)
    ops: set[Op] = set()
    leaves: dict[Value, None] = {}
    dropped: dict[Value, Group] = {}
    inside = {op.result for op in g.ops}
    stack = [v for op in g.ops for v in op.operands if v not in inside]
    seen: set[Value] = set()
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        member = made_by.get(v)
        others = [r for r in readers.get(v, []) if r is not g]
        kept = v in outside or any(r not in members for r in others)
        if v in outside or v in fusion.materialized:  # a buffer now
            if member is None or kept or _per_row(v, band):
                leaves[v] = None
                continue
            if not others:  # only ``g`` reads it: the member no longer stores it
                if v is member.root.result:
                    return None  # (the member would compute nothing the rows need)
                dropped[v] = member
        op = producer.get(v)
        if op is None or op.prim.kind not in _RECOMPUTABLE or len(ops) >= _RECOMPUTE_MAX_OPS:
            return None
        ops.add(op)
        stack += op.operands
    return _Recompute(ops, list(leaves), dropped)


def _after_pays(band: Band, g: Group, found: _Recompute, costs: BandCosts) -> bool:
    """The cost model, in bytes of memory traffic and of scratch. In the band: each row reads and
    writes its slot's partial row, and the partial rows are scratch. After it: the full-size leaves
    read again, the per-row values stored and read back (and kept), and, split into chunks, the
    chunks' partial rows written, read back and kept."""
    reducer = g.root.prim.reducer
    assert reducer is not None, f"{g.root.prim.name} has no reducer"
    wide = reducer.accumulator(g.root.result.type.dtype).itemsize
    kept = g.root.result.type.size
    in_band = (2 * band.rows + costs.partial_rows(band)) * kept * wide
    made_by = {v for m in band.groups for v in m.outputs}
    per_row = sum(3 * v.type.nbytes for v in found.leaves if v in made_by and _per_row(v, band))
    reread = sum(v.type.nbytes for v in found.leaves if not (v in made_by and _per_row(v, band)))
    chunks = costs.chunks(band.rows, kept)
    after = reread + per_row + (3 * chunks * kept * wide if chunks > 1 else 0)
    return after < in_band


def _move_after(fusion: FusionPlan, band: Band, g: Group, found: _Recompute, position: dict[Op, int]) -> None:
    """``g`` becomes a tail of ``band`` that computes ``found.ops`` again and reads ``found.leaves``;
    every member keeps its reads of them (no member may overwrite them: ``Band.aligned``)."""
    g.ops = sorted(set(g.ops) | found.ops, key=lambda op: position[op])
    band.tail.add(g)
    _read_again(fusion, band, g, in_rows=False)
    for v, member in found.dropped.items():
        member.outputs.remove(v)
        fusion.materialized.discard(v)


def reductions_together(
    func: Function, fusion: FusionPlan, together: Callable[[tuple[int, ...], frozenset[int]], bool]
) -> None:
    """Reductions over the same iteration space and axes that share an input and can run at the same
    point become one group with several outputs (``Group.siblings``), where the target runs such a
    reduction as one kernel (``together``): one pass over what they read instead of one each. Layer
    norm's beta gradient (the sum of ``dy`` over the rows) and gamma's (of ``dy * xhat``) read ``dy``
    once, as XLA's and torch.compile's multi-output reductions do. Each result is combined in the
    order its own kernel would use.

    A later group absorbs an earlier one (the group runs at the later's place: every input of both
    is ready there) when no group between them, the later one included, reads the earlier's
    results. Candidates: a band's column reductions after its rows (its tails, ``columns_after``:
    they all run after the rows) and the groups outside bands, where each of the earlier's inputs
    must be read at the later's place or after anyway (waiting keeps no buffer alive longer, and
    no argument from being overwritten or donated earlier)."""
    position = {op: i for i, op in enumerate(func.ops)}
    for band in fusion.bands:
        tails = [g for g in band.groups if g in band.tail and g.kind is GroupKind.REDUCE]
        _join(fusion, tails, band, together, position, lambda earlier, later: True)

    def inputs_live_on(earlier: Group, later: Group) -> bool:
        readers = _readers(fusion)
        return all(any(r.root_pos >= later.root_pos for r in readers[v]) for v in earlier.inputs)

    alone = [g for g in fusion.groups if g not in fusion.band_of and g.kind is GroupKind.REDUCE]
    _join(fusion, alone, None, together, position, inputs_live_on)


def _join(
    fusion: FusionPlan,
    candidates: list[Group],
    band: Band | None,
    together: Callable[[tuple[int, ...], frozenset[int]], bool],
    position: dict[Op, int],
    may_wait: Callable[[Group, Group], bool],
) -> None:
    """``reductions_together`` over ``candidates`` (groups of ``band``, or outside bands: None), in
    their order; ``may_wait(earlier, later)``: ``earlier`` may run at ``later``'s place."""
    joined: list[Group] = []
    for g in candidates:
        partner = next(
            (m for m in joined if _siblings(fusion, band, m, g, together) and may_wait(m, g)), None
        )
        if partner is None:
            joined.append(g)
            continue
        _absorb(fusion, band, g, partner, position)
        joined[joined.index(partner)] = g


def _siblings(
    fusion: FusionPlan,
    band: Band | None,
    earlier: Group,
    later: Group,
    together: Callable[[tuple[int, ...], frozenset[int]], bool],
) -> bool:
    if earlier.shape != later.shape or earlier.reduced_axes != later.reduced_axes:
        return False
    if not together(later.shape, later.reduced_axes) or not set(earlier.inputs) & set(later.inputs):
        return False
    order = fusion.groups if band is None else band.groups
    between = order[order.index(earlier) + 1 : order.index(later) + 1]
    return not any(v in m.inputs for m in between for v in earlier.outputs)


def _absorb(
    fusion: FusionPlan, band: Band | None, group: Group, earlier: Group, position: dict[Op, int]
) -> None:
    """``group`` computes ``earlier``'s reductions too, at its own place; ``earlier`` is gone."""
    group.ops = sorted(set(group.ops) | set(earlier.ops), key=lambda op: position[op])
    group.siblings += earlier.reductions
    group.outputs += earlier.outputs
    inside = {op.result for op in group.ops}
    group.inputs = list(dict.fromkeys(v for op in group.ops for v in op.operands if v not in inside))
    for by_group in fusion.access.values():
        if earlier in by_group:
            by_group[group] = by_group.get(group, frozenset()) | by_group.pop(earlier)
    for op, g in fusion.group_of.items():
        if g is earlier:
            fusion.group_of[op] = group
    fusion.groups.remove(earlier)
    fusion.band_of.pop(earlier, None)
    if band is not None:
        for readers in band.aligned.values():
            if earlier in readers:
                readers[group] = readers.pop(earlier) and readers.get(group, True)
        band.groups.remove(earlier)
        band.tail.discard(earlier)


# ---- kept rows past fast memory ------------------------------------------------------------------------


def rows_in_fast_memory(
    func: Function, fusion: FusionPlan, band: Band, budget: int, readers: dict[Value, list[Group]]
) -> None:
    """While the rows ``band`` keeps (full-size local values) need more than ``budget`` bytes per row
    slot, a kept row that its readers can compute again cheaply (arithmetic and index maps on what
    its producer read: ``x - mean`` from ``x`` and the row's mean) is computed again by each reader
    instead of being kept: the band re-reads an input row (from cache, just read) instead of keeping
    a row of global scratch per block slot. The rows with fewest readers go first (the backend gives
    fast memory to the most read)."""
    producer = {r: op for op in func.ops for r in op.results}
    position = {op: i for i, op in enumerate(func.ops)}
    made_by = {v: m for m in band.groups for v in m.outputs}
    kept = sorted(
        (v for v in band.local if math.prod(v.type.shape[1:]) > 1),
        key=lambda v: (len(readers[v]), position[producer[v]]),
    )
    need = sum(math.prod(v.type.shape[1:]) * v.type.dtype.itemsize for v in kept)
    for v in kept:
        if need <= budget:
            return
        member = made_by[v]
        chain = _row_chain(v, producer, fusion.materialized)
        if chain is None or v is member.root.result:
            continue
        for r in _readers(fusion)[v]:  # (a reader may read it through a row computed again before)
            r.ops = sorted(set(r.ops) | chain, key=lambda op: position[op])
            _read_again(fusion, band, r, in_rows=True)
        member.outputs.remove(v)
        band.local.discard(v)
        fusion.materialized.discard(v)
        need -= math.prod(v.type.shape[1:]) * v.type.dtype.itemsize


def _row_chain(v: Value, producer: dict[Value, Op], stored: set[Value]) -> set[Op] | None:
    """The ops that compute ``v`` from values with a buffer or a row of the band (``stored``: the ops
    its producer inlined), if they are all cheap arithmetic or index maps; else None."""
    chain: set[Op] = set()
    stack = [v]
    while stack:
        op = producer[stack.pop()]
        if op.prim.kind not in _RECOMPUTABLE or op.prim in ew.TRANSCENDENTAL:
            return None
        if len(chain) >= _RECOMPUTE_MAX_OPS:
            return None
        chain.add(op)
        stack += [u for u in op.operands if u in producer and u not in stored]
    return chain


def _read_again(fusion: FusionPlan, band: Band, g: Group, in_rows: bool) -> None:
    """``g``'s inputs once its ops changed, and what the planner asks of its reads: whether each is
    at the row being computed (``Band.aligned``: never, for a kernel after the rows, ``in_rows``
    False) and, for a new input, its access keys (the identity, or another index)."""
    before = set(g.inputs)
    inside = {op.result for op in g.ops}
    g.inputs = list(dict.fromkeys(v for op in g.ops for v in op.operands if v not in inside))
    for v in before - set(g.inputs):
        band.aligned.get(v, {}).pop(g, None)
        fusion.access.get(v, {}).pop(g, None)
    own = tuple(f"i{d}" for d in range(len(g.shape)))
    for v, ats in _loads(g).items():
        band.aligned.setdefault(v, {})[g] = in_rows and all(at and at[0] == ROW for at in ats)
        if v not in before:
            keys = {IDENTITY if at == own else ((g.root_pos, k),) for k, at in enumerate(sorted(ats))}
            fusion.access.setdefault(v, {})[g] = frozenset(keys)
