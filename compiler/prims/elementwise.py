"""Elementwise primitives: unary math, binary arithmetic, comparisons, logic, select, cast, copy.

All operands of an elementwise op have the result's shape (broadcasting is an explicit ``broadcast``
op, inserted by the frontend), so the scalar lowering is written once per op as an expression over
operand names; the backends only supply the loops.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy import special

from compiler.ir.types import DType, TensorType
from compiler.prims.base import AttrType, EmitContext, Kind, Memory, Primitive, Reuse, fail

INPUTS = frozenset({"inputs"})
OUTPUT = frozenset({"output"})
NOTHING: frozenset[str] = frozenset()

# Which dtypes an op accepts: a predicate and the word used in its error message.
FLOAT = (lambda d: d.is_float, "floating-point")
NUMERIC = (lambda d: not d.is_bool, "numeric (not bool)")
BOOL = (lambda d: d.is_bool, "bool")
ANY = (lambda d: True, "any")


def _same_shape_rule(name: str, accepts: tuple[Callable[[DType], bool], str], result_dtype: DType | None):
    ok, what = accepts

    def rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
        first = types[0]
        for t in types[1:]:
            if t.shape != first.shape:
                raise fail(f"{name}: operand shapes differ: {first.shape} vs {t.shape}")
            if t.dtype != first.dtype:
                raise fail(f"{name}: operand dtypes differ: {first.dtype} vs {t.dtype}")
        if not ok(first.dtype):
            raise fail(f"{name} expects {what} operands, got {first.dtype}")
        return [first.with_dtype(result_dtype) if result_dtype else first]

    return rule


def _elementwise(
    name: str,
    nargs: int,
    code: Callable[..., str],
    reference: Callable[..., np.ndarray],
    accepts: tuple[Callable[[DType], bool], str] = NUMERIC,
    vjp_needs: frozenset[str] = NOTHING,
    result_dtype: DType | None = None,
    differentiable: bool = True,
) -> Primitive:
    """``code(ctx, *operand_names)`` is the scalar lowering: an expression over the operands."""

    def emit(ctx: EmitContext, idx: Sequence[str]) -> str:
        return code(ctx, *(ctx.read(k, idx) for k in range(nargs)))

    same_size = result_dtype is None  # a bool result never fits a wider operand buffer exactly
    return Primitive(
        name=name,
        kind=Kind.ELEMENTWISE,
        nargs=nargs,
        attrs={},
        shape_rule=_same_shape_rule(name, accepts, result_dtype),
        reference=reference,
        memory=Memory(
            may_reuse=tuple(range(nargs)) if same_size else (),
            reuse=Reuse.SAME_INDEX if same_size else Reuse.NEVER,
            vjp_needs=vjp_needs,
        ),
        emit=emit,
        differentiable=differentiable,
    )


def _one(ctx: EmitContext, dtype: DType | None = None) -> str:
    return ctx.const(1, dtype or ctx.result_type.dtype)


def _zero(ctx: EmitContext) -> str:
    return ctx.const(0, ctx.result_type.dtype)


def _sign(ctx: EmitContext, x: str) -> str:
    one, zero = _one(ctx), _zero(ctx)
    minus_one = ctx.const(-1, ctx.result_type.dtype)
    # NaN fails both tests and comes back as itself, as np.sign does.
    rest = f"{x}" if ctx.result_type.dtype.is_float else zero
    return f"({one} if {x} > {zero} else ({minus_one} if {x} < {zero} else {rest}))"


def _max(ctx: EmitContext, a: str, b: str) -> str:
    return f"({a} if ({a} > {b} or {a} != {a}) else {b})"  # NaN propagates, as np.maximum


def _min(ctx: EmitContext, a: str, b: str) -> str:
    return f"({a} if ({a} < {b} or {a} != {a}) else {b})"


def _div(ctx: EmitContext, a: str, b: str) -> str:
    return f"({a} / {b})" if ctx.result_type.dtype.is_float else f"({a} // {b})"


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        return np.floor_divide(a, b)
    return np.true_divide(a, b)


def _logistic_ref(x: np.ndarray) -> np.ndarray:
    return special.expit(x)


neg = _elementwise("neg", 1, lambda c, x: f"(-{x})", np.negative)
abs_ = _elementwise("abs", 1, lambda c, x: f"abs({x})", np.abs, vjp_needs=INPUTS)
sign = _elementwise("sign", 1, _sign, np.sign)
exp = _elementwise("exp", 1, lambda c, x: f"math.exp({x})", np.exp, FLOAT, OUTPUT)
log = _elementwise("log", 1, lambda c, x: f"math.log({x})", np.log, FLOAT, INPUTS)
log1p = _elementwise("log1p", 1, lambda c, x: f"math.log1p({x})", np.log1p, FLOAT, INPUTS)
expm1 = _elementwise("expm1", 1, lambda c, x: f"math.expm1({x})", np.expm1, FLOAT, OUTPUT)
sqrt = _elementwise("sqrt", 1, lambda c, x: f"math.sqrt({x})", np.sqrt, FLOAT, OUTPUT)
sin = _elementwise("sin", 1, lambda c, x: f"math.sin({x})", np.sin, FLOAT, INPUTS)
cos = _elementwise("cos", 1, lambda c, x: f"math.cos({x})", np.cos, FLOAT, INPUTS)
tan = _elementwise("tan", 1, lambda c, x: f"math.tan({x})", np.tan, FLOAT, OUTPUT)
tanh = _elementwise("tanh", 1, lambda c, x: f"math.tanh({x})", np.tanh, FLOAT, OUTPUT)
erf = _elementwise("erf", 1, lambda c, x: f"math.erf({x})", special.erf, FLOAT, INPUTS)
logistic = _elementwise(
    "logistic", 1, lambda c, x: f"({_one(c)} / ({_one(c)} + math.exp(-{x})))", _logistic_ref, FLOAT, OUTPUT
)

add = _elementwise("add", 2, lambda c, a, b: f"({a} + {b})", np.add)
sub = _elementwise("sub", 2, lambda c, a, b: f"({a} - {b})", np.subtract)
mul = _elementwise("mul", 2, lambda c, a, b: f"({a} * {b})", np.multiply, vjp_needs=INPUTS)
div = _elementwise("div", 2, _div, _int_div, vjp_needs=frozenset({"inputs", "output"}))
pow_ = _elementwise(
    "pow", 2, lambda c, a, b: f"({a} ** {b})", np.power, vjp_needs=frozenset({"inputs", "output"})
)
max_ = _elementwise("max", 2, _max, np.maximum, ANY, INPUTS)
min_ = _elementwise("min", 2, _min, np.minimum, ANY, INPUTS)


def _compare(name: str, symbol: str, reference: Callable[..., np.ndarray]) -> Primitive:
    return _elementwise(
        name,
        2,
        lambda c, a, b: f"({a} {symbol} {b})",
        reference,
        ANY,
        result_dtype=DType.i1,
        differentiable=False,
    )


eq = _compare("eq", "==", np.equal)
ne = _compare("ne", "!=", np.not_equal)
lt = _compare("lt", "<", np.less)
le = _compare("le", "<=", np.less_equal)
gt = _compare("gt", ">", np.greater)
ge = _compare("ge", ">=", np.greater_equal)

and_ = _elementwise("and", 2, lambda c, a, b: f"({a} and {b})", np.logical_and, BOOL, differentiable=False)
or_ = _elementwise("or", 2, lambda c, a, b: f"({a} or {b})", np.logical_or, BOOL, differentiable=False)
not_ = _elementwise("not", 1, lambda c, x: f"(not {x})", np.logical_not, BOOL, differentiable=False)


def _select_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
    pred, a, b = types
    if pred.dtype is not DType.i1:
        raise fail(f"select: the predicate must be bool, got {pred.dtype}")
    if not (pred.shape == a.shape == b.shape):
        raise fail(f"select: operand shapes differ: {pred.shape}, {a.shape}, {b.shape}")
    if a.dtype != b.dtype:
        raise fail(f"select: branch dtypes differ: {a.dtype} vs {b.dtype}")
    return [a]


def _select_emit(ctx: EmitContext, idx: Sequence[str]) -> str:
    p, a, b = (ctx.read(k, idx) for k in range(3))
    return f"({a} if {p} else {b})"


select = Primitive(
    name="select",
    kind=Kind.ELEMENTWISE,
    nargs=3,
    attrs={},
    shape_rule=_select_rule,
    reference=np.where,
    memory=Memory(may_reuse=(1, 2), reuse=Reuse.SAME_INDEX, vjp_needs=INPUTS),
    emit=_select_emit,
)


def _cast_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
    dtype = attrs["dtype"]
    if not isinstance(dtype, DType):
        raise fail(f"cast: attribute 'dtype' must be a dtype, got {dtype!r}")
    return [types[0].with_dtype(dtype)]


def _cast_emit(ctx: EmitContext, idx: Sequence[str]) -> str:
    x = ctx.read(0, idx)
    target: DType = ctx.attrs["dtype"]
    if target.is_bool:
        return f"({x} != {ctx.const(0, ctx.operand_types[0].dtype)})"
    return f"np.{target.np.name}({x})"


def _cast_ref(x: np.ndarray, dtype: DType) -> np.ndarray:
    return x.astype(dtype.np)


cast = Primitive(
    name="cast",
    kind=Kind.ELEMENTWISE,
    nargs=1,
    attrs={"dtype": AttrType.DTYPE},
    shape_rule=_cast_rule,
    reference=_cast_ref,
    memory=Memory(),
    emit=_cast_emit,
)

copy = _elementwise("copy", 1, lambda c, x: x, np.copy, ANY)

__all__ = ["math"]  # the lowerings above refer to ``math.*`` by name in generated code
