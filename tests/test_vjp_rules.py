"""Every primitive's vjp rule, from a table, against central finite differences of its NumPy reference.

For each case the test builds the primitive's op (operands may first go through ``broadcast``), applies
the rules in a tiny local reverse sweep, runs the result on the reference interpreter in float64 and
checks ``<vjp(ct), v> == <ct, (f(x + eps v) - f(x - eps v)) / 2 eps>`` along a random direction ``v``.
Second order differentiates the first-order backward again with the same sweep (the rules emit plain
primitives, so their output has rules too) and checks it against finite differences of the first
order. Independent of ``compiler/autodiff.py``: only the rules and the interpreter are used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from compiler.interpreter import interpret
from compiler.ir.core import Block, Function, Op, Value
from compiler.ir.types import DType, TensorType
from compiler.ir.verify import verify
from compiler.passes.simplify import simplify
from compiler.prims import CONTROL, REGISTRY
from compiler.prims.base import Primitive
from runtime.errors import ShapeError

RNG = np.random.default_rng(7)
EPS, RTOL = 1e-6, 1e-6


# ---- input data -------------------------------------------------------------------------------


def normal(*shape: int) -> np.ndarray:
    return np.asarray(RNG.standard_normal(shape))


def positive(*shape: int) -> np.ndarray:
    return np.asarray(RNG.uniform(0.5, 2.0, shape))


def nonzero(*shape: int) -> np.ndarray:  # away from the kink of abs and the pole of division
    return np.asarray(RNG.uniform(0.5, 2.0, shape) * RNG.choice([-1.0, 1.0], shape))


def unit(*shape: int) -> np.ndarray:  # inside tan's first branch
    return np.asarray(RNG.uniform(-1.0, 1.0, shape))


def above_one(*shape: int) -> np.ndarray:  # inside arccosh's domain, away from its pole at 1
    return np.asarray(RNG.uniform(1.2, 3.0, shape))


def off_integers(*shape: int) -> np.ndarray:  # away from floor's jumps
    return np.asarray(np.floor(RNG.standard_normal(shape) * 3) + RNG.uniform(0.2, 0.8, shape))


def dividend(*shape: int) -> np.ndarray:  # with ``divisor``: |a / b| in (1.37, 1.86), trunc(a / b) = +-1
    return np.asarray(RNG.uniform(2.2, 2.6, shape) * RNG.choice([-1.0, 1.0], shape))


def divisor(*shape: int) -> np.ndarray:
    return np.asarray(RNG.uniform(1.4, 1.6, shape) * RNG.choice([-1.0, 1.0], shape))


def mask(*shape: int) -> np.ndarray:
    return np.asarray(RNG.random(shape) < 0.5)


@dataclass
class Case:
    operands: list[np.ndarray]
    attrs: dict[str, Any] = field(default_factory=dict)
    broadcast: dict[int, tuple[int, ...]] = field(default_factory=dict)  # operand k enters broadcast
    wrt: tuple[int, ...] | None = None  # operands to differentiate (default: every float operand)
    second_order: bool = True  # False where the first derivative jumps at the point (ties)
    eps: float = EPS
    rtol: float = RTOL


# A differentiable primitive's entry lists cases; these two mark the others.
NOT_DIFFERENTIABLE = "not differentiable"
ZERO_BY_DEFINITION = "zero by definition"  # stop_gradient: finite differences see the identity

Draw = Callable[..., np.ndarray]
SHAPES: tuple[tuple[int, ...], ...] = ((), (1,), (3, 4), (2, 1, 3))


def unary(draw: Draw = normal) -> list[Case]:
    cases = [Case([draw(*s)]) for s in SHAPES]
    return cases + [Case([draw(4)], broadcast={0: (3, 4)})]


def binary(first: Draw = normal, second: Draw = normal) -> list[Case]:
    cases = [Case([first(*s), second(*s)]) for s in SHAPES]
    return cases + [Case([first(4), second(3, 4)], broadcast={0: (3, 4)})]


def with_ties() -> list[Case]:
    """max/min where about half the positions tie: central differences there see the 0.5/0.5 split."""
    a, b, tie = normal(3, 4), normal(3, 4), mask(3, 4)
    b[tie] = a[tie]
    return binary() + [Case([a, b], second_order=False)]


def reduction(pick: Callable[[np.ndarray, int], np.ndarray] | None) -> list[Case]:
    cases = [Case([normal(2, 3, 4)], {"axes": axes}) for axes in ((), (0,), (1,), (2,), (0, 2), (0, 1, 2))]
    cases += [Case([normal()], {"axes": ()}), Case([normal(3, 1, 2)], {"axes": (1,)})]
    cases.append(Case([normal(4)], {"axes": (0, 1)}, broadcast={0: (3, 4)}))
    if pick is not None:  # two-way ties: central differences see the even split as well
        x = normal(3, 4)
        x[:, 2] = pick(x, 1)
        cases.append(Case([x], {"axes": (1,)}, second_order=False))
    return cases


def slices(start: Sequence[int], limit: Sequence[int], stride: Sequence[int]) -> dict[str, Any]:
    return {"start": tuple(start), "limit": tuple(limit), "stride": tuple(stride)}


def pow_cases() -> list[Case]:
    base = positive(3, 4)
    base[0] = 0.0  # d/db takes 0 where the base is 0, as central differences of 0**b do
    return binary(positive, normal) + [Case([base, RNG.uniform(1.5, 3.0, (3, 4))], wrt=(1,))]


def cast_cases() -> list[Case]:
    loose = {"eps": 1e-3, "rtol": 1e-3}  # an f32 side rounds at 1e-7
    return [
        Case([normal(3, 4)], {"dtype": DType.f64}),
        Case([normal(3, 4)], {"dtype": DType.f32}, **loose),
        Case([normal(2, 3).astype(np.float32)], {"dtype": DType.f64}, **loose),
        Case([normal(3, 4) * 5], {"dtype": DType.i32}),  # piecewise constant: None and FD both zero
        Case([normal(4)], {"dtype": DType.i1}),
        Case([np.arange(4, dtype=np.int32)], {"dtype": DType.f64}),  # no float operand at all
    ]


def select_cases() -> list[Case]:
    cases = [Case([mask(*s), normal(*s), normal(*s)]) for s in ((), (3, 4), (2, 1, 3))]
    return cases + [Case([mask(3, 4), normal(4), normal(3, 4)], broadcast={1: (3, 4)})]


TABLE: dict[str, list[Case] | str] = {
    "neg": unary(),
    "abs": unary(nonzero),
    "sign": unary(nonzero),
    "exp": unary(),
    "log": unary(positive),
    "log1p": unary(positive),
    "expm1": unary(),
    "sqrt": unary(positive),
    "sin": unary(),
    "cos": unary(),
    "tan": unary(unit),
    "tanh": unary(),
    "erf": unary(),
    "erfc": unary(),
    "asin": unary(unit),
    "acos": unary(unit),
    "atan": unary(),
    "sinh": unary(),
    "cosh": unary(),
    "asinh": unary(),
    "acosh": unary(above_one),
    "atanh": unary(unit),
    "log2": unary(positive),
    "log10": unary(positive),
    "atan2": binary(normal, nonzero),
    "hypot": binary(nonzero, nonzero),
    "cbrt": unary(nonzero),
    "copysign": binary(nonzero, nonzero),
    "logistic": unary(),
    "copy": unary(),
    "stop_gradient": ZERO_BY_DEFINITION,
    "add": binary(),
    "sub": binary(),
    "mul": binary(),
    "div": binary(normal, nonzero),
    "floor": unary(off_integers),
    "fmod": binary(dividend, divisor),
    "pow": pow_cases(),
    "max": with_ties(),
    "min": with_ties(),
    "select": select_cases(),
    "cast": cast_cases(),
    "reduce_sum": reduction(None),
    "reduce_max": reduction(lambda x, axis: x.max(axis=axis)),
    "reduce_min": reduction(lambda x, axis: x.min(axis=axis)),
    "matmul": [
        Case([normal(3, 4), normal(4, 5)]),
        Case([normal(2, 3, 4), normal(2, 4, 2)]),
        Case([normal(2, 1, 3, 2), normal(2, 1, 2, 2)]),
        Case([normal(1, 1), normal(1, 1)]),
        Case([normal(2, 3, 4), normal(4, 5)], broadcast={1: (2, 4, 5)}),  # one weight, batched input
    ],
    "broadcast": [
        Case([normal(3)], {"shape": (2, 3)}),
        Case([normal()], {"shape": (2, 2)}),
        Case([normal(3, 1)], {"shape": (2, 3, 4)}),
        Case([normal(1)], {"shape": (5,)}),
        Case([normal(1, 1)], {"shape": (1, 1)}),
        Case([normal()], {"shape": ()}),
        Case([normal(2, 1, 3)], {"shape": (4, 2, 5, 3)}),
    ],
    "reshape": [
        Case([normal(3, 4)], {"shape": (2, 6)}),
        Case([normal()], {"shape": (1, 1)}),
        Case([normal(12)], {"shape": (3, 1, 4)}),
        Case([normal(4)], {"shape": (2, 6)}, broadcast={0: (3, 4)}),
    ],
    "transpose": [
        Case([normal(3, 4)], {"perm": (1, 0)}),
        Case([normal(2, 3, 4)], {"perm": (2, 0, 1)}),
        Case([normal()], {"perm": ()}),
        Case([normal(2, 1, 3)], {"perm": (1, 2, 0)}),
    ],
    "slice": [
        Case([normal(5, 6)], slices((1, 0), (4, 6), (1, 2))),
        Case([normal(7)], slices((6,), (-1,), (-2,))),
        Case([normal(6, 4)], slices((5, 3), (0, -1), (-2, -1))),
        Case([normal(5)], slices((4,), (0,), (-3,))),
        Case([normal(4, 3)], slices((2, 0), (2, 3), (1, 1))),  # an empty region
        Case([normal()], slices((), (), ())),
        Case([normal(3)], slices((1, 2), (-1, -1), (-1, -2)), broadcast={0: (2, 3)}),
    ],
    "pad": [
        Case([normal(2, 3), normal()], {"low": (1, 0), "high": (2, 1)}),
        Case([normal(2, 2), normal()], {"low": (2, 1), "high": (0, 3)}),
        Case([normal(1), normal()], {"low": (0,), "high": (2,)}),
        Case([normal(3), normal()], {"low": (0,), "high": (0,)}),  # no padding: the value gets None
        Case([normal(), normal()], {"low": (), "high": ()}),
    ],
    "concatenate": [
        Case([normal(2, 3), normal(1, 3)], {"axis": 0}),
        Case([normal(2, 1), normal(2, 0), normal(2, 2)], {"axis": 1}),
        Case([normal(3)], {"axis": 0}),
        Case([normal(3), normal(2, 3)], {"axis": 1}, broadcast={0: (2, 3)}),
    ],
    "update_slice": [
        Case([normal(4, 5), normal(2, 3)], slices((1, 1), (3, 4), (1, 1))),
        Case([normal(7), normal(3)], slices((0,), (7,), (3,))),
        Case([normal(6), normal(3)], slices((5,), (-1,), (-2,))),
        Case([normal(4, 3), normal(2, 3)], slices((3, 2), (0, -1), (-2, -1))),
        Case([normal(), normal()], slices((), (), ())),
        Case([normal(3), normal(1, 3)], slices((2, 0), (3, 3), (1, 1)), broadcast={0: (3, 3)}),
    ],
    "dynamic_slice": [
        Case([normal(5, 6), np.array(1), np.array(2)], {"sizes": (2, 3)}),
        Case([normal(7), np.array(9)], {"sizes": (3,)}),  # clamped to the last window
        Case([normal(4, 3), np.array(-2, np.int32), np.array(0)], {"sizes": (2, 3)}),
        Case([normal()], {"sizes": ()}),
        Case([normal(3), np.array(1), np.array(1)], {"sizes": (2, 2)}, broadcast={0: (2, 3)}),
    ],
    "dynamic_update_slice": [
        Case([normal(4, 5), normal(2, 3), np.array(1), np.array(1)]),
        Case([normal(7), normal(3), np.array(6)]),
        Case([normal(6), normal(3), np.array(-5, np.int32)]),
        Case([normal(), normal()]),
        Case([normal(3), normal(1, 3), np.array(1), np.array(0)], broadcast={0: (3, 3)}),
    ],
    "gather": [
        Case([normal(5, 3), np.array([4, 0, -1, 9, 2, 2])], {"axis": 0}),  # repeated, wrapped, clamped
        Case([normal(2, 6), np.array([[1, 5], [-2, 1]], np.int32)], {"axis": 1}),
        Case([normal(4, 3), np.array(1)], {"axis": 1}),
    ],
    "scatter_add": [
        Case([normal(5, 3), normal(6, 3), np.array([4, 0, -1, 9, 4, 4])], {"axis": 0}),
        Case([normal(2, 6), normal(2, 2, 2), np.array([[1, 5], [-2, 1]], np.int32)], {"axis": 1}),
    ],
    "scatter_mul": [  # the updates' cotangent assumes unique indices (JAX's rule)
        Case([normal(5, 3), normal(3, 3), np.array([4, 0, -2])], {"axis": 0}),
        Case([normal(2, 6), normal(2, 2, 2), np.array([[1, 5], [-2, 0]], np.int32)], {"axis": 1}),
    ],
    "scatter_max": [  # repeated indices; distinct values (no ties)
        Case([normal(5, 3), normal(6, 3), np.array([4, 0, -1, 9, 4, 4])], {"axis": 0}),
        Case([normal(2, 6), normal(2, 2, 2), np.array([[1, 5], [-2, 1]], np.int32)], {"axis": 1}),
    ],
    "scatter_min": [
        Case([normal(5, 3), normal(6, 3), np.array([4, 0, -1, 9, 4, 4])], {"axis": 0}),
        Case([normal(2, 6), normal(2, 2, 2), np.array([[1, 5], [-2, 1]], np.int32)], {"axis": 1}),
    ],
    "scatter": [  # repeated indices: only the last update of each element shows (and gets a cotangent)
        Case([normal(5, 3), normal(6, 3), np.array([4, 0, -1, 9, 4, 4])], {"axis": 0}),
        Case([normal(2, 6), normal(2, 2, 2), np.array([[1, 5], [-2, 1]], np.int32)], {"axis": 1}),
    ],
    "cumulative_sum": [
        Case([normal(2, 3, 4)], {"axis": a, "reverse": r}) for a in range(3) for r in (False, True)
    ]
    + [Case([normal(1)], {"axis": 0, "reverse": False})],
    "cumulative_prod": [
        Case([normal(2, 3, 4)], {"axis": a, "reverse": r}) for a in range(3) for r in (False, True)
    ]
    + [  # zeros: one, two (past the first every product holds it), reversed; the rule branches there
        Case([np.array([1.5, 0.0, -0.7, 1.2, 0.0, 0.9])], {"axis": 0, "reverse": r}, second_order=False)
        for r in (False, True)
    ],
}
TABLE |= {
    name: NOT_DIFFERENTIABLE
    for name in "eq ne lt le gt ge and or xor not shift_left shift_right constant iota random_bits".split()
}
DIFFERENTIABLE = sorted(name for name, entry in TABLE.items() if isinstance(entry, list))
SECOND_ORDER_REQUIRED = "exp log sin tanh mul div pow logistic matmul reduce_max broadcast slice".split()


# ---- building and running ---------------------------------------------------------------------


def recorder(ops: list[Op]) -> Callable[[Primitive, Sequence[Value], Any], Value]:
    """The ``build`` a rule gets: appends each op it emits to ``ops``."""

    def build(prim: Primitive, operands: Sequence[Value], attrs: Any) -> Value:
        ops.append(Op.create(prim, list(operands), dict(attrs)))
        return ops[-1].result

    return build


def type_of(array: np.ndarray) -> TensorType:
    return TensorType(array.shape, DType.from_numpy(array.dtype))


def forward(name: str, case: Case) -> tuple[list[Value], list[Op], Value]:
    """Parameters, ops and result of the case's function (broadcasts first, then the primitive)."""
    params = [Value(type_of(a)) for a in case.operands]
    ops: list[Op] = []
    operands = []
    for k, v in enumerate(params):
        if k in case.broadcast:
            ops.append(Op.create(REGISTRY["broadcast"], [v], {"shape": case.broadcast[k]}))
            v = ops[-1].result
        operands.append(v)
    ops.append(Op.create(REGISTRY[name], operands, case.attrs))
    return params, ops, ops[-1].result


