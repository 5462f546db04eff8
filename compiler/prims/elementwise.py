"""Elementwise primitives: unary math, binary arithmetic, comparisons, logic, select, cast, copy.

All operands of an elementwise op have the result's shape (broadcasting is an explicit ``broadcast``
op, inserted by the frontend), so the scalar lowering is written once per op as an expression over
operand names; the backends only supply the loops.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from compiler.ir.core import Op, Value
from compiler.ir.types import DType, TensorType
from compiler.prims import mlir as ml
from compiler.prims import vecmath
from compiler.prims.base import AttrType, Build, EmitContext, Kind, Memory, Primitive, Vjp, fail
from compiler.prims.vjp_helpers import Cotangents, Wanted, emitter, full_like, vjp_rule
from runtime import array_ops

INPUTS = frozenset({"inputs"})
OUTPUT = frozenset({"output"})
NOTHING: frozenset[str] = frozenset()

# Which dtypes an op accepts: a predicate and the word used in its error message.
FLOAT = (lambda d: d.is_float, "floating-point")
NUMERIC = (lambda d: not d.is_bool, "numeric (not bool)")
INTEGER = (lambda d: d.is_int, "integer")
INTEGER_OR_BOOL = (lambda d: not d.is_float, "integer or bool")
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
    vjp: Vjp | None = None,
    *,
    mlir: ml.ScalarRule,
) -> Primitive:
    """``code(ctx, *operand_names)`` is the scalar lowering: an expression over the operands;
    ``mlir`` the same element's math as ``arith``/``math`` ops (``--emit mlir``)."""

    def emit(ctx: EmitContext, idx: Sequence[str]) -> str:
        return code(ctx, *(ctx.read(k, idx) for k in range(nargs)))

    return Primitive(
        name=name,
        kind=Kind.ELEMENTWISE,
        nargs=nargs,
        attrs={},
        shape_rule=_same_shape_rule(name, accepts, result_dtype),
        reference=reference,
        memory=Memory(vjp_needs=vjp_needs),
        emit=emit,
        mlir=ml.elementwise(mlir),
        differentiable=differentiable,
        vjp=vjp,
    )


def _math(name: str) -> Callable[[EmitContext, str], str]:
    """``math.<name>``, or for float32 the vectorizable ``<name>_f32`` helper (compiler/prims/vecmath.py;
    ``SCALAR_HELPERS`` binds it per target)."""
    helper = f"{name}_f32"
    assert helper in vecmath.F32_MATH

    def code(ctx: EmitContext, x: str) -> str:
        return f"{ctx.helper(helper)}({x})" if ctx.result_type.dtype is DType.f32 else f"math.{name}({x})"

    return code


def _one(ctx: EmitContext, dtype: DType | None = None) -> str:
    return ctx.const(1, dtype or ctx.result_type.dtype)


def _zero(ctx: EmitContext) -> str:
    return ctx.const(0, ctx.result_type.dtype)


def _sign(ctx: EmitContext, x: str) -> str:
    one, zero = _one(ctx), _zero(ctx)
    minus_one = ctx.const(-1, ctx.result_type.dtype)
    # NaN fails both tests and comes back as itself, as np.sign does; -0.0 + 0.0 is np.sign's +0.0.
    rest = f"({x} + {zero})" if ctx.result_type.dtype.is_float else zero
    return f"({one} if {x} > {zero} else ({minus_one} if {x} < {zero} else {rest}))"


def _max(ctx: EmitContext, a: str, b: str) -> str:
    return f"({a} if ({a} > {b} or {a} != {a}) else {b})"  # NaN propagates, as np.maximum


def _min(ctx: EmitContext, a: str, b: str) -> str:
    return f"({a} if ({a} < {b} or {a} != {a}) else {b})"


def _div(ctx: EmitContext, a: str, b: str) -> str:
    if ctx.result_type.dtype.is_float:
        return f"({a} / {b})"
    # NumPy's integer floor division: 0 for a zero divisor, and MIN // -1 wraps to MIN. Division
    # by 0 or -1 is never executed (hardware traps on MIN / -1; backends differ on / 0).
    zero, minus_one = _zero(ctx), ctx.const(-1, ctx.result_type.dtype)
    return f"({zero} if {b} == {zero} else ((-{a}) if {b} == {minus_one} else ({a} // {b})))"


