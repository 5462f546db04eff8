"""Batching (``vmap``): a function of single examples in, the same function over a leading batch
axis out.

Each op that reads a batched value is rebuilt by its primitive's batching rule (``Primitive.batch``,
beside its definition) or, where it has none, by the rule of its kind here: an elementwise op
broadcasts its unbatched operands along the batch axis, a reduction shifts its axes past it. Ops that
read no batched value are kept as they are (a weight's transpose is not repeated per example). A
primitive with neither (a random draw with a batched key) runs once per example, sliced out and
stacked again, up to ``UNROLL_LIMIT`` examples: correct, but its work is not batched.

Regions are closed first (``close_regions``). A loop or branch (``fori_loop``, ``scan``, ``cond``)
that reads a batched value is unrolled into straight-line ops (``compiler/passes/regions_unroll.py``),
which are then batched one by one: a batched carry stays batched through every iteration, and a
``cond`` becomes both branches and a ``select`` on its (batched or shared) predicate, as JAX batches
a ``cond`` whose predicate differs per example. A ``while_loop`` (its trip count is known only at run
time) stays one native loop, wherever it sits, rebuilt by ``_batch_while`` (JAX's batching rule):
its regions batched by this function, a carry batched once its init or the body makes it so; with a
predicate that differs per example the loop runs until every example is done, each example keeping
its carries from the iteration its own predicate failed.
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from typing import Any

from compiler.ir.core import Block, Function, Location, Op, Value, clone_ops
from compiler.ir.types import TensorType
from compiler.passes.regions import close_regions
from compiler.passes.regions_unroll import _Unroller
from compiler.prims import control
from compiler.prims import elementwise as ew
from compiler.prims import movement as mv
from compiler.prims import reduction as red
from compiler.prims.base import Kind, Primitive
from compiler.prims.batch_helpers import all_batched, with_batch
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


class _KeepingWhiles(_Unroller):
    """The unroller, leaving each ``while`` (nested in a loop or branch it unrolls) a region op, for
    ``_batch_while`` to batch."""

    def unroll(self, op: Op, operands: list[Value], outer: MutableMapping[Value, Value]) -> list[Value]:
        if op.prim is not control.while_loop:
            return super().unroll(op, operands, outer)
        self.out += clone_ops([op], outer)
        return [outer[r] for r in op.results]


def _unrolled_regions(func: Function, batched: Sequence[bool]) -> Function:
    """``func`` with each ``for``, ``scan`` or ``if`` that reads a batched value (directly or through
    the values computed from one) as straight-line ops; the others, and every ``while``, stay region
    ops."""
    if not any(op.regions for op in func.ops):
        return func
    unroller = _KeepingWhiles(func, for_grad=False)
    varying = {p for p, b in zip(func.params, batched, strict=True) if b}
    mapping: dict[Value, Value] = {}
    ops: list[Op] = []
    for op in func.ops:
        reads = _reads(op)
        if op.regions and op.prim is not control.while_loop and not reads.isdisjoint(varying):
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
    func = _unrolled_regions(close_regions(func), batched)
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
        operands = [new.get(v, v) for v in op.operands]
        flags = tuple(v in new for v in op.operands)
        if op.prim is control.while_loop:
            build.loc = op.loc
            loop = _batch_while(build, op, operands, flags, size)
            build.ops.append(loop)
            new.update((r, b) for r, b in zip(op.results, loop.results, strict=True) if r is not b)
            continue
        if op.regions or len(op.results) != 1:
            raise DSLError(f"{op.loc}: vmap cannot batch {op.prim.mlir_name} yet (it holds regions)")
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


# ---- while ----------------------------------------------------------------------------------------


def _region(block: Block, flags: Sequence[bool], size: int) -> tuple[Function, list[bool]]:
    """A closed region's block batched over the lanes ``flags`` marks, and which of its yields are."""
    return batch_function(Function("region", block), flags, size)


def _widened(
    build: _Builder, region: Function, out: Sequence[bool], want: Sequence[bool], size: int
) -> list[Value]:
    """``region``'s yields, those ``want`` marks batched (broadcast where ``region`` left one shared)."""
    return [
        with_batch(build, v, b, size) if w else v for v, b, w in zip(region.results, out, want, strict=True)
    ]


def _per_example(build: _Builder, pred: Value, shape: tuple[int, ...]) -> Value:
    """A ``(size,)`` predicate broadcast over each example's ``shape``."""
    lead = pred.type.shape + (1,) * (len(shape) - 1)
    return build(mv.broadcast, [build(mv.reshape, [pred], {"shape": lead})], {"shape": shape})


def _batch_while(outer: _Builder, op: Op, operands: Sequence[Value], flags: Sequence[bool], size: int) -> Op:
    """The ``while`` ``op`` (closed) over a batch: its new operands ``operands``, those marked in
    ``flags`` batched (a shared init of a batched carry is broadcast by ``outer``). A result the loop
    leaves shared keeps ``op``'s value (the ops after it read it as they are); a batched one is a new
    value.

    As JAX's ``_while_loop_batching_rule``: a carry is batched if its init is or the body makes it so
    (a fixpoint over the body's batching). If then the cond's predicate is shared, the loop runs as
    before on the batched carries. If it differs per example, every carry is batched, the loop runs
    while any example's predicate holds, and an example whose own predicate no longer holds keeps its
    carries (the body selects, per example, between its new carries and the old).
    """
    cond, body = op.regions
    carries, consts = control.split_consts(list(flags), op.attrs)
    nc = len(carries)
    carry_b = list(carries)
    while True:
        c_func, (pred_b,) = _region(cond, carry_b + consts, size)
        if pred_b and not all(carry_b):  # each example stops at its own iteration: all carries differ
            carry_b = [True] * nc
            continue
        b_func, out = _region(body, carry_b + consts, size)
        grown = [c or o for c, o in zip(carry_b, out, strict=True)]
        if grown == carry_b:
            break
        carry_b = grown
    build = _Builder()
    build.loc = op.loc
    new_carries = _widened(build, b_func, out, carry_b, size)
    c_params, c_ops, (pred,) = c_func.params, list(c_func.ops), c_func.results
    if pred_b:
        # the body asks each example's predicate again and keeps the carries of those that are done
        mapping = dict(zip(c_func.params, b_func.params, strict=True))
        live = clone_ops(c_func.ops, mapping)
        build.ops = list(b_func.ops) + live + build.ops
        new_carries = [
            build(ew.select, [_per_example(build, mapping.get(pred, pred), v.type.shape), v, a])
            for v, a in zip(new_carries, b_func.params, strict=False)
        ]
        any_ = _Builder()
        any_.loc = op.loc
        pred = any_(red.reduce_max, [pred], {"axes": (0,)})
        c_ops += any_.ops
    else:
        build.ops = list(b_func.ops) + build.ops
    regions = (
        Block(c_params, tuple(c_ops), (pred,)),
        Block(b_func.params, tuple(build.ops), tuple(new_carries)),
    )
    inits = [
        with_batch(outer, v, f, size) if b else v for v, f, b in zip(operands, flags, carry_b, strict=False)
    ]
    results = tuple(
        Value(p.type) if b else r for r, p, b in zip(op.results, b_func.params, carry_b, strict=False)
    )
    return Op(op.prim, tuple(inits + list(operands[nc:])), dict(op.attrs), results, op.loc, regions)
