"""The ``loops`` pass: each loop's or branch's regions compiled as programs of their own.

After ``close_regions`` a region op reads only its operands, and after ``fuse`` it is a group of its
own (``GroupKind.CONTROL``) whose results are stored: its carries live in those buffers while it
runs. This pass turns every region of such an op into a function (``body_function``) and runs the
whole pipeline on it (its own fusion, row bands, in-place plan, kernels), so the body gets every
optimization a program gets; a nested loop is compiled the same way, one level down. The drivers
(``compiler/codegen/``) then print each loop as a native loop around the statements of its bodies'
drivers: the program's size does not depend on the trip count, and neither does its memory.

A body's function:

- parameters: the region's block arguments (a ``for``'s counter, the carries, a ``scan``'s rows of
  ``xs``, the consts; an ``if``'s operands), bound by the driver to the loop's own buffers: a carry
  to the buffer of the op's result (each initial value is copied there before the first iteration,
  unless the planner gave the result the initial value's block: it dies at the loop), a row to a
  view of row ``t`` of ``xs``, a const to the operand's buffer;
- results: a ``scan``'s rows of ``ys`` first (written straight into row ``t`` of the result), then the
  carries, marked as write-backs of their parameters (``dsl.writeback``): the body's planner writes a
  new carry straight over its old value where the old value is read only at the element written and
  by no later kernel (in place: one buffer per carry, no copy per iteration); any other new carry is
  written into a temporary of the loop (``Loop.temps``) and copied over the carry once the body
  has run. A ``while``'s condition yields its predicate, an ``if``'s branches their results (written
  straight into the op's result buffers).

Memory: a loop's bodies run one at a time, so their arenas share one block of the program's arena
(the largest of them), placed with the temporaries as a scratch row of the plan, live while the
loop runs (``plan.place_scratch``): the program's peak does not depend on the trip count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from compiler.ir.core import Block, Function, Op, Value
from compiler.ir.types import DType
from compiler.passes.fuse import FusionPlan, Group, GroupKind
from compiler.passes.inplace_report import SCOPE_ATTR, InplaceDecision
from compiler.passes.plan import MemoryPlan, align, caller_allocated, place_scratch
from compiler.prims import control

if TYPE_CHECKING:
    from compiler.compilation import Compilation, Options


@dataclass
class Body:
    """One region of a loop or branch, compiled: ``role`` is ``body``, ``cond``, ``then`` or
    ``else``; ``params`` says what each parameter is (``("counter", 0)``, ``("carry", j)``,
    ``("row", k)`` of ``xs`` operand ``k``, ``("const", k)``, ``("operand", k)`` of an ``if``), and
    ``results`` what each result is (``("y", k)``, ``("carry", j)``, ``("pred", 0)``, ``("result",
    j)``)."""

    role: str
    program: Compilation
    params: list[tuple[str, int]]
    results: list[tuple[str, int]]

    @property
    def func(self) -> Function:
        return self.program.func

    def routes(self) -> list[Route]:
        """How the driver delivers each result, in the order it must: a result the body's caller
        allocates is bound to its target (a new carry not written in place: to the carry's
        temporary, since the body's kernels may still read the old carry); a carry written in place
        or yielded unchanged needs nothing; any other result (an argument, a value yielded twice) is
        copied once the body has run. A copy into a carry whose source is not an old carry (a
        parameter) goes straight over the carry, after every copy that may read an old carry;
        carries swapped among themselves go through temporaries."""
        plan = self.program.plan
        assert plan is not None
        func = self.func
        outs, direct, seen = set(caller_allocated(func, plan)), set(plan.direct_writeback), set()
        old = {p for p, (kind, _) in zip(func.params, self.params, strict=True) if kind == "carry"}
        first: list[Route] = []
        last: list[Route] = []
        for v, (kind, j) in zip(func.results, self.results, strict=True):
            unchanged = kind == "carry" and v is func.params[self.params.index(("carry", j))]
            if v in outs and v not in seen:
                first.append(Route(v, kind, j, bound=True, temp=kind == "carry"))
            elif not (v in direct or unchanged):
                temp = kind == "carry" and v in old
                (last if kind == "carry" and not temp else first).append(Route(v, kind, j, False, temp))
            seen.add(v)
        return first + last


@dataclass(frozen=True)
class Route:
    """Where one result of a body goes: ``kind``/``j`` name the loop's target (``Body.results``);
    ``bound``: the body's kernels write ``value`` there (the driver names the target as the body's
    buffer), else the driver copies ``value`` there once the body ran; ``temp``: the target is the
    carry's temporary (``Loop.temps``), copied over the carry once every result is delivered."""

    value: Value
    kind: str
    j: int
    bound: bool
    temp: bool = False


