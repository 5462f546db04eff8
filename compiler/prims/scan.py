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
    """d out_k / d x_i is the product of ``x_0..x_k`` without ``x_i`` (``k >= i``, in scan order), so
    the cotangent of ``x_i`` is ``E_i * S_i``: ``E_i``, the product of the elements before it (a
    running product of ``x`` shifted by one), and ``S_i = ct_i + x_(i+1) * S_(i+1)``, a linear
    recurrence run backwards as a log-depth scan (Hillis and Steele: ``(A, B)`` pairs standing for
    ``S_i = B_i + A_i * S_(i+span)``, the span doubled each step, JAX's associative scan). No
    division: exact where ``x`` has zeros, and where the running product underflows, overflows or
    is infinite (``ct * out / x`` gave 0 for ``cumprod([1e-300, 1e-100])`` and NaN past an inf). Its
    own derivatives (a Hessian's) are those of products and sums, exact too."""
    e, (x,) = emitter(build), op.operands
    axis, reverse = _axis(op.attrs), bool(op.attrs["reverse"])
    n = x.type.shape[axis]
    if n == 0:
        return (ct,)
    before = e(cumulative_prod, _shifted(build, x, -1, 1.0, axis, reverse), **_attrs(op, reverse))
    a, b = _shifted(build, x, 1, 1.0, axis, reverse), ct
    zero, inf = full_like(build, 0.0, x.type), full_like(build, np.inf, x.type)
    span = 1
    while span < n:
        later = _shifted(build, b, span, 0.0, axis, reverse)
        # An infinite span product times an exactly-zero sum adds nothing (the sum's cotangents are
        # all zero: the products they weight are unused), not NaN: cumprod([1, inf, 0])[0]'s gradient
        # is 1. Elsewhere the plain product, whose derivatives a Hessian follows.
        skip = e(ew.and_, e(ew.eq, e(ew.abs_, a), inf), e(ew.eq, later, zero))
        b = e(ew.add, b, e(ew.select, skip, zero, e(ew.mul, a, later)))
        if 2 * span < n:
            a = e(ew.mul, a, _shifted(build, a, span, 1.0, axis, reverse))
        span *= 2
    return (e(ew.mul, before, b),)


def _shifted(build: Build, v: Value, by: int, fill: float, axis: int, reverse: bool) -> Value:
    """``out[i] = v[i + by]`` along ``axis`` in scan order (``reverse``: toward index 0), ``fill``
    where that is outside ``v``."""
    from compiler.prims.movement import pad, slice_  # on use: movement's own rules import this module
    from compiler.prims.vjp_helpers import scalar

    shape, n = v.type.shape, v.type.shape[axis]
    if abs(by) >= n:
        return full_like(build, fill, v.type)
    ahead = (by > 0) != reverse  # reads later indices
    start, limit = [0] * len(shape), list(shape)
    low, high = [0] * len(shape), [0] * len(shape)
    if ahead:
        start[axis], high[axis] = abs(by), abs(by)
    else:
        limit[axis], low[axis] = n - abs(by), abs(by)
    part = build(slice_, [v], {"start": tuple(start), "limit": tuple(limit), "stride": (1,) * len(shape)})
    return build(pad, [part, scalar(build, fill, v.type.dtype)], {"low": tuple(low), "high": tuple(high)})


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
