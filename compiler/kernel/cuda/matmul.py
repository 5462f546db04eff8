"""CONTRACT groups: one shared matmul kernel per dtype (strategy "matmul"), tiled through shared
memory with a register tile per thread; float matmuls launch through
``runtime.cublas.matmul_launcher`` (cuBLAS where it can)."""

from __future__ import annotations

from compiler.ir.types import DType
from compiler.kernel.cuda.records import CudaKernel, KernelSpec, Launch, kernel
from compiler.kernel.emit import literal, typed
from compiler.kernel.ir import Access, Alloc, Barrier, For, If, Line, Stmt
from compiler.passes.fuse import OperandView, accumulation, matmul_views
from compiler.prims.contraction import matmul_dims

MICRO = 4  # each matmul thread computes MICRO x MICRO outputs (the prelude's MICRO): a BT^2 block tile


def matmul_kernel(spec: KernelSpec) -> CudaKernel | None:
    """One shared kernel per dtype (``_matmul_f32``...), its sizes passed at launch: every matmul of
    that dtype is the same compiled code. TILE x TILE threads compute a (TILE*MICRO)^2 block tile,
    each thread a MICRO x MICRO register tile (rows ``ty + TILE*i``, columns ``tx + TILE*j``, so
    shared-memory reads and global writes are contiguous across a warp), over K in steps of TILE
    staged through shared memory. The register tile is unrolled."""
    root = spec.group.root
    out = root.result
    if out.type.size == 0:
        return None
    nb, m, n, k = matmul_dims(root)
    dtype = out.type.dtype
    zero = literal(0, dtype)
    reducer = root.prim.reducer
    assert reducer is not None, f"{root.prim.name} has no reducer"
    r = range(MICRO)
    a_at = Access("a", ("abase + gi * sa_i + gp * sa_p",))
    b_at = Access("b", ("bbase + gp * sb_p + gj * sb_j",))
    loads: list[Stmt] = []
    for e in r:  # a (BT x TILE) slice of A and a (TILE x BT) slice of B: MICRO elements per thread
        loads += [
            Line(f"e = tid + {e} * TILE * TILE"),
            Line("ra = e // TILE"),
            Line("ca = e % TILE"),
            Line("gi = row0 + ra"),
            Line("gp = p0 + ca"),
            Line(
                f"sa[ca, ra] = a[{a_at.index[0]}] if gi < m and gp < k else {zero}",
                (a_at,),
                (Access("sa", ("ca", "ra")),),
            ),
            Line("rb = e // BT"),
            Line("cb = e % BT"),
            Line("gp = p0 + rb"),
            Line("gj = col0 + cb"),
            Line(
                f"sb[rb, cb] = b[{b_at.index[0]}] if gp < k and gj < n else {zero}",
                (b_at,),
                (Access("sb", ("rb", "cb")),),
            ),
        ]
    step: list[Stmt] = [
        Line(f"x{i} = sa[q, ty + {i} * TILE]", (Access("sa", ("q", f"ty + {i} * TILE")),)) for i in r
    ]
    step += [Line(f"y{j} = sb[q, tx + {j} * TILE]", (Access("sb", ("q", f"tx + {j} * TILE")),)) for j in r]
    step += [
        Line(f"c{i}{j} = {typed(reducer.combine(f'c{i}{j}', typed(f'x{i} * y{j}', dtype)), dtype)}")
        for i in r
        for j in r
    ]
    o_at = Access("o", ("oi",))
    stores: list[Stmt] = []
    for i in r:
        stores.append(Line(f"gi = row0 + ty + {i} * TILE"))
        for j in r:
            result = f"alpha * c{i}{j} if beta == 0 else alpha * c{i}{j} + beta * cin[oi]"
            stores += [
                Line(f"gj = col0 + tx + {j} * TILE"),
                If(
                    "gi < m and gj < n",
                    [
                        Line("oi = obase + gi * so_i + gj * so_j"),
                        Line(f"o[oi] = {result}", (Access("cin", ("oi",)),), (o_at,)),
                    ],
                ),
            ]
    identity = literal(reducer.identity(dtype), dtype)
    tile: list[Stmt] = [
        Line("row0 = bi * BT"),
        Line("col0 = bj * BT"),
        *(Line(f"c{i}{j} = {identity}") for i in r for j in r),
        For("p0", "k", [*loads, Barrier(), For("q", "TILE", step), Barrier()], step="TILE"),
        *stores,
    ]
    batch: list[Stmt] = [
        Line("abase = (t // a_in) * a_so + (t % a_in) * a_si"),
        Line("bbase = (t // b_in) * b_so + (t % b_in) * b_si"),
        Line("obase = (t // o_in) * o_so + (t % o_in) * o_si"),
        For(
            "bi",
            "(m + BT - 1) // BT",
            [For("bj", "(n + BT - 1) // BT", tile, "cuda.blockIdx.x", True, step="cuda.gridDim.x")],
            "cuda.blockIdx.y",
            True,
            step="cuda.gridDim.y",
        ),
    ]
    body: list[Stmt] = [
        Alloc("sa", ("TILE", "BT"), dtype, shared=True),
        Alloc("sb", ("TILE", "BT"), dtype, shared=True),
        Line("tx = cuda.threadIdx.x"),
        Line("ty = cuda.threadIdx.y"),
        Line("tid = ty * TILE + tx"),
        For("t", "nb", batch, "cuda.blockIdx.z", True, step="cuda.gridDim.z"),
    ]
    tiles_m, tiles_n = f"(({m} + BT - 1) // BT)", f"(({n} + BT - 1) // BT)"
    launch = Launch(f"(min({tiles_n}, MAXG), min({tiles_m}, MAXG), min({nb}, MAXG))", "(TILE, TILE)")
    name = f"_{root.prim.name}_{dtype}"
    params = ["a", "b", "o", "cin", "alpha", "beta", "nb", "m", "k", "n", "sa_i", "sa_p", "sb_p", "sb_j"]
    params += ["a_in", "a_so", "a_si", "b_in", "b_so", "b_si", "so_i", "so_j", "o_in", "o_so", "o_si"]
    types = [(dtype, 1)] * 4 + [(dtype, 0)] * 2 + [(DType.i64, 0)] * 19
    shared_kernel = kernel(name, params, types, body, launch, "matmul")
    shared_kernel.shared = True
    if dtype in (DType.f32, DType.f64):  # cuBLAS where it can (runtime/cublas.py), else this kernel
        shared_kernel.wrapper = "_matmul_launcher"
    # An operand computed by transposes and reshapes inlined into the group (fuse.operand_view) is read
    # from the chain's source buffer through its strides: no copy.
    # The result is written through its layout epilogue (fuse.result_view) where the group has one.
    a, b, o = matmul_views(spec.group)
    sizes = [nb, m, k, n, a.rows, a.cols, b.rows, b.cols, *_batch_walk(a, nb), *_batch_walk(b, nb)]
    sizes += [o.rows, o.cols, *_batch_walk(o, nb)]
    # An accumulation epilogue (fuse.accumulation): o = alpha * a @ b + beta * cin, cin read at the
    # element written (o itself where the plan stores the result in place).
    acc = accumulation(spec.group)
    cin = spec.names[acc.source] if acc is not None else spec.names[o.source]
    scale = (
        [literal(acc.alpha, dtype), literal(acc.beta, dtype)]
        if acc
        else [literal(1, dtype), literal(0, dtype)]
    )
    buffers = [spec.names[a.source], spec.names[b.source], spec.names[o.source], cin]
    shared_kernel.args = [*buffers, *scale, *map(str, sizes)]
    return shared_kernel


def _batch_walk(view: OperandView, nb: int) -> tuple[int, int, int]:
    """(inner count, outer stride, inner stride): batch element ``t`` of ``view`` starts at
    ``(t // inner) * outer + (t % inner) * inner_stride`` (``OperandView.batch``: at most two axes)."""
    if not view.batch:
        return 1, 0, 0
    if len(view.batch) == 1:
        return nb, 0, view.batch[0][1]
    (_, outer), (inner, inner_stride) = view.batch
    return inner, outer, inner_stride
