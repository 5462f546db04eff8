"""CPU kernels of CONTRACT groups: float matmuls as calls of the runtime's ``gemm_rows`` (BLAS gemm
per batch element and row block, ``runtime/blas.py``), each operand a strided view of its buffer
(``fuse.operand_view``) described by a constant array of the module; integer matmuls as i-k-j loops
over the same views, in kernel IR."""

from __future__ import annotations

import numpy as np

from compiler.ir.types import DType
from compiler.kernel.cpu.loops import KernelSpec, fill, store, text
from compiler.kernel.cpu.records import CpuSchedule, Kernel, numba_threads
from compiler.kernel.emit import literal, typed
from compiler.kernel.ir import Access, For, Line, Stmt, View, lines
from compiler.passes.fuse import MAX_VIEW_BATCH_AXES, OperandView, accumulation, matmul_views
from compiler.passes.rows import PARALLEL_MIN_ELEMENTS
from compiler.prims.contraction import matmul_dims
from runtime import blas
from runtime.intrinsics import FLAT

PARALLEL_MIN_FLOPS = 4_000_000  # a matmul below this runs on the calling thread (~40 us of BLAS)
MIN_BLOCK_ROWS = 16  # rows per gemm call when a matmul is split into row blocks


def matmul_kernel(spec: KernelSpec) -> Kernel | None:
    root = spec.group.root
    out = root.result
    if out.type.size == 0:
        return None
    nb, m, n, k = matmul_dims(root)
    x, y, dest = matmul_views(spec.group)
    o = spec.param(dest.source)
    dtype = out.type.dtype
    if k == 0:
        return spec.define(fill(o, out.type.size, literal(0, dtype)))
    if dtype in (DType.f32, DType.f64):
        return _gemm_kernel(spec, (x, y, dest), (nb, m, n, k), split_matmuls(spec.schedule))
    # Integer (and other) matmuls: explicit i-k-j loops over the operands' flat buffers.
    reducer = root.prim.reducer
    assert reducer is not None, f"{root.prim.name} has no reducer"
    views: list[Stmt] = [View(n_, spec.param(v.source), (-1,)) for n_, v in (("x", x), ("y", y))]
    views.append(View("o", o, (-1,)))
    at = Access("o", (f"ot + i * {dest.rows} + j * {dest.cols}",))
    ay = Access("y", (f"yt + p * {y.rows} + j * {y.cols}",))
    ax = Access("x", (f"xt + i * {x.rows} + p * {x.cols}",))
    step = typed(reducer.combine(text(at), f"(aik * {text(ay)})"), dtype)
    row: list[Stmt] = [
        For("j", n, [store(at, literal(reducer.identity(dtype), dtype))]),
        For("p", k, [Line(f"aik = {text(ax)}", (ax,)), For("j", n, [store(at, step, (at, ay))])]),
    ]
    parallel = nb * m * n * k >= PARALLEL_MIN_ELEMENTS and m > 1  # rows are independent
    offsets = lines(*(f"{n_}t = {v.batch_offset('t')}" for n_, v in (("x", x), ("y", y), ("o", dest))))
    per_batch = For("t", nb, [*offsets, For("i", m, row, parallel=parallel)])
    return spec.define([*views, per_batch], parallel)


def _gemm_kernel(
    spec: KernelSpec,
    views: tuple[OperandView, OperandView, OperandView],
    dims: tuple[int, int, int, int],
    split: bool,
) -> Kernel:
    """BLAS gemm calls on blocks (``runtime/blas.py``): with ``split``, batch elements and row blocks
    of the result spread over Numba's threads when the matmul is big enough to pay for a parallel
    region (else one call per batch element, BLAS threading as it is). Each operand is read as a
    strided view of its buffer (``fuse.operand_view``): a leading dimension, the transpose flag
    where its columns are the strided axis, an offset per batch element; the result likewise, written
    through ``views[2]`` (as the transposed product where the result's columns are the strided axis)."""
    nb, m, n, k = dims
    dtype = spec.group.root.result.type.dtype
    x_view, y_view, dest = views
    if dest.cols != 1:  # columns of the result are the strided axis: compute o^T = y^T @ x^T
        x_view, y_view, dest, m, n = y_view.transposed(), x_view.transposed(), dest.transposed(), n, m
    flops = 2 * nb * m * n * k
    threads = numba_threads()
    parts = 1
    if split and flops >= PARALLEL_MIN_FLOPS and nb < threads:
        parts = max(1, min(-(-threads // nb), m // MIN_BLOCK_ROWS))
    parallel = split and flops >= PARALLEL_MIN_FLOPS and nb * parts > 1
    layouts = []
    for view, (n_rows, n_cols) in ((x_view, (m, k)), (y_view, (k, n))):
        if view.cols == 1:  # rows of the matrix are rows of memory: leading dimension = row stride
            layouts.append((False, max(view.rows, n_cols), view.rows))
        else:  # columns are rows of memory: BLAS's transpose flag, leading dimension = column stride
            layouts.append((True, max(view.cols, n_rows), 1))
    (ta, lda, row_step), (tb, ldb, _) = layouts
    alpha, beta, source = 1.0, 0.0, dest.source
    acc = accumulation(spec.group)
    if acc is not None:  # o = alpha * x @ y + beta * source: gemm reads source's values from o
        alpha, beta, source = float(acc.alpha), float(acc.beta), acc.source
    copy = spec.names[source] != spec.names[dest.source]  # not planned in place: copied in first
    params = dict(copy=copy, ta=ta, tb=tb, m=m, n=n, k=k, lda=lda, ldb=ldb, ldc=max(dest.rows, n))
    params |= dict(x_step=row_step, o_step=dest.rows, parts=parts, blocks=nb * parts)
    # dslc's register tiles instead of the library's gemm where they pay (``blas.tiles_pay``), for a
    # matmul split over the threads: one too small to split would save microseconds on the tiles and
    # cost their serial form's compile (~0.8 s, once per machine)
    tiles = spec.schedule.matmul_tiles and parallel and blas.tiles_pay(m // parts, n, k, dtype.itemsize)
    for prefix, view in (("x", x_view), ("y", y_view), ("o", dest)):
        assert len(view.batch) <= MAX_VIEW_BATCH_AXES, view
        batch = [(1, 0)] * (MAX_VIEW_BATCH_AXES - len(view.batch)) + list(view.batch)
        params |= {f"{prefix}b{i}": v for i, v in enumerate(x for axis in batch for x in axis)}
    p = spec.pool.add(np.array([params[name] for name in blas.GEMM_ROWS_PARAMS], np.int64))
    s = spec.pool.add(np.array([alpha, beta], np.float64))
    args = [spec.names[v] for v in (x_view.source, y_view.source, dest.source, source)] + [p, s]
    signature: list[tuple[str, int | None]] = [(dtype.np.name, FLAT)] * 4
    signature += [("int64", 1), ("float64", 1)]
    name = "gemm_rows_tiles" if tiles else "gemm_rows" if parallel else "gemm_rows_serial"
    return Kernel(name, args, "", signature=signature)


def split_matmuls(schedule: CpuSchedule) -> bool:
    """Matmul kernels split their work over Numba's threads, with SciPy's BLAS on one thread."""
    return schedule.split_matmuls and not blas.native_blas_threads()
