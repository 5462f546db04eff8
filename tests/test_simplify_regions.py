"""simplify and dce across regions (compiler/passes/simplify.py, dce.py, licm.py) checked for values:
the reference interpreter runs each program's traced IR and the IR after ``close_regions``,
``functionalize`` (DCE) and ``simplify``, and both must agree bit for bit (the rewrites change no
arithmetic: folding uses the primitives' own references, the identities hold under IEEE).

The programs are random and made to meet every rewrite: ``fori_loop``s of 0 to 3 trips (constant
bounds fold), loops nested in loops, bodies that read outer values (invariants to hoist, constants
to fold), carries left unchanged or swapped, carries and scan ys and cond results nobody reads
(dead state), ``cond`` on a constant or on data, ``while_loop``s with a counter or a constant false
condition; and the differential fuzzer's programs that hold loops or branches. The tests/lit files
``dce_regions.mlir`` and ``simplify_regions.mlir`` show each rewrite; their programs run here too,
before and after, and a few targeted cases check that the rewrites happen on traced programs.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import test_fuzz_programs as fuzz
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import dsl
import dsl.numpy as dnp
from compiler.interpreter import interpret
from compiler.ir.core import Function
from compiler.ir.parser import parse_module
from compiler.ir.printer import print_function, print_module
from compiler.ir.verify import verify
from compiler.passes.dce import dce
from compiler.passes.region_parts import take_apart
from compiler.passes.regions import close_regions
from compiler.passes.simplify import simplify
from compiler.pipeline import PASSES_BY_NAME, Options, run_passes
from compiler.prims import control
from dsl.compile import trace_function

PASSES = tuple(PASSES_BY_NAME[name] for name in ("close_regions", "functionalize", "simplify"))
N = 3  # every vector value has shape (N,)
LENGTH = 2  # a scan's rows

UNARY: dict[str, Callable[[Any], Any]] = {
    "sin": dnp.sin,
    "tanh": dnp.tanh,
    "neg": operator.neg,
    "exp": lambda v: dnp.exp(dnp.tanh(v)),
}
BINARY: dict[str, Callable[[Any, Any], Any]] = {"add": operator.add, "sub": operator.sub, "mul": operator.mul}
CONSTANTS = (0.5, -1.5, 2.0, -0.0, 1.0)


# ---- the programs: plans of nested tuples, traced by ``run`` ----------------------------------------
# Each ``sampled_from`` lists the common case first: hypothesis draws (and shrinks towards) it most.


@st.composite
def exprs(draw, scope: int, depth: int = 2) -> tuple:
    """An expression over the ``scope`` values visible (indices), constants, unary and binary ops."""
    kind = draw(st.sampled_from(("ref", "ref", "const", "unary", "binary") if depth else ("ref", "const")))
    if kind == "ref" and scope:
        return ("ref", draw(st.integers(0, scope - 1)))
    if kind in ("ref", "const"):
        return ("const", draw(st.sampled_from(CONSTANTS)))
    if kind == "unary":
        return ("unary", draw(st.sampled_from(sorted(UNARY))), draw(exprs(scope, depth - 1)))
    name = draw(st.sampled_from(sorted(BINARY)))
    return ("binary", name, draw(exprs(scope, depth - 1)), draw(exprs(scope, depth - 1)))


@st.composite
def updates(draw, carries: int, scope: int) -> tuple:
    """One update per carry: None (yielded unchanged), ("swap", j) (carry j as it is), or an
    expression over ``scope`` (body values: outer values first, then the carries and the rest)."""
    out = []
    for _ in range(carries):
        kind = draw(st.sampled_from(("expr", "expr", "expr", "same", "swap")))
        if kind == "same":
            out.append(None)
        elif kind == "swap":
            out.append(("swap", draw(st.integers(0, carries - 1))))
        else:
            out.append(draw(exprs(scope)))
    return tuple(out)


@st.composite
def statements(draw, scope: int, depth: int) -> tuple[tuple, int]:
    """One statement over ``scope`` values; returns it and how many values it adds to the scope.
    ``depth``: how many levels of loops it may still nest."""
    kinds = ("for", "scan", "for", "cond", "while", "let") if depth else ("let", "cond", "let")
    kind = draw(st.sampled_from(kinds))
    if kind == "let":
        return ("let", draw(exprs(scope))), 1
    m = draw(st.integers(1, 3))
    inits = tuple(draw(exprs(scope, 1)) for _ in range(m))
    if kind == "for":
        lower = draw(st.sampled_from((0, 2)))
        trips = draw(st.sampled_from((2, 3, 0, 1)))
        inner, body_scope = draw(bodies(scope + 1 + m, depth - 1))  # the counter, then the carries
        return ("for", lower, lower + trips, inits, inner, draw(updates(m, body_scope))), m
    if kind == "while":
        trips = draw(st.sampled_from((2, 1, 0, None)))  # None: a condition constant false
        return ("while", trips, inits, draw(updates(m, scope + m))), m
    if kind == "scan":
        xs = tuple(draw(exprs(scope, 1)) for _ in range(LENGTH))
        inner, body_scope = draw(bodies(scope + m + 1, depth - 1))  # the carries, then the row
        ys = tuple(draw(exprs(body_scope)) for _ in range(draw(st.integers(1, 2))))
        used = tuple(draw(st.booleans()) for _ in ys)  # the ys the rest of the program reads
        reverse = draw(st.booleans())
        return ("scan", inits, xs, inner, draw(updates(m, body_scope)), ys, used, reverse), m + sum(used)
    operands = m if m < 3 else 2
    pred = draw(st.sampled_from(("data", True, False)))
    if pred == "data":
        pred = ("data", draw(exprs(scope, 1)))
    n_outs = draw(st.integers(1, 2))
    branches = []
    for _ in range(2):
        outs = []
        for _ in range(n_outs):
            if draw(st.booleans()):
                outs.append(("arg", draw(st.integers(0, operands - 1))))
            else:
                outs.append(draw(exprs(scope + operands)))
        branches.append(tuple(outs))
    return ("cond", pred, inits[:operands], tuple(branches)), n_outs


@st.composite
def bodies(draw, scope: int, depth: int) -> tuple[tuple, int]:
    """A loop body's 0-2 statements (loops among them while ``depth`` allows)."""
    out = []
    for _ in range(draw(st.integers(0, 2))):
        statement, added = draw(statements(scope, depth))
        out.append(statement)
        scope += added
    return tuple(out), scope


