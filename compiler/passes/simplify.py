"""Simplification: dead-code elimination, common-subexpression elimination, constant folding and
algebraic identities. All primitives are pure, so an op whose results nobody reads can go."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from compiler.ir.core import Block, Function, Op, Value
from compiler.ir.rewrite import Rewriter
from compiler.ir.types import DType
from compiler.prims import contraction, source
from compiler.prims import elementwise as ew
from compiler.prims import movement as mv
from compiler.prims.base import Primitive

FOLD_LIMIT = 1024  # fold constants up to this many elements; larger results stay as ops
INPLACE_ATTR = "dsl.inplace"


def dce(func: Function) -> Function:
    """Drop ops whose results are never read (walks backward from the function's results)."""
    live: set[Value] = set(func.results)
    kept: list[Op] = []
    for op in reversed(func.ops):
        if any(r in live for r in op.results):
            kept.append(op)
            live.update(op.operands)
    if len(kept) == len(func.ops):
        return func
    return func.replace_body(Block(func.params, tuple(reversed(kept)), func.results))


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
    def __init__(self, func: Function) -> None:
        self.rw = Rewriter(func)
        self.producer: dict[Value, Op] = {}
        self.seen: dict[tuple[object, ...], Op] = {}

    def forward(self, op: Op) -> Value | None:
        """A value equal to ``op``'s result that already exists, if any."""
        if INPLACE_ATTR in op.attrs:  # keep the user's in-place requests visible to later passes
            return None
        if op.prim in _IDENTITY and _IDENTITY[op.prim](op):
            return op.operands[0]
        neutral = _NEUTRAL.get(op.prim)
        if neutral is not None:
            for k in neutral.positions:
                other = op.operands[1 - k]
                c = source.splat_value(self.producer.get(op.operands[k]))
                if c is not None and other.type == op.result.type and neutral.matches(c, other.type.dtype):
                    return other
        if op.prim is ew.select and op.operands[1] is op.operands[2]:  # either way the same value
            return op.operands[1]
        if op.prim is ew.neg:  # -(-x)
            inner = self.producer.get(op.operands[0])
            if inner is not None and inner.prim is ew.neg:
                return inner.operands[0]
        return None

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

    def run(self) -> Function:
        for original in self.rw.func.ops:
            op = original.with_operands(self.rw.operands(original))
            same = self.forward(op)
            if same is not None:
                self.rw.replace(op.result, same)
                continue
            op = self.merge_movement(self.fold(self.outer_product(op)))
            same = self.forward(op)  # the merged op may be an identity (a transpose undone)
            if same is not None:
                self.rw.replace(op.result, same)
                continue
            key = op.key()
            earlier = self.seen.get(key)
            if earlier is not None and INPLACE_ATTR not in op.attrs:
                self.rw.replace(op.result, earlier.result)
                continue
            self.seen[key] = op
            self.rw.add(op)
            self.producer[op.result] = op
        return self.rw.finish()


def simplify(func: Function) -> Function:
    """CSE + folding + identities, then DCE; repeated until nothing changes (a few rounds at most)."""
    for _ in range(4):
        before = len(func.ops)
        func = dce(_Simplifier(func).run())
        if len(func.ops) == before:
            break
    return func
