"""The one parallel loop of the runtime: ``parallel_for(chunk, n, frame)`` runs the native function
at address ``chunk`` for ``ch`` in ``0 .. n-1`` on Numba's threads, each call ``chunk(ch, frame)``.

A parallel kernel of a generated module is two plain functions: the kernel (what runs before and
after the parallel loop: partial results allocated, then combined) and its chunk function (one
iteration of the loop, reading every array it needs from ``frame``, a ``uint64`` array of data
addresses, with ``runtime.intrinsics.array_at``). The kernel fills the frame and calls
``parallel_for`` through its address; a kernel with nothing to do after its loop has no function of
its own, and the driver allocates its scratch, fills the frame (``fill_frame``) and calls
``parallel_for`` itself.
Numba's parallel lowering (the parfor passes, a gufunc compiled per loop) then runs once per
machine, for this function, instead of once per kernel of every program: it was about two thirds
of the compile time of a kernel with a parallel loop (``python benchmarks/compile_phases.py``).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from runtime.intrinsics import call_kernel

# The kernel-table signatures (``runtime.precompile.KernelSignature``) of a chunk function,
# ``chunk(ch, frame)``, and of ``parallel_for(chunk, n, frame)``; generated modules use these.
CHUNK_SIGNATURE: list[tuple[str, int | None]] = [("int64", None), ("uint64", 1)]
PARALLEL_FOR_SIGNATURE: list[tuple[str, int | None]] = [("uint64", None), ("int64", None), ("uint64", 1)]


@numba.njit(cache=True, nogil=True, parallel=True)
def parallel_for(chunk: int, n: int, frame: Any) -> None:
    for ch in numba.prange(n):
        # "i8,u8:1" is signature_string(CHUNK_SIGNATURE), written out: call_kernel needs a literal
        call_kernel(chunk, "i8,u8:1", np.int64(ch), frame)  # (a prange index may be unsigned)


def parallel_for_python(chunk: Any, n: int, frame: Any) -> None:
    """``parallel_for`` for modules run as plain Python: the table holds the chunk function itself."""
    for ch in range(n):
        chunk(ch, frame)


def parallel_for_function() -> Any:
    """What a generated module's table slot for ``parallel_for`` holds the address of (or, with
    Numba's JIT off, the function itself)."""
    return parallel_for_python if numba.config.DISABLE_JIT else parallel_for  # type: ignore[attr-defined]
