"""The MLIR text form: print -> parse -> print is the identity, and bad text fails at the right place.

``ROUND_TRIP_CASES`` (also used by the verifier and mlir-opt tests) holds at least one op of every
primitive in the registry, every dtype, 0-d tensors, NaN/inf/-0.0 constants, escaped strings and
multi-function modules. A primitive added to the registry without a row in ``PRIM_CASES`` fails here.
"""

from __future__ import annotations

import random
from typing import Any, NamedTuple

import numpy as np
import pytest
from test_ir_regions import region_functions

from compiler.ir.core import UNKNOWN_LOC, Block, Function, Location, Op, Value, attr_key
from compiler.ir.parser import parse_function, parse_module
from compiler.ir.printer import print_function, print_module
from compiler.ir.types import DType, TensorType
from compiler.ir.verify import verify
from compiler.prims import REGISTRY
from runtime.errors import IRParseError

F32, F64, I32, I64, I1 = DType.f32, DType.f64, DType.i32, DType.i64, DType.i1
LOC = Location("/home/user/model.py", 12, 5)


def T(*shape: int, dtype: DType = F32) -> TensorType:  # noqa: N802 (reads like a type)
    return TensorType(tuple(shape), dtype)


Case = tuple[tuple[TensorType, ...], dict[str, Any]]  # one op instance: operand types, attributes
CAST_PAIRS = [(F32, I32), (F64, F32), (I32, F64), (I64, I1), (I1, F64), (F32, I64)]  # every dtype in and out
CASTS: list[Case] = [((T(3, dtype=src),), {"dtype": dst}) for src, dst in CAST_PAIRS]
SLICE = {"start": (3, 0), "limit": (-1, 2), "stride": (-2, 1)}

