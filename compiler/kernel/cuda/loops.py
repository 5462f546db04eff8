"""LOOP and REDUCE groups as CUDA kernels (kernel IR): a grid-stride loop over the flat iteration
space; a reduction with a strategy chosen by its shape: "serial" (a thread per output, a serial
loop), "block" (a block per output and a ``BlockReduce``), "split" (two passes: chunks -> partials
-> a block per output) or, keeping the innermost axis, "column" (warps over consecutive outputs,
``column_reduce``). No atomics: every order is fixed. A group with several reductions (a
multi-output group, ``Group.siblings``) keeps an accumulator per output in the "serial" and
"column" strategies (``takes_siblings``), each added in its own kernel's order."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from compiler.ir.core import Value
from compiler.ir.types import DType
from compiler.kernel.cuda.records import (
    Access,
    CudaKernel,
    KernelSpec,
    Launch,
    Scratch,
    body_stmts,
    index_stmts,
    kernel,
    linear,
    store,
    text,
    unflatten,
)
from compiler.kernel.cuda.sizes import GPU
from compiler.kernel.emit import literal, typed
from compiler.kernel.ir import Alloc, Barrier, BlockReduce, For, If, Line, Stmt
from compiler.passes.fuse import Group
from compiler.prims.base import Reducer

BLOCK_REDUCE_MIN = 128  # reduced extents at least this big get a block (and a tree) per output
SPLIT_MIN = 1 << 16  # ... and at least this big, into fewer outputs than SPLIT_OUTPUTS, two passes
SPLIT_OUTPUTS = 64
SPLIT_CHUNK = 1 << 13  # elements per partial in a split reduction
# A reduction that keeps the innermost axis: blocks over tiles of COLS columns stride down the rows;
# with fewer tiles than COLUMN_FILL blocks (a GPU's 132 SMs, a few blocks each), the rows are split
# into chunks of at least COLUMN_ROWS rows (a partial row per chunk, combined in chunk order after).
COLUMN_FILL = 1024
COLUMN_ROWS = 512
# Iterations of an elementwise grid-stride loop a thread runs at once: one load in flight per thread
# (132 SMs x 2048 threads x 4 bytes) is less than an H100 needs to cover the memory's latency at its
# bandwidth; XLA's GPU loop emitter unrolls its elementwise loops by 4 too.
UNROLL = 4


def grid_loop(var: str, stop: int | str, body: list[Stmt], flat: bool = False) -> For:
    """``for var in range(stop)``, its iterations spread over every thread of the grid."""
    return For(var, stop, body, "cuda.grid(1)", True, flat, step="cuda.gridsize(1)")


def unroll_factor() -> int:
    """How many iterations of an elementwise grid-stride loop a thread runs at once (``For.unroll``):
    ``DSL_CUDA_UNROLL`` (read when a program is compiled), else ``UNROLL``."""
    value = os.environ.get("DSL_CUDA_UNROLL", "").strip()
    return max(1, int(value)) if value.isdigit() else UNROLL


def unrollable(loop: For) -> bool:
    """Whether a thread may run iterations of ``loop`` together, their stores after all their loads
    (``For.unroll``): a body of straight-line statements, each store of one element, spelled
    ``element = value`` (the printer keeps the value), none read back by a later statement of the
    body (its load would come first), and each at the loop's own position, or anywhere in a parallel
    loop (distinct iterations touch distinct elements of what they write, so deferring a thread's
    stores is as safe as running the iterations on other threads, which such a loop's iterations may
    be: a grid-stride loop, a band's row loop)."""
    stored: set[str] = set()
    for s in loop.body:
        if not isinstance(s, Line) or any(a.array in stored for a in s.reads):
            return False
        if s.writes and (
            len(s.writes) > 1
            or not (loop.parallel or s.writes[0].index == (loop.var,))
            or not s.text.startswith(f"{text(s.writes[0])} = ")
        ):
            return False
        stored.update(a.array for a in s.writes)
    return True


def block_loop(var: str, stop: int | str, body: list[Stmt]) -> For:
    """``for var in range(stop)``, an iteration per block (a block's threads share it)."""
    return For(var, stop, body, "cuda.blockIdx.x", True, step="cuda.gridDim.x")


def loop_kernel(spec: KernelSpec) -> CudaKernel | None:
    shape = spec.group.shape
    size = math.prod(shape)
    if size == 0:
        return None
    idx = tuple(f"i{d}" for d in range(len(shape)))
    builder = spec.builder("g")
    values = [builder.value_at(v, idx) for v in spec.group.outputs]
    stores = [
        store(Access(spec.names[v], ("g",)), t) for v, t in zip(spec.group.outputs, values, strict=True)
    ]
    body = [*body_stmts(builder), *stores]
    loop = grid_loop("g", size, [*index_stmts(body, unflatten("g", idx, shape)), *body], flat=True)
    if unrollable(loop):
        loop.unroll = unroll_factor()
    return spec.define([loop], spec.buffers, Launch(f"_grid({size})", "TPB"), "loop", [builder])


def combine(reducer: Reducer, acc: str, x: str, wide: DType, reads: tuple[Access, ...] = ()) -> Line:
    return Line(f"{acc} = {typed(reducer.combine(acc, x), wide)}", reads)


def block_reduce(
    acc: str,
    wide: DType,
    reducer: Reducer,
    sm: str = "sm",
    lane: str = "tid",
    width: str = "TPB",
    prefix: str = "",
) -> BlockReduce:
    """The ``acc`` values of ``width`` consecutive threads (by default the block's) combined into
    the first one's slot of ``sm`` (a thread per slot), by warp shuffles where ``block_strategy``
    allows them."""
    return BlockReduce(acc, sm, lane, width, wide, reducer, prefix, block_strategy(wide))


def block_strategy(dtype: DType) -> str:
    """How a block reduce in ``dtype`` combines: "shuffle" (every block is a whole number of warps,
    ``GPU.TPB`` threads) unless ``DSL_CUDA_SHUFFLE=0`` (the shared-memory tree, for comparison) or
    ``dtype`` is bool (numba-cuda shuffles 32- and 64-bit numbers only)."""
    if os.environ.get("DSL_CUDA_SHUFFLE", "1").strip() == "0" or dtype.is_bool or GPU.TPB % 32:
        return "tree"
    return "shuffle"


@dataclass(frozen=True)
class _Output:
    """One result of a reduction group (a multi-output group has several, ``Group.siblings``): its
    reducer, the dtype of its partial results (``wide``: shared memory and scratch; f32 sums: f64),
    and the suffix ``k`` of its variables (``acc{k}``, ``sm{k}``; none for the first)."""

    value: Value
    reducer: Reducer
    wide: DType
    k: str

    @property
    def acc(self) -> str:
        return f"acc{self.k}"

    @property
    def identity(self) -> str:
        return literal(self.reducer.identity(self.value.type.dtype), self.wide)


def _outputs(group: Group) -> list[_Output]:
    outs = []
    for k, op in enumerate(group.reductions):
        reducer = op.prim.reducer
        assert reducer is not None, f"{op.prim.name} has no reducer"
        outs.append(_Output(op.result, reducer, reducer.accumulator(op.result.type.dtype), str(k or "")))
    return outs


def _result(spec: KernelSpec, o: _Output) -> Line:
    """The store of output ``o``'s element ``o`` (the loop variable) from its accumulator."""
    return store(Access(spec.names[o.value], ("o",)), typed(o.acc, o.value.type.dtype))


def reduce_strategy(shape: tuple[int, ...], axes: AbstractSet[int]) -> str:
    """How ``reduce_kernel`` spreads a reduction of ``shape`` over ``axes``: "serial", "column",
    "block" or "split" (the module docstring)."""
    kept = [d for d in range(len(shape)) if d not in axes]
    n_out = math.prod(shape[d] for d in kept)
    n_red = math.prod(shape) // max(n_out, 1)
    if n_red < BLOCK_REDUCE_MIN:  # one thread per output element, a serial loop
        return "serial"
    if kept and kept[-1] == len(shape) - 1 and shape[-1] >= 8:  # the innermost axis kept: side by side
        return "column"
    return "block" if n_red < SPLIT_MIN or n_out >= SPLIT_OUTPUTS else "split"


def takes_siblings(shape: tuple[int, ...], axes: AbstractSet[int]) -> bool:
    """Whether a reduction of ``shape`` over ``axes`` runs in a kernel that takes several outputs
    (an accumulator each: the "serial" and "column" strategies; the rows pass's
    ``BandCosts.siblings``)."""
    return reduce_strategy(shape, axes) in ("serial", "column")


def reduce_kernel(spec: KernelSpec) -> CudaKernel | None:
    """A REDUCE group's kernel: each of its reductions (``Group.reductions``) an accumulator of its
    own in one pass over the group's reads, added in the order a kernel of its own would add it."""
    root = spec.group.root
    out = root.result
    if out.type.size == 0:
        return None
    shape = spec.group.shape
    axes = {int(a) for a in root.attrs["axes"]}
    strategy = reduce_strategy(shape, axes)
    outs = _outputs(spec.group)
    assert len(outs) == 1 or takes_siblings(shape, axes), f"a {strategy} reduction takes one output"
    kept = [d for d in range(len(shape)) if d not in axes]
    red = [d for d in range(len(shape)) if d in axes]
    n_out = math.prod(shape[d] for d in kept)
    n_red = math.prod(shape[d] for d in red)
    trailing = red == list(range(len(kept), len(shape)))  # the flat position is o * n_red + r
    builder = spec.builder("g" if trailing else None)
    idx = tuple(f"i{d}" for d in range(len(shape)))
    targets = [builder.value_at(op.operands[0], idx) for op in spec.group.reductions]
    results = {o.value for o in outs}
    extra = [v for v in spec.group.outputs if v not in results]  # prologue values stored as well
    extra_values = [builder.value_at(v, idx) for v in extra]
    stores = [
        store(Access(spec.names[v], (linear(idx, shape),)), t)
        for v, t in zip(extra, extra_values, strict=True)
    ]
    reducer, wide, identity = outs[0].reducer, outs[0].wide, outs[0].identity  # (one output from here)
    dtype = out.type.dtype

    inner = [
        *body_stmts(builder),
        *stores,
        *(
            combine(o.reducer, o.acc, t if o.wide is o.value.type.dtype else typed(t, o.wide), o.wide)
            for o, t in zip(outs, targets, strict=True)
        ),
    ]
    kept_ix = unflatten("o", [f"i{d}" for d in kept], [shape[d] for d in kept])
    red_ix = unflatten("r", [f"i{d}" for d in red], [shape[d] for d in red])
    flat = [("g", f"o * {n_red} + r" if n_out > 1 else "r")] if trailing else []

    def accumulate(stop: int | str, start: int | str = 0, step: int | str = 1) -> list[Stmt]:
        per_r = [*index_stmts(inner, red_ix + flat), *inner]
        loop = For("r", stop, per_r, start, step=step)
        if unrollable(loop):  # its loads issued several iterations ahead (its sums in the same order)
            loop.unroll = unroll_factor()
        return [*(Line(f"{o.acc} = {o.identity}") for o in outs), loop]

    o_index = index_stmts(inner, kept_ix)
    o_name = spec.names[out]
    if strategy == "serial":
        results_stored = [_result(spec, o) for o in outs]
        loop = grid_loop("o", n_out, [*o_index, *accumulate(n_red), *results_stored])
        return spec.define([loop], spec.buffers, Launch(f"_grid({n_out})", "TPB"), "serial", [builder])
    if strategy == "column":
        return column_reduce(spec, outs, o_index, accumulate, builder, n_out, n_red)
    shared: list[Stmt] = [Alloc("sm", ("TPB",), wide, shared=True), Line("tid = cuda.threadIdx.x")]
    first_slot = store(Access(o_name, ("o",)), typed("sm[0]", dtype))  # the tree's result
    if strategy == "block":  # a block per output element
        per_o = [
            *o_index,
            *accumulate(n_red, "tid", "cuda.blockDim.x"),
            block_reduce("acc", wide, reducer),
            If("tid == 0", [first_slot]),
            Barrier(),
        ]
        body = [*shared, block_loop("o", n_out, per_o)]
        launch = Launch(f"max(1, min({n_out}, MAXB))", "TPB")
        return spec.define(body, spec.buffers, launch, "block", [builder])
    # Two passes: fixed chunks of the reduced extent into partials, then each output in order.
    chunks = -(-n_red // SPLIT_CHUNK)
    part = Scratch(f"{spec.kernel_name}_part", n_out * chunks, wide)
    per_q = [
        Line(f"o = q // {chunks}"),
        Line(f"c = q % {chunks}"),
        *o_index,
        *accumulate(f"min((c + 1) * {SPLIT_CHUNK}, {n_red})", f"c * {SPLIT_CHUNK} + tid", "TPB"),
        block_reduce("acc", wide, reducer),
        If("tid == 0", [store(Access(part.name, ("q",)), "sm[0]")]),
        Barrier(),
    ]
    first = spec.define(
        [*shared, block_loop("q", n_out * chunks, per_q)],
        spec.group.inputs + extra,
        Launch(f"max(1, min({n_out * chunks}, MAXB))", "TPB"),
        "split",
        [builder],
        scratch=[part],
        name=f"{spec.kernel_name}_1",
    )
    x = Access(part.name, (f"o * {chunks} + c",))
    finish = [  # a block per output: threads take fixed chunks, then the tree (a fixed order)
        *shared,
        block_loop(
            "o",
            n_out,
            [
                Line(f"acc = {identity}"),
                For(
                    "c",
                    chunks,
                    [Line(f"x = {part.name}[{x.index[0]}]", (x,)), combine(reducer, "acc", "x", wide)],
                    "tid",
                    step="cuda.blockDim.x",
                ),
                block_reduce("acc", wide, reducer),
                If("tid == 0", [first_slot]),
                Barrier(),
            ],
        ),
    ]
    launch = Launch(f"max(1, min({n_out}, MAXB))", "TPB")
    second = kernel(
        f"{spec.kernel_name}_2", [part.name, o_name], [(wide, 1), (dtype, 1)], finish, launch, "split"
    )
    first.follow.append(second)
    return first


def column_chunks(n_red: int, n_out: int) -> int:
    """The row chunks of a column reduction of ``n_red`` rows into ``n_out`` outputs: one (the
    partials in registers, no second pass) when its column tiles fill a GPU, else as many as fill
    it, each of at least ``COLUMN_ROWS`` rows. Decided on a GPU's sizes whatever runs the kernel (the
    simulator adds in the same order, chunk by chunk)."""
    tiles = -(-n_out // GPU.COLS)
    return max(1, min(-(-COLUMN_FILL // tiles), n_red // COLUMN_ROWS))


def column_reduce(
    spec: KernelSpec,
    outs: list[_Output],
    o_index: list[Stmt],
    accumulate: Callable[..., list[Stmt]],
    builder: object,
    n_out: int,
    n_red: int,
) -> CudaKernel:
    """A reduction that keeps the innermost axis (a bias gradient: the sum over a batch's rows).
    A block of ``COLS x LANES`` threads takes ``COLS`` consecutive outputs and a chunk of the reduced
    positions (``column_chunks``): each warp reads whole consecutive row segments (a block per output
    would read one element per row, a sector each). Lane ``y`` of a column takes positions ``y,
    y + LANES...`` of the chunk, its partial in a register; the lanes are combined in order into the
    output (one chunk) or a partial per (chunk, output), which a second kernel combines in chunk
    order: a fixed order, deterministic. Each of ``outs`` (a multi-output group's reductions) has
    its own accumulator, lanes' slots and partials, combined in that same order: the bits of a
    kernel of its own."""
    rows = -(-n_red // column_chunks(n_red, n_out))
    chunks = -(-n_red // rows)
    tiles = f"(({n_out} + COLS - 1) // COLS)"
    parts = [Scratch(f"{spec.kernel_name}_part{o.k}", n_out * chunks, o.wide) for o in outs]
    at = f"c * {n_out} + o"  # (chunk, output) in the partials

    lanes: list[Stmt] = []
    for o in outs:
        lane = Access(f"sm{o.k}", ("y * COLS + tx",))
        lanes += [Line(f"x{o.k} = {text(lane)}", (lane,)), combine(o.reducer, o.acc, f"x{o.k}", o.wide)]
    done = [
        store(Access(p.name, (at,)), o.acc) if chunks > 1 else _result(spec, o)
        for o, p in zip(outs, parts, strict=True)
    ]
    per_q: list[Stmt] = [
        Line(f"c = q // {tiles}"),
        Line(f"o = (q % {tiles}) * COLS + tx"),
        *(Line(f"{o.acc} = {o.identity}") for o in outs),
        If(
            f"o < {n_out}",
            [
                *o_index,
                *accumulate(f"min((c + 1) * {rows}, {n_red})", f"c * {rows} + ty", "LANES"),
            ],
        ),
        *(store(Access(f"sm{o.k}", ("ty * COLS + tx",)), o.acc) for o in outs),
        Barrier(),
        If(f"ty == 0 and o < {n_out}", [For("y", "LANES", lanes, 1), *done]),
        Barrier(),
    ]
    body: list[Stmt] = [
        *(Alloc(f"sm{o.k}", ("SLOTS",), o.wide, shared=True) for o in outs),
        Line("tx = cuda.threadIdx.x"),
        Line("ty = cuda.threadIdx.y"),
        block_loop("q", f"{tiles} * {chunks}", per_q),
    ]
    launch = Launch(f"max(1, min({tiles} * {chunks}, MAXB))", "(COLS, LANES)")
    if chunks == 1:  # the block's lanes make the output: no partials, no second pass
        return spec.define(body, spec.buffers, launch, "column", [builder])  # type: ignore[list-item]
    results = {o.value for o in outs}
    extra = [v for v in spec.group.outputs if v not in results]
    first = spec.define(
        body,
        spec.group.inputs + extra,
        launch,
        "column",
        [builder],  # type: ignore[list-item]
        scratch=parts,
        name=f"{spec.kernel_name}_1",
    )
    per_c: list[Stmt] = []
    for o, p in zip(outs, parts, strict=True):
        partial = Access(p.name, (at,))
        per_c += [Line(f"x{o.k} = {text(partial)}", (partial,)), combine(o.reducer, o.acc, f"x{o.k}", o.wide)]
    finish = [  # a thread per output: its partials in chunk order (consecutive outputs side by side)
        grid_loop(
            "o",
            n_out,
            [
                *(Line(f"{o.acc} = {o.identity}") for o in outs),
                For("c", chunks, per_c),
                *(_result(spec, o) for o in outs),
            ],
        )
    ]
    args = [p.name for p in parts] + [spec.names[o.value] for o in outs]
    types = [(o.wide, 1) for o in outs] + [(o.value.type.dtype, 1) for o in outs]
    launch = Launch(f"_grid({n_out})", "TPB")
    first.follow.append(kernel(f"{spec.kernel_name}_2", args, types, finish, launch, "column"))
    return first
