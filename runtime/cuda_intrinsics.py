"""Numba intrinsics that generated CUDA kernels call (``compiler/codegen/cuda/prelude.py`` imports
them; under the CUDA simulator, which runs kernels as Python, the prelude defines each as plain Python).

``pin(x)`` is ``x``, passed through an empty inline-assembly ``mov`` that the optimizer cannot see
into: the value is made where ``pin`` is called. An unrolled elementwise loop issues the loads of all
its iterations first (``compiler/codegen/cuda/printer.py: _unrolled``), so that a thread has several
loads in flight; without the pin, LLVM's instruction combining sank each load down to its first use,
past the previous iteration's branches (a float division's slow path, a NaN-propagating maximum), and
ptxas then kept each load behind them: one load in flight per thread (seen in the SASS of the suite's
elementwise chain: benchmarks/results/2026-11-27-gpu-lease-b.md). The ``mov`` costs nothing: ptxas
removes it. Types without a register class of their own here (bools, small integers) pass unpinned.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba import types
from numba.cuda.extending import intrinsic

# Numba type -> (PTX move, its register constraint)
_MOVES = {
    types.float32: ("mov.f32", "f"),
    types.float64: ("mov.f64", "d"),
    types.int32: ("mov.b32", "r"),
    types.uint32: ("mov.b32", "r"),
    types.int64: ("mov.b64", "l"),
    types.uint64: ("mov.b64", "l"),
}


@intrinsic
def pin(typingctx: Any, x: Any) -> Any:
    """``x``, made where it is called (the module docstring)."""
    sig = x(x)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        move = _MOVES.get(signature.args[0])
        if move is None:
            return args[0]
        op, reg = move
        value_type = context.get_value_type(signature.args[0])
        asm = ir.InlineAsm(ir.FunctionType(value_type, [value_type]), f"{op} $0, $1;", f"={reg},{reg}")
        return builder.call(asm, [args[0]])

    return sig, codegen
