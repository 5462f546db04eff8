"""``close_regions``: every value a region reads from the blocks above it becomes an operand.

Tracing writes bodies as MLIR's ``scf`` regions are written: a body reads the arrays of the enclosing
blocks directly (``compiler/prims/control.py``). The passes after tracing treat an op as the values it
reads, its operands, and a body's reads from above would be invisible to them (dead-code elimination
would drop their producers, liveness would free them, the planner would overwrite them while the loop
runs). This pass closes each region op, as a JAX jaxpr is closed:

- ``for``, ``while``, ``scan``: each value read from above is appended to the operands as a const
  (the ``consts`` attribute counts them), and to each region's block arguments;
- ``if``: each value read from above by either branch is appended to its operands, and both branches
  take it as an argument.

Nested regions are closed inside out, so an inner loop's consts that come from above the outer loop
become the outer loop's consts too. A closed program means the same as before; the interpreter and
``--emit mlir`` run either form.
"""

from __future__ import annotations

from collections.abc import Mapping

from compiler.ir.core import Block, Function, Op, Value
from compiler.prims import control
from compiler.prims.control import CONSTS, n_consts


def close_regions(func: Function) -> Function:
    """``func`` with every region op closed (``func`` itself when it holds none)."""
    if not any(op.regions for op in func.walk()):
        return func
    return func.replace_body(_close_block(func.body))


def _close_block(block: Block) -> Block:
    ops = tuple(_close(op) if op.regions else op for op in block.ops)
    return Block(block.args, ops, block.results)


def _reads_from_above(block: Block) -> list[Value]:
    """The values a closed block (its region ops closed) reads without defining them, in order."""
    defined = set(block.args)
    used: dict[Value, None] = {}
    for op in block.ops:
        used.update((v, None) for v in op.operands if v not in defined)
        defined.update(op.results)
    used.update((v, None) for v in block.results if v not in defined)
    return list(used)


def _rebind(block: Block, extra: list[Value]) -> Block:
    """``block`` taking one more argument per value of ``extra``, read in place of that value."""
    args = tuple(Value(v.type) for v in extra)
    mapping: Mapping[Value, Value] = dict(zip(extra, args, strict=True))
    ops = tuple(
        op.with_operands(tuple(mapping.get(v, v) for v in op.operands))
        if any(v in mapping for v in op.operands)
        else op
        for op in block.ops
    )
    results = tuple(mapping.get(v, v) for v in block.results)
    return Block(block.args + args, ops, results)


def _close(op: Op) -> Op:
    regions = tuple(_close_block(r) for r in op.regions)
    free: dict[Value, None] = {}
    for region in regions:
        free.update(dict.fromkeys(_reads_from_above(region)))
    extra = list(free)
    if not extra:
        return (
            Op(op.prim, op.operands, op.attrs, op.results, op.loc, regions) if regions != op.regions else op
        )
    regions = tuple(_rebind(r, extra) for r in regions)
    attrs = dict(op.attrs)
    if op.prim is not control.if_:
        attrs[CONSTS] = n_consts(op) + len(extra)
    return Op(op.prim, op.operands + tuple(extra), attrs, op.results, op.loc, regions)