def reverse_sweep(
    ops: Sequence[Op], seeds: Sequence[tuple[Value, Value]], wrt: Sequence[Value], emitted: list[Op]
) -> list[Value | None]:
    """The cotangents of ``wrt`` (None: zero), from each op's own rule; new ops go to ``emitted``."""
    build = recorder(emitted)
    active = set(wrt)  # values that depend on ``wrt``: the only operands whose cotangent is wanted
    for op in ops:
        if op.prim.differentiable and any(v in active for v in op.operands):
            active.add(op.result)
    cts: dict[Value, Value] = {}

    def accumulate(v: Value, g: Value) -> None:
        assert g.type == v.type, f"cotangent {g.type} for a value of type {v.type}"
        cts[v] = build(REGISTRY["add"], [cts[v], g], {}) if v in cts else g

    for v, g in seeds:
        accumulate(v, g)
    for op in reversed(ops):
        if op.result not in cts or not op.prim.differentiable:
            continue
        wanted = tuple(v in active for v in op.operands)
        for v, g in zip(op.operands, op.prim.vjp(build, op, cts[op.result], wanted), strict=True):
            if g is not None:
                accumulate(v, g)
    return [cts.get(v) for v in wrt]


def program(params: Sequence[Value], ops: Sequence[Op], results: Sequence[Value]) -> Function:
    func = Function("f", Block(tuple(params), tuple(ops), tuple(results)))
    verify(func)
    return func


