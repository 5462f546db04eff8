"""``if_to_select``: a cheap, safe ``if`` becomes both of its branches and a ``select`` per result.

A native ``if`` (``compiler/passes/loops.py``) runs one branch, but it costs where it stands: on CUDA
the host driver reads the predicate back (a synchronization per ``if``, per iteration inside a loop),
and on both targets each branch is a program of its own whose kernels cannot fuse with the ops around
the ``if``. Where both branches are cheap, computing both and selecting is faster (XLA's
if-conversion, ``ConditionalSimplifier``); the unrolled reference does the same for every ``if``
(``compiler/passes/regions_unroll.py``). This pass does it when, and only when:

- **safe**: running the untaken branch can change nothing. All primitives are pure and total
  (``docs/semantics.md``: an integer division or remainder by zero is 0, a gather or a dynamic slice
  clamps its index, a float op gives inf or NaN, which the select drops), except those of
  ``Primitive.traps``: an integer ``pow`` with a negative exponent is an error in its reference,
  ``np.power`` (which the interpreter runs, ``simplify`` folds constants with, and a CPU kernel
  printed as NumPy calls), and garbage in Numba's loops. A branch holding a region op is kept: a
  ``while`` in an untaken branch might not end, and a loop's work is its trip count times its
  body's (an inner ``if`` that could be converted already was: ifs are converted inside out). So
  is a branch holding a user's in-place request (``dsl.inplace``): selecting between the written
  array and the original would keep both alive and turn the request into a copy.
- **cheap**: the work of both branches and the selects together, in arithmetic element operations
  (``_WORK``: an op's result elements, ``LIBM_COST`` each for a transcendental; a reduction's input
  elements; a matmul's multiply-adds; a scatter's result and updates), is at most the budget:
  ``Options.if_select_budget``, by default the target's (``DEFAULT_BUDGETS``: 1,024 on the CPU,
  where a native if costs little, 1,048,576 on CUDA, where it costs a synchronization). A
  ``dynamic_update_slice`` or scatter result counts its whole result, the copy it costs when the
  original array is selected beside it, so only small ones pass.

Selecting is exact for values, not for gradients (the untaken branch's NaN would reach a cotangent
through the select's vjp), so the pass runs after ``autodiff``, on the final program: nothing
differentiates its selects. It runs after ``simplify`` (an ``if`` on a constant predicate or with no
live result is gone by then, the budget sees the simplified branches) and simplifies the program
again when it converted an ``if``: the branches' common work merges (CSE), ``select(p, x, x)`` folds.
Inside loop bodies too: an ``if`` in a scan's step is the common case, and there it costs a readback
per iteration on CUDA.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from compiler.compilation import Options
from compiler.ir.core import Block, Function, Op, Value, clone_ops
from compiler.passes.simplify import INPLACE_ATTR, simplify
from compiler.prims import control, elementwise, movement, source
from compiler.prims.base import Kind
from compiler.prims.contraction import matmul_dims

# Options.if_select_budget's default per target, in arithmetic element operations: about what a
# native if costs there. On the CPU the branch itself is free; converting saves a kernel call or two
# and a carry's copy (a microsecond or less), and computing the untaken branch must cost less than
# that (benchmarks/bench_if_to_select.py: a scan step's untaken tanh of 64 elements made the
# converted scan 1.8x slower). On CUDA the native if reads its predicate back to the host (a
# synchronization, tens of microseconds) and launches the branch's kernels apart.
DEFAULT_BUDGETS = {"cpu": 1 << 10, "cuda": 1 << 20}
LIBM_COST = 16  # a transcendental element (a libm call on the CPU) counts as this many arithmetic ones


def select_budget(options: Options) -> int:
    """The budget ``options`` sets, else its target's default."""
    if options.if_select_budget is not None:
        return options.if_select_budget
    return DEFAULT_BUDGETS.get(options.target, min(DEFAULT_BUDGETS.values()))


