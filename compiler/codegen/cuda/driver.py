"""The host driver of a CUDA program: ``bind(arena, stream)`` carves the arena views, copies the
constants and configures every launch once, and returns ``run(outs..., params...)``, which launches the
kernels in order. A loop or branch (``compiler/passes/loops.py``) is a host loop or ``if`` around the
launches of its bodies, whose arena views and launchers ``bind`` makes once too: a ``for``'s counter
is a view of one element of a device ``arange`` of its bounds, a ``scan``'s rows views of ``xs`` and
``ys``; a bound the program computes, a ``while``'s condition and a branch's predicate are read back
from the device (a synchronization per read)."""

from __future__ import annotations

from compiler.codegen.common import (
    Level,
    allocations,
    body_lines,
    carry_swaps,
    initial_copies,
    poison_value,
    returned,
)
from compiler.codegen.cuda.printer import launch_text
from compiler.ir.core import Function, Value
from compiler.ir.types import DType, TensorType
from compiler.kernel.emit import indent, literal, np_type
from compiler.passes.loops import Body, Loop
from compiler.prims import control, source

ENTRY = "bind"
# A loop of at most this many trips takes its counters and its rows of arena arrays from lists of
# views made once in bind: no slicing of a device array per iteration (tens of microseconds each).
ROW_VIEWS = 1024


def _flat_view(base: str, offset: int, nbytes: int, dtype: DType) -> str:
    return f"{base}[{offset}:{offset + nbytes}].view({np_type(dtype)})"


def driver(top: Level) -> str:
    """``bind(arena, stream)``: arena views (the kernels' scratch among them), device constants and
    launchers, once; returns ``run(outs..., params...)`` launching every kernel in order."""
    setup: list[str] = []
    for level in top.levels():
        for name in level.kernels.pool.arrays:
            setup.append(f"{name}_d = cuda.to_device({name}, stream=stream)")
    counter = [0]
    body = _statements(top, 0, setup, counter)
    names = top.kernels.names
    results = [f"_dup({names[v]}, stream)" if copy else names[v] for v, copy in returned(top.func)]
    ret = "(" + ", ".join(results) + ("," if len(results) == 1 else "") + ")"
    params = [*(names[v] for v in top.outs), *(names[p] for p in top.func.params)]
    run = [f"def run({', '.join(params)}):", *indent([*body, f"return {ret}"], 1)]
    lines = [f"def {ENTRY}(arena, stream):", *indent([*setup, "", *run, "", "return run"], 1)]
    return "\n".join(lines)


def _statements(level: Level, base: int, setup: list[str], counter: list[int]) -> list[str]:
    """The run lines of one program (its arena from byte ``base``); its views and launchers go to
    ``setup`` (``counter``: launchers made so far)."""
    func, fusion, plan, program = level.func, level.fusion, level.plan, level.kernels
    names, pool, kernels = program.names, program.pool, program.kernels
    arg_names = [names[p] for p in func.params]
    body: list[str] = []
    poison = level.poison
    allocated = allocations(func, fusion, plan, level.outs)
    for group in fusion.groups:
        for p in allocated.get(group, []):
            name, t = names[p.value], p.value.type
            if p.kind == "argument":
                body.append(f"{name} = {arg_names[p.param]}")
            elif p.kind == "donated":
                src = f"{arg_names[p.param]}.view(np.uint8)"
                body.append(f"{name} = {_flat_view(src, 0, t.nbytes, t.dtype)}")
            elif p.kind == "result":  # in a caller-allocated result's memory (its in-place chain)
                assert p.result is not None
                src = f"{names[p.result]}.view(np.uint8)"
                body.append(f"{name} = {_flat_view(src, 0, t.nbytes, t.dtype)}")
            elif p.kind == "arena":  # (views made once, in bind)
                setup.append(f"{name} = {_flat_view('arena', base + p.offset, t.nbytes, t.dtype)}")
            else:  # a function result (fresh per call) or a zero-size value
                body.append(f"{name} = _alloc({t.size}, {np_type(t.dtype)}, stream)")
        if group in level.loops:
            body += _loop(level, level.loops[group], base, setup, counter)
        top = kernels.get(group)
        for kernel in (top, *top.follow) if top is not None else ():
            for s in kernel.scratch:
                assert s.offset >= 0, f"{s.name}: scratch not placed (the scratch pass)"
                setup.append(f"{s.name} = {_flat_view('arena', base + s.offset, s.nbytes, s.dtype)}")
            launcher = f"L{counter[0]}"
            counter[0] += 1
            configured = f"_fast_launch({kernel.name}{launch_text(kernel)})"  # runtime/cuda_launch.py
            if kernel.wrapper:
                configured = f"{kernel.wrapper}({', '.join([configured, 'stream', *kernel.wrapper_args])})"
            setup.append(f"{launcher} = {configured}")
            args = [a + "_d" if a in pool.arrays else a for a in kernel.args]
            body.append(f"{launcher}({', '.join(args)})")
        for row in poison.get(group, []):
            dtype = row.value.type.dtype
            view = _flat_view("arena", base + row.offset, row.bytes, dtype)
            value = literal(poison_value(dtype), dtype)
            body.append(f"_fill[_grid({row.bytes // dtype.itemsize}), TPB, stream]({view}, {value})")
    return body


