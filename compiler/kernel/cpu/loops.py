"""CPU kernels of LOOP and REDUCE groups and of row bands, as kernel IR (``compiler/kernel/ir.py``).

A LOOP group is first written as one flat loop over the iteration space, reading its same-shape
inputs through 1-D views: LLVM vectorizes that best. If any read needs the multi-dimensional index
(a broadcast, transpose, slice, iota ...) the group is written as a loop nest in storage order
instead. Reductions iterate their operand in storage order and accumulate into the output (into a
local accumulator over the trailing reduced axes). Every load and store is recorded on its
statement (``Line.reads`` / ``Line.writes``) as the body is built.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace

from compiler.ir.core import Op, Value
from compiler.ir.types import DType
from compiler.kernel import arraylevel
from compiler.kernel.cpu.records import CpuSchedule, Kernel, Scratch, jit_decorator
from compiler.kernel.emit import ROW, BodyBuilder, ConstantPool, literal, subscript, typed
from compiler.kernel.ir import (
    Access,
    Alloc,
    For,
    If,
    KernelIR,
    Line,
    Stmt,
    View,
    lines,
    nest,
    print_python,
    variables,
    walk,
)
from compiler.passes.fuse import Group
from compiler.passes.rows import PARALLEL_MIN_ELEMENTS, PARTIALS_MAX_ELEMENTS, REDUCE_CHUNKS

Place = Access | str  # an element of an array, or a scalar variable (a band's one-element row)


def text(place: Place) -> str:
    return place if isinstance(place, str) else subscript(place.array, place.index)


def store(place: Place, value: str, reads: tuple[Access, ...] = ()) -> Line:
    """``place = value``, recording the store."""
    return Line(f"{text(place)} = {value}", reads, (place,) if isinstance(place, Access) else ())


@dataclass
class KernelSpec:
    group: Group
    names: dict[Value, str]
    pool: ConstantPool
    schedule: CpuSchedule
    local: dict[Value, str] = field(default_factory=dict)  # band scratch: value -> its row's name
    prefix: str = ""  # of the kernel's own scalars' names (a band member's: ``m2_``)
    # the kernel's parameter for each buffer the driver passes: positional (``p0, p1, ...``), so
    # kernels equal up to their buffers have equal text (``shared_kernels``); a band's members share
    # the band's
    params: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.params:
            self.params = {a: f"p{i}" for i, a in enumerate(self.args)}

    def param(self, v: Value) -> str:
        """The kernel's name for ``v``'s buffer."""
        return self.params[self.names[v]]

    def locate(self, v: Value, at: tuple[str, ...]) -> Place:
        """The element of ``v`` at ``at``: in its buffer, or inside a band in the row kept per thread
        (the row index dropped; a row of one element is a scalar)."""
        local = self.local.get(v)
        if local is None:
            return Access(self.param(v), at)
        assert at[:1] == (ROW,), f"{self.names[v]}: a band reads its rows only at the current row"
        return local if math.prod(v.type.shape[1:]) == 1 else Access(local, at[1:])

    @property
    def kernel_name(self) -> str:
        return f"{self.pool.prefix}k{self.group.index}_{self.group.root.prim.name}"

    @property
    def args(self) -> list[str]:
        """Each buffer once (an output stored over an input has that input's name)."""
        return list(dict.fromkeys(self.names[v] for v in self.group.inputs + self.group.outputs))

    def inlined(self) -> dict[Value, Op]:
        return {op.result: op for op in self.group.ops}

    def define(self, body: list[Stmt], parallel: bool = False, reassoc: bool = False) -> Kernel:
        ir = KernelIR(self.kernel_name, [self.params[a] for a in self.args], body, reassoc)
        return printed(ir, self.args, parallel)


def printed(ir: KernelIR, args: list[str], parallel: bool) -> Kernel:
    """The kernel record of ``ir``, called with the driver's buffers ``args`` and then its scratch
    (``planned_scratch``); its ``key`` is its text under a name of no kernel (``shared_kernels``:
    equal keys, one function)."""
    ir, scratch = planned_scratch(ir)
    key = print_kernel(replace(ir, name=ANONYMOUS), parallel)
    args = [*args, *(s.name for s in scratch)]
    return Kernel(ir.name, args, print_kernel(ir, parallel), ir=ir, key=key, scratch=scratch)


def planned_scratch(ir: KernelIR) -> tuple[KernelIR, list[Scratch]]:
    """``ir`` with its scratch (its allocations, at its top level, every one of a constant shape) as
    parameters after its buffers: the driver passes views of the arena where the ``scratch`` pass
    placed them, so the memory plan holds every byte a call uses (``memory_plan()``)."""
    allocs = [s for s in ir.body if isinstance(s, Alloc) and all(isinstance(n, int) for n in s.shape)]
    if not allocs:
        return ir, []
    body = [s for s in ir.body if not any(s is a for a in allocs)]
    scratch = [Scratch(f"{ir.name}_{a.name}", tuple(int(n) for n in a.shape), a.dtype) for a in allocs]
    return replace(ir, params=[*ir.params, *(a.name for a in allocs)], body=body), scratch


ANONYMOUS = "K"


def print_kernel(ir: KernelIR, parallel: bool) -> str:
    header = [jit_decorator(parallel, reassoc=ir.reassoc), f"def {ir.name}({', '.join(ir.params)}):"]
    body = _one_element_views(ir.body, ir.params) if parallel else ir.body
    return "\n".join(header + (print_python(body, 1) or ["    pass"]))


def _one_element_views(body: list[Stmt], params: list[str]) -> list[Stmt]:
    """``body`` with each 0-d parameter it reads or writes (``x[()]``) taken through a one-element view
    made before its loops (``x_1 = x.reshape(1)``, ``x_1[0]``): Numba's parfor lowering cannot type
    ``x[()]`` inside a ``prange`` (a TypingError, "getitem(float64, Tuple())")."""
    accesses = [a for s in walk(body) if isinstance(s, Line) for a in (*s.reads, *s.writes)]
    scalars = sorted({a.array for a in accesses if not a.index and a.array in params})
    if not scalars:
        return body
    pattern = re.compile(rf"\b({'|'.join(map(re.escape, scalars))})\[\(\)\]")

    def rewritten(stmts: list[Stmt]) -> list[Stmt]:
        out: list[Stmt] = []
        for s in stmts:
            if isinstance(s, Line):
                s = replace(s, text=re.sub(pattern, r"\1_1[0]", s.text))
            elif isinstance(s, For | If):
                s = replace(s, body=rewritten(s.body))
            out.append(s)
        return out

    return [*(View(f"{name}_1", name, (1,)) for name in scalars), *rewritten(body)]


@dataclass
class _Body:
    stmts: list[Stmt]  # loop body statements (computations and stores)
    views: list[Stmt]  # statements before the loops (flat views)
    loops: list[str]  # loop variable names, outermost first
    extents: list[int]
    target: str | None  # temporary holding the requested value (the reduction operand)
    flat: bool = False


def loop_body(
    spec: KernelSpec, shape: tuple[int, ...], stores: list[Value], want: Value | None, try_flat: bool
) -> _Body:
    """One flat loop if allowed and no read needs the multi-dimensional index, else a loop nest."""
    if try_flat:
        flat = body(spec, shape, stores, want, flat=True)
        if flat is not None:
            return flat
    nested = body(spec, shape, stores, want, flat=False)
    assert nested is not None  # a loop nest can always be written
    return nested


def body(
    spec: KernelSpec, shape: tuple[int, ...], stores: list[Value], want: Value | None, flat: bool
) -> _Body | None:
    """The loop body over ``shape`` storing ``stores``; ``None`` if ``flat`` and a read needs indices."""
    idx = tuple(f"i{d}" for d in range(len(shape)))
    flat_views: dict[str, None] = {}

    def locate(v: Value, at: tuple[str, ...]) -> Place:
        if flat and at == idx and v.type.shape == shape:
            flat_views[spec.param(v)] = None
            return Access(f"{spec.param(v)}_f", ("i",))
        return spec.locate(v, at)

    builder = BodyBuilder(spec.inlined(), lambda v, at: text(locate(v, at)), spec.pool, spec.prefix)
    target = builder.value_at(want, idx) if want is not None else None
    stores_ir = []
    for v in stores:
        temp = builder.value_at(v, idx)
        stores_ir.append(store(locate(v, idx), temp))
    stmts: list[Stmt] = []
    for k, line in enumerate(builder.lines):
        read = builder.loads.get(k)
        place = locate(*read) if read is not None else None
        stmts.append(Line(line, (place,) if isinstance(place, Access) else ()))
    if not flat:
        return _Body([*stmts, *stores_ir], [], list(idx), list(shape), target)
    # a flat loop only if no statement needs the multi-dimensional index: the primitives'
    # expressions (an iota's or a broadcast's index arithmetic) and the loads not at the flat
    # position use it (``Line.uses``, recorded as the body was built)
    if not variables(stmts).isdisjoint(idx):
        return None
    size = math.prod(shape)
    views: list[Stmt] = [View(f"{name}_f", name, (size,)) for name in flat_views]
    return _Body([*stmts, *stores_ir], views, ["i"], [size], target, flat=True)


def loop_kernel(spec: KernelSpec) -> Kernel | None:
    shape = spec.group.shape
    if math.prod(shape) == 0:
        return None
    if wants_numpy(spec.group, spec.schedule):
        return numpy_kernel(spec)
    b = loop_body(spec, shape, spec.group.outputs, None, try_flat=True)
    parallel = math.prod(shape) >= PARALLEL_MIN_ELEMENTS
    return spec.define([*b.views, *nest(b.loops, b.extents, b.stmts, parallel, flat=b.flat)], parallel)


def numpy_kernel(spec: KernelSpec) -> Kernel:
    name = spec.kernel_name + "_np"
    chunked = spec.schedule.chunked_numpy
    source, scratch = arraylevel.numpy_kernel(name, spec.args, spec.group, spec.names, spec.pool, chunked)
    return Kernel(name, [*spec.args, *(s.name for s in scratch)], source, objmode=True, scratch=scratch)


def reduce_kernel(spec: KernelSpec) -> Kernel | None:
    root = spec.group.root
    out = root.result
    if out.type.size == 0:
        return None
    if wants_numpy(spec.group, spec.schedule):
        return numpy_kernel(spec)
    shape = spec.group.shape
    axes = {int(a) for a in root.attrs["axes"]}
    split = reduced_tail(shape, axes)  # loops from ``split`` on are all reduced: into a local
    extra = [v for v in spec.group.outputs if v is not out]  # prologue values stored as well
    b = loop_body(spec, shape, extra, root.operands[0], try_flat=split == 0)  # flat: full reductions
    assert b.target is not None
    reducer = root.prim.reducer
    assert reducer is not None
    dtype = out.type.dtype
    identity, partial = accumulation(root, b.target, spec.schedule, spec.pool)
    kept = tuple(f"i{d}" for d in range(len(shape)) if d not in axes)
    dest = spec.locate(out, kept)
    n_outer = split  # a flat body only happens for a full reduction, where split == 0
    big = math.prod(shape) >= PARALLEL_MIN_ELEMENTS
    reassoc = spec.schedule.reassoc_sums and dtype.is_float and reducer.reassociable
    if n_outer == 0 and big:
        return _chunked_full_reduction(spec, b, partial, identity, dest, reducer.combine, reassoc)
    revisit = any(d in axes for d in range(n_outer))  # an output element is reached again later
    inner = accumulating_nest(b.loops[n_outer:], b.extents[n_outer:], b.stmts, partial)
    chunks = min(REDUCE_CHUNKS, shape[0]) if shape else 1
    if (
        spec.schedule.split_reductions
        and big
        and 0 in axes
        and n_outer > 0
        and chunks > 1
        and chunks * out.type.size <= PARTIALS_MAX_ELEMENTS
    ):
        return _chunked_row_reduction(spec, b, inner, partial, (chunks, n_outer), reassoc)
    parallel = big and n_outer > 0 and 0 not in axes  # distinct i0 write distinct outputs
    stmts = list(b.views)
    if not revisit:
        block = [*lines(f"acc = {partial.load(identity)}"), *inner, store(dest, partial.value("acc"))]
        stmts += nest(b.loops[:n_outer], b.extents[:n_outer], block, parallel)
        return spec.define(stmts, parallel, reassoc=reassoc and n_outer < len(shape))
    # An output element is reached again later: its partial is kept between visits, in the output
    # itself or, for a wider accumulator, in a scratch array of that dtype cast into it at the end.
    o, size = spec.param(out), out.type.size
    keep = o if partial.dtype is dtype else f"{o}_w"
    if keep != o:
        stmts.append(Alloc(keep, out.type.shape, partial.dtype))
    stmts += fill(keep, size, identity)
    slot = Access(keep, kept)
    block = [
        Line(f"acc = {partial.load(text(slot))}", (slot,)),
        *inner,
        store(slot, partial.finish("acc")),
    ]
    stmts += nest(b.loops[:n_outer], b.extents[:n_outer], block, parallel)
    if keep != o:
        init, flat = Access(f"{keep}_init", ("q",)), Access(f"{o}_f", ("q",))
        stmts += [
            View(f"{o}_f", o, (size,)),
            For("q", size, [store(flat, partial.result(text(init)), (init,))]),
        ]
    return spec.define(stmts, parallel, reassoc=reassoc and n_outer < len(shape))


def wants_numpy(group: Group, schedule: CpuSchedule) -> bool:
    """Whether the CPU writes ``group`` as a NumPy-assisted kernel (``arraylevel.py``)."""
    return arraylevel.wants_numpy(group, schedule.vector_math, schedule.keyed_minmax)


def _same(v: str) -> str:
    return v


def _keyed(root: Op, schedule: CpuSchedule) -> bool:
    """A float max/min reduction that reduces integer keys (``vecmath.max_key_f32``)."""
    dtype = root.result.type.dtype
    selects = root.prim.reducer is not None and root.prim.reducer.selects
    return schedule.keyed_minmax and bool(selects) and dtype in (DType.f32, DType.f64)


@dataclass(frozen=True)
class _Partial:
    """How a chunk accumulates: a kept partial result -> acc, its update statement, acc -> a kept
    partial (of ``dtype``: the reducer's accumulator, ``Reducer.accumulator``), and a kept partial
    -> the result's dtype."""

    load: Callable[[str], str]
    update: str
    finish: Callable[[str], str]
    dtype: DType
    result: Callable[[str], str] = _same
    # A widened sum's block (``accumulating_nest``): ``blk`` set to the identity, its update in the
    # result's dtype, and ``blk`` added to ``acc``.
    block: tuple[str, str, str] | None = None

    def value(self, acc: str) -> str:
        """``acc`` as the reduction's result."""
        return self.result(self.finish(acc))


def reduced_tail(shape: tuple[int, ...], axes: AbstractSet[int]) -> int:
    """Where the trailing run of reduced axes starts (``len(shape)`` when the last axis is kept)."""
    split = len(shape)
    while split > 0 and split - 1 in axes:
        split -= 1
    return split


def accumulation(
    root: Op, target: str, schedule: CpuSchedule, pool: ConstantPool, p: str = ""
) -> tuple[str, _Partial]:
    """A reduction root's identity literal (as a kept partial) and how ``{p}acc`` accumulates the
    temporary ``target``: in the reducer's accumulator dtype (float32 sums in float64), or for a
    keyed float max/min as integer keys (``acc`` holds key(value): the helpers it calls recorded in
    ``pool``)."""
    reducer = root.prim.reducer
    assert reducer is not None, f"{root.prim.name} has no reducer"
    dtype = root.result.type.dtype
    wide = reducer.accumulator(dtype)
    identity = literal(reducer.identity(dtype), wide)
    acc, blk = f"{p}acc", f"{p}blk"
    if not _keyed(root, schedule):
        if wide is dtype:
            return identity, _Partial(
                _same, f"{acc} = {typed(reducer.combine(acc, target), dtype)}", _same, dtype
            )
        update = f"{acc} = {typed(reducer.combine(acc, typed(target, wide)), wide)}"
        block = (
            f"{blk} = {literal(reducer.identity(dtype), dtype)}",
            f"{blk} = {typed(reducer.combine(blk, target), dtype)}",
            f"{acc} = {typed(reducer.combine(acc, typed(blk, wide)), wide)}",
        )
        return identity, _Partial(_same, update, _same, wide, lambda v: typed(v, dtype), block)
    which, width = reducer.selects, dtype.name
    pool.helpers.update((f"{which}_key_{width}", f"from_key_{width}"))
    return identity, _Partial(
        lambda v: f"{which}_key_{width}({v})",
        f"{acc} = {which}({acc}, {which}_key_{width}({target}))",
        lambda v: f"from_key_{width}({v})",
        dtype,
    )


ACC_BLOCK = 256  # elements of a widened sum's block, summed in the result's dtype

Nest = Callable[[list[str], list[int], list[Stmt]], list[Stmt]]


def accumulating_nest(
    names: list[str], extents: list[int], stmts: list[Stmt], partial: _Partial, make: Nest | None = None
) -> list[Stmt]:
    """The loops of a reduction's accumulation (``make`` of them), ``partial.update`` innermost. A
    widened sum (float32 into float64) takes a long innermost loop in fixed blocks of ``ACC_BLOCK``
    elements, each summed in the result's dtype into ``blk`` and added to the wide ``acc``: LLVM
    vectorizes a block at float32's width (a float64 add in the loop halves it: softmax + cross-entropy
    2.4x slower), and the error is a block's, not the loop's. The bounds are constants (a block's start
    provably >= 0, so no index wraps around and the loop vectorizes); the rest is a shorter block."""
    make = make or (lambda n, e, s: nest(n, e, s))
    if partial.block is None or not names or extents[-1] == 1:  # (``_row_nest`` drops loops of 1)
        return make(names, extents, [*stmts, Line(partial.update)])
    init, update, merge = partial.block
    var, extent = names[-1], extents[-1]
    full = extent // ACC_BLOCK * ACC_BLOCK
    inner: list[Stmt] = []
    if full:
        start = f"{var}_b * {ACC_BLOCK}"
        block = For(var, f"{start} + {ACC_BLOCK}", [*stmts, Line(update)], start)
        inner.append(For(f"{var}_b", extent // ACC_BLOCK, [Line(init), block, Line(merge)]))
    if full < extent:  # the rest: a shorter block
        inner += [Line(init), For(var, extent, [*stmts, Line(update)], str(full)), Line(merge)]
    return make(names[:-1], extents[:-1], inner)


def chunk_rows(n: int, chunks: int) -> tuple[str, str]:
    """The (start, stop) of chunk ``ch``'s rows of ``n``."""
    return f"ch * {n} // {chunks}", f"(ch + 1) * {n} // {chunks}"


def _chunked_row_reduction(
    spec: KernelSpec,
    b: _Body,
    inner: list[Stmt],
    partial: _Partial,
    chunks_outer: tuple[int, int],
    reassoc: bool,
) -> Kernel:
    """A big reduction over axis 0 that keeps other axes (a bias or layer-norm gain gradient): fixed
    chunks of axis 0 in parallel, each into its own partial result, then the partials combined in
    chunk order (no atomics, the same result every run)."""
    chunks, n_outer = chunks_outer
    axes = spec.group.reduced_axes
    kept = tuple(f"i{d}" for d in range(len(spec.group.shape)) if d not in axes)
    parts = partials(spec, chunks, partial, row_blocks=n_outer == len(spec.group.shape))
    block = partial_update(kept, inner, partial, parts)
    row = [*nest(b.loops[1:n_outer], b.extents[1:n_outer], block), *parts.flush]
    per_chunk = nest(b.loops[:1], b.extents[:1], row, outer=chunk_rows(b.extents[0], chunks))
    stmts = [
        *b.views,
        *parts.before,
        For("ch", chunks, [*parts.chunk, *per_chunk], parallel=True),
        *parts.after,
    ]
    return spec.define(stmts, parallel=True, reassoc=reassoc and n_outer < len(spec.group.shape))


@dataclass
class RowCode:
    """One band member's code: before the parallel loop, at the start of each chunk of rows, for
    each row, and after the loop."""

    before: list[Stmt] = field(default_factory=list)
    chunk: list[Stmt] = field(default_factory=list)
    row: list[Stmt] = field(default_factory=list)
    after: list[Stmt] = field(default_factory=list)
    reassoc: bool = False
    flush: list[Stmt] = field(default_factory=list)  # after each row: a row block's end (``partials``)


def partials(spec: KernelSpec, chunks: int, partial: _Partial, row_blocks: bool = False) -> RowCode:
    """The partial results of a reduction over axis 0, one per chunk of rows (in the accumulator's
    dtype): allocated before the parallel loop, set to the identity as each chunk starts, combined in
    chunk order into the result after the loop (no atomics: the same result every run).

    With ``row_blocks`` (a widened sum updated once per element: nothing reduced after the kept
    axes), rows add into a second, float32 partial ``part_b`` (vectorized at float32's width across
    the kept axes), which every ``ACC_BLOCK``-th row (``RowCode.flush``) and at the end adds into the
    wide one: the error is a block's of rows, not the chunk's."""
    root = spec.group.root
    out = root.result
    dtype, size, wide = out.type.dtype, out.type.size, partial.dtype
    reducer = root.prim.reducer
    assert reducer is not None, f"{root.prim.name} has no reducer"
    p = spec.prefix
    acc, part, part_f, part_b, part_b_f = (f"{p}{n}" for n in ("acc", "part", "part_f", "part_b", "part_b_f"))
    slot, slot_b = Access(part_f, ("ch", "q")), Access(part_b_f, ("ch", "q"))
    parts = RowCode(
        before=[Alloc(part, (chunks, *out.type.shape), wide), View(part_f, part, (chunks, size))],
        chunk=[For("q", size, [store(slot, literal(reducer.identity(dtype), wide))])],
    )
    add: list[Stmt] = [Line(f"{acc} = {typed(reducer.combine(acc, text(slot)), wide)}", (slot,))]
    if row_blocks and partial.block is not None:
        identity = literal(reducer.identity(dtype), dtype)
        merge = typed(reducer.combine(text(slot), typed(text(slot_b), wide)), wide)
        parts.before += [
            Alloc(part_b, (chunks, *out.type.shape), dtype),
            View(part_b_f, part_b, (chunks, size)),
        ]
        assert isinstance(parts.chunk[0], For)
        parts.chunk[0].body.append(store(slot_b, identity))
        flushed: list[Stmt] = [store(slot, merge, (slot, slot_b)), store(slot_b, identity)]
        parts.flush = [If(f"({ROW} + 1) % {ACC_BLOCK} == 0", [For("q", size, flushed)])]
        add.append(Line(f"{acc} = {typed(reducer.combine(acc, typed(text(slot_b), wide)), wide)}", (slot_b,)))
    o = spec.param(out)
    result = Access(f"{o}_f", ("q",)) if out.type.shape else Access(o, ())
    parts.after = [
        *([View(f"{o}_f", o, (size,))] if out.type.shape else []),
        For(
            "q",
            size,
            [
                Line(f"{acc} = {literal(reducer.identity(dtype), wide)}"),
                For("ch", chunks, add),
                store(result, partial.result(acc)),
            ],
        ),
    ]
    return parts


def _chunked_full_reduction(
    spec: KernelSpec,
    b: _Body,
    partial: _Partial,
    identity: str,
    dest: Place,
    combine: Callable[[str, str], str],
    reassoc: bool,
) -> Kernel:
    """A big full reduction: fixed chunks of the outer loop in parallel, then their partials in order."""
    wide = partial.dtype
    n = b.extents[0]
    chunks = min(REDUCE_CHUNKS, n)
    rows = chunk_rows(n, chunks)
    if len(b.loops) == 1:  # the chunk's range is the innermost loop's (not blocked: not constant)
        per_chunk = nest(b.loops, b.extents, [*b.stmts, Line(partial.update)], outer=rows)
    else:
        per_chunk = accumulating_nest(
            b.loops,
            b.extents,
            b.stmts,
            partial,
            lambda names, extents, s: nest(names, extents, s, outer=rows),
        )
    part = Access("part", ("ch",))
    chunk = [Line(f"acc = {partial.load(identity)}"), *per_chunk, store(part, partial.finish("acc"))]
    stmts = [
        *b.views,
        Alloc("part", (chunks,), wide),
        For("ch", chunks, chunk, parallel=True),
        Line(f"acc = {identity}"),
        For("ch", chunks, [Line(f"acc = {typed(combine('acc', 'part[ch]'), wide)}", (part,))]),
        store(dest, partial.result("acc")),
    ]
    return spec.define(stmts, parallel=True, reassoc=reassoc)


def partial_update(
    kept: tuple[str, ...], inner: list[Stmt], partial: _Partial, parts: RowCode, p: str = ""
) -> list[Stmt]:
    """A row's update of its chunk's partial result at ``kept``: through ``acc``, or with row blocks
    (``partials``) into the block's float32 partial."""
    if not parts.flush:
        slot = Access(f"{p}part", ("ch", *kept))
        return [
            Line(f"{p}acc = {partial.load(text(slot))}", (slot,)),
            *inner,
            store(slot, partial.finish(f"{p}acc")),
        ]
    assert partial.block is not None
    slot = Access(f"{p}part_b", ("ch", *kept))
    return [
        Line(f"{p}blk = {text(slot)}", (slot,)),
        *inner[:-1],
        Line(partial.block[1]),
        store(slot, f"{p}blk"),
    ]


def fill(name: str, size: int, value: str) -> list[Stmt]:
    """Every element of ``name`` set to ``value``, through its flat view ``{name}_init``."""
    return [
        View(f"{name}_init", name, (size,)),
        For("q", size, [store(Access(f"{name}_init", ("q",)), value)]),
    ]
