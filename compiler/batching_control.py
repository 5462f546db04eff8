"""Batching (``vmap``) of the region ops (``compiler/prims/control.py``), as JAX's batching rules for
``lax``'s control flow: a loop or branch that reads a batched value stays one region op, its regions
batched by ``batch_function`` (so loops and branches nested in them are handled the same way) and
closed as before; the program's size does not depend on the trip count.

A rule (``REGION_RULES``) gets the closed region op, its new operands and which of them are batched;
it appends the batched op (and the ops around it) to ``build`` and returns, per result of the op, its
batched value, or None where the result stays shared: then the new op defines the old result value
itself, so the ops after it read it as they are.

- ``while`` (``_batch_while``): a carry is batched once its init or the body makes it so (a fixpoint
  over the body's batching, shared by the loops). With a shared predicate the loop runs its one trip
  count on the batched carries; with one that differs per example every carry is batched, the loop
  runs until every example is done, and each example keeps its carries from the iteration its own
  predicate failed (the body selects).
- ``for`` (``_batch_for``): shared bounds keep the ``for`` (the counter shared), the carries batched
  to the fixpoint. A bound that differs per example makes it a ``while`` over the counter and the
  carries (``_for_as_while``), batched as above: each example its own trip count.
- ``scan`` (``_batch_scan``): the carries batched to the fixpoint; a batched ``xs`` is scanned with
  the batch as its axis 1 (each row the body gets is batched on its axis 0) and a batched ``ys``
  stacked so and moved back to axis 0; consts as they come; ``length`` and ``reverse`` kept.
- ``if`` (``_batch_if``): a shared predicate keeps one ``if``, a result batched if either branch's
  is; a predicate that differs per example runs both branches on the batch (their loops native, a
  ``while`` in a branch run for every example, as in JAX) and selects each result per example.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from compiler.batching import _Builder, batch_function
from compiler.ir.core import Block, Function, Op, Value, clone_ops
from compiler.ir.types import TensorType
from compiler.prims import control, source
from compiler.prims import elementwise as ew
from compiler.prims import movement as mv
from compiler.prims import reduction as red
from compiler.prims.batch_helpers import with_batch


def _region(block: Block, flags: Sequence[bool], size: int) -> tuple[Function, list[bool]]:
    """A closed region's block batched over the lanes ``flags`` marks, and which of its yields are."""
    return batch_function(Function("region", block), flags, size)


def _widened(
    build: _Builder, values: Sequence[Value], out: Sequence[bool], want: Sequence[bool], size: int
) -> list[Value]:
    """``values`` (a region's yields, ``out`` marking the batched ones), those ``want`` marks batched
    (broadcast where the region left one shared)."""
    return [with_batch(build, v, b, size) if w else v for v, b, w in zip(values, out, want, strict=True)]


def _block(region: Function, tail: _Builder, results: Sequence[Value]) -> Block:
    """A batched region's block, the ops of ``tail`` after its own, yielding ``results``."""
    return Block(region.params, tuple(region.ops) + tuple(tail.ops), tuple(results))


def _carry_fixpoint(carries: Sequence[bool], step: Any) -> tuple[list[bool], Any]:
    """The carries a loop batches (JAX's fixpoint): ``step(carry_b)`` batches the loop's regions with
    the carries ``carry_b`` marks batched and returns ``(what it built, which carries its regions
    yield batched)``; a carry is batched once its init is or a region makes it so."""
    carry_b = list(carries)
    while True:
        built, out = step(carry_b)
        grown = [c or o for c, o in zip(carry_b, out, strict=True)]
        if grown == carry_b:
            return carry_b, built
        carry_b = grown


def _results(op: Op, types: Sequence[TensorType], batched: Sequence[bool]) -> tuple[Value, ...]:
    """The new op's results: a new value of type ``types[k]`` where batched, else ``op``'s own."""
    return tuple(Value(t) if b else r for r, t, b in zip(op.results, types, batched, strict=True))


