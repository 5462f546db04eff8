"""Batching (``vmap``): a function of single examples in, the same function over a leading batch
axis out.

Each op that reads a batched value is rebuilt by its primitive's batching rule (``Primitive.batch``,
beside its definition) or, where it has none, by the rule of its kind here: an elementwise op
broadcasts its unbatched operands along the batch axis, a reduction shifts its axes past it. Ops that
read no batched value are kept as they are (a weight's transpose is not repeated per example). A
primitive with neither (a random draw with a batched key) runs once per example, sliced out and
stacked again, up to ``UNROLL_LIMIT`` examples: correct, but its work is not batched.

A loop or branch (``fori_loop``, ``scan``, ``cond``) that reads a batched value is first unrolled into
straight-line ops (``compiler/passes/regions_unroll.py``, the lowering every compiled program gets
for now), which are then batched one by one: a batched carry stays batched through every iteration,
and a ``cond`` becomes both branches and a ``select`` on its (batched or shared) predicate, as JAX
batches a ``cond`` whose predicate differs per example. A ``while_loop`` reading a batched value is
a ``TransformError`` at the user's line (JAX runs it until every example is done; its trip count is
known only at run time, and compiled code has no native loops yet).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from compiler.ir.core import Block, Function, Location, Op, Value, clone_ops
from compiler.ir.types import TensorType
from compiler.passes.regions_unroll import _transform_error, _Unroller
from compiler.prims import control
from compiler.prims import movement as mv
from compiler.prims.base import Kind, Primitive
from compiler.prims.batch_helpers import all_batched
from runtime.errors import DSLError

UNROLL_LIMIT = 64


def _own(op: Op) -> dict[str, Any]:
    """The op's attributes without ``dsl.*`` annotations (an in-place request is the old op's)."""
    return {k: op.attrs[k] for k in op.prim.attrs}


def _elementwise(build: Any, op: Op, operands: Sequence[Value], batched: Sequence[bool], size: int) -> Value:
    return build(op.prim, all_batched(build, operands, batched, size), _own(op))


def _reduction(build: Any, op: Op, operands: Sequence[Value], batched: Sequence[bool], size: int) -> Value:
    axes = tuple(a + 1 for a in op.attrs["axes"])
    return build(op.prim, operands, {**_own(op), "axes": axes})


KIND_RULES = {Kind.ELEMENTWISE: _elementwise, Kind.REDUCTION: _reduction}


class _Builder:
    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.loc = Location("<vmap>", 0)

    def __call__(self, prim: Primitive, operands: Sequence[Value], attrs: Any = None) -> Value:
        op = Op.create(prim, list(operands), dict(attrs or {}), self.loc)
        self.ops.append(op)
        return op.result


def _unrolled(
    build: _Builder, op: Op, operands: Sequence[Value], batched: Sequence[bool], size: int
) -> Value:
    """``op`` once per example: each batched operand sliced at the example, the results stacked."""
    if size > UNROLL_LIMIT:
        raise DSLError(
            f"{op.loc}: vmap has no batching rule for {op.prim.mlir_name} and would run it once per "
            f"example, {size} times (at most {UNROLL_LIMIT}); batch fewer examples"
        )
    rows = []
    for i in range(size):
        example = []
        for v, b in zip(operands, batched, strict=True):
            if b:
                shape = v.type.shape
                start, limit = (i,) + (0,) * (len(shape) - 1), (i + 1,) + shape[1:]
                row = build(mv.slice_, [v], {"start": start, "limit": limit, "stride": (1,) * len(shape)})
                v = build(mv.reshape, [row], {"shape": shape[1:]})
            example.append(v)
        out = build(op.prim, example, _own(op))
        rows.append(build(mv.reshape, [out], {"shape": (1,) + out.type.shape}))
    return build(mv.concatenate, rows, {"axis": 0})


def _reads(op: Op) -> set[Value]:
    """Every value ``op`` reads, its regions' reads of the blocks above included."""
    seen = set(op.operands)
    for block in op.regions:
        for inner in block.ops:
            seen |= _reads(inner)
    return seen


def _unrolled_regions(func: Function, batched: Sequence[bool]) -> Function:
    """``func`` with each loop or branch that reads a batched value (directly or through the values
    computed from one) as straight-line ops; the others stay region ops."""
    if not any(op.regions for op in func.ops):
        return func
    unroller = _Unroller(func, for_grad=False)
    varying = {p for p, b in zip(func.params, batched, strict=True) if b}
    mapping: dict[Value, Value] = {}
    ops: list[Op] = []
    for op in func.ops:
        reads = _reads(op)
        if op.regions and not reads.isdisjoint(varying):
            if op.prim is control.while_loop:
                raise _transform_error()(
                    f"{op.loc}: vmap cannot batch dsl.while_loop over values that differ per example "
                    "yet (JAX runs the loop until every example is done; its trip count is known only "
                    "at run time); use dsl.fori_loop or dsl.scan with a static trip count"
                )
            ops += unroller.block_ops((op,), mapping)
        elif reads.isdisjoint(mapping):
            ops.append(op)
        else:
            ops += clone_ops([op], mapping)
        if not reads.isdisjoint(varying):
            varying.update(op.results)
    results = tuple(mapping.get(v, v) for v in func.results)
    return func.replace_body(Block(func.params, tuple(ops), results))


def batch_function(func: Function, batched: Sequence[bool], size: int) -> tuple[Function, list[bool]]:
    """``func`` with a leading batch axis of ``size`` on each param marked in ``batched``; also which
    of its results carry the batch axis (those that depend on a batched param; the others are
    unchanged)."""
    func = _unrolled_regions(func, batched)
    new: dict[Value, Value] = {}
    params = []
    for p, b in zip(func.params, batched, strict=True):
        if b:
            new[p] = Value(TensorType((size,) + p.type.shape, p.type.dtype))
        params.append(new.get(p, p))
    build = _Builder()
    for op in func.ops:
        if not any(v in new for v in _reads(op)):
            build.ops.append(op)  # reads nothing batched: the same op, once
            continue
        if op.regions or len(op.results) != 1:
            raise DSLError(f"{op.loc}: vmap cannot batch {op.prim.mlir_name} yet (it holds regions)")
        operands = [new.get(v, v) for v in op.operands]
        flags = tuple(v in new for v in op.operands)
        rule = op.prim.batch or KIND_RULES.get(op.prim.kind) or _unrolled
        build.loc = op.loc
        out = rule(build, op, operands, flags, size)
        if out is None:  # the rule has no batched form for these operands (per-example starts)
            out = _unrolled(build, op, operands, flags, size)
        expected = TensorType((size,) + op.result.type.shape, op.result.type.dtype)
        assert out.type == expected, f"{op.prim.name} batching rule: {out.type}, expected {expected}"
        new[op.result] = out
    results = [new.get(v, v) for v in func.results]
    where = func.arg_locs
    body = Block(tuple(params), tuple(build.ops), tuple(results))
    return Function(func.name, body, func.arg_names, dict(func.attrs), where), [
        v in new for v in func.results
    ]
