"""What a primitive is: one record holding every fact about one operation.

A ``Primitive`` carries its shape/dtype rule, NumPy reference, kind (for fusion), memory behaviour,
scalar lowering (shared by the CPU and CUDA backends) and vjp slot. Nothing outside its definition in
``compiler/prims/`` asks "is this op named X?": passes ask for properties (``prim.kind``,
``prim.memory``) or call the slots.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from compiler.ir.types import DType, TensorType
from runtime.errors import ShapeError

if TYPE_CHECKING:
    from compiler.ir.core import Block, Op
    from compiler.prims.mlir import OpRule, ScalarRule


class Kind(enum.Enum):
    ELEMENTWISE = "elementwise"  # result[i] depends on operands[i] only; shapes equal
    REDUCTION = "reduction"  # folds some axes of one operand with an associative combiner
    MOVEMENT = "movement"  # moves or selects elements without arithmetic (reshape, slice, ...)
    CONTRACTION = "contraction"  # matmul
    SCATTER = "scatter"  # combines updates into a copy of operand 0 at data-dependent positions
    SCAN = "scan"  # running combination along one axis (cumsum): a serial walk per line
    SOURCE = "source"  # a function of the position (and of a small key): constant, iota, random_bits
    CONTROL = "control"  # holds regions: loops and branches (compiler/prims/control.py)


class AttrType(enum.Enum):
    """How an attribute is typed, printed and parsed."""

    INT = "int"  # 3 : i64
    FLOAT = "float"  # 2.5 : f64
    BOOL = "bool"  # true
    INTS = "ints"  # array<i64: 0, 1>
    DTYPE = "dtype"  # f32 (a type attribute)
    DENSE = "dense"  # dense<[1.0, 2.0]> : tensor<2xf32>  (a numpy array)


@dataclass(frozen=True)
class Memory:
    """Memory behaviour.

    ``view_of``: the result can be the operand's buffer reinterpreted (no data moves).
    ``vjp_needs``: which values the vjp reads: ``"inputs"``, ``"output"``, both or neither (checked
    against what each rule reads, tests/test_vjp_rules.py): what the forward must keep for the backward.

    Whether a result may be stored over an operand's buffer is no fact of one primitive but of the
    kernel it is fused into: the planner asks ``FusionPlan.in_place_safe`` (compiler/passes/fuse.py),
    which holds when every read the kernel makes of the buffer is at the element being written.
    """

    view_of: int | None = None
    vjp_needs: frozenset[str] = frozenset()


class EmitContext(Protocol):
    """What a scalar lowering may ask of the code generator (CPU and CUDA implement it alike).

    ``read`` returns a name or literal that is safe to repeat in an expression; its index is the
    emit's own (handed on whole), or one entry per axis: an entry of the emit's index, a Python
    ``int``, or an expression of them. The entries of the emit's index record where they are
    written into code (formatted: the code generator computes only the indices a body uses), so
    an emit formats them (f-strings, ``str``) rather than ``str.join``-ing them raw. ``const`` and
    ``cast`` return expressions already of their dtype (the code generator does not convert them
    again).
    """

    result_type: TensorType
    operand_types: Sequence[TensorType]
    attrs: Mapping[str, Any]

    def read(self, k: int, idx: Sequence[str | int]) -> str: ...

    def const(self, value: float | int | bool, dtype: DType) -> str: ...

    def cast(self, expr: str, dtype: DType) -> str: ...

    def global_array(self, value: np.ndarray) -> str: ...

    def helper(self, name: str) -> str:
        """``name``, a scalar helper function of the generated module the expression calls
        (``vecmath``'s, ``random``'s), recorded for the module's prelude."""
        ...


# A scalar lowering: given the context and the output element's index expressions, return the
# expression of that element's value.
Emit = Callable[[EmitContext, Sequence[str]], str]
# How rules (vjp, unview) emit ops: ``build(prim, operands, attrs) -> Value``.
Build = Callable[["Primitive", Sequence[Any], Mapping[str, Any]], Any]
ShapeRule = Callable[[Sequence[TensorType], Mapping[str, Any]], list[TensorType]]
# The shape rule of an op holding regions: ``rule(operand_types, attrs, regions)`` checks the regions'
# block arguments and results against the operands and returns the result types.
RegionRule = Callable[[Sequence[TensorType], Mapping[str, Any], Sequence["Block"]], list[TensorType]]
# Runs a block on NumPy arrays (the interpreter's): ``run_block(block, args) -> results``.
RunBlock = Callable[["Block", Sequence[np.ndarray]], list[np.ndarray]]
# The NumPy reference of an op holding regions: ``run(operands, attrs, regions, run_block) -> results``.
RegionReference = Callable[
    [Sequence[np.ndarray], Mapping[str, Any], Sequence["Block"], RunBlock], list[np.ndarray]
]
# A vector-Jacobian product: ``rule(build, op, ct, wanted)`` returns one cotangent (a Value) or None per
# operand of the forward ``op``, given the cotangent ``ct`` of its result. ``wanted[k]`` says whether
# operand k needs one; None means zero and costs nothing, so unwanted operands get None and no ops.
# Rules emit only primitives through ``build``: the backward is IR that can be differentiated again.
Vjp = Callable[[Build, "Op", Any, tuple[bool, ...]], tuple[Any | None, ...]]


