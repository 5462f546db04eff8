"""The CUDA kernel of a SCAN group (``compiler/prims/scan.py``): a thread per line along the scanned
axis (a grid-stride loop over the lines), each walking its line serially in scan order with the
running value in a register (float32 sums in float64), as the CPU kernel does: the same order, so
the same bits on both backends, and O(n) work. Neighbouring threads take neighbouring lines, so a
scan over a leading axis reads coalesced; one over the last axis does not (a block-wide scan per
line would, for long lines with few of them)."""

from __future__ import annotations

from compiler.kernel.cuda.loops import grid_loop
from compiler.kernel.cuda.records import CudaKernel, KernelSpec, Launch, store
from compiler.kernel.ir import Access, For, Line, Stmt
from compiler.prims.scan import running


def scan_kernel(spec: KernelSpec) -> CudaKernel | None:
    root = spec.group.root
    (x,) = root.operands
    out = root.result
    shape = out.type.shape
    size = out.type.size
    if size == 0:
        return None
    axis = int(root.attrs["axis"])
    n = shape[axis]
    trail = 1
    for d in shape[axis + 1 :]:
        trail *= d
    lines_count = size // n
    names = spec.names
    walk = f"({n - 1} - t)" if root.attrs["reverse"] else "t"
    position = f"base + {walk} * {trail}" if trail != 1 else f"base + {walk}"
    element = Access(names[x], ("p",))
    start, step, value = running(root, f"{names[x]}[p]")
    base = f"(g // {trail}) * {n * trail} + g % {trail}" if trail != 1 else f"g * {n}"
    body: list[Stmt] = [
        Line(f"base = {base}"),
        Line(start),
        For(
            "t",
            n,
            [Line(f"p = {position}"), Line(step, (element,)), store(Access(names[out], ("p",)), value)],
        ),
    ]
    loop = grid_loop("g", lines_count, body)
    return spec.define([loop], spec.buffers, Launch(f"_grid({lines_count})", "TPB"), "scan", [])
