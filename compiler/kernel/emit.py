"""Scalar code shared by the backends: the ``EmitContext`` that primitives lower through, the
expression memo of one loop body, typed literals, the constant pool and the loop-nest writer.

A loop body is straight-line code. ``BodyBuilder.value_at(v, idx)`` returns a temporary holding
the element of ``v`` at index ``idx``: an inlined op's ``prim.emit`` is called (its operand reads
recurse back into ``value_at``), anything else is loaded through the backend's ``load`` callback.
Each ``(value, index)`` pair is computed once (the memo), and every index expression that is more
than a name or an integer is bound to its own temporary, so expressions never grow with the depth
of fused index maps. Which entries are names is known where they are made: the iteration's
variables (the index a kernel writer asks for), the builder's temporaries, and integers (a
primitive passes a Python ``int``); anything else a primitive spells is an expression. Every
computed temporary is cast to its value's dtype: Numba widens ``int32 + int32`` to ``int64`` and
mixes float widths, while NumPy (the oracle) wraps and rounds at every op, so the cast keeps the
two bit-compatible; what a primitive made through ``ctx.const`` or ``ctx.cast`` is recorded as
already of its dtype and not cast again.

The builder records which of the iteration's variables each line spells: an emit receives the
iteration's variables in its index as ``Var``s, which record their use when the primitive writes
them into code (an iota's value, a constant array's subscript, the index arithmetic of a reshape
or a slice), and nothing when it passes them on to ``ctx.read`` (a broadcast's, a transpose's,
a gather's routing). Each line is an ``ir.Expr`` carrying the variables its emit spelled
(``index_uses``: all of them); a load's index is the backend's record (its ``Access``). A backend
decides a loop's form from these (``ir.variables``: a flat CPU loop needs no multi-dimensional
index, a GPU thread computes only the indices its statements use) without reading generated text.

Backends differ only in the scaffolding around a body (loops vs. a CUDA grid) and in ``load``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from compiler.ir.core import Op, Value
from compiler.ir.types import DType, TensorType
from compiler.kernel.ir import Expr
from compiler.prims.base import Kind

Load = Callable[[Value, tuple[str, ...]], str]
ROW = "i0"  # loop variables are i0, i1, ... outermost first: i0 is the row a band computes


def literal(value: float | int | bool, dtype: DType) -> str:
    """A typed scalar literal valid in both ``numba.njit`` and ``numba.cuda.jit`` code."""
    if dtype.is_bool:
        return "True" if value else "False"
    ctor = np_type(dtype)
    if dtype.is_int:
        return f"{ctor}({int(value)})"
    x = float(value)
    if math.isnan(x):
        return f"{ctor}(math.nan)"
    if math.isinf(x):
        return f"{ctor}({'-' if x < 0 else ''}math.inf)"
    return f"{ctor}({float(dtype.np.type(x))!r})"


def np_type(dtype: DType) -> str:
    """The NumPy scalar type as generated code spells it (``np.bool`` is unknown to older Numbas)."""
    return "np.bool_" if dtype.is_bool else f"np.{dtype.np.name}"


def typed(expr: str, dtype: DType) -> str:
    """``expr`` converted to ``dtype`` (comparisons and logic already yield a bool)."""
    return expr if dtype.is_bool else f"{np_type(dtype)}({expr})"


def subscript(name: str, idx: Sequence[str]) -> str:
    return f"{name}[{', '.join(idx)}]" if idx else f"{name}[()]"


class Var(str):
    """An iteration variable as a primitive's ``emit`` receives it in its index. Spelling it into
    code (formatting it: ``f"{i} + 1"``, ``str(i)``, ``i + "..."``) records its use in ``uses``, the
    set of the emit that received it; passing it on to ``ctx.read`` records nothing (the read's
    load, or the next emit, records what it spells). ``str.join`` copies its items without asking
    them: join ``map(str, idx)``."""

    __slots__ = ("_uses",)
    _uses: set[str]

    def __new__(cls, name: str, uses: set[str]) -> Var:
        self = super().__new__(cls, name)
        self._uses = uses
        return self

    def _spelled(self) -> str:
        name = str.__str__(self)
        self._uses.add(name)
        return name

    def __format__(self, spec: str) -> str:
        return format(self._spelled(), spec)

    def __str__(self) -> str:
        return self._spelled()

    def __add__(self, other: str) -> str:
        return self._spelled() + other

    def __radd__(self, other: str) -> str:
        return other + self._spelled()


class ConstantPool:
    """What a program's generated code names at module level: big constant arrays (globals ``c0,
    c1, ...``) and ``helpers``, the scalar helper functions its kernels call (``vecmath``'s
    float32 math and keyed max/min, ``random_bits``' Threefry), which the printer's prelude defines:
    recorded where the code that calls them is made, so the prelude is built without reading it."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix  # a loop body's scope (``passes/loops.py``): names unique in the module
        self.arrays: dict[str, np.ndarray] = {}
        self.helpers: set[str] = set()
        self._names: dict[tuple[str, tuple[int, ...], bytes], str] = {}

    def add(self, value: np.ndarray) -> str:
        value = np.ascontiguousarray(value)
        key = (value.dtype.str, tuple(value.shape), value.tobytes())
        if key not in self._names:
            name = f"{self.prefix}c{len(self.arrays)}"
            self._names[key] = name
            self.arrays[name] = value
        return self._names[key]


class OpContext:
    """The ``EmitContext`` one op's ``prim.emit`` sees: its types, attributes and operand reads."""

    def __init__(self, builder: BodyBuilder, op: Op) -> None:
        self._builder = builder
        self._op = op
        self.result_type: TensorType = op.result.type
        self.operand_types: Sequence[TensorType] = [v.type for v in op.operands]
        self.attrs: Mapping[str, Any] = op.attrs

    def read(self, k: int, idx: Sequence[str | int]) -> str:
        return self._builder.read(self._op.operands[k], idx)

    def const(self, value: float | int | bool, dtype: DType) -> str:
        return self._builder.of_dtype(literal(value, dtype), dtype)

    def cast(self, expr: str, dtype: DType) -> str:
        return self._builder.of_dtype(typed(expr, dtype), dtype)

    def global_array(self, value: np.ndarray) -> str:
        name = self._builder.pool.add(value)
        self._builder.constants[name] = None
        return name

    def helper(self, name: str) -> str:
        self._builder.pool.helpers.add(name)
        return name


class BodyBuilder:
    """Straight-line code of one loop body; ``lines`` grows as values are requested."""

    def __init__(self, inlined: Mapping[Value, Op], load: Load, pool: ConstantPool, prefix: str = "") -> None:
        self.inlined = inlined
        self.prefix = prefix  # of the temporaries' names (a band member's own: ``m2_t0``)
        self.load = load
        self.pool = pool
        self.lines: list[str] = []
        # the lines that load an element of a value (not computed inline): line position -> the
        # value and the index it is read at (the kernel IR's record of the line's read)
        self.loads: dict[int, tuple[Value, tuple[str, ...]]] = {}
        self.constants: dict[str, None] = {}  # the pool's arrays the body reads, in first-use order
        self.variables: set[str] = set()  # the iteration's variables (the indices ``value_at`` is asked at)
        self.index_uses: set[str] = set()  # those the primitives spelled (``Var``)
        self._emitting: list[set[str]] = []  # the variables each emit running now has spelled
        self._memo: dict[tuple[Value, tuple[str, ...]], str] = {}
        self._index_memo: dict[str, str] = {}
        self._temps: set[str] = set()
        self._names: set[str] = set()  # index entries used as they are: variables, temporaries, integers
        self._dtypes: dict[str, DType] = {}  # expressions made already of a dtype (literals, casts)

    def value_at(self, value: Value, idx: Sequence[str]) -> str:
        """A temporary holding ``value`` at ``idx``: one iteration variable (or integer) per axis."""
        self.variables.update(idx)
        self._names.update(idx)
        return self.read(value, idx)

    def read(self, value: Value, idx: Sequence[str | int]) -> str:
        """``value`` at ``idx`` as a primitive's ``emit`` asks for it (``ctx.read``)."""
        key = (value, tuple(self._index(e) for e in idx))
        found = self._memo.get(key)
        if found is not None:
            return found
        self._operands_first(value, key[1])
        return self._compute(value, key)

    def of_dtype(self, expr: str, dtype: DType) -> str:
        """``expr``, recorded as already of ``dtype`` (a literal, a conversion): not cast again."""
        self._dtypes[expr] = dtype
        return expr

    def _operands_first(self, value: Value, idx: tuple[str, ...]) -> None:
        """Evaluate the operands of a chain of inlined elementwise ops (which read every operand at
        their own index, in operand order) deepest first, with an explicit stack: a fused chain of
        thousands of ops would otherwise exceed Python's recursion limit. Same lines, same order."""
        order: list[Value] = []
        stack: list[tuple[Value, bool]] = [(value, False)]
        seen: set[Value] = set()
        while stack:
            v, expanded = stack.pop()
            if expanded:
                order.append(v)
                continue
            if v in seen or (v, idx) in self._memo:
                continue
            seen.add(v)
            op = self.inlined.get(v)
            if op is None or op.prim.kind is not Kind.ELEMENTWISE:
                order.append(v)  # a load or an index-mapping op: evaluated as before
                continue
            stack.append((v, True))
            stack.extend((o, False) for o in reversed(op.operands))
        for v in order[:-1]:  # the last is ``value`` itself
            if (v, idx) not in self._memo:
                self._compute(v, (v, idx))

    def _compute(self, value: Value, key: tuple[Value, tuple[str, ...]]) -> str:
        found = self._memo.get(key)
        if found is not None:
            return found
        op = self.inlined.get(value)
        uses: set[str] = set()  # the iteration variables the line's own text uses
        if op is None:  # a load: the index it spells is the backend's record (its ``Access``)
            expr = self.load(value, key[1])
            self.loads[len(self.lines)] = (value, key[1])
        else:
            assert op.prim.emit is not None, f"{op.prim.name} has no scalar lowering"
            idx = tuple(Var(e, uses) if e in self.variables else e for e in key[1])
            self._emitting.append(uses)
            expr = op.prim.emit(OpContext(self, op), idx)
            self._emitting.pop()
            self.index_uses |= uses
            if expr in self._temps:  # an index map returned an operand read: share its temporary
                self._memo[key] = expr
                return expr
            if self._dtypes.get(expr) != value.type.dtype:
                expr = typed(expr, value.type.dtype)
        name = f"{self.prefix}t{len(self._temps)}"
        self._temps.add(name)
        self._names.add(name)
        self.lines.append(Expr(f"{name} = {expr}", uses))
        self._memo[key] = name
        return name

    def _index(self, expr: str | int) -> str:
        """A name for one axis of an index: itself when it is one (or an integer), else a temporary
        bound to it once (its line uses what the emit that made it has spelled so far)."""
        if isinstance(expr, int):
            self._names.add(str(expr))
            return str(expr)
        if expr in self._names:
            return str.__str__(expr)  # a ``Var`` passed on: not spelled here
        expr = expr.strip()
        if expr not in self._index_memo:
            name = f"{self.prefix}k{len(self._index_memo)}"
            self._index_memo[expr] = name
            self._names.add(name)
            self.lines.append(Expr(f"{name} = {expr}", self._emitting[-1] if self._emitting else ()))
        return self._index_memo[expr]


def indent(lines: Iterable[str], depth: int) -> list[str]:
    pad = "    " * depth
    return [pad + line for line in lines]


def loop_nest(
    names: Sequence[str],
    extents: Sequence[int | str],
    body: Sequence[str],
    parallel_outer: bool = False,
    outer_range: str | None = None,
) -> list[str]:
    """Nested ``for`` loops, outermost first; ``outer_range`` replaces the first loop's range."""
    lines: list[str] = []
    for depth, (name, extent) in enumerate(zip(names, extents, strict=True)):
        rng = f"range({extent})"
        if depth == 0:
            rng = outer_range or rng
            if parallel_outer:
                rng = "numba.p" + rng
        lines.append("    " * depth + f"for {name} in {rng}:")
    return lines + indent(body, len(names))


def py_name(printed: str) -> str:
    """``%arg0`` -> ``a0``, ``%3`` -> ``v3``, ``%3#1`` -> ``v3_1``: printer names as identifiers."""
    if printed.startswith("%arg"):
        return "a" + printed[4:]
    return "v" + printed[1:].replace("#", "_")


def shape_literal(shape: tuple[int, ...]) -> str:
    return f"({shape[0]},)" if len(shape) == 1 else "(" + ", ".join(map(str, shape)) + ")"