@dataclass
class Loop:
    """A region op compiled: its bodies, where their shared arena starts in the program's arena, and
    the temporaries of its carries that no body writes in place (carry index -> arena offset)."""

    op: Op
    group: Group
    bodies: list[Body]
    arena: int = -1
    temps: dict[int, int] = field(default_factory=dict)

    @property
    def carries(self) -> list[Value]:
        """The op's results that are carried from iteration to iteration (their buffers hold them)."""
        return [result for _, result in control.carried(self.op)]

    @property
    def inits(self) -> list[Value]:
        return [init for init, _ in control.carried(self.op)]

    @property
    def consts(self) -> list[Value]:
        """The operands every iteration reads unchanged (an ``if``'s operands are its branches')."""
        if self.op.prim is control.if_:
            return list(self.op.operands[1:])
        return list(self.op.operands[len(self.op.operands) - control.n_consts(self.op) :])

    @property
    def xs(self) -> list[Value]:
        """A scan's sequences, read a row per iteration."""
        if self.op.prim is not control.scan:
            return []
        n = len(self.carries)
        return list(self.op.operands[n : len(self.op.operands) - control.n_consts(self.op)])

    @property
    def ys(self) -> list[Value]:
        """A scan's stacked outputs, written a row per iteration."""
        return list(self.op.results[len(self.carries) :]) if self.op.prim is control.scan else []

    def reads(self, kind: str, j: int) -> Value | None:
        """The loop's buffer a body parameter of ``kind`` (``Body.params``) reads: a carry's, a row's
        sequence, a const (an ``if``'s operand); None for a ``for``'s counter."""
        lanes = {"carry": self.carries, "row": self.xs, "const": self.consts, "operand": self.consts}
        return lanes[kind][j] if kind in lanes else None

    def writes(self, kind: str, j: int) -> Value | None:
        """The loop's buffer a body result of ``kind`` (``Body.results``) goes to: a carry's, a ys's
        (a row of it), an ``if``'s result; None for a ``while``'s predicate."""
        lanes = {"carry": self.carries, "y": self.ys, "result": list(self.op.results)}
        return lanes[kind][j] if kind in lanes else None

    def copied_carries(self) -> list[int]:
        """The carries some body delivers through a temporary (``Body.routes``)."""
        return sorted({r.j for body in self.bodies for r in body.routes() if r.temp})


def body_function(
    op: Op, index: int, scope: str
) -> tuple[Function, list[tuple[str, int]], list[tuple[str, int]]]:
    """Region ``index`` of the closed region op ``op`` as a function (module docstring), with what
    its parameters and results are."""
    block = op.regions[index]
    nargs = len(block.args)
    if op.prim is control.if_:
        params = [("operand", k) for k in range(nargs)]
        results = [("result", j) for j in range(len(block.results))]
        return _function(block, params, results, list(block.results), (), scope), params, results
    k = control.n_consts(op)
    if op.prim is control.for_loop:
        n = nargs - 1 - k
        params = [("counter", 0)] + [("carry", j) for j in range(n)]
    elif op.prim is control.while_loop:
        n = nargs - k
        params = [("carry", j) for j in range(n)]
    else:  # scan
        n = int(op.attrs["carries"])
        params = [("carry", j) for j in range(n)] + [("row", r) for r in range(nargs - k - n)]
    params += [("const", c) for c in range(k)]
    if op.prim is control.while_loop and index == 0:  # the condition
        return _function(block, params, [("pred", 0)], list(block.results), (), scope), params, [("pred", 0)]
    carried, ys = list(block.results[:n]), list(block.results[n:])
    results = [("y", r) for r in range(len(ys))] + [("carry", j) for j in range(n)]
    writeback = tuple(params.index(("carry", j)) for j in range(n))
    return _function(block, params, results, ys + carried, writeback, scope), params, results