def run(params: Sequence[Value], ops: Sequence[Op], results: Sequence[Value], args: Sequence[np.ndarray]):
    return interpret(program(params, ops, results), args)


def assert_matches_fd(
    f: Function,
    args: list[np.ndarray],
    diff: Sequence[int],
    cts: Sequence[np.ndarray],
    grads: Sequence[np.ndarray | None],
    case: Case,
    what: str,
) -> None:
    """``sum_k <grads[k], v_k> == <cts, (f(args + eps v) - f(args - eps v)) / 2 eps>``, random ``v``."""
    v = {k: RNG.standard_normal(args[k].shape) for k in diff}

    def shifted(sign: float) -> list[np.ndarray]:
        return interpret(f, [a + sign * case.eps * v[k] if k in v else a for k, a in enumerate(args)])

    fd = [(p.astype(np.float64) - m) / (2 * case.eps) for p, m in zip(shifted(1), shifted(-1), strict=True)]
    left = [g * v[k] for k, g in zip(diff, grads, strict=True) if g is not None]
    right = [c * d for c, d in zip(cts, fd, strict=True)]
    lhs, rhs = sum(float(np.sum(t)) for t in left), sum(float(np.sum(t)) for t in right)
    scale = sum(float(np.sum(np.abs(t))) for t in left + right)
    assert abs(lhs - rhs) <= case.rtol * scale + 1e-12, f"{what}: vjp gives {lhs}, finite differences {rhs}"


