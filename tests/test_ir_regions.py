"""Region ops (compiler/prims/control.py) in the IR: built by hand, printed, parsed back, verified,
accepted by mlir-opt, run by the interpreter, exported to ``scf`` and unrolled.

``region_functions()`` are also round-trip cases of tests/test_ir_parser.py (so tests/test_ir_mlir_opt.py
checks that mlir-opt accepts them and that its own printing parses back).
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from mlir_tools import check_with_mlir_opt, mlir_opt_or_skip

from compiler.codegen.mlir_export import ONE_SHOT_BUFFERIZE, export_module
from compiler.interpreter import interpret
from compiler.ir.core import Block, Function, Location, Op, Value
from compiler.ir.parser import parse_function
from compiler.ir.printer import print_function
from compiler.ir.types import DType, TensorType
from compiler.ir.verify import verify
from compiler.passes.regions import close_regions
from compiler.passes.regions_unroll import free_values, unroll_regions
from compiler.prims import CONTROL, REGISTRY
from runtime.errors import IRParseError, VerificationError

LOC = Location("model.py", 7, 5)
VEC = TensorType((4,), DType.f64)
MAT = TensorType((3, 4), DType.f64)
I64 = TensorType((), DType.i64)
F64 = TensorType((), DType.f64)
BOOL = TensorType((), DType.i1)


def mlir_opt(text: str, *flags: str) -> str:
    """Plain ``mlir-opt`` (no unregistered dialect) on ``text``; its output, asserting success."""
    proc = subprocess.run(
        [mlir_opt_or_skip(), *flags], input=text, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, f"mlir-opt {' '.join(flags)} failed:\n{proc.stderr}\n--- input ---\n{text}"
    return proc.stdout


def op(name: str, *operands: Value, regions: tuple[Block, ...] = (), **attrs: object) -> Op:
    return Op.create(REGISTRY[name], list(operands), attrs, LOC, regions)


def const(value: object, dtype: object) -> Op:
    return op("constant", value=np.array(value, dtype=dtype))


def for_function() -> Function:
    """c = x; for i in [lo, hi): c = c * x + broadcast(f64(i)) (reads x from above the loop)."""
    x, lo, hi = Value(VEC), Value(I64), Value(I64)
    i, c = Value(I64), Value(VEC)
    cast = op("cast", i, dtype=DType.f64)
    b = op("broadcast", cast.result, shape=(4,))
    m = op("mul", c, x)
    a = op("add", m.result, b.result)
    loop = op("for", lo, hi, x, regions=(Block((i, c), (cast, b, m, a), (a.result,)),))
    return Function("for_loop", Block((x, lo, hi), (loop,), (loop.result,)), ("x", "lo", "hi"))


def while_function() -> Function:
    """(n, s) = (0, x); while sum(s) < 100: (n, s) = (n + 1, s * 2)."""
    x = Value(VEC)
    zero = const(0, np.int64)
    n0, s0 = Value(I64), Value(VEC)
    total = op("reduce_sum", s0, axes=(0,))
    limit = const(100.0, np.float64)
    less = op("lt", total.result, limit.result)
    cond = Block((n0, s0), (total, limit, less), (less.result,))
    n1, s1 = Value(I64), Value(VEC)
    one = const(1, np.int64)
    inc = op("add", n1, one.result)
    two = const(2.0, np.float64)
    b2 = op("broadcast", two.result, shape=(4,))
    dbl = op("mul", s1, b2.result)
    body = Block((n1, s1), (one, inc, two, b2, dbl), (inc.result, dbl.result))
    loop = op("while", zero.result, x, regions=(cond, body))
    return Function("while_loop", Block((x,), (zero, loop), loop.results))


def if_function() -> Function:
    """if p: (x + y, y) else: (x - y, y)   (two results; y passed as an operand)."""
    p, x, y = Value(BOOL), Value(VEC), Value(VEC)
    ta, tb = Value(VEC), Value(VEC)
    add = op("add", ta, tb)
    ea, eb = Value(VEC), Value(VEC)
    sub = op("sub", ea, eb)
    branch = op(
        "if",
        p,
        x,
        y,
        regions=(Block((ta, tb), (add,), (add.result, tb)), Block((ea, eb), (sub,), (sub.result, eb))),
    )
    return Function("branch", Block((p, x, y), (branch,), branch.results))


def scan_function(reverse: bool = False) -> Function:
    """carry c = c + row; y = c * row, over the 3 rows of xs (nested: a for loop inside the body)."""
    init, xs, lo, hi = Value(VEC), Value(MAT), Value(I64), Value(I64)
    c, row = Value(VEC), Value(VEC)
    add = op("add", c, row)
    i, acc = Value(I64), Value(VEC)
    inner_mul = op("mul", acc, row)
    inner = op("for", lo, hi, add.result, regions=(Block((i, acc), (inner_mul,), (inner_mul.result,)),))
    y = op("mul", inner.result, row)
    body = Block((c, row), (add, inner, y), (add.result, y.result))
    loop = op("scan", init, xs, carries=1, length=3, reverse=reverse, regions=(body,))
    return Function(
        "scan_reverse" if reverse else "scan_loop", Block((init, xs, lo, hi), (loop,), loop.results)
    )


def region_functions() -> list[Function]:
    return [for_function(), while_function(), if_function(), scan_function(), scan_function(reverse=True)]


ARGS = {
    "for_loop": [np.arange(4.0) / 4, np.array(1), np.array(4)],
    "while_loop": [np.arange(1.0, 5.0)],
    "branch": [np.array(False), np.arange(4.0), np.full(4, 0.5)],
    "scan_loop": [np.ones(4), np.arange(12.0).reshape(3, 4) / 10, np.array(0), np.array(2)],
}


def reference(name: str, args: list[np.ndarray], reverse: bool = False) -> list[np.ndarray]:
    """The same programs in plain Python."""
    if name == "for_loop":
        x, lo, hi = args
        c = x.copy()
        for i in range(int(lo), int(hi)):
            c = c * x + i
        return [c]
    if name == "while_loop":
        (x,) = args
        n, s = 0, x.copy()
        while s.sum() < 100:
            n, s = n + 1, s * 2
        return [np.array(n), s]
    if name == "branch":
        p, x, y = args
        return [x + y, y] if p else [x - y, y]
    init, xs, lo, hi = args
    c, ys = init.copy(), np.zeros_like(xs)
    for t in reversed(range(3)) if reverse else range(3):
        c = c + xs[t]
        acc = c
        for _ in range(int(lo), int(hi)):
            acc = acc * xs[t]
        ys[t] = acc * xs[t]
    return [c, ys]


def test_every_region_op_is_built_here() -> None:
    assert {op.prim for f in region_functions() for op in f.ops} >= CONTROL


@pytest.mark.parametrize("func", region_functions(), ids=lambda f: f"{f.name}{len(f.ops)}")
def test_print_parse_print_is_the_identity(func: Function) -> None:
    verify(func)
    text = print_function(func)
    assert '"dsl.yield"' in text and "^bb0(" in text
    again = parse_function(text)
    verify(again)
    assert print_function(again) == text


@pytest.mark.parametrize("func", region_functions(), ids=lambda f: f"{f.name}{len(f.ops)}")
def test_mlir_opt_accepts_region_ops(func: Function) -> None:
    check_with_mlir_opt(print_function(func))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("name", sorted(ARGS))
def test_interpreter_runs_regions_and_unrolled_form_agrees(name: str, reverse: bool) -> None:
    func = {f.name: f for f in region_functions()[:3]}.get(name) or scan_function(reverse)
    args = ARGS[name]
    want = reference(name, args, reverse)
    for got, w in zip(interpret(func, args), want, strict=True):
        np.testing.assert_allclose(got, w, rtol=1e-12)
    if name in ("while_loop", "for_loop", "scan_loop"):
        return  # bounds are arguments here: not unrollable (tests/test_control_flow.py unrolls)
    unrolled = unroll_regions(func)
    verify(unrolled)
    assert not any(op.regions for op in unrolled.walk())
    for got, w in zip(interpret(unrolled, args), want, strict=True):
        np.testing.assert_allclose(got, w, rtol=1e-12)


def test_unrolled_for_with_constant_bounds_and_nested_scan() -> None:
    """Constant bounds: unroll_regions copies each body per iteration, nested loops included."""
    func = scan_function()
    lo, hi = const(0, np.int64), const(2, np.int64)
    init, xs, lo_arg, hi_arg = func.params
    (loop,) = func.ops
    body = loop.regions[0]
    inner = body.ops[1]
    new_inner = Op(
        inner.prim, (lo.result, hi.result, *inner.operands[2:]), {}, inner.results, LOC, inner.regions
    )
    new_body = Block(body.args, (body.ops[0], new_inner, body.ops[2]), body.results)
    new_loop = Op(loop.prim, loop.operands, loop.attrs, loop.results, LOC, (new_body,))
    fixed = Function("f", Block((init, xs), (lo, hi, new_loop), func.results))
    verify(fixed)
    args = ARGS["scan_loop"]
    unrolled = unroll_regions(fixed)
    verify(unrolled)
    assert not any(op.regions for op in unrolled.walk())
    for got, w in zip(interpret(unrolled, args[:2]), reference("scan_loop", args), strict=True):
        np.testing.assert_allclose(got, w, rtol=1e-12)


# ---- the verifier -------------------------------------------------------------------------------


def test_verifier_rejects_a_carry_that_changes_type() -> None:
    x, lo, hi = Value(VEC), Value(I64), Value(I64)
    i, c = Value(I64), Value(VEC)
    s = op("reduce_sum", c, axes=(0,))
    bad = Op(REGISTRY["for"], (lo, hi, x), {}, (Value(VEC),), LOC, (Block((i, c), (s,), (s.result,)),))
    func = Function("f", Block((x, lo, hi), (bad,), bad.results))
    with pytest.raises(
        VerificationError,
        match=r'"dsl.for" at model.py:7.*yields \(tensor<f64>\), expected \(tensor<4xf64>\)',
    ):
        verify(func)


def test_verifier_rejects_wrong_block_arguments() -> None:
    x, lo, hi = Value(VEC), Value(I64), Value(I64)
    c = Value(VEC)  # the counter is missing
    bad = Op(REGISTRY["for"], (lo, hi, x), {}, (Value(VEC),), LOC, (Block((c,), (), (c,)),))
    func = Function("f", Block((x, lo, hi), (bad,), bad.results))
    with pytest.raises(
        VerificationError,
        match=r"takes \(tensor<4xf64>\), but the op passes it \(tensor<i64>, tensor<4xf64>\)",
    ):
        verify(func)


def test_verifier_rejects_a_value_of_the_region_read_after_it() -> None:
    func = for_function()
    (loop,) = func.ops
    inner = loop.regions[0].ops[-1].result
    leak = op("neg", inner)
    with pytest.raises(VerificationError, match='"dsl.neg".*operand #0'):
        verify(Function("f", Block(func.params, (loop, leak), (leak.result,))))


def test_verifier_rejects_a_while_condition_that_is_not_a_bool_scalar() -> None:
    x = Value(VEC)
    a, b = Value(VEC), Value(VEC)
    bad = Op(REGISTRY["while"], (x,), {}, (Value(VEC),), LOC, (Block((a,), (), (a,)), Block((b,), (), (b,))))
    with pytest.raises(
        VerificationError, match=r"cond region yields \(tensor<4xf64>\), expected \(tensor<i1>\)"
    ):
        verify(Function("f", Block((x,), (bad,), bad.results)))


def test_parser_reports_a_missing_yield_type() -> None:
    text = print_function(if_function()).replace("-> ()\n", "\n", 1)
    with pytest.raises(IRParseError, match="expected '->'"):
        parse_function(text)


# ---- export to scf --------------------------------------------------------------------------------


@pytest.mark.parametrize("func", region_functions(), ids=lambda f: f"{f.name}{len(f.ops)}")
def test_scf_export_verifies_and_bufferizes(func: Function) -> None:
    text = export_module([func])
    assert "scf." in text and '"dsl.' not in text
    mlir_opt(text)  # plain mlir-opt: no unregistered dialect
    bufferized = mlir_opt(text, ONE_SHOT_BUFFERIZE)
    assert "scf." in bufferized and "tensor<" not in bufferized.split("func.func")[1].split("{", 1)[1]


# ---- closed regions (compiler/passes/regions.py) --------------------------------------------------


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("name", sorted(ARGS))
def test_closed_regions_read_nothing_from_above_and_mean_the_same(name: str, reverse: bool) -> None:
    """close_regions turns each value a body reads from above into an operand (a loop's const):
    the closed program prints, parses back, exports to scf and runs to the same values."""
    func = {f.name: f for f in region_functions()[:3]}.get(name) or scan_function(reverse)
    closed = close_regions(func)
    verify(closed)
    for op in closed.walk():
        for block in op.regions:
            assert not free_values(block), f"{op.prim.name} still reads {free_values(block)} from above"
    text = print_function(closed)
    assert print_function(parse_function(text)) == text
    mlir_opt(export_module([closed]))
    want = reference(name, ARGS[name], reverse)
    for got, w in zip(interpret(closed, ARGS[name]), want, strict=True):
        np.testing.assert_allclose(got, w, rtol=1e-12)