PRIM_CASES: dict[str, list[Case]] = {
    **{
        name: [((T(2, 3),), {}), ((T(dtype=F64),), {})]
        for name in ("exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "tanh", "erf", "erfc")
        + ("logistic", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "log2", "log10")
        + ("cbrt",)
    },
    **{
        name: [((T(2, 3), T(2, 3)), {}), ((T(5, dtype=F64),) * 2, {})]
        for name in ("atan2", "hypot", "copysign")
    },
    **{name: [((T(4, dtype=I32),), {}), ((T(dtype=F64),), {})] for name in ("neg", "abs", "sign")},
    "floor": [((T(2, 3),), {}), ((T(dtype=F64),), {})],
    "fmod": [
        ((T(2, 3), T(2, 3)), {}),
        ((T(5, dtype=F64), T(5, dtype=F64)), {}),
        ((T(4, dtype=I32),) * 2, {}),
    ],
    **{
        name: [((T(2, 3), T(2, 3)), {}), ((T(5, dtype=I64), T(5, dtype=I64)), {})]
        for name in ("add", "sub", "mul", "div", "pow", "max", "min")
    },
    **{
        name: [((T(3, dtype=F64), T(3, dtype=F64)), {}), ((T(dtype=I32), T(dtype=I32)), {})]
        for name in ("eq", "ne", "lt", "le", "gt", "ge")
    },
    **{
        name: [((T(2, dtype=I1), T(2, dtype=I1)), {}), ((T(3, dtype=I32), T(3, dtype=I32)), {})]
        for name in ("and", "or", "xor")
    },
    "not": [((T(dtype=I1),), {}), ((T(4, dtype=I64),), {})],
    **{
        name: [((T(4, dtype=I32),) * 2, {}), ((T(dtype=I64),) * 2, {})]
        for name in ("shift_left", "shift_right")
    },
    "select": [((T(2, 2, dtype=I1), T(2, 2), T(2, 2)), {})],
    "cast": CASTS,
    "copy": [((T(2, dtype=I1),), {}), ((T(dtype=I64),), {})],
    "stop_gradient": [((T(2, 3),), {})],
    "reduce_sum": [((T(2, 3, 4),), {"axes": (0, 2)}), ((T(3, dtype=I32),), {"axes": ()})],
    "reduce_max": [((T(2, 3),), {"axes": (1,)}), ((T(2, dtype=I1),), {"axes": (0,)})],
    "reduce_min": [((T(2, 3, dtype=F64),), {"axes": (0, 1)})],
    "matmul": [((T(2, 3), T(3, 4)), {}), ((T(5, 2, 3, dtype=I64), T(5, 3, 1, dtype=I64)), {})],
    "broadcast": [((T(3),), {"shape": (2, 3)}), ((T(dtype=I1),), {"shape": (4,)})],
    "reshape": [((T(2, 3),), {"shape": (3, 2)}), ((T(1, dtype=F64),), {"shape": ()})],
    "transpose": [((T(2, 3, 4),), {"perm": (2, 0, 1)})],
    "slice": [((T(4, 2, dtype=I64),), SLICE)],
    "pad": [((T(2, 3), T()), {"low": (1, 0), "high": (0, 2)})],
    "concatenate": [((T(2, 3), T(2, 1), T(2, 0)), {"axis": 1}), ((T(3, dtype=I32),), {"axis": 0})],
    "update_slice": [((T(4, 2, dtype=I64), T(2, 2, dtype=I64)), SLICE)],
    "dynamic_slice": [((T(4, 5), T(dtype=I64), T(dtype=I32)), {"sizes": (2, 5)})],
    "dynamic_update_slice": [((T(4, 5, dtype=I1), T(2, 5, dtype=I1), T(dtype=I32), T(dtype=I64)), {})],
    "gather": [((T(4, 5), T(2, 3, dtype=I32)), {"axis": 1}), ((T(3, dtype=I1), T(dtype=I64)), {"axis": 0})],
    "scatter_add": [((T(4, 5), T(4, 2, 3), T(2, 3, dtype=I32)), {"axis": 1})],
    "scatter": [((T(4, 5, dtype=I64), T(2, 5, dtype=I64), T(2, dtype=I64)), {"axis": 0})],
    "cumulative_sum": [
        ((T(2, 3, 4),), {"axis": 1, "reverse": False}),
        ((T(5, dtype=I64),), {"axis": 0, "reverse": True}),
    ],
    "cumulative_prod": [
        ((T(3, 2, dtype=F64),), {"axis": 0, "reverse": True}),
        ((T(4, dtype=I32),), {"axis": 0, "reverse": False}),
    ],
    "scatter_mul": [((T(4, 5), T(4, 2), T(2, dtype=I32)), {"axis": 1})],
    "scatter_max": [((T(4, 5, dtype=I32), T(3, 5, dtype=I32), T(3, dtype=I64)), {"axis": 0})],
    "scatter_min": [((T(4, 5), T(3, 5), T(3, dtype=I64)), {"axis": 0})],
    "constant": [((), {"value": np.arange(6, dtype=np.float32).reshape(2, 3)})],
    "random_bits": [((T(2, dtype=I64),), {"shape": (3, 2)}), ((T(3, 2, dtype=I64),), {"shape": (2,)})],
    "iota": [
        ((), {"shape": (4, 2), "dimension": 1, "dtype": I64}),
        ((), {"shape": (3,), "dimension": 0, "dtype": F32}),
    ],
}


def one_op_function(name: str, operand_types: tuple[TensorType, ...], attrs: dict[str, Any]) -> Function:
    args = tuple(Value(t) for t in operand_types)
    op = Op.create(REGISTRY[name], args, attrs, LOC)
    names = tuple(f"x{i}" for i in range(len(args)))
    return Function(f"{name}_case", Block(args, (op,), op.results), names, {}, (LOC,) * len(args))


def constants_function(name: str, arrays: list[np.ndarray], loc: Location = LOC) -> Function:
    ops = tuple(Op.create(REGISTRY["constant"], [], {"value": a}, loc) for a in arrays)
    return Function(name, Block((), ops, tuple(op.result for op in ops)))


def _f32_bits(*bits: int) -> np.ndarray:
    return np.array(bits, np.uint32).view(np.float32)


SPECIAL_F32 = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45, 3.4028235e38, 1e-5, 0.1, -2.5], np.float32)
SPECIAL_F64 = np.array([np.nan, -np.inf, -0.0, 5e-324, 1.7976931348623157e308, 0.1, 1 / 3, -1e-300])


