"""Executing compiled programs: arenas, the on-disk module cache, call-time checks.

``runtime`` never imports ``compiler`` or ``dsl``.
"""

import ctypes
import os
import sys


def native_blas_threads() -> bool:
    """``DSL_BLAS_THREADS=native``: BLAS keeps its own threads (runtime/blas.py does not split)."""
    return os.environ.get("DSL_BLAS_THREADS", "").strip().lower() == "native"


# How long Numba's OpenMP threads (libgomp) busy-wait for the next parallel loop before they sleep,
# in spins (``GOMP_SPINCOUNT``). libgomp's default, 300,000 spins, kept every waiting thread on its
# core for milliseconds after each loop: on a machine whose cores other processes want, the waiting
# threads took the time slices the working ones needed (beside two busy processes on 2 cores the
# MLP training step took 4.7-20x its idle time, the transformer block 13-23x; with 1,000 spins and
# the claimed chunks of ``runtime/parallel.py``, 1.7-2.2x and 1.7-2.0x; idle the same within noise:
# ``python benchmarks/bench_contention.py``, results/contention.md). libgomp reads it once, when
# Numba's OpenMP layer loads it, so it is set on importing ``runtime``; child processes inherit it.
# A value the user set (``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY``) is kept. With
# ``DSL_BLAS_THREADS=native`` BLAS keeps its own threads, which any spinning starves (a 3-layer MLP
# forward 44 ms -> 25 ms with passive waiting): that mode waits passively.
GOMP_SPINCOUNT = "1000"


def _set_wait_policy() -> None:
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return
    if native_blas_threads():
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    else:
        os.environ["GOMP_SPINCOUNT"] = GOMP_SPINCOUNT


_set_wait_policy()


def _keep_freed_memory() -> None:
    """glibc returns every freed block over 128 KiB-32 MiB to the kernel (``munmap``, heap trim), so
    a program's fresh per-call result arrays page-fault their way in again on every call: the
    elementwise chain over 10^7 floats (a 40 MB result) took 4-50 ms per call depending on whether
    the kernel found huge pages, 2.1 ms with the freed memory kept (measured on the 2-core CI
    machine). Up to 1 GiB per block is served from, and kept in, the heap instead. The process's RSS
    then does not shrink when big arrays are freed (as with PyTorch's caching allocator);
    ``DSL_MALLOC_TUNING=0`` keeps glibc's defaults. Not glibc: nothing to do."""
    if os.environ.get("DSL_MALLOC_TUNING", "1").strip() == "0" or not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    mallopt(m_mmap_threshold, 1 << 30)
    mallopt(m_trim_threshold, 1 << 30)


_keep_freed_memory()


# LLVM's loop peeling (the LLVM 22 of llvmlite 0.50, built with assertions) aborts the whole process
# when it peels the last iterations of a loop more than one at a time (``LoopPeel.cpp``'s assertion
# "when peeling the last iteration, the loop must be supported and can only peel a single
# iteration"). A concatenation of pieces that are themselves concatenations (``pad(x, (5, 11),
# "reflect", reflect_type="odd")`` of 2 elements: selects comparing the loop index against several
# bounds) made it do that. Peeling at most one iteration is what the assertion allows;
# ``tests/test_llvm_peel.py`` compiles the kernel that aborted. An LLVM option is the process's:
# Numba code of the user's own compiled after this gets the same limit.
LLVM_PEEL_MAX_COUNT = 1


def _limit_llvm_peeling() -> None:
    from llvmlite import binding

    binding.set_option("dslc", f"-unroll-peel-max-count={LLVM_PEEL_MAX_COUNT}")


_limit_llvm_peeling()