# ---- derivatives ------------------------------------------------------------------------------
# Elementwise operands always have the result's shape (the ``broadcast`` rule undoes broadcasting), so
# these rules never reshape. ``vjp_rule`` gives integer and bool operands no cotangent.


@vjp_rule
def _neg_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    return (build(neg, [ct], {}),)


@vjp_rule
def _abs_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    """``ct`` where ``x >= 0``, ``-ct`` elsewhere: JAX's convention, derivative 1 at 0 (PyTorch: 0)."""
    e, (x,) = emitter(build), op.operands
    return (e(select, e(ge, x, full_like(build, 0, x.type)), ct, e(neg, ct)),)


@vjp_rule
def _sign_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    return (None,)  # piecewise constant: the derivative is zero wherever it exists


@vjp_rule
def _exp_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    return (build(mul, [ct, op.result], {}),)


@vjp_rule
def _log_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    return (build(div, [ct, op.operands[0]], {}),)


@vjp_rule
def _log1p_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    (x,) = op.operands
    return (build(div, [ct, build(add, [x, full_like(build, 1, x.type)], {})], {}),)


@vjp_rule
def _expm1_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    out = op.result
    return (build(mul, [ct, build(add, [out, full_like(build, 1, out.type)], {})], {}),)


@vjp_rule
def _sqrt_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    out = op.result
    return (build(div, [ct, build(mul, [full_like(build, 2, out.type), out], {})], {}),)


@vjp_rule
def _sin_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    return (build(mul, [ct, build(cos, op.operands, {})], {}),)


@vjp_rule
def _cos_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    return (build(neg, [build(mul, [ct, build(sin, op.operands, {})], {})], {}),)


@vjp_rule
def _tan_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    e, out = emitter(build), op.result
    return (e(mul, ct, e(add, full_like(build, 1, out.type), e(mul, out, out))),)


@vjp_rule
def _tanh_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    e, out = emitter(build), op.result
    return (e(mul, ct, e(sub, full_like(build, 1, out.type), e(mul, out, out))),)


@vjp_rule
def _erf_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    return (_gaussian(build, ct, op.operands[0], 2 / math.sqrt(math.pi)),)


@vjp_rule
def _erfc_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    return (_gaussian(build, ct, op.operands[0], -2 / math.sqrt(math.pi)),)


def _gaussian(build: Build, ct: Value, x: Value, scale: float) -> Value:
    """``ct * scale * exp(-x**2)``: the derivative of ``erf`` (``scale`` 2/sqrt(pi)) and ``erfc``."""
    e = emitter(build)
    return e(mul, ct, e(mul, full_like(build, scale, x.type), e(exp, e(neg, e(mul, x, x)))))


@vjp_rule
def _logistic_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    e, out = emitter(build), op.result
    return (e(mul, ct, e(mul, out, e(sub, full_like(build, 1, out.type), out))),)


def _one_minus_square(build: Build, x: Value) -> Value:
    return build(sub, [full_like(build, 1, x.type), build(mul, [x, x], {})], {})


def _square_plus(build: Build, x: Value, c: float) -> Value:
    """``x*x + c``."""
    return build(add, [build(mul, [x, x], {}), full_like(build, c, x.type)], {})


@vjp_rule
def _asin_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    e = emitter(build)
    return (e(div, ct, e(sqrt, _one_minus_square(build, op.operands[0]))),)


@vjp_rule
def _acos_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    e = emitter(build)
    return (e(neg, e(div, ct, e(sqrt, _one_minus_square(build, op.operands[0])))),)


@vjp_rule
def _atan_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    return (build(div, [ct, _square_plus(build, op.operands[0], 1)], {}),)


@vjp_rule
def _sinh_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    return (build(mul, [ct, build(cosh, op.operands, {})], {}),)


@vjp_rule
def _cosh_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    return (build(mul, [ct, build(sinh, op.operands, {})], {}),)


@vjp_rule
def _asinh_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    e = emitter(build)
    return (e(div, ct, e(sqrt, _square_plus(build, op.operands[0], 1))),)


@vjp_rule
def _acosh_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    e = emitter(build)
    return (e(div, ct, e(sqrt, _square_plus(build, op.operands[0], -1))),)


