"""BLAS ``gemm`` for generated CPU kernels, and who owns the CPU cores during a matmul.

``gemm(transa, transb, m, n, k, alpha, a, a_off, lda, b, b_off, ldb, beta, c, c_off, ldc)`` computes
the row-major ``C = alpha * op(A) @ op(B) + beta * C`` on blocks of flat arrays (``*_off``: the
block's first element; ``ld*``: its row stride; ``trans*``: the operand is stored transposed). It
calls the same ``numba_xxgemm`` entry (SciPy's BLAS) that Numba's ``np.dot`` calls, so generated
modules stay cacheable, but with leading dimensions, offsets and the alpha/beta scaling exposed:
kernels hand BLAS row blocks of a matmul, transposed operands without copies, and results that
accumulate into their destination.

Threads. SciPy's OpenBLAS runs its own thread pool beside Numba's; two pools on a few cores fight
whenever the machine has other load (measured on the 2-core CI machine while another process ran:
the transformer benchmark's kernels took 1,814 ms with BLAS threads, 33 ms with one). So the first
executable that calls ``gemm`` sets SciPy's OpenBLAS to one thread (``single_threaded_blas``), and
matmul kernels split their work over Numba's pool themselves (batch elements and row blocks, which
the threads claim one by one as ``runtime.parallel.parallel_for`` claims chunks). NumPy's own
OpenBLAS (``np.matmul`` outside dslc) is a different library and is not touched.
``DSL_BLAS_THREADS=native`` leaves SciPy's BLAS threading alone, and kernels then call
``gemm`` once per batch element on the calling thread.

Library. ``gemm`` calls SciPy's OpenBLAS; ``gemm_mkl`` the same blocks on Intel MKL's ``cblas_?gemm``
(``runtime/mkl.py``), which generated modules bind with ``DSL_BLAS=mkl`` (``vendor``). Both are built
by ``_gemm_intrinsic`` and differ only in the call they emit.
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
import types as types_module
from collections.abc import Callable
from typing import Any, NamedTuple

import numba
import numpy as np
from llvmlite import binding as llvm_binding
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic
from numba.np.ufunc.parallel import _iget_num_threads

from runtime import mkl, native_blas_threads
from runtime.parallel import claim_next

_lock = threading.Lock()
_configured = False


def single_threaded_blas() -> bool:
    """Set SciPy's OpenBLAS (the BLAS generated kernels call) to one thread, once per process.
    Returns whether a setter was found (other BLAS builds are left as they are)."""
    global _configured
    with _lock:
        if _configured or native_blas_threads():
            return _configured
        _configured = True
        import scipy

        libs = os.path.join(os.path.dirname(os.path.dirname(scipy.__file__)), "scipy.libs")
        for path in sorted(glob.glob(os.path.join(libs, "*openblas*"))):
            lib = ctypes.CDLL(path)
            for name in ("scipy_openblas_set_num_threads", "openblas_set_num_threads"):
                setter = getattr(lib, name, None)
                if setter is not None:
                    setter(1)
                    return True
        return False


_ll_char = ir.IntType(8)
_ll_int = ir.IntType(32)
_ll_void_p = ir.IntType(8).as_pointer()


class GemmCall(NamedTuple):
    """One BLAS call's LLVM values: ``a``, ``b``, ``c`` point at each block's first element, the sizes
    and leading dimensions are ``intp``, ``alpha`` and ``beta`` of ``float_type``."""

    kind: str  # "s" or "d"
    float_type: Any
    ta: Any
    tb: Any
    m: Any
    n: Any
    k: Any
    alpha: Any
    a: Any
    lda: Any
    b: Any
    ldb: Any
    beta: Any
    c: Any
    ldc: Any


CallEmitter = Callable[[Any, Any, GemmCall], None]  # (context, builder, call): emits the call


def _float_operands(*arrays: Any) -> Any:
    """The element type of ``arrays`` (Numba types) when all are arrays of one float type (float32
    or float64): the operands a gemm or a register tile takes; else None."""
    if not all(isinstance(t, types.Array) for t in arrays) or len({t.dtype for t in arrays}) != 1:
        return None
    return arrays[0].dtype if arrays[0].dtype in (types.float32, types.float64) else None


def _gemm_intrinsic(emit: CallEmitter, prepare: Callable[[], None]) -> Any:
    """A ``gemm`` intrinsic (the signature of the module docstring) whose call ``emit`` writes;
    ``prepare`` runs when a kernel calling it is typed (the library must be loadable by then)."""

    def typer(  # noqa: PLR0913 - BLAS's signature
        typingctx: Any,
        transa: Any,
        transb: Any,
        m: Any,
        n: Any,
        k: Any,
        alpha: Any,
        a: Any,
        a_off: Any,
        lda: Any,
        b: Any,
        b_off: Any,
        ldb: Any,
        beta: Any,
        c: Any,
        c_off: Any,
        ldc: Any,
    ) -> Any:
        prepare()
        dtype = _float_operands(a, b, c)
        if dtype is None:
            return None
        kind = "s" if dtype == types.float32 else "d"
        index = types.intp
        sig = types.void(
            *(types.boolean, types.boolean, index, index, index, dtype),
            *(a, index, index, b, index, index, dtype, c, index, index),
        )

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> None:
            ta, tb, m_, n_, k_, alpha_, a_, a_off_, lda_, b_, b_off_, ldb_, beta_, c_, c_off_, ldc_ = args

            def data(arr_type: Any, arr: Any, offset: Any) -> Any:
                ary = context.make_array(arr_type)(context, builder, arr)
                return builder.bitcast(builder.gep(ary.data, [offset]), _ll_void_p)

            float_type = context.get_value_type(dtype)
            a_ptr, b_ptr, c_ptr = data(a, a_, a_off_), data(b, b_, b_off_), data(c, c_, c_off_)
            sizes = (m_, n_, k_)
            operands = (alpha_, a_ptr, lda_, b_ptr, ldb_, beta_, c_ptr, ldc_)
            emit(context, builder, GemmCall(kind, float_type, ta, tb, *sizes, *operands))

        return sig, codegen

    return intrinsic(typer)


def _ensure_numba_blas() -> None:
    from numba.np.linalg import ensure_blas

    ensure_blas()


def _numba_xxgemm_call(context: Any, builder: Any, g: GemmCall) -> None:
    """SciPy's BLAS through Numba's ``numba_xxgemm`` (column-major, scalars by reference)."""
    intp = context.get_value_type(types.intp)
    fnty = ir.FunctionType(
        ir.IntType(32),
        [_ll_char, _ll_char, _ll_char, intp, intp, intp, _ll_void_p, _ll_void_p, intp]
        + [_ll_void_p, intp, _ll_void_p, _ll_void_p, intp],
    )
    fn = cgutils.get_or_insert_function(builder.module, fnty, "numba_xxgemm")

    def slot(value: Any) -> Any:
        ptr = cgutils.alloca_once(builder, g.float_type)
        builder.store(value, ptr)
        return builder.bitcast(ptr, _ll_void_p)

    def trans(flag: Any) -> Any:
        return builder.select(flag, ir.Constant(_ll_char, ord("t")), ir.Constant(_ll_char, ord("n")))

    # Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B goes first.
    builder.call(
        fn,
        (ir.Constant(_ll_char, ord(g.kind)), trans(g.tb), trans(g.ta), g.n, g.m, g.k, slot(g.alpha))
        + (g.b, g.ldb, g.a, g.lda, slot(g.beta), g.c, g.ldc),
    )


def _cblas_call(context: Any, builder: Any, g: GemmCall) -> None:
    """MKL's ``cblas_?gemm`` (row-major, 32-bit sizes, scalars by value), by the name ``runtime.mkl``
    gave its address."""
    scalar_ptr_ld = [g.float_type, _ll_void_p, _ll_int, _ll_void_p, _ll_int]
    fnty = ir.FunctionType(ir.VoidType(), [_ll_int] * 6 + scalar_ptr_ld + [g.float_type, _ll_void_p, _ll_int])
    fn = cgutils.get_or_insert_function(builder.module, fnty, mkl.SYMBOLS[g.kind])

    def trans(flag: Any) -> Any:
        return builder.select(flag, ir.Constant(_ll_int, mkl.TRANS), ir.Constant(_ll_int, mkl.NO_TRANS))

    def size(value: Any) -> Any:
        return builder.trunc(value, _ll_int)

    builder.call(
        fn,
        (ir.Constant(_ll_int, mkl.ROW_MAJOR), trans(g.ta), trans(g.tb), size(g.m), size(g.n), size(g.k))
        + (g.alpha, g.a, size(g.lda), g.b, size(g.ldb), g.beta, g.c, size(g.ldc)),
    )


def _require_mkl() -> None:
    if not mkl.available():
        raise RuntimeError("this module calls MKL's gemm, and MKL does not load in this process")


gemm = _gemm_intrinsic(_numba_xxgemm_call, _ensure_numba_blas)
gemm_mkl = _gemm_intrinsic(_cblas_call, _require_mkl)


def _gemm_python(  # noqa: PLR0913 - BLAS's signature
    ta: bool,
    tb: bool,
    m: int,
    n: int,
    k: int,
    alpha: Any,
    a: np.ndarray,
    a_off: int,
    lda: int,
    b: np.ndarray,
    b_off: int,
    ldb: int,
    beta: Any,
    c: np.ndarray,
    c_off: int,
    ldc: int,
) -> None:
    """``gemm`` for modules run as plain Python (``NUMBA_DISABLE_JIT``): the same blocks, with NumPy."""
    if m == 0 or n == 0:
        return

    def block(x: np.ndarray, off: int, ld: int, rows: int, cols: int, transposed: bool) -> np.ndarray:
        shape = (cols, rows) if transposed else (rows, cols)
        view = np.lib.stride_tricks.as_strided(x[off:], shape, (ld * x.itemsize, x.itemsize))
        return view.T if transposed else view

    out = block(c, c_off, ldc, m, n, False)
    product = alpha * (block(a, a_off, lda, m, k, ta) @ block(b, b_off, ldb, k, n, tb))
    out[...] = product if beta == 0 else product + beta * out  # beta 0: C is not read (may be poison)


def vendor() -> str:
    """The BLAS new CPU modules call: SciPy's OpenBLAS, or with ``DSL_BLAS=mkl`` Intel MKL (an
    error if it does not load). MKL runs sequentially inside Numba's threads, so it needs the split
    (not with ``DSL_BLAS_THREADS=native``)."""
    choice = os.environ.get("DSL_BLAS", "").strip().lower()
    if choice != "mkl" or native_blas_threads():
        return "openblas"
    if not mkl.available():
        raise RuntimeError("DSL_BLAS=mkl, but MKL does not load: pip install 'dslc[mkl]'")
    return "mkl"


# Register tiles: dslc's own matmul (benchmarks/results/notes.md). A tile is ``TILE_ROWS`` rows of the
# result by ``TILE_VECTORS`` machine vectors of columns, accumulated in registers over the whole ``k``
# loop: each step loads the right operand's row segment once and multiplies it into every row with
# one fused multiply-add per vector. ``gemm_tiles`` runs them in panels: the left operand's rows of a
# panel (``TILE_PANEL_BYTES``) and one column strip of the right operand (a tile's width, ``k`` deep)
# stay in this host's 1 MiB L2 while the panel's tiles of that strip run, so each strip comes from
# memory once per panel, not once per tile row. Nothing is packed but a transposed right operand, one
# strip at a time. OpenBLAS packs both operands and scales the result in a pass of its own first.
# Alone, hot, the tiles run 5-21% faster than OpenBLAS on the suite's shapes and on square ones up to
# 1024 (``k`` up to 1536 at ``m`` 512; at 2048 slower); inside programs they make every suite
# program faster (benchmarks/bench_optimizations.py --switches matmul_tiles). Deeper products would
# need ``k`` split into blocks (a strip of ``k`` x width no longer fits beside a panel), so they stay
# on the library: ``TILE_MAX_DEPTH_BYTES``; so do right operands past 4 MiB (512x1024x2048, whose
# 8 KiB row stride puts a strip's rows in few cache sets, ran at or below OpenBLAS's rate).
# Shapes by the host's vector registers: 8 rows x 2 zmm (16 of 32 registers) with AVX-512, 6 rows x
# 2 ymm (12 of 16) without (the classic AVX2 sgemm kernel).
_WIDE = bool(llvm_binding.get_host_cpu_features().get("avx512f", False))
VECTOR_BYTES = 64 if _WIDE else 32
TILE_ROWS = 8 if _WIDE else 6
TILE_VECTORS = 2
TILE_PANEL_BYTES = 512 << 10  # a panel's rows of the left operand (k elements each)
TILE_MAX_DEPTH_BYTES = 4 << 10  # k * itemsize: deeper products go to the library (k 2048 was slower)
TILE_MAX_RIGHT_BYTES = 4 << 20  # k * n * itemsize (the comment above)


def tile_width(itemsize: int) -> int:
    """Columns of a register tile for elements of ``itemsize`` bytes."""
    return TILE_VECTORS * VECTOR_BYTES // itemsize


def tiles_pay(m: int, n: int, k: int, itemsize: int) -> bool:
    """Whether a matmul block of ``m x k`` by ``k x n`` runs on register tiles (``gemm_tiles``): a
    whole tile of rows and columns, ``k`` shallow enough for a strip and a panel to stay in cache,
    and a right operand of at most 4 MiB (bigger ones measured slower than OpenBLAS)."""
    whole = m >= TILE_ROWS and n % tile_width(itemsize) == 0
    return whole and 1 <= k * itemsize <= TILE_MAX_DEPTH_BYTES and k * n * itemsize <= TILE_MAX_RIGHT_BYTES


@intrinsic
def _tile(  # noqa: PLR0913 - the tile's operands
    typingctx: Any,
    a: Any,
    a_at: Any,
    a_rows: Any,
    a_steps: Any,
    b: Any,
    b_at: Any,
    ldb: Any,
    c: Any,
    c_at: Any,
    ldc: Any,
    k: Any,
    alpha: Any,
    beta: Any,
) -> Any:
    """``C = alpha * A @ B + beta * C`` on one tile: ``A[r, s]`` at ``a[a_at + r * a_rows + s *
    a_steps]`` (``TILE_ROWS`` rows, ``k`` columns), ``B[s, :]`` the row segment of ``tile_width``
    elements at ``b[b_at + s * ldb]``, ``C[r, :]`` at ``c[c_at + r * ldc]``; C is not read when
    ``beta`` is 0 (it may hold anything)."""
    dtype = _float_operands(a, b, c)
    if dtype is None:
        return None
    index = types.intp
    sig = types.void(a, index, index, index, b, index, index, c, index, index, index, dtype, dtype)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> None:
        a_, a_at_, a_rows_, a_steps_, b_, b_at_, ldb_, c_, c_at_, ldc_, k_, alpha_, beta_ = args
        scalar = context.get_value_type(dtype)
        lanes = VECTOR_BYTES // (dtype.bitwidth // 8)
        vector = ir.VectorType(scalar, lanes)
        i64 = ir.IntType(64)

        def at(arr_type: Any, arr: Any, offset: Any) -> Any:
            return builder.gep(context.make_array(arr_type)(context, builder, arr).data, [offset])

        def splat(value: Any) -> Any:
            one = builder.insert_element(ir.Constant(vector, ir.Undefined), value, ir.Constant(_ll_int, 0))
            mask = ir.Constant(ir.VectorType(_ll_int, lanes), [0] * lanes)
            return builder.shuffle_vector(one, ir.Constant(vector, ir.Undefined), mask)

        def vector_at(pointer: Any, v: int) -> Any:
            return builder.bitcast(builder.gep(pointer, [ir.Constant(i64, v * lanes)]), vector.as_pointer())

        name = f"llvm.fma.v{lanes}{'f32' if dtype == types.float32 else 'f64'}"
        fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vector, [vector] * 3), name)
        align = dtype.bitwidth // 8
        a_ptr, b_ptr, c_ptr = at(a, a_, a_at_), at(b, b_, b_at_), at(c, c_, c_at_)
        entry = builder.basic_block
        loop, done = builder.append_basic_block("tile_k"), builder.append_basic_block("tile_store")
        builder.branch(loop)
        builder.position_at_end(loop)
        s = builder.phi(i64)
        s.add_incoming(ir.Constant(i64, 0), entry)
        zero = ir.Constant(vector, [0.0] * lanes)
        acc = [[builder.phi(vector) for _ in range(TILE_VECTORS)] for _ in range(TILE_ROWS)]
        for row in acc:
            for value in row:
                value.add_incoming(zero, entry)
        b_row = builder.gep(b_ptr, [builder.mul(s, ldb_)])
        right = [builder.load(vector_at(b_row, v), align=align) for v in range(TILE_VECTORS)]
        a_col = builder.gep(a_ptr, [builder.mul(s, a_steps_)])
        new = []
        for r in range(TILE_ROWS):
            left = splat(builder.load(builder.gep(a_col, [builder.mul(ir.Constant(i64, r), a_rows_)])))
            new.append([builder.call(fma, [left, right[v], acc[r][v]]) for v in range(TILE_VECTORS)])
        step = builder.add(s, ir.Constant(i64, 1))
        s.add_incoming(step, loop)
        for r in range(TILE_ROWS):
            for v in range(TILE_VECTORS):
                acc[r][v].add_incoming(new[r][v], loop)
        builder.cbranch(builder.icmp_signed("<", step, k_), loop, done)
        builder.position_at_end(done)
        scale, keep = splat(alpha_), splat(beta_)
        rows = [builder.gep(c_ptr, [builder.mul(ir.Constant(i64, r), ldc_)]) for r in range(TILE_ROWS)]
        stores = [
            (vector_at(rows[r], v), builder.fmul(scale, new[r][v]))
            for r in range(TILE_ROWS)
            for v in range(TILE_VECTORS)
        ]
        overwrite = builder.fcmp_ordered("==", beta_, ir.Constant(scalar, 0.0))
        with builder.if_else(overwrite) as (plain, accumulate):
            with plain:
                for target, value in stores:
                    builder.store(value, target, align=align)
            with accumulate:
                for target, value in stores:
                    old = builder.load(target, align=align)
                    builder.store(builder.call(fma, [keep, old, value]), target, align=align)
        return context.get_dummy_value()

    return sig, codegen


def _gemm_tiles(  # noqa: PLR0913 - BLAS's signature
    ta: bool,
    tb: bool,
    m: int,
    n: int,
    k: int,
    alpha: Any,
    a: Any,
    a_off: int,
    lda: int,
    b: Any,
    b_off: int,
    ldb: int,
    beta: Any,
    c: Any,
    c_off: int,
    ldc: int,
) -> None:
    """``gemm`` (the module docstring's signature) on register tiles (``_tile``), in panels; a
    transposed right operand is copied to rows one strip at a time. Columns right of the last whole
    tile, then rows below it, go to the library's ``gemm`` (compiled by ``_tiles_form``, like
    ``_gemm_rows``)."""
    a_rows, a_steps = (1, lda) if ta else (lda, 1)
    width = TILE_VECTORS * VECTOR_BYTES // c.itemsize
    whole_rows, whole_cols = m - m % TILE_ROWS, n - n % width
    strip = np.empty(k * width if tb else 0, c.dtype)  # a transposed B's columns j..j+width, as rows
    # Panels of rows (the comment above ``TILE_PANEL_BYTES``); a transposed B's strips are copied
    # once per call, so its panel is every row.
    panel_rows = max(TILE_PANEL_BYTES // max(k * c.itemsize, 1) // TILE_ROWS, 1) * TILE_ROWS
    if tb:
        panel_rows = max(whole_rows, TILE_ROWS)
    for panel in range(0, whole_rows, panel_rows):
        for j in range(0, whole_cols, width):
            if tb:  # B stored n x k: rows j..j+width, read along k, written as k rows of width
                for jj in range(width):
                    row = b_off + (j + jj) * ldb
                    for s in range(k):
                        strip[s * width + jj] = b[row + s]
                right, r_off, r_ld = strip, 0, width
            else:
                right, r_off, r_ld = b, b_off + j, ldb
            for i in range(panel, min(panel + panel_rows, whole_rows), TILE_ROWS):
                at = c_off + i * ldc + j
                _tile(a, a_off + i * a_rows, a_rows, a_steps, right, r_off, r_ld, c, at, ldc, k, alpha, beta)  # type: ignore[call-arg]
    if whole_cols < n:
        b_at = b_off + (whole_cols * ldb if tb else whole_cols)
        rest = n - whole_cols
        gemm(ta, tb, m, rest, k, alpha, a, a_off, lda, b, b_at, ldb, beta, c, c_off + whole_cols, ldc)
    if whole_rows < m and whole_cols > 0:
        a_at, c_at = a_off + whole_rows * a_rows, c_off + whole_rows * ldc
        gemm(ta, tb, m - whole_rows, whole_cols, k, alpha, a, a_at, lda, b, b_off, ldb, beta, c, c_at, ldc)


# Row-block matmuls. A float matmul of a generated module is one call of these functions from the
# driver (through the kernel table, like a kernel): every size, stride and offset is an argument, so
# they are compiled once per machine (Numba's cache) instead of once per matmul shape of every
# program, each shape a parallel kernel of its own (the transformer block had 12). The parallel
# forms spread batch elements and row blocks over Numba's threads (``numba.prange``), the serial
# forms run them on the calling thread. ``x``, ``y``, ``o`` are the flat buffers of the operands and
# the result, ``c`` the flat buffer copied into ``o`` first when ``copy`` (an accumulation epilogue
# not planned in place); ``p`` holds the integers of ``GEMM_ROWS_PARAMS`` and ``s`` is ``(alpha,
# beta)`` (constant arrays of the generated module: a few arguments type and lower faster than 30).
# Batch element ``t``'s offset into an operand is ``((t // inner) % outer) * outer_stride + (t %
# inner) * inner_stride`` (two batch axes at most, ``fuse.MAX_VIEW_BATCH_AXES``); ``x_step`` and
# ``o_step`` are the steps from one row of the block to the next.
GEMM_ROWS = ("gemm_rows", "gemm_rows_serial", "gemm_rows_tiles", "gemm_rows_block")  # a module binds these
GEMM_ROWS_PARAMS = (
    *("copy", "ta", "tb", "m", "n", "k", "lda", "ldb", "ldc", "x_step", "o_step", "parts", "blocks"),
    *("xb0", "xb1", "xb2", "xb3", "yb0", "yb1", "yb2", "yb3", "ob0", "ob1", "ob2", "ob3"),
)
_P = {name: i for i, name in enumerate(GEMM_ROWS_PARAMS)}
_COPY, _TA, _TB, _M, _N, _K, _LDA, _LDB, _LDC, _XSTEP, _OSTEP, _PARTS, _BLOCKS, _XB, _YB, _OB = (
    *(_P[n] for n in ("copy", "ta", "tb", "m", "n", "k", "lda", "ldb", "ldc", "x_step", "o_step")),
    *(_P[n] for n in ("parts", "blocks", "xb0", "yb0", "ob0")),
)


@numba.njit(inline="always")
def _batch_offset(t: int, p: Any, at: int) -> int:
    """Batch element ``t``'s offset into an operand whose batch layout is ``p[at:at + 4]``."""
    return ((t // p[at + 2]) % p[at]) * p[at + 1] + (t % p[at + 2]) * p[at + 3]


@numba.njit(inline="always")
def _block(q: int, p: Any) -> tuple[int, int, int, int, int]:
    """Rows ``[i0, i1)`` of block ``q`` (of batch element ``q // parts``) and the three operands'
    offsets there."""
    parts, m = p[_PARTS], p[_M]
    t = q // parts
    i0 = (q - t * parts) * m // parts
    i1 = (q - t * parts + 1) * m // parts
    x_at = _batch_offset(t, p, _XB) + i0 * p[_XSTEP]
    o_at = _batch_offset(t, p, _OB) + i0 * p[_OSTEP]
    return i0, i1, x_at, _batch_offset(t, p, _YB), o_at


@intrinsic
def _as_element(typingctx: Any, array: Any, value: Any) -> Any:
    """``value`` converted to ``array``'s element type."""
    if not isinstance(array, types.Array) or not isinstance(value, types.Number):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return context.cast(builder, args[1], value, array.dtype)

    return array.dtype(array, value), codegen


@numba.njit(inline="always")
def _scales(o: Any, s: Any) -> tuple[Any, Any]:
    """``(alpha, beta)`` in ``o``'s element type."""
    return _as_element(o, s[0]), _as_element(o, s[1])  # type: ignore[call-arg]


@numba.njit(inline="always")
def _copy_in(o: Any, c: Any, p: Any) -> None:
    if p[_COPY]:
        for q in range(c.size):
            o[q] = c[q]


def _gemm_rows(x: Any, y: Any, o: Any, c: Any, p: Any, s: Any) -> None:
    """The row-block matmul (the comment above) on Numba's threads; compiled in parallel forms by
    ``_rows_form``."""
    _copy_in(o, c, p)
    alpha, beta, ta, tb = *_scales(o, s), p[_TA] != 0, p[_TB] != 0
    blocks, next_block = p[_BLOCKS], np.zeros(1, np.int64)
    # each thread claims blocks until none is left (``runtime/parallel.py``): a thread the OS runs
    # late leaves its block to the others (one common counter: a block is one gemm call, whichever
    # thread runs it)
    threads: int = _iget_num_threads()  # type: ignore[call-arg]
    for _ in numba.prange(min(blocks, threads)):
        q = claim_next(next_block, 0)
        while q < blocks:
            i0, i1, xo, yo, oo = _block(q, p)
            gemm(ta, tb, i1 - i0, p[_N], p[_K], alpha, x, xo, p[_LDA], y, yo, p[_LDB], beta, o, oo, p[_LDC])
            q = claim_next(next_block, 0)


def _gemm_rows_serial(x: Any, y: Any, o: Any, c: Any, p: Any, s: Any) -> None:
    """``_gemm_rows`` on the calling thread: its blocks in order, as its threads would claim them
    were there one. A form of its own: without the threads' counter and claims it compiles in about
    0.35 instead of 0.55 s on the 2-core CI machine (a cold first call of a small program pays it)."""
    _copy_in(o, c, p)
    alpha, beta, ta, tb = *_scales(o, s), p[_TA] != 0, p[_TB] != 0
    for q in range(p[_BLOCKS]):
        i0, i1, xo, yo, oo = _block(q, p)
        gemm(ta, tb, i1 - i0, p[_N], p[_K], alpha, x, xo, p[_LDA], y, yo, p[_LDB], beta, o, oo, p[_LDC])


def _gemm_rows_block(x: Any, y: Any, o: Any, c: Any, p: Any, s: Any, ch: int, chunks: int) -> None:
    """Rows ``[ch * m // chunks, (ch + 1) * m // chunks)`` of a matmul of one batch element (the
    parameters of ``_gemm_rows``; ``copy`` must be 0), on the calling thread: one step of a row-block
    region (``compiler/codegen/cpu.py``), which runs every operation of the region on a block of rows
    before the next block."""
    alpha, beta = _scales(o, s)
    i0 = ch * p[_M] // chunks
    i1 = (ch + 1) * p[_M] // chunks
    ta, tb = p[_TA] != 0, p[_TB] != 0
    x_at, o_at = i0 * p[_XSTEP], i0 * p[_OSTEP]
    gemm(ta, tb, i1 - i0, p[_N], p[_K], alpha, x, x_at, p[_LDA], y, 0, p[_LDB], beta, o, o_at, p[_LDC])


def _with_library(function: Any, name: str, library_gemm: Any) -> Any:
    """``function``'s code as a new function ``name`` whose ``gemm`` is ``library_gemm``: one Python
    function per kind, so its forms cannot drift apart. Each has its own name, hence its own entry
    in Numba's cache."""
    made = types_module.FunctionType(function.__code__, dict(globals(), gemm=library_gemm), name)
    made.__qualname__ = name
    return made


def _tiles_form(name: str, library_gemm: Any) -> Any:
    """``_gemm_tiles`` with ``library_gemm`` for what is left beside the tiles."""
    return numba.njit(nogil=True, error_model="numpy")(_with_library(_gemm_tiles, name, library_gemm))


def _rows_form(name: str, block_gemm: Any, parallel: bool) -> Any:
    """``_gemm_rows`` (``parallel``: on Numba's threads) or ``_gemm_rows_serial`` compiled as
    ``name``, calling ``block_gemm`` (a library's, or the tiles) for ``gemm``."""
    function = _with_library(_gemm_rows if parallel else _gemm_rows_serial, name, block_gemm)
    return numba.njit(cache=True, nogil=True, error_model="numpy", parallel=parallel)(function)


# The tiles are forms of their own, which a module calls where they pay: a module without such a
# matmul never compiles them (``gemm_tiles`` more than doubles the compile time of a form).
gemm_tiles = _tiles_form("gemm_tiles", gemm)
gemm_tiles_mkl = _tiles_form("gemm_tiles_mkl", gemm_mkl)
gemm_rows = _rows_form("gemm_rows", gemm, parallel=True)
gemm_rows_serial = _rows_form("gemm_rows_serial", gemm, parallel=False)
gemm_rows_mkl = _rows_form("gemm_rows_mkl", gemm_mkl, parallel=True)
gemm_rows_mkl_serial = _rows_form("gemm_rows_mkl_serial", gemm_mkl, parallel=False)
gemm_rows_tiles = _rows_form("gemm_rows_tiles", gemm_tiles, parallel=True)  # split matmuls only
gemm_rows_tiles_mkl = _rows_form("gemm_rows_tiles_mkl", gemm_tiles_mkl, parallel=True)
gemm_rows_block = numba.njit(cache=True, nogil=True, error_model="numpy")(
    _with_library(_gemm_rows_block, "gemm_rows_block", gemm_tiles)
)
gemm_rows_block_mkl = numba.njit(cache=True, nogil=True, error_model="numpy")(
    _with_library(_gemm_rows_block, "gemm_rows_block_mkl", gemm_tiles_mkl)
)


def gemm_rows_python(x: Any, y: Any, o: Any, c: Any, p: Any, s: Any) -> None:
    """The row-block matmul for modules run as plain Python (``NUMBA_DISABLE_JIT``), with NumPy."""
    if p[_COPY]:
        o[: c.size] = c
    alpha, beta = o.dtype.type(s[0]), o.dtype.type(s[1])
    block = getattr(_block, "py_func", _block)
    for q in range(p[_BLOCKS]):
        i0, i1, xo, yo, oo = block(q, p)
        n, k, lda, ldb, ldc = p[_N], p[_K], p[_LDA], p[_LDB], p[_LDC]
        _gemm_python(
            bool(p[_TA]), bool(p[_TB]), i1 - i0, n, k, alpha, x, xo, lda, y, yo, ldb, beta, o, oo, ldc
        )


def gemm_rows_functions(library: str = "openblas") -> tuple[Any, Any, Any, Any]:
    """The row-block matmuls a generated module binds for ``library`` (the module names it, so its
    text, and with it its cache entry, differ by library): parallel and serial on the library's
    gemm, parallel on the tiles (the library's gemm for what is left beside them), and one block of
    rows on the tiles; NumPy when Numba's JIT is off (where modules have no row-block regions)."""
    if numba.config.DISABLE_JIT:  # type: ignore[attr-defined]
        return (gemm_rows_python,) * 4
    if library == "mkl":
        _require_mkl()
        return gemm_rows_mkl, gemm_rows_mkl_serial, gemm_rows_tiles_mkl, gemm_rows_block_mkl
    return gemm_rows, gemm_rows_serial, gemm_rows_tiles, gemm_rows_block