def cases_of(name: str) -> list[Case]:
    entry = TABLE[name]
    assert isinstance(entry, list)
    return entry


def diff_operands(case: Case, params: Sequence[Value]) -> list[int]:
    floats = [k for k, p in enumerate(params) if p.type.dtype.is_float]
    return floats if case.wrt is None else [k for k in case.wrt if k in floats]


# ---- the registry, first and second order -----------------------------------------------------


def test_table_covers_registry() -> None:
    array_prims = {name: p for name, p in REGISTRY.items() if p not in CONTROL}  # loops: test_control_flow
    assert sorted(array_prims) == sorted(TABLE), f"table vs registry: {set(array_prims) ^ set(TABLE)}"
    for name, prim in array_prims.items():
        if TABLE[name] == NOT_DIFFERENTIABLE:
            assert not prim.differentiable and prim.vjp is None, name
        else:
            assert prim.differentiable and prim.vjp is not None, f"{name} is differentiable but has no vjp"


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_first_order(name: str) -> None:
    for i, case in enumerate(cases_of(name)):
        params, ops, out = forward(name, case)
        diff = diff_operands(case, params)
        ct = Value(out.type)
        emitted: list[Op] = []
        grads = reverse_sweep(ops, [(out, ct)], [params[k] for k in diff], emitted)
        args = list(case.operands)
        ct_value = normal(*out.type.shape).astype(out.type.dtype.np)
        present = [g for g in grads if g is not None]
        values = iter(run(params + [ct], ops + emitted, present, args + [ct_value]))
        grad_values = [None if g is None else next(values) for g in grads]
        f = program(params, ops, [out])
        assert_matches_fd(f, args, diff, [ct_value], grad_values, case, f"{name} case {i}")


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_second_order(name: str) -> None:
    """Differentiate forward + first-order backward again, seeded with random ``w`` at the first-order
    cotangents: the result is the gradient of ``<vjp(x, ct), w>`` with respect to ``x`` and ``ct``."""
    checked = 0
    for i, case in enumerate(cases_of(name)):
        if not case.second_order:
            continue
        params, ops, out = forward(name, case)
        diff = diff_operands(case, params)
        ct = Value(out.type)
        first: list[Op] = []
        grads = [g for g in reverse_sweep(ops, [(out, ct)], [params[k] for k in diff], first) if g]
        if not grads:
            continue  # the first derivative is zero (sign, cast to int, pad with no padding, ...)
        ws = [Value(g.type) for g in grads]
        second: list[Op] = []
        wrt = [params[k] for k in diff] + [ct]
        hess = reverse_sweep(ops + first, list(zip(grads, ws)), wrt, second)
        args = list(case.operands) + [normal(*out.type.shape).astype(out.type.dtype.np)]
        w_values = [normal(*w.type.shape).astype(w.type.dtype.np) for w in ws]
        present = [h for h in hess if h is not None]
        values = iter(run(params + [ct] + ws, ops + first + second, present, args + w_values))
        hess_values = [None if h is None else next(values) for h in hess]
        f = program(params + [ct], ops + first, grads)
        where = diff + [len(params)]  # ct is the argument after the parameters
        assert_matches_fd(f, args, where, w_values, hess_values, case, f"{name} case {i}, second order")
        checked += 1
    if name in SECOND_ORDER_REQUIRED:
        assert checked, f"{name}: no second-order case ran"