def _chain() -> Function:
    """A small realistic function: broadcast, add, reduce, with names and a write-back."""
    x, y = Value(T(2, 3)), Value(T(3))
    b = Op.create(REGISTRY["broadcast"], [y], {"shape": (2, 3)}, LOC)
    s = Op.create(REGISTRY["add"], [x, b.result], {}, Location("/home/user/model.py", 13, 9))
    r = Op.create(REGISTRY["reduce_sum"], [s.result], {"axes": (0,)}, LOC)
    attrs = {"dsl.writeback": (1,)}
    return Function("step", Block((x, y), (b, s, r), (s.result, r.result)), ("x", "y"), attrs, (LOC, LOC))


def _bufferized() -> Function:
    x = Value(T(4))
    e = Op.create(REGISTRY["exp"], [x], {"dsl.offset": 0, "dsl.reuses": 0}, LOC)
    n = Op.create(REGISTRY["neg"], [e.result], {"dsl.offset": 64}, LOC)
    return Function("buf", Block((x,), (e, n), (n.result,)), ("x",), {"dsl.bufferized": True}, (LOC,))


def _discardable_attrs() -> Function:
    """Every syntactic form of attribute on a function and an op, read back by its syntax alone."""
    forms = {
        "dsl.note": 'say "hi"\\\n\tnow',
        "dsl.scale": -2.5,
        "dsl.nan": float("nan"),
        "dsl.neg_zero": -0.0,
        "dsl.big": -(2**63),
        "dsl.flag": False,
        "dsl.axes": (-1, 0, 7),
        "dsl.empty": (),
        "dsl.dtype": I1,
        "dsl.table": np.array([[1, -2]], np.int32),
    }
    x = Value(T(2))
    op = Op.create(REGISTRY["copy"], [x], forms, UNKNOWN_LOC)
    return Function("attrs", Block((x,), (op,), (op.result,)), (), forms)


def _escaped_names() -> Function:
    odd = Location('dir with "quotes"\\and\\backslash/é\tx\ny\vz.py', 1, 0)
    x = Value(T(dtype=I64))
    op = Op.create(REGISTRY["neg"], [x], {}, odd)
    return Function("<lambda>", Block((x,), (op,), (op.result,)), ('na"me\\',), {}, (odd,))


def _empty_function() -> Function:
    return Function("nothing", Block((), (), ()))


def _gap_in_names() -> Function:
    a, b, c = Value(T(2)), Value(T(2)), Value(T(2))
    op = Op.create(REGISTRY["add"], [a, c], {}, LOC)
    return Function("gaps", Block((a, b, c), (op,), (op.result, b)), ("", "b"), {}, (LOC,))


ROUND_TRIP_CASES: dict[str, list[Function]] = {
    **{
        f"{name}-{i}": [one_op_function(name, types, attrs)]
        for name, variants in PRIM_CASES.items()
        for i, (types, attrs) in enumerate(variants)
    },
    "constants-f32-special": [
        constants_function("c", [SPECIAL_F32, SPECIAL_F32[:1].reshape(()), _f32_bits(0x7FC00001, 0x7F800001)])
    ],
    "constants-f64-special": [
        constants_function("c", [SPECIAL_F64, np.array(-0.0), np.full((2, 2), np.inf)])
    ],
    "constants-ints": [
        constants_function(
            "c",
            [
                np.array([[-(2**31), 2**31 - 1], [-7, 0]], np.int32),
                np.array([-(2**63), 2**63 - 1, -1], np.int64),
                np.full((3,), -5, np.int64),
                np.array(7, np.int32),
            ],
        )
    ],
    "constants-bool": [
        constants_function(
            "c", [np.array([[True, False], [False, True]]), np.ones((2,), bool), np.array(False)]
        )
    ],
    "constants-empty": [
        constants_function(
            "c", [np.zeros((0, 3), np.float32), np.zeros((0,), np.int64), np.zeros((2, 0), bool)]
        )
    ],
    "constants-unknown-loc": [constants_function("c", [np.array([1.5, 2.0])], UNKNOWN_LOC)],
    "chain-with-writeback": [_chain()],
    "bufferized": [_bufferized()],
    "discardable-attrs": [_discardable_attrs()],
    "escaped-strings": [_escaped_names()],
    "empty-function": [_empty_function()],
    "arg-names-and-locs-with-gaps": [_gap_in_names()],
    "several-functions": [_chain(), one_op_function("matmul", (T(2, 3), T(3, 4)), {}), _empty_function()],
    "regions": region_functions(),  # for, while, if, scan (nested)
}