def _swap01(build: _Builder, v: Value) -> Value:
    """``v`` with its first two axes swapped (a scan's rows and the batch)."""
    perm = (1, 0) + tuple(range(2, len(v.type.shape)))
    return build(mv.transpose, [v], {"perm": perm})


def _per_example(build: _Builder, pred: Value, shape: tuple[int, ...]) -> Value:
    """A ``(size,)`` predicate broadcast over each example's ``shape``."""
    lead = pred.type.shape + (1,) * (len(shape) - 1)
    return build(mv.broadcast, [build(mv.reshape, [pred], {"shape": lead})], {"shape": shape})


# ---- while ----------------------------------------------------------------------------------------


def _batch_while(
    outer: _Builder, op: Op, operands: Sequence[Value], flags: Sequence[bool], size: int
) -> list[Value | None]:
    """The ``while`` ``op`` (closed) over a batch: its new operands ``operands``, those marked in
    ``flags`` batched (a shared init of a batched carry is broadcast by ``outer``).

    As JAX's ``_while_loop_batching_rule``: a carry is batched if its init is or the body makes it so
    (a fixpoint over the body's batching). If then the cond's predicate is shared, the loop runs as
    before on the batched carries. If it differs per example, every carry is batched, the loop runs
    while any example's predicate holds, and an example whose own predicate no longer holds keeps its
    carries (the body selects, per example, between its new carries and the old).
    """
    cond, body = op.regions
    carries, consts = control.split_consts(list(flags), op.attrs)
    nc = len(carries)

    def step(carry_b: list[bool]) -> tuple[Any, list[bool]]:
        c_func, (pred_b,) = _region(cond, carry_b + consts, size)
        if pred_b and not all(carry_b):  # each example stops at its own iteration: all carries differ
            return None, [True] * nc
        b_func, out = _region(body, carry_b + consts, size)
        return (c_func, pred_b, b_func, out), out

    carry_b, (c_func, pred_b, b_func, out) = _carry_fixpoint(carries, step)
    build = _Builder(op.loc)
    new_carries = _widened(build, b_func.results, out, carry_b, size)
    c_params, c_ops, (pred,) = c_func.params, list(c_func.ops), c_func.results
    if pred_b:
        # the body asks each example's predicate again and keeps the carries of those that are done
        mapping = dict(zip(c_func.params, b_func.params, strict=True))
        live = clone_ops(c_func.ops, mapping)
        build.ops = live + build.ops
        new_carries = [
            build(ew.select, [_per_example(build, mapping.get(pred, pred), v.type.shape), v, a])
            for v, a in zip(new_carries, b_func.params, strict=False)
        ]
        any_ = _Builder(op.loc)
        pred = any_(red.reduce_max, [pred], {"axes": (0,)})
        c_ops += any_.ops
    regions = (Block(c_params, tuple(c_ops), (pred,)), _block(b_func, build, new_carries))
    inits = _widened(outer, operands[:nc], flags[:nc], carry_b, size)
    results = _results(op, [p.type for p in b_func.params[:nc]], carry_b)
    outer.ops.append(
        Op(op.prim, tuple(inits + list(operands[nc:])), dict(op.attrs), results, op.loc, regions)
    )
    return [r if b else None for r, b in zip(results, carry_b, strict=True)]


# ---- for ------------------------------------------------------------------------------------------


