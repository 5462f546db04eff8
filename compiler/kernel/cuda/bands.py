"""Band kernels (strategy "rows"): consecutive loop and reduction groups over the same rows
(``Band``, made by the ``rows`` pass, ``compiler/passes/rows.py``) run as one CUDA kernel, row by row.

A block of ``CT x RT`` threads (``TPB`` in all) takes ``RT`` rows at a time; each row's ``CT`` threads
stride over its elements (``CT``: the widest member's row rounded up to a power of two, at most
``TPB``, so narrow rows share a block). Blocks stride over the rows. For each row, every member's
code runs in member order, then a ``Barrier``: a member may read any element of the row that an
earlier member wrote, and a member may store its result over an operand the earlier members read
(``Band.aligned``). Rows of one element (``CT`` 1: a 1-D band, such as two outputs of one vector)
have no barriers: a thread owns its whole row, so its members' reads and writes are in its own
program order, and a barrier would only hold each warp to the block's slowest.

- A LOOP member: the row's threads stride over its elements (a row of one element: every thread
  computes it, one stores it, after a barrier where the store lands on a buffer the member reads:
  an in-place update, an argument written back).
- A row reduction into one value per row: each thread accumulates its elements, a ``BlockReduce``
  over the row's threads combines them, and every thread reads the result (a broadcast). One that
  keeps inner axes gives each thread whole outputs, a serial loop each.
- A reduction over axis 0 (a column sum, a loss): each block keeps a partial result per row slot
  over the rows it takes, in row order: a register per thread for a full reduction (combined by a
  block reduce after the rows), else an element per output, owned by one thread. A follow kernel
  (``CudaKernel.follow``) combines the partials in block order: no atomics, the same bits each run.
- Values the band keeps per row (``Band.local``) have no buffer: a row of one element is a
  register of every thread; a longer one a row of shared memory per row slot of the block (or,
  past ``SHARED_BYTES`` for the band, a row of global scratch per slot). Local rows get shared
  memory before partials, which need a global row per slot anyway.
- A band with global scratch per block (partials, rows past shared memory) takes at most ``BANDB``
  blocks, each striding over more rows, so its scratch is ``BANDB`` rows per slot of the block
  however many rows the band has.
- Tails (``Band.tail``) run after the band as their own loop kernels, in member order with the
  partials' combines (a tail reads only values from before the band or combined after it); column
  reductions the rows pass sent there that share their inputs are one kernel with several outputs
  (``rows.reductions_together``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from compiler.ir.core import Value
from compiler.ir.types import DType
from compiler.kernel.cuda.loops import (
    SPLIT_OUTPUTS,
    block_loop,
    block_reduce,
    column_chunks,
    combine,
    grid_loop,
    loop_kernel,
    reduce_kernel,
    takes_siblings,
    unroll_factor,
    unrollable,
)
from compiler.kernel.cuda.records import (
    Builder,
    CudaKernel,
    KernelSpec,
    Launch,
    Place,
    Scratch,
    body_stmts,
    index_stmts,
    kernel,
    linear,
    store,
    text,
    unflatten,
)
from compiler.kernel.cuda.sizes import GPU, SIM, LaunchSizes
from compiler.kernel.emit import ROW, ConstantPool, literal, typed
from compiler.kernel.ir import Access, Alloc, Barrier, Expr, For, If, Line, Stmt, uses_of
from compiler.passes.fuse import Band, Group, GroupKind
from compiler.passes.rows import BandCosts
from compiler.prims.base import Reducer

SHARED_BYTES = 40 * 1024  # a band's rows in shared memory (static shared memory: 48 KiB a block)
LIGHT_SCRATCH = 32  # bytes of partial scalars a block may keep in global scratch and fill the GPU
SM_THREADS, SM_SHARED_BYTES = 2048, 228 * 1024  # what an SM of an H100 or H200 holds (``_resident``)
# Blocks of a band kernel an SM holds at once, as its registers allow (``band_blocks``): its launch
# bounds ask for this many (``CudaKernel.min_blocks``: 64 registers a thread), unless its shared
# memory allows fewer. Without bounds, sm_90's ptxas gave the suite's bands 56-130 registers (layer
# norm's at the CPU suite's size 130: one block of 256 threads an SM, while the wave counted 8);
# with 4 blocks asked, every one fits 64 with no spills, and 5 spills each 8-56 bytes a thread
# (2026-11-28, benchmarks/results/2026-11-28-graphs-and-registers.md).
BAND_BLOCKS = 4


@dataclass
class _Code:
    """A band kernel's statements before its rows, for each row, and after them; its scratch
    and the kernels that follow it."""

    before: list[Stmt] = field(default_factory=list)
    row: list[Stmt] = field(default_factory=list)
    after: list[Stmt] = field(default_factory=list)
    scratch: list[Scratch] = field(default_factory=list)
    follow: list[CudaKernel] = field(default_factory=list)
    trees: set[DType] = field(default_factory=set)  # accumulator dtypes of the shared-memory trees
    builders: list[Builder] = field(default_factory=list)


@dataclass
class _Store:
    """A row of ``size`` elements per row slot of a block (``ty``): a shared array, or a slice of
    a global scratch array per block and slot."""

    name: str
    size: int
    dtype: DType
    shared: bool

    def at(self, kernel: str, offset: str) -> Access:
        slot = "ty" if self.shared else f"(cuda.blockIdx.x * {kernel}_RT + ty)"
        return Access(self.name, (Expr(f"{slot} * {self.size} + {offset}", uses_of(offset)),))


@dataclass
class _Band:
    band: Band
    names: dict[Value, str]
    pool: ConstantPool
    name: str
    stores: dict[Value, _Store]  # rows of local values and of partial results (a reduction's root)
    overlap: Callable[[Value, Value], bool]  # whether two values' buffers share bytes (the plan's)
    solo: bool = False  # a thread per row (``CT`` 1): no thread reads another's row, no barriers

    @property
    def ct(self) -> str:
        return f"{self.name}_CT"

    def ref(self, v: Value, at: tuple[str, ...]) -> Place:
        """The element of a local value at ``at``, a register or its row store (``at``: this row)."""
        assert at[:1] == (ROW,), f"{self.names[v]}: a band reads its rows only at the current row"
        row = v.type.shape[1:]
        if math.prod(row) == 1:
            return f"{self.names[v]}_r"
        return self.stores[v].at(self.name, linear(at[1:], row))

    def builder(self, group: Group, j: int, flat: str | None, code: _Code) -> Builder:
        """A member's body builder: local values from registers and row stores, the rest from flat
        buffers (``flat``: the flat position of the member's own index, where one is at hand)."""
        shape = group.shape
        idx = tuple(f"i{d}" for d in range(len(shape)))

        def locate(v: Value, at: tuple[str, ...]) -> Place:
            if v in self.band.local:
                return self.ref(v, at)
            if flat is not None and at == idx and v.type.shape == shape:
                return Access(self.names[v], (flat,))
            return Access(self.names[v], (linear(at, v.type.shape),))

        builder = Builder({op.result: op for op in group.ops}, locate, self.pool, prefix=f"m{j}_")
        code.builders.append(builder)
        return builder

    def store(self, v: Value, idx: tuple[str, ...], value: str, flat: str | None) -> Line:
        if v in self.band.local:
            return store(self.ref(v, idx), value)
        return store(Access(self.names[v], (flat or linear(idx, v.type.shape),)), value)


def band_kernel(
    band: Band, names: dict[Value, str], pool: ConstantPool, overlap: Callable[[Value, Value], bool]
) -> CudaKernel:
    """The kernel of ``band`` (launched where its first member would run), its follow kernels
    (combines of partial results, tails) attached. ``overlap``: whether two values' buffers share
    bytes in the memory plan (a member storing over what it reads: ``_loop_member``)."""
    name = f"{pool.prefix}k{band.groups[0].index}_rows"
    members = [g for g in band.groups if g not in band.tail]
    ct = _threads_per_row(band)
    stores = _stores(band, names, name, GPU.TPB // min(GPU.TPB, ct))  # rows per block on a GPU
    resident = _resident(_shared_bytes(stores, ct))  # blocks an SM holds (the launch bounds ask it)
    cap = _block_cap(band, members, stores, resident)
    # (threads per row, rows per block, blocks) on a GPU; scratch is sized for the larger of a GPU's
    # launch and the simulator's (which may take more blocks of fewer rows)
    launches = [_launch(sizes, ct, band.rows, cap) for sizes in (GPU, SIM)]
    blocks = max(b for _, _, b in launches)
    slots = max(r * b for _, r, b in launches)
    bk = _Band(band, names, pool, name, stores, overlap, solo=ct == 1)
    code = _Code()
    for v, row_store in stores.items():  # local rows past the shared memory: global scratch per block
        if v in band.local and not row_store.shared:
            code.scratch.append(Scratch(row_store.name, slots * row_store.size, row_store.dtype))
    for v in sorted((v for v in band.local if math.prod(v.type.shape[1:]) == 1), key=lambda v: names[v]):
        code.before.append(Line(f"{names[v]}_r = {literal(0, v.type.dtype)}"))  # typed on every path
    for j, group in enumerate(band.groups):
        if group in band.tail:  # a loop, or a column reduction the rows pass sent after the rows
            spec = KernelSpec(group, names, pool)
            tail = reduce_kernel(spec) if group.kind is GroupKind.REDUCE else loop_kernel(spec)
            code.follow += [tail, *tail.follow] if tail is not None else []
            if tail is not None:
                tail.follow = []
            continue
        if group.kind is GroupKind.LOOP:
            _loop_member(bk, j, group, code)
        elif 0 in group.reduced_axes:
            _partial_member(bk, j, group, code, blocks, slots)
        else:
            _row_reduction(bk, j, group, code)
        if not bk.solo:
            code.row.append(Barrier())  # later members may read any element of the row
    rows = band.rows
    shared = sorted({(s.size, s.dtype, s.name) for s in stores.values() if s.shared}, key=lambda s: s[2])
    body: list[Stmt] = [
        Line("tx = cuda.threadIdx.x"),
        Line("ty = cuda.threadIdx.y"),
        Line(f"tid = ty * {name}_CT + tx"),
        *(Alloc(f"sm_{t.np.name}", ("TPB",), t, shared=True) for t in sorted(code.trees, key=str)),
        *(Alloc(s, (f"{name}_S{size}",), t, shared=True) for size, t, s in shared),
        *code.before,
        For(
            "r0",
            rows,
            [Line(f"{ROW} = r0 + ty"), Line(f"live = {ROW} < {rows}"), *code.row],
            f"cuda.blockIdx.x * {name}_RT",
            True,
            step=f"cuda.gridDim.x * {name}_RT",
        ),
        *code.after,
    ]
    buffers: dict[str, Value] = {}
    for g in members:
        buffers.update((names[v], v) for v in g.inputs + g.outputs if v not in band.local)
    launch = Launch(f"{name}_G", f"({name}_CT, {name}_RT)")
    spec = KernelSpec(band.groups[0], names, pool)
    top = spec.define(body, list(buffers.values()), launch, "rows", code.builders, code.scratch, name)
    top.constants = [  # the launch shape, read by the kernels as compile-time constants
        (f"{name}_CT", f"min(TPB, {min(ct, GPU.TPB)})"),
        (f"{name}_RT", f"TPB // {name}_CT"),
        (
            f"{name}_G",
            f"max(1, min(({rows} + {name}_RT - 1) // {name}_RT, {cap}))",
        ),
        *sorted({(f"{name}_S{size}", f"{name}_RT * {size}") for size, _, _ in shared}),
    ]
    top.follow = code.follow
    top.min_blocks = resident if band_blocks() else 0
    return top


def _threads_per_row(band: Band) -> int:
    """``CT``: the widest member's row rounded up to a power of two (at most ``TPB`` on a GPU)."""
    width = max(_spread(g) for g in band.groups if g not in band.tail)
    return 1 << max(width - 1, 0).bit_length()


def partial_rows(band: Band) -> int:
    """The partial rows per output a band keeps for a reduction over axis 0 on a GPU: a row per
    block slot (``BANDB`` blocks of ``RT`` rows), the scratch each row a slot takes reads and writes
    (the rows pass's cost model, ``rows.BandCosts``)."""
    _, rt, blocks = _launch(GPU, _threads_per_row(band), band.rows, "BANDB")
    return rt * blocks


def row_bytes(band: Band) -> int:
    """The bytes of kept rows a row slot of the band holds in shared memory on a GPU (``_stores``)."""
    return SHARED_BYTES // (GPU.TPB // min(GPU.TPB, _threads_per_row(band)))


def band_costs(mode: str, siblings: bool = True) -> BandCosts | None:
    """The rows pass's sizes for a band's column reductions and kept rows (``Options.band_columns``):
    "auto" (the cost model decides per reduction), "kernel" (each that can leaves the band: a column
    kernel after it), "band" (none does, partial rows per block combined after the band, and the
    kept rows as fusion made them: the one-pass form). ``siblings`` (``Options.sibling_reductions``):
    column reductions after the band that share inputs run as one kernel with several outputs
    (``rows.reductions_together``, where ``loops.takes_siblings``)."""
    if mode not in ("auto", "kernel", "band"):
        raise ValueError(f"band_columns must be 'auto', 'kernel' or 'band', not {mode!r}")
    if mode == "band":
        return None
    together = takes_siblings if siblings else None
    return BandCosts(partial_rows, column_chunks, row_bytes, always=mode == "kernel", siblings=together)


def _block_cap(band: Band, members: list[Group], stores: dict[Value, _Store], resident: int) -> str:
    """The most blocks a band takes, as an expression of the module's launch sizes. A block that keeps
    partial results or rows in global scratch has a slot of its own there, so such a band takes at
    most ``BANDB`` blocks (each striding over more rows), not one per row. But where each block's slot
    is a few scalars (full reductions: a loss), at most ``LIGHT_SCRATCH`` bytes, it takes one wave of
    the blocks the GPU holds at once (``SMS`` times those an SM holds, ``_resident``): every SM
    busy, the rows split evenly, and a partial per block (256 blocks of one row of 256 threads were
    two blocks an SM on an H100: layer norm's row kernel took 1.37 ms for a pass JAX's kernels make in
    1.13, benchmarks/results/2026-11-27-gpu-lease-b.md). Without per-block scratch, ``MAXB``."""
    global_rows = any(not s.shared for v, s in stores.items() if v in band.local)
    partials = [g for g in members if 0 in g.reduced_axes]
    if not global_rows and not partials:
        return "MAXB"
    if global_rows or any(g.root.result.type.size != 1 for g in partials):
        return "BANDB"
    if sum(_partial_wide(g).itemsize for g in partials) > LIGHT_SCRATCH:
        return "BANDB"
    return f"SMS * {resident}"


def _shared_bytes(stores: dict[Value, _Store], ct: int) -> int:
    """A band block's shared memory on a GPU: its rows in shared memory, and two trees of float64
    at most."""
    rt = GPU.TPB // min(GPU.TPB, ct)
    return sum(s.size * s.dtype.itemsize for s in stores.values() if s.shared) * rt + 2 * GPU.TPB * 8


def band_blocks() -> int:
    """The blocks of a band kernel an SM holds as its registers allow, which its launch bounds ask
    for (``BAND_BLOCKS``): ``DSL_CUDA_BAND_BLOCKS`` (read when a program is compiled; ``0``: no
    bounds, the registers ptxas likes, and waves that count no registers, as before 2026-11-28)."""
    value = os.environ.get("DSL_CUDA_BAND_BLOCKS", "").strip()
    return int(value) if value.isdigit() else BAND_BLOCKS


def _resident(shared_bytes: int) -> int:
    """How many blocks of ``GPU.TPB`` threads and ``shared_bytes`` of shared memory an SM of an H100
    or H200 holds at once, registers permitting (``band_blocks``: the launch bounds make them)."""
    by_registers = band_blocks() or SM_THREADS
    return max(1, min(SM_THREADS // GPU.TPB, SM_SHARED_BYTES // max(shared_bytes, 1), by_registers))


def _partial_wide(group: Group) -> DType:
    """The accumulator type of a reduction's partial results."""
    reducer = group.root.prim.reducer
    assert reducer is not None, f"{group.root.prim.name} has no reducer"
    return reducer.accumulator(group.root.result.type.dtype)


def _launch(sizes: LaunchSizes, ct: int, rows: int, cap: str) -> tuple[int, int, int]:
    """A band kernel's (threads per row, rows per block, blocks) under ``sizes``, its blocks capped
    at ``cap`` (``_block_cap``: a launch size, or one times a number), as the module's ``_CT``, ``_RT``
    and ``_G`` constants compute them."""
    ct = min(sizes.TPB, ct)
    rt = sizes.TPB // ct
    size, _, times = cap.partition(" * ")
    return ct, rt, max(1, min(-(-rows // rt), getattr(sizes, size) * int(times or 1)))


def _spread(group: Group) -> int:
    """How many elements of a row a member's threads stride over."""
    row = math.prod(group.shape[1:])
    if group.kind is GroupKind.LOOP:
        return row
    axes = group.reduced_axes
    kept = math.prod(e for d, e in enumerate(group.shape) if d not in axes and d > 0)
    return row if kept == 1 else kept


def _stores(band: Band, names: dict[Value, str], kernel: str, slots: int) -> dict[Value, _Store]:
    """Row stores for the band's local rows and its partial results per output element: in shared
    memory while the band's fit in ``SHARED_BYTES`` (``slots`` rows per block on a GPU), else in
    global scratch. Local rows first: one in shared memory needs no global scratch, while a block's
    partials need their global row anyway (where they are flushed for the combine), so shared memory
    given to a partial saves none (layer norm at 16384x4096: 21 MB of scratch instead of 29 MB).
    Among the local rows, those more members read first (the more reads shared memory serves)."""
    readers = {v: sum(v in g.inputs for g in band.groups) for v in band.local}
    wanted: list[tuple[Value, str, int, DType]] = []
    for v in sorted(band.local, key=lambda v: (-readers[v], names[v])):
        if math.prod(v.type.shape[1:]) > 1:
            wanted.append((v, f"{names[v]}_row", math.prod(v.type.shape[1:]), v.type.dtype))
    for g in band.groups:
        kept = [e for d, e in enumerate(g.shape) if d not in g.reduced_axes and d > 0]
        if g not in band.tail and 0 in g.reduced_axes and math.prod(kept) > 1:
            reducer = g.root.prim.reducer
            assert reducer is not None, f"{g.root.prim.name} has no reducer"
            wide = reducer.accumulator(g.root.result.type.dtype)
            wanted.append((g.root.result, f"{kernel}_p{g.index}", math.prod(kept), wide))
    stores = {}
    room = SHARED_BYTES
    for v, name, size, dtype in wanted:
        nbytes = slots * size * dtype.itemsize
        shared = nbytes <= room
        room -= nbytes if shared else 0
        stores[v] = _Store(f"{name}_s" if shared else name, size, dtype, shared)
    return stores


def _row_loop(bk: _Band, count: int, var: str, body: list[Stmt]) -> list[Stmt]:
    """``body`` for ``var`` in the row's threads' share of ``range(count)``, on live rows; a
    straight-line body unrolled as a grid-stride loop's is (``loops.unrollable``: a thread's loads
    of several elements in flight, a reduction's sums in the same order)."""
    loop = For(var, count, body, "tx", True, step=bk.ct)
    if unrollable(loop):
        loop.unroll = unroll_factor()
    return [If("live", [loop])]


def _row_index(group: Group, var: str, body: list[Stmt]) -> list[Stmt]:
    """The index statements of the row position ``var`` (and its flat position ``g``) ``body`` needs."""
    shape = group.shape
    width = math.prod(shape[1:])
    position = unflatten(var, [f"i{d}" for d in range(1, len(shape))], shape[1:])
    flat = ("g", ROW if width == 1 else f"{ROW} * {width} + {var}")
    return index_stmts(body, [*position, flat])


def _loop_member(bk: _Band, j: int, group: Group, code: _Code) -> None:
    idx = tuple(f"i{d}" for d in range(len(group.shape)))
    builder = bk.builder(group, j, "g", code)
    width = math.prod(group.shape[1:])
    values = [builder.value_at(v, idx) for v in group.outputs]
    lines = body_stmts(builder)
    if width == 1:
        code.row += _one_element(bk, group, lines, list(zip(group.outputs, values, strict=True)), [], code)
        return
    stores = [bk.store(v, idx, t, "g") for v, t in zip(group.outputs, values, strict=True)]
    body = [*lines, *stores]
    code.row += _row_loop(bk, width, "c", [*_row_index(group, "c", body), *body])


def _one_element(
    bk: _Band,
    group: Group,
    lines: list[Stmt],
    values: list[tuple[Value, str]],
    first: list[Stmt],
    code: _Code,
) -> list[Stmt]:
    """A member's code for rows of one element: every thread of the row computes it (``lines``), so
    that each holds the row's registers (the values the band keeps, ``values``' local ones; a loop
    over the row's one element would run on its first thread only, and the others would read their
    registers' zeros: a reduction member's prologue did, 2026-11-27); the row's first thread alone
    has the effects: ``first`` (a reduction's accumulation) and the stores of ``values``' others."""
    idx = tuple(f"i{d}" for d in range(len(group.shape)))
    kept = [bk.store(v, idx, t, "g") for v, t in values if v in bk.band.local]
    out = [(v, t) for v, t in values if v not in bk.band.local]
    over = [x for x in group.inputs if x not in bk.band.local]
    if any(bk.overlap(v, x) for v, _ in out for x in over):
        # A store over what the row's other threads read (in place, or into an argument): they
        # all read first, into registers, and the store waits for them at a barrier.
        held = [Line(f"{bk.names[v]}_w = {t}") for v, t in out]
        code.before += [Line(f"{bk.names[v]}_w = {literal(0, v.type.dtype)}") for v, _ in out]
        body = [*lines, *kept, *held, *([If("tx == 0", first)] if first else [])]
        late: list[Stmt] = [bk.store(v, idx, f"{bk.names[v]}_w", "g") for v, _ in out]
        return [
            If("live", [*_row_index(group, "c", body), *body]),
            *([] if bk.solo else [Barrier()]),
            If("live and tx == 0", [*_row_index(group, "c", late), *late]),
        ]
    effects: list[Stmt] = [*first, *(bk.store(v, idx, t, "g") for v, t in out)]
    body = [*lines, *kept, *([If("tx == 0", effects)] if effects else [])]
    return [If("live", [*_row_index(group, "c", body), *body])]


def _reduction(
    bk: _Band, j: int, group: Group, flat: str | None, code: _Code
) -> tuple[list[Stmt], list[tuple[Value, str]], Line, Reducer]:
    """A reduction member's parts: the statements that evaluate the reduced value, the prologue
    values the group also stores (each with its temporary, at the member's index), and the statement
    that takes the reduced value in the accumulator's type (``m{j}_x``)."""
    root = group.root
    idx = tuple(f"i{d}" for d in range(len(group.shape)))
    builder = bk.builder(group, j, flat, code)
    target = builder.value_at(root.operands[0], idx)
    extra = [(v, builder.value_at(v, idx)) for v in group.outputs if v is not root.result]
    reducer = root.prim.reducer
    assert reducer is not None, f"{root.prim.name} has no reducer"
    wide = reducer.accumulator(root.result.type.dtype)
    return body_stmts(builder), extra, Line(f"m{j}_x = {typed(target, wide)}"), reducer


def _inner(
    bk: _Band, j: int, group: Group, flat: str | None, acc: str, code: _Code
) -> tuple[list[Stmt], Reducer]:
    """A reduction member's statements for one element, accumulated into ``acc``."""
    lines, extra, x, reducer = _reduction(bk, j, group, flat, code)
    idx = tuple(f"i{d}" for d in range(len(group.shape)))
    add = combine(reducer, acc, f"m{j}_x", reducer.accumulator(group.root.result.type.dtype))
    return [*lines, *(bk.store(v, idx, t, flat) for v, t in extra), x, add], reducer


def _accumulated(
    bk: _Band, j: int, group: Group, flat: str | None, acc: str, code: _Code
) -> tuple[list[Stmt], Reducer]:
    """A full row's reduction member accumulating into ``acc`` (one per thread): the row's threads
    stride over its elements, each adding its own (a row of one element: ``_one_element``)."""
    width = math.prod(group.shape[1:])
    if width == 1 and not bk.solo:
        lines, extra, x, reducer = _reduction(bk, j, group, flat, code)
        add = combine(reducer, acc, f"m{j}_x", reducer.accumulator(group.root.result.type.dtype))
        return _one_element(bk, group, [*lines, x], extra, [add], code), reducer
    inner, reducer = _inner(bk, j, group, flat, acc, code)
    return _row_loop(bk, width, "c", [*_row_index(group, "c", inner), *inner]), reducer


def _row_reduction(bk: _Band, j: int, group: Group, code: _Code) -> None:
    """A reduction of trailing axes: a block reduce per row, or a serial loop per output it keeps."""
    shape, out = group.shape, group.root.result
    split = min(group.reduced_axes, default=len(shape))
    kept, n_red = math.prod(shape[1:split]), math.prod(shape[split:])
    dtype = out.type.dtype
    acc = f"m{j}_acc"
    if kept == 1:  # a block reduce over the row's threads; every thread reads the result
        loop, reducer = _accumulated(bk, j, group, "g", acc, code)
        wide = reducer.accumulator(dtype)
        code.trees.add(wide)
        sm = f"sm_{wide.np.name}"
        result = typed(f"{sm}[tid - tx]", dtype)
        first = Access(sm, ("tid - tx",))
        if out in bk.band.local:
            broadcast: list[Stmt] = [Line(f"{bk.names[out]}_r = {result}", (first,))]
        else:
            written = Access(bk.names[out], (ROW,))
            broadcast = [If("live and tx == 0", [Line(f"{text(written)} = {result}", (first,), (written,))])]
        code.row += [
            Line(f"{acc} = {literal(reducer.identity(dtype), wide)}"),
            *loop,
            block_reduce(acc, wide, reducer, sm, "tx", bk.ct, f"m{j}_"),
            *broadcast,
        ]
        return
    inner, reducer = _inner(bk, j, group, None, acc, code)
    wide = reducer.accumulator(dtype)
    identity = literal(reducer.identity(dtype), wide)
    kept_ix = unflatten("o", [f"i{d}" for d in range(1, split)], shape[1:split])
    red_ix = unflatten("r", [f"i{d}" for d in range(split, len(shape))], shape[split:])
    o_idx = (ROW, *(f"i{d}" for d in range(1, split)))
    value = typed(acc, dtype)
    if out in bk.band.local:
        result_store = bk.store(out, o_idx, value, None)
    else:
        result_store = store(Access(bk.names[out], (f"{ROW} * {kept} + o",)), value)
    per_o = [
        *index_stmts(inner, kept_ix),
        Line(f"{acc} = {identity}"),
        For("r", n_red, [*index_stmts(inner, red_ix), *inner]),
        result_store,
    ]
    code.row += _row_loop(bk, kept, "o", per_o)


def _partial_member(bk: _Band, j: int, group: Group, code: _Code, blocks: int, row_slots: int) -> None:
    """A reduction over axis 0: partial results per block over its rows, combined after the band."""
    shape, out, axes = group.shape, group.root.result, group.reduced_axes
    dtype = out.type.dtype
    kept_dims = [d for d in range(1, len(shape)) if d not in axes]
    red_dims = [d for d in range(1, len(shape)) if d in axes]
    kept, n_red = math.prod(shape[d] for d in kept_dims), math.prod(shape[d] for d in red_dims)
    part = f"{bk.name}_p{group.index}"
    acc = f"m{j}_acc"
    if kept == 1:  # a full reduction: a register per thread, a block reduce after the rows
        loop, reducer = _accumulated(bk, j, group, "g", acc, code)
        wide = reducer.accumulator(dtype)
        code.trees.add(wide)
        sm = f"sm_{wide.np.name}"
        code.before.append(Line(f"{acc} = {literal(reducer.identity(dtype), wide)}"))
        code.row += loop
        flushed = Access(part, ("cuda.blockIdx.x",))
        code.after += [
            block_reduce(acc, wide, reducer, sm, prefix=f"m{j}_"),
            If("tid == 0", [store(flushed, f"{sm}[0]")]),
            Barrier(),
        ]
        slots, gpu_slots = f"{bk.name}_G", blocks
    else:  # an element per output, owned by the thread that takes it in every row
        inner, reducer = _inner(bk, j, group, None, acc, code)
        wide = reducer.accumulator(dtype)
        row_store = bk.stores[out]
        mine = row_store.at(bk.name, "o")
        kept_ix = unflatten("o", [f"i{d}" for d in kept_dims], [shape[d] for d in kept_dims])
        red_ix = unflatten("r", [f"i{d}" for d in red_dims], [shape[d] for d in red_dims])
        per_r = [*index_stmts(inner, red_ix), *inner]
        per_o = [
            *index_stmts(inner, kept_ix),
            Line(f"{acc} = {text(mine)}", (mine,)),
            *([For("r", n_red, per_r)] if n_red > 1 else per_r),
            store(mine, acc),
        ]
        identity = literal(reducer.identity(dtype), wide)
        code.before.append(For("o", kept, [store(mine, identity)], "tx", True, step=bk.ct))
        code.row += _row_loop(bk, kept, "o", per_o)
        if row_store.shared:  # flushed to the partials' scratch, slot (block, ty)
            flushed = Access(part, (f"(cuda.blockIdx.x * {bk.name}_RT + ty) * {kept} + o",))
            code.after.append(
                For(
                    "o",
                    kept,
                    [Line(f"{text(flushed)} = {text(mine)}", (mine,), (flushed,))],
                    "tx",
                    True,
                    step=bk.ct,
                )
            )
        slots, gpu_slots = f"{bk.name}_G * {bk.name}_RT", row_slots
    code.scratch.append(Scratch(part, gpu_slots * kept, wide))
    code.follow.append(_combine_partials(bk, group, part, slots, kept, wide, reducer))


def _combine_partials(
    bk: _Band, group: Group, part: str, slots: str, kept: int, wide: DType, reducer: Reducer
) -> CudaKernel:
    """Each output's partials combined in a fixed order (deterministic): for fewer outputs than
    ``SPLIT_OUTPUTS`` (a loss: one), a block per output whose threads take fixed slots and then
    the block's tree, as a split reduction's second pass does (a GPU's wave of blocks' partials, a serial
    loop of dependent loads for one thread); else a thread per output, its slots in order."""
    out = group.root.result
    dtype = out.type.dtype
    o_name = bk.names[out]
    x = Access(part, (f"q * {kept} + o",))
    identity = literal(reducer.identity(dtype), wide)
    name = f"{bk.name}_combine{group.index}"
    params, types = [part, o_name], [(wide, 1), (dtype, 1)]
    each_slot: list[Stmt] = [Line(f"x = {text(x)}", (x,)), combine(reducer, "acc", "x", wide)]
    if kept < SPLIT_OUTPUTS:
        per_o: list[Stmt] = [
            Line(f"acc = {identity}"),
            For("q", slots, each_slot, "tid", step="TPB"),
            block_reduce("acc", wide, reducer),
            If("tid == 0", [store(Access(o_name, ("o",)), typed("sm[0]", dtype))]),
            Barrier(),
        ]
        body: list[Stmt] = [
            Alloc("sm", ("TPB",), wide, shared=True),
            Line("tid = cuda.threadIdx.x"),
            block_loop("o", kept, per_o),
        ]
        return kernel(name, params, types, body, Launch(f"max(1, min({kept}, MAXB))", "TPB"), "combine")
    body = [
        grid_loop(
            "o",
            kept,
            [
                Line(f"acc = {identity}"),
                For("q", slots, each_slot),
                store(Access(o_name, ("o",)), typed("acc", dtype)),
            ],
        )
    ]
    return kernel(name, params, types, body, Launch(f"_grid({kept})", "TPB"), "combine")
