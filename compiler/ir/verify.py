"""The IR verifier: the invariants every pass keeps, checked between passes in tests and debug runs.

A failure is a ``VerificationError`` that names the op (``"dsl.add"``), its source location and what
is wrong, the way JAX's ``check_jaxpr`` does: a pass that breaks the IR is caught at the pass, not
three passes later in code generation. ``DSL_VERIFY=1`` asks the pipeline to verify after every pass.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from compiler.ir.core import Block, Function, Op, Value
from compiler.ir.types import DType, is_supported_numpy_dtype
from compiler.prims import REGISTRY, AttrType
from runtime.errors import ShapeError, VerificationError

WRITEBACK = "dsl.writeback"


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_int_tuple(v: object) -> bool:
    # Elements may be NumPy integers (the printer converts with int()); the container must be a tuple.
    return isinstance(v, tuple) and all(
        isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in v
    )


def _is_dense(v: object) -> bool:
    return isinstance(v, np.ndarray) and is_supported_numpy_dtype(v.dtype)


# The Python form of each attribute type (what the printer can print and the parser produces), and
# how an error message describes it.
ATTR_FORMS: dict[AttrType, tuple[Callable[[object], bool], str]] = {
    AttrType.INT: (_is_int, "an integer like 3 : i64"),
    AttrType.FLOAT: (lambda v: isinstance(v, float), "a float like 2.5 : f64"),
    AttrType.BOOL: (lambda v: isinstance(v, bool), "true or false"),
    AttrType.INTS: (_is_int_tuple, "an integer array like array<i64: 0, 1>"),
    AttrType.DTYPE: (lambda v: isinstance(v, DType), "an element type like f32"),
    AttrType.DENSE: (_is_dense, "a dense literal like dense<[1.0, 2.0]> : tensor<2xf32>"),
}


def is_attr_value(v: object) -> bool:
    """Whether ``v`` has one of the printable attribute forms (the only check on ``dsl.*`` attributes)."""
    return isinstance(v, (bool, int, float, str)) or any(fits(v) for fits, _ in ATTR_FORMS.values())


def verify_enabled() -> bool:
    """``DSL_VERIFY=1``: verify the IR after every pass."""
    return os.environ.get("DSL_VERIFY", "") == "1"


def verify(func: Function) -> None:
    """Raise ``VerificationError`` at the first broken invariant of ``func``."""
    _check_signature(func)
    _Verifier(func).block(func.body, set())
    _check_writeback(func)


class _Verifier:
    def __init__(self, func: Function) -> None:
        self.func = func
        self.defined: set[Value] = set()  # every value defined so far, in any block: SSA defines once
        self.producer = {r: op for op in func.walk() for r in op.results}  # to explain "defined later"

    def error(self, op: Op, what: str) -> VerificationError:
        return VerificationError(f'"{op.prim.mlir_name}" at {op.loc} in @{self.func.name}: {what}')

    def block(self, block: Block, outer: set[Value]) -> None:
        """Ops see the block's args, earlier ops' results and the enclosing blocks' values."""
        visible = set(outer)
        for i, arg in enumerate(block.args):
            if arg in self.defined:
                raise VerificationError(f"@{self.func.name}: block argument #{i} is defined twice")
            self.defined.add(arg)
            visible.add(arg)
        for op in block.ops:
            self.op(op, visible)
            for region in op.regions:
                self.block(region, visible)
            for r in op.results:
                if r in self.defined:
                    raise self.error(
                        op, f"its result {r.type} is already defined elsewhere (SSA defines once)"
                    )
                self.defined.add(r)
                visible.add(r)
        for i, v in enumerate(block.results):
            if v not in visible:
                raise VerificationError(
                    f"@{self.func.name}: result #{i} ({v.type}) is not defined in the function"
                )

    def op(self, op: Op, visible: set[Value]) -> None:
        if REGISTRY.get(op.prim.name) is not op.prim:
            raise self.error(op, "its primitive is not the registered dslc primitive of that name")
        for i, v in enumerate(op.operands):
            if v not in visible:
                raise self.error(op, f"operand #{i} ({v.type}) {self.undefined_reason(v)}")
        self.attributes(op)
        self.result_types(op)

    def undefined_reason(self, v: Value) -> str:
        later = self.producer.get(v)
        if later is None:
            return "is not defined in this function"
        return f'is not defined before this op (it is defined by "{later.prim.mlir_name}" at {later.loc})'

    def attributes(self, op: Op) -> None:
        table = op.prim.attrs
        for name, value in op.attrs.items():
            kind = table.get(name)
            if kind is None and not name.startswith("dsl."):
                raise self.error(op, f"unknown attribute '{name}' (it has: {', '.join(table) or 'none'})")
            fits, what = (
                ATTR_FORMS[kind] if kind is not None else (is_attr_value, "a printable attribute value")
            )
            if not fits(value):
                raise self.error(
                    op, f"attribute '{name}' must be {what}, got {type(value).__name__} {value!r}"
                )
        for name in table:
            if name not in op.attrs and name not in op.prim.optional_attrs:
                raise self.error(op, f"missing attribute '{name}' ({ATTR_FORMS[table[name]][1]})")

    def result_types(self, op: Op) -> None:
        try:
            inferred = op.prim.infer([v.type for v in op.operands], op.attrs, op.regions)
        except ShapeError as exc:
            raise self.error(op, f"the shape rule rejects its operands: {exc}") from exc
        except Exception as exc:  # a rule given attributes it cannot read: still this op's fault
            raise self.error(op, f"the shape rule failed: {type(exc).__name__}: {exc}") from exc
        actual = [r.type for r in op.results]
        if actual != list(inferred):
            shown = ", ".join(str(t) for t in inferred)
            raise self.error(
                op, f"result types ({', '.join(map(str, actual))}) differ from ({shown}) of the shape rule"
            )


def _check_signature(func: Function) -> None:
    where = f"@{func.name}"
    if len(func.arg_names) > len(func.params) or len(func.arg_locs) > len(func.params):
        raise VerificationError(
            f"{where}: more argument names or locations than its {len(func.params)} arguments"
        )
    for name, value in func.attrs.items():
        if name != WRITEBACK and not is_attr_value(value):  # dsl.writeback has its own, stricter check
            raise VerificationError(f"{where}: function attribute '{name}' = {value!r} cannot be printed")


def _check_writeback(func: Function) -> None:
    """``dsl.writeback``: the last k results go back into these k arguments, so the types must match."""
    indices = func.attrs.get(WRITEBACK)
    if indices is None:
        return
    where = f"@{func.name}: {WRITEBACK} = {indices!r}"
    if not (isinstance(indices, tuple) and all(_is_int(i) for i in indices)):
        raise VerificationError(f"{where}: expected a tuple of argument indices")
    if len(indices) > len(func.results) or len(set(indices)) != len(indices):
        raise VerificationError(
            f"{where}: expected distinct indices, at most one per result ({len(func.results)})"
        )
    written = func.results[len(func.results) - len(indices) :]
    for k, (index, result) in enumerate(zip(indices, written, strict=True)):
        if not 0 <= index < len(func.params):
            raise VerificationError(
                f"{where}: {index} is not an argument index (there are {len(func.params)})"
            )
        if func.params[index].type != result.type:
            position = len(func.results) - len(indices) + k
            raise VerificationError(
                f"{where}: argument #{index} has type {func.params[index].type}, but result #{position} "
                f"written back to it has type {result.type}"
            )
