"""The IR data structures: SSA values, immutable ops with source locations, blocks and functions.

Ops are immutable records. A pass never edits one: it builds new ops (``Op.create``) and a new
``Block``/``Function``; ``Rewriter`` in ``compiler/ir/rewrite.py`` keeps uses consistent while it does.
A function is one block; a loop or branch op (``compiler/prims/control.py``) holds its bodies as
``Op.regions``, blocks whose arguments carry the loop state. A region's ops may read any value of the
blocks that enclose it (as MLIR's ``scf`` regions do): values a body closes over are not operands.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from compiler.ir.types import TensorType

if TYPE_CHECKING:
    from compiler.prims.base import Primitive


@dataclass(frozen=True)
class Location:
    """Where in the user's source an op came from: ``loc("file.py":line:col)``."""

    file: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


UNKNOWN_LOC = Location("<unknown>", 0, 0)


class Value:
    """An SSA value. Identity is the object; the printer numbers values when it prints."""

    __slots__ = ("type",)

    def __init__(self, type: TensorType) -> None:
        self.type = type

    def __repr__(self) -> str:
        return f"Value({self.type})"


AttrValue = Any  # int | float | bool | str | tuple[int, ...] | DType | np.ndarray


def attr_key(value: AttrValue) -> object:
    """A hashable stand-in for an attribute value (arrays by dtype, shape and bytes)."""
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, float):
        return ("float", value.hex())  # keeps -0.0 and NaN apart from their neighbours
    return (type(value).__name__, value)


@dataclass(frozen=True, eq=False)
class Op:
    """One operation: a primitive applied to operands, with attributes and a source location."""

    prim: Primitive
    operands: tuple[Value, ...]
    attrs: Mapping[str, AttrValue]
    results: tuple[Value, ...]
    loc: Location = UNKNOWN_LOC
    regions: tuple[Block, ...] = ()

    @staticmethod
    def create(
        prim: Primitive,
        operands: tuple[Value, ...] | list[Value],
        attrs: Mapping[str, AttrValue] | None = None,
        loc: Location = UNKNOWN_LOC,
        regions: tuple[Block, ...] = (),
    ) -> Op:
        """Build an op, computing its result types with the primitive's shape rule."""
        attrs = dict(attrs or {})
        operands = tuple(operands)
        result_types = prim.infer([v.type for v in operands], attrs, regions)
        return Op(prim, operands, attrs, tuple(Value(t) for t in result_types), loc, regions)

    @property
    def result(self) -> Value:
        assert len(self.results) == 1, f"{self.prim.name} has {len(self.results)} results"
        return self.results[0]

    @property
    def name(self) -> str:
        return self.prim.name

    def key(self) -> tuple[object, ...]:
        """Structural identity for CSE: primitive, operand identities and attributes (and, for an op
        holding regions, the identity of its blocks: two loops over the same operands with other
        bodies are other ops)."""
        attrs = tuple(sorted((k, attr_key(v)) for k, v in self.attrs.items()))
        return (self.prim, tuple(id(v) for v in self.operands), attrs, tuple(id(b) for b in self.regions))

    def with_operands(self, operands: tuple[Value, ...]) -> Op:
        """The same op reading other values (result values are kept: uses stay valid)."""
        return Op(self.prim, operands, self.attrs, self.results, self.loc, self.regions)


@dataclass(frozen=True, eq=False)
class Block:
    """Straight-line ops; ``args`` are the block's parameters and ``results`` what it returns."""

    args: tuple[Value, ...]
    ops: tuple[Op, ...]
    results: tuple[Value, ...]


@dataclass(frozen=True, eq=False)
class Function:
    """A ``func.func``: one block plus names and function-level attributes.

    ``attrs`` holds facts for later stages, e.g. ``dsl.writeback``: for each of the last k results,
    the index of the argument whose caller-owned array it must be written back to.
    """

    name: str
    body: Block
    arg_names: tuple[str, ...] = ()
    attrs: Mapping[str, AttrValue] = field(default_factory=dict)
    arg_locs: tuple[Location, ...] = ()

    @property
    def params(self) -> tuple[Value, ...]:
        return self.body.args

    @property
    def ops(self) -> tuple[Op, ...]:
        return self.body.ops

    @property
    def results(self) -> tuple[Value, ...]:
        return self.body.results

    def walk(self) -> Iterator[Op]:
        """Every op, nested regions included, in program order."""
        yield from _walk(self.body)

    def replace_body(self, body: Block, **changes: Any) -> Function:
        return Function(
            changes.get("name", self.name),
            body,
            changes.get("arg_names", self.arg_names),
            changes.get("attrs", self.attrs),
            changes.get("arg_locs", self.arg_locs),
        )


def _walk(block: Block) -> Iterator[Op]:
    for op in block.ops:
        yield op
        for region in op.regions:
            yield from _walk(region)


def clone_ops(ops: Iterable[Op], mapping: MutableMapping[Value, Value]) -> list[Op]:
    """Copies of ``ops`` reading ``mapping[v]`` for each value ``v`` it maps (values it does not map
    are read as they are), with new result values and, in their regions, new block arguments: the
    copy is new SSA (a loop unrolled twice defines each value twice). ``mapping`` gains every value
    the copies define, the old value mapped to its copy."""
    out = []
    for op in ops:
        regions = tuple(_clone_block(region, mapping) for region in op.regions)
        results = tuple(Value(r.type) for r in op.results)
        mapping.update(zip(op.results, results, strict=True))
        operands = tuple(mapping.get(v, v) for v in op.operands)
        out.append(Op(op.prim, operands, op.attrs, results, op.loc, regions))
    return out


def _clone_block(block: Block, mapping: MutableMapping[Value, Value]) -> Block:
    args = tuple(Value(a.type) for a in block.args)
    mapping.update(zip(block.args, args, strict=True))
    ops = tuple(clone_ops(block.ops, mapping))
    return Block(args, ops, tuple(mapping.get(v, v) for v in block.results))


def walk_values(block: Block) -> set[Value]:
    """Every value ``block`` defines: its arguments and its ops' results, nested regions included."""
    values = set(block.args)
    for op in block.ops:
        values.update(op.results)
        for region in op.regions:
            values |= walk_values(region)
    return values
