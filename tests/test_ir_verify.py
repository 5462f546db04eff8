"""The verifier: every invariant is caught on a deliberately broken function, named by op and location.

Broken functions are built with ``Op(...)`` directly, which skips the shape rule that ``Op.create`` runs.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_ir_parser import ROUND_TRIP_CASES

from compiler.ir.core import Block, Function, Location, Op, Value
from compiler.ir.types import DType, TensorType
from compiler.ir.verify import verify, verify_enabled
from compiler.prims import REGISTRY
from runtime.errors import VerificationError

LOC = Location("model.py", 7, 3)
V2 = TensorType((2,), DType.f32)
V3 = TensorType((3,), DType.f32)
ADD, NEG, REDUCE_SUM = REGISTRY["add"], REGISTRY["neg"], REGISTRY["reduce_sum"]


def func(
    params: tuple[Value, ...], ops: tuple[Op, ...], results: tuple[Value, ...], **attrs: object
) -> Function:
    return Function(
        "broken", Block(params, ops, results), attrs={k.replace("_", "."): v for k, v in attrs.items()}
    )


def op(prim: object, operands: tuple[Value, ...], result: TensorType | Value = V2, **attrs: object) -> Op:
    out = result if isinstance(result, Value) else Value(result)
    return Op(prim, operands, attrs, (out,), LOC)  # type: ignore[arg-type]


def expect(f: Function, *fragments: str) -> None:
    with pytest.raises(VerificationError) as info:
        verify(f)
    for fragment in fragments:
        assert fragment in str(info.value)


@pytest.mark.parametrize("case", sorted(ROUND_TRIP_CASES))
def test_well_formed_functions_pass(case: str) -> None:
    for f in ROUND_TRIP_CASES[case]:
        verify(f)


def test_operand_used_before_definition() -> None:
    x = Value(V2)
    later = op(NEG, (x,))
    early = op(ADD, (x, later.result))
    expect(func((x,), (early, later), (early.result,)), '"dsl.add" at model.py:7', "operand #1", '"dsl.neg"')


def test_operand_never_defined() -> None:
    x, stray = Value(V2), Value(V2)
    add = op(ADD, (x, stray))
    expect(
        func((x,), (add,), (add.result,)),
        '"dsl.add" at model.py:7 in @broken',
        "not defined in this function",
    )


def test_value_defined_twice() -> None:
    x = Value(V2)
    first = op(NEG, (x,))
    second = op(NEG, (x,), first.result)
    expect(func((x,), (first, second), (second.result,)), '"dsl.neg"', "already defined")


def test_result_redefines_an_argument() -> None:
    x = Value(V2)
    neg = op(NEG, (x,), x)
    expect(func((x,), (neg,), (x,)), '"dsl.neg"', "already defined")


def test_argument_listed_twice() -> None:
    x = Value(V2)
    expect(func((x, x), (), (x,)), "@broken", "argument #1 is defined twice")


def test_wrong_result_type() -> None:
    x = Value(V2)
    add = op(ADD, (x, x), V3)
    expect(func((x,), (add,), (add.result,)), '"dsl.add" at model.py:7', "tensor<3xf32>", "tensor<2xf32>")


def test_shape_rule_failure_is_reported() -> None:
    x, y = Value(V2), Value(V3)
    add = op(ADD, (x, y))
    expect(func((x, y), (add,), (add.result,)), '"dsl.add"', "operand shapes differ: (2,) vs (3,)")


def test_unknown_attribute() -> None:
    x = Value(V2)
    neg = op(NEG, (x,), axis=0)
    expect(func((x,), (neg,), (neg.result,)), '"dsl.neg"', "unknown attribute 'axis'")


def test_missing_attribute() -> None:
    x = Value(V2)
    red = op(REDUCE_SUM, (x,), TensorType((), DType.f32))
    expect(func((x,), (red,), (red.result,)), '"dsl.reduce_sum"', "missing attribute 'axes'")


@pytest.mark.parametrize(
    "prim, attrs, fragment",
    [
        ("reduce_sum", {"axes": [0]}, "attribute 'axes' must be an integer array"),
        ("reduce_sum", {"axes": (0.0,)}, "attribute 'axes' must be an integer array"),
        ("cast", {"dtype": "f32"}, "attribute 'dtype' must be an element type"),
        ("concatenate", {"axis": True}, "attribute 'axis' must be an integer"),
        ("concatenate", {"axis": np.int64(0)}, "attribute 'axis' must be an integer"),
        ("neg", {"dsl.note": object()}, "attribute 'dsl.note' must be a printable attribute value"),
    ],
)
def test_attribute_python_types(prim: str, attrs: dict[str, object], fragment: str) -> None:
    x = Value(V2)
    bad = Op(REGISTRY[prim], (x,), attrs, (Value(V2),), LOC)
    expect(func((x,), (bad,), bad.results), f'"dsl.{prim}" at model.py:7', fragment)


def test_constant_value_must_be_an_array() -> None:
    const = Op(REGISTRY["constant"], (), {"value": [1.0, 2.0]}, (Value(V2),), LOC)
    expect(func((), (const,), const.results), '"dsl.constant"', "must be a dense literal")


def test_unregistered_primitive() -> None:
    x = Value(V2)
    impostor = dataclasses.replace(NEG)  # same name, but not the registry's object
    neg = op(impostor, (x,))
    expect(func((x,), (neg,), (neg.result,)), '"dsl.neg"', "not the registered")


def test_function_result_undefined() -> None:
    x = Value(V2)
    expect(func((x,), (), (x, Value(V3))), "@broken", "result #1 (tensor<3xf32>) is not defined")


def test_unprintable_function_attribute() -> None:
    x = Value(V2)
    expect(func((x,), (), (x,), dsl_plan=[1, 2]), "@broken", "function attribute 'dsl.plan'")


def test_more_names_than_arguments() -> None:
    f = Function("broken", Block((), (), ()), arg_names=("x",))
    expect(f, "@broken", "more argument names")


@pytest.mark.parametrize(
    "writeback, fragment",
    [
        ([1], "expected a tuple of argument indices"),
        ((True,), "expected a tuple of argument indices"),
        ((0, 1, 0), "at most one per result"),
        ((1, 1), "expected distinct indices"),
        ((5,), "5 is not an argument index"),
        ((0,), "argument #0 has type tensor<2xf32>, but result #1 written back to it has type tensor<3xf32>"),
    ],
)
def test_writeback(writeback: object, fragment: str) -> None:
    x, y = Value(V2), Value(V3)
    neg = op(NEG, (y,), V3)
    expect(func((x, y), (neg,), (x, neg.result), dsl_writeback=writeback), "@broken: dsl.writeback", fragment)


def test_valid_writeback() -> None:
    x, y = Value(V2), Value(V3)
    neg = Op.create(NEG, [y], {}, LOC)
    verify(func((x, y), (neg,), (x, neg.result), dsl_writeback=(1,)))


def test_region_ops_see_enclosing_values_only() -> None:
    x = Value(V2)
    inner = Op.create(NEG, [x], {}, LOC)
    outer = Op(REGISTRY["copy"], (x,), {}, (Value(V2),), LOC, (Block((), (inner,), (inner.result,)),))
    verify(func((x,), (outer,), (outer.result,)))
    stray = op(NEG, (Value(V2),))
    broken = Op(REGISTRY["copy"], (x,), {}, (Value(V2),), LOC, (Block((), (stray,), (stray.result,)),))
    expect(func((x,), (broken,), (broken.result,)), '"dsl.neg"', "not defined")
    leaked = Op.create(NEG, [x], {}, LOC)  # defined inside the region, used after it
    holder = Op(REGISTRY["copy"], (x,), {}, (Value(V2),), LOC, (Block((), (leaked,), (leaked.result,)),))
    use = Op.create(NEG, [leaked.result], {}, LOC)
    expect(func((x,), (holder, use), (use.result,)), '"dsl.neg"', "operand #0")


def test_verify_enabled_reads_dsl_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DSL_VERIFY", raising=False)
    assert not verify_enabled()
    monkeypatch.setenv("DSL_VERIFY", "0")
    assert not verify_enabled()
    monkeypatch.setenv("DSL_VERIFY", "1")
    assert verify_enabled()
