"""A region op taken apart into lanes and put back together: the one place the passes learn how the
operands of ``for``, ``while``, ``if`` and ``scan`` (``compiler/prims/control.py``) line up with their
regions' block arguments, their yields and their results.

Seen this way every region op has the same shape:

    operands   head... carries... xs... consts...           for: head = (lower, upper); if: (pred,)
    region     (lead... carries... xs... consts...) -> (carries... outs...)      a stepping region
               (carries... consts...) -> (pred,)                                while's cond region
    results    carries... outs...

An ``if``'s operands are its consts (both branches read them unchanged) and its results its outs; a
scan's ys are its outs and the rows of its xs its x arguments; a ``for``'s counter is its body's lead
argument. A pass that drops, adds or moves lanes (dead carries, hoisted invariants, a carry the body
yields unchanged) edits a ``Parts`` and builds it again: the ``carries`` and ``consts`` attributes
follow the lanes, and the regions stay closed (each lane's argument goes with its operand).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from compiler.ir.core import Block, Location, Op, Value
from compiler.prims import control
from compiler.prims.base import Primitive
from compiler.prims.control import CONSTS, split_consts

_HEAD = {control.for_loop: 2, control.if_: 1}  # operands before the carries
_LEAD = {control.for_loop: 1}  # block arguments before the carries (the counter)


@dataclass
class Region:
    """One region of a region op; ``steps``: it yields ``carries... outs...`` (not while's cond)."""

    lead: list[Value]
    carries: list[Value]
    xs: list[Value]
    consts: list[Value]
    ops: list[Op]
    yields: list[Value]
    steps: bool

    @property
    def args(self) -> list[Value]:
        return self.lead + self.carries + self.xs + self.consts

    def block(self) -> Block:
        return Block(tuple(self.args), tuple(self.ops), tuple(self.yields))

    def set_block(self, block: Block) -> None:
        """Take the ops and yields of ``block``, a rewrite of this region over the same arguments."""
        assert list(block.args) == self.args, "a region's rewrite must keep its arguments"
        self.ops, self.yields = list(block.ops), list(block.results)


@dataclass
class Parts:
    prim: Primitive
    attrs: dict[str, Any]
    loc: Location
    head: list[Value]
    carries: list[Value]
    xs: list[Value]
    consts: list[Value]
    results: list[Value]  # carries... outs...
    regions: list[Region]

    @property
    def is_loop(self) -> bool:
        return self.prim is not control.if_

    def drop_carry(self, k: int) -> None:
        del self.carries[k], self.results[k]
        for region in self.regions:
            del region.carries[k]
            if region.steps:
                del region.yields[k]

    def drop_out(self, k: int) -> None:
        n = len(self.carries)
        del self.results[n + k]
        for region in self.regions:
            if region.steps:
                del region.yields[n + k]

    def drop_x(self, k: int) -> None:
        del self.xs[k]
        for region in self.regions:
            del region.xs[k]

    def drop_const(self, k: int) -> None:
        del self.consts[k]
        for region in self.regions:
            del region.consts[k]

    def add_const(self, value: Value, args: Mapping[int, Value] | None = None) -> None:
        """A new const lane reading ``value``; region ``r`` names its argument ``args[r]`` (default:
        a fresh value)."""
        self.consts.append(value)
        for r, region in enumerate(self.regions):
            region.consts.append((args or {}).get(r) or Value(value.type))

    def carry_to_const(self, k: int) -> tuple[Value, Value]:
        """Carry ``k``, which every stepping region yields unchanged, as a const lane; returns its
        former result and its init (the value the result always equals)."""
        init, result = self.carries.pop(k), self.results.pop(k)
        self.consts.append(init)
        for region in self.regions:
            region.consts.append(region.carries.pop(k))
            if region.steps:
                del region.yields[k]
        return result, init

    def build(self) -> Op:
        attrs = dict(self.attrs)
        if self.prim is control.scan:
            attrs["carries"] = len(self.carries)
        if self.is_loop:
            if self.consts:
                attrs[CONSTS] = len(self.consts)
            else:
                attrs.pop(CONSTS, None)
        operands = tuple(self.head + self.carries + self.xs + self.consts)
        regions = tuple(region.block() for region in self.regions)
        return Op(self.prim, operands, attrs, tuple(self.results), self.loc, regions)


def take_apart(op: Op) -> Parts:
    """``op`` (a region op) as lanes; ``take_apart(op).build()`` is ``op`` again."""
    head_n, lead = _HEAD.get(op.prim, 0), _LEAD.get(op.prim, 0)
    head, rest = list(op.operands[:head_n]), list(op.operands[head_n:])
    if op.prim is control.if_:
        carries, xs, consts = [], [], rest
    else:
        rest, consts = split_consts(rest, op.attrs)
        n = int(op.attrs["carries"]) if op.prim is control.scan else len(rest)
        carries, xs = rest[:n], rest[n:]
    nc, nx = len(carries), len(xs)
    regions = []
    for k, block in enumerate(op.regions):
        args = list(block.args)
        inner = args[lead:]
        regions.append(
            Region(
                args[:lead],
                inner[:nc],
                inner[nc : nc + nx],
                inner[nc + nx :],
                list(block.ops),
                list(block.results),
                steps=not (op.prim is control.while_loop and k == 0),
            )
        )
    return Parts(op.prim, dict(op.attrs), op.loc, head, carries, xs, consts, list(op.results), regions)


def renamed(
    ops: Iterable[Op], yields: Iterable[Value], mapping: Mapping[Value, Value]
) -> tuple[list[Op], list[Value]]:
    """A closed region's ops and yields reading ``mapping[v]`` for each value ``v`` it maps (nested
    regions are closed: they read such values only through their operands)."""
    out = [
        op.with_operands(tuple(mapping.get(v, v) for v in op.operands))
        if any(v in mapping for v in op.operands)
        else op
        for op in ops
    ]
    return out, [mapping.get(v, v) for v in yields]
