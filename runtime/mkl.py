"""Intel MKL for the matmuls of generated CPU kernels, on request: ``DSL_BLAS=mkl`` with ``pip
install 'dslc[mkl]'`` (``runtime/blas.vendor``).

Matmul kernels call BLAS on blocks of rows spread over Numba's threads, one BLAS call per thread
(``runtime/blas.py``). On the 2-core CI machine (AMD EPYC, AVX2) MKL's single-threaded ``sgemm``
was as fast or faster than SciPy's OpenBLAS on every matmul shape of the benchmark suite, split the
same way, on most matmul shapes of the benchmark suite (median time: up to 12%, and 41% on the
weight-gradient shape ``x.T @ g`` of 128x4096x128), slower on one (512x256x768: 8%), and whole
programs: the MLP step and transformer block 4-10% faster, the second derivative slower in 3 of 4
runs (benchmarks/results/notes.md, MKL against OpenBLAS). So it is not the default;
also, setting MKL's threading layer is process-wide, and a NumPy built on MKL in the same process
would then run sequentially too.

MKL is loaded once per process from ``libmkl_rt`` (the single dynamic library of the ``mkl`` wheel)
with its sequential threading layer: every call runs on the calling thread, and Numba's threads do
the splitting, as with OpenBLAS. The addresses of ``cblas_sgemm`` and ``cblas_dgemm`` are given to
LLVM under fixed names (``SYMBOLS``), so modules compiled in one process and loaded from Numba's
cache in another find them by name.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading

from llvmlite import binding as llvm

SYMBOLS = {"s": "dslc_mkl_cblas_sgemm", "d": "dslc_mkl_cblas_dgemm"}
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112  # CBLAS_LAYOUT and CBLAS_TRANSPOSE values
_SEQUENTIAL = 1  # MKL_THREADING_SEQUENTIAL

_lock = threading.Lock()
_loaded: bool | None = None


def available() -> bool:
    """Whether MKL is loaded in this process (tried once), its gemm registered for generated code."""
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = _load()
        return _loaded


def _candidates() -> list[str]:
    names = ["libmkl_rt.so.3", "libmkl_rt.so.2", "libmkl_rt.so", "libmkl_rt.3.dylib", "libmkl_rt.2.dylib"]
    names += ["mkl_rt.3.dll", "mkl_rt.2.dll"]
    dirs = [os.path.join(sys.prefix, "lib"), os.path.join(sys.prefix, "Library", "bin")]
    paths = [os.path.join(d, n) for d in dirs for n in names if os.path.exists(os.path.join(d, n))]
    found = ctypes.util.find_library("mkl_rt")
    return paths + ([found] if found else [])


def _load() -> bool:
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path, mode=getattr(ctypes, "RTLD_GLOBAL", 0))
            set_layer, sgemm, dgemm = lib.MKL_Set_Threading_Layer, lib.cblas_sgemm, lib.cblas_dgemm
        except (OSError, AttributeError):
            continue
        set_layer.argtypes, set_layer.restype = [ctypes.c_int], ctypes.c_int
        set_layer(_SEQUENTIAL)
        for kind, fn in (("s", sgemm), ("d", dgemm)):
            address = ctypes.cast(fn, ctypes.c_void_p).value
            assert address is not None
            llvm.add_symbol(SYMBOLS[kind], address)
        return True
    return False
