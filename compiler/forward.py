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
first sweep's backward loop is linear in ``u``, and the second differentiates it like any loop. No
reverse sweep goes through a loop whose trip count is known only at run time (a ``while``, a ``for``
whose bounds are not constants), so such a loop, and a ``for``, ``scan`` or ``if`` holding one at any
depth, is not transposed (``_forward_only``): the ops between such region ops are, segment by
segment, and each of them that reads a tangent becomes the same op carrying the tangents beside its
lanes, each region its jvp (``_jvp_around_loops``: JAX's jvp of ``while_loop``, ``fori_loop``,
``scan`` and ``cond``), which goes through the loops inside it the same way.

Both functions return ordinary IR: inlined into a trace, simplified, fused and planned like any
other, and differentiable again (``grad`` of a jvp, ``jacfwd(jacrev(f))``).
"""

from __future__ import annotations

from collections.abc import Sequence

from compiler.autodiff import _Builder, sweep
from compiler.autodiff_control import prepare_regions, region_dependents
from compiler.ir.core import Block, Function, Location, Op, Value
from compiler.passes.region_parts import Parts, Region, renamed, take_apart
from compiler.passes.regions import close_regions
from compiler.prims import control, source
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
    if any(_forward_only(op, _producers(func.ops)) for op in func.ops):
        return _jvp_around_loops(close_regions(func), wrt, sets)
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


def _producers(ops: Sequence[Op]) -> dict[Value, Op]:
    return {r: op for op in ops for r in op.results}


def _forward_only(op: Op, producers: dict[Value, Op]) -> bool:
    """Whether no reverse sweep goes through ``op``: a ``while``, a ``for`` whose trip count is known
    only at run time (a bound that is not a constant of its block: an argument, a value computed
    at run time, an enclosing loop's counter), or a region op holding one at any depth."""
    if op.prim is control.while_loop:
        return True
    bounds = op.operands[:2] if op.prim is control.for_loop else ()
    if any(v not in producers or producers[v].prim is not source.constant for v in bounds):
        return True
    return any(_forward_only(inner, _producers(block.ops)) for block in op.regions for inner in block.ops)


def _jvp_around_loops(func: Function, wrt: Sequence[int], sets: Sequence[Sequence[int]]) -> Function:
    """``jvp_function`` of ``func`` (closed regions) holding a loop of a run-time trip count somewhere.

    No reverse sweep goes through such a loop (``_forward_only``), so the region ops that hold one
    (itself, or a ``for``, ``scan`` or ``if`` with one inside) are not transposed: forward mode
    sweeps the ops between them by transposition, one segment at a time (a segment is a function of
    the values it reads, its results the values read after it), and each of them that reads a value
    with a tangent becomes one op carrying the tangents beside its primal lanes (``_region_jvp``;
    for a ``while``, JAX's jvp of ``while_loop``: its cond the primal cond, its body the jvp of the
    body).
    """
    outputs, writebacks = _split(func)
    rename: dict[Value, Value] = {}  # a value of ``func`` -> the value the new program computes
    tangents: list[dict[Value, Value]] = [{} for _ in sets]  # per set: a float value -> its tangent
    params: list[Value] = []
    names: list[str] = []
    for s, moved in enumerate(sets):
        for k in moved:
            seed = Value(func.params[wrt[k]].type)
            params.append(seed)
            names.append(f"tangent_{_name(func, wrt[k])}")
            tangents[s][func.params[wrt[k]]] = seed
    zeros = _Builder()
    zeros.loc = func.arg_locs[0] if func.arg_locs else Location("<autodiff>", 0)
    ops: list[Op] = []

    def moving(v: Value) -> bool:
        return v.type.dtype.is_float and any(v in t for t in tangents)

    segments: list[list[Op]] = [[]]
    producers = _producers(func.ops)
    for op in func.ops:
        if _forward_only(op, producers):
            segments += [[op], []]
        else:
            segments[-1].append(op)
    for n, segment in enumerate(segments):
        reads = list(dict.fromkeys(v for op in segment for v in op.operands))
        if not any(moving(v) for v in reads):  # no tangent goes in: the ops as they are
            ops += renamed(segment, [], rename)[0]
            continue
        if _forward_only(segment[0], producers):
            ops.append(_region_jvp(segment[0], rename, tangents, zeros))
            continue
        defined = {r for op in segment for r in op.results}
        later = {v for rest in segments[n + 1 :] for op in rest for v in op.operands} | set(func.results)
        inputs = [v for v in reads if v not in defined]
        outs = [r for op in segment for r in op.results if r in later]
        moved_in = [k for k, v in enumerate(inputs) if moving(v)]
        part = jvp_function(
            Function(func.name, Block(tuple(inputs), tuple(segment), tuple(outs))),
            moved_in,
            [[j for j, k in enumerate(moved_in) if inputs[k] in t] for t in tangents],
        )
        mapping = {p: rename.get(v, v) for p, v in zip(part.params, inputs, strict=False)}
        extra = iter(part.params[len(inputs) :])
        for t in tangents:
            mapping.update((next(extra), t[inputs[k]]) for k in moved_in if inputs[k] in t)
        new_ops, results = renamed(part.ops, part.results, mapping)
        ops += new_ops
        rename.update(zip(outs, results, strict=False))
        for s, t in enumerate(tangents):
            at = len(outs) * (s + 1)
            t.update((o, r) for o, r in zip(outs, results[at:], strict=False) if o.type.dtype.is_float)
    tangents_out = [t.get(o) or zeros.zeros(o.type) for t in tangents for o in outputs]
    results = [rename.get(v, v) for v in outputs] + tangents_out + [rename.get(v, v) for v in writebacks]
    return _function(func, params, zeros.ops + ops, results, names)


def _region_jvp(
    op: Op, rename: dict[Value, Value], tangents: list[dict[Value, Value]], zeros: _Builder
) -> Op:
    """The region op ``op`` (its operands named as ``rename`` says) carrying the tangents of its
    lanes beside them; its results' tangents go into ``tangents`` (per set, as the others), the zero
    tangents of carries whose init has none into ``zeros``.

    Every lane keeps its role: a carry's tangent is a carry, an ``xs``'s tangent an ``xs`` (its rows
    are the rows' tangents), a const's a const, and an out (a scan's ys, an ``if``'s results) gets a
    tangent out. Each stepping region becomes its jvp (``jvp_function`` on the region's block, which
    goes through the loops of run-time trip counts inside it); a ``while``'s cond reads only the
    primal lanes. A carry or out gets a tangent if a lane with one reaches it (``region_dependents``:
    for a loop, in some iteration).
    """
    parts = take_apart(op)
    lanes_of = {"c": parts.carries, "x": parts.xs, "k": parts.consts}
    grows = [set(region_dependents(op, {v for v in op.operands if v in t})) for t in tangents]
    nc = len(parts.carries)
    # per set: the lanes (role, index) that carry a tangent, and the outs that get one
    moving: list[list[tuple[str, int]]] = []
    outs: list[list[int]] = []
    for t, grown in zip(tangents, grows, strict=True):
        moving.append(
            [
                ("c", i)
                for i, c in enumerate(parts.carries)
                if c.type.dtype.is_float and (c in t or parts.results[i] in grown)
            ]
            + [(r, i) for r in "xk" for i, v in enumerate(lanes_of[r]) if v.type.dtype.is_float and v in t]
        )
        outs.append([j for j, r in enumerate(parts.results[nc:]) if r in grown])

    def tangent_lanes(role: str) -> list[tuple[int, int]]:
        """(set, index) of each tangent lane of ``role``, set by set: their order in the new op."""
        return [(s, i) for s, m in enumerate(moving) for r, i in m if r == role]

    regions = []
    for region in parts.regions:
        own = {"c": region.carries, "x": region.xs, "k": region.consts}  # a scan's x args are rows
        fresh = {r: [Value(v.type) for v in own[r]] for r in "cxk"}
        lanes = {r: {si: Value(own[r][si[1]].type) for si in tangent_lanes(r)} for r in "cxk"}
        lead = [Value(v.type) for v in region.lead]
        args = lead + fresh["c"] + fresh["x"] + fresh["k"]
        if not region.steps:  # a while's cond: the primal carries and consts decide
            mapping = dict(zip(region.args, args, strict=True))
            r_ops, r_yields = renamed(region.ops, region.yields, mapping)
        else:
            order = [("c", i) for i in range(nc)] + [(r, i) for r in "xk" for i in range(len(lanes_of[r]))]
            at = {lane: len(lead) + n for n, lane in enumerate(order)}
            wrt = sorted({at[lane] for m in moving for lane in m})
            step = jvp_function(
                Function("region", region.block()), wrt, [[wrt.index(at[lane]) for lane in m] for m in moving]
            )
            mapping = dict(zip(step.params, args, strict=False))
            extra = iter(step.params[len(args) :])
            for s, m in enumerate(moving):
                mapping.update((next(extra), lanes[r][s, i]) for r, i in m)
            r_ops, results = renamed(step.ops, step.results, mapping)
            n = len(region.yields)
            r_yields = (
                results[:nc]
                + [results[n * (s + 1) + i] for s, i in tangent_lanes("c")]
                + results[nc:n]
                + [results[n * (s + 1) + nc + j] for s, o in enumerate(outs) for j in o]
            )
        regions.append(
            Region(
                lead,
                fresh["c"] + list(lanes["c"].values()),
                fresh["x"] + list(lanes["x"].values()),
                fresh["k"] + list(lanes["k"].values()),
                r_ops,
                r_yields,
                steps=region.steps,
            )
        )

    def operands(role: str) -> list[Value]:
        primal = [rename.get(v, v) for v in lanes_of[role]]
        if role == "c":  # a carry whose init has no tangent starts from zero
            return primal + [
                tangents[s].get(parts.carries[i]) or zeros.zeros(parts.carries[i].type)
                for s, i in tangent_lanes("c")
            ]
        return primal + [tangents[s][lanes_of[role][i]] for s, i in tangent_lanes(role)]

    t_carries = [Value(parts.carries[i].type) for _, i in tangent_lanes("c")]
    t_outs = [Value(parts.results[nc + j].type) for o in outs for j in o]
    new = Parts(
        op.prim,
        dict(op.attrs),
        op.loc,
        [rename.get(v, v) for v in parts.head],
        operands("c"),
        operands("x"),
        operands("k"),
        parts.results[:nc] + t_carries + parts.results[nc:] + t_outs,
        regions,
    ).build()
    for (s, i), r in zip(tangent_lanes("c"), t_carries, strict=True):
        tangents[s][parts.results[i]] = r
    got = iter(t_outs)
    for s, o in enumerate(outs):
        tangents[s].update((parts.results[nc + j], next(got)) for j in o)
    return new


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
