"""The CPU backend's kernel record, its speed switches and the facts its writers share."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numba

from compiler.ir.types import DType
from compiler.kernel.ir import KernelIR, Stmt


@dataclass(frozen=True)
class CpuSchedule:
    """The CPU kernels' speed choices, from ``Options``' fields of the same names (``CPU_SWITCHES``
    in ``compiler/compilation.py``); tests switch each off and compare with the plain form
    (``tests/test_perf_paths.py``):

    - "reassoc_sums": float sum reductions accumulate with ``fastmath={"reassoc"}`` so LLVM vectorizes
      them (partial sums per vector lane: the result differs from serial order within rounding);
    - "chunked_numpy": NumPy-assisted kernels run in cache-sized chunks of rows (``arraylevel.py``).
      (Spreading the chunks over a thread pool was tried: with BLAS and Numba threads on 2 cores it
      made the MLP step 4x slower, so the NumPy kernels stay on the calling thread.)
    - "vector_math": float32 exp/tanh/log/logistic lower to the branch-free polynomials of
      ``compiler/prims/vecmath.py``, which LLVM vectorizes (off: ``math.exp`` etc., one libm call per
      element, and big groups holding one go to NumPy);
    - "split_matmuls": float matmuls call BLAS gemm per batch element and row block, spread over
      Numba's threads, with SciPy's BLAS on one thread (``runtime/blas.py``; off: one gemm call per batch
      element with BLAS's own threads);
    - "split_reductions": big reductions over axis 0 that keep other axes run in fixed chunks of axis 0
      in parallel, into partial results combined in order (off: one serial loop nest);
    - "keyed_minmax": float max/min reductions reduce order-preserving integer keys (vectorized ``smax``;
      ``vecmath.max_key_f32``) instead of a NaN-aware float compare-and-select loop or NumPy;
    - "matmul_tiles": float matmuls split over the threads run on dslc's register tiles where they
      pay (``runtime.blas.tiles_pay``; off: the library's gemm);
    - "row_blocks": the ``regions`` pass runs kernels that read row ``i`` only to write row ``i``
      block of rows by block, their own buffers one block per thread (``regions.py``; off: none);
    - "shared_kernels": kernels equal up to their buffers' names are one function (an MLP's layers of
      one shape, forward and backward), so Numba compiles each once (off: one function per kernel);
    - "runtime_parallel": a kernel with a parallel loop is a chunk function and a plain kernel that
      runs it on Numba's threads through ``runtime.parallel.parallel_for`` (compiled once per machine),
      so Numba's parallel lowering is not repeated per kernel (off: ``parallel=True`` kernels);
    - "fused_multiply_add": the polynomial steps of the "vector_math" helpers are multiply-adds LLVM
      may fuse into one FMA instruction (``runtime/intrinsics.py``; off: a multiply and an add).

    (Row fusion and computing a band's transcendentals once are the rows pass's: ``Options.row_fusion``
    and ``Options.row_compute_once``.)
    """

    runtime_parallel: bool = True
    shared_kernels: bool = True
    reassoc_sums: bool = True
    chunked_numpy: bool = True
    vector_math: bool = True
    fused_multiply_add: bool = True
    keyed_minmax: bool = True
    split_matmuls: bool = True
    split_reductions: bool = True
    matmul_tiles: bool = True
    row_blocks: bool = True

    @staticmethod
    def of(options: Any) -> CpuSchedule:
        """The schedule ``options`` (a ``compiler.compilation.Options``) asks for."""
        return CpuSchedule(**{name: getattr(options, name) for name in CpuSchedule.__dataclass_fields__})


@dataclass(frozen=True)
class Scratch:
    """An array a kernel needs only while it runs (a band's row per chunk, partial results per
    chunk, a wider accumulator), of a shape known at compile time: a parameter of the kernel, which
    the driver passes as ``name``, a view of the arena at ``offset`` (the ``scratch`` pass places it
    in the memory plan, like a value live while the kernel runs)."""

    name: str  # the driver's name of the view (the kernel's own name of it, prefixed with the kernel's)
    shape: tuple[int, ...]
    dtype: DType
    offset: int = -1  # in the arena (of the program the kernel belongs to), once placed

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


@dataclass
class Chunk:
    """A directly-run parallel kernel's chunk function, as kernel IR (``cpu_parallel``): chunk ``ch``
    of ``chunks`` runs ``body`` (the views and loop of one chunk) over ``frame``, the arrays the
    driver passes (the kernel's arguments, its scratch among them). ``form``: ``"flat"`` (a flat loop over
    ``n`` elements, its views sliced to the chunk), ``"rows"`` (a loop ``var`` over rows
    ``ch * n // chunks`` to the next chunk's, a band's or a loop nest's outer loop) or ``"chunks"``
    (an iteration of a loop over chunks: partial results)."""

    form: str
    n: int
    chunks: int
    var: str
    frame: list[str]
    body: list[Stmt]


@dataclass
class Kernel:
    name: str
    args: list[str]  # what the driver passes: its buffers' names, inputs then outputs (and constants)
    text: str
    objmode: bool = False  # a plain Python (NumPy) kernel: the driver calls it in object mode
    # The argument types (``runtime.precompile.KernelSignature``): set by the writer of a call of a
    # runtime function (``runtime.blas.gemm_rows``), else by generate_cpu from the buffers' types.
    signature: list[tuple[str, int | None]] | None = None
    # Table slots whose addresses the driver passes after ``args`` (a parallel kernel's chunk
    # function and ``runtime.parallel.parallel_for``: ``cpu_parallel``).
    calls: list[tuple[str, list[tuple[str, int | None]]]] = field(default_factory=list)
    # A parallel kernel with nothing to do after its loop: its text is the chunk function alone
    # (``chunk``); the driver fills the frame with ``args`` and calls ``parallel_for`` for
    # ``direct`` chunks.
    direct: str | None = None
    # The kernel's scratch, views of the arena the driver passes among ``args`` (a region's: its
    # members' scratch, which its setup lines put in their frames).
    scratch: list[Scratch] = field(default_factory=list)
    # Driver lines run before and after the call (a row-block region's frames: ``cpu_regions``).
    setup: list[str] = field(default_factory=list)
    teardown: list[str] = field(default_factory=list)
    ir: KernelIR | None = None  # the kernel as kernel IR (None: a NumPy kernel, a runtime call)
    chunk: Chunk | None = None  # a directly-run kernel's chunk function
    key: str = ""  # its text under a name of no kernel: equal keys, one function (``shared_kernels``)


def jit_decorator(parallel: bool = False, nogil: bool = True, reassoc: bool = False) -> str:
    extra = ", parallel=True" if parallel else ""
    extra += ', fastmath={"reassoc"}' if reassoc else ""
    return f'@numba.njit(cache=True, nogil={nogil}, error_model="numpy"{extra})'


def numba_threads() -> int:
    return int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
