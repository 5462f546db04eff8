"""Forward mode by transposition, and reverse mode for many cotangents: the functions behind
``dsl.jvp``, ``dsl.jacfwd`` and ``dsl.jacrev``.

Forward mode needs no rule per primitive. The reverse sweep of ``f`` at ``x`` maps output cotangents
``u`` to argument cotangents ``J(x)^T u``, and it is linear in ``u``. Differentiating that sweep with
respect to ``u``, seeded with a tangent ``t`` of the arguments, gives ``(J^T)^T t = J t``: the jvp.
So every primitive's vjp is used twice (JAX's linearize-then-transpose, run the other way round), and
a primitive added with a vjp has a jvp too.

The transposed program does the work of a forward-mode one: the second sweep differentiates only the
ops of the first sweep (the forward ops do not depend on ``u``), and the rules of ops linear in ``u``
read forward values (``ct * (1 - y*y)`` for tanh: its transpose is ``t * (1 - y*y)``), never the first
sweep's own values ``J^T u``. Those, and ``u`` itself (a zero: any value gives the same ``J t``), are
read by nothing and fall to dead-code elimination; what stays is the forward, the factors the vjp
rules take from it, and one linear op per forward op for each tangent (tests/test_forward_mode.py
counts the ops of an MLP's jvp).

Loops and branches go through both sweeps as region ops (``compiler/autodiff_control.py``): the
first sweep's backward loop is linear in ``u``, and the second differentiates it like any loop. A
program with a ``while`` goes to the unroller as before, whose error it is (no reverse sweep goes
through a ``while``).

Both functions return ordinary IR: inlined into a trace, simplified, fused and planned like any
other, and differentiable again (``grad`` of a jvp, ``jacfwd(jacrev(f))``).
"""

from __future__ import annotations

from collections.abc import Sequence

from compiler.autodiff import _Builder, sweep
from compiler.autodiff_control import prepare_regions
from compiler.ir.core import Block, Function, Location, Op, Value
from compiler.passes.regions_unroll import unroll_regions
from compiler.prims import control
from compiler.prims import elementwise as ew


def _split(func: Function) -> tuple[list[Value], list[Value]]:
    """The public results of ``func`` and its write-backs (last, as ``dsl.writeback`` lists them)."""
    n_writeback = len(func.attrs.get("dsl.writeback", ()))
    n_public = len(func.results) - n_writeback
    return list(func.results[:n_public]), list(func.results[n_public:])


def _function(
    func: Function, params: list[Value], ops: list[Op], results: list[Value], names: list[str]
) -> Function:
    """``func`` with extra parameters (after its own), its ops ``ops`` (its forward, as the sweeps
    changed it, then theirs) and results (before its write-backs)."""
    body = Block(func.params + tuple(params), tuple(ops), tuple(results))
    arg_names = func.arg_names + tuple(names) if func.arg_names else ()
    locs = func.arg_locs + tuple(func.arg_locs[0] for _ in params) if func.arg_locs else ()
    return Function(func.name, body, arg_names, dict(func.attrs), locs)


def _name(func: Function, i: int) -> str:
    return func.arg_names[i] if i < len(func.arg_names) else f"arg{i}"


def jvp_function(func: Function, wrt: Sequence[int], sets: Sequence[Sequence[int]]) -> Function:
    """``func`` with the jvps along several tangents.

    ``wrt``: the floating-point params that have tangents. ``sets``: one list per tangent, of the
    positions in ``wrt`` it moves (the others stay still: no work for them). The function gets, after
    its own params, one tangent param per entry of each set, in order; its results are its public
    results, then per set one tangent per public result (a zero for an integer result), then its
    write-backs.
    """
    if any(op.prim is control.while_loop for op in func.walk()):
        func = unroll_regions(func)  # no reverse sweep through a while: its error, as before
    func = prepare_regions(func)
    outputs, writebacks = _split(func)
    where = func.arg_locs[0] if func.arg_locs else Location("<autodiff>", 0)
    first = _Builder()
    first.loc = where
    seeds = {o: first.zeros(o.type) for o in outputs if o.type.dtype.is_float}  # u: any value would do
    cotangents = sweep(func.ops, [func.params[i] for i in wrt], seeds, first)
    linear = first.forward(func.ops) + first.ops
    us = list(seeds.values())
    second = _Builder()
    params: list[Value] = []
    names: list[str] = []
    tangents_out: list[Value] = []
    for moved in sets:
        # the tangent's seeds: the cotangent each moved param got (two params may share one: x + y)
        seeded: dict[Value, Value] = {}
        for k in moved:
            t = Value(func.params[wrt[k]].type)
            params.append(t)
            names.append(f"tangent_{_name(func, wrt[k])}")
            c = cotangents[k]
            if c is not None:
                seeded[c] = second(ew.add, [seeded[c], t]) if c in seeded else t
        by_u = dict(zip(us, sweep(second.forward(linear), us, seeded, second), strict=True))
        second.loc = where
        for o in outputs:
            tangent = by_u.get(seeds[o]) if o in seeds else None
            tangents_out.append(tangent if tangent is not None else second.zeros(o.type))
    ops = second.forward(linear) + second.ops
    return _function(func, params, ops, outputs + tangents_out + writebacks, names)


def vjp_function(func: Function, wrt: Sequence[int], sets: Sequence[Sequence[int]]) -> Function:
    """``func`` with the vjps for several cotangents.

    ``wrt``: the floating-point params to differentiate. ``sets``: one list per cotangent, of the
    public results it seeds (the others have a zero cotangent). The function gets, after its own
    params, one cotangent param per entry of each set, in order; its results are its public results,
    then per set one cotangent per ``wrt`` param, then its write-backs.
    """
    func = prepare_regions(func)
    outputs, writebacks = _split(func)
    where = func.arg_locs[0] if func.arg_locs else Location("<autodiff>", 0)
    build = _Builder()
    params: list[Value] = []
    names: list[str] = []
    grads: list[Value] = []
    for seeded in sets:
        seeds: dict[Value, Value] = {}
        for j in seeded:
            u = Value(outputs[j].type)
            params.append(u)
            names.append(f"cotangent_{j}")
            seeds[outputs[j]] = build(ew.add, [seeds[outputs[j]], u]) if outputs[j] in seeds else u
        cts = sweep(build.forward(func.ops), [func.params[i] for i in wrt], seeds, build)
        build.loc = where
        grads += [c if c is not None else build.zeros(func.params[i].type) for c, i in zip(cts, wrt)]
    return _function(func, params, build.forward(func.ops) + build.ops, outputs + grads + writebacks, names)