def _same(a: Function, b: Function) -> None:
    """Structural equality, beyond the text: bit-exact attributes, types and locations."""
    assert (a.name, a.arg_names, a.arg_locs) == (b.name, b.arg_names, b.arg_locs)
    assert {k: attr_key(v) for k, v in a.attrs.items()} == {k: attr_key(v) for k, v in b.attrs.items()}
    assert [v.type for v in a.params] == [v.type for v in b.params]
    assert [v.type for v in a.results] == [v.type for v in b.results]
    for x, y in zip(a.ops, b.ops, strict=True):
        assert (x.prim, x.loc) == (y.prim, y.loc)
        assert {k: attr_key(v) for k, v in x.attrs.items()} == {k: attr_key(v) for k, v in y.attrs.items()}
        assert [v.type for v in x.results] == [v.type for v in y.results]


def test_every_primitive_has_a_round_trip_case() -> None:
    covered = {op.prim.name for funcs in ROUND_TRIP_CASES.values() for f in funcs for op in f.ops}
    assert set(REGISTRY) - covered == set(), "add a PRIM_CASES row for these primitives"


def test_every_dtype_is_covered() -> None:
    seen = {
        v.type.dtype for funcs in ROUND_TRIP_CASES.values() for f in funcs for op in f.ops for v in op.results
    }
    assert seen == set(DType)


@pytest.mark.parametrize("case", sorted(ROUND_TRIP_CASES))
def test_round_trip_is_identity(case: str) -> None:
    funcs = ROUND_TRIP_CASES[case]
    text = print_module(funcs)
    parsed = parse_module(text, "case.mlir")
    assert print_module(parsed) == text
    for original, back in zip(funcs, parsed, strict=True):
        _same(original, back)
        verify(back)


def test_parse_function_reads_print_function() -> None:
    func = _chain()
    assert print_function(parse_function(print_function(func))) == print_function(func)


def test_random_float_bits_survive() -> None:
    rng = np.random.default_rng(0)
    for dtype, width in ((np.float32, np.uint32), (np.float64, np.uint64)):
        bits = rng.integers(0, np.iinfo(width).max, size=500, dtype=width, endpoint=True)
        value = bits.view(dtype).reshape(20, 25)
        (back,) = parse_function(print_function(constants_function("c", [value]))).ops
        assert back.attrs["value"].tobytes() == value.tobytes()


HAND_WRITTEN = """
// A hand-written function: no module, any value names, comments, missing and unknown locations.
func.func @g(%x: tensor<2xf32>, %y: tensor<2xf32> {dsl.name = "y"}) -> (tensor<2xf32>, tensor<2xi1>) {
  %sum = "dsl.add"(%x, %y) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>   // no loc
  %c:1 = "dsl.constant"() {value = dense<[1., 2.5e+00]> : tensor<2xf32>, dsl.marked}
      : () -> (tensor<2xf32>) loc(unknown)
  %lt = "dsl.lt"(%sum, %c#0) {} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1> loc("g.py":4:2)
  func.return %sum, %lt : tensor<2xf32>, tensor<2xi1>
}
func.func @"h"() {
  return
}
"""


def test_hand_written_variations() -> None:
    g, h = parse_module(HAND_WRITTEN)
    assert (g.name, h.name, g.arg_names, g.arg_locs) == ("g", "h", ("", "y"), ())
    add, const, lt = g.ops
    assert add.loc == UNKNOWN_LOC and const.loc == UNKNOWN_LOC and lt.loc == Location("g.py", 4, 2)
    assert const.attrs["dsl.marked"] is True
    assert const.attrs["value"].tolist() == [1.0, 2.5]
    assert lt.operands == (add.result, const.result)
    assert g.results == (add.result, lt.result)
    verify(g)
    assert print_module([g, h]) == print_module(parse_module(print_module([g, h])))


