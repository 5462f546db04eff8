"""Parallel loops on the runtime's threads: a kernel with a parallel loop becomes a chunk function
and a plain kernel that runs the chunks through ``runtime.parallel.parallel_for``.

A parallel kernel (one parallel ``For`` at the top of its kernel IR) is split into two plain
functions: the chunk function (one chunk of the loop: an iteration of a loop over chunks, or one of
``REDUCE_CHUNKS`` fixed ranges of a loop over elements or rows; its arrays read from a frame of data
addresses with ``array_at``) and the kernel (what comes before and after the loop, then the frame
filled and ``runtime.parallel.parallel_for`` called through its address). Numba's parallel lowering
then runs for ``parallel_for`` alone, once per machine, instead of for every kernel of every program
(``runtime/parallel.py``). With nothing after the loop (no partial results to combine) the kernel is
the chunk function alone (``Kernel.direct``: the driver runs it). The kernel's scratch is among its
parameters (``loops.planned_scratch``), views of the arena, so a chunk reaches its partial results
and rows through the frame like its buffers. The split is decided on the kernel IR: the loop's form
(``For.flat``, a loop over chunks) and which of the statements before it the statements after it
use.
"""

from __future__ import annotations

from dataclasses import replace

from compiler.ir.types import TensorType
from compiler.kernel.cpu.loops import ANONYMOUS
from compiler.kernel.cpu.records import Chunk, Kernel, jit_decorator
from compiler.kernel.emit import ROW, np_type, shape_literal
from compiler.kernel.ir import For, Line, Stmt, View, parallel_loops, print_python, uses
from compiler.passes.rows import REDUCE_CHUNKS
from runtime.intrinsics import signature_string
from runtime.parallel import CHUNK_SIGNATURE, PARALLEL_FOR_SIGNATURE

PARALLEL_FOR = "parallel_for"  # runtime.parallel.parallel_for, as a generated module binds it
CHUNK_SUFFIX = "_chunk"
PARALLEL_FOR_SLOT = (PARALLEL_FOR, PARALLEL_FOR_SIGNATURE)
PARALLEL_FOR_TEXT = signature_string(PARALLEL_FOR_SIGNATURE)


def runtime_parallel(kernel: Kernel, types: dict[str, TensorType]) -> Kernel:
    """``kernel`` with its parallel loop run by ``parallel_for`` (the module docstring); a kernel
    without exactly one parallel loop at its top, or with more than views before it, is returned as
    it is."""
    ir = kernel.ir
    if kernel.objmode or ir is None:
        return kernel
    loops = parallel_loops(ir.body)
    if len(loops) != 1:
        return kernel
    start = loops[0]
    loop = ir.body[start]
    assert isinstance(loop, For)
    before, after = ir.body[:start], ir.body[start + 1 :]
    if not isinstance(loop.stop, int) or loop.start != 0 or not all(isinstance(s, View) for s in before):
        return kernel
    arrays = [types[a] for a in kernel.args]  # the driver's buffers and scratch, for the kernel's parameters
    frame = [
        (p, shape_literal(t.shape) if t.shape else "()", np_type(t.dtype))
        for p, t in zip(ir.params, arrays, strict=True)
    ]
    views: list[Stmt] = list(before)
    kept = [s for s in before if isinstance(s, View) and uses(after, s.name)]
    chunk_body: list[Stmt]
    if loop.var == "ch":  # chunks already: one per iteration
        chunks, n = loop.stop, loop.stop
        chunk_body = [*views, *loop.body]
        form, var = ("band", ROW) if ir.rows is not None else ("chunks", "ch")
        n = ir.rows if ir.rows is not None else n
    else:  # a loop over elements or rows: REDUCE_CHUNKS fixed ranges of it
        n, chunks = loop.stop, min(REDUCE_CHUNKS, loop.stop)
        bounds: list[Stmt] = [Line(f"lo = ch * {n} // {chunks}"), Line(f"hi = (ch + 1) * {n} // {chunks}")]
        var = loop.var
        if loop.flat:  # each flat view sliced to the chunk: LLVM's overlap checks then pass, it vectorizes
            sliced = [replace(v, chunk=True) if isinstance(v, View) else v for v in views]
            chunk_body = [*bounds, *sliced, For(var, "hi - lo", loop.body)]
            form = "flat"
        else:
            chunk_body = [*views, *bounds, For(var, "hi", loop.body, "lo")]
            form = "rows"
    plain = jit_decorator(reassoc=ir.reassoc)
    direct = not after

    def render(name: str) -> str:
        """The chunk function (and, with something before or after the loop, the kernel) as
        ``name`` (the kernel's own name, or for ``Kernel.key`` a name of no kernel)."""
        chunk_text = [
            plain,
            f"def {name}{CHUNK_SUFFIX}(ch, frame):",
            *(
                f"    {array} = array_at(frame[{k}], {shape}, {dtype})"
                for k, (array, shape, dtype) in enumerate(frame)
            ),
            *print_python(chunk_body, 1),
        ]
        if direct:
            return "\n".join(chunk_text)
        run = [
            *print_python(kept, 1),
            f"    frame = np.empty({len(frame)}, np.uint64)",
            f"    fill_frame(frame, {', '.join(array for array, _, _ in frame)})",
            f'    call_kernel(parallel_at, "{PARALLEL_FOR_TEXT}", chunk_at, {chunks}, frame)',
            *print_python(after, 1),
        ]
        kernel_text = [plain, f"def {name}({', '.join(ir.params)}, chunk_at, parallel_at):", *run]
        return "\n".join(chunk_text) + "\n\n\n" + "\n".join(kernel_text)

    calls = [(f"{kernel.name}{CHUNK_SUFFIX}", CHUNK_SIGNATURE), PARALLEL_FOR_SLOT]
    text, key = render(kernel.name), render(ANONYMOUS)
    if direct:
        # nothing after the loop: the driver fills the frame and runs the chunks (a function fewer
        # to compile: ~0.07 s each)
        chunk = Chunk(form, n, chunks, var, [array for array, _, _ in frame], chunk_body)
        return replace(kernel, text=text, key=key, calls=calls, direct=str(chunks), chunk=chunk)
    return replace(kernel, text=text, key=key, calls=calls)
