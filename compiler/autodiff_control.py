"""Reverse mode through loops and branches, natively: the vjps of the region ops
(``compiler/prims/control.py``), so the joint forward+backward program of a loop is itself a loop,
whose size does not depend on the trip count.

``scan`` (JAX's scheme). The body's own vjp comes from the sweep (``compiler/autodiff.py``) run on
the body block, seeded with new values standing for the cotangents of what the body yields. Its
joint program splits in two: the body's own ops stay forward, the ops the sweep added are the
backward body. The forward scan replaces the original one (``_Builder.replace``, same result values): it also
yields, as extra ``ys``, the per-iteration values the backward body reads (the residuals, stacked one
row per iteration). The backward scan runs the other way over those rows, carrying the cotangents of
the carries and one accumulator per const that gets a cotangent (a const is read by every iteration:
its cotangent is the sum over iterations); its ``ys`` are the cotangents of the rows of ``xs``. What
the backward body reads from the forward:

- stacked: each iteration's values of the forward body that depend on a carry or a row (the
  carries coming in, the body's intermediates the vjp rules read; a carry needed both as it comes
  in and as it goes out is stacked once, the backward carrying each row to the step that needs
  it as the outgoing value): storing them is what saves
  running the forward again, as JAX's scan stores its residuals; a loop is not checkpointed. The
  ops the sweep adds (the rules' factors such as ``1 - tanh^2``, and the cotangent arithmetic) run
  in the backward body, so only values the forward computes anyway are stored (JAX computes those
  factors in the forward and stores them too);
- read as they are: rows of ``xs`` (the backward scan takes ``xs`` itself) and consts (passed
  again as consts);
- recomputed in the backward body: values that depend on consts alone (or on nothing: the vjp
  rules' constants and broadcasts, a transposed weight), which would cost one row per iteration if
  stacked and are hoisted out of both loops by loop-invariant code motion.

A ``for`` with constant bounds is differentiated as the scan it is: its counter becomes a row of an
``iota`` (lower + 0..n-1), no ``ys``. Bounds known only at run time cannot be reversed (the stacked
residuals have no static length): ``prepare_regions`` unrolls such programs (a triangular loop, its
inner bound the outer counter) as before, and one whose trip count is not known at trace time at all
is the ``TransformError`` JAX raises.

``if``: the backward is an ``if`` on the same predicate whose branches are each branch's forward,
recomputed, followed by its sweep. Only the taken branch's vjp runs (JAX's semantics: the untaken
branch contributes nothing, no NaN from its derivative). Recomputing costs the taken branch's forward
once more; passing residuals out of the forward ``if`` instead would need the same result types from
both branches, so every residual of one branch would be a zero-filled buffer in the other (JAX's
join), and the forward program would change for all its readers.

``while``: reverse mode raises ``TransformError`` at the user's line when a value that depends on a
differentiated argument goes through it (JAX's behaviour); one that does not is left alone.

Pruning: a carry depends on a differentiated value if its init or, at a fixpoint over the body, the
body's yield of it does (``region_dependents``); a carry's cotangent is carried only if some iteration
can give it a nonzero one (a fixpoint from the seeded carries). Carries, ``xs`` and consts outside
both sets cost no cotangent work inside the loops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from compiler.autodiff import _Builder, dependents, sweep
from compiler.ir.core import Block, Function, Op, Value, clone_ops
from compiler.ir.types import DType
from compiler.passes.regions import close_regions
from compiler.passes.regions_unroll import unroll_regions
from compiler.prims import control, elementwise, movement, source
from compiler.prims.control import split_consts
from runtime.errors import TransformError

Cts = Sequence[Value | None]


def prepare_regions(func: Function) -> Function:
    """``func`` ready for the sweep: regions closed; a program with a ``for`` whose bounds are not
    constants (an inner loop bounded by the outer counter) unrolled, as it was before loops had
    vjps (its loop is no scan: the residuals would have no static length)."""
    func = close_regions(func)
    producer = {r: op for op in func.walk() for r in op.results}
    for op in func.walk():
        if op.prim is control.for_loop and _bounds(op, producer) is None:
            return unroll_regions(func, for_grad=True)
    return func


def _bounds(op: Op, producer: dict[Value, Op]) -> tuple[int, int] | None:
    got = []
    for v in op.operands[:2]:
        p = producer.get(v)
        if p is None or p.prim is not source.constant:
            return None
        got.append(int(np.asarray(p.attrs["value"])))
    return got[0], got[1]


# ---- which results depend on a differentiated value ------------------------------------------------


def _loop(op: Op) -> tuple[Block, list[tuple[Value, Value]], list[Value]]:
    """A loop's body, its (block argument, operand) pairs and its carry arguments (the body
    yields the carries first; a loop's results correspond one to one to the body's results)."""
    n = int(op.attrs["carries"]) if op.prim is control.scan else len(op.results)
    if op.prim is control.for_loop:
        body = op.regions[0]
        return body, list(zip(body.args[1:], op.operands[2:], strict=True)), list(body.args[1 : 1 + n])
    body = op.regions[-1]  # a while's body follows its cond
    return body, list(zip(body.args, op.operands, strict=True)), list(body.args[:n])


def _loop_needs(body: Block, carry_args: Sequence[Value], needed: set[Value]) -> set[Value]:
    """The body's values that depend on ``needed`` args, once the carries whose yield depends on
    them are needed too (a fixpoint: each round adds a carry)."""
    needed = set(needed)
    while True:
        inside = dependents(body.ops, [a for a in body.args if a in needed])
        more = {
            a for a, y in zip(carry_args, body.results, strict=False) if y in inside and a.type.dtype.is_float
        }
        if more <= needed:
            return inside
        needed |= more


def region_dependents(op: Op, needs: set[Value]) -> list[Value]:
    """The results of region ``op`` that depend on a value of ``needs`` (its operands decide)."""
    if op.prim is control.if_:
        inside: set[Value] = set()
        for block in op.regions:
            inside |= dependents(
                block.ops, [a for a, v in zip(block.args, op.operands[1:], strict=True) if v in needs]
            )
        yields = list(zip(*(b.results for b in op.regions), strict=True))
    else:
        body, pairs, carry_args = _loop(op)
        inside = _loop_needs(body, carry_args, {a for a, v in pairs if v in needs})
        yields = [(y,) for y in body.results]
    return [
        r
        for r, ys in zip(op.results, yields, strict=True)
        if r.type.dtype.is_float and any(y in inside for y in ys)
    ]


# ---- scan and for ------------------------------------------------------------------------------


def _reverse_scan(build: _Builder, op: Op, cts: Cts, wanted: Sequence[bool]) -> tuple[Op, list[Value | None]]:
    """The forward scan stacking the residuals (it keeps ``op``'s result values) and the cotangents
    of ``op``'s operands, from a backward scan appended to ``build``."""
    n, body = int(op.attrs["carries"]), op.regions[0]
    _, pairs, carry_args = _loop(op)
    inside = _loop_needs(body, carry_args, {a for (a, _), w in zip(pairs, wanted, strict=True) if w})
    wrt = [a for a in body.args if a in inside]
    z = {k for k in range(n) if cts[k] is not None and carry_args[k] in inside}
    while True:  # the carries whose cotangent some iteration makes nonzero
        part = _BodyVjp(op, wrt, z, cts, inside)
        more = {k for k in range(n) if part.grads[carry_args[k]] is not None}
        if more <= z:
            break
        z |= more
    return part.emit(build, list(wanted))


class _BodyVjp:
    """A scan body's joint program, split into what the forward scan adds and the backward body."""

    def __init__(self, op: Op, wrt: list[Value], z: set[int], cts: Cts, inside: set[Value]) -> None:
        self.op, self.n, self.body, self.cts = op, int(op.attrs["carries"]), op.regions[0], cts
        n, results = self.n, self.body.results
        inner = self.inner = _Builder()
        inner.loc = op.loc
        self.z = sorted(z)
        self.seed_c = [Value(results[k].type) for k in self.z]
        self.ys = [j for j in range(len(results) - n) if cts[n + j] is not None and results[n + j] in inside]
        self.seed_y = [Value(results[n + j].type) for j in self.ys]
        seeds: dict[Value, Value] = {}
        for v, s in zip(
            [results[k] for k in self.z] + [results[n + j] for j in self.ys], self.seed_c + self.seed_y
        ):
            seeds[v] = inner(elementwise.add, [seeds[v], s]) if v in seeds else s
        self.grads = dict(zip(wrt, sweep(self.body.ops, wrt, seeds, inner), strict=True))
        for a in self.body.args:
            self.grads.setdefault(a, None)

    def emit(self, build: _Builder, wanted: list[bool]) -> tuple[Op, list[Value | None]]:
        op, n, body, inner, cts = self.op, self.n, self.body, self.inner, self.cts
        length, m = int(op.attrs["length"]), len(op.operands) - n - int(op.attrs.get("consts", 0))
        args, operands = body.args, op.operands
        x_args, k_args = list(args[n : n + m]), list(args[n + m :])
        carry_args = list(args[:n])
        # what the backward body yields: carry cotangents, const accumulators, row cotangents
        yields = [self.grads[carry_args[k]] or inner.zeros(carry_args[k].type) for k in self.z]
        accs = [k for k, a in enumerate(k_args) if wanted[n + m + k] and self.grads[a] is not None]
        acc_args = [Value(k_args[k].type) for k in accs]
        yields += [
            inner(elementwise.add, [acc, _some(self.grads[k_args[k]])])
            for acc, k in zip(acc_args, accs, strict=True)
        ]
        xcts = [j for j, a in enumerate(x_args) if wanted[n + j] and self.grads[a] is not None]
        if not accs and not xcts and not any(wanted[k] for k in self.z):
            return op, [None] * len(operands)  # nothing reaches a wanted operand
        yields += [_some(self.grads[x_args[j]]) for j in xcts]
        # The body's forward stays in the forward scan; every op the sweep added (the vjp rules'
        # factors such as 1 - tanh^2, and the cotangent arithmetic) runs in the backward body: each
        # costs one evaluation per iteration either way, and the forward stacks only its own values.
        forward_ops = inner.forward(body.ops)
        backward = _closure(inner.ops, set(yields))
        invariant = set(k_args)
        for o in forward_ops:
            if all(v in invariant for v in o.operands):
                invariant.update(o.results)
        reads = _reads(backward, yields, set(self.seed_c + self.seed_y + acc_args))
        consts = dict.fromkeys(a for a in k_args if a in reads)
        xs = [a for a in x_args if a in reads]
        recompute = _closure(forward_ops, {v for v in reads if v in invariant and v not in consts})
        consts.update(dict.fromkeys(v for o in recompute for v in o.operands if v in k_args))
        stacked = [v for v in reads if v not in invariant and v not in xs]
        # A carry both stacked as it comes in and as the body yields it (an RNN's h: its matmul's vjp
        # reads the old h, tanh's the new) is stacked once: the backward scan carries each
        # iteration's row of it into the next step, which runs the iteration before, whose
        # outgoing value it is (the first step gets the forward scan's final carry).
        chained = [
            k
            for k in range(n)
            if carry_args[k] in stacked and body.results[k] in stacked and body.results[k] not in args
        ]
        stacked = [v for v in stacked if v not in {body.results[k] for k in chained}]
        # the forward scan, stacking the residuals as extra ys
        fwd_body = Block(args, tuple(forward_ops), tuple(body.results) + tuple(stacked))
        typed = Op.create(op.prim, op.operands, op.attrs, op.loc, (fwd_body,))
        residuals = typed.results[len(op.results) :]
        forward = Op(op.prim, op.operands, op.attrs, op.results + residuals, op.loc, (fwd_body,))
        # the backward scan, running the other way
        rows = [Value(v.type) for v in stacked]
        x_rows = [Value(v.type) for v in xs]
        const_args = [Value(v.type) for v in consts]
        outgoing = [Value(carry_args[k].type) for k in chained]  # the chained carries' new values
        mapping: dict[Value, Value] = dict(
            zip(
                stacked + xs + list(consts) + [body.results[k] for k in chained],
                rows + x_rows + const_args + outgoing,
                strict=True,
            )
        )
        ops = clone_ops(recompute, mapping) + clone_ops(backward, mapping)
        block_args = self.seed_c + acc_args + outgoing + rows + x_rows + self.seed_y + const_args
        carried = len(self.z) + len(accs)  # the yields of the carries before the chained ones
        ends = [*yields[:carried], *(carry_args[k] for k in chained), *yields[carried:]]
        bwd_body = Block(tuple(block_args), tuple(ops), tuple(mapping.get(v, v) for v in ends))
        build.loc = op.loc
        inits = [cts[k] or build.zeros(carry_args[k].type) for k in self.z]
        inits += [build.zeros(k_args[k].type) for k in accs]
        inits += [op.results[k] for k in chained]
        x_of = dict(zip(x_args, operands[n : n + m], strict=True))
        k_of = dict(zip(k_args, operands[n + m :], strict=True))
        bwd_operands = (
            inits
            + list(residuals)
            + [x_of[a] for a in xs]
            + [_some(cts[n + j]) for j in self.ys]
            + [k_of[a] for a in consts]
        )
        attrs = {
            "carries": len(inits),
            "length": length,
            "reverse": not op.attrs["reverse"],
            control.CONSTS: len(consts),
        }
        back = build.emit(control.scan, bwd_operands, attrs, (bwd_body,))
        out = iter(back.results)
        grads: list[Value | None] = [None] * len(operands)
        for k in self.z:
            grads[k] = next(out)
        for k in accs:
            grads[n + m + k] = next(out)
        for _ in chained:
            next(out)
        for j in xcts:
            grads[n + j] = next(out)
        return forward, [g if w else None for g, w in zip(grads, wanted, strict=True)]


def _some(v: Value | None) -> Value:
    assert v is not None
    return v


def _reads(ops: Sequence[Op], results: Sequence[Value], defined: set[Value]) -> dict[Value, None]:
    """What ``ops`` and ``results`` read that neither ``ops`` nor ``defined`` define, in order."""
    defined = set(defined)
    reads: dict[Value, None] = {}
    for o in ops:
        reads.update((v, None) for v in o.operands if v not in defined)
        defined.update(o.results)
    reads.update((v, None) for v in results if v not in defined)
    return reads


def _closure(ops: Sequence[Op], values: set[Value]) -> list[Op]:
    """The ops of ``ops`` (in order) that ``values`` are computed by, transitively."""
    need = set(values)
    picked = []
    for o in reversed(ops):
        if any(r in need for r in o.results):
            picked.append(o)
            need.update(o.operands)
    return picked[::-1]


def _scan_vjp(build: _Builder, op: Op, cts: Cts, wanted: tuple[bool, ...]) -> list[Value | None]:
    forward, grads = _reverse_scan(build, op, cts, wanted)
    build.replace(op, [forward])
    return grads


def _for_vjp(build: _Builder, op: Op, cts: Cts, wanted: tuple[bool, ...]) -> list[Value | None]:
    """A ``for`` with constant bounds is the scan over ``lower + iota(n)`` with no ``ys``."""
    bounds = _bounds(op, build.producer)
    if bounds is None:
        raise TransformError(
            f"{op.loc}: reverse-mode differentiation does not work through dsl.fori_loop with a trip "
            "count known only at run time (as in JAX): pass Python ints as lower and upper, or make "
            "them static arguments (static_argnums)"
        )
    lower, upper = bounds
    length = max(upper - lower, 0)
    prefix = _Builder()
    prefix.loc = op.loc
    counter = prefix(source.iota, [], {"shape": (length,), "dimension": 0, "dtype": DType.i64})
    if lower:
        start = prefix(source.constant, [], {"value": np.array(lower, np.int64)})
        start = prefix(movement.broadcast, [start], {"shape": (length,)})
        counter = prefix(elementwise.add, [counter, start])
    body = op.regions[0]
    i, *args = body.args
    carries, consts = split_consts(op.operands[2:], op.attrs)
    n = len(carries)
    scan_body = Block((*args[:n], i, *args[n:]), body.ops, body.results)
    attrs = {"carries": n, "length": length, "reverse": False, control.CONSTS: len(consts)}
    as_scan = Op(control.scan, (*carries, counter, *consts), attrs, op.results, op.loc, (scan_body,))
    forward, grads = _reverse_scan(build, as_scan, cts, (*wanted[2 : 2 + n], False, *wanted[2 + n :]))
    build.replace(op, [*prefix.ops, forward])
    return [None, None, *grads[:n], *grads[n + 1 :]]


# ---- if and while ------------------------------------------------------------------------------


def _if_vjp(build: _Builder, op: Op, cts: Cts, wanted: tuple[bool, ...]) -> list[Value | None]:
    """An ``if`` on the same predicate; each branch recomputes its forward, then sweeps it."""
    pred, *args = op.operands
    seeded = [k for k, c in enumerate(cts) if c is not None]
    want = [k for k, w in enumerate(wanted[1:]) if w]
    branches = []
    for block in op.regions:
        inner = _Builder()
        inner.loc = op.loc
        fresh = [Value(a.type) for a in block.args]
        seed_args = [Value(op.results[k].type) for k in seeded]
        mapping: dict[Value, Value] = dict(zip(block.args, fresh, strict=True))
        ops = clone_ops(block.ops, mapping)
        seeds: dict[Value, Value] = {}
        for k, s in zip(seeded, seed_args, strict=True):
            v = mapping.get(block.results[k], block.results[k])
            seeds[v] = inner(elementwise.add, [seeds[v], s]) if v in seeds else s
        grads = sweep(ops, [fresh[k] for k in want], seeds, inner)
        branches.append((inner, fresh + seed_args, ops, dict(zip(want, grads, strict=True))))
    got = [k for k in want if any(b[3][k] is not None for b in branches)]
    if not got:
        return [None] * len(op.operands)
    bodies = []
    for inner, block_args, ops, by_arg in branches:
        yields = [by_arg[k] or inner.zeros(args[k].type) for k in got]
        body = _closure(inner.forward(ops) + inner.ops, set(yields))  # the forward the vjp reads
        bodies.append((block_args, body, yields, _reads(body, yields, set())))
    # operands neither backward branch reads are not passed (in a loop body they would be stacked)
    operands = [*args, *(_some(cts[k]) for k in seeded)]
    used = [i for i in range(len(operands)) if any(b[0][i] in b[3] for b in bodies)]
    regions = tuple(
        Block(tuple(block_args[i] for i in used), tuple(body), tuple(yields))
        for block_args, body, yields, _ in bodies
    )
    back = build.emit(control.if_, [pred, *(operands[i] for i in used)], {}, regions)
    out: list[Value | None] = [None] * len(op.operands)
    for k, r in zip(got, back.results, strict=True):
        out[1 + k] = r
    return out


def _while_vjp(build: _Builder, op: Op, cts: Cts, wanted: tuple[bool, ...]) -> list[Value | None]:
    raise TransformError(
        f"{op.loc}: reverse-mode differentiation does not work through dsl.while_loop (its trip "
        "count is known only at run time, as in JAX); use dsl.fori_loop or dsl.scan with a "
        "static trip count, or forward mode (dsl.jvp)"
    )


_VJPS = {
    control.scan: _scan_vjp,
    control.for_loop: _for_vjp,
    control.if_: _if_vjp,
    control.while_loop: _while_vjp,
}


def region_vjp(build: Any, op: Op, cts: Cts, wanted: tuple[bool, ...]) -> list[Value | None]:
    """The vjp of a region op (``compiler/prims/control.py`` points its ``vjp`` here): ``cts`` has one
    cotangent per result (None: zero); the rule may replace ``op`` in the forward (``build.replace``)."""
    return _VJPS[op.prim](build, op, cts, wanted)
