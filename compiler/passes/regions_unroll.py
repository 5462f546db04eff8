"""``unroll_regions``: region ops (compiler/prims/control.py) lowered to straight-line IR.

Loops and branches compile natively (``compiler/passes/loops.py``); this pass is the reference they
are compared with, run only with ``Options.native_loops`` off (``DSL_UNROLL_LOOPS=1``), and the
lowering autodiff uses for a ``for`` bounded at run time (a triangular loop); ``vmap`` batches region
ops natively (``compiler/batching.py``). It replaces each region op by straight-line ops:

- ``for`` with constant bounds and ``scan``: the body copied once per iteration (``clone_ops``), each
  copy reading the carries the previous one yielded; a ``scan``'s rows are ``slice``s of ``xs`` and its
  ``ys`` the ``concatenate`` of each iteration's rows (``reshape``d to one leading row each);
- ``if``: both branches, then one ``select`` per result on the (broadcast) predicate. Both branches
  run: this is exact for values (a branch's NaN or inf is not selected), not for cost. For
  gradients, each branch reads its float inputs (operands and the values it reads from above)
  through ``select(pred, x, stop_gradient(x))`` (the else branch: ``select(pred, stop_gradient(x),
  x)``): the same value, but a cotangent leaves a branch only where the branch was taken, so the
  untaken branch's derivative (``sqrt`` at a negative, ``0 * inf``) cannot reach the gradient as NaN
  (JAX's ``cond`` differentiates only the taken branch). ``simplify`` folds the masks away;
- ``while`` and a ``for`` whose bounds are computed at run time: a ``TransformError`` at the user's
  line (they have no unrolled form).

So the program grows with the trip count, exactly as a Python loop would make it.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import MutableMapping

import numpy as np

from compiler.ir.core import Block, Function, Op, Value, clone_ops
from compiler.prims import CONTROL, control, elementwise, movement, source
from runtime.errors import TransformError


def free_values(block: Block) -> list[Value]:
    """The values ``block`` (its nested regions included) reads from the blocks above it, in order."""
    defined: set[Value] = set()
    used: dict[Value, None] = {}

    def visit(b: Block) -> None:
        defined.update(b.args)
        for op in b.ops:
            used.update(dict.fromkeys(op.operands))
            for region in op.regions:
                visit(region)
            defined.update(op.results)
        used.update(dict.fromkeys(b.results))

    visit(block)
    return [v for v in used if v not in defined]


def has_regions(func: Function) -> bool:
    return any(op.prim in CONTROL for op in func.ops)


def unroll_regions(func: Function, for_grad: bool = False) -> Function:
    """``func`` with every region op replaced by straight-line ops (see the module docstring);
    ``func`` itself when it holds none. ``for_grad``: the message of a ``while`` is reverse mode's."""
    if not has_regions(func):
        return func
    unroller = _Unroller(func, for_grad)
    mapping: dict[Value, Value] = {}
    ops = unroller.block_ops(func.ops, mapping)
    results = tuple(mapping.get(v, v) for v in func.results)
    return func.replace_body(Block(func.params, tuple(ops), results))