@vjp_rule
def _atanh_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    return (build(div, [ct, _one_minus_square(build, op.operands[0])], {}),)


def _log_base_vjp(base: float) -> Vjp:
    @vjp_rule
    def vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
        (x,) = op.operands
        return (build(div, [ct, build(mul, [x, full_like(build, math.log(base), x.type)], {})], {}),)

    return vjp


@vjp_rule
def _atan2_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    # d atan2(y, x) = (x dy - y dx) / (x^2 + y^2); 0 at the origin (where the squares sum to 0), as
    # JAX's rule gives NaN there: the select keeps a second derivative finite too.
    e, (y, x) = emitter(build), op.operands
    zero = full_like(build, 0, x.type)
    norm = e(add, e(mul, x, x), e(mul, y, y))
    safe = e(select, e(gt, norm, zero), norm, full_like(build, 1, x.type))
    scaled = e(div, ct, safe)
    return (e(mul, scaled, x) if wanted[0] else None, e(neg, e(mul, scaled, y)) if wanted[1] else None)


@vjp_rule
def _cbrt_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    e, out = emitter(build), op.result  # d cbrt(x) = 1 / (3 cbrt(x)**2): inf at 0, as JAX's
    return (e(div, ct, e(mul, full_like(build, 3, out.type), e(mul, out, out))),)


@vjp_rule
def _copysign_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    # copysign(x, y) is |x| with y's sign: d/dx = sign(x) sign(y) (sign bits: -0.0 counts negative);
    # d/dy = 0 (piecewise constant in y).
    if not wanted[0]:
        return (None, None)
    e, (x, y) = emitter(build), op.operands
    one = full_like(build, 1, x.type)
    return (e(mul, ct, e(mul, e(copysign, one, x), e(copysign, one, y))), None)


@vjp_rule
def _hypot_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    # d hypot(x, y) = (x dx + y dy) / hypot; 0 at the origin (the least subgradient of the cone; JAX
    # 0.10 gives 0.5 each, from its max/min tie), and its derivative 0 there too (the ratio was ct / 1,
    # so a Hessian at the origin was the identity; JAX's is 0)
    e, (x, y), out = emitter(build), op.operands, op.result
    zero = full_like(build, 0, out.type)
    inside = e(gt, out, zero)
    safe = e(select, inside, out, full_like(build, 1, out.type))
    scaled = e(select, inside, e(div, ct, safe), zero)
    return (e(mul, scaled, x) if wanted[0] else None, e(mul, scaled, y) if wanted[1] else None)


def _libm(
    name: str, ref: Callable[..., np.ndarray], needs: frozenset[str], vjp: Vjp, fast: bool = False
) -> Primitive:
    """A float function of one operand: ``math.<name>`` (``fast``: its vectorizable float32 helper)
    and MLIR's ``math.<name>``."""
    code = _math(name) if fast else lambda c, x: f"math.{name}({x})"
    return _elementwise(name, 1, code, ref, FLOAT, needs, vjp=vjp, mlir=ml.math(name))


def _libm2(
    name: str, ref: Callable[..., np.ndarray], needs: frozenset[str], vjp: Vjp, mlir: ml.ScalarRule
) -> Primitive:
    """A float function of two operands: ``math.<name>``."""
    return _elementwise(
        name, 2, lambda c, x, y: f"math.{name}({x}, {y})", ref, FLOAT, needs, vjp=vjp, mlir=mlir
    )


def _exact(name: str, ref: Callable[..., np.ndarray], needs: frozenset[str], vjp: Vjp) -> Primitive:
    """A float function of one operand computed by ``exactmath``'s ``<name>_f32`` / ``<name>_f64`` on
    both targets (the same bits on the CPU and CUDA)."""

    def code(ctx: EmitContext, x: str) -> str:
        return f"{ctx.helper(f'{name}_{ctx.result_type.dtype.value}')}({x})"

    return _elementwise(name, 1, code, ref, FLOAT, needs, vjp=vjp, mlir=ml.math(name))