# ---- what each rule emits ---------------------------------------------------------------------


def live_ops(ops: Sequence[Op], results: Sequence[Value]) -> set[Op]:
    needed, live = set(results), set()
    for op in reversed(ops):
        if op.result in needed:
            live.add(op)
            needed.update(op.operands)
    return live


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_rule_builds_only_what_is_wanted(name: str) -> None:
    """Each operand alone and all together: None for the unwanted, no dead ops (no work for them),
    only the forward values ``vjp_needs`` declares read, and no constant bigger than a scalar."""
    prim = REGISTRY[name]
    needs = prim.memory.vjp_needs
    for case in cases_of(name):
        if case.broadcast:
            continue
        params = [Value(type_of(a)) for a in case.operands]
        op = Op.create(prim, params, case.attrs)
        ct = Value(op.result.type)
        n = len(params)
        floats = [k for k, p in enumerate(params) if p.type.dtype.is_float]
        for wanted in [tuple(k == j for k in range(n)) for j in floats] + [(True,) * n]:
            emitted: list[Op] = []
            cts = prim.vjp(recorder(emitted), op, ct, wanted)
            assert len(cts) == n
            for k, g in enumerate(cts):
                if not (wanted[k] and k in floats):
                    assert g is None, f"{name}: a cotangent for unwanted or non-float operand {k}"
                elif g is not None:
                    assert g.type == params[k].type
            assert live_ops(emitted, [g for g in cts if g is not None]) == set(emitted), f"{name}: dead ops"
            reads = {v for o in emitted for v in o.operands}
            if "inputs" not in needs:
                assert not reads & set(params), f"{name}: reads an input; vjp_needs says {set(needs)}"
            if "output" not in needs:
                assert op.result not in reads, f"{name}: reads the output; vjp_needs says {set(needs)}"
            for o in emitted:
                assert o.prim is not REGISTRY["constant"] or o.result.type.rank == 0, (
                    f"{name}: dense constant"
                )


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_integer_operands_get_no_cotangent_and_f32_types_match(name: str) -> None:
    prim = REGISTRY[name]
    for case in cases_of(name):
        for dtype in (np.int32, np.float32):
            arrays = [a.astype(dtype) if a.dtype.kind == "f" else a for a in case.operands]
            try:
                op = Op.create(prim, [Value(type_of(a)) for a in arrays], case.attrs)
            except ShapeError:
                continue  # e.g. exp on integers
            emitted: list[Op] = []
            cts = prim.vjp(recorder(emitted), op, Value(op.result.type), (True,) * len(arrays))
            for v, g in zip(op.operands, cts, strict=True):
                assert g is None or g.type == v.type, f"{name}: cotangent {g.type} for {v.type}"
            if dtype is np.int32:
                assert cts == (None,) * len(arrays) and not emitted, f"{name}: work for integer operands"


