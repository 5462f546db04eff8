"""Lowerings to upstream MLIR (``func``, ``arith``, ``math``, ``tensor``, ``linalg``) for ``--emit mlir``.

Each primitive's definition names its lowering (``Primitive.mlir``; a reduction's combiner is
``Reducer.mlir_combine``). This module is the vocabulary they are written in:

- a ``Builder`` is where a lowering writes lines and gets fresh SSA names; the exporter
  (``compiler/codegen/mlir_export.py``) is one, and so is the ``Body`` of a ``linalg.generic``;
- a ``ScalarRule`` writes one element's math into a ``Body`` as straight-line ``arith``/``math``
  ops (elementwise ops and combiners); ``elementwise(rule)`` makes it an op's lowering: a
  ``linalg.generic`` with identity indexing maps;
- an ``OpRule`` lowers a whole op: most take the general path, a ``linalg.generic`` whose indexing
  maps say which operand element each output element reads (a projection for broadcast and
  reductions, a permutation for transpose, ``n - 1 - d`` to reverse an axis); the others map to the
  ``tensor`` dialect (slices, padding, reshapes) or to named ``linalg`` ops (``matmul``, ``fill``).

Integer division floors and max/min propagate NaN, as the primitives' NumPy references do; what
``arith`` leaves undefined and NumPy defines (integer division by 0, MIN / -1, shift counts outside
the width, float-to-int conversions of NaN or past the range) is selected around; bools order as
unsigned integers (false < true).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from compiler.ir.printer import format_dense, format_float
from compiler.ir.types import DType, TensorType

if TYPE_CHECKING:
    from compiler.ir.core import Op


class Builder(Protocol):
    """Where a lowering writes: ``lines`` of text, ``fresh`` SSA names (one counter per function)."""

    lines: list[str]

    def fresh(self) -> str: ...


def emit(b: Builder, rhs: str) -> str:
    """One op ``%n = rhs``; returns ``%n``."""
    name = b.fresh()
    b.lines.append(f"{name} = {rhs}")
    return name


def const(b: Builder, value: float | int | bool, dtype: DType) -> str:
    if dtype.is_bool:
        return emit(b, f"arith.constant {'true' if value else 'false'}")
    text = format_float(value, dtype) if dtype.is_float else str(int(value))
    return emit(b, f"arith.constant {text} : {dtype}")


class Body:
    """The scalar region of one ``linalg.generic``: straight-line ``arith``/``math`` ops."""

    def __init__(self, fresh: Callable[[], str]) -> None:
        self.fresh = fresh
        self.lines: list[str] = []

    def emit(self, rhs: str) -> str:
        return emit(self, rhs)

    def const(self, value: float | int | bool, dtype: DType) -> str:
        return const(self, value, dtype)


# A scalar rule: (body, operand names, operand dtypes, result dtype, op attributes) -> result name.
ScalarRule = Callable[[Body, Sequence[str], Sequence[DType], DType, Any], str]
# An op's lowering: (builder, op, operand names, location text) -> result name.
OpRule = Callable[[Builder, "Op", list[str], str], str]


# ---- scalar rules ------------------------------------------------------------------------------


def by_dtype(float_op: str, int_op: str, bool_op: str | None = None) -> ScalarRule:
    """One ``arith``/``math`` op chosen by the operands' dtype (bools order as unsigned)."""

    def rule(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
        d = ts[0]
        op = float_op if d.is_float else (bool_op or int_op) if d.is_bool else int_op
        return b.emit(f"{op} {', '.join(xs)} : {d}")

    return rule


def integer(op: str) -> ScalarRule:
    """An integer op that bools (i1) take too: the bitwise ones."""
    return by_dtype(op, op)


def math(name: str) -> ScalarRule:
    return lambda b, xs, ts, out, attrs: b.emit(f"math.{name} {xs[0]} : {ts[0]}")


def compare(fpred: str, ipred: str, upred: str) -> ScalarRule:
    def rule(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
        d = ts[0]
        if d.is_float:
            return b.emit(f"arith.cmpf {fpred}, {xs[0]}, {xs[1]} : {d}")
        return b.emit(f"arith.cmpi {upred if d.is_bool else ipred}, {xs[0]}, {xs[1]} : {d}")

    return rule


def neg(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
    if ts[0].is_float:
        return b.emit(f"arith.negf {xs[0]} : {ts[0]}")
    return b.emit(f"arith.subi {b.const(0, ts[0])}, {xs[0]} : {ts[0]}")


def sign(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
    """1 above zero, -1 below, else the operand itself for floats (0, -0 and NaN), 0 for ints."""
    (x,), d = xs, ts[0]
    gt, lt = compare("ogt", "sgt", "ugt"), compare("olt", "slt", "ult")
    zero = b.const(0, d)
    rest = x if d.is_float else zero
    below = b.emit(f"arith.select {lt(b, [x, zero], ts, out, attrs)}, {b.const(-1, d)}, {rest} : {d}")
    return b.emit(f"arith.select {gt(b, [x, zero], ts, out, attrs)}, {b.const(1, d)}, {below} : {d}")


def math2(name: str) -> ScalarRule:
    """A binary ``math.<name>`` (``math.atan2``)."""
    return lambda b, xs, ts, out, attrs: b.emit(f"math.{name} {xs[0]}, {xs[1]} : {ts[0]}")


def hypot(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
    """``sqrt(x*x + y*y)`` (the math dialect has no hypot; the backends call libm's, which does not
    overflow where the squares would)."""
    (x, y), d = xs, ts[0]
    xx, yy = b.emit(f"arith.mulf {x}, {x} : {d}"), b.emit(f"arith.mulf {y}, {y} : {d}")
    return b.emit(f"math.sqrt {b.emit(f'arith.addf {xx}, {yy} : {d}')} : {d}")


def logistic(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
    d = ts[0]
    e = b.emit(f"math.exp {b.emit(f'arith.negf {xs[0]} : {d}')} : {d}")
    one = b.const(1, d)
    return b.emit(f"arith.divf {one}, {b.emit(f'arith.addf {one}, {e} : {d}')} : {d}")


def invert(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
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


def div(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
    """Float division, or NumPy's integer floor division: 0 for a zero divisor, MIN // -1 = MIN."""
    (x, y), d = xs, ts[0]
    if d.is_float:
        return b.emit(f"arith.divf {x}, {y} : {d}")
    is_zero, is_minus_one, _, safe = _int_guard(b, y, d)
    quotient = b.emit(f"arith.floordivsi {x}, {safe} : {d}")  # floors, as Python's //
    negated = b.emit(f"arith.subi {b.const(0, d)}, {x} : {d}")  # wraps at MIN, as NumPy
    by_minus_one = b.emit(f"arith.select {is_minus_one}, {negated}, {quotient} : {d}")
    return b.emit(f"arith.select {is_zero}, {b.const(0, d)}, {by_minus_one} : {d}")


def fmod(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
    """C's fmod (the sign of the dividend): ``remf``, or ``remsi`` with 0 for divisors 0 and -1."""
    (x, y), d = xs, ts[0]
    if d.is_float:
        return b.emit(f"arith.remf {x}, {y} : {d}")
    _, _, bad, safe = _int_guard(b, y, d)
    return b.emit(f"arith.select {bad}, {b.const(0, d)}, {b.emit(f'arith.remsi {x}, {safe} : {d}')} : {d}")


def shift(op: str) -> ScalarRule:
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


def select(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
    return b.emit(f"arith.select {xs[0]}, {xs[1]}, {xs[2]} : {out}")


def identity(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
    return xs[0]


def cast(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
    (x,), s = xs, ts[0]
    if s is out:
        return x
    if out.is_bool:  # nonzero is true, as NumPy's astype(bool); NaN is nonzero
        pred = "une" if s.is_float else "ne"
        return b.emit(f"arith.cmp{'f' if s.is_float else 'i'} {pred}, {x}, {b.const(0, s)} : {s}")
    if s.is_float and out.is_float:
        op = "arith.extf" if out.itemsize > s.itemsize else "arith.truncf"
    elif s.is_float:  # NaN, infinities and values past the range: the minimum (fptosi: poison)
        low = int(np.iinfo(out.np).min)
        above = b.emit(f"arith.cmpf oge, {x}, {b.const(float(low), s)} : {s}")
        below = b.emit(f"arith.cmpf olt, {x}, {b.const(-float(low), s)} : {s}")
        inside = b.emit(f"arith.andi {above}, {below} : i1")
        converted = b.emit(f"arith.fptosi {x} : {s} to {out}")
        return b.emit(f"arith.select {inside}, {converted}, {b.const(low, out)} : {out}")
    elif out.is_float:
        op = "arith.uitofp" if s.is_bool else "arith.sitofp"
    else:
        op = "arith.extui" if s.is_bool else "arith.extsi" if out.itemsize > s.itemsize else "arith.trunci"
    return b.emit(f"{op} {x} : {s} to {out}")


ADD = by_dtype("arith.addf", "arith.addi")
MUL = by_dtype("arith.mulf", "arith.muli")


# ---- linalg.generic ----------------------------------------------------------------------------


def _dims(rank: int) -> list[str]:
    return [f"d{i}" for i in range(rank)]


def affine_map(rank: int, results: Sequence[str]) -> str:
    return f"affine_map<({', '.join(_dims(rank))}) -> ({', '.join(results)})>"


def empty(b: Builder, t: TensorType) -> str:
    return emit(b, f"tensor.empty() : {t}")


def filled(b: Builder, t: TensorType, value: float | int | bool) -> str:
    """``linalg.fill`` of a new tensor with a scalar (the init of reductions and matmuls)."""
    body = Body(b.fresh)
    scalar = body.const(value, t.dtype)
    b.lines += body.lines
    return emit(b, f"linalg.fill ins({scalar} : {t.dtype}) outs({empty(b, t)} : {t}) -> {t}")


def generic(
    b: Builder,
    out: TensorType,
    inputs: Sequence[tuple[str, TensorType, str]],  # (name, type, indexing map)
    body: Callable[[Body, list[str], str], str],  # (body, input scalars, accumulator) -> yielded
    rank: int | None = None,
    reduced: Sequence[int] = (),
    init: str | None = None,
    loc: str = "",
) -> str:
    """A ``linalg.generic`` over ``rank`` loops (the output's rank unless reducing)."""
    rank = out.rank if rank is None else rank
    out_map = affine_map(rank, [f"d{i}" for i in range(rank) if i not in reduced])
    maps = ", ".join([m for _, _, m in inputs] + [out_map])
    iters = ", ".join('"reduction"' if i in reduced else '"parallel"' for i in range(rank))
    init = init or empty(b, out)
    ins = ""
    if inputs:
        ins = f" ins({', '.join(n for n, _, _ in inputs)} : {', '.join(str(t) for _, t, _ in inputs)})"
    name = b.fresh()  # named before its region, so SSA numbers read in order
    block = Body(b.fresh)
    args = [block.fresh() for _ in inputs]
    acc = block.fresh()
    params = [f"{a}: {t.dtype}" for a, (_, t, _) in zip(args, inputs)] + [f"{acc}: {out.dtype}"]
    result = body(block, args, acc)
    b.lines.append(
        f"{name} = linalg.generic {{indexing_maps = [{maps}], iterator_types = [{iters}]}}"
        f"{ins} outs({init} : {out}) {{"
    )
    b.lines.append(f"^bb0({', '.join(params)}):")
    b.lines += [f"  {line}" for line in block.lines]
    b.lines.append(f"  linalg.yield {result} : {out.dtype}")
    b.lines.append(f"}} -> {out} {loc}".rstrip())
    return name


def gather(b: Builder, x: str, xt: TensorType, out: TensorType, exprs: Sequence[str], loc: str = "") -> str:
    """``out[d] = x[exprs(d)]``: broadcast, transpose and axis reversal in one form."""
    return generic(b, out, [(x, xt, affine_map(out.rank, exprs))], lambda body, xs, acc: xs[0], loc=loc)


def reverse(b: Builder, x: str, t: TensorType, axes: Sequence[int]) -> str:
    if not axes or t.size == 0:
        return x
    exprs = [f"{n - 1} - d{i}" if i in axes else f"d{i}" for i, n in enumerate(t.shape)]
    return gather(b, x, t, t, exprs)


# ---- op rules ----------------------------------------------------------------------------------


def elementwise(rule: ScalarRule) -> OpRule:
    """An elementwise op: ``rule`` as the body of a ``linalg.generic`` with identity maps."""

    def lower(b: Builder, op: Op, xs: list[str], loc: str) -> str:
        out = op.result.type
        ident = affine_map(out.rank, _dims(out.rank))
        inputs = [(x, v.type, ident) for x, v in zip(xs, op.operands)]
        in_types = [v.type.dtype for v in op.operands]
        return generic(
            b, out, inputs, lambda body, a, acc: rule(body, a, in_types, out.dtype, op.attrs), loc=loc
        )

    return lower


def reduction(b: Builder, op: Op, xs: list[str], loc: str) -> str:
    """A ``linalg.generic`` with the reduced axes as reduction loops, from the reducer's identity,
    combining each element into the accumulator with ``Reducer.mlir_combine``."""
    xt, out = op.operands[0].type, op.result.type
    axes = [int(a) for a in op.attrs["axes"]]
    reducer = op.prim.reducer
    assert reducer is not None
    init = filled(b, out, reducer.identity(out.dtype))
    return generic(
        b,
        out,
        [(xs[0], xt, affine_map(xt.rank, _dims(xt.rank)))],
        lambda body, a, acc: reducer.mlir_combine(
            body, [a[0], acc], [xt.dtype, xt.dtype], out.dtype, op.attrs
        ),
        rank=xt.rank,
        reduced=axes,
        init=init,
        loc=loc,
    )


def open_nest(b: Builder, shape: Sequence[int], init: str, t: TensorType) -> tuple[list[str], str, list[str]]:
    """``scf.for`` loops over every index of ``shape``, outermost first, each carrying a tensor of
    type ``t`` (``init`` first): the induction variables, the tensor the innermost body updates, and
    the loops' results (``close_nest`` ends them)."""
    c0, c1 = emit(b, "arith.constant 0 : index"), emit(b, "arith.constant 1 : index")
    acc, ivs, results = init, [], []
    for d in shape:
        iv, carried, stop = b.fresh(), b.fresh(), emit(b, f"arith.constant {d} : index")
        name = b.fresh()
        b.lines.append(
            f"{name} = scf.for {iv} = {c0} to {stop} step {c1} iter_args({carried} = {acc}) -> ({t}) {{"
        )
        ivs.append(iv)
        results.append(name)
        acc = carried
    return ivs, acc, results


def close_nest(b: Builder, results: Sequence[str], inner: str, t: TensorType, loc: str) -> str:
    """Yield ``inner`` from the loops ``open_nest`` opened; returns the outermost loop's result."""
    for name in reversed(results):
        b.lines.append(f"scf.yield {inner} : {t}")
        b.lines.append("}")
        inner = name
    b.lines[-1] = f"}} {loc}".rstrip()
    return results[0]


def broadcast(b: Builder, op: Op, xs: list[str], loc: str) -> str:
    xt, out = op.operands[0].type, op.result.type
    off = out.rank - xt.rank
    exprs = [f"d{off + j}" if d == out.shape[off + j] else "0" for j, d in enumerate(xt.shape)]
    return gather(b, xs[0], xt, out, exprs, loc)


def transpose(b: Builder, op: Op, xs: list[str], loc: str) -> str:
    perm = [int(p) for p in op.attrs["perm"]]
    exprs = [""] * len(perm)
    for i, p in enumerate(perm):
        exprs[p] = f"d{i}"
    return gather(b, xs[0], op.operands[0].type, op.result.type, exprs, loc)


def reshape(b: Builder, op: Op, xs: list[str], loc: str) -> str:
    """Collapse to one dimension, then expand to the new shape (views once bufferized)."""
    xt, out = op.operands[0].type, op.result.type
    flat, x = xt.with_shape((xt.size,)), xs[0]
    if xt.rank != 1:
        groups = f"[{list(range(xt.rank))}]" if xt.rank else "[]"
        verb = "collapse_shape" if xt.rank else "expand_shape"
        shape = "" if xt.rank else " output_shape [1]"
        x = emit(b, f"tensor.{verb} {x} {groups}{shape} : {xt} into {flat} {loc}".rstrip())
    if out.rank == 1:
        return x
    if out.rank == 0:
        return emit(b, f"tensor.collapse_shape {x} [] : {flat} into {out} {loc}".rstrip())
    dims = ", ".join(str(d) for d in out.shape)
    return emit(
        b, f"tensor.expand_shape {x} [{list(range(out.rank))}] output_shape [{dims}] : {flat} into {out}"
    )


def _region(op: Op, region: Sequence[int]) -> tuple[list[int], list[int], list[int], list[int]]:
    """``start:limit:stride`` per axis as ``tensor`` slice offsets, sizes, positive strides, and
    the axes whose elements come in reverse order (a negative stride)."""
    start, stride = op.attrs["start"], op.attrs["stride"]
    offsets, strides, reversed_axes = [], [], []
    for axis, (s, st, n) in enumerate(zip(start, stride, region)):
        s, st = int(s), int(st)
        if n == 0:
            s, st = 0, 1
        elif st < 0:
            s, st = s + (n - 1) * st, -st
            reversed_axes.append(axis)
        offsets.append(s)
        strides.append(st)
    return offsets, list(region), strides, reversed_axes


def _slice_text(offsets: list[int], sizes: list[int], strides: list[int]) -> str:
    return "".join(f"[{', '.join(str(v) for v in vs)}]" for vs in (offsets, sizes, strides))


def slice_(b: Builder, op: Op, xs: list[str], loc: str) -> str:
    xt, out = op.operands[0].type, op.result.type
    offsets, sizes, strides, rev = _region(op, out.shape)
    part = emit(
        b, f"tensor.extract_slice {xs[0]}{_slice_text(offsets, sizes, strides)} : {xt} to {out} {loc}"
    )
    return reverse(b, part, out, rev)


def update_slice(b: Builder, op: Op, xs: list[str], loc: str) -> str:
    base, update = (v.type for v in op.operands)
    if update.size == 0:
        return xs[0]
    offsets, sizes, strides, rev = _region(op, update.shape)
    part = reverse(b, xs[1], update, rev)
    where = _slice_text(offsets, sizes, strides)
    return emit(b, f"tensor.insert_slice {part} into {xs[0]}{where} : {update} into {base} {loc}")


def pad(b: Builder, op: Op, xs: list[str], loc: str) -> str:
    xt, out = op.operands[0].type, op.result.type
    value = emit(b, f"tensor.extract {xs[1]}[] : {op.operands[1].type}")
    low, high = (", ".join(str(int(v)) for v in op.attrs[k]) for k in ("low", "high"))
    idx = ", ".join(f"%i{k}: index" for k in range(xt.rank))
    name = b.fresh()
    b.lines += [
        f"{name} = tensor.pad {xs[0]} low[{low}] high[{high}] {{",
        f"^bb0({idx}):",
        f"  tensor.yield {value} : {xt.dtype}",
        f"}} : {xt} to {out} {loc}".rstrip(),
    ]
    return name


def concatenate(b: Builder, op: Op, xs: list[str], loc: str) -> str:
    axis, out = int(op.attrs["axis"]), op.result.type
    acc, offset = empty(b, out), 0
    for x, v in zip(xs, op.operands):
        t = v.type
        if t.size:
            offsets = [offset if i == axis else 0 for i in range(out.rank)]
            where = _slice_text(offsets, list(t.shape), [1] * out.rank)
            acc = emit(b, f"tensor.insert_slice {x} into {acc}{where} : {t} into {out} {loc}".rstrip())
        offset += t.shape[axis]
    return acc


def matmul(b: Builder, op: Op, xs: list[str], loc: str) -> str:
    (x, y), out = (v.type for v in op.operands), op.result.type
    init = filled(b, out, 0)
    named = {2: "linalg.matmul", 3: "linalg.batch_matmul"}.get(out.rank)
    if named:
        return emit(b, f"{named} ins({xs[0]}, {xs[1]} : {x}, {y}) outs({init} : {out}) -> {out} {loc}")
    # More batch dimensions: loops (batch..., m, n, k) with k reduced.
    r = out.rank
    batch = [f"d{i}" for i in range(r - 2)]
    m, n, k = f"d{r - 2}", f"d{r - 1}", f"d{r}"
    inputs = [(xs[0], x, affine_map(r + 1, [*batch, m, k])), (xs[1], y, affine_map(r + 1, [*batch, k, n]))]
    d = [out.dtype, out.dtype]

    def body(bb: Body, args: list[str], acc: str) -> str:
        return ADD(bb, [acc, MUL(bb, args, d, out.dtype, {})], d, out.dtype, {})

    return generic(b, out, inputs, body, rank=r + 1, reduced=[r], init=init, loc=loc)


def constant(b: Builder, op: Op, xs: list[str], loc: str) -> str:
    return emit(b, f"arith.constant {format_dense(op.attrs['value'])} {loc}".rstrip())


def iota(b: Builder, op: Op, xs: list[str], loc: str) -> str:
    out, dim = op.result.type, int(op.attrs["dimension"])

    def body(bb: Body, args: list[str], acc: str) -> str:
        index = bb.emit(f"linalg.index {dim} : index")
        as_int = DType.i32 if out.dtype is DType.i32 else DType.i64
        value = bb.emit(f"arith.index_cast {index} : index to {as_int}")
        return bb.emit(f"arith.sitofp {value} : {as_int} to {out.dtype}") if out.dtype.is_float else value

    return generic(b, out, [], body, loc=loc)
