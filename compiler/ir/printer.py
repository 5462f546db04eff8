"""Print IR as MLIR text: ``func.func`` with ops in MLIR's generic operation syntax.

An op holding regions (loops, branches) prints each region after its operands, as MLIR's generic
form has it: ``({ ^bb0(%args): ops "dsl.yield"(%results) })``. The real
``mlir-opt --allow-unregistered-dialect`` parses every dump, and ``compiler/ir/parser.py``
reads it back: print -> parse -> print is the identity. A function carrying the ``dsl.bufferized``
attribute is printed with ``memref`` types (the buffers of the bufferized stage).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np

from compiler.ir.core import UNKNOWN_LOC, AttrValue, Block, Function, Location, Op, Value
from compiler.ir.types import DType, TensorType

BUFFERIZED = "dsl.bufferized"
# ends each block of a region op; no primitive: it only names the block's results
YIELD = "dsl.yield"
REGIONS_MARK = "\0regions\0"  # where ``op_lines`` puts a region op's regions: after the operands


def format_float(value: float | np.floating, dtype: DType = DType.f64) -> str:
    """An MLIR float literal that reads back to the same ``dtype`` value (hex for inf and NaN)."""
    typed = dtype.np.type(value)
    if not np.isfinite(typed):
        bits = np.array([typed]).view(f"u{dtype.itemsize}")[0]
        return f"0x{int(bits):0{2 * dtype.itemsize}X}"
    text = str(typed) if dtype is DType.f32 else repr(float(typed))
    mantissa, e, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + (f"e{exponent}" if e else "")


def _scalar(value: object, dtype: DType) -> str:
    if dtype.is_bool:
        return "true" if value else "false"
    if dtype.is_float:
        # The NumPy scalar itself: a trip through a Python float would quiet a signaling NaN.
        return format_float(value, dtype)  # type: ignore[arg-type]
    return str(int(value))  # type: ignore[call-overload]


def format_dense(value: np.ndarray) -> str:
    from compiler.prims.source import is_splat  # the splat test is the constant primitive's

    dtype = DType.from_numpy(value.dtype)
    ttype = TensorType(tuple(value.shape), dtype)
    if value.size == 0:
        return f"dense<> : {ttype}"
    if value.ndim == 0 or is_splat(value):
        return f"dense<{_scalar(value.flat[0], dtype)}> : {ttype}"

    def nest(a: np.ndarray) -> str:
        if a.ndim == 0:
            return _scalar(a[()], dtype)
        return "[" + ", ".join(nest(sub) for sub in a) + "]"

    return f"dense<{nest(value)}> : {ttype}"


def format_attr(value: AttrValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value} : i64"
    if isinstance(value, float):
        return f"{format_float(value)} : f64"
    if isinstance(value, str):
        return format_string(value)
    if isinstance(value, DType):
        return str(value)
    if isinstance(value, tuple):
        return "array<i64" + (": " + ", ".join(str(int(v)) for v in value) if value else "") + ">"
    if isinstance(value, np.ndarray):
        return format_dense(value)
    raise TypeError(f"cannot print attribute value {value!r}")


def format_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    # MLIR rejects a raw vertical tab or form feed in a string; \XX is its byte escape.
    escaped = escaped.replace("\v", "\\0B").replace("\f", "\\0C")
    return f'"{escaped}"'


def format_symbol(name: str) -> str:
    """``@f``, or ``@"<lambda>"`` for a name that is not an MLIR bare identifier."""
    return "@" + (name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$.]*", name) else format_string(name))


def format_loc(loc: Location) -> str:
    if loc == UNKNOWN_LOC:
        return "loc(unknown)"
    return f"loc({format_string(loc.file)}:{loc.line}:{loc.col})"


def format_attr_dict(attrs: Mapping[str, AttrValue]) -> str:
    items = sorted(attrs.items())
    return "{" + ", ".join(f"{k} = {format_attr(v)}" for k, v in items) + "}"


class Printer:
    def __init__(self, func: Function) -> None:
        self.func = func
        self.names: dict[Value, str] = {}
        self.bufferized = BUFFERIZED in func.attrs
        self.counter = 0

    def type(self, t: TensorType) -> str:
        text = str(t)
        return "memref" + text[len("tensor") :] if self.bufferized else text

    def name(self, v: Value) -> str:
        try:
            return self.names[v]
        except KeyError:
            raise ValueError(f"value {v} is used before it is defined") from None

    def op_lines(self, op: Op, indent: str) -> list[str]:
        """The op's text; an op holding regions spans lines, ``({ ^bb0(...): ... "dsl.yield"(...) })``."""
        if not op.regions:
            return [indent + self.op(op)]
        head, _, tail = self.op(op).partition(REGIONS_MARK)
        lines = [indent + head + " ({"]
        for k, region in enumerate(op.regions):
            if k:
                lines.append(indent + "}, {")
            lines += self.block_lines(region, indent + "  ")
        lines.append(indent + "})" + tail)
        return lines

    def block_lines(self, block: Block, indent: str) -> list[str]:
        args = []
        for v in block.args:
            self.names[v] = f"%{self.counter}"
            self.counter += 1
            args.append(f"{self.names[v]}: {self.type(v.type)}")
        lines = [indent[:-2] + f"^bb0({', '.join(args)}):"]
        for op in block.ops:
            lines += self.op_lines(op, indent)
        operands = ", ".join(self.name(v) for v in block.results)
        types = ", ".join(self.type(v.type) for v in block.results)
        lines.append(indent + f'"{YIELD}"({operands}) : ({types}) -> ()')
        return lines

    def op(self, op: Op) -> str:
        res = ""
        if op.results:
            first = f"%{self.counter}"
            res = (f"{first}:{len(op.results)}" if len(op.results) > 1 else first) + " = "
            for i, r in enumerate(op.results):
                self.names[r] = first if len(op.results) == 1 else f"{first}#{i}"
            self.counter += 1
        operands = ", ".join(self.name(v) for v in op.operands)
        attrs = " " + format_attr_dict(dict(op.attrs)) if op.attrs else ""
        in_types = ", ".join(self.type(v.type) for v in op.operands)
        out_types = [self.type(v.type) for v in op.results]
        out = out_types[0] if len(out_types) == 1 else "(" + ", ".join(out_types) + ")"
        regions = REGIONS_MARK if op.regions else ""
        name = op.prim.mlir_name
        return f'{res}"{name}"({operands}){regions}{attrs} : ({in_types}) -> {out} {format_loc(op.loc)}'

    def function(self) -> str:
        f = self.func
        args = []
        for i, v in enumerate(f.params):
            self.names[v] = f"%arg{i}"
            arg = f"%arg{i}: {self.type(v.type)}"
            if i < len(f.arg_names) and f.arg_names[i]:
                arg += " {dsl.name = " + format_string(f.arg_names[i]) + "}"
            if i < len(f.arg_locs):
                arg += " " + format_loc(f.arg_locs[i])
            args.append(arg)
        rtypes = [self.type(v.type) for v in f.results]
        sig = (
            "" if not rtypes else " -> " + (rtypes[0] if len(rtypes) == 1 else "(" + ", ".join(rtypes) + ")")
        )
        attrs = " attributes " + format_attr_dict(dict(f.attrs)) if f.attrs else ""
        lines = [f"  func.func {format_symbol(f.name)}({', '.join(args)}){sig}{attrs} {{"]
        for op in f.ops:
            lines += self.op_lines(op, "    ")
        ret = "return"
        if f.results:
            ret += " " + ", ".join(self.name(v) for v in f.results) + " : " + ", ".join(rtypes)
        lines.append("    " + ret)
        lines.append("  }")
        return "\n".join(lines)


def print_function(func: Function) -> str:
    """One function wrapped in a module."""
    return print_module([func])


def print_module(funcs: list[Function]) -> str:
    body = "\n".join(Printer(f).function() for f in funcs)
    return "module {\n" + body + "\n}\n"