neg = _elementwise("neg", 1, lambda c, x: f"(-{x})", np.negative, vjp=_neg_vjp, mlir=ml.neg)
_ABS_MLIR = ml.by_dtype("math.absf", "math.absi")
abs_ = _elementwise("abs", 1, lambda c, x: f"abs({x})", np.abs, NUMERIC, INPUTS, vjp=_abs_vjp, mlir=_ABS_MLIR)
sign = _elementwise("sign", 1, _sign, np.sign, vjp=_sign_vjp, mlir=ml.sign)
exp = _libm("exp", np.exp, OUTPUT, _exp_vjp, fast=True)
log = _libm("log", np.log, INPUTS, _log_vjp, fast=True)
log1p = _exact("log1p", np.log1p, INPUTS, _log1p_vjp)  # (dsl.random.normal's contract: the same bits)
expm1 = _libm("expm1", np.expm1, OUTPUT, _expm1_vjp)
sqrt = _libm("sqrt", np.sqrt, OUTPUT, _sqrt_vjp)
sin = _libm("sin", np.sin, INPUTS, _sin_vjp)
cos = _libm("cos", np.cos, INPUTS, _cos_vjp)
tan = _libm("tan", np.tan, OUTPUT, _tan_vjp)
tanh = _libm("tanh", np.tanh, OUTPUT, _tanh_vjp, fast=True)
erf = _libm("erf", array_ops.erf, INPUTS, _erf_vjp)
erfc = _libm("erfc", array_ops.erfc, INPUTS, _erfc_vjp)  # (1 - erf(x) cancels for x >~ 3: gelu's tail)
# NumPy's inverse trigonometric and hyperbolic functions and logarithms to bases 2 and 10: libm's
# (Numba's ``math``) on the CPU, libdevice's on CUDA (within an ulp or so of each other, as sin's).
asin = _libm("asin", np.arcsin, INPUTS, _asin_vjp)
acos = _libm("acos", np.arccos, INPUTS, _acos_vjp)
atan = _libm("atan", np.arctan, INPUTS, _atan_vjp)
sinh = _libm("sinh", np.sinh, INPUTS, _sinh_vjp)
cosh = _libm("cosh", np.cosh, INPUTS, _cosh_vjp)
asinh = _libm("asinh", np.arcsinh, INPUTS, _asinh_vjp)
acosh = _libm("acosh", np.arccosh, INPUTS, _acosh_vjp)
atanh = _libm("atanh", np.arctanh, INPUTS, _atanh_vjp)
log2 = _libm("log2", np.log2, INPUTS, _log_base_vjp(2.0))
log10 = _libm("log10", np.log10, INPUTS, _log_base_vjp(10.0))
atan2 = _libm2("atan2", np.arctan2, INPUTS, _atan2_vjp, ml.math2("atan2"))
hypot = _libm2("hypot", np.hypot, INPUTS | OUTPUT, _hypot_vjp, ml.hypot)
cbrt = _exact("cbrt", np.cbrt, OUTPUT, _cbrt_vjp)  # musl's: float32 correctly rounded, float64 < 0.67 ulp
copysign = _libm2("copysign", np.copysign, INPUTS, _copysign_vjp, ml.math2("copysign"))
logistic = _elementwise(
    "logistic",
    1,
    lambda c, x: f"({_one(c)} / ({_one(c)} + {_math('exp')(c, f'(-{x})')}))",
    array_ops.logistic,
    FLOAT,
    OUTPUT,
    vjp=_logistic_vjp,
    mlir=ml.logistic,
)


@vjp_rule
def _add_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    return (ct, ct)


@vjp_rule
def _sub_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    return (ct, build(neg, [ct], {}) if wanted[1] else None)


@vjp_rule
def _mul_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    a, b = op.operands
    return (build(mul, [ct, b], {}) if wanted[0] else None, build(mul, [ct, a], {}) if wanted[1] else None)


@vjp_rule
def _div_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    # d(a/b)/db = -(a/b)/b: reuse the output and the a-cotangent ct/b, which both sides need.
    ct_a = build(div, [ct, op.operands[1]], {})
    return (ct_a, build(neg, [build(mul, [ct_a, op.result], {})], {}) if wanted[1] else None)


