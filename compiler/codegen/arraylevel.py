"""NumPy-assisted kernels: a loop group dominated by transcendental math runs as whole-array NumPy
calls (each primitive's own NumPy reference) inside ``numba.objmode``.

Why: without Intel's SVML (not in the llvmlite wheels), Numba calls libm once per element, while
NumPy's ufuncs use SIMD implementations: ``tanh(h @ w + b)`` over 4096x128 f32 takes 5.1 ms as a
fused Numba loop and 0.32 ms as two NumPy calls (measured on the 2-core CI machine). The price is
one temporary per op outside the arena and ~3 us to enter object mode, so only big groups
containing such an op take this path. Semantics are the primitives' references: exactly what the
reference interpreter computes. Outputs are stored after every op has run, so a kernel whose
output shares a block with an input (in place) still reads every input before writing.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from compiler.codegen.emit import ConstantPool, indent, np_type
from compiler.ir.core import Value
from compiler.ir.types import DType
from compiler.passes.fuse import Group, GroupKind
from compiler.prims import elementwise as ew

MIN_ELEMENTS = 1 << 14

PRELUDE = "from compiler.ir.types import DType\nfrom compiler.prims import REGISTRY as _PRIMS"


def wants_numpy(group: Group) -> bool:
    """Big loop groups with at least one libm-bound op (and floats only: NumPy's int semantics for
    division and overflow differ from the loop code's)."""
    return (
        group.kind is GroupKind.LOOP
        and math.prod(group.shape) >= MIN_ELEMENTS
        and any(op.prim in ew.TRANSCENDENTAL for op in group.ops)
        and all(op.result.type.dtype.is_float or op.result.type.dtype.is_bool for op in group.ops)
    )


def _literal(value: Any, pool: ConstantPool) -> str:
    if isinstance(value, DType):
        return f"DType.{value.name}"
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return f"np.array({value.item()!r}, {np_type(DType.from_numpy(value.dtype))})"
        return pool.add(value)
    if isinstance(value, float) and not math.isfinite(value):
        return f"float('{value}')"
    return repr(value)


def numpy_kernel(
    name: str, args: list[str], group: Group, names: dict[Value, str], pool: ConstantPool
) -> str:
    """A plain Python function evaluating ``group`` op by op with NumPy, then storing its outputs."""
    local: dict[Value, str] = {v: names[v] for v in group.inputs}
    lines = []
    for k, op in enumerate(group.ops):
        operands = [local[v] for v in op.operands]
        attrs = [
            f"{key}={_literal(val, pool)}"
            for key, val in sorted(op.attrs.items())
            if not key.startswith("dsl.")
        ]
        call = f'_PRIMS["{op.prim.name}"].reference({", ".join(operands + attrs)})'
        dtype = np_type(op.result.type.dtype)
        lines.append(f"t{k} = np.asarray({call}).astype({dtype}, copy=False)")
        local[op.result] = f"t{k}"
    lines += [f"np.copyto({names[v]}, {local[v]}, casting='unsafe')" for v in group.outputs]
    return "\n".join([f"def {name}({', '.join(args)}):", *indent(lines, 1)])
