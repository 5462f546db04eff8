"""Matmul operands and results as strided views of buffers, and gemm's alpha-and-beta epilogue.

The arithmetic of fusion's CONTRACT groups (``compiler/passes/fuse.py``), on ops rather than groups:
which strides a chain of transposes and reshapes gives a contiguous buffer (``through``), whether
such a view is one matrix per batch element with a unit stride that BLAS and the CUDA kernel can read
(``matrix_view``), where a matmul writes its result through a layout epilogue (``result_view_of``),
and whether an elementwise epilogue is ``alpha * (a @ b) + beta * x`` (``accumulation_of``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from compiler.ir.core import Op, Value
from compiler.prims import elementwise as ew
from compiler.prims import movement as mv
from compiler.prims import source as src

MAX_VIEW_BATCH_AXES = 2  # batch axes a strided matmul operand may keep after merging (CUDA's kernel)


@dataclass(frozen=True)
class OperandView:
    """A matmul operand read as a strided view of ``source``'s (row-major) buffer: ``batch`` is the
    (size, stride) of each batch axis left after merging the contiguous ones and dropping those of
    size 1 (at most two), ``rows``/``cols`` the strides of the last two axes (in elements)."""

    source: Value
    batch: tuple[tuple[int, int], ...]
    rows: int
    cols: int

    def batch_offset(self, t: str) -> str:
        """The offset of batch element ``t`` (a flat index over the batch axes), as an expression."""
        terms, inner = [], 1
        for size, stride in reversed(self.batch):
            index = t if inner == 1 else f"({t} // {inner})"
            index = index if size * inner == math.prod(s for s, _ in self.batch) else f"({index} % {size})"
            terms.append(f"{index} * {stride}")
            inner *= size
        return " + ".join(reversed(terms)) or "0"

    def transposed(self) -> OperandView:
        """The same memory read as the transposed matrix."""
        return OperandView(self.source, self.batch, self.cols, self.rows)


def through(chain: list[Op], shape: tuple[int, ...], backward: bool = False) -> tuple[int, ...] | None:
    """The strides at the end of ``chain`` (strided-view ops in walking order) starting from a
    contiguous buffer of ``shape`` (``movement.view_strides``), or ``None`` where one needs a copy."""
    strides: tuple[int, ...] | None = mv.contiguous_strides(shape)
    for op in chain:
        if strides is None:
            return None
        strides = mv.view_strides(op, strides, backward)
    return strides


def matrix_view(source: Value, shape: tuple[int, ...], strides: tuple[int, ...]) -> OperandView | None:
    """(``shape``, ``strides``) in ``source``'s buffer as one matrix per batch element with a unit
    stride along its rows or its columns, or ``None``."""
    *batch_shape, r, c = shape
    *batch_strides, sr, sc = strides
    if c == 1:  # one column: any column stride reads it; rows at least one apart for BLAS
        sc, sr = 1, max(sr, 1) if r > 1 else 1
    elif r == 1:  # one row: read as rows of memory if its columns are adjacent, else as one column
        sr = c if sc == 1 else 1
    if sc != 1 and sr != 1:
        return None
    batch = merged_batch(batch_shape, batch_strides)
    if batch is None:
        return None
    return OperandView(source, batch, sr, sc)


def merged_batch(shape: list[int], strides: list[int]) -> tuple[tuple[int, int], ...] | None:
    """Batch axes as (size, stride), size-1 axes dropped and contiguous neighbours merged; ``None``
    beyond ``MAX_VIEW_BATCH_AXES``."""
    batch: list[tuple[int, int]] = []
    for size, stride in zip(shape, strides, strict=True):
        if size == 1:
            continue
        if batch and batch[-1][1] == size * stride:
            batch[-1] = (batch[-1][0] * size, stride)
        else:
            batch.append((size, stride))
    return tuple(batch) if len(batch) <= MAX_VIEW_BATCH_AXES else None


def result_view_of(root: Op, chain: list[Op]) -> OperandView | None:
    """The matmul result of ``root`` as a strided view of the buffer of ``chain``'s last value."""
    end = chain[-1].result
    strides = through(chain[::-1], end.type.shape, backward=True)
    return None if strides is None else matrix_view(end, root.result.type.shape, strides)


@dataclass(frozen=True)
class Accumulation:
    """A CONTRACT group's elementwise epilogue ``out = alpha * (a @ b) + beta * source`` (gemm's alpha
    and beta, ``source`` read only at the element written): an SGD step ``w - lr * (h.T @ g)``."""

    source: Value
    alpha: float
    beta: float


def accumulation_of(root: Op, ops: list[Op]) -> Accumulation | None:
    """``ops`` (program order, after the matmul ``root``) compute ``alpha * M + beta * X`` from the
    matmul result ``M``, scalar constants and one other value ``X`` of the result's type, and nothing
    else: the last op adds or subtracts, the ``M`` side is ``M`` scaled by constants and negations."""
    produced = {op.result: op for op in ops}
    used: set[Op] = set()
    m = root.result

    def constant(v: Value) -> float | None:
        op = produced.get(v)
        if op is not None and op.prim is mv.broadcast:
            inner = constant(op.operands[0])
            if inner is not None:
                used.add(op)
            return inner
        value = src.splat_value(op)
        if op is None or value is None:
            return None
        used.add(op)
        return float(value)

    def scale(v: Value) -> float | None:  # v = scale * M
        if v is m:
            return 1.0
        op = produced.get(v)
        found: float | None = None
        if op is not None and op.prim is ew.neg:
            inner = scale(op.operands[0])
            found = None if inner is None else -inner
        elif op is not None and op.prim is ew.mul:
            for c, t in (op.operands, op.operands[::-1]):
                k, inner = constant(c), scale(t)
                if k is not None and inner is not None:
                    found = k * inner
                    break
        if op is not None and found is not None:
            used.add(op)
        return found

    end = ops[-1]
    if end.prim not in (ew.add, ew.sub):
        return None
    a, b = end.operands
    found: Accumulation | None = None
    for t, x, sign_t, sign_x in ((a, b, 1.0, 1.0), (b, a, 1.0 if end.prim is ew.add else -1.0, 1.0)):
        if end.prim is ew.sub and t is a:
            sign_x = -1.0
        k = scale(t)
        if k is not None and x not in produced and x is not m and x.type == end.result.type:
            found = Accumulation(x, sign_t * k, sign_x)
            break
    if found is None or used | {end} != set(ops):
        return None
    return found