@vjp_rule
def _pow_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    e, (a, b) = emitter(build), op.operands
    ct_a = ct_b = None
    if wanted[0]:
        # b * a**(b - 1), with a**0 where b == 0 and a == 0 (so 0, not 0 * inf: a**0 is 1 everywhere,
        # PyTorch's rule and JAX's for integer exponents; JAX's float one gives NaN there). Only
        # there: where a != 0 the b == 0 term keeps a**-1, which its derivative in b needs
        # (d2(a**b)/da db = 1/a at b == 0; it was 1, 2026-11-28).
        one = full_like(build, 1, b.type)
        zero_b = e(eq, b, full_like(build, 0, b.type))
        zero_a = e(eq, a, full_like(build, 0, a.type))
        safe_b = e(select, e(and_, zero_b, zero_a), one, b)
        ct_a = e(mul, ct, e(mul, b, e(pow_, a, e(sub, safe_b, one))))
    if wanted[1]:
        # d(a**b)/db = out * log(a): NaN where a < 0 (no real derivative; JAX's), 0 at a == 0 (JAX's
        # choice). The select sits before the log so that no -inf from log(0) reaches a second
        # derivative either (the double-where trick).
        one = full_like(build, 1, a.type)
        safe_a = e(select, e(eq, a, full_like(build, 0, a.type)), one, a)
        ct_b = e(mul, ct, e(mul, op.result, e(log, safe_a)))
    return (ct_a, ct_b)


def _arithmetic(
    name: str, symbol: str, ref: Callable[..., np.ndarray], vjp: Vjp, needs: frozenset[str] = NOTHING
) -> Primitive:
    """``a <symbol> b``; in MLIR ``arith.<name>f`` or ``arith.<name>i``."""
    code, mlir = (lambda c, a, b: _wrapping(c, a, symbol, b)), ml.by_dtype(f"arith.{name}f", f"arith.{name}i")
    return _elementwise(name, 2, code, ref, vjp_needs=needs, vjp=vjp, mlir=mlir)


def _wrapping(ctx: EmitContext, a: str, symbol: str, b: str) -> str:
    """``a <symbol> b`` wrapping on overflow as NumPy's: Numba marks signed integer arithmetic
    ``nsw`` (an overflow is undefined), and LLVM and NVVM use that: ``(x + 1) > x`` of int64 was
    True at the maximum, ``x + (-2**63)`` an ``or``, ``(x * 2) // 2`` the maximum. int64 adds,
    subtracts and multiplies in uint64 (the same bits, no flag); narrower ints are computed in
    int64 by Numba, where they cannot overflow, and cast back."""
    if ctx.result_type.dtype is DType.i64:
        return f"np.int64(np.uint64({a}) {symbol} np.uint64({b}))"
    return f"({a} {symbol} {b})"


def _mul(ctx: EmitContext, a: str, b: str) -> str:
    """A float product as ``mul_f32``/``mul_f64`` (compiler/prims/exactmath.py): rounded once on
    every target, never fused into an add that reads it (NVVM would contract ``a * b + c``)."""
    dtype = ctx.result_type.dtype
    return f"{ctx.helper(f'mul_{dtype.value}')}({a}, {b})" if dtype.is_float else _wrapping(ctx, a, "*", b)


add = _arithmetic("add", "+", np.add, _add_vjp)
sub = _arithmetic("sub", "-", np.subtract, _sub_vjp)
mul = _elementwise(
    "mul", 2, _mul, np.multiply, vjp_needs=INPUTS, vjp=_mul_vjp, mlir=ml.by_dtype("arith.mulf", "arith.muli")
)
div = _elementwise("div", 2, _div, array_ops.divide, vjp_needs=INPUTS | OUTPUT, vjp=_div_vjp, mlir=ml.div)


def _pow(ctx: EmitContext, a: str, b: str) -> str:
    """``a ** b``; integers by ``exactmath.ipow`` (wrapping, any exponent)."""
    dtype = ctx.result_type.dtype
    return f"({a} ** {b})" if dtype.is_float or dtype.is_bool else f"{ctx.helper('ipow')}({a}, {b})"


pow_ = replace(
    _elementwise(
        "pow",
        2,
        _pow,
        np.power,
        vjp_needs=INPUTS | OUTPUT,
        vjp=_pow_vjp,
        mlir=ml.by_dtype("math.powf", "math.ipowi"),
    ),
    # np.power raises on an integer negative exponent (Numba's loops give garbage instead)
    traps=lambda op: not op.result.type.dtype.is_float,
)