@dataclass(frozen=True)
class Reducer:
    """What every backend needs to know of a reduction (the CPU and CUDA printers, the NumPy-assisted
    kernels and the MLIR export read it here and nowhere else).

    ``combine(acc, x)``: the expression folding element ``x`` into ``acc``; ``identity(dtype)``: the
    element it starts from; ``accumulator(dtype)``: the dtype partial results are kept in (the result
    dtype unless the reducer widens it); ``mlir_combine``: ``combine`` as ``arith`` ops.
    ``reassociable``: floating-point partial results may be regrouped, changing only rounding (sums:
    a backend may keep several accumulators and vectorize). ``selects``: ``"max"`` or ``"min"`` for a
    reduction whose result is one of its elements, the greatest or least (exact in any order: floats
    may be compared as ordered integer keys).
    """

    combine: Callable[[str, str], str]
    identity: Callable[[DType], float | int | bool]
    accumulator: Callable[[DType], DType] = lambda d: d
    mlir_combine: ScalarRule = field(kw_only=True)  # combine(element, accumulator) in ``arith``
    reassociable: bool = field(default=False, kw_only=True)
    selects: str | None = field(default=None, kw_only=True)


@dataclass(frozen=True, eq=False)
class Primitive:
    name: str
    kind: Kind
    nargs: int | None  # None: variadic (at least one)
    attrs: Mapping[str, AttrType]
    shape_rule: ShapeRule
    reference: Callable[..., np.ndarray]  # a NumPy function or one of runtime/array_ops.py
    memory: Memory = field(default_factory=Memory)
    emit: Emit | None = None  # elementwise / movement / source element form
    reducer: Reducer | None = None  # reductions
    mlir: OpRule | None = None  # the lowering to upstream MLIR (``--emit mlir``, compiler/prims/mlir.py)
    differentiable: bool = True
    vjp: Vjp | None = None  # None exactly when not differentiable (the vjp test checks both ways)
    # For ops a user sees as views (slice, reshape, transpose, dynamic_slice):
    # ``unview(build, base, new_view, attrs, *operands)`` returns the new value of ``base`` after
    # ``new_view`` was written through the view; ``operands``: the view op's operands after the base
    # (a dynamic slice's starts).
    unview: Callable[..., Any] | None = None
    # Ops holding regions (``Kind.CONTROL``): their shape rule reads the regions too, and their
    # reference runs the regions' blocks. ``shape_rule`` and ``reference`` are then unused.
    region_rule: RegionRule | None = None
    region_reference: RegionReference | None = None
    # ``batch(build, op, operands, batched, size) -> Value``: ``op`` applied to ``operands``, those
    # marked in ``batched`` with a leading batch axis of ``size`` (``vmap``); the result has one.
    # None: the rule of the primitive's kind (elementwise, reduction: ``compiler/batching.py``). A rule
    # returning None has no batched form for those operands: the op then runs once per example.
    batch: Callable[..., Any] | None = None
    # attributes an op may leave out (the rules read their default: a loop's ``consts``, 0)
    optional_attrs: frozenset[str] = frozenset()
    # ``traps(op)``: whether ``op`` may raise on some operands (an integer ``pow`` on a negative
    # exponent), so it must not run where the program did not ask for it (``passes/if_to_select.py``)
    traps: Callable[[Any], bool] | None = None

    def __repr__(self) -> str:
        return f"<prim {self.name}>"

    @property
    def mlir_name(self) -> str:
        return f"dsl.{self.name}"

    def infer(
        self, operand_types: Sequence[TensorType], attrs: Mapping[str, Any], regions: Sequence[Block] = ()
    ) -> list[TensorType]:
        """Check arity and attributes, then apply the shape rule (the region rule, with ``regions``,
        for an op holding regions). Raises ``ShapeError``."""
        if self.nargs is not None and len(operand_types) != self.nargs:
            raise ShapeError(f"{self.name} takes {self.nargs} operands, got {len(operand_types)}")
        if self.nargs is None and not operand_types:
            raise ShapeError(f"{self.name} needs at least one operand")
        for name in attrs:
            if name not in self.attrs and not name.startswith("dsl."):
                raise ShapeError(f"{self.name} has no attribute '{name}' (it has: {', '.join(self.attrs)})")
        for name in self.attrs:
            if name not in attrs and name not in self.optional_attrs:
                raise ShapeError(f"{self.name} needs attribute '{name}'")
        if self.region_rule is not None:
            return self.region_rule(operand_types, attrs, regions)
        return self.shape_rule(operand_types, attrs)

    def run_reference(self, operands: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
        """Evaluate with NumPy; the result has exactly the inferred type."""
        (rtype,) = self.infer([TensorType(a.shape, DType.from_numpy(a.dtype)) for a in operands], attrs)
        with np.errstate(all="ignore"):
            out = np.asarray(self.reference(*operands, **numpy_attrs(attrs)))
        return out.reshape(rtype.shape).astype(rtype.dtype.np, order="C", copy=True)


def numpy_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """An op's attributes as its NumPy reference takes them: dtypes as NumPy dtypes, no ``dsl.``
    annotations (``runtime/array_ops.py`` knows nothing of the compiler's types)."""
    return {k: v.np if isinstance(v, DType) else v for k, v in attrs.items() if not k.startswith("dsl.")}


def fail(message: str) -> ShapeError:
    return ShapeError(message)
