"""LLVM intrinsics that generated CPU kernels call by name.

``fmuladd(a, b, c)`` is ``a * b + c`` as a multiply and an add that LLVM may contract (the
``contract`` fast-math flag on both, as ``llvm.fmuladd``): one fused multiply-add (one rounding)
where the target has FMA units, a multiply and an add otherwise. Numba never contracts
``a * b + c`` by itself (that needs ``fastmath={"contract"}`` on the whole kernel, which would also
change the rounding of the user's own arithmetic against NumPy's), so the polynomials of the float32
math helpers (``compiler/prims/vecmath.py``) call this for each Horner step: their error bounds hold
either way (a fused step rounds once instead of twice), and on an FMA machine the vectorized
``tanh`` takes 0.59 instead of 0.77 ns per element on the 2-core CI machine (AVX2;
``python benchmarks/bench_vecmath.py``, results/vecmath.md).

Under ``NUMBA_DISABLE_JIT`` (modules run as plain Python) ``fmuladd_function`` gives the unfused
NumPy expression instead.
"""

from __future__ import annotations

from typing import Any

import numba
from numba.core import types
from numba.extending import intrinsic


@intrinsic
def fmuladd(typingctx: Any, a: Any, b: Any, c: Any) -> Any:
    """``a * b + c`` for three floats of one type, fused where the target has FMA."""
    if not isinstance(a, types.Float) or not (a == b == c):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        # ``contract`` on both instructions lets the backend fuse them; the loop vectorizer's cost
        # model sees a plain multiply and add (an ``llvm.fmuladd`` call made it interleave less).
        product = builder.fmul(args[0], args[1], flags=("contract",))
        return builder.fadd(product, args[2], flags=("contract",))

    return a(a, b, c), codegen


def fmuladd_python(a: Any, b: Any, c: Any) -> Any:
    return a * b + c


def fmuladd_function() -> Any:
    """What a generated module binds as ``fma``: the intrinsic, or NumPy when Numba's JIT is off."""
    return fmuladd_python if numba.config.DISABLE_JIT else fmuladd  # type: ignore[attr-defined]
