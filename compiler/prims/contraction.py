"""Contraction: batched matrix multiply ``[..., m, k] @ [..., k, n] -> [..., m, n]``.

Batch dimensions must be equal (the frontend broadcasts them and turns 1-D operands into matrices).
The loop/tile structure is backend scaffolding; the scalar math is the product and the ``add`` reducer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from compiler.ir.core import Op, Value
from compiler.ir.types import TensorType
from compiler.prims import mlir as ml
from compiler.prims import movement as mv
from compiler.prims.base import Build, Kind, Memory, Primitive, Reducer, fail
from compiler.prims.batch_helpers import all_batched
from compiler.prims.vjp_helpers import Cotangents, Wanted, vjp_rule


def _matmul_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
    a, b = types
    if a.rank < 2 or a.rank != b.rank:
        raise fail(f"matmul: operands need equal rank >= 2, got shapes {a.shape} and {b.shape}")
    if a.shape[:-2] != b.shape[:-2] or a.shape[-1] != b.shape[-2]:
        raise fail(f"matmul: shapes {a.shape} and {b.shape} are not aligned")
    if a.dtype != b.dtype or a.dtype.is_bool:
        raise fail(f"matmul: operands need one numeric dtype, got {a.dtype} and {b.dtype}")
    return [a.with_shape(a.shape[:-1] + b.shape[-1:])]


def matmul_dims(op: Op) -> tuple[int, int, int, int]:
    """A matmul's (batch elements, m, n, k): ``[..., m, k] @ [..., k, n]``, the batch flattened."""
    *batch, m, k = op.operands[0].type.shape
    return int(np.prod(batch, dtype=np.int64)), m, op.result.type.shape[-1], k


def _swap_last_two(build: Build, v: Value) -> Value:
    r = v.type.rank
    return build(mv.transpose, [v], {"perm": tuple(range(r - 2)) + (r - 1, r - 2)})


@vjp_rule
def _matmul_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    # Each side costs a matmul as large as the forward: build only the ones asked for (an input
    # gradient alone must not pay for the weight gradient).
    a, b = op.operands
    ct_a = build(matmul, [ct, _swap_last_two(build, b)], {}) if wanted[0] else None
    ct_b = build(matmul, [_swap_last_two(build, a), ct], {}) if wanted[1] else None
    return (ct_a, ct_b)


def _matmul_batch(build: Build, op: Op, operands: Sequence[Value], batched: Wanted, size: int) -> Value:
    """A batched input times a shared matrix is one matmul with the batch folded into its rows
    (``[B, ..., m, k] @ [k, n]``); otherwise the shared side is broadcast and the batch is one more
    batch axis."""
    a, b = operands
    if batched == (True, False) and b.type.rank == 2:
        rows = int(np.prod(a.type.shape[:-1], dtype=np.int64))
        flat = build(mv.reshape, [a], {"shape": (rows, a.type.shape[-1])})
        out = build(matmul, [flat, b], {})
        return build(mv.reshape, [out], {"shape": a.type.shape[:-1] + b.type.shape[-1:]})
    return build(matmul, all_batched(build, operands, batched, size), {})


matmul = Primitive(
    name="matmul",
    kind=Kind.CONTRACTION,
    nargs=2,
    attrs={},
    shape_rule=_matmul_rule,
    reference=np.matmul,
    memory=Memory(vjp_needs=frozenset({"inputs"})),
    reducer=Reducer(lambda acc, x: f"({acc} + {x})", lambda d: 0, mlir_combine=ml.ADD, reassociable=True),
    mlir=ml.matmul,
    vjp=_matmul_vjp,
    batch=_matmul_batch,
)