def _result_elements(op: Op) -> int:
    return sum(r.type.size for r in op.results)


def _computed_elements(op: Op) -> int:
    return _result_elements(op) * (LIBM_COST if op.prim in elementwise.TRANSCENDENTAL else 1)


def _reduced_elements(op: Op) -> int:
    return op.operands[0].type.size


def _source_elements(op: Op) -> int:
    return 0 if op.prim is source.constant else _result_elements(op)  # a constant is data, not work


def _scattered_elements(op: Op) -> int:
    return _result_elements(op) + sum(v.type.size for v in op.operands[1:])


def _multiply_adds(op: Op) -> int:
    batch, m, n, k = matmul_dims(op)
    return batch * m * n * k


# The element operations an op of each kind costs; a kind missing here (a region op) is never
# converted.
_WORK: dict[Kind, Callable[[Op], int]] = {
    Kind.ELEMENTWISE: _computed_elements,
    Kind.MOVEMENT: _result_elements,
    Kind.SOURCE: _source_elements,
    Kind.REDUCTION: _reduced_elements,
    Kind.SCAN: _result_elements,
    Kind.SCATTER: _scattered_elements,
    Kind.CONTRACTION: _multiply_adds,
}


def if_to_select(func: Function, budget: int = DEFAULT_BUDGETS["cpu"]) -> Function:
    """``func`` with each safe ``if`` whose work is at most ``budget`` element operations replaced
    by both of its branches and a select per result (see the module docstring); ``func`` itself if
    none is."""
    if not any(op.prim is control.if_ for op in func.walk()):
        return func
    body = _Converter(budget).block(func.body)
    if body is func.body:
        return func
    return simplify(func.replace_body(body))


class _Converter:
    def __init__(self, budget: int) -> None:
        self.budget = budget

    def block(self, block: Block) -> Block:
        """``block`` with its ifs converted, nested blocks first (``block`` itself if none is)."""
        ops: list[Op] = []
        changed = False
        for op in block.ops:
            if op.regions:
                regions = tuple(self.block(region) for region in op.regions)
                if regions != op.regions:
                    op = Op(op.prim, op.operands, op.attrs, op.results, op.loc, regions)
                    changed = True
                if op.prim is control.if_ and self.converts(op):
                    ops += _selected(op)
                    changed = True
                    continue
            ops.append(op)
        return Block(block.args, tuple(ops), block.results) if changed else block

    def converts(self, op: Op) -> bool:
        """Whether both branches of the ``if`` ``op`` are safe to run and cheap enough to."""
        work = sum(r.type.size for r in op.results)  # the selects
        for branch in op.regions:
            for inner in branch.ops:
                cost = _WORK.get(inner.prim.kind)
                trap = inner.prim.traps
                if cost is None or INPLACE_ATTR in inner.attrs or (trap is not None and trap(inner)):
                    return False
                work += cost(inner)
                if work > self.budget:
                    return False
        return True


def _selected(op: Op) -> list[Op]:
    """Both branches of the closed ``if`` ``op`` inlined on its operands, then one select per result
    on the predicate (broadcast to the result's shape), defining the ``if``'s own result values."""
    pred, *operands = op.operands
    ops: list[Op] = []
    picked: list[Sequence[Value]] = []
    for branch in op.regions:
        mapping: dict[Value, Value] = dict(zip(branch.args, operands, strict=True))
        ops += clone_ops(branch.ops, mapping)
        picked.append([mapping.get(v, v) for v in branch.results])
    then, else_ = picked
    spread: dict[tuple[int, ...], Value] = {(): pred}  # the predicate broadcast once per shape
    for result, a, b in zip(op.results, then, else_, strict=True):
        shape = result.type.shape
        if shape not in spread:
            wide = Op.create(movement.broadcast, [pred], {"shape": shape}, op.loc)
            ops.append(wide)
            spread[shape] = wide.result
        ops.append(Op(elementwise.select, (spread[shape], a, b), {}, (result,), op.loc))
    return ops