def _compare(name: str, symbol: str, reference: Callable[..., np.ndarray], mlir: ml.ScalarRule) -> Primitive:
    return _elementwise(
        name,
        2,
        lambda c, a, b: f"({a} {symbol} {b})",
        reference,
        ANY,
        result_dtype=DType.i1,
        differentiable=False,
        mlir=mlir,
    )


# MLIR predicates for floats (ordered; ``une``: NaN != NaN is true), signed ints, bools (unsigned).
eq = _compare("eq", "==", np.equal, ml.compare("oeq", "eq", "eq"))
ne = _compare("ne", "!=", np.not_equal, ml.compare("une", "ne", "ne"))
lt = _compare("lt", "<", np.less, ml.compare("olt", "slt", "ult"))
le = _compare("le", "<=", np.less_equal, ml.compare("ole", "sle", "ule"))
gt = _compare("gt", ">", np.greater, ml.compare("ogt", "sgt", "ugt"))
ge = _compare("ge", ">=", np.greater_equal, ml.compare("oge", "sge", "uge"))


def _pick_vjp(wins: Primitive) -> Vjp:
    """max/min: the cotangent goes to the operand that was picked; a tie splits it 0.5/0.5 (as JAX
    does, so that max(x, x) has derivative 1). Only the inputs are read, as ``vjp_needs`` says."""

    @vjp_rule
    def rule(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
        e, (a, b) = emitter(build), op.operands
        zero, half = full_like(build, 0, ct.type), full_like(build, 0.5, ct.type)
        tie_share = e(mul, ct, half)

        def share(x: Value, y: Value) -> Value:
            return e(select, e(wins, x, y), ct, e(select, e(eq, x, y), tie_share, zero))

        return (share(a, b) if wanted[0] else None, share(b, a) if wanted[1] else None)

    return rule


# MLIR's maximumf/minimumf propagate NaN, as np.maximum; bools order as unsigned.
_MAX_MLIR = ml.by_dtype("arith.maximumf", "arith.maxsi", "arith.maxui")
_MIN_MLIR = ml.by_dtype("arith.minimumf", "arith.minsi", "arith.minui")
max_ = _elementwise("max", 2, _max, np.maximum, ANY, INPUTS, vjp=_pick_vjp(gt), mlir=_MAX_MLIR)
min_ = _elementwise("min", 2, _min, np.minimum, ANY, INPUTS, vjp=_pick_vjp(lt), mlir=_MIN_MLIR)


# ---- bitwise ------------------------------------------------------------------------------------
# NumPy's bitwise ufuncs on integers; on bools they are the logical operations (``~True`` is False),
# so one primitive serves both (``dsl.numpy.logical_and`` casts to bool first). Floats are refused.


def _invert(ctx: EmitContext, x: str) -> str:
    return f"(not {x})" if ctx.result_type.dtype.is_bool else f"(~{x})"


def _bit_width(ctx: EmitContext) -> int:
    return 8 * ctx.result_type.dtype.itemsize


def _shift_left(ctx: EmitContext, a: str, b: str) -> str:
    # NumPy's npy_lshift on every platform: a count outside [0, width) shifts every bit out. LLVM's
    # shl is undefined there, so the shift only runs on counts it defines.
    return f"(({a} << {b}) if ({b} >= 0 and {b} < {_bit_width(ctx)}) else {_zero(ctx)})"


def _shift_right(ctx: EmitContext, a: str, b: str) -> str:
    # Arithmetic (signed) shift, as npy_rshift: a count outside [0, width) leaves only the sign,
    # which shifting by width - 1 gives (-1 for a negative value, 0 otherwise).
    width = _bit_width(ctx)
    return f"({a} >> ({b} if ({b} >= 0 and {b} < {width}) else {width - 1}))"


def _bitwise(
    name: str,
    nargs: int,
    code: Callable[..., str],
    ref: Callable[..., np.ndarray],
    mlir: ml.ScalarRule,
    accepts=INTEGER_OR_BOOL,
) -> Primitive:
    return _elementwise(name, nargs, code, ref, accepts, differentiable=False, mlir=mlir)


and_ = _bitwise("and", 2, lambda c, a, b: f"({a} & {b})", np.bitwise_and, ml.integer("arith.andi"))
or_ = _bitwise("or", 2, lambda c, a, b: f"({a} | {b})", np.bitwise_or, ml.integer("arith.ori"))
xor = _bitwise("xor", 2, lambda c, a, b: f"({a} ^ {b})", np.bitwise_xor, ml.integer("arith.xori"))
not_ = _bitwise("not", 1, _invert, np.invert, ml.invert)
# Shifts of bools give int8 in NumPy, which the IR has no type for: integers only.
shift_left = _bitwise("shift_left", 2, _shift_left, np.left_shift, ml.shift("arith.shli"), INTEGER)
shift_right = _bitwise("shift_right", 2, _shift_right, np.right_shift, ml.shift("arith.shrsi"), INTEGER)


# Floating-point floor and C's fmod: with select and the comparisons they give NumPy's floor_divide
# and remainder exactly (dsl.numpy composes them as NumPy's npy_divmod does).
_INTEGRAL = 4503599627370496.0  # 2**52: a float at least this large (or inf or NaN) is its own floor


def _floor(ctx: EmitContext, x: str) -> str:
    # math.floor returns an integer in Numba (and fails on inf/NaN): only call it where that is exact.
    # A zero is its own floor, -0.0 included (the integer 0 would drop its sign).
    return f"({x} if not (abs({x}) < {_INTEGRAL!r}) or {x} == 0 else math.floor({x}))"


@vjp_rule
def _floor_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    return (None,)  # piecewise constant: the derivative is zero wherever it exists


@vjp_rule
def _fmod_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    """fmod(a, b) = a - trunc(a / b) * b: d/da = 1, d/db = -trunc(a / b)."""
    e, (a, b) = emitter(build), op.operands
    ct_b = None
    if wanted[1]:
        q = e(div, a, b)
        trunc = e(select, e(lt, q, full_like(build, 0, q.type)), e(neg, e(floor, e(neg, q))), e(floor, q))
        ct_b = e(neg, e(mul, ct, trunc))
    return (ct if wanted[0] else None, ct_b)


floor = _elementwise("floor", 1, _floor, np.floor, FLOAT, vjp=_floor_vjp, mlir=ml.math("floor"))
# Scalar functions a lowering names that Numba's targets spell differently: name -> target -> spelling.
# Every generated module's prelude binds them (the CPU target has np.fmod but no math.fmod; the CUDA
# target has math.fmod but no np.fmod).
# The CPU spellings of the float32 helpers are their definitions (vecmath.helper_source, rendered
# only where a module names them); the GPU's libdevice math is vectorized already.
SCALAR_HELPERS = {
    "fmod": {"cpu": "np.fmod", "cuda": "math.fmod"},
    **{name: {"cpu": "", "cuda": f"math.{name.removesuffix('_f32')}"} for name in vecmath.F32_MATH},
}


def _fmod(ctx: EmitContext, a: str, b: str) -> str:
    if ctx.result_type.dtype.is_float:
        return f"fmod({a}, {b})"
    # C's integer remainder (the sign of a) from the floored one Numba's % computes (the sign of b);
    # 0 for a zero divisor as np.fmod, and for -1, whose division by MIN traps.
    zero, minus_one = _zero(ctx), ctx.const(-1, ctx.result_type.dtype)
    floored = f"({a} % {b})"
    differ = f"({floored} != {zero} and (({a} < {zero}) != ({b} < {zero})))"
    return (
        f"({zero} if ({b} == {zero} or {b} == {minus_one}) else ({floored} - ({b} if {differ} else {zero})))"
    )


fmod = _elementwise("fmod", 2, _fmod, np.fmod, NUMERIC, INPUTS, vjp=_fmod_vjp, mlir=ml.fmod)


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


@vjp_rule
def _select_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    pred = op.operands[0]  # bool: never wanted
    zero = full_like(build, 0, ct.type)
    return (
        None,
        build(select, [pred, ct, zero], {}) if wanted[1] else None,
        build(select, [pred, zero, ct], {}) if wanted[2] else None,
    )


select = Primitive(
    name="select",
    kind=Kind.ELEMENTWISE,
    nargs=3,
    attrs={},
    shape_rule=_select_rule,
    reference=array_ops.select,
    memory=Memory(vjp_needs=INPUTS),
    emit=_select_emit,
    mlir=ml.elementwise(ml.select),
    vjp=_select_vjp,
)


def _cast_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
    dtype = attrs["dtype"]
    if not isinstance(dtype, DType):
        raise fail(f"cast: attribute 'dtype' must be a dtype, got {dtype!r}")
    return [types[0].with_dtype(dtype)]


def _cast_emit(ctx: EmitContext, idx: Sequence[str]) -> str:
    x = ctx.read(0, idx)
    target: DType = ctx.attrs["dtype"]
    source = ctx.operand_types[0].dtype
    if target.is_bool:
        return f"({x} != {ctx.const(0, source)})"
    if source.is_float and target.is_int:
        # NaN, infinities and values outside the integer's range give its minimum (array_ops.cast):
        # the conversion alone is undefined there (LLVM: poison; a GPU saturates, NaN to 0)
        low = int(np.iinfo(target.np).min)
        inside = f"(({x} >= {ctx.const(float(low), source)}) & ({x} < {ctx.const(-float(low), source)}))"
        return f"({ctx.cast(x, target)} if {inside} else {ctx.const(low, target)})"
    return ctx.cast(x, target)


@vjp_rule
def _cast_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    # Only float -> float carries a derivative; a float -> int/bool result is piecewise constant.
    if not op.result.type.dtype.is_float:
        return (None,)
    return (build(cast, [ct], {"dtype": op.operands[0].type.dtype}),)


cast = Primitive(
    name="cast",
    kind=Kind.ELEMENTWISE,
    nargs=1,
    attrs={"dtype": AttrType.DTYPE},
    shape_rule=_cast_rule,
    reference=array_ops.cast,
    memory=Memory(),
    emit=_cast_emit,
    mlir=ml.elementwise(ml.cast),
    vjp=_cast_vjp,
)


@vjp_rule
def _copy_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    return (ct,)


@vjp_rule
def _stop_gradient_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    return (None,)


copy = _elementwise("copy", 1, lambda c, x: x, np.copy, ANY, vjp=_copy_vjp, mlir=ml.identity)
# The identity whose derivative is declared zero (``dsl.stop_gradient``). Autodiff runs before
# ``simplify``, which then removes it like a copy.
stop_gradient = _elementwise(
    "stop_gradient", 1, lambda c, x: x, np.copy, ANY, vjp=_stop_gradient_vjp, mlir=ml.identity
)


# Ops whose scalar lowering costs a polynomial or a libm call per element (not worth recomputing).
TRANSCENDENTAL = frozenset({exp, log, log1p, expm1, sin, cos, tan, tanh, erf, erfc, logistic, pow_})
# Those computed by compiler/prims/exactmath.py's helpers on every target, in both dtypes (the same
# bits on the CPU and CUDA): never by libm or NumPy, and vectorizable.
EXACT = frozenset({log1p})
# Those of them whose float32 lowering is a vectorizable helper (compiler/prims/vecmath.py).
VECTORIZED_F32 = frozenset({exp, log, tanh, logistic})


def _polynomial(op: Op) -> bool:
    """A float32 function with a vectorizable polynomial (compiler/prims/vecmath.py)."""
    return op.prim in VECTORIZED_F32 and op.result.type.dtype is DType.f32


def libm_bound(op: Op, vector_math: bool = True) -> bool:
    """Whether ``op``'s CPU lowering calls libm per element, which stops LLVM's loop vectorizer
    (llvmlite has no SVML): the CPU backend runs big groups containing one through NumPy's
    vectorized ufuncs instead (compiler/kernel/arraylevel.py)."""
    return op.prim in TRANSCENDENTAL and op.prim not in EXACT and not (vector_math and _polynomial(op))


def cheap_to_recompute(op: Op) -> bool:
    """Cheap enough to compute again in each kernel that reads it: arithmetic, or a float32 function
    with a vectorized polynomial (~20 flops per element, less than writing the value to memory and
    reading it back on the CPU, far less on a GPU)."""
    return op.prim not in TRANSCENDENTAL or _polynomial(op)
