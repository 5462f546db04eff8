"""The CUDA printer of the kernel IR: a ``CudaKernel`` as the text of a ``numba.cuda.jit`` function
(a band's launch constants before it). Loops print as Python ``range`` loops whose start and step
are thread and block coordinates; a ``BlockReduce`` of strategy "tree" as halving steps through
shared memory."""

from __future__ import annotations

from collections.abc import Sequence

from compiler.ir.types import DType
from compiler.kernel.cuda.records import CudaKernel
from compiler.kernel.emit import typed
from compiler.kernel.ir import Alloc, Barrier, BlockReduce, Stmt, View, print_python


def numba_type(dtype: DType) -> str:
    """The Numba scalar type (of shared arrays), as generated code spells it."""
    return "numba.boolean" if dtype.is_bool else f"numba.{dtype.np.name}"


def kernel_text(kernel: CudaKernel) -> str:
    header = ["@cuda.jit(cache=not SIM)", f"def {kernel.name}({', '.join(kernel.ir.params)}):"]
    text = "\n".join(header + (print_cuda(kernel.ir.body, 1) or ["    pass"]))
    if kernel.constants:  # read by the kernel as compile-time constants
        text = "\n".join(f"{name} = {expr}" for name, expr in kernel.constants) + "\n\n\n" + text
    return text


def launch_text(kernel: CudaKernel) -> str:
    return f"[{kernel.launch.grid}, {kernel.launch.block}, stream]"


def print_cuda(body: Sequence[Stmt], depth: int = 0) -> list[str]:
    """``body`` as a CUDA kernel's lines: the kernel IR's Python (a loop spread over threads or
    blocks by its start and step, not by ``prange``), with the GPU's own statements."""
    return print_python(body, depth, _gpu_statement, prange=False)


def _gpu_statement(s: Stmt) -> list[str] | None:
    if isinstance(s, Alloc):
        if not s.shared:
            raise TypeError(f"{s.name}: a CUDA kernel allocates only shared memory (its scratch is planned)")
        shape = str(s.shape[0]) if len(s.shape) == 1 else "(" + ", ".join(map(str, s.shape)) + ")"
        return [f"{s.name} = cuda.shared.array({shape}, {numba_type(s.dtype)})"]
    if isinstance(s, Barrier):
        return ["cuda.syncthreads()"]
    if isinstance(s, BlockReduce):
        return _tree(s)
    if isinstance(s, View):
        raise TypeError("a CUDA kernel indexes flat buffers: no views")
    return None


def _tree(r: BlockReduce) -> list[str]:
    """Halving steps: the first ``s`` lanes of ``width`` combine their slot with the slot ``s``
    above, ``s`` = width/2, width/4 ... 1, a barrier after each: a fixed order."""
    if r.strategy != "tree":
        raise ValueError(f"block reduce strategy {r.strategy!r}: the CUDA printer knows 'tree'")
    mine, theirs = f"{r.prefix}mine", f"{r.prefix}theirs"
    return [
        f"{r.sm}[tid] = {r.acc}",
        "cuda.syncthreads()",
        f"s = {r.width} // 2",
        "while s > 0:",
        f"    if {r.lane} < s:",
        f"        {mine} = {r.sm}[tid]",
        f"        {theirs} = {r.sm}[tid + s]",
        f"        {r.sm}[tid] = {typed(r.reducer.combine(mine, theirs), r.dtype)}",
        "    cuda.syncthreads()",
        "    s //= 2",
    ]
