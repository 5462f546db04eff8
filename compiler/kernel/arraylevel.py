"""NumPy-assisted kernels: a loop group dominated by transcendental math runs as whole-array NumPy
calls (each primitive's own NumPy reference: a NumPy function or one of ``runtime/array_ops.py``,
which the generated module imports; it needs no compiler) inside ``numba.objmode``.

Why: without Intel's SVML (not in the llvmlite wheels), Numba calls libm once per element, while
NumPy's ufuncs use SIMD implementations: ``tanh(h @ w + b)`` over 4096x128 f32 takes 5.1 ms as a
fused Numba loop and 0.32 ms as two NumPy calls (measured on the 2-core CI machine). Float32 exp,
tanh, log and logistic have vectorizable polynomials (``compiler/prims/vecmath.py``) and stay in the
loop code; what still comes here is float64 transcendental math and the functions without one. The price is
one temporary per op outside the arena and ~3 us to enter object mode, so only big groups
containing such an op take this path. Semantics are the primitives' references: exactly what the
reference interpreter computes. Outputs are stored after every op has run, so a kernel whose
output shares a block with an input (in place) still reads every input before writing.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from compiler.ir.core import Op, Value
from compiler.ir.types import DType
from compiler.kernel.emit import ConstantPool, indent, np_type
from compiler.passes.fuse import Group, GroupKind
from compiler.prims import elementwise as ew
from compiler.prims.base import Kind, Primitive
from runtime import array_ops

MIN_ELEMENTS = 1 << 14
CHUNK_ELEMENTS = 1 << 16  # elements per chunk of a chunked kernel: its temporaries stay in cache
CHUNK_MIN_ELEMENTS = 1 << 18  # smaller groups' temporaries fit in cache anyway: one call per op is less

PRELUDE = "from runtime import array_ops as _ops"


def wants_numpy(group: Group, vector_math: bool = True, keyed_minmax: bool = True) -> bool:
    """Big loop groups with at least one libm-bound op (``ew.libm_bound``: float64 transcendental
    functions, float32 ones without a ``vecmath`` polynomial, every one when ``vector_math`` is off;
    floats only: NumPy's int semantics for division and overflow differ from the loop code's); also
    reductions with such an op in their prologue (their chunks' partial results combine by the
    reduction's own reference over the two stacked: np.maximum would not order -0.0 below +0.0 as
    max does); and float max/min reductions (``Reducer.selects``) when ``keyed_minmax`` is off (a
    NaN-propagating compare-and-select loop does not vectorize; NumPy's does)."""
    reducer = group.root.prim.reducer if group.kind is GroupKind.REDUCE else None
    return (
        group.kind in (GroupKind.LOOP, GroupKind.REDUCE)
        and math.prod(group.shape) >= MIN_ELEMENTS
        and (
            any(ew.libm_bound(op, vector_math) for op in group.ops)
            or (reducer is not None and reducer.selects is not None and not keyed_minmax)
        )
        and all(op.result.type.dtype.is_float or op.result.type.dtype.is_bool for op in group.ops)
    )


def _literal(value: Any, pool: ConstantPool) -> str:
    if isinstance(value, DType):  # references take NumPy dtypes (``prims.base.numpy_attrs``)
        return np_type(value)
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return f"np.array({value.item()!r}, {np_type(DType.from_numpy(value.dtype))})"
        return pool.add(value)
    if isinstance(value, float) and not math.isfinite(value):
        return f"float('{value}')"
    return repr(value)


def reference(prim: Primitive) -> str:
    """How generated code names ``prim``'s NumPy reference: ``np.<name>`` or ``_ops.<name>``."""
    fn = prim.reference
    name = getattr(fn, "__name__", "")
    if getattr(np, name, None) is fn:
        return f"np.{name}"
    assert getattr(array_ops, name, None) is fn, f"{prim.name}: its reference is not importable"
    return f"_ops.{name}"


def _call(op: Op, operands: list[str], pool: ConstantPool) -> str:
    attrs = [
        f"{key}={_literal(val, pool)}" for key, val in sorted(op.attrs.items()) if not key.startswith("dsl.")
    ]
    call = f"{reference(op.prim)}({', '.join(operands + attrs)})"
    return f"np.asarray({call}).astype({np_type(op.result.type.dtype)}, copy=False)"


def numpy_kernel(
    name: str,
    args: list[str],
    group: Group,
    names: dict[Value, str],
    pool: ConstantPool,
    chunked: bool = True,
) -> str:
    """A plain Python function evaluating ``group`` op by op with NumPy, then storing its outputs;
    in chunks of rows when ``chunked`` and the group allows it (``_chunk_plan``)."""
    plan = _chunk_plan(group) if chunked else None
    if plan is None:
        lines = _whole_array_body(group, names, pool)
    else:
        lines = _chunked_body(group, names, pool, *plan)
    return "\n".join([f"def {name}({', '.join(args)}):", *indent(lines, 1)])


def _whole_array_body(group: Group, names: dict[Value, str], pool: ConstantPool) -> list[str]:
    local: dict[Value, str] = {v: names[v] for v in group.inputs}
    lines = []
    for k, op in enumerate(group.ops):
        lines.append(f"t{k} = {_call(op, [local[v] for v in op.operands], pool)}")
        local[op.result] = f"t{k}"
    return lines + [f"np.copyto({names[v]}, {local[v]}, casting='unsafe')" for v in group.outputs]


def _chunk_plan(group: Group) -> tuple[set[Value], int] | None:
    """Chunking by rows (axis 0 of the iteration space) keeps each temporary in cache and recycles its
    memory, instead of a fresh full-size array per op. Elementwise ops over the whole iteration space
    run per chunk; everything else (index maps, constants, small values) is evaluated once, whole
    (NumPy gives views for broadcasts), and sliced where a chunk reads it. Returns the per-chunk values
    and the rows per chunk, or None where a whole-array value would depend on a per-chunk one."""
    shape = group.shape
    if not shape or shape[0] < 2 or math.prod(shape) < CHUNK_MIN_ELEMENTS:
        return None
    per_chunk: set[Value] = set()
    body = group.ops[:-1] if group.kind is GroupKind.REDUCE else group.ops
    for op in body:
        if op.prim.kind is Kind.ELEMENTWISE and op.result.type.shape == shape:
            per_chunk.add(op.result)
        elif any(v in per_chunk for v in op.operands):
            return None
    stored = [v for v in group.outputs if v is not group.root.result or group.kind is GroupKind.LOOP]
    if any(v.type.shape != shape for v in stored):
        return None
    rows = max(1, CHUNK_ELEMENTS // max(1, math.prod(shape[1:])))
    return (per_chunk, rows) if rows < shape[0] else None


def _chunked_body(
    group: Group,
    names: dict[Value, str],
    pool: ConstantPool,
    per_chunk: set[Value],
    rows: int,
) -> list[str]:
    shape = group.shape
    local: dict[Value, str] = {v: names[v] for v in group.inputs}
    before, inside = [], []

    def chunk_of(v: Value) -> str:
        return local[v] if v in per_chunk else f"{local[v]}[r0:r1]"

    root = group.root
    after = []
    for k, op in enumerate(group.ops):
        if op.result in per_chunk:
            inside.append(f"t{k} = {_call(op, [chunk_of(v) for v in op.operands], pool)}")
        elif op is root and group.kind is GroupKind.REDUCE:
            inside.append(f"t{k} = {_call(op, [chunk_of(op.operands[0])], pool)}")
        else:
            before.append(f"t{k} = {_call(op, [local[v] for v in op.operands], pool)}")
        local[op.result] = f"t{k}"
    for v in group.outputs:
        if v is root.result and group.kind is GroupKind.REDUCE:
            out = names[v]
            axes = {int(a) for a in root.attrs["axes"]}
            if 0 in axes:  # every chunk adds to the whole result (in the reducer's accumulator)
                wide = _accumulator(root)
                if wide is not v.type.dtype:
                    before.append(f"{out}_w = np.empty({v.type.shape}, {np_type(wide)})")
                    after.append(f"np.copyto({out}, {out}_w, casting='unsafe')")
                    out = f"{out}_w"
                both = f"{reference(root.prim)}(np.stack(({out}, {local[v]})), axes=(0,))"
                inside += [
                    "if r0 == 0:",
                    f"    np.copyto({out}, {local[v]}, casting='unsafe')",
                    "else:",
                    f"    np.copyto({out}, {both}, casting='unsafe')",
                ]
            else:
                inside.append(f"np.copyto({out}[r0:r1], {local[v]}, casting='unsafe')")
        else:
            inside.append(f"np.copyto({names[v]}[r0:r1], {chunk_of(v)}, casting='unsafe')")
    loop = [f"for r0 in range(0, {shape[0]}, {rows}):", f"    r1 = min(r0 + {rows}, {shape[0]})"]
    return before + loop + indent(inside, 1) + after


def _accumulator(root: Op) -> DType:
    reducer = root.prim.reducer
    assert reducer is not None, f"{root.prim.name} has no reducer"
    return reducer.accumulator(root.result.type.dtype)
