"""The CPU kernel of an in-place window update (``compiler/kernel/window.py``): a loop nest over
the update's elements only, each stored at its place in the window of the base's buffer, which the
result shares (``build._overwrites`` names them alike). Elementwise ops fused into the update are
computed for the window's elements, as the update reads them."""

from __future__ import annotations

import math

from compiler.kernel.cpu.loops import KernelSpec, store, text
from compiler.kernel.cpu.records import Kernel
from compiler.kernel.emit import BodyBuilder
from compiler.kernel.ir import Line, Stmt, nest
from compiler.kernel.window import window_index
from compiler.passes.rows import PARALLEL_MIN_ELEMENTS


def window_kernel(spec: KernelSpec) -> Kernel | None:
    root = spec.group.root
    update = root.operands[1]
    shape = update.type.shape
    if math.prod(shape) == 0:  # nothing replaced: the buffer already holds the result
        return None
    at = tuple(f"j{d}" for d in range(len(shape)))
    builder = BodyBuilder(spec.inlined(), lambda v, idx: text(spec.locate(v, idx)), spec.pool, spec.prefix)
    # the corner's statements first (loop-invariant: LLVM hoists them), then the update's value
    dest = spec.locate(root.result, window_index(root, at, builder.value_at))
    value = builder.value_at(update, at)
    stmts: list[Stmt] = []
    for k, line in enumerate(builder.lines):
        read = builder.loads.get(k)
        place = spec.locate(*read) if read is not None else None
        stmts.append(Line(line, (place,) if not isinstance(place, str) and place is not None else ()))
    stmts.append(store(dest, value))
    parallel = math.prod(shape) >= PARALLEL_MIN_ELEMENTS
    return spec.define(nest(at, shape, stmts, parallel), parallel)