def _function(
    block: Block,
    params: list[tuple[str, int]],
    results: list[tuple[str, int]],
    values: list[Value],
    writeback: tuple[int, ...],
    scope: str,
) -> Function:
    attrs: dict[str, object] = {SCOPE_ATTR: scope}
    if writeback:
        attrs["dsl.writeback"] = writeback
    names = tuple(f"{kind}{j}" for kind, j in params)
    return Function(f"{scope.rstrip('_')}", Block(block.args, block.ops, tuple(values)), names, attrs)  # type: ignore[arg-type]


ROLES = {control.for_loop: ("body",), control.scan: ("body",), control.while_loop: ("cond", "body")}


def compile_loops(
    func: Function,
    fusion: FusionPlan,
    plan: MemoryPlan,
    options: Options,
    run: Callable[[Function, Options], Compilation],
) -> tuple[dict[Group, Loop], MemoryPlan]:
    """Every CONTROL group's bodies compiled by ``run`` (the pipeline), and ``plan`` with each loop's
    arena and temporaries placed as a scratch row live while the loop runs."""
    scope = str(func.attrs.get(SCOPE_ATTR, ""))
    body_options = replace(options, grad=None, donate_argnums=(), results_in_place=False)
    loops: dict[Group, Loop] = {}
    for group in fusion.groups:
        if group.kind is not GroupKind.CONTROL:
            continue
        op = group.root
        roles = ROLES.get(op.prim, ("then", "else"))
        bodies = []
        for index, role in enumerate(roles):
            inner_scope = f"{scope}l{group.root_pos}{role[0]}_"
            body, params, results = body_function(op, index, inner_scope)
            bodies.append(Body(role, run(body, body_options), params, results))
        loops[group] = Loop(op, group, bodies)
    if not loops:
        return loops, plan
    needs = []
    for group, loop in loops.items():
        temps = sum(align(loop.carries[j].type.nbytes) for j in loop.copied_carries())
        arena = max((b.program.plan.peak_bytes for b in loop.bodies if b.program.plan), default=0)
        if temps + arena:
            needs.append(
                (
                    _row_name(fusion, group),
                    f"the bodies of the {group.root.prim.name} at {group.root.loc}",
                    temps + arena,
                    DType.i1,
                    fusion.time(group),
                )
            )
    planned = place_scratch(plan, needs)
    # the bodies' in-place decisions (a user's `c += x` in a loop body) are the program's too
    planned = replace(
        planned, inplace=[*planned.inplace, *(d for loop in loops.values() for d in _decisions(loop))]
    )
    where = {r.name: r.offset for r in planned.buffers if r.scratch_of is not None}
    for group, loop in loops.items():
        offset = where.get(_row_name(fusion, group), 0)
        for j in loop.copied_carries():
            loop.temps[j] = offset
            offset += align(loop.carries[j].type.nbytes)
        loop.arena = offset
    return loops, planned


def _decisions(loop: Loop) -> list[InplaceDecision]:
    """Every in-place decision of a loop's bodies, nested loops' included (their plans carry them)."""
    return [d for body in loop.bodies if body.program.plan is not None for d in body.program.plan.inplace]


def _row_name(fusion: FusionPlan, group: Group) -> str:
    return (
        f"{group.root.prim.name}{fusion.names[group.root.results[0]]}"
        if group.root.results
        else f"{group.root.prim.name}@{group.root_pos}"
    )