# ---- decisions worth a test of their own ------------------------------------------------------


def first_order(name: str, operands: list[np.ndarray], ct: np.ndarray, **attrs: Any) -> list[Any]:
    case = Case(operands, attrs)
    params, ops, out = forward(name, case)
    ct_param = Value(out.type)
    emitted: list[Op] = []
    grads = REGISTRY[name].vjp(recorder(emitted), ops[-1], ct_param, (True,) * len(params))
    present = [g for g in grads if g is not None]
    values = iter(run(params + [ct_param], ops + emitted, present, operands + [ct]))
    return [None if g is None else next(values) for g in grads]


def test_reduce_max_shares_among_all_ties() -> None:
    (g,) = first_order("reduce_max", [np.array([[1.0, 3.0, 3.0, 3.0, 0.0]])], np.array([6.0]), axes=(1,))
    np.testing.assert_allclose(g, [[0.0, 2.0, 2.0, 2.0, 0.0]])


def test_max_of_equal_operands_splits_evenly() -> None:
    x = np.array([1.0, -2.0])
    ga, gb = first_order("max", [x, x.copy()], np.array([1.0, 4.0]))
    np.testing.assert_allclose(ga, [0.5, 2.0])
    np.testing.assert_allclose(gb, [0.5, 2.0])


