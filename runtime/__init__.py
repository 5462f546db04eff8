"""Executing compiled programs: arenas, the on-disk module cache, call-time checks.

``runtime`` never imports ``compiler`` or ``dsl``.
"""

import ctypes
import os
import sys


# Numba's OpenMP workers spin briefly after each parallel kernel (libgomp's default), so the next
# kernel of the same call starts in ~4 us instead of ~45 us for a futex wake-up (measured on the
# 2-core CI machine; the MLP training step 15.1 -> 12.9 ms, softmax + cross-entropy 4.8 -> 3.8 ms).
# Matmul kernels run BLAS inside those same workers (runtime/blas.py), so no second thread pool
# competes with the spinning. With ``DSL_BLAS_THREADS=native`` BLAS keeps its own threads, and then
# spinning workers starve them (a 3-layer MLP forward 44 ms -> 25 ms with passive waiting): that
# mode waits passively. A value the user set is kept.
def native_blas_threads() -> bool:
    """``DSL_BLAS_THREADS=native``: BLAS keeps its own threads (runtime/blas.py does not split)."""
    return os.environ.get("DSL_BLAS_THREADS", "").strip().lower() == "native"


if native_blas_threads():
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


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
