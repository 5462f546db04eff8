"""Scalar bodies of the MLIR export: each primitive's element math as ``arith``/``math`` ops.

``SCALAR_OPS`` holds one rule per elementwise primitive, ``COMBINERS`` one per reduction; a rule
writes straight-line ops into a ``Body`` (the region of one ``linalg.generic``) and returns the name
of its result. Integer division floors and max/min propagate NaN, as the primitives' NumPy
references do; what ``arith`` leaves undefined and NumPy defines (integer division by 0, MIN / -1,
shift counts outside the width) is selected around; bools order as unsigned integers (false < true).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from compiler.ir.printer import format_float
from compiler.ir.types import DType
from compiler.prims import Primitive
from compiler.prims import elementwise as ew
from compiler.prims import reduction as red


class Body:
    """The scalar region of one ``linalg.generic``: straight-line ``arith``/``math`` ops."""

    def __init__(self, fresh: Callable[[], str]) -> None:
        self.fresh = fresh
        self.lines: list[str] = []

    def emit(self, rhs: str) -> str:
        name = self.fresh()
        self.lines.append(f"{name} = {rhs}")
        return name

    def const(self, value: float | int | bool, dtype: DType) -> str:
        if dtype.is_bool:
            return self.emit(f"arith.constant {'true' if value else 'false'}")
        text = format_float(value, dtype) if dtype.is_float else str(int(value))
        return self.emit(f"arith.constant {text} : {dtype}")


# A scalar rule: (body, operand names, operand dtypes, result dtype, op attributes) -> result name.
ScalarRule = Callable[[Body, Sequence[str], Sequence[DType], DType, Any], str]


def _by_dtype(float_op: str, int_op: str, bool_op: str | None = None) -> ScalarRule:
    """One ``arith``/``math`` op chosen by the operands' dtype (bools order as unsigned)."""

    def rule(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
        d = ts[0]
        op = float_op if d.is_float else (bool_op or int_op) if d.is_bool else int_op
        return b.emit(f"{op} {', '.join(xs)} : {d}")

    return rule


def _math(name: str) -> ScalarRule:
    return lambda b, xs, ts, out, attrs: b.emit(f"math.{name} {xs[0]} : {ts[0]}")


def _compare(fpred: str, ipred: str, upred: str) -> ScalarRule:
    def rule(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
        d = ts[0]
        if d.is_float:
            return b.emit(f"arith.cmpf {fpred}, {xs[0]}, {xs[1]} : {d}")
        return b.emit(f"arith.cmpi {upred if d.is_bool else ipred}, {xs[0]}, {xs[1]} : {d}")

    return rule


def _neg(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
    if ts[0].is_float:
        return b.emit(f"arith.negf {xs[0]} : {ts[0]}")
    return b.emit(f"arith.subi {b.const(0, ts[0])}, {xs[0]} : {ts[0]}")


def _sign(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
    """1 above zero, -1 below, else the operand itself for floats (0, -0 and NaN), 0 for ints."""
    (x,), d = xs, ts[0]
    gt, lt = _compare("ogt", "sgt", "ugt"), _compare("olt", "slt", "ult")
    zero = b.const(0, d)
    rest = x if d.is_float else zero
    below = b.emit(f"arith.select {lt(b, [x, zero], ts, out, attrs)}, {b.const(-1, d)}, {rest} : {d}")
    return b.emit(f"arith.select {gt(b, [x, zero], ts, out, attrs)}, {b.const(1, d)}, {below} : {d}")


def _logistic(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
    d = ts[0]
    e = b.emit(f"math.exp {b.emit(f'arith.negf {xs[0]} : {d}')} : {d}")
    one = b.const(1, d)
    return b.emit(f"arith.divf {one}, {b.emit(f'arith.addf {one}, {e} : {d}')} : {d}")


def _not(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
    """Bitwise invert: xor with all ones (``true`` for i1, -1 for integers)."""
    d = ts[0]
    ones = b.const(True, d) if d.is_bool else b.const(-1, d)
    return b.emit(f"arith.xori {xs[0]}, {ones} : {d}")


def _int_guard(b: Body, divisor: str, d: DType) -> tuple[str, str, str, str]:
    """For integer division by ``divisor``: (is it 0, is it -1, either, a divisor safe to divide by).
    Division by 0 and MIN / -1 are undefined in ``arith``; NumPy defines both, so they never reach it."""
    is_zero = b.emit(f"arith.cmpi eq, {divisor}, {b.const(0, d)} : {d}")
    is_minus_one = b.emit(f"arith.cmpi eq, {divisor}, {b.const(-1, d)} : {d}")
    bad = b.emit(f"arith.ori {is_zero}, {is_minus_one} : i1")
    safe = b.emit(f"arith.select {bad}, {b.const(1, d)}, {divisor} : {d}")
    return is_zero, is_minus_one, bad, safe


def _div(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
    """Float division, or NumPy's integer floor division: 0 for a zero divisor, MIN // -1 = MIN."""
    (x, y), d = xs, ts[0]
    if d.is_float:
        return b.emit(f"arith.divf {x}, {y} : {d}")
    is_zero, is_minus_one, _, safe = _int_guard(b, y, d)
    quotient = b.emit(f"arith.floordivsi {x}, {safe} : {d}")  # floors, as Python's //
    negated = b.emit(f"arith.subi {b.const(0, d)}, {x} : {d}")  # wraps at MIN, as NumPy
    by_minus_one = b.emit(f"arith.select {is_minus_one}, {negated}, {quotient} : {d}")
    return b.emit(f"arith.select {is_zero}, {b.const(0, d)}, {by_minus_one} : {d}")


def _fmod(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
    """C's fmod (the sign of the dividend): ``remf``, or ``remsi`` with 0 for divisors 0 and -1."""
    (x, y), d = xs, ts[0]
    if d.is_float:
        return b.emit(f"arith.remf {x}, {y} : {d}")
    _, _, bad, safe = _int_guard(b, y, d)
    return b.emit(f"arith.select {bad}, {b.const(0, d)}, {b.emit(f'arith.remsi {x}, {safe} : {d}')} : {d}")


def _shift(op: str) -> ScalarRule:
    """``shli``/``shrsi`` with NumPy's result for counts outside [0, width), where ``arith`` is
    undefined: 0 for a left shift, the sign (a shift by width - 1) for a right shift."""

    def rule(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
        (x, n), d = xs, ts[0]
        width = 8 * d.itemsize
        in_range = b.emit(f"arith.cmpi ult, {n}, {b.const(width, d)} : {d}")  # negative is huge unsigned
        count = b.emit(f"arith.select {in_range}, {n}, {b.const(width - 1, d)} : {d}")
        shifted = b.emit(f"{op} {x}, {count} : {d}")
        if op == "arith.shrsi":
            return shifted
        return b.emit(f"arith.select {in_range}, {shifted}, {b.const(0, d)} : {d}")

    return rule


def _select(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
    return b.emit(f"arith.select {xs[0]}, {xs[1]}, {xs[2]} : {out}")


def _identity(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
    return xs[0]


def _cast(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
    (x,), s = xs, ts[0]
    if s is out:
        return x
    if out.is_bool:  # nonzero is true, as NumPy's astype(bool); NaN is nonzero
        pred = "une" if s.is_float else "ne"
        return b.emit(f"arith.cmp{'f' if s.is_float else 'i'} {pred}, {x}, {b.const(0, s)} : {s}")
    if s.is_float and out.is_float:
        op = "arith.extf" if out.itemsize > s.itemsize else "arith.truncf"
    elif s.is_float:
        op = "arith.fptosi"
    elif out.is_float:
        op = "arith.uitofp" if s.is_bool else "arith.sitofp"
    else:
        op = "arith.extui" if s.is_bool else "arith.extsi" if out.itemsize > s.itemsize else "arith.trunci"
    return b.emit(f"{op} {x} : {s} to {out}")


SCALAR_OPS: dict[Primitive, ScalarRule] = {
    ew.neg: _neg,
    ew.abs_: _by_dtype("math.absf", "math.absi"),
    ew.sign: _sign,
    **{p: _math(p.name) for p in (ew.exp, ew.log, ew.log1p, ew.expm1, ew.sqrt, ew.sin, ew.cos)},
    **{p: _math(p.name) for p in (ew.tan, ew.tanh, ew.erf)},
    ew.logistic: _logistic,
    ew.add: _by_dtype("arith.addf", "arith.addi"),
    ew.sub: _by_dtype("arith.subf", "arith.subi"),
    ew.mul: _by_dtype("arith.mulf", "arith.muli"),
    ew.div: _div,
    ew.floor: _math("floor"),
    ew.fmod: _fmod,
    ew.pow_: _by_dtype("math.powf", "math.ipowi"),
    ew.eq: _compare("oeq", "eq", "eq"),
    ew.ne: _compare("une", "ne", "ne"),  # NaN != NaN is true
    ew.lt: _compare("olt", "slt", "ult"),
    ew.le: _compare("ole", "sle", "ule"),
    ew.gt: _compare("ogt", "sgt", "ugt"),
    ew.ge: _compare("oge", "sge", "uge"),
    ew.max_: _by_dtype("arith.maximumf", "arith.maxsi", "arith.maxui"),  # maximumf propagates NaN
    ew.min_: _by_dtype("arith.minimumf", "arith.minsi", "arith.minui"),
    ew.and_: _by_dtype("arith.andi", "arith.andi"),
    ew.or_: _by_dtype("arith.ori", "arith.ori"),
    ew.xor: _by_dtype("arith.xori", "arith.xori"),
    ew.not_: _not,
    ew.shift_left: _shift("arith.shli"),
    ew.shift_right: _shift("arith.shrsi"),
    ew.select: _select,
    ew.cast: _cast,
    ew.copy: _identity,
    ew.stop_gradient: _identity,
}
# Combiners of the reductions, combine(element, accumulator); bools order as unsigned (max = or).
COMBINERS: dict[Primitive, ScalarRule] = {
    red.reduce_sum: _by_dtype("arith.addf", "arith.addi"),
    red.reduce_max: _by_dtype("arith.maximumf", "arith.maxsi", "arith.ori"),
    red.reduce_min: _by_dtype("arith.minimumf", "arith.minsi", "arith.andi"),
}