@st.composite
def plans(draw) -> tuple[tuple, tuple[int, ...]]:
    """Statements over the two inputs, and the values returned: one value of most statements (the
    rest of each statement's values are read by later statements or by nobody)."""
    scope, out, outputs = 2, [], set()
    for _ in range(draw(st.integers(1, 4))):
        statement, added = draw(statements(scope, 2))
        out.append(statement)
        if added and draw(st.integers(0, 3)) < 3:
            outputs.add(scope + draw(st.integers(0, added - 1)))
        scope += added
    outputs.add(draw(st.integers(0, scope - 1)))
    return tuple(out), tuple(sorted(outputs))


def evaluate(e: tuple, scope: list[Any]) -> Any:
    kind = e[0]
    if kind == "ref":
        return scope[e[1]]
    if kind == "const":
        return dnp.asarray(e[1])
    if kind == "unary":
        return UNARY[e[1]](evaluate(e[2], scope))
    return BINARY[e[1]](evaluate(e[2], scope), evaluate(e[3], scope))


def _vector(e: tuple, scope: list[Any]) -> Any:
    """An init or operand: the first input plus the expression (shape (N,), float64)."""
    return scope[0] + evaluate(e, scope)


def _updated(carries: tuple, news: tuple, scope: list[Any]) -> tuple:
    out = []
    for k, new in enumerate(news):
        if new is None:
            out.append(carries[k])
        elif new[0] == "swap":
            out.append(carries[new[1]])
        else:
            out.append(dnp.tanh(carries[k] * 0.5 + evaluate(new, scope)))  # bounded: loops stay finite
    return tuple(out)


