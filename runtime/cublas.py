"""cuBLAS for the float matmuls of CUDA programs, through ``ctypes`` (no binding package).

A generated CUDA module launches every matmul through the launcher that ``matmul_launcher`` wraps
around its own shared-memory kernel (``compiler/kernel/cuda/matmul.py``), with the kernel's argument list:
operand buffers, ``alpha``/``beta``, sizes, the operands' row and column strides and batch walks.
Where cuBLAS can do that matmul it runs ``cublas<S|D>gemm`` (``...StridedBatched`` for batches) on
the program's stream instead; otherwise the kernel runs. cuBLAS is used when:

- a GPU is there (never under the CUDA simulator) and ``libcublas`` loads (``pip install
  'dslc[cuda]'`` brings it; found by ``cuda.pathfinder``), and ``DSL_CUDA_BLAS`` is not ``0``;
- the dtype is float32 or float64, in full precision: cuBLAS's default math. A program compiled with
  ``precision="tf32"`` runs its float32 matmuls in ``CUBLAS_TF32_TENSOR_OP_MATH`` instead (the
  handle's math mode is set per call, as its stream is);
- each operand and the result is a BLAS matrix (one of its two strides is 1); the batch walks
  are one stride per operand, or one common inner count;
- the accumulated value ``cin`` is the result's own buffer, or ``beta`` is 0 (cuBLAS's C is read
  and written in place), or a buffer of the result's size, copied into the result first (an SGD
  step's update of a weight the caller keeps: ``w - lr * x.T @ g`` into a new array);
- sizes and leading dimensions fit the 32-bit API.

cuBLAS is column-major: a row-major ``m x n`` result with row stride ``ld`` is its ``n x m``
transpose in column-major order, so ``O = A @ B`` is computed as ``O^T = B^T @ A^T``; a result
whose rows are contiguous instead (written through a transposing epilogue: an attention gradient
laid out by heads) is computed as it is, ``O = A @ B`` in column-major terms.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from runtime.cuda_executable import device_address
from runtime.devices import cuda_available

OP_N, OP_T = 0, 1
MATH_MODES = {"highest": 0, "tf32": 3}  # CUBLAS_DEFAULT_MATH, CUBLAS_TF32_TENSOR_OP_MATH
INT_MAX = 2**31 - 1
_P, _I, _L = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
_SCALAR = {np.dtype(np.float32): ("S", ctypes.c_float), np.dtype(np.float64): ("D", ctypes.c_double)}


class CublasError(RuntimeError):
    """A cuBLAS call returned an error status."""


@functools.cache
def _library() -> Any:
    """libcublas with its functions typed, or ``None`` where it does not load."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        lib = ctypes.CDLL(load_nvidia_dynamic_lib("cublas").abs_path)
    except Exception:
        try:
            lib = ctypes.CDLL("libcublas.so")
        except OSError:
            return None
    lib.cublasCreate_v2.argtypes = [ctypes.POINTER(_P)]
    lib.cublasSetStream_v2.argtypes = [_P, _P]
    lib.cublasSetWorkspace_v2.argtypes = [_P, _P, ctypes.c_size_t]
    lib.cublasSetMathMode.argtypes = [_P, _I]
    for letter, scalar in _SCALAR.values():
        ptr = ctypes.POINTER(scalar)
        plain = getattr(lib, f"cublas{letter}gemm_v2")
        plain.argtypes = [_P, _I, _I, _I, _I, _I, ptr, _P, _I, _P, _I, ptr, _P, _I]
        batched = getattr(lib, f"cublas{letter}gemmStridedBatched")
        batched.argtypes = [_P, _I, _I, _I, _I, _I, ptr, _P, _I, _L, _P, _I, _L, ptr, _P, _I, _L, _I]
    return lib


def available() -> bool:
    """Whether generated CUDA modules run their float matmuls on cuBLAS (the module docstring)."""
    if os.environ.get("DSL_CUDA_BLAS", "1") == "0" or not cuda_available():
        return False
    return _library() is not None


@functools.cache
def _handle() -> Any:
    """The process's cuBLAS handle (created in numba's primary context). Its stream is switched
    only when a call comes from another executable's stream (``_LOCK`` held)."""
    from numba import cuda

    cuda.current_context()  # numba's primary context is current before cuBLAS looks for one
    handle = _P()
    _check(_library().cublasCreate_v2(ctypes.byref(handle)), "cublasCreate")
    return handle


_LOCK = threading.Lock()
_stream_set: list[int | None] = [None]  # the stream the handle works on now
_math_set: list[int | None] = [None]  # the handle's math mode now (``MATH_MODES``)
# Workspaces of streams being captured into CUDA graphs (runtime/cuda_graphs.py), by stream handle: a
# graph must own the memory its nodes use, and cuBLAS's own per-stream workspace would be allocated
# inside the capture. Setting the handle's stream sets its workspace back to cuBLAS's own.
_workspaces: dict[int, tuple[int, int]] = {}


