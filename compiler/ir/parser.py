"""Read the MLIR text form back into ``Function``s: a recursive-descent parser over ``lexer.py``'s tokens.

It reads what ``printer.py`` writes (print -> parse -> print is the identity) and the hand-written
variations an IR test uses: comments, any value names, ops without ``loc``, ``loc(unknown)``, a bare
``func.func`` without ``module { }``. Every op is rebuilt with ``Op.create`` so the primitive's shape
rule runs; the types written in the text must then agree with it. Every problem, malformed text or
ill-typed IR, is an ``IRParseError`` carrying the line and column of the token at fault.
"""

from __future__ import annotations

import difflib
import re
from typing import NamedTuple

import numpy as np

from compiler.ir.core import UNKNOWN_LOC, AttrValue, Block, Function, Location, Op, Value
from compiler.ir.lexer import Token, TokenStream, describe
from compiler.ir.printer import BUFFERIZED, YIELD
from compiler.ir.types import DType, TensorType
from compiler.ir.verify import ATTR_FORMS
from compiler.prims import REGISTRY, Primitive
from runtime.errors import ShapeError

_TYPE_BODY_RE = re.compile(r"((?:[0-9]+x)*)(.*)")
_DTYPES = {d.value: d for d in DType}
_DTYPE_NAMES = ", ".join(_DTYPES)
_MAX_DENSE_DEPTH = 32  # deeper nesting is no real tensor; the limit keeps recursion bounded


class _Attr(NamedTuple):
    name: str
    key: Token
    start: Token  # first token of the value, where a wrongly typed value is reported
    value: AttrValue


class _Param(NamedTuple):
    value: Value
    type_tok: Token
    name: str  # "" when the text gives no {dsl.name = ...}
    loc: Location | None


class _DenseList(NamedTuple):
    open: Token
    items: list[_DenseList | Token]


Typed = tuple[TensorType, Token]  # a type and where it was written


def parse_module(text: str, filename: str = "<ir>") -> list[Function]:
    """Every ``func.func`` in ``text`` (inside ``module { }`` or bare), in order."""
    return _Parser(text, filename).module()


def parse_function(text: str, filename: str = "<ir>") -> Function:
    """The one function in ``text``; more or fewer is an ``IRParseError``."""
    parser = _Parser(text, filename)
    funcs = parser.module()
    if len(funcs) != 1:
        at = parser.function_starts[1] if len(funcs) > 1 else Token("eof", "", 0)
        raise parser.error(at, f"expected exactly one function, found {len(funcs)}")
    return funcs[0]


