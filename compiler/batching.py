"""Batching (``vmap``): a function of single examples in, the same function over a leading batch
axis out.

Each op that reads a batched value is rebuilt by its primitive's batching rule (``Primitive.batch``,
beside its definition) or, where it has none, by the rule of its kind here: an elementwise op
broadcasts its unbatched operands along the batch axis, a reduction shifts its axes past it. Ops that
read no batched value are kept as they are (a weight's transpose is not repeated per example). A
primitive with neither (a random draw with a batched key) runs once per example, sliced out and
stacked again, up to ``UNROLL_LIMIT`` examples: correct, but its work is not batched.

Regions are closed first (``close_regions``), and a loop or branch that reads a batched value stays
one region op, rebuilt by its rule (``compiler/batching_control.py``, JAX's batching rules for
``lax``'s control flow), so the program's size does not depend on the trip count.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from compiler.ir.core import Block, Function, Location, Op, Value
from compiler.ir.types import TensorType
from compiler.passes.regions import close_regions
from compiler.prims import movement as mv
from compiler.prims.base import Kind, Primitive
from compiler.prims.batch_helpers import all_batched
from runtime.errors import DSLError

UNROLL_LIMIT = 64
# A user's in-place request (``dsl/tracing.py``: the request, and whether it was made under
# ``strict_inplace=True``): carried from an op onto the batched op computing its result, as the grad
# transform keeps the forward ops (and so their marks) as they are.
REQUEST_ATTRS = ("dsl.inplace", "dsl.strict_inplace")


def _own(op: Op) -> dict[str, Any]:
    """The op's attributes without ``dsl.*`` annotations (an in-place request is the old op's, moved
    onto the batched op by ``_carry_request``)."""
    return {k: op.attrs[k] for k in op.prim.attrs}


def _carry_request(op: Op, build: _Builder, since: int, out: Value) -> None:
    """Mark the batched op that computes ``out`` (one of those a rule emitted after ``since``) with
    ``op``'s in-place request, so the report and ``strict_inplace`` judge the batched program's
    request as the unbatched one's. A rule that emitted no op for ``out`` (it returned an operand)
    leaves no work to judge: the request is then reported removed, as when the optimizer drops it."""
    marks = {k: op.attrs[k] for k in REQUEST_ATTRS if k in op.attrs}
    if not marks:
        return
    target = out  # through the views a rule ends with (a batched scatter's transpose back) to the work
    for i in range(len(build.ops) - 1, since - 1, -1):
        made = build.ops[i]
        if not made.results or made.results[0] is not target or made.regions:
            continue
        if made.prim.kind is Kind.MOVEMENT and op.prim.kind is not Kind.MOVEMENT and made.operands:
            target = made.operands[0]
            continue
        build.ops[i] = Op(made.prim, made.operands, {**made.attrs, **marks}, made.results, made.loc)
        return


def _elementwise(build: Any, op: Op, operands: Sequence[Value], batched: Sequence[bool], size: int) -> Value:
    return build(op.prim, all_batched(build, operands, batched, size), _own(op))


def _reduction(build: Any, op: Op, operands: Sequence[Value], batched: Sequence[bool], size: int) -> Value:
    axes = tuple(a + 1 for a in op.attrs["axes"])
    return build(op.prim, operands, {**_own(op), "axes": axes})


KIND_RULES = {Kind.ELEMENTWISE: _elementwise, Kind.REDUCTION: _reduction}


_NOWHERE = Location("<vmap>", 0)


class _Builder:
    def __init__(self, loc: Location = _NOWHERE) -> None:
        self.ops: list[Op] = []
        self.loc = loc

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


def batch_function(func: Function, batched: Sequence[bool], size: int) -> tuple[Function, list[bool]]:
    """``func`` with a leading batch axis of ``size`` on each param marked in ``batched``; also which
    of its results carry the batch axis (those that depend on a batched param; the others are
    unchanged)."""
    func = close_regions(func)
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
        build.loc = op.loc
        if op.regions:
            from compiler.batching_control import REGION_RULES  # its rules batch regions here: on use

            region_rule = REGION_RULES.get(op.prim)
            if region_rule is None:
                raise DSLError(f"{op.loc}: vmap cannot batch {op.prim.mlir_name} (it holds regions)")
            outs = region_rule(build, op, operands, flags, size)
            new.update((r, v) for r, v in zip(op.results, outs, strict=True) if v is not None)
            continue
        if len(op.results) != 1:
            raise DSLError(f"{op.loc}: vmap cannot batch {op.prim.mlir_name} yet ({len(op.results)} results)")
        rule = op.prim.batch or KIND_RULES.get(op.prim.kind) or _unrolled
        since = len(build.ops)
        out = rule(build, op, operands, flags, size)
        if out is None:  # the rule has no batched form for these operands (per-example starts)
            out = _unrolled(build, op, operands, flags, size)
        expected = TensorType((size,) + op.result.type.shape, op.result.type.dtype)
        assert out.type == expected, f"{op.prim.name} batching rule: {out.type}, expected {expected}"
        _carry_request(op, build, since, out)
        new[op.result] = out
    results = [new.get(v, v) for v in func.results]
    where = func.arg_locs
    body = Block(tuple(params), tuple(build.ops), tuple(results))
    return Function(func.name, body, func.arg_names, dict(func.attrs), where), [
        v in new for v in func.results
    ]