def capture_workspace(stream: int, workspace: int | None, nbytes: int = 0) -> None:
    """cuBLAS calls on ``stream`` use ``nbytes`` of device memory at ``workspace`` from now on
    (``None``: cuBLAS's own again)."""
    with _LOCK:
        if workspace is None:
            _workspaces.pop(stream, None)
        else:
            _workspaces[stream] = (workspace, nbytes)
        _stream_set[0] = None  # the next call sets the stream, and the workspace with it


def _check(status: int, what: str) -> None:
    if status != 0:
        raise CublasError(f"{what} failed with cuBLAS status {status}")


def layout(rows: int, cols: int, s_rows: int, s_cols: int) -> tuple[int, int] | None:
    """``(op, ld)`` of a row-major-indexed ``rows x cols`` matrix (element ``(i, j)`` at ``i * s_rows +
    j * s_cols``) passed to cuBLAS as its column-major transpose, or ``None`` if it is no BLAS
    matrix (neither stride 1)."""
    if (s_cols == 1 or cols == 1) and (rows == 1 or s_rows >= max(cols, 1)):
        return OP_N, s_rows if rows > 1 else max(cols, 1)
    if (s_rows == 1 or rows == 1) and (cols == 1 or s_cols >= max(rows, 1)):
        return OP_T, s_cols if cols > 1 else max(rows, 1)
    return None