def _batch_for(
    outer: _Builder, op: Op, operands: Sequence[Value], flags: Sequence[bool], size: int
) -> list[Value | None]:
    """The ``for`` ``op`` (closed) over a batch. With shared bounds it stays a ``for`` (one trip count),
    its carries batched to a fixpoint as a ``while``'s, the counter shared. A bound that differs per
    example makes it a ``while`` over the counter and the carries, batched by ``_batch_while`` (each
    example its own trip count), as JAX's ``fori_loop`` with bounds known at run time is."""
    lower_b, upper_b, *rest = flags
    if lower_b or upper_b:
        return _for_as_while(outer, op, operands, flags, size)
    carries, consts = control.split_consts(rest, op.attrs)
    nc = len(carries)
    body = op.regions[0]

    def step(carry_b: list[bool]) -> tuple[Any, list[bool]]:
        b_func, out = _region(body, [False, *carry_b, *consts], size)
        return (b_func, out), out

    carry_b, (b_func, out) = _carry_fixpoint(carries, step)
    tail = _Builder(op.loc)
    yields = _widened(tail, b_func.results, out, carry_b, size)
    inits = _widened(outer, operands[2 : 2 + nc], flags[2 : 2 + nc], carry_b, size)
    results = _results(op, [p.type for p in b_func.params[1 : 1 + nc]], carry_b)
    region = _block(b_func, tail, yields)
    new_operands = (*operands[:2], *inits, *operands[2 + nc :])
    outer.ops.append(Op(op.prim, new_operands, dict(op.attrs), results, op.loc, (region,)))
    return [r if b else None for r, b in zip(results, carry_b, strict=True)]


def _for_as_while(
    outer: _Builder, op: Op, operands: Sequence[Value], flags: Sequence[bool], size: int
) -> list[Value | None]:
    """A ``for`` whose bounds differ per example as the ``while`` over ``(i, carries...)`` with consts
    ``(upper, consts...)``, ``i < upper`` its cond and ``i + 1`` beside the body's carries, batched."""
    lower, upper, *rest = op.operands
    carries, consts = control.split_consts(rest, op.attrs)
    nc, body = len(carries), op.regions[0]
    lanes = [lower, *carries, upper, *consts]

    def args() -> list[Value]:
        return [Value(v.type) for v in lanes]

    cond_args, cond = args(), _Builder(op.loc)
    pred = cond(ew.lt, [cond_args[0], cond_args[1 + nc]])
    body_args, step = args(), _Builder(op.loc)
    i, new = body_args[0], body_args[1 : 1 + nc]
    mapping = dict(zip(body.args, [i, *new, *body_args[2 + nc :]], strict=True))
    step.ops = clone_ops(body.ops, mapping)
    one = step(source.constant, [], {"value": np.array(1, np.int64)})
    yields = [step(ew.add, [i, one]), *(mapping.get(v, v) for v in body.results)]
    regions = (
        Block(tuple(cond_args), tuple(cond.ops), (pred,)),
        Block(tuple(body_args), tuple(step.ops), tuple(yields)),
    )
    loop = Op.create(control.while_loop, lanes, {control.CONSTS: 1 + len(consts)}, op.loc, regions)
    lo, hi, *new_rest = operands
    lo_b, hi_b, *rest_b = flags
    outs = _batch_while(
        outer, loop, [lo, *new_rest[:nc], hi, *new_rest[nc:]], [lo_b, *rest_b[:nc], hi_b, *rest_b[nc:]], size
    )
    assert all(v is not None for v in outs), "a per-example trip count batches every carry"
    return outs[1:]


# ---- scan -----------------------------------------------------------------------------------------


def _batch_scan(
    outer: _Builder, op: Op, operands: Sequence[Value], flags: Sequence[bool], size: int
) -> list[Value | None]:
    """The ``scan`` ``op`` (closed) over a batch, as JAX's ``_scan_batching_rule``: its carries batched
    to a fixpoint, a batched ``xs`` scanned with the batch as its axis 1 (the rows stay axis 0, so
    each row the body gets is batched on its axis 0), consts as they come, a batched ``ys`` stacked
    with the batch as its axis 1 and moved back to axis 0; ``length`` and ``reverse`` kept."""
    n = int(op.attrs["carries"])
    rest, consts = control.split_consts(list(flags), op.attrs)
    carries, xs = rest[:n], rest[n:]
    body = op.regions[0]

    def step(carry_b: list[bool]) -> tuple[Any, list[bool]]:
        b_func, out = _region(body, [*carry_b, *xs, *consts], size)
        return (b_func, out), out[:n]

    carry_b, (b_func, out) = _carry_fixpoint(carries, step)
    ys_b = out[n:]
    tail = _Builder(op.loc)
    yields = _widened(tail, b_func.results[:n], out[:n], carry_b, size) + list(b_func.results[n:])
    inits = _widened(outer, operands[:n], flags[:n], carry_b, size)
    scanned = [_swap01(outer, v) if b else v for v, b in zip(operands[n : n + len(xs)], xs, strict=True)]
    length = int(op.attrs["length"])
    types = [v.type for v in yields[:n]] + [
        TensorType((length, *v.type.shape), v.type.dtype) for v in yields[n:]
    ]
    results = _results(op, types, carry_b + ys_b)
    region = _block(b_func, tail, yields)
    new_operands = (*inits, *scanned, *operands[n + len(xs) :])
    outer.ops.append(Op(op.prim, new_operands, dict(op.attrs), results, op.loc, (region,)))
    ys = [_swap01(outer, r) if b else None for r, b in zip(results[n:], ys_b, strict=True)]
    return [r if b else None for r, b in zip(results[:n], carry_b, strict=True)] + ys