def _row(array: str, t: TensorType, at: str) -> str:
    """Row ``at`` of the flat device array ``array`` of type ``t``."""
    n = t.size // t.shape[0] if t.shape[0] else 0
    return f"{array}[{at} * {n}:({at} + 1) * {n}]"


def _constant(func: Function, v: Value) -> int | None:
    """The value of a 0-d integer ``v`` the program computes as a constant (a loop's literal bound)."""
    for op in func.ops:
        if v in op.results and op.prim is source.constant:
            return int(op.attrs["value"])
    return None


def _literal_bounds(func: Function, loop: Loop) -> tuple[int, int] | None:
    """A ``for``'s bounds where both are literals of ``func`` (else its driver reads them back)."""
    start, stop = (_constant(func, v) for v in loop.op.operands[:2])
    return None if start is None or stop is None else (start, stop)


def _reads_back(func: Function, loop: Loop) -> bool:
    """Whether the driver reads a device value of ``loop`` on the host: a branch's predicate, a
    ``while``'s condition, a ``for``'s bound the program computes (``_scalar``, a synchronization)."""
    if loop.op.prim is control.for_loop:
        return _literal_bounds(func, loop) is None
    return loop.op.prim in (control.if_, control.while_loop)


def host_reads(top: Level) -> bool:
    """Whether a call of ``top``'s driver reads a device value back on the host anywhere: such a call
    is not one fixed sequence of launches, so it is not captured into a CUDA graph
    (``runtime/cuda_graphs.py``)."""
    return any(_reads_back(level.func, loop) for level in top.levels() for loop in level.loops.values())


def launch_count(level: Level) -> int:
    """The kernel launches (cuBLAS calls included) of one call of ``level``'s driver: a loop's bodies
    once per trip where the trip count is a literal, once otherwise (a lower bound, for the graphs'
    cost rule)."""
    n = sum(1 + len(k.follow) for k in level.kernels.kernels.values())
    for loop in level.loops.values():
        per_trip = sum(launch_count(level.body(body)) for body in loop.bodies)
        trips = 1
        if loop.op.prim is control.scan:
            trips = int(loop.op.attrs["length"])
        elif loop.op.prim is control.for_loop and (bounds := _literal_bounds(level.func, loop)):
            trips = max(bounds[1] - bounds[0], 0)
        n += per_trip * trips
    return n


