"""Reverse-mode autodiff on the IR: a forward function in, the joint forward+backward function out.

The sweep walks the ops backward, asking each primitive's ``vjp`` rule for its operands'
cotangents. Only what the requested gradients need is built:

- an operand gets a cotangent only if it depends on a differentiated argument (``needs``), so a
  matmul whose weight is not differentiated emits no weight-gradient matmul;
- a rule may return ``None`` (a symbolic zero): nothing is emitted for it;
- forward values that only fed pruned work are never read by the backward and disappear in the
  following dead-code elimination, so they are not kept alive either.

The backward is ordinary IR: simplified, fused, planned in place like the forward, and
differentiable again (``grad(grad(f))`` runs this sweep on a function that already has one).
Cotangents of a value used k times are summed as they arrive; the planner turns that chain of adds
into one buffer updated in place.

Loops and branches are region ops with vjps of their own (``compiler/autodiff_control.py``): the
joint program of a loop is a forward loop stacking residuals and a backward loop, not the loop
unrolled. Such a rule gets the cotangents of all its op's results and may replace the op in the
forward (``_Builder.replace``); ``dependents`` follows a loop's carries to a fixpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.ir.core import Block, Function, Location, Op, Value
from compiler.ir.types import DType, TensorType
from compiler.prims import elementwise as ew
from compiler.prims import movement, source
from compiler.prims.base import Primitive
from runtime.errors import DSLError


@dataclass(frozen=True)
class GradSpec:
    """What to differentiate: the scalar result 0 of the function w.r.t. params ``wrt``.

    The joint function returns ``[value] if keep_value`` + the ``n_aux`` results after the value +
    one gradient per ``wrt`` param + the write-backs (unchanged, last, as ``dsl.writeback`` wants).
    With ``cotangent_param`` (for ``vjp``) the seeds are new last parameters instead of 1.0: one per
    floating-point public result, in order (the others get none, as JAX's ``float0``).
    """

    wrt: tuple[int, ...]
    keep_value: bool = False
    n_aux: int = 0
    cotangent_param: bool = False


class _Builder:
    """Emits backward ops; each gets the location of the forward op it differentiates.

    The vjp of a loop also changes the forward: its forward loop must stack the values its backward
    loop reads (``compiler/autodiff_control.py``). ``replace`` records that: the new forward ops keep
    the old op's result values (and add their own), so nothing that read them changes, and
    ``forward(ops)`` is the forward program with every replacement made.
    """

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.loc: Location | None = None
        self.replaced: dict[Op, list[Op]] = {}
        self.producer: dict[Value, Op] = {}  # the ops of the blocks swept (a loop's constant bounds)

    def __call__(self, prim: Primitive, operands: Sequence[Value], attrs: Any = None) -> Value:
        return self.emit(prim, operands, attrs).result

    def emit(
        self, prim: Primitive, operands: Sequence[Value], attrs: Any = None, regions: tuple[Block, ...] = ()
    ) -> Op:
        op = Op.create(
            prim, list(operands), dict(attrs or {}), self.loc or Location("<autodiff>", 0), regions
        )
        self.ops.append(op)
        return op

    def replace(self, op: Op, ops: Sequence[Op]) -> None:
        """The forward ``op`` becomes ``ops``, the last of which defines every result of ``op``."""
        if list(ops) != [op]:
            self.replaced[op] = list(ops)

    def forward(self, ops: Sequence[Op]) -> list[Op]:
        """``ops`` with the replacements the sweeps made. A second sweep with the same builder (one
        per cotangent) runs over ``forward(ops)``: its loops stack their residuals beside the first's."""
        out: list[Op] = []
        for op in ops:
            new = self.replaced.get(op)
            out += [op] if new is None else self.forward(new)
        return out

    def zeros(self, ttype: TensorType) -> Value:
        zero = self(source.constant, [], {"value": np.zeros((), ttype.dtype.np)})
        return self(movement.broadcast, [zero], {"shape": ttype.shape}) if ttype.shape else zero

    def one(self, dtype: DType) -> Value:
        return self(source.constant, [], {"value": np.ones((), dtype.np)})


def dependents(ops: Sequence[Op], wrt: Sequence[Value]) -> set[Value]:
    """Values that depend on a differentiated value (only these get cotangents). A loop's or a
    branch's results depend on it as their bodies say (``autodiff_control.region_dependents``: a
    carry depends on it if its init or, at a fixpoint, the body's yield of it does)."""
    from compiler.autodiff_control import region_dependents  # it builds on this module

    needs = set(wrt)
    for op in ops:
        if not op.prim.differentiable or not any(v in needs for v in op.operands):
            continue
        if op.regions:
            needs.update(region_dependents(op, needs))
        else:
            needs.update(r for r in op.results if r.type.dtype.is_float)
    return needs


def backward(
    func: Function, wrt: Sequence[int], seeds: dict[Value, Value], build: _Builder
) -> list[Value | None]:
    """Append the backward ops of ``func`` to ``build``; returns the cotangent of each wrt param."""
    return sweep(func.ops, [func.params[i] for i in wrt], seeds, build)


def sweep(
    ops: Sequence[Op], wrt: Sequence[Value], seeds: dict[Value, Value], build: _Builder
) -> list[Value | None]:
    """The reverse sweep over ``ops``: appends to ``build`` the ops giving the cotangent of each
    ``wrt`` value (a parameter, or any value the ops read: forward mode transposes a sweep by
    differentiating it w.r.t. its seeds, compiler/forward.py) for the cotangents ``seeds`` of
    values the ops compute; None for a symbolic zero.

    An op holding regions (a loop, a branch: closed, ``close_regions``) gets the tuple of its
    results' cotangents (None where nobody needs one), and its rule may replace the op in the
    forward (``_Builder.replace``): callers build the forward as ``build.forward(ops)``."""
    needs = dependents(ops, wrt)
    build.producer.update((r, op) for op in ops for r in op.results)
    ct: dict[Value, Value] = {}
    for v, seed in seeds.items():
        if v in needs:
            _accumulate(ct, v, seed, build)
    for op in reversed(ops):
        cts = tuple(ct.get(r) for r in op.results)
        if all(c is None for c in cts) or not op.prim.differentiable:
            continue
        wanted = tuple(v in needs for v in op.operands)
        if not any(wanted):
            continue
        if op.prim.vjp is None:
            raise DSLError(f"{op.loc}: {op.prim.mlir_name} has no derivative rule (vjp)")
        build.loc = op.loc
        got = op.prim.vjp(build, op, cts if op.regions else cts[0], wanted)
        for v, c, w in zip(op.operands, got, wanted, strict=True):
            if w and c is not None:
                _accumulate(ct, v, c, build)
    return [ct.get(v) for v in wrt]


def _accumulate(ct: dict[Value, Value], v: Value, c: Value, build: _Builder) -> None:
    if c.type != v.type:
        raise DSLError(f"internal: cotangent {c.type} for a value of type {v.type}")
    ct[v] = build(ew.add, [ct[v], c]) if v in ct else c


def grad_function(func: Function, spec: GradSpec) -> Function:
    """The joint forward+backward function of ``func`` (see ``GradSpec`` for its results)."""
    from compiler.autodiff_control import prepare_regions  # it builds on this module

    func = prepare_regions(func)  # closed regions; loops with run-time bounds unrolled
    writeback = tuple(int(i) for i in func.attrs.get("dsl.writeback", ()))
    n_public = len(func.results) - len(writeback)
    value = func.results[0]
    for i in spec.wrt:
        p = func.params[i]
        if not p.type.dtype.is_float:
            raise TypeError(f"grad requires floating-point inputs; argument {i} is {p.type}")
    build = _Builder()
    where = func.arg_locs[0] if func.arg_locs else Location("<autodiff>", 0)  # the function's def line
    params = func.params
    build.loc = where
    seeds: dict[Value, Value] = {}
    if spec.cotangent_param:
        floats = [r for r in func.results[:n_public] if r.type.dtype.is_float]
        cotangents = tuple(Value(r.type) for r in floats)
        params = params + cotangents
        for r, c in zip(floats, cotangents, strict=True):
            seeds[r] = build(ew.add, [seeds[r], c]) if r in seeds else c  # a result returned twice
    else:
        if value.type.shape != () or not value.type.dtype.is_float:
            raise TypeError(f"grad requires a real scalar output, got an array of type {value.type}")
        seeds[value] = build.one(value.type.dtype)
        cotangents = ()
    grads = backward(func, spec.wrt, seeds, build)
    build.loc = where
    grad_values = [g if g is not None else build.zeros(func.params[i].type) for g, i in zip(grads, spec.wrt)]
    results = (
        ([value] if spec.keep_value else [])
        + list(func.results[1 : 1 + spec.n_aux])
        + grad_values
        + list(func.results[n_public:])
    )
    body = Block(params, tuple(build.forward(func.ops)) + tuple(build.ops), tuple(results))
    names = func.arg_names + tuple(f"cotangent{k}" if k else "cotangent" for k in range(len(cotangents)))
    locs = func.arg_locs + ((func.arg_locs[0],) * len(cotangents) if func.arg_locs else ())
    return Function(func.name, body, names, dict(func.attrs), locs)