class _Unroller:
    def __init__(self, func: Function, for_grad: bool) -> None:
        self.for_grad = for_grad
        self.producer = {r: op for op in func.walk() for r in op.results}  # to read constant bounds
        self.counters: dict[Value, int] = {}  # the constant counters of unrolled loops (inner bounds)
        self.out: list[Op] = []

    def block_ops(self, ops: tuple[Op, ...], mapping: MutableMapping[Value, Value]) -> list[Op]:
        """The straight-line form of ``ops`` (``mapping``: values already replaced, gains the rest)."""
        saved, self.out = self.out, []
        for op in ops:
            operands = [mapping.get(v, v) for v in op.operands]
            if op.prim in CONTROL:
                results = self.unroll(op, operands, mapping)
                mapping.update(zip(op.results, results, strict=True))
            else:
                self.out += clone_ops([op], mapping)
        out, self.out = self.out, saved
        return out

    def emit(self, prim: object, operands: list[Value], attrs: dict[str, object], loc: object) -> Value:
        op = Op.create(prim, operands, attrs, loc)  # type: ignore[arg-type]
        self.out.append(op)
        return op.result

    def inline(self, block: Block, args: list[Value], outer: MutableMapping[Value, Value]) -> list[Value]:
        """``block``'s ops once more, its arguments bound to ``args`` and the values it reads from
        above replaced as ``outer`` says; returns what it yields."""
        mapping = ChainMap(dict(zip(block.args, args, strict=True)), outer)
        self.out += self.block_ops(block.ops, mapping)
        return [mapping.get(v, v) for v in block.results]

    def unroll(self, op: Op, operands: list[Value], outer: MutableMapping[Value, Value]) -> list[Value]:
        if op.prim is control.for_loop:
            return self.for_loop(op, operands, outer)
        if op.prim is control.scan:
            return self.scan(op, operands, outer)
        if op.prim is control.if_:
            return self.if_(op, operands, outer)
        if self.for_grad:
            raise TransformError(
                f"{op.loc}: reverse-mode differentiation does not work through dsl.while_loop (its trip "
                "count is known only at run time, as in JAX); use dsl.fori_loop or dsl.scan with a "
                "static trip count, or forward mode (dsl.jvp)"
            )
        raise TransformError(
            f"{op.loc}: dsl.while_loop is not compiled when loops are unrolled (native_loops=False or "
            "DSL_UNROLL_LOOPS=1): it has no unrolled form; compile with native loops (the default), or "
            "use dsl.fori_loop or dsl.scan with a static trip count"
        )

    def constant_bound(self, op: Op, value: Value, mapped: Value) -> int:
        if mapped in self.counters:  # an enclosing loop's counter, unrolled: a triangular loop
            return self.counters[mapped]
        producer = self.producer.get(value)
        if producer is None or producer.prim is not source.constant:
            raise TransformError(
                f"{op.loc}: dsl.fori_loop with a trip count computed at run time has no unrolled form "
                "(reverse-mode differentiation through it, as in JAX, and native_loops=False need a "
                "static one): pass Python ints as lower and upper, or make them static arguments "
                "(static_argnums)"
            )
        return int(np.asarray(producer.attrs["value"]))

    def for_loop(self, op: Op, operands: list[Value], outer: MutableMapping[Value, Value]) -> list[Value]:
        lower, upper = (
            self.constant_bound(op, v, m) for v, m in zip(op.operands[:2], operands, strict=False)
        )
        carries, consts = control.split_consts(operands[2:], op.attrs)
        for i in range(lower, upper):
            counter = self.emit(source.constant, [], {"value": np.array(i, np.int64)}, op.loc)
            self.counters[counter] = i
            carries = self.inline(op.regions[0], [counter, *carries, *consts], outer)
        return carries

    def scan(self, op: Op, operands: list[Value], outer: MutableMapping[Value, Value]) -> list[Value]:
        n, length = int(op.attrs["carries"]), int(op.attrs["length"])
        rest, consts = control.split_consts(operands, op.attrs)
        carries, xs = rest[:n], rest[n:]
        body = op.regions[0]
        rows: list[list[Value]] = [[] for _ in body.results[n:]]
        steps = range(length - 1, -1, -1) if op.attrs["reverse"] else range(length)
        for t in steps:
            x_rows = [self.row(x, t, op) for x in xs]
            out = self.inline(body, [*carries, *x_rows, *consts], outer)
            carries = out[:n]
            for k, y in enumerate(out[n:]):
                rows[k].append(self.emit(movement.reshape, [y], {"shape": (1, *y.type.shape)}, op.loc))
        ys = []
        for k, result in enumerate(op.results[n:]):
            stacked = rows[k][::-1] if op.attrs["reverse"] else rows[k]
            if not stacked:  # length 0: an empty array of the result's type
                empty = np.zeros(result.type.shape, result.type.dtype.np)
                ys.append(self.emit(source.constant, [], {"value": empty}, op.loc))
            elif len(stacked) == 1:
                ys.append(stacked[0])
            else:
                ys.append(self.emit(movement.concatenate, stacked, {"axis": 0}, op.loc))
        return [*carries, *ys]

    def masked(self, x: Value, pred: Value, side: int, op: Op) -> Value:
        """``x`` as branch ``side`` of an ``if`` reads it: equal to ``x``, its cotangent zero where
        the other branch is taken (``select`` of ``x`` and ``stop_gradient(x)``)."""
        if not x.type.dtype.is_float:
            return x
        p = pred
        if x.type.shape:
            p = self.emit(movement.broadcast, [pred], {"shape": x.type.shape}, op.loc)
        frozen = self.emit(elementwise.stop_gradient, [x], {}, op.loc)
        taken, other = (x, frozen) if side == 0 else (frozen, x)
        return self.emit(elementwise.select, [p, taken, other], {}, op.loc)

    def row(self, x: Value, t: int, op: Op) -> Value:
        """Row ``t`` of ``x`` (axis 0 dropped)."""
        shape = x.type.shape
        start = (t,) + (0,) * (len(shape) - 1)
        limit = (t + 1, *shape[1:])
        strides = (1,) * len(shape)
        sliced = self.emit(movement.slice_, [x], {"start": start, "limit": limit, "stride": strides}, op.loc)
        return self.emit(movement.reshape, [sliced], {"shape": shape[1:]}, op.loc)

    def if_(self, op: Op, operands: list[Value], outer: MutableMapping[Value, Value]) -> list[Value]:
        pred, *args = operands
        branches = []
        for side, block in enumerate(op.regions):  # each branch's inputs masked for gradients
            above = {v: self.masked(outer.get(v, v), pred, side, op) for v in free_values(block)}
            inputs = [self.masked(a, pred, side, op) for a in args]
            branches.append(self.inline(block, inputs, ChainMap(above, outer)))
        then, else_ = branches
        out = []
        for a, b in zip(then, else_, strict=True):
            p = pred
            if a.type.shape:
                p = self.emit(movement.broadcast, [pred], {"shape": a.type.shape}, op.loc)
            out.append(self.emit(elementwise.select, [p, a, b], {}, op.loc))
        return out
