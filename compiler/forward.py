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
reverse sweep goes through a ``while`` (its trip count is known only at run time), so a ``while``
at the program's top level is not transposed: the ops between such loops are, segment by segment,
and each ``while`` that reads a tangent becomes one ``while`` carrying the tangents beside its
carries, its body the body's jvp (``_jvp_around_whiles``: JAX's jvp of ``while_loop``). A ``while``
nested in another region op goes to the unroller as before, whose error it is.

Both functions return ordinary IR: inlined into a trace, simplified, fused and planned like any
other, and differentiable again (``grad`` of a jvp, ``jacfwd(jacrev(f))``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from compiler.autodiff import _Builder, sweep
from compiler.autodiff_control import prepare_regions, region_dependents
from compiler.ir.core import Block, Function, Location, Op, Value
from compiler.passes.region_parts import Parts, Region, renamed, take_apart
from compiler.passes.regions import close_regions
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
        func = close_regions(func)
        if _whiles_outside_others(func.ops):
            return _jvp_around_whiles(func, wrt, sets)
        func = unroll_regions(func)  # a while inside another loop or a branch: its error, as before
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


def _whiles_outside_others(ops: Sequence[Op]) -> bool:
    """Whether every ``while`` in ``ops`` is at their level or in the body of another ``while``
    (whose jvp is ``_jvp_around_whiles`` again), none in a ``for``, ``scan`` or ``if``."""
    for op in ops:
        if op.prim is control.while_loop:
            if not all(_whiles_outside_others(block.ops) for block in op.regions):
                return False
        elif any(inner.prim is control.while_loop for block in op.regions for inner in _walk(block.ops)):
            return False
    return True


def _walk(ops: Sequence[Op]) -> Iterator[Op]:
    for op in ops:
        yield op
        for block in op.regions:
            yield from _walk(block.ops)


def _jvp_around_whiles(func: Function, wrt: Sequence[int], sets: Sequence[Sequence[int]]) -> Function:
    """``jvp_function`` of ``func`` (closed regions) whose ``while`` ops are all at its top level.

    No reverse sweep goes through a ``while``, so it is not transposed: forward mode sweeps the ops
    between the ``while`` ops by transposition, one segment at a time (a segment is a function of the
    values it reads, its results the values read after it), and each ``while`` that reads a value
    with a tangent becomes one ``while`` carrying the tangents beside its primal carries (JAX's jvp
    of ``while_loop``): its cond is the primal cond, its body the jvp of the body (this function, on
    the body block: params the carries and consts), the consts' tangents are consts too. A carry gets
    a tangent if its init has one or some iteration can give it one (``region_dependents``).
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
    for op in func.ops:
        if op.prim is control.while_loop:
            segments += [[op], []]
        else:
            segments[-1].append(op)
    for n, segment in enumerate(segments):
        reads = list(dict.fromkeys(v for op in segment for v in op.operands))
        if not any(moving(v) for v in reads):  # no tangent goes in: the ops as they are
            ops += renamed(segment, [], rename)[0]
            continue
        if segment[0].prim is control.while_loop:
            ops += _while_jvp(segment[0], rename, tangents, zeros)
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


def _while_jvp(
    op: Op, rename: dict[Value, Value], tangents: list[dict[Value, Value]], zeros: _Builder
) -> list[Op]:
    """The ``while`` ``op`` (its operands named as ``rename`` says) carrying the tangents of its
    carries beside them, as a one-op list; its results' tangents go into ``tangents`` (per set, as
    the others), the zero tangents of carries whose init has none into ``zeros``."""
    parts = take_apart(op)
    cond, body = parts.regions
    nc, nk = len(parts.carries), len(parts.consts)
    carried = []  # per set: the carries that have a tangent
    held = []  # per set: the consts that have one
    for t in tangents:
        grows = set(region_dependents(op, {v for v in op.operands if v in t}))
        carried.append(
            [
                i
                for i, c in enumerate(parts.carries)
                if c.type.dtype.is_float and (c in t or op.results[i] in grows)
            ]
        )
        held.append([j for j, k in enumerate(parts.consts) if k.type.dtype.is_float and k in t])
    lanes = sorted({i for c in carried for i in c} | {nc + j for h in held for j in h})
    step = jvp_function(
        Function("body", body.block()),
        lanes,
        [
            [lanes.index(i) for i in c] + [lanes.index(nc + j) for j in h]
            for c, h in zip(carried, held, strict=True)
        ],
    )

    lanes_per_set = [
        [("c", i) for i in c] + [("k", j) for j in h] for c, h in zip(carried, held, strict=True)
    ]

    def args(
        region: Region,
    ) -> tuple[list[Value], list[Value], dict[Value, Value], list[dict[tuple[str, int], Value]]]:
        """A region's arguments in the new ``while`` (carries: primal, then the tangents set by
        set; consts the same), the old arguments' new names, and per set each lane's tangent."""
        carries, consts = [Value(v.type) for v in parts.carries], [Value(v.type) for v in parts.consts]
        mapping = dict(zip(region.carries + region.consts, carries + consts, strict=True))
        lane_args: list[dict[tuple[str, int], Value]] = [{} for _ in tangents]
        for s, set_lanes in enumerate(lanes_per_set):
            for kind, i in set_lanes:
                lane_args[s][kind, i] = Value((parts.carries if kind == "c" else parts.consts)[i].type)
        t_carries = [lane_args[s]["c", i] for s, c in enumerate(carried) for i in c]
        t_consts = [lane_args[s]["k", j] for s, h in enumerate(held) for j in h]
        return carries + t_carries, consts + t_consts, mapping, lane_args

    c_carries, c_consts, c_map, _ = args(cond)
    c_ops, c_yields = renamed(cond.ops, cond.yields, c_map)
    b_carries, b_consts, _, b_lanes = args(body)
    b_map = dict(zip(step.params, b_carries[:nc] + b_consts[:nk], strict=False))
    extra = iter(step.params[nc + nk :])
    for s, set_lanes in enumerate(lanes_per_set):
        b_map.update((next(extra), b_lanes[s][lane]) for lane in set_lanes)
    b_ops, b_yields = renamed(step.ops, step.results, b_map)
    b_yields = b_yields[:nc] + [b_yields[nc * (s + 1) + i] for s, c in enumerate(carried) for i in c]
    t_inits = [
        tangents[s].get(parts.carries[i]) or zeros.zeros(parts.carries[i].type)
        for s, c in enumerate(carried)
        for i in c
    ]
    t_consts = [tangents[s][parts.consts[j]] for s, h in enumerate(held) for j in h]
    t_results = [Value(parts.carries[i].type) for c in carried for i in c]
    new = Parts(
        control.while_loop,
        dict(op.attrs),
        op.loc,
        [],
        [rename.get(v, v) for v in parts.carries] + t_inits,
        [],
        [rename.get(v, v) for v in parts.consts] + t_consts,
        list(op.results) + t_results,
        [
            Region([], c_carries, [], c_consts, c_ops, c_yields, steps=False),
            Region([], b_carries, [], b_consts, b_ops, b_yields, steps=True),
        ],
    ).build()
    got = iter(t_results)
    for s, c in enumerate(carried):
        tangents[s].update((op.results[i], next(got)) for i in c)
    return [new]


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