class _Parser(TokenStream):
    def __init__(self, text: str, filename: str) -> None:
        super().__init__(text, filename)
        self.values: dict[str, list[Value]] = {}  # SSA names of the function being parsed
        self.function_starts: list[Token] = []

    # ---- module, function -----------------------------------------------------------------------

    def module(self) -> list[Function]:
        wrapped = self.accept("module") is not None
        if wrapped:
            if self.peek().kind == "symbol":
                self.next()
            self.expect("{", " to open the module")
        funcs: list[Function] = []
        while self.at("func.func"):
            funcs.append(self.function())
            if any(f.name == funcs[-1].name for f in funcs[:-1]):
                raise self.error(self.function_starts[-1], f"redefinition of function @{funcs[-1].name}")
        if wrapped:
            self.expect("}", " or 'func.func' in the module")
            self.optional_loc()
        if self.peek().kind != "eof":
            what = "end of input after the module" if wrapped else "'func.func' or 'module'"
            raise self.error(
                self.peek(), f"expected {what}, found {describe(self.peek())}"
            )  # junk: point at it
        return funcs

    def function(self) -> Function:
        self.function_starts.append(self.expect("func.func"))
        name = self.symbol()
        self.values = {}
        self.expect("(", " before the function's arguments")
        params = self.comma_list(")", self.param)
        result_types = self.type_list() if self.accept("->") else []
        attrs = {a.name: a.value for a in self.attr_dict()} if self.accept("attributes") else {}
        bufferized = BUFFERIZED in attrs  # known only now, after the signature's types were read
        for tok in [p.type_tok for p in params] + [tok for _, tok in result_types]:
            self.check_buffer_kind(tok, bufferized)
        self.expect("{", " to open the function body")
        ops = []
        while not (self.at("return") or self.at("func.return")):
            ops.append(self.op(bufferized))
        results = self.return_op([t for t, _ in result_types], bufferized)
        self.expect("}", " after 'return' (it ends the function body)")
        self.optional_loc()
        body = Block(tuple(p.value for p in params), tuple(ops), results)
        return Function(name, body, _arg_names(params), attrs, _arg_locs([p.loc for p in params]))

    def symbol(self) -> str:
        tok = self.expect_kind("symbol", "a function name like @f")
        if tok.text[1] != '"':
            return tok.text[1:]
        return self.string(Token("string", tok.text[1:], tok.offset + 1))

    def param(self) -> _Param:
        """``%arg0: tensor<2xf32> {dsl.name = "x"} loc("f.py":1:0)``, the last two optional."""
        tok = self.expect_kind("value", "an argument like %arg0: tensor<2xf32>")
        self.expect(":", " after the argument name")
        ttype, type_tok = self.type()
        name = ""
        for attr in self.attr_dict() if self.at("{") else []:
            if attr.name != "dsl.name" or not isinstance(attr.value, str):
                raise self.error(attr.key, 'expected only {dsl.name = "..."} as an argument attribute')
            name = attr.value
        param = _Param(Value(ttype), type_tok, name, self.optional_loc())
        self.define(tok, [param.value])
        return param

    def return_op(self, signature: list[TensorType], bufferized: bool) -> tuple[Value, ...]:
        ret = self.next()
        values = [self.use()] if self.peek().kind == "value" else []
        while values and self.accept(","):
            values.append(self.use())
        types: list[Typed] = []
        if values:
            self.expect(":", " and the returned types")
            types.append(self.type())
        while types and self.accept(","):
            types.append(self.type())
        if not len(values) == len(types) == len(signature):
            counts = f"{len(values)} value(s) and {len(types)} type(s)"
            raise self.error(ret, f"return has {counts}; expected {len(signature)} as in the signature")
        for value, (ttype, tok), expected in zip(values, types, signature, strict=True):
            self.check_buffer_kind(tok, bufferized)
            if ttype != value.type:
                raise self.error(tok, f"return type {ttype} does not match the value's type {value.type}")
            if ttype != expected:
                raise self.error(
                    tok, f"return type {ttype} does not match the function's result type {expected}"
                )
        self.optional_loc()
        return tuple(values)

    # ---- ops ------------------------------------------------------------------------------------

    def op(self, bufferized: bool) -> Op:
        defs = self.result_defs()
        what = "an op like %0 = \"dsl.add\"(...) or 'return'"
        if not defs and self.peek().kind != "string":
            # A whole op line is missing (a deleted 'return', say), not a piece of the previous line:
            # point at the token in its place, not after the previous line as ``wrong_token`` does.
            raise self.error(self.peek(), f"expected {what}, found {describe(self.peek())}")
        name_tok = self.expect_kind("string", what)
        prim = self.primitive(name_tok)
        self.expect("(", " and the op's operands")
        operands = self.comma_list(")", lambda: (self.peek(), self.use()))
        regions = self.regions(bufferized) if self.accept("(") else ()
        attrs = self.op_attrs(prim, name_tok, self.attr_dict() if self.at("{") else [])
        self.expect(":", " before the op's type signature")
        if not self.at("("):
            raise self.wrong_token("'(' and the operand types")
        in_types = self.type_list()
        arrow = self.expect("->", " and the result types")
        out_types = self.type_list()
        loc = self.optional_loc() or UNKNOWN_LOC
        for _, tok in in_types + out_types:
            self.check_buffer_kind(tok, bufferized)
        if len(in_types) != len(operands):
            raise self.error(name_tok, f"{len(operands)} operands but {len(in_types)} operand types")
        for (use, value), (ttype, tok) in zip(operands, in_types, strict=True):
            if value.type != ttype:
                raise self.error(tok, f"operand {use.text} has type {value.type}, but the op says {ttype}")
        op = self.create(prim, [v for _, v in operands], attrs, loc, name_tok, regions)
        self.check_results(op, defs, out_types, arrow)
        return op

    def regions(self, bufferized: bool) -> tuple[Block, ...]:
        """``({ ^bb0(%a: t, ...): ops "dsl.yield"(%r) : (t) -> () }, { ... })`` after the ``(``. Names
        defined in a region are not visible after it (MLIR's scoping); values above it are."""
        blocks = []
        while True:
            self.expect("{", " to open a region")
            outer = dict(self.values)
            blocks.append(self.block(bufferized))
            self.values = outer
            self.expect("}", f" to close the region after {YIELD}")
            if not self.accept(","):
                break
        self.expect(")", " after the op's regions")
        return tuple(blocks)

    def block(self, bufferized: bool) -> Block:
        self.expect_kind("block", "a block label like ^bb0(%0: tensor<i64>):")
        self.expect("(", " and the block's arguments")
        args = self.comma_list(")", self.block_arg)
        self.expect(":", " after the block's arguments")
        ops = []
        while not (self.peek().kind == "string" and self.string(self.peek()) == YIELD):
            ops.append(self.op(bufferized))
        yield_tok = self.next()
        self.expect("(", f" and the values {YIELD} returns")
        results = self.comma_list(")", self.use)
        self.expect(":", f" before the types {YIELD} takes")
        types = self.type_list()
        self.expect("->", f" after the types {YIELD} takes")
        self.expect("(", f" and the empty result list of {YIELD}")
        self.expect(")", f": {YIELD} has no results")
        if len(types) != len(results):
            raise self.error(yield_tok, f"{YIELD} has {len(results)} values but {len(types)} types")
        for value, (ttype, tok) in zip(results, types, strict=True):
            self.check_buffer_kind(tok, bufferized)
            if ttype != value.type:
                raise self.error(tok, f"{YIELD} says {ttype} for a value of type {value.type}")
        self.optional_loc()
        return Block(tuple(args), tuple(ops), tuple(results))

    def block_arg(self) -> Value:
        tok = self.expect_kind("value", "a block argument like %0: tensor<i64>")
        self.expect(":", " after the block argument's name")
        value = Value(self.type()[0])
        self.optional_loc()  # mlir-opt gives block arguments locations; the IR keeps none
        self.define(tok, [value])
        return value

    def result_defs(self) -> list[tuple[Token, int]]:
        """``%0 =``, ``%0:2 =`` or ``%a, %b =``: each group's name token and how many results it takes."""
        defs: list[tuple[Token, int]] = []
        while self.peek().kind == "value":
            tok = self.next()
            defs.append((tok, self.int_literal("a result count") if self.accept(":") else 1))
            if not self.accept(","):
                self.expect("=", " after the op's result names")
        return defs

    def primitive(self, tok: Token) -> Primitive:
        name = self.string(tok)
        dialect, _, short = name.partition(".")
        if dialect != "dsl":
            raise self.error(
                tok, f"unknown op '{name}': expected a dslc primitive \"dsl.<name>\" or 'return'"
            )
        prim = REGISTRY.get(short)
        if prim is None:
            close = ", ".join(f'"dsl.{c}"' for c in difflib.get_close_matches(short, list(REGISTRY), n=3))
            hint = f" (did you mean {close}?)" if close else ""
            raise self.error(tok, f"unknown op '{name}': '{short}' is not a dslc primitive{hint}")
        return prim

    def op_attrs(self, prim: Primitive, name_tok: Token, attrs: list[_Attr]) -> dict[str, AttrValue]:
        """Check attribute names and value kinds against the primitive's table (``dsl.*`` ones are free)."""
        for attr in attrs:
            kind = prim.attrs.get(attr.name)
            if kind is None and not attr.name.startswith("dsl."):
                known = ", ".join(prim.attrs) or "none"
                raise self.error(
                    attr.key, f"{prim.mlir_name} has no attribute '{attr.name}' (it has: {known})"
                )
            if kind is not None and not ATTR_FORMS[kind][0](attr.value):
                raise self.error(
                    attr.start, f"'{attr.name}' of {prim.mlir_name} must be {ATTR_FORMS[kind][1]}"
                )
        given = {a.name: a.value for a in attrs}
        for name, kind in prim.attrs.items():
            if name not in given and name not in prim.optional_attrs:
                raise self.error(
                    name_tok, f"{prim.mlir_name} needs attribute '{name}' ({ATTR_FORMS[kind][1]})"
                )
        return given

    def create(
        self,
        prim: Primitive,
        operands: list[Value],
        attrs: dict[str, AttrValue],
        loc: Location,
        at: Token,
        regions: tuple[Block, ...] = (),
    ) -> Op:
        try:
            return Op.create(prim, operands, attrs, loc, regions)
        except ShapeError as exc:
            raise self.error(at, str(exc)) from None
        except Exception as exc:  # rules assume well-formed attributes; odd hand-written ones land here
            raise self.error(at, f"{prim.mlir_name}: the shape rule rejects these operands ({exc})") from None

    def check_results(self, op: Op, defs: list[tuple[Token, int]], types: list[Typed], arrow: Token) -> None:
        """The written result types must be the inferred ones; then the result names are defined."""
        name, n = op.prim.mlir_name, len(op.results)
        if len(types) != n:
            raise self.error(arrow, f"{name} has {n} results, but the signature lists {len(types)}")
        for result, (ttype, tok) in zip(op.results, types, strict=True):
            if ttype != result.type:
                raise self.error(tok, f"result type {ttype} does not match {result.type} inferred for {name}")
        if defs and sum(k for _, k in defs) != n:
            raise self.error(
                defs[0][0], f"{name} has {n} results, but the text names {sum(k for _, k in defs)}"
            )
        first = 0
        for tok, count in defs:
            self.define(tok, list(op.results[first : first + count]))
            first += count

    def define(self, tok: Token, values: list[Value]) -> None:
        if "#" in tok.text:
            raise self.error(tok, f"expected a value name without '#' in a definition, found {tok.text}")
        if tok.text in self.values:
            raise self.error(tok, f"redefinition of value {tok.text}")
        self.values[tok.text] = values

    def use(self) -> Value:
        tok = self.expect_kind("value", "a value like %0")
        name, _, index = tok.text.partition("#")
        group = self.values.get(name)
        if group is None:
            raise self.error(tok, f"use of undefined value {name}")
        if not index and len(group) != 1:
            raise self.error(
                tok, f"{name} names {len(group)} results: expected {name}#0 .. #{len(group) - 1}"
            )
        i = int(index or 0)
        if i >= len(group):
            raise self.error(tok, f"{name} has {len(group)} results, so {tok.text} does not exist")
        return group[i]

    # ---- types and locations --------------------------------------------------------------------

    def type(self) -> Typed:
        tok = self.expect_kind("type", "a type like tensor<2x3xf32>")
        body = tok.text[tok.text.index("<") + 1 :]
        if not body.endswith(">"):
            raise self.error(tok.offset + len(tok.text), f"expected '>' to close {tok.text}")
        m = _TYPE_BODY_RE.fullmatch(body[:-1])
        assert m is not None  # the pattern matches every string
        dims, element = m.groups()
        if element not in _DTYPES:
            where = tok.offset + tok.text.index("<") + 1 + len(dims)
            raise self.error(
                where, f"expected a static dimension or an element type ({_DTYPE_NAMES}), found '{element}'"
            )
        return TensorType(tuple(int(d) for d in dims.split("x")[:-1]), _DTYPES[element]), tok

    def type_list(self) -> list[Typed]:
        """One type, or ``(t1, t2)``/``()``."""
        return self.comma_list(")", self.type) if self.accept("(") else [self.type()]

    def check_buffer_kind(self, tok: Token, bufferized: bool) -> None:
        """memref types belong to bufferized functions only, tensor types to all others."""
        if tok.text.startswith("memref") and not bufferized:
            raise self.error(
                tok, f"expected a tensor type, found {tok.text}: memref needs the {BUFFERIZED} attribute"
            )
        if tok.text.startswith("tensor") and bufferized:
            raise self.error(tok, f"expected a memref type in a {BUFFERIZED} function, found {tok.text}")

    def optional_loc(self) -> Location | None:
        if not self.accept("loc"):
            return None
        self.expect("(", " after 'loc'")
        loc = UNKNOWN_LOC
        if not self.accept("unknown"):
            file = self.string(
                self.expect_kind("string", 'a location like loc("file.py":3:5) or loc(unknown)')
            )
            self.expect(":", " after the location's file name")
            line = self.int_literal("a line number")
            self.expect(":", " after the location's line")
            loc = Location(file, line, self.int_literal("a column number"))
        self.expect(")", " to close the location")
        return loc

    def int_literal(self, what: str) -> int:
        tok = self.expect_kind("number", what)
        if not tok.text.isdigit():
            raise self.error(tok, f"expected {what} (a non-negative decimal integer), found {tok.text}")
        return int(tok.text)

    # ---- attributes -----------------------------------------------------------------------------

    def attr_dict(self) -> list[_Attr]:
        self.expect("{", " to open the attributes")
        attrs = self.comma_list("}", self.attr)
        for i, attr in enumerate(attrs):
            if any(a.name == attr.name for a in attrs[:i]):
                raise self.error(attr.key, f"duplicate attribute '{attr.name}'")
        return attrs

    def attr(self) -> _Attr:
        key = self.next()
        if key.kind not in ("bare", "string"):
            raise self.error(key, f"expected an attribute name, found {describe(key)}")
        has_value = self.accept("=") is not None
        start = self.peek()
        value = self.attr_value() if has_value else True  # a unit attribute: present means true
        return _Attr(self.string(key) if key.kind == "string" else key.text, key, start, value)

    def attr_value(self) -> AttrValue:
        """An attribute value, its Python form chosen by its syntax (see printer.format_attr)."""
        tok = self.peek()
        if tok.kind == "string":
            return self.string(self.next())
        if tok.kind == "number":
            return self.number_attr()
        if tok.kind == "bare" and tok.text in ("true", "false"):
            return self.next().text == "true"
        if tok.kind == "bare" and tok.text in _DTYPES:
            return _DTYPES[self.next().text]
        if tok.kind == "bare" and tok.text == "array":
            return self.int_array()
        if tok.kind == "bare" and tok.text == "dense":
            return self.dense()
        forms = '3 : i64, 2.5 : f64, true, "text", f32, array<i64: ...> or dense<...>'
        raise self.error(tok, f"expected an attribute value ({forms}), found {describe(tok)}")

    def number_attr(self) -> int | float:
        tok = self.next()
        dtype = DType.f64 if "." in tok.text else DType.i64  # MLIR's defaults for an untyped literal
        if self.accept(":"):
            type_tok = self.expect_kind("bare", "a scalar type like i64 or f64")
            if type_tok.text not in _DTYPES or type_tok.text == "i1":
                raise self.error(type_tok, f"expected i32, i64, f32 or f64, found '{type_tok.text}'")
            dtype = _DTYPES[type_tok.text]
        if dtype.is_float:
            bits = self.float_bits(tok, dtype)
            return float(np.array([bits], f"u{dtype.itemsize}").view(dtype.np)[0])
        return self.int_element(tok, dtype)

    def int_array(self) -> tuple[int, ...]:
        self.next()
        self.expect("<", " after 'array'")
        element = self.expect_kind("bare", "i64 as the array's element type")
        if element.text not in ("i32", "i64"):
            raise self.error(element, f"expected i64 as the array's element type, found '{element.text}'")
        values = [self.int_element(self.next(), _DTYPES[element.text])] if self.accept(":") else []
        while values and self.accept(","):
            values.append(self.int_element(self.next(), _DTYPES[element.text]))
        self.expect(">", " to close the array")
        return tuple(values)

    def dense(self) -> np.ndarray:
        self.next()
        self.expect("<", " after 'dense'")
        body: _DenseList | Token | None = None
        if self.at("["):
            body = self.dense_list(0)
        elif not self.at(">"):
            body = self.next()
        self.expect(">", " to close the dense literal")
        self.expect(":", " and the dense literal's type")
        ttype, tok = self.type()
        if tok.text.startswith("memref"):
            raise self.error(tok, f"expected a tensor type for a dense literal, found {tok.text}")
        if body is None:
            if ttype.size:
                raise self.error(tok, f"dense<> has no elements, but {ttype} has {ttype.size}")
            return np.zeros(ttype.shape, ttype.dtype.np)
        if isinstance(body, Token):  # a splat: one value for every element
            return np.broadcast_to(self.elements([body], ttype.dtype).reshape(()), ttype.shape).copy()
        shape = self.dense_shape(body)
        if shape != ttype.shape:
            raise self.error(
                body.open, f"the dense literal has shape {shape}, but its type {ttype} has {ttype.shape}"
            )
        return self.elements(_flatten(body), ttype.dtype).reshape(shape)

    def dense_list(self, depth: int) -> _DenseList:
        node = _DenseList(self.expect("["), [])
        if depth > _MAX_DENSE_DEPTH:
            raise self.error(node.open, f"expected at most {_MAX_DENSE_DEPTH} nested '[' in a dense literal")
        node.items.extend(
            self.comma_list("]", lambda: self.dense_list(depth + 1) if self.at("[") else self.next())
        )
        return node

    def dense_shape(self, node: _DenseList) -> tuple[int, ...]:
        subs = [self.dense_shape(item) if isinstance(item, _DenseList) else None for item in node.items]
        if any(s != subs[0] for s in subs):
            raise self.error(node.open, "expected every element of a dense list to have the same shape")
        return (len(subs),) + (subs[0] or ()) if subs else (0,)

    def elements(self, toks: list[Token], dtype: DType) -> np.ndarray:
        """Element tokens as a 1-d ``dtype`` array; floats go through their bits to keep NaN payloads."""
        if dtype.is_float:
            return np.array([self.float_bits(t, dtype) for t in toks], f"u{dtype.itemsize}").view(dtype.np)
        if dtype.is_bool:
            for tok in toks:
                if tok.text not in ("true", "false") or tok.kind != "bare":
                    raise self.error(tok, f"expected true or false for an i1 element, found {describe(tok)}")
            return np.array([tok.text == "true" for tok in toks], np.bool_)
        return np.array([self.int_element(tok, dtype) for tok in toks], dtype.np)

    def float_bits(self, tok: Token, dtype: DType) -> int:
        """The bit pattern of a float literal: a decimal like ``1.5e-3`` or hex bits like ``0x7FC00000``."""
        width = 8 * dtype.itemsize
        if tok.kind == "number" and "0x" in tok.text:
            bits = int(tok.text, 16)
            if not 0 <= bits < 1 << width:
                raise self.error(
                    tok, f"expected hex float bits that fit the {width} bits of {dtype}, found {tok.text}"
                )
            return bits
        if tok.kind != "number" or "." not in tok.text:
            hint = " (add '.0' to make it a float)" if tok.kind == "number" else ""
            raise self.error(
                tok, f"expected a float like 1.0 or 0x7FC00000 for {dtype}, found {describe(tok)}{hint}"
            )
        value = float(tok.text)
        with np.errstate(over="ignore"):
            typed = np.array([value]).astype(dtype.np)
        if np.isfinite(value) and not np.isfinite(typed[0]):
            raise self.error(tok, f"{tok.text} is out of range for {dtype}")
        return int(typed.view(f"u{dtype.itemsize}")[0])

    def int_element(self, tok: Token, dtype: DType) -> int:
        if tok.kind != "number" or "." in tok.text:
            raise self.error(tok, f"expected an integer for {dtype}, found {describe(tok)}")
        value = int(tok.text, 16 if "0x" in tok.text else 10)
        info = np.iinfo(dtype.np)
        if not info.min <= value <= info.max:
            raise self.error(tok, f"{tok.text} is out of range for {dtype} [{info.min}, {info.max}]")
        return value


def _arg_names(params: list[_Param]) -> tuple[str, ...]:
    """Names up to the last named argument, as the printer reads ``arg_names`` (missing means unnamed)."""
    names = [p.name for p in params]
    while names and not names[-1]:
        names.pop()
    return tuple(names)


def _arg_locs(locs: list[Location | None]) -> tuple[Location, ...]:
    """The printer writes locations for a prefix of the arguments; a gap inside it becomes unknown."""
    while locs and locs[-1] is None:
        locs.pop()
    return tuple(loc or UNKNOWN_LOC for loc in locs)


def _flatten(node: _DenseList) -> list[Token]:
    out: list[Token] = []
    for item in node.items:
        out.extend(_flatten(item) if isinstance(item, _DenseList) else [item])
    return out
