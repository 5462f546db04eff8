"""Simplification: common-subexpression elimination, constant folding and algebraic identities, then
dead-code elimination (``compiler/passes/dce.py``; all primitives are pure, so an op whose results
nobody reads can go).

Inside loop and branch bodies too (regions are closed, ``compiler/passes/regions.py``: a body reads
only its block arguments and what it defines). Each block is simplified on its own: CSE never
merges a body's op with one of the enclosing block, which reaches the body only as a const; an
invariant op instead moves out of a loop (``compiler/passes/licm.py``) and meets CSE there. A small
constant const moves into the regions, where folding sees it. An ``if`` on a constant predicate, a
``for`` of constant bounds running zero times or once and a ``while`` whose condition is constant
false are folded away; a carry yielded unchanged becomes a const, an ``if`` result both branches
yield as the same operand that operand. DCE then drops the state of region ops nobody needs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from compiler.ir.core import Block, Function, Op, Value, clone_ops
from compiler.ir.rewrite import Rewriter
from compiler.ir.types import DType
from compiler.passes.dce import dce
from compiler.passes.inplace_report import overwritten
from compiler.passes.licm import hoist_invariants
from compiler.passes.region_parts import Parts, Region, renamed, take_apart
from compiler.prims import contraction, control, source
from compiler.prims import elementwise as ew
from compiler.prims import movement as mv
from compiler.prims.base import Primitive

FOLD_LIMIT = 1024  # fold constants up to this many elements; larger results stay as ops
INPLACE_ATTR = "dsl.inplace"


class Neutral(NamedTuple):
    """``op(x, c) -> x`` where operand ``positions`` holds the splat ``c``: ``for_float`` for floats
    (None: no float identity) and ``for_int`` for integers and bools."""

    positions: tuple[int, ...]
    for_float: float | None
    for_int: int

    def matches(self, c: float | int | bool, dtype: DType) -> bool:
        if not dtype.is_float:
            return c == self.for_int
        # Bit for bit: the sign of a zero decides (-0.0 == 0.0 in Python).
        want = self.for_float
        return want is not None and c == want and math.copysign(1.0, c) == math.copysign(1.0, want)


# Each identity holds for every float, signed zeros, infinities and NaN included (IEEE 754, round to
# nearest; NaN payloads aside): x + -0.0 is x, but x + 0.0 is not (-0.0 + 0.0 is +0.0), so only -0.0
# is neutral for a float add, while x - 0.0 is x. Rewrites that hold only for finite reals are absent
# on purpose: x * 0 -> 0 (inf and NaN give NaN, a negative x gives -0.0), x - x -> 0 (NaN at inf and
# NaN), 0 - x -> -x (+0.0 against -0.0 at x = 0), x / x -> 1, folding x == x or x != x (NaN).
_NEUTRAL: dict[Primitive, Neutral] = {
    ew.add: Neutral((0, 1), -0.0, 0),
    ew.sub: Neutral((1,), 0.0, 0),
    ew.mul: Neutral((0, 1), 1.0, 1),
    ew.div: Neutral((1,), 1.0, 1),
    ew.pow_: Neutral((1,), 1.0, 1),
    ew.or_: Neutral((0, 1), None, 0),  # bitwise on integers, logical on bools (False is 0)
    ew.xor: Neutral((0, 1), None, 0),
    ew.shift_left: Neutral((1,), None, 0),
    ew.shift_right: Neutral((1,), None, 0),
}


def _ints(attrs: Mapping[str, Any], name: str) -> tuple[int, ...]:
    return tuple(int(v) for v in attrs[name])


# Unary ops that are the identity when their attributes say so.
_IDENTITY: dict[Primitive, Callable[[Op], bool]] = {
    ew.copy: lambda op: True,
    ew.stop_gradient: lambda op: True,
    ew.cast: lambda op: op.attrs["dtype"] is op.operands[0].type.dtype,
    mv.reshape: lambda op: op.result.type == op.operands[0].type,
    mv.broadcast: lambda op: op.result.type == op.operands[0].type,
    mv.transpose: lambda op: _ints(op.attrs, "perm") == tuple(range(len(op.attrs["perm"]))),
    mv.slice_: lambda op: op.result.type == op.operands[0].type and set(_ints(op.attrs, "stride")) <= {1},
}


class _Simplifier:
    """Simplifies one block; a region op's regions each get a simplifier of their own."""

    def __init__(self, block: Block) -> None:
        self.block = block
        self.rw = Rewriter(Function("block", block))
        self.producer: dict[Value, Op] = {}
        self.seen: dict[tuple[object, ...], Op] = {}
        self.uses = Counter(v for op in block.ops for v in op.operands)
        self.uses.update(block.results)
        # the arrays the user's in-place requests write over stay their own values: a copy the
        # merge of two of the user's arrays (``a = y @ w; b = y @ w``, ``v = x.copy()`` and ``x``)
        # forces is no verdict on what the user wrote (``inplace_report.overwritten``)
        self.kept = overwritten(block.ops)

    def forward(self, op: Op) -> Value | None:
        """A value equal to ``op``'s result that already exists, if any (not for an array a request
        writes over when that value is also read elsewhere: ``kept``)."""
        if INPLACE_ATTR in op.attrs:  # keep the user's in-place requests visible to later passes
            return None
        same = self.equal(op)
        if same is not None and not self.kept.isdisjoint(op.results):
            if same in self.block.args or self.uses[same] > 1:
                return None
        return same

    def equal(self, op: Op) -> Value | None:
        if op.prim in _IDENTITY and _IDENTITY[op.prim](op):
            return op.operands[0]
        neutral = _NEUTRAL.get(op.prim)
        if neutral is not None:
            for k in neutral.positions:
                other = op.operands[1 - k]
                c = self.splat(op.operands[k])
                if c is not None and other.type == op.result.type and neutral.matches(c, other.type.dtype):
                    return other
        if op.prim is ew.select and op.operands[1] is op.operands[2]:  # either way the same value
            return op.operands[1]
        if op.prim is ew.neg:  # -(-x)
            inner = self.producer.get(op.operands[0])
            if inner is not None and inner.prim is ew.neg:
                return inner.operands[0]
        return None

    def splat(self, v: Value) -> float | int | bool | None:
        """The repeated value of ``v`` where it is a splat constant or a broadcast or reshape of one
        (past ``FOLD_LIMIT`` elements a splat stays a broadcast of a small constant: the seed of a
        gradient, ``ones_like`` of a large array), else None."""
        op = self.producer.get(v)
        while op is not None and op.prim in (mv.broadcast, mv.reshape):
            op = self.producer.get(op.operands[0])
        return source.splat_value(op)

    def fold(self, op: Op) -> Op:
        """Evaluate an op whose operands are all constants (small results only)."""
        if op.prim is source.constant or op.result.type.size > FOLD_LIMIT or not op.operands:
            return op
        producers = [self.producer.get(v) for v in op.operands]
        if not all(p is not None and p.prim is source.constant for p in producers):
            return op
        value = op.prim.run_reference([p.attrs["value"] for p in producers], op.attrs)  # type: ignore[union-attr]
        return Op(source.constant, (), {"value": value}, op.results, op.loc)

    def merge_movement(self, op: Op) -> Op:
        """reshape(reshape(x)) is one reshape; transpose(transpose(x)) is one transpose (second-order
        autodiff makes the latter from the transposed weights of matmul rules)."""
        if op.prim not in (mv.reshape, mv.transpose) or INPLACE_ATTR in op.attrs:
            return op
        inner = self.producer.get(op.operands[0])
        if inner is None or inner.prim is not op.prim:
            return op
        attrs = dict(op.attrs)
        if op.prim is mv.transpose:
            first, second = _ints(inner.attrs, "perm"), _ints(op.attrs, "perm")
            attrs["perm"] = tuple(first[p] for p in second)
        return Op(op.prim, inner.operands, attrs, op.results, op.loc)

    def update_through_transpose(self, op: Op) -> Op:
        """``transpose(update_slice(transpose(a, p), v), p^-1)`` is ``update_slice(a, transpose(v,
        p^-1))`` over the permuted window: a write through a transposed view (``y.T[2] *= 3``) is
        a window update of ``a`` itself, which the plan can do in place, instead of a transposed
        array the result's layout makes a copy of (when nothing else reads the first update)."""
        if op.prim is not mv.transpose:
            return op
        update = self.producer.get(op.operands[0])
        if update is None or update.prim is not mv.update_slice or self.uses.get(update.result, 0) != 1:
            return op
        inner = self.producer.get(update.operands[0])
        if inner is None or inner.prim is not mv.transpose:
            return op
        base, back = inner.operands[0], _ints(op.attrs, "perm")
        if base.type != op.result.type or tuple(_ints(inner.attrs, "perm")[q] for q in back) != tuple(
            range(len(back))
        ):
            return op
        value = update.operands[1]
        attrs = {
            key: tuple(_ints(update.attrs, key)[q] for q in back) for key in ("start", "limit", "stride")
        }
        marks = {INPLACE_ATTR: update.attrs[INPLACE_ATTR]} if INPLACE_ATTR in update.attrs else {}
        moved = Op(
            mv.transpose,
            (value,),
            {"perm": back, **marks},
            (Value(value.type.with_shape(tuple(value.type.shape[q] for q in back))),),
            op.loc,
        )
        self._emit(moved)
        return Op(mv.update_slice, (base, moved.result), {**update.attrs, **attrs}, op.results, op.loc)

    def nested_update(self, op: Op) -> Op:
        """``update_slice(a, update_slice(slice(a, w1), v, w2), w1)`` is ``update_slice(a, v, w)`` with
        ``w`` the window ``w2`` of ``w1`` (``y[:, 4:][:, 0] = v``, ``y[:, 4:].T[0] = v``): only ``v``'s
        elements are written, instead of the whole outer window computed first and then stored
        (when nothing else reads the inner update)."""
        if op.prim is not mv.update_slice:
            return op
        base, new = op.operands
        inner = self.producer.get(new)
        if inner is None or inner.prim is not mv.update_slice or self.uses.get(new, 0) != 1:
            return op
        window = self.producer.get(inner.operands[0])
        if window is None or window.prim is not mv.slice_ or window.operands[0] is not base:
            return op
        if _ints(window.attrs, "start") != _ints(op.attrs, "start") or _ints(window.attrs, "stride") != _ints(
            op.attrs, "stride"
        ):
            return op
        value = inner.operands[1]
        if value.type.size == 0:
            return op
        outer_start, outer_stride = _ints(op.attrs, "start"), _ints(op.attrs, "stride")
        start = tuple(a + s * b for a, s, b in zip(outer_start, outer_stride, _ints(inner.attrs, "start")))
        stride = tuple(s * t for s, t in zip(outer_stride, _ints(inner.attrs, "stride")))
        # (the last element, one step past it toward the stride's sign: range()'s exclusive limit)
        limit = tuple(
            b + (n - 1) * t + (1 if t > 0 else -1) for b, n, t in zip(start, value.type.shape, stride)
        )
        attrs = {**op.attrs, "start": start, "limit": limit, "stride": stride}
        return Op(mv.update_slice, (base, value), attrs, op.results, op.loc)

    def outer_product(self, op: Op) -> Op:
        """A matmul over K = 1 is an outer product: ``broadcast(a) * broadcast(b)``, elementwise, so
        fusion inlines it into its readers instead of giving it a buffer (second-order autodiff of an
        MLP with one input makes ``ones(B, 1) @ w`` of the weights' size). A float product gets + 0.0:
        a matmul's sum starts at +0.0, so its one term -0.0 comes out +0.0 (as NumPy's BLAS gives)."""
        if op.prim is not contraction.matmul or op.operands[0].type.shape[-1] != 1 or op.attrs:
            return op
        shape = op.result.type.shape
        spread = []
        for v in op.operands:
            if v.type.shape == shape:
                spread.append(v)
                continue
            wide = Op(mv.broadcast, (v,), {"shape": shape}, (Value(v.type.with_shape(shape)),), op.loc)
            self._emit(wide)
            spread.append(wide.result)
        if not op.result.type.dtype.is_float:
            return Op(ew.mul, tuple(spread), {}, op.results, op.loc)
        product = Op(ew.mul, tuple(spread), {}, (Value(op.result.type),), op.loc)
        self._emit(product)
        zero = Op(
            source.constant,
            (),
            {"value": np.zeros((), op.result.type.dtype.np)},
            (Value(op.result.type.with_shape(())),),
            op.loc,
        )
        self._emit(zero)
        zeros = Op(mv.broadcast, (zero.result,), {"shape": shape}, (Value(op.result.type),), op.loc)
        self._emit(zeros)
        return Op(ew.add, (product.result, zeros.result), {}, op.results, op.loc)

    def _emit(self, op: Op) -> None:
        earlier = self.seen.get(op.key())
        if earlier is not None:
            self.rw.replace(op.result, earlier.result)
            return
        self.seen[op.key()] = op
        self.rw.add(op)
        self.producer[op.result] = op

    def run(self) -> Block:
        for op in self.block.ops:
            self.process(op)
        return self.rw.finish().body

    def process(self, op: Op) -> None:
        """Add ``op`` (reading the current replacements of its operands), simplified."""
        op = op.with_operands(self.rw.operands(op))
        if op.regions:
            self.region(op)
            return
        same = self.forward(op)
        if same is not None:
            self.rw.replace(op.result, same)
            return
        op = self.merge_movement(
            self.fold(self.outer_product(self.nested_update(self.update_through_transpose(op))))
        )
        same = self.forward(op)  # the merged op may be an identity (a transpose undone)
        if same is not None:
            self.rw.replace(op.result, same)
            return
        key = op.key()
        if not self.kept.isdisjoint(op.results):  # merged neither into an earlier op nor a later one
            self.rw.add(op)
            self.producer[op.result] = op
            return
        earlier = self.seen.get(key)
        if earlier is not None and INPLACE_ATTR not in op.attrs:
            self.rw.replace(op.result, earlier.result)
            return
        self.seen[key] = op
        self.rw.add(op)
        self.producer[op.result] = op

    # ---- region ops ------------------------------------------------------------------------------

    def region(self, op: Op) -> None:
        """A loop or branch: constants sunk into its regions, folded away where its predicate or trip
        count is a constant, its regions simplified (each on its own: values of this block reach
        them only as consts), unchanged carries made consts, its invariants hoisted before it."""
        parts = take_apart(op)
        self.sink_constants(parts)
        if self.fold_control(parts):
            return
        for region in parts.regions:
            region.set_block(_Simplifier(region.block()).run())
        if self.fold_while(parts):
            return
        self.forward_unchanged(parts)
        self.merge_outs(parts)
        for hoisted in hoist_invariants(parts):
            self.process(hoisted)
        self.merge_consts(parts)
        self.rw.add(parts.build())

    def sink_constants(self, parts: Parts) -> None:
        """A const that is a small constant becomes a constant in each region, where folding and the
        identities see it (LICM leaves constants in place)."""
        for k in reversed(range(len(parts.consts))):
            producer = self.producer.get(parts.consts[k])
            if producer is None or producer.prim is not source.constant:
                continue
            if producer.result.type.size > FOLD_LIMIT:
                continue
            for region in parts.regions:  # the argument's value is now the constant's
                region.ops.insert(
                    0, Op(source.constant, (), producer.attrs, (region.consts[k],), producer.loc)
                )
            parts.drop_const(k)

    def fold_control(self, parts: Parts) -> bool:
        """An ``if`` on a constant predicate is the branch it takes; a ``for`` of constant bounds is
        its inits when it runs zero times, its body inlined when it runs once."""
        if parts.prim is control.if_:
            pred = source.splat_value(self.producer.get(parts.head[0]))
            if pred is None:
                return False
            self.inline(parts, parts.regions[0 if pred else 1], [])
            return True
        if parts.prim is not control.for_loop:
            return False
        lower, upper = (source.splat_value(self.producer.get(v)) for v in parts.head)
        if lower is None or upper is None or upper - lower > 1:
            return False
        if upper <= lower:
            for result, init in zip(parts.results, parts.carries, strict=True):
                self.rw.replace(result, init)
        else:
            self.inline(parts, parts.regions[0], [parts.head[0]])
        return True

    def fold_while(self, parts: Parts) -> bool:
        """A ``while`` whose condition is the constant false is its inits."""
        if parts.prim is not control.while_loop:
            return False
        cond = parts.regions[0]
        flag = next((op for op in cond.ops if cond.yields[0] in op.results), None)
        if source.splat_value(flag) is not False:
            return False
        for result, init in zip(parts.results, parts.carries, strict=True):
            self.rw.replace(result, init)
        return True

    def inline(self, parts: Parts, region: Region, lead: list[Value]) -> None:
        """``region`` run once in this block, on the op's operands (``lead``: its lead arguments)."""
        mapping: dict[Value, Value] = dict(
            zip(region.args, lead + parts.carries + parts.xs + parts.consts, strict=True)
        )
        for op in clone_ops(region.ops, mapping):
            self.process(op)
        for result, value in zip(parts.results, region.yields, strict=True):
            self.rw.replace(result, mapping.get(value, value))

    def forward_unchanged(self, parts: Parts) -> None:
        """A carry that every iteration yields as it came is a const, its result its init; an ``if``
        result that both branches yield as the same operand is that operand."""
        stepping = [region for region in parts.regions if region.steps]
        for k in reversed(range(len(parts.carries))):
            if all(region.yields[k] is region.carries[k] for region in stepping):
                result, init = parts.carry_to_const(k)
                self.rw.replace(result, init)
        if parts.prim is not control.if_:
            return
        then, other = parts.regions
        for k in reversed(range(len(parts.results))):
            a, b = then.yields[k], other.yields[k]
            if a in then.consts and b in other.consts and then.consts.index(a) == other.consts.index(b):
                self.rw.replace(parts.results[k], parts.consts[then.consts.index(a)])
                parts.drop_out(k)

    def merge_outs(self, parts: Parts) -> None:
        """Outs (a scan's ys, an if's results) that every region yields as one value share one
        result: the h of an RNN step that is both a ys the user asked for and a residual the
        backward stacks is stacked once."""
        stepping = [region for region in parts.regions if region.steps]
        n = len(parts.carries)
        if not stepping:
            return
        first: dict[tuple[Value, ...], int] = {}
        for k in range(len(parts.results) - n):
            first.setdefault(tuple(region.yields[n + k] for region in stepping), k)
        for k in reversed(range(len(parts.results) - n)):
            j = first[tuple(region.yields[n + k] for region in stepping)]
            if j != k:
                self.rw.replace(parts.results[n + k], parts.results[n + j])
                parts.drop_out(k)

    def merge_consts(self, parts: Parts) -> None:
        """Consts reading one value (CSE of hoisted ops can make them so) share one lane."""
        parts.consts = [self.rw.lookup(v) for v in parts.consts]
        first: dict[Value, int] = {}
        for k, v in enumerate(parts.consts):
            first.setdefault(v, k)
        for k in reversed(range(len(parts.consts))):
            j = first[parts.consts[k]]
            if j == k:
                continue
            for region in parts.regions:
                region.ops, region.yields = renamed(
                    region.ops, region.yields, {region.consts[k]: region.consts[j]}
                )
            parts.drop_const(k)


def _size(func: Function) -> int:
    return sum(1 + len(op.operands) for op in func.walk())


def simplify(func: Function) -> Function:
    """CSE + folding + identities + loop-invariant code motion + folding of control flow, then DCE,
    in every block; repeated until nothing changes (a few rounds at most)."""
    for _ in range(4):
        before = _size(func)
        func = dce(func.replace_body(_Simplifier(func.body).run()))
        if _size(func) == before:
            break
    return func