def test_pow_exponent_cotangent_is_zero_at_a_zero_base_and_nan_below() -> None:
    """JAX's: ``out * log(a)`` is NaN for a negative base (it was 0, 2026-11-27), 0 at a zero base."""
    ga, gb = first_order("pow", [np.array([-2.0, 0.0, 2.0]), np.array([2.0, 2.0, 2.0])], np.ones(3))
    np.testing.assert_allclose(ga, [-4.0, 0.0, 4.0])
    np.testing.assert_allclose(gb, [np.nan, 0.0, 4.0 * np.log(2.0)])


def test_matmul_input_gradient_alone_builds_one_matmul() -> None:
    a, b = Value(TensorType((2, 3, 4), DType.f32)), Value(TensorType((2, 4, 5), DType.f32))
    op = Op.create(REGISTRY["matmul"], [a, b])
    for wanted, unread in (((True, False), a), ((False, True), b)):
        emitted: list[Op] = []
        cts = REGISTRY["matmul"].vjp(recorder(emitted), op, Value(op.result.type), wanted)
        assert [c is None for c in cts] == [not w for w in wanted]
        assert sorted(o.prim.name for o in emitted) == ["matmul", "transpose"]
        assert all(unread not in o.operands for o in emitted), "work for the operand nobody wants"


def test_stop_gradient_is_identity_forward_zero_backward_and_simplified_away() -> None:
    prim = REGISTRY["stop_gradient"]
    x = normal(2, 3)
    np.testing.assert_array_equal(prim.run_reference([x], {}), x)
    param = Value(type_of(x))
    op = Op.create(prim, [param])
    emitted: list[Op] = []
    assert prim.vjp(recorder(emitted), op, Value(op.result.type), (True,)) == (None,) and not emitted
    exp = Op.create(REGISTRY["exp"], [op.result])
    func = simplify(Function("f", Block((param,), (op, exp), (exp.result,))))
    assert [o.prim.name for o in func.ops] == ["exp"]
