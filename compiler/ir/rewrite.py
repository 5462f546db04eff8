"""The one way passes rebuild a function: append ops in order, redirecting uses of replaced values."""

from __future__ import annotations

from compiler.ir.core import Block, Function, Op, Value


class Rewriter:
    """Builds a new op list for a function. ``replace(old, new)`` redirects every later use of ``old``
    (operands of ops added afterwards and the function's results) to ``new``."""

    def __init__(self, func: Function) -> None:
        self.func = func
        self.ops: list[Op] = []
        self._replaced: dict[Value, Value] = {}

    def lookup(self, value: Value) -> Value:
        while value in self._replaced:
            value = self._replaced[value]
        return value

    def replace(self, old: Value, new: Value) -> None:
        assert old.type == new.type, f"replacing a {old.type} value by a {new.type} one"
        self._replaced[old] = self.lookup(new)

    def operands(self, op: Op) -> tuple[Value, ...]:
        return tuple(self.lookup(v) for v in op.operands)

    def add(self, op: Op) -> Op:
        """Append ``op`` reading the current replacements of its operands."""
        operands = self.operands(op)
        if operands != op.operands:
            op = op.with_operands(operands)
        self.ops.append(op)
        return op

    def finish(self) -> Function:
        results = tuple(self.lookup(v) for v in self.func.results)
        return self.func.replace_body(Block(self.func.params, tuple(self.ops), results))