def run(statement: tuple, scope: list[Any]) -> None:
    """Trace ``statement`` (dsl calls), appending the values it makes to ``scope``."""
    kind = statement[0]
    if kind == "let":
        scope.append(evaluate(statement[1], scope))
    elif kind == "for":
        _, lower, upper, inits, inner, news = statement

        def body(i: Any, c: tuple) -> tuple:
            local = [*scope, i * 0.5, *c]
            for s in inner:
                run(s, local)
            return _updated(c, news, local)

        scope.extend(dsl.fori_loop(lower, upper, body, tuple(_vector(e, scope) for e in inits)))
    elif kind == "while":
        _, trips, inits, news = statement

        def step(c: tuple) -> tuple:
            return (c[0] + 1, *_updated(c[1:], news, [*scope, *c[1:]]))

        def test(c: tuple) -> Any:
            return False if trips is None else c[0] < trips

        out = dsl.while_loop(test, step, (0, *(_vector(e, scope) for e in inits)))
        scope.extend(out[1:])
    elif kind == "scan":
        _, inits, xs, inner, news, ys, used, reverse = statement

        def f(c: tuple, row: Any) -> tuple:
            local = [*scope, *c, row]
            for s in inner:
                run(s, local)
            return _updated(c, news, local), tuple(row * 0.5 + evaluate(y, local) for y in ys)

        rows = dnp.stack([_vector(e, scope) for e in xs])
        carries, stacked = dsl.scan(f, tuple(_vector(e, scope) for e in inits), rows, reverse=reverse)
        scope.extend(carries)
        scope.extend(dnp.sum(y, axis=0) for y, u in zip(stacked, used, strict=True) if u)
    else:
        _, pred, operands, (then, other) = statement
        p = pred if isinstance(pred, bool) else dnp.sum(evaluate(pred[1], scope)) > 0.0

        def branch(outs: tuple) -> Callable[..., tuple]:
            def fn(*ops: Any) -> tuple:
                local = [*scope, *ops]
                return tuple(ops[o[1]] if o[0] == "arg" else ops[0] * 0.5 + evaluate(o, local) for o in outs)

            return fn

        scope.extend(dsl.cond(p, branch(then), branch(other), *(_vector(e, scope) for e in operands)))


def traced(plan: tuple) -> Function:
    statements_, outputs = plan

    def program(x: Any, y: Any) -> tuple:
        scope = [x, y]
        for s in statements_:
            run(s, scope)
        return tuple(scope[k] for k in outputs)

    return trace_function(program, INPUTS).func


INPUTS = (np.array([0.3, -1.2, 0.7]), np.array([-0.4, 0.9, 1.6]))


def simplified(func: Function) -> Function:
    return run_passes(func, Options(verify=True), PASSES)["simplified"]


def check(func: Function) -> Function:
    """``func`` simplified: the same values on the interpreter, and a text form that parses back."""
    after = simplified(func)
    text = print_function(after)
    assert print_module(parse_module(text)) == text
    want, got = interpret(func, INPUTS), interpret(after, INPUTS)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)  # bit for bit (NaN where NaN)
        assert np.array_equal(np.signbit(g), np.signbit(w))
    return after


@settings(
    max_examples=200, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), database=None
)
@given(plans())
def test_random_region_programs_keep_their_values(plan: tuple) -> None:
    check(traced(plan))


# ---- targeted: each rewrite happens on traced programs ---------------------------------------------


def _region_ops(func: Function) -> list:
    return [op for op in func.walk() if op.regions]


def _trace(fn: Callable[..., Any]) -> Function:
    return trace_function(fn, INPUTS).func


def test_invariant_moves_out_of_a_traced_loop() -> None:
    def f(x: Any, w: Any) -> Any:
        return dsl.fori_loop(0, 5, lambda i, c: c * dnp.exp(w) + i, x)

    after = check(_trace(f))
    (loop,) = _region_ops(after)
    assert not any(op.name == "exp" for op in loop.regions[0].ops)
    assert [op.name for op in after.ops].index("exp") < list(after.ops).index(loop)


def test_dead_carries_and_ys_go() -> None:
    def f(x: Any, w: Any) -> Any:
        a, b = dsl.fori_loop(0, 4, lambda i, c: (c[0] * w, dnp.sin(c[1]) + c[0]), (x, w))
        (c, _), ys = dsl.scan(
            lambda c, r: ((c[0] + r, c[1] * r), (r * 2.0, dnp.exp(r))), (x, w), dnp.stack([x, w])
        )
        return a, c, ys[0]

    after = check(_trace(f))
    loop, scan = _region_ops(after)
    assert len(loop.results) == 1  # b: read by nobody, and a's update does not read it
    assert len(scan.results) == 2 and scan.attrs["carries"] == 1  # the carry c and the ys read


