"""Bad input gives a clear dsl error naming the user's file and line; nothing crashes internally."""

from __future__ import annotations

import re

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
from compiler.ir.parser import parse_module

HERE = re.escape(__file__.rsplit("/", 1)[-1])


def _line_of(fn, needle: str) -> int:
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if needle in line)


def test_wrong_arity() -> None:
    @dsl.compile
    def f(x, y):
        return x + y

    with pytest.raises(dsl.CallError, match=rf"{HERE}:\d+: f\(\): missing a required argument: 'y'"):
        f(np.ones(2))
    with pytest.raises(TypeError, match="too many positional arguments"):
        f(np.ones(2), np.ones(2), np.ones(2))


def test_mismatched_shapes_in_add_name_line_and_both_shapes() -> None:
    def f(x, y):
        return x + y  # the bad line

    with pytest.raises(dsl.ShapeError) as info:
        dsl.compile(f)(np.ones((2, 3)), np.ones(4))
    msg = str(info.value)
    assert f"{__file__}:{_line_of(f, 'the bad line')}:" in msg
    assert "(2, 3)" in msg and "(4,)" in msg
    assert isinstance(info.value, ValueError)


def test_mismatched_shapes_in_matmul() -> None:
    def f(x, y):
        return x @ y  # the bad matmul

    with pytest.raises(dsl.ShapeError) as info:
        dsl.compile(f)(np.ones((2, 3)), np.ones((4, 5)))
    msg = str(info.value)
    assert f"{__file__}:{_line_of(f, 'the bad matmul')}:" in msg
    assert "(2, 3)" in msg and "(4, 5)" in msg


def test_unsupported_dtype() -> None:
    f = dsl.compile(lambda x: x * 2)
    with pytest.raises(dsl.CallError, match="float16"):
        f(np.ones(3, np.float16))
    with pytest.raises(dsl.CallError, match="argument 'x' is a str"):
        f("hello")


def test_if_on_traced_value() -> None:
    def f(x):
        if x.sum() > 0:  # data-dependent control flow
            return x
        return -x

    with pytest.raises(dsl.TraceError, match=rf"{HERE}:{_line_of(f, 'data-dependent')}: bool\(\)"):
        dsl.compile(f)(np.ones(3))


def test_int_and_float_of_traced_value() -> None:
    with pytest.raises(dsl.TraceError, match="not known at trace time"):
        dsl.compile(lambda x: float(x))(np.ones(()))
    with pytest.raises(dsl.TraceError, match="not known at trace time"):
        dsl.compile(lambda x: np.asarray(x))(np.ones(2))


def test_bad_indexing() -> None:
    with pytest.raises(dsl.IndexingError, match="out of bounds"):
        dsl.compile(lambda x: x[5])(np.ones(3))
    with pytest.raises(IndexError, match="too many indices"):
        dsl.compile(lambda x: x[0, 0])(np.ones(3))
    with pytest.raises(dsl.IndexingError, match="got float"):
        dsl.compile(lambda x: x[1.0])(np.ones(3))


def test_bad_axis() -> None:
    with pytest.raises(dsl.ShapeError, match="axis 2 is out of bounds"):
        dsl.compile(lambda x: x.sum(axis=2))(np.ones((2, 2)))


def test_unknown_function_attribute() -> None:
    with pytest.raises(AttributeError):
        dsl.compile(lambda x: dnp.no_such_function(x))(np.ones(2))


def test_target_cuda_without_gpu() -> None:
    from runtime.devices import cuda_available

    if cuda_available():
        pytest.skip("a GPU is present")
    f = dsl.compile(lambda x: x + 1, target="cuda")
    with pytest.raises(dsl.DeviceError, match="target='cuda' needs a usable NVIDIA GPU"):
        f(np.ones(2))


def test_unknown_attribute_and_malformed_ir() -> None:
    text = """func.func @f(%arg0: tensor<2xf32>) -> tensor<2xf32> {
  %0 = "dsl.exp"(%arg0) {bogus = 1 : i64} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}"""
    with pytest.raises(dsl.IRParseError, match="bogus"):
        parse_module(text)
    with pytest.raises(dsl.IRParseError) as info:
        parse_module("func.func @f(%arg0: tensor<2xf32>) -> tensor<2xf32> {\n  %0 = \n}")
    assert info.value.line == 2


def test_returning_an_unsupported_object() -> None:
    with pytest.raises(dsl.TraceError, match="returned a str"):
        dsl.compile(lambda x: "nope")(np.ones(2))