class Bad(NamedTuple):
    text: str
    marker: str  # the error points at the first occurrence of this ...
    message: str  # ... and its message contains this
    after: str = ""  # look for the marker after this text


def fn(*lines: str, ret: str = "return %arg0 : tensor<2xf32>", attrs: str = "", mem: str = "tensor") -> str:
    head = f"func.func @f(%arg0: {mem}<2xf32>, %arg1: {mem}<3xf32>) -> {mem}<2xf32>{attrs} {{\n"
    return head + "".join(f"  {line}\n" for line in lines) + f"  {ret}\n}}\n"


NEG = '"dsl.neg"(%arg0) : (tensor<2xf32>) -> tensor<2xf32>'
BAD_TEXT: dict[str, Bad] = {
    "unknown-op": Bad(
        fn('%0 = "dsl.nope"(%arg0) : (tensor<2xf32>) -> tensor<2xf32>'),
        '"dsl.nope"',
        "'nope' is not a dslc primitive",
    ),
    "misspelled-op": Bad(
        fn('%0 = "dsl.ad"(%arg0, %arg0) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>'),
        '"dsl.ad"',
        '"dsl.add"?)',
    ),
    "other-dialect": Bad(
        fn('%0 = "arith.addf"(%arg0) : (tensor<2xf32>) -> tensor<2xf32>'),
        '"arith',
        "expected a dslc primitive",
    ),
    "unknown-attribute": Bad(
        fn(f"%0 = {NEG}".replace(") :", ") {axis = 1 : i64} :")), "axis", "dsl.neg has no attribute 'axis'"
    ),
    "missing-attribute": Bad(
        fn('%0 = "dsl.reduce_sum"(%arg0) : (tensor<2xf32>) -> tensor<f32>'),
        '"dsl.reduce_sum"',
        "needs attribute 'axes'",
    ),
    "attribute-kind": Bad(
        fn('%0 = "dsl.reduce_sum"(%arg0) {axes = 0 : i64} : (tensor<2xf32>) -> tensor<f32>'),
        "0 : i64",
        "must be an integer array",
    ),
    "shape-rule": Bad(
        fn('%0 = "dsl.add"(%arg0, %arg1) : (tensor<2xf32>, tensor<3xf32>) -> tensor<2xf32>'),
        '"dsl.add"',
        "operand shapes differ",
    ),
    "arity": Bad(
        fn('%0 = "dsl.add"(%arg0) : (tensor<2xf32>) -> tensor<2xf32>'),
        '"dsl.add"',
        "add takes 2 operands, got 1",
    ),
    "undefined-value": Bad(fn(f"%0 = {NEG}".replace("(%arg0)", "(%5)")), "%5", "use of undefined value %5"),
    "redefinition": Bad(fn(f"%0 = {NEG}", f"%0 = {NEG}"), "%0", "redefinition of value %0", after="\n  %0"),
    "redefined-argument": Bad(
        "func.func @f(%a: tensor<f32>, %a: tensor<f32>) {\n  return\n}",
        "%a",
        "redefinition of value %a",
        after="%a:",
    ),
    "result-type": Bad(
        fn('%0 = "dsl.neg"(%arg0) : (tensor<2xf32>) -> tensor<2xf64>'),
        "tensor<2xf64>",
        "does not match tensor<2xf32> inferred for dsl.neg",
    ),
    "result-count": Bad(
        fn('%0:2 = "dsl.neg"(%arg0) : (tensor<2xf32>) -> tensor<2xf32>'),
        "%0",
        "has 1 results, but the text names 2",
    ),
    "operand-type": Bad(
        fn('%0 = "dsl.neg"(%arg1) : (tensor<2xf32>) -> tensor<2xf32>'),
        "tensor<2xf32>",
        "operand %arg1 has type tensor<3xf32>",
        after="neg",
    ),
    "result-index": Bad(
        fn(f"%0 = {NEG}", ret="return %0#1 : tensor<2xf32>"),
        "%0#1",
        "%0 has 1 results, so %0#1 does not exist",
    ),
    "return-vs-signature": Bad(
        fn(ret="return %arg1 : tensor<3xf32>"),
        "tensor<3xf32>",
        "does not match the function's result type tensor<2xf32>",
        after="return",
    ),
    "return-vs-value": Bad(
        fn(ret="return %arg1 : tensor<2xf32>"),
        "tensor<2xf32>",
        "does not match the value's type tensor<3xf32>",
        after="return",
    ),
    "return-count": Bad(fn(ret="return"), "return", "return has 0 value(s) and 0 type(s); expected 1"),
    # at the '}' in its place, not at the end of the line before it (was 1:17, then 6:122 after an op)
    "missing-return": Bad("func.func @f() {\n}\n", "}", "expected an op like", after="{"),
    "missing-return-after-op": Bad(
        fn(f'%0 = {NEG} loc("f.py":2:5)', ret=""),
        "}",
        "expected an op like %0 = \"dsl.add\"(...) or 'return', found '}'",
    ),
    "truncated": Bad(
        fn(ret="return %arg0 : tensor<2xf32>")[:-3],
        "",
        "expected '}'",
        after="return %arg0 : tensor<2xf32>",  # just after the last token
    ),
    "missing-paren": Bad(
        fn('%0 = "dsl.neg"(%arg0 : (tensor<2xf32>) -> tensor<2xf32>'),
        ": (",
        "expected ',' or ')', found ':'",
    ),
    "unterminated-string": Bad(fn(f'%0 = {NEG} loc("x.py:1:1)'), '"x.py', "unterminated string"),
    "bad-escape": Bad(fn(f'%0 = {NEG} loc("a\\qb":1:1)'), "\\q", "unknown escape"),
    "unexpected-character": Bad(fn("%0 = $"), "$", "unexpected character '$'"),
    "element-type": Bad(
        fn('%0 = "dsl.neg"(%arg0) : (tensor<2xf16>) -> tensor<2xf32>'),
        "f16",
        "expected a static dimension or an element type",
    ),
    "dynamic-dim": Bad(
        fn('%0 = "dsl.neg"(%arg0) : (tensor<?xf32>) -> tensor<2xf32>'), "?xf32", "found '?xf32'"
    ),
    "unclosed-type": Bad(
        fn('%0 = "dsl.neg"(%arg0) : (tensor<2xf32) -> tensor<2xf32>'),
        ") ->",
        "expected '>' to close tensor<2xf32",
        after="neg",
    ),
    "memref-not-bufferized": Bad(
        fn(mem="memref"), "memref<2xf32>", "memref needs the dsl.bufferized attribute"
    ),
    "tensor-in-bufferized": Bad(
        fn(attrs=" attributes {dsl.bufferized}"),
        "tensor<2xf32>",
        "expected a memref type in a dsl.bufferized function",
    ),
    "dense-shape": Bad(
        fn('%0 = "dsl.constant"() {value = dense<[1.0, 2.0]> : tensor<3xf32>} : () -> tensor<3xf32>'),
        "[1.0",
        "has shape (2,), but its type",
    ),
    "dense-ragged": Bad(
        fn('%0 = "dsl.constant"() {value = dense<[[1.0], 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>'),
        "[[",
        "same shape",
    ),
    "dense-int-for-float": Bad(
        fn('%0 = "dsl.constant"() {value = dense<1> : tensor<f32>} : () -> tensor<f32>'), "1>", "add '.0'"
    ),
    "dense-int-range": Bad(
        fn('%0 = "dsl.constant"() {value = dense<3000000000> : tensor<i32>} : () -> tensor<i32>'),
        "3000000000",
        "out of range for i32",
    ),
    "dense-f32-range": Bad(
        fn('%0 = "dsl.constant"() {value = dense<1.0e+39> : tensor<f32>} : () -> tensor<f32>'),
        "1.0e+39",
        "out of range for f32",
    ),
    "dense-hex-width": Bad(
        fn('%0 = "dsl.constant"() {value = dense<0x7FF8000000000000> : tensor<f32>} : () -> tensor<f32>'),
        "0x7FF8",
        "expected hex float bits that fit the 32 bits of f32",
    ),
    "dense-bool": Bad(
        fn('%0 = "dsl.constant"() {value = dense<1> : tensor<i1>} : () -> tensor<i1>'),
        "1>",
        "expected true or false",
    ),
    "duplicate-attribute": Bad(
        fn('%0 = "dsl.iota"() {dimension = 0 : i64, dimension = 0 : i64} : () -> tensor<2xf32>'),
        "dimension",
        "duplicate attribute 'dimension'",
        after="i64,",
    ),
    "attribute-value": Bad(
        fn('%0 = "dsl.iota"() {dimension = foo} : () -> tensor<2xf32>'), "foo", "expected an attribute value"
    ),
    "arg-attribute": Bad(
        "func.func @f(%a: tensor<f32> {dsl.other = 1 : i64}) {\n  return\n}", "dsl.other", "dsl.name"
    ),
    "junk-after-module": Bad("module {\n}\nfunc.func", "func.func", "expected end of input after the module"),
    "junk-at-top": Bad('"dsl.neg"()', '"dsl.neg"', "expected 'func.func' or 'module'"),
    "duplicate-function": Bad(
        "func.func @f() {\n  return\n}\nfunc.func @f() {\n  return\n}",
        "func.func",
        "redefinition of function @f",
        after="}",
    ),
    "bad-symbol": Bad("func.func @<lambda>() {\n  return\n}", "@<", "expected a symbol name"),
    "loc-form": Bad(fn(f"%0 = {NEG} loc(#loc3)"), "#loc3", "aliases (#name) are not supported"),
    "raw-vertical-tab": Bad(fn(f'%0 = {NEG} loc("a\vb":1:1)'), "\v", "raw control character"),
}


