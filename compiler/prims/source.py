"""Sources: ``constant`` (a dense literal) and ``iota`` (indices along one axis)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from compiler.ir.core import Op
from compiler.ir.types import DType, TensorType
from compiler.prims import mlir as ml
from compiler.prims.base import AttrType, EmitContext, Kind, Primitive, fail
from runtime import array_ops


def _constant_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
    value = attrs["value"]
    if not isinstance(value, np.ndarray):
        raise fail(f"constant: attribute 'value' must be an array, got {type(value).__name__}")
    return [TensorType(tuple(value.shape), DType.from_numpy(value.dtype))]


def is_splat(value: np.ndarray) -> bool:
    """One value repeated, bit for bit (the printer writes ``dense<v>``; backends use a literal)."""
    if value.size == 0:
        return False
    bits = np.ascontiguousarray(value).reshape(-1).view(f"u{value.dtype.itemsize}")
    return bool(np.all(bits == bits[0]))


def splat_value(op: Op | None) -> float | int | bool | None:
    """The repeated value of a splat ``constant`` op, else None."""
    if op is None or op.prim is not constant:
        return None
    value: np.ndarray = op.attrs["value"]
    return value.flat[0].item() if is_splat(value) else None


def _constant_emit(ctx: EmitContext, idx: Sequence[str]) -> str:
    value: np.ndarray = ctx.attrs["value"]
    if value.size == 1 or is_splat(value):
        return ctx.const(value.flat[0].item(), ctx.result_type.dtype)
    name = ctx.global_array(value)
    return f"{name}[{', '.join(map(str, idx))}]"  # each index formatted: its use is recorded


constant = Primitive(
    name="constant",
    kind=Kind.SOURCE,
    nargs=0,
    attrs={"value": AttrType.DENSE},
    shape_rule=_constant_rule,
    reference=array_ops.constant,
    emit=_constant_emit,
    mlir=ml.constant,
    differentiable=False,
)


def _iota_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
    shape = tuple(int(d) for d in attrs["shape"])
    dim, dtype = int(attrs["dimension"]), attrs["dtype"]
    if not 0 <= dim < len(shape):
        raise fail(f"iota: dimension {dim} is out of range for shape {shape}")
    if not isinstance(dtype, DType) or dtype.is_bool:
        raise fail(f"iota: dtype must be numeric, got {dtype}")
    return [TensorType(shape, dtype)]


def _iota_emit(ctx: EmitContext, idx: Sequence[str]) -> str:
    return ctx.cast(idx[int(ctx.attrs["dimension"])], ctx.result_type.dtype)


iota = Primitive(
    name="iota",
    kind=Kind.SOURCE,
    nargs=0,
    attrs={"shape": AttrType.INTS, "dimension": AttrType.INT, "dtype": AttrType.DTYPE},
    shape_rule=_iota_rule,
    reference=array_ops.iota,
    emit=_iota_emit,
    mlir=ml.iota,
    differentiable=False,
)
