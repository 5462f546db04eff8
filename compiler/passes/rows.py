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

Reads of values produced before the band may be at any row. The memory planner sees a band as one
step (``FusionPlan.time``): every buffer a member writes is born where the band starts, every buffer
a member reads lives until it ends, so no two buffers of a band share bytes; a member may still
store its result over an operand it is the last to read (in place) when every other member reads
that operand only at the row being computed, before it (``Band.aligned``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from compiler.ir.core import Function, Value
from compiler.kernel.emit import BodyBuilder, ConstantPool
from compiler.passes.fuse import Band, FusionPlan, Group, GroupKind
from compiler.prims import elementwise as ew

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


ReadsCache = dict[tuple[object, ...], dict[Value, bool]]  # a group's ops and outputs -> ``_reads``


def form_bands(
    func: Function,
    fusion: FusionPlan,
    role: Callable[[Group], str | None],
    compute_once: bool = True,
    cache: ReadsCache | None = None,
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
    """
    returned = set(func.results)
    readers: dict[Value, list[Group]] = {}
    for g in fusion.groups:
        for v in g.inputs:
            readers.setdefault(v, []).append(g)
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
        members = set(band.groups)
        for g in band.groups:
            for v in g.outputs:
                if (
                    not _late(band, g, v)
                    and v not in returned
                    and v in readers
                    and all(r in members for r in readers[v])
                ):
                    band.local.add(v)
        for g in band.groups:
            fusion.band_of[g] = band
    fusion.bands = bands
    fusion.materialized -= fusion.local


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
    return value is group.root.result and 0 in group.reduced_axes


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
    if group.kind is GroupKind.REDUCE:
        builder.value_at(group.root.operands[0], idx)
    for v in group.outputs:
        if v is not group.root.result or group.kind is GroupKind.LOOP:
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