def _loop(outer: Level, loop: Loop, base: int, setup: list[str], counter: list[int]) -> list[str]:
    """A loop or branch: its carries initialized, then its bodies' launches in a host loop, each
    body's parameters and results bound to the loop's buffers (``passes/loops.py``)."""
    op, names = loop.op, outer.kernels.names
    scope = str(loop.bodies[0].func.attrs["dsl.scope"])
    lines = [f"_copy({names[carry]}, {names[init]}, stream)" for carry, init in initial_copies(outer, loop)]
    # a carry with a temporary alternates between its buffer and the temporary (as on the CPU)
    swaps, flip = carry_swaps(loop, scope), f"{scope}f"
    for j, offset in loop.temps.items():
        t = loop.carries[j].type
        setup.append(f"{scope}tmp{j} = {_flat_view('arena', base + offset, t.nbytes, t.dtype)}")
        lines += [f"{swaps[j][0]} = {names[loop.carries[j]]}", f"{swaps[j][1]} = {scope}tmp{j}"]
    if swaps:
        lines.append(f"{flip} = False")
    iota, pred, step = f"{scope}iota", f"{scope}p", f"{scope}t"
    lo: int | str | None = None
    hi: int | str | None = None
    counters = False  # the for's counters a list of views made in bind
    listed: dict[Value, str] = {}  # xs and ys in the arena -> the list of their rows' views made in bind
    if op.prim is control.scan and int(op.attrs["length"]) <= ROW_VIEWS:
        allocated = allocations(outer.func, outer.fusion, outer.plan, outer.outs).values()
        arena = {p.value for placements in allocated for p in placements if p.kind == "arena"}
        for v in (*loop.xs, *loop.ys):
            if v in arena and v not in listed:
                listed[v] = f"{scope}rows{len(listed)}"
                setup.append(
                    f"{listed[v]} = [{_row(names[v], v.type, 'i')} for i in range({op.attrs['length']})]"
                )

    def row_of(v: Value) -> str:
        """Row ``step`` of ``xs`` or ``ys`` value ``v``: a view made in bind where there is one."""
        return f"{listed[v]}[{step}]" if v in listed else _row(names[v], v.type, step)

    def buffer(v: Value | None, kind: str, j: int, temp: bool = False) -> str:
        """A body parameter's or result's buffer: the loop's (a row of a sequence; with ``temp``, the
        carry's temporary)."""
        if v is None:
            at = f"{step} - {lo}"
            return (f"{iota}[{at}]" if counters else f"{iota}[{at}:{at} + 1]") if kind == "counter" else pred
        if kind in ("row", "y"):
            return row_of(v)
        if kind == "carry" and j in swaps:
            return swaps[j][1] if temp else swaps[j][0]
        return names[v]

    def run(body: Body) -> list[str]:
        level = outer.body(body)
        copy = lambda dst, src, v: [f"_copy({dst}, {src}, stream)"]  # noqa: E731
        bind, after = body_lines(loop, body, level.kernels.names, buffer, copy, swaps, flip)
        return bind + _statements(level, base + loop.arena, setup, counter) + after

    def settle() -> list[str]:
        """After the loop: a carry whose last value is in its temporary is copied to its buffer."""
        copies = [f"_copy({names[loop.carries[j]]}, {c}, stream)" for j, (c, _) in swaps.items()]
        return [f"if {flip}:", *indent(copies, 1)] if copies else []

    if op.prim is control.if_:
        then, else_ = loop.bodies
        test = f"_scalar({names[op.operands[0]]}, stream)"
        return lines + [f"if {test}:", *indent(run(then), 1), "else:", *indent(run(else_), 1)]
    if op.prim is control.while_loop:
        cond, body = loop.bodies
        setup.append(f"{pred} = cuda.device_array(1, np.bool_, stream=stream)")
        loop_lines = [*run(cond), f"if not _scalar({pred}, stream):", "    break", *run(body)]
        return lines + ["while True:", *indent(loop_lines, 1), *settle()]
    (body,) = loop.bodies
    if op.prim is control.for_loop:
        bounds = _literal_bounds(outer.func, loop)
        if bounds is not None:  # literal bounds: the counters are a constant of bind
            lo, hi = start, stop = bounds
            setup.append(f"{iota} = cuda.to_device(np.arange({lo}, {hi}, dtype=np.int64), stream=stream)")
            if 0 < stop - start <= ROW_VIEWS:  # (and so are their one-element views)
                counters = True
                setup.append(f"{iota} = [{iota}[i:i + 1] for i in range({stop - start})]")
        else:
            lo, hi = f"{scope}lo", f"{scope}hi"
            lines += [f"{lo} = int(_scalar({names[op.operands[0]]}, stream))"]
            lines += [f"{hi} = int(_scalar({names[op.operands[1]]}, stream))"]
            lines.append(
                f"{iota} = cuda.to_device(np.arange({lo}, max({lo}, {hi}), dtype=np.int64), stream=stream)"
            )
        head = [f"for {step} in range({lo}, {hi}):"]
        first: list[str] = []
    else:  # scan
        length = int(op.attrs["length"])
        head = [f"for {scope}s in range({length}):"]
        first = [f"{step} = {length - 1} - {scope}s" if op.attrs["reverse"] else f"{step} = {scope}s"]
    return lines + head + indent(first + run(body), 1) + settle()