def _position(bad: Bad) -> tuple[int, int]:
    offset = bad.text.index(bad.marker, bad.text.index(bad.after) + len(bad.after) if bad.after else 0)
    return bad.text.count("\n", 0, offset) + 1, offset - (bad.text.rfind("\n", 0, offset) + 1) + 1


@pytest.mark.parametrize("case", sorted(BAD_TEXT))
def test_parse_error_position_and_message(case: str) -> None:
    bad = BAD_TEXT[case]
    with pytest.raises(IRParseError) as info:
        parse_module(bad.text, "bad.mlir")
    assert bad.message in str(info.value)
    assert (info.value.line, info.value.col) == _position(bad), str(info.value)
    assert str(info.value).startswith(f"bad.mlir:{info.value.line}:{info.value.col}: ")


def test_parse_function_needs_exactly_one() -> None:
    two = "func.func @f() {\n  return\n}\nfunc.func @g() {\n  return\n}\n"
    with pytest.raises(IRParseError, match="exactly one function, found 2") as info:
        parse_function(two)
    assert (info.value.line, info.value.col) == (4, 1)
    with pytest.raises(IRParseError, match="found 0"):
        parse_function("module {\n}\n")


def _mutations(text: str, count: int) -> list[str]:
    rng = random.Random(1)
    alphabet = list('%@"<>(){}[],:=-#x0123456789.e \n') + ["tensor<", "dense<", "loc(", "//", "\\"]
    out = []
    for _ in range(count):
        i = rng.randrange(len(text))
        j = i + rng.randrange(0, 4)
        out.append(text[:i] + rng.choice(alphabet + [""]) + text[j:])
    return out


def test_damaged_text_fails_only_with_parse_errors() -> None:
    """No KeyError or IndexError escapes: every prefix and many random edits parse or raise IRParseError."""
    text = print_module([_chain(), _discardable_attrs()])
    damaged = [text[:n] for n in range(len(text))] + _mutations(text, 2000)
    for candidate in damaged:
        try:
            parse_module(candidate)
        except IRParseError:
            pass
