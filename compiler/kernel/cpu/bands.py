"""CPU kernels of row bands (``compiler/passes/rows.py``) as kernel IR: one kernel per band, fixed
chunks of rows in parallel, every member's loop nest for each row in member order."""

from __future__ import annotations

import math

from compiler.ir.core import Value
from compiler.kernel.cpu.loops import (
    KernelSpec,
    RowCode,
    accumulating_nest,
    accumulation,
    body,
    chunk_rows,
    loop_body,
    partial_update,
    partials,
    printed,
    reduced_tail,
    store,
)
from compiler.kernel.cpu.records import CpuSchedule, Kernel
from compiler.kernel.emit import ROW, ConstantPool
from compiler.kernel.ir import Alloc, For, KernelIR, Line, Stmt, View, lines, nest
from compiler.passes.fuse import Band, GroupKind
from compiler.passes.rows import PARALLEL_MIN_ELEMENTS, REDUCE_CHUNKS


def band_kernel(band: Band, names: dict[Value, str], pool: ConstantPool, schedule: CpuSchedule) -> Kernel:
    """One kernel for a band (``compiler/passes/rows.py``): fixed chunks of rows in parallel; in each
    chunk, row by row, every member's loop nest for that row in member order. Values the band keeps
    per row live in a row of scratch per chunk (a scalar when a row is one element); reductions over
    axis 0 accumulate per chunk and are combined in chunk order after the loop. Each member's own
    scalars are named apart (``m{j}_``)."""
    n = band.rows
    parallel = max(math.prod(g.shape) for g in band.groups if g not in band.tail) >= PARALLEL_MIN_ELEMENTS
    chunks = min(REDUCE_CHUNKS, n) if parallel else 1
    # the values kept per row, in the order the members store them: ``l0_r`` ... (a row of scratch
    # ``l0_s`` per chunk; a scalar for a one-element row)
    kept = list(dict.fromkeys(v for g in band.groups for v in g.outputs if v in band.local))
    local = {v: f"l{k}_r" for k, v in enumerate(kept)}
    code = RowCode()
    for v in kept:
        row_shape = v.type.shape[1:]
        size = math.prod(row_shape)
        if size == 1:
            continue  # a scalar variable
        scratch = local[v].removesuffix("_r") + "_s"
        code.before.append(Alloc(scratch, (chunks, size), v.type.dtype))
        code.chunk.append(View(local[v], scratch, row_shape, row="ch"))
    args: dict[str, None] = {}
    for g in band.groups:
        args.update((names[v], None) for v in g.inputs + g.outputs if v not in band.local)
    params = {a: f"p{i}" for i, a in enumerate(args)}
    for j, group in enumerate(band.groups):
        spec = KernelSpec(group, names, pool, schedule, local, prefix=f"m{j}_", params=params)
        member = _band_tail(spec) if group in band.tail else _band_rows(spec, chunks)
        code.before += member.before
        code.chunk += member.chunk
        code.row += member.row
        code.after += member.after
        code.reassoc |= member.reassoc
    rows = For(ROW, chunk_rows(n, chunks)[1], code.row, chunk_rows(n, chunks)[0])
    stmts = [*code.before, For("ch", chunks, [*code.chunk, rows], parallel=parallel), *code.after]
    name = f"{pool.prefix}k{band.groups[0].index}_rows"
    ir = KernelIR(name, [params[a] for a in args], stmts, code.reassoc, rows=n)
    return printed(ir, list(args), parallel)


def _band_tail(spec: KernelSpec) -> RowCode:
    """A tail member: its own serial loop nest after the band's loop (and after the partial results
    of the members before it are combined)."""
    b = loop_body(spec, spec.group.shape, spec.group.outputs, None, try_flat=True)
    return RowCode(after=[*b.views, *nest(b.loops, b.extents, b.stmts)])


def _row_nest(names: list[str], extents: list[int], stmts: list[Stmt]) -> list[Stmt]:
    """``nest`` without its loops of one iteration (their index is 0): a per-row scalar is then
    assigned on every path through the row, so Numba's parallel lowering keeps it private to the
    thread (assigned inside a ``range(1)`` loop, it would be live into the parallel body and shared)."""
    kept = [(n, e) for n, e in zip(names, extents, strict=True) if e != 1]
    fixed = lines(*(f"{n} = 0" for n, e in zip(names, extents, strict=True) if e == 1))
    return fixed + nest([n for n, _ in kept], [e for _, e in kept], stmts)


def _band_rows(spec: KernelSpec, chunks: int) -> RowCode:
    """A member's code for one row ``i0`` (its loops over the other axes), and for a reduction over
    axis 0 its partial results: initialized per chunk, combined after the loop."""
    shape = spec.group.shape
    if spec.group.kind is GroupKind.LOOP:
        b = body(spec, shape, spec.group.outputs, None, flat=False)
        assert b is not None
        return RowCode(row=_row_nest(b.loops[1:], b.extents[1:], b.stmts))
    root = spec.group.root
    out = root.result
    axes = spec.group.reduced_axes
    split = reduced_tail(shape, axes)
    extra = [v for v in spec.group.outputs if v is not out]
    b = body(spec, shape, extra, root.operands[0], flat=False)
    assert b is not None and b.target is not None
    acc_name = f"{spec.prefix}acc"
    identity, acc = accumulation(root, b.target, spec.schedule, spec.pool, spec.prefix)
    dtype = out.type.dtype
    kept = tuple(f"i{d}" for d in range(len(shape)) if d not in axes)
    outer = max(split, 1)  # loops 1..outer-1 keep their axis; loops from ``outer`` on accumulate
    inner = accumulating_nest(b.loops[outer:], b.extents[outer:], b.stmts, acc, _row_nest)
    reducer = root.prim.reducer
    assert reducer is not None
    reassoc = spec.schedule.reassoc_sums and dtype.is_float and reducer.reassociable
    reassoc = reassoc and outer < len(shape)
    if 0 not in axes:  # a row reduction: row i0's result is ready after row i0
        block = [
            Line(f"{acc_name} = {acc.load(identity)}"),
            *inner,
            store(spec.locate(out, kept), acc.value(acc_name)),
        ]
        return RowCode(row=_row_nest(b.loops[1:outer], b.extents[1:outer], block), reassoc=reassoc)
    parts = partials(spec, chunks, acc, row_blocks=outer == len(shape))
    parts.row = _row_nest(
        b.loops[1:outer], b.extents[1:outer], partial_update(kept, inner, acc, parts, spec.prefix)
    )
    parts.row += parts.flush
    parts.reassoc = reassoc
    return parts