def batch_plan(nb: int, walks: list[tuple[int, int, int]]) -> tuple[int, int, list[tuple[int, int]]] | None:
    """Batch element ``t`` of an operand walked by ``(inner, outer, inner_stride)`` starts at ``(t //
    inner) * outer + (t % inner) * inner_stride``. As ``groups`` runs of ``count`` strided-batched
    elements: ``(groups, count, [(group_step, stride) per operand])``, or ``None`` where two operands
    need different runs. Where a walk is not linear (a batch of (batch, head) pairs over a
    (batch, time, head, dim) layout), a run is either the inner axis at one outer position or the
    outer axis at one inner position, whichever makes fewer runs: 4 calls of 16 heads' products
    rather than 16 calls of 4 (a cuBLAS call each)."""

    def linear(inner: int, outer: int, s: int) -> int | None:  # the stride where offset = t * stride
        if inner >= nb or outer == inner * s:
            return s
        return outer if inner == 1 else None

    inners = {inner for inner, outer, s in walks if linear(inner, outer, s) is None}
    if len(inners) > 1:
        return None
    count = inners.pop() if inners else nb
    if nb % count:
        return None
    across = count < nb // count  # a run per inner position, over the outer axis
    steps = []
    for inner, outer, s in walks:
        stride = linear(inner, outer, s)
        run = (outer, s) if stride is None else (count * stride, stride)  # (group step, stride)
        steps.append(run[::-1] if across else run)
    return (count, nb // count, steps) if across else (nb // count, count, steps)


class Call(NamedTuple):
    """One cuBLAS gemm in cuBLAS's own (column-major) terms; offsets and strides in elements:
    ``C = alpha * op(A) @ op(B) + beta * C`` for ``batch`` elements ``stride`` apart."""

    trans_a: int
    trans_b: int
    m: int
    n: int
    k: int
    a_off: int
    lda: int
    a_stride: int
    b_off: int
    ldb: int
    b_stride: int
    c_off: int
    ldc: int
    c_stride: int
    batch: int
    swapped: bool = True  # cuBLAS's A is our ``b`` (``O^T = B^T @ A^T``), else our ``a`` (``O = A @ B``)


def gemm_calls(*sizes: int) -> list[Call] | None:
    """The cuBLAS calls doing a matmul given as the generated kernel's size parameters (``nb, m, k,
    n``, the operands' strides and batch walks: ``compiler/kernel/cuda/matmul.py``), or ``None`` where
    cuBLAS cannot (no BLAS matrix, or batch walks that no run of strided batches covers)."""
    nb, m, k, n, sa_i, sa_p, sb_p, sb_j, *rest = sizes
    a_walk, b_walk, (so_i, so_j), o_walk = rest[0:3], rest[3:6], rest[6:8], rest[8:11]
    lay_a, lay_b, lay_o = layout(m, k, sa_i, sa_p), layout(k, n, sb_p, sb_j), layout(m, n, so_i, so_j)
    batches = batch_plan(nb, [tuple(a_walk), tuple(b_walk), tuple(o_walk)])  # type: ignore[list-item]
    if lay_a is None or lay_b is None or lay_o is None or batches is None:
        return None
    (op_a, lda), (op_b, ldb), (op_o, ldo) = lay_a, lay_b, lay_o
    if max(m, n, k, lda, ldb, ldo) > INT_MAX:  # the 32-bit API's sizes: the kernel takes 64-bit ones
        return None
    groups, count, ((a_step, a_s), (b_step, b_s), (o_step, o_s)) = batches
    if op_o == OP_N:  # O^T = B^T @ A^T: our B is cuBLAS's A
        return [
            Call(op_b, op_a, n, m, k, g * b_step, ldb, b_s, g * a_step, lda, a_s, g * o_step, ldo, o_s, count)
            for g in range(groups)
        ]
    flip = {OP_N: OP_T, OP_T: OP_N}  # the column-major reading of each operand is transposed back
    return [  # O = A @ B, the result column-major already: our A is cuBLAS's A
        Call(
            flip[op_a],
            flip[op_b],
            m,
            n,
            k,
            *(g * a_step, lda, a_s, g * b_step, ldb, b_s, g * o_step, ldo, o_s),
            count,
            swapped=False,
        )
        for g in range(groups)
    ]


def matmul_launcher(
    kernel: Callable[..., Any], stream: Any, precision: str = "highest"
) -> Callable[..., Any]:
    """``kernel`` (a configured launch of the generated matmul kernel) or, where cuBLAS can do the
    matmul, cuBLAS on ``stream`` in ``precision`` (``MATH_MODES``: float32 products in TF32 or not);
    the same arguments either way. A launcher belongs to one launch site of a generated driver, whose
    sizes, ``beta`` and buffers (``cin`` the result's own or not) are the same at every call: the
    first call chooses."""
    math = MATH_MODES[precision]
    if not available():
        return kernel
    chosen: list[Callable[..., None]] = []

    def launch(a: Any, b: Any, o: Any, cin: Any, alpha: Any, beta: Any, *sizes: int) -> None:
        if not chosen:
            dtype = np.dtype(o.dtype)
            same = cin is o or device_address(cin) == device_address(o)
            # cuBLAS reads C where it writes it: an accumulated buffer of its own (an SGD step's
            # weight, w - lr * x.T @ g into a new array) is copied into the result first, where the
            # matmul writes the whole result (nb * m * n elements) and the buffer is as large
            whole = sizes[0] * sizes[1] * sizes[3] == o.size == cin.size
            copy = not same and beta != 0 and whole and np.dtype(cin.dtype) == dtype
            calls = gemm_calls(*sizes) if (same or beta == 0 or copy) and dtype in _SCALAR else None
            copy_on = stream if copy else None
            chosen.append(kernel if calls is None else _runner(dtype, calls, int(stream), math, copy_on))
        chosen[0](a, b, o, cin, alpha, beta, *sizes)

    return launch


def _runner(
    dtype: np.dtype, calls: list[Call], stream: int, math: int, copy_on: Any = None
) -> Callable[..., None]:
    """Runs ``calls`` on a matmul's buffers (``Call.swapped``: our ``b`` is cuBLAS's A and our ``a``
    its B, else the other way round) on ``stream`` in math mode ``math``, taking the kernel's
    arguments (the sizes are in ``calls``). ``cin`` is ``o``, or with ``copy_on`` (the Numba stream
    of ``stream``) a buffer of ``o``'s size copied into ``o`` first, on that stream."""
    letter, scalar = _SCALAR[dtype]
    lib = _library()
    plain, batched = getattr(lib, f"cublas{letter}gemm_v2"), getattr(lib, f"cublas{letter}gemmStridedBatched")
    size, handle = dtype.itemsize, _handle()

    def run(a: Any, b: Any, o: Any, cin: Any, alpha: Any, beta: Any, *sizes: int) -> None:
        if copy_on is not None:
            o.copy_to_device(cin, stream=copy_on)
        ours_a, ours_b, po = device_address(a), device_address(b), device_address(o)
        al, be = ctypes.byref(scalar(alpha)), ctypes.byref(scalar(beta))
        with _LOCK:
            if _stream_set[0] != stream:
                _check(lib.cublasSetStream_v2(handle, stream), "cublasSetStream")
                if stream in _workspaces:
                    _check(lib.cublasSetWorkspace_v2(handle, *_workspaces[stream]), "cublasSetWorkspace")
                _stream_set[0] = stream
            if _math_set[0] != math:
                _check(lib.cublasSetMathMode(handle, math), "cublasSetMathMode")
                _math_set[0] = math
            for c in calls:
                first, second = (ours_b, ours_a) if c.swapped else (ours_a, ours_b)  # cuBLAS's A, B
                xa, xb, xc = first + c.a_off * size, second + c.b_off * size, po + c.c_off * size
                head = (handle, c.trans_a, c.trans_b, c.m, c.n, c.k, al)
                if c.batch == 1:
                    status = plain(*head, xa, c.lda, xb, c.ldb, be, xc, c.ldc)
                else:
                    strided = (xa, c.lda, c.a_stride, xb, c.ldb, c.b_stride, be, xc, c.ldc, c.c_stride)
                    status = batched(*head, *strided, c.batch)
                _check(status, f"cublas{letter}gemm")

    return run
