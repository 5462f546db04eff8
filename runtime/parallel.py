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

Chunks are claimed, not dealt: each thread claims the chunks of its own share one by one from a
counter (``claim_next``), then those left in the other shares. Numba's OpenMP layer deals a loop's
iterations out statically (thread ``t`` runs the ``t``-th share), so a thread the OS had not
scheduled yet (another process on its core) held up the loop's end with its whole share while the
others waited; claimed, the threads that run take its chunks, and it holds up the end only with the
chunk it is in. A chunk
computes the same whichever thread runs it (a chunk writes its own rows or its own partial result,
combined in chunk order after the loop), so results do not depend on the schedule.
``DSL_STATIC_CHUNKS=1`` binds ``parallel_for_static`` (the dealt schedule) instead, for comparison.
"""

from __future__ import annotations

import os
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic
from numba.np.ufunc.parallel import _iget_num_threads, _launch_threads

from runtime.intrinsics import array_at, call_kernel

# Numba registers the threading layer's symbols (``get_num_threads``...) with LLVM when it launches
# the layer, which typing ``_iget_num_threads`` does. A function that reads it (``parallel_for``,
# ``runtime.blas``'s matmul rows, which import this module) loaded from Numba's on-disk cache is never
# typed, so a new process's first load failed in LLVM ("Symbol not found: get_num_threads"). Launch
# the layer here, before anything can be loaded (runtime/__init__.py has set the wait policy by now).
_launch_threads()

# The kernel-table signatures (``runtime.precompile.KernelSignature``) of a chunk function,
# ``chunk(ch, frame)``, and of ``parallel_for(chunk, n, frame)``; generated modules use these.
CHUNK_SIGNATURE: list[tuple[str, int | None]] = [("int64", None), ("uint64", 1)]
PARALLEL_FOR_SIGNATURE: list[tuple[str, int | None]] = [("uint64", None), ("int64", None), ("uint64", 1)]


@intrinsic
def claim_next(typingctx: Any, counters: Any, at: Any) -> Any:
    """``counters[at]``, incremented in the same atomic step: each value goes to exactly one caller,
    whichever threads call at once (the chunks' own writes are ordered by the loop's closing barrier,
    so the counter needs no ordering of its own)."""
    if not (isinstance(counters, types.Array) and counters.dtype == types.int64):
        return None
    if not isinstance(at, types.Integer):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        data = context.make_array(counters)(context, builder, value=args[0]).data
        index = context.cast(builder, args[1], at, types.intp)
        one = ir.Constant(ir.IntType(64), 1)
        return builder.atomic_rmw("add", builder.gep(data, [index]), one, "monotonic")

    return types.int64(counters, at), codegen


@intrinsic
def zeroed_on_stack(typingctx: Any, n: Any) -> Any:
    """The address of ``n`` zeroed ``int64`` on the calling function's stack (valid until it returns,
    hence through its parallel loop): ``parallel_for``'s counters, which a heap array would put in
    the block a kernel's freed scratch left, moving where glibc puts the chunks' own allocations."""
    if not isinstance(n, types.Integer):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        count = context.cast(builder, args[0], n, types.intp)
        data = builder.alloca(ir.IntType(64), size=count)
        cgutils.memset(builder, data, builder.mul(count, ir.Constant(count.type, 8)), 0)
        return builder.ptrtoint(data, ir.IntType(64))

    return types.uint64(n), codegen


SHARE_STRIDE = 8  # int64 counters apart: each share's counter on a cache line of its own


# Iteration ``t`` of the ``prange`` (thread ``t``: Numba gives each thread one iteration) runs the
# chunks of share ``t`` (``[t * n // workers, (t + 1) * n // workers)``, the static schedule's), in
# order, then helps with the others' in turn: a balanced loop runs as the static schedule did (each
# thread's chunks, hence its cache lines, the same from one loop to the next: claiming from one
# common counter instead cost the softmax 15% idle), and a thread that arrives late or stalls has
# its unclaimed chunks taken by the others. ``_iget_num_threads`` is what ``numba.get_num_threads()``
# reads, through the threading layer's symbol (``numba.get_num_threads`` goes through a ctypes
# pointer, which Numba cannot cache).
@numba.njit(cache=True, nogil=True, parallel=True)
def parallel_for(chunk: int, n: int, frame: Any) -> None:
    threads: int = _iget_num_threads()  # type: ignore[call-arg]
    workers = min(n, threads)
    # chunks claimed of each share
    claimed = array_at(zeroed_on_stack(workers * SHARE_STRIDE), (workers * SHARE_STRIDE,), np.int64)
    for t in numba.prange(workers):
        for k in range(workers):
            share = (t + k) % workers
            first = share * n // workers
            size = (share + 1) * n // workers - first
            c = claim_next(claimed, share * SHARE_STRIDE)
            while c < size:
                # "i8,u8:1" is signature_string(CHUNK_SIGNATURE), written out: call_kernel needs a literal
                call_kernel(chunk, "i8,u8:1", first + c, frame)
                c = claim_next(claimed, share * SHARE_STRIDE)


@numba.njit(cache=True, nogil=True, parallel=True)
def parallel_for_static(chunk: int, n: int, frame: Any) -> None:
    """``parallel_for`` with the chunks dealt out by Numba's static schedule (``DSL_STATIC_CHUNKS``)."""
    for ch in numba.prange(n):
        call_kernel(chunk, "i8,u8:1", np.int64(ch), frame)  # (a prange index may be unsigned)


def parallel_for_python(chunk: Any, n: int, frame: Any) -> None:
    """``parallel_for`` for modules run as plain Python: the table holds the chunk function itself."""
    for ch in range(n):
        chunk(ch, frame)


def parallel_for_function() -> Any:
    """What a generated module's table slot for ``parallel_for`` holds the address of (or, with
    Numba's JIT off, the function itself)."""
    if numba.config.DISABLE_JIT:  # type: ignore[attr-defined]
        return parallel_for_python
    return parallel_for_static if static_chunks() else parallel_for


def static_chunks() -> bool:
    """``DSL_STATIC_CHUNKS=1``: parallel loops deal their chunks out statically (``parallel_for_static``)."""
    return os.environ.get("DSL_STATIC_CHUNKS", "").strip() == "1"