# ---- if -------------------------------------------------------------------------------------------


def _batch_if(
    outer: _Builder, op: Op, operands: Sequence[Value], flags: Sequence[bool], size: int
) -> list[Value | None]:
    """The ``if`` ``op`` (closed) over a batch, as JAX's ``_cond_batching_rule``. A shared predicate
    keeps one ``if``, each branch batched over the batched operands, a result batched if either
    branch's is (the other branch broadcasts its). A predicate that differs per example runs both
    branches on the batch and selects each result per example; each branch reads its float operands
    through ``select(pred, x, stop_gradient(x))`` (the else branch the other way round), as the
    unroller and JAX do, so no cotangent leaves a branch where it was not taken (the untaken branch's
    NaN derivative cannot reach a gradient)."""
    pred_b, *args_b = flags
    pred, *args = operands
    if not pred_b:
        funcs = [_region(block, args_b, size) for block in op.regions]
        out_b = [any(bs) for bs in zip(*(out for _, out in funcs), strict=True)]
        blocks = []
        for func, out in funcs:
            tail = _Builder(op.loc)
            blocks.append(_block(func, tail, _widened(tail, func.results, out, out_b, size)))
        types = [v.type for v in blocks[0].results]
        results = _results(op, types, out_b)
        outer.ops.append(Op(op.prim, tuple(operands), dict(op.attrs), results, op.loc, tuple(blocks)))
        return [r if b else None for r, b in zip(results, out_b, strict=True)]
    branches = []
    for side, block in enumerate(op.regions):
        inputs = [_masked(outer, a, b, pred, side, size) for a, b in zip(args, args_b, strict=True)]
        in_b = [b or a.type.dtype.is_float for a, b in zip(args, args_b, strict=True)]
        func, out = _region(block, in_b, size)
        mapping = dict(zip(func.params, inputs, strict=True))
        outer.ops += clone_ops(func.ops, mapping)
        yields = [mapping.get(v, v) for v in func.results]
        branches.append(_widened(outer, yields, out, [True] * len(yields), size))
    then, else_ = branches
    return [
        outer(ew.select, [_per_example(outer, pred, a.type.shape), a, b])
        for a, b in zip(then, else_, strict=True)
    ]


def _masked(build: _Builder, x: Value, batched: bool, pred: Value, side: int, size: int) -> Value:
    """``x`` (batched or not) as branch ``side`` of an ``if`` on the per-example ``pred`` reads it:
    equal to ``x`` batched, its cotangent zero for the examples that take the other branch."""
    if not x.type.dtype.is_float:
        return x
    x = with_batch(build, x, batched, size)
    frozen = build(ew.stop_gradient, [x])
    taken, other = (x, frozen) if side == 0 else (frozen, x)
    return build(ew.select, [_per_example(build, pred, x.type.shape), taken, other])


REGION_RULES = {
    control.while_loop: _batch_while,
    control.for_loop: _batch_for,
    control.scan: _batch_scan,
    control.if_: _batch_if,
}