def test_constant_control_flow_folds_away() -> None:
    def f(x: Any, w: Any) -> Any:
        once = dsl.fori_loop(2, 3, lambda i, c: c + i, x)
        never = dsl.fori_loop(0, 0, lambda i, c: dnp.exp(c), w)
        picked = dsl.cond(True, lambda v: v * 2.0, lambda v: -v, x)
        stopped = dsl.while_loop(lambda c: False, lambda c: c + 1.0, w)
        return once, never, picked, stopped

    after = check(_trace(f))
    assert _region_ops(after) == []


def test_nested_invariant_leaves_both_loops() -> None:
    def f(x: Any, w: Any) -> Any:
        def outer(i: Any, c: Any) -> Any:
            return dsl.fori_loop(0, 3, lambda j, d: d * dnp.sin(w) + dnp.cos(c), c)

        return dsl.fori_loop(0, 3, outer, x)

    after = check(_trace(f))
    outer_loop = next(op for op in after.ops if op.prim is control.for_loop)
    assert [op.name for op in after.ops if op.name in ("sin", "cos")] == ["sin"]  # sin(w): at the top
    body = outer_loop.regions[0].ops
    inner = next(op for op in body if op.prim is control.for_loop)
    assert "cos" in [op.name for op in body] and "cos" not in [op.name for op in inner.regions[0].ops]


# ---- the lit tests' programs: each rewrite they show keeps the values -----------------------------

LIT = Path(__file__).parent / "lit"


def _lit_inputs(func: Function, flag: bool) -> list[np.ndarray]:
    """Floats in [0.5, 1.5] (a lit test's while loops end on them), trip counts of 3, ``flag``."""
    rng = np.random.default_rng(7)
    args = []
    for p in func.params:
        if p.type.dtype.is_bool:
            args.append(np.full(p.type.shape, flag))
        elif p.type.dtype.is_float:
            args.append(rng.uniform(0.5, 1.5, p.type.shape))
        else:
            args.append(np.full(p.type.shape, 3, p.type.dtype.np))
    return args


@pytest.mark.parametrize("name", ["dce_regions.mlir", "simplify_regions.mlir", "close_regions.mlir"])
def test_lit_programs_keep_their_values(name: str) -> None:
    for func in parse_module((LIT / name).read_text(), name):
        for rewrite in (dce, simplify, lambda f: simplify(close_regions(f))):
            after = rewrite(func)
            verify(after)
            for flag in (True, False):
                args = _lit_inputs(func, flag)
                for g, w in zip(interpret(after, args), interpret(func, args), strict=True):
                    np.testing.assert_array_equal(g, w, err_msg=f"{name}: @{func.name}")


def test_take_apart_builds_the_op_again() -> None:
    for name in ("dce_regions.mlir", "simplify_regions.mlir", "liveness_regions.mlir"):
        for func in parse_module((LIT / name).read_text(), name):
            for op in (op for op in func.walk() if op.regions):
                built = take_apart(op).build()
                assert (built.prim, built.operands, built.results) == (op.prim, op.operands, op.results)
                assert dict(built.attrs) == dict(op.attrs)
                assert [(b.args, b.ops, b.results) for b in built.regions] == [
                    (b.args, b.ops, b.results) for b in op.regions
                ]


# ---- the differential fuzzer's programs (tests/test_fuzz_programs.py) that hold loops or branches ---


@settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), database=None
)
@given(fuzz.programs())
def test_fuzzer_region_programs_keep_their_values(program: fuzz.Program) -> None:
    assume(any(step[0] in ("loop", "cond", "scan") for step in program.steps) and program.raises is None)
    args = program.inputs()
    func = dsl.compile(program.closure(fuzz.DSL))._trace(args)[0]
    after = simplified(func)
    with np.errstate(all="ignore"):
        want, got = interpret(func, args), interpret(after, args)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
