"""Inclusive scans along one axis: ``cumulative_sum`` and ``cumulative_prod`` (NumPy 2's
``np.cumulative_sum``/``np.cumulative_prod`` without ``include_initial``; ``dnp.cumsum``, ``dnp.cumprod``).

Element ``j`` of a line along ``axis`` is the combination of elements ``0..j`` (``reverse``: of
``j..n-1``), in that order. The op is ``Kind.SCAN``: it roots a kernel of its own
(``compiler/kernel/*/scan.py``) that walks each line serially with the running value in a register,
O(n) work; lines are independent (parallel across them). The result has the operand's shape and dtype
(the frontend casts integers narrower than int64 first, as NumPy does); float32 sums run in float64
(``Reducer.accumulator``, as the reductions' do) and are rounded once per element.

Each element is read before the element at the same position is written, so the result may be
stored over a dying operand (in place).

Cost (float32 cumsum along the last axis on the 2-core CPU, medians of 21 interleaved calls at load
6.8, against np.cumsum): 0.31x at one row of 10**6, 0.43x at 256 rows of 1024, 0.27x at 16384 rows
of 64; the log-step composition (Hillis-Steele, O(n log n)) it replaced measured 8.2x, 1.6x, 0.69x
in the same run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from compiler.ir.core import Op, Value
from compiler.ir.types import DType, TensorType
from compiler.prims import elementwise as ew
from compiler.prims import mlir as ml
from compiler.prims.base import AttrType, Build, Kind, Memory, Primitive, Reducer, fail
from compiler.prims.mlir import Body, Builder
from compiler.prims.vjp_helpers import Cotangents, Wanted, emitter, full_like, vjp_rule
from runtime import array_ops


def _axis(attrs: Mapping[str, Any]) -> int:
    return int(attrs["axis"])


def _scan_rule(name: str) -> Callable[[Sequence[TensorType], Mapping[str, Any]], list[TensorType]]:
    def rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
        (x,) = types
        axis = _axis(attrs)
        if not 0 <= axis < x.rank:
            raise fail(f"{name}: axis {axis} is out of range for an array of rank {x.rank}")
        if x.dtype.is_bool:
            raise fail(f"{name} does not accept bool operands; cast them first (NumPy sums bools as int64)")
        return [x]

    return rule


def _scan_mlir(b: Builder, op: Op, xs: list[str], loc: str) -> str:
    """A loop nest (``scf.for``, row-major, the scanned axis walked from its first element in scan
    order) carrying the result tensor: each step combines the element with the result's element one
    step back along the axis (none at a line's start) and inserts it."""
    t = op.result.type
    if t.size == 0:
        return xs[0]
    axis, reverse = _axis(op.attrs), bool(op.attrs["reverse"])
    reducer = op.prim.reducer
    assert reducer is not None
    n = t.shape[axis]
    ivs, acc, results = ml.open_nest(b, t.shape, xs[0], t)
    body = Body(b.fresh)
    step = ivs[axis]
    last = body.emit(f"arith.constant {n - 1} : index")
    zero = body.emit("arith.constant 0 : index")
    one = body.emit("arith.constant 1 : index")
    if reverse:  # position n - 1 - step; the one before it in scan order is the next, clamped to n - 1
        j = body.emit(f"arith.subi {last}, {step} : index")
        back = body.emit(f"arith.addi {j}, {one} : index")
        prev_at = body.emit(f"arith.minui {back}, {last} : index")
    else:  # position step; the one before it, clamped to 0 (the first element's is unused)
        j = step
        back = body.emit(f"arith.subi {j}, {one} : index")
        prev_at = body.emit(f"arith.maxsi {back}, {zero} : index")
    at = [j if d == axis else v for d, v in enumerate(ivs)]
    before = [prev_at if d == axis else v for d, v in enumerate(ivs)]
    x = body.emit(f"tensor.extract {xs[0]}[{', '.join(at)}] : {t}")
    prev = body.emit(f"tensor.extract {acc}[{', '.join(before)}] : {t}")
    combined = reducer.mlir_combine(body, [x, prev], [t.dtype, t.dtype], t.dtype, op.attrs)
    first = body.emit(f"arith.cmpi eq, {step}, {zero} : index")
    value = body.emit(f"arith.select {first}, {x}, {combined} : {t.dtype}")
    inserted = body.emit(f"tensor.insert {value} into {acc}[{', '.join(at)}] : {t}")
    b.lines += body.lines
    return ml.close_nest(b, results, inserted, t, loc)


def _attrs(op: Op, reverse: bool) -> dict[str, Any]:
    return {"axis": _axis(op.attrs), "reverse": reverse}


@vjp_rule
def _sum_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    """Element ``i`` enters every result from ``i`` on in scan order: the scan of ``ct`` the other way."""
    return (build(cumulative_sum, [ct], _attrs(op, not op.attrs["reverse"])),)


@vjp_rule
def _prod_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    """d out_j / d x_i is the product of ``x_0..x_j`` without ``x_i`` (``j >= i``, in scan order).
    Before a line's first zero that is ``out_j / x_i``: the cotangent is the reverse sum of
    ``ct * out`` divided by ``x_i``. At the first zero ``z`` it is the same sum over the products
    with ``x_z`` taken as 1 (a second scan). Past it every product holds ``x_z``, so the cotangent is
    0 there, but not its derivative in ``x_z`` (a Hessian's entry): between the first and the second
    zero it is ``x_z`` times that second sum over ``x_i``, at the second zero ``x_z`` times the sum
    with both zeros taken as 1, written with ``x_z`` itself so that a second derivative sees it;
    past the second zero every product holds two zeros, and the cotangent is 0 to first order.
    Exact where ``x`` has zeros, with no division by them."""
    e, (x,) = emitter(build), op.operands
    fwd, back = _attrs(op, bool(op.attrs["reverse"])), _attrs(op, not op.attrs["reverse"])
    zero, one, two = (full_like(build, k, x.type) for k in (0, 1, 2))
    is_zero = e(ew.eq, x, zero)
    seen = e(cumulative_sum, e(ew.cast, is_zero, dtype=x.type.dtype), **fwd)  # zeros up to here
    before = e(ew.eq, seen, zero)
    first = e(ew.and_, is_zero, e(ew.eq, seen, one))
    tail = e(cumulative_sum, e(ew.mul, ct, op.result), **back)
    regular = e(ew.div, tail, e(ew.select, before, x, one))
    skipped = e(cumulative_prod, e(ew.select, first, one, x), **fwd)
    at_first = e(cumulative_sum, e(ew.mul, ct, skipped), **back)
    x_first = e(cumulative_sum, e(ew.select, first, x, zero), **fwd)  # x_z from the first zero on
    between = e(ew.and_, e(ew.eq, seen, one), e(ew.not_, is_zero))
    past_first = e(ew.mul, x_first, e(ew.div, at_first, e(ew.select, between, x, one)))
    second = e(ew.and_, is_zero, e(ew.eq, seen, two))
    skipped2 = e(cumulative_prod, e(ew.select, e(ew.and_, is_zero, e(ew.le, seen, two)), one, x), **fwd)
    at_second = e(ew.mul, x_first, e(cumulative_sum, e(ew.mul, ct, skipped2), **back))
    rest = e(ew.select, between, past_first, e(ew.select, second, at_second, zero))
    return (e(ew.select, before, regular, e(ew.select, first, at_first, rest)),)


def _batch(build: Build, op: Op, operands: Sequence[Value], batched: Sequence[bool], size: int) -> Value:
    """The batch is a leading axis: the same scan, one axis further."""
    return build(op.prim, [operands[0]], {"axis": _axis(op.attrs) + 1, "reverse": op.attrs["reverse"]})


def _scan(
    name: str, reference: Callable[..., np.ndarray], reducer: Reducer, vjp: Any, needs: frozenset[str]
) -> Primitive:
    return Primitive(
        name=name,
        kind=Kind.SCAN,
        nargs=1,
        attrs={"axis": AttrType.INT, "reverse": AttrType.BOOL},
        shape_rule=_scan_rule(name),
        reference=reference,
        memory=Memory(vjp_needs=needs),
        reducer=reducer,
        mlir=_scan_mlir,
        vjp=vjp,
        batch=_batch,
    )


def _sum_accumulator(d: DType) -> DType:
    """Float32 running sums in float64, as the reductions' (``array_ops.sum_dtype``)."""
    return DType.from_numpy(array_ops.sum_dtype(d.np))


cumulative_sum = _scan(
    "cumulative_sum",
    array_ops.cumulative_sum,
    # -0.0 for floats: the identity of IEEE addition (-0.0 + x is x, -0.0 too; 0.0 + -0.0 is 0.0)
    Reducer(
        lambda acc, x: f"({acc} + {x})",
        lambda d: -0.0 if d.is_float else 0,
        _sum_accumulator,
        mlir_combine=ml.ADD,
    ),
    _sum_vjp,
    frozenset(),
)
cumulative_prod = _scan(
    "cumulative_prod",
    array_ops.cumulative_prod,
    Reducer(lambda acc, x: f"({acc} * {x})", lambda d: 1, mlir_combine=ml.MUL),
    _prod_vjp,
    frozenset({"inputs", "output"}),
)


def running(op: Op, element: str, acc: str = "acc") -> tuple[str, str, str]:
    """The scalar text of a scan, shared by the CPU and CUDA kernels: the statement starting a line's
    running value ``acc``, the statement folding ``element`` into it (in the accumulator dtype), and
    the expression of the result element it gives."""
    from compiler.kernel.emit import literal, typed  # on use: the kernel layer imports the prims

    reducer = op.prim.reducer
    assert reducer is not None, f"{op.prim.name} has no combine"
    dtype = op.result.type.dtype
    wide = reducer.accumulator(dtype)
    start = f"{acc} = {literal(reducer.identity(dtype), wide)}"
    new = typed(reducer.combine(acc, typed(element, wide)), wide)
    if dtype.is_float and wide is not dtype:
        # A running value past the result dtype's range is that dtype's infinity from then on, as
        # NumPy's running sum in the dtype is: cumsum([3e38, 3e38, -3e38]) in float32 is [3e38, inf,
        # inf] (the float64 sum came back to 3e38). ``OVERFLOW``: the least magnitude rounding to inf.
        edge = literal(OVERFLOW[dtype], wide)
        new = f"({new} if abs({new}) < {edge} else {typed(typed(new, dtype), wide)})"
    return start, f"{acc} = {new}", typed(acc, dtype)


# The least float64 magnitude that rounds to infinity in each narrower float dtype: the largest
# finite value plus half its last place (a tie, rounded to even: up).
OVERFLOW = {DType.f32: float((2 - 2.0**-24) * 2.0**127)}
