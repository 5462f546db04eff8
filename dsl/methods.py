"""Operators and methods of the traced ``Array``: NumPy's, plus Paddle/PyTorch-style in-place ones.

In-place methods (``add_``, ``x += y``, ``x[i] = v`` ...) compute the new value out of place, check
that it fits the array (no broadcasting the target, NumPy's ``same_kind`` casting rule), write it
through ``Array.write`` and return the array itself, so ``x.scale_(2.0) is x``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dsl import nn, ops, tracing
from dsl import numpy as dnp
from dsl.array import Array
from dsl.errors import TraceError


def _inplace(request: str, compute: Callable[..., Any], casting: str = "same_kind") -> Callable[..., Array]:
    def method(self: Array, *args: Any, **kwargs: Any) -> Array:
        since = len(tracing.current().ops)
        new = ops.fit(ops.asarray(compute(self, *args, **kwargs)), self, casting, request)
        self.write(new.value, request, since)
        return self

    method.__name__ = request
    method.__doc__ = f"In place: ``x.{request}(...)`` stores the result in ``x`` and returns ``x``."
    return method


def _swap(f: Callable[[Any, Any], Array]) -> Callable[[Any, Any], Array]:
    return lambda self, other: f(other, self)


def _scale(x: Array, scale: Any = 1.0, bias: Any = 0.0, bias_after_scale: bool = True) -> Array:
    """Paddle's ``scale_``: ``x * scale + bias`` (or ``(x + bias) * scale``)."""
    if isinstance(bias, (int, float)) and bias == 0:
        return dnp.multiply(x, scale)
    return (
        dnp.add(dnp.multiply(x, scale), bias) if bias_after_scale else dnp.multiply(dnp.add(x, bias), scale)
    )


def _fill(x: Array, value: Any) -> Array:
    return ops.broadcast_to(ops.to_dtype(value, x.ir_dtype), x.shape)


def _copy_from(x: Array, src: Any) -> Array:
    return ops.cast(ops.broadcast_to(src, x.shape), x.ir_dtype)  # like torch's copy_: any cast


BINARY = {
    "add": dnp.add,
    "sub": dnp.subtract,
    "mul": dnp.multiply,
    "truediv": dnp.divide,
    "floordiv": dnp.floor_divide,
    "mod": dnp.remainder,
    "pow": dnp.power,
    "matmul": dnp.matmul,
    "and": dnp.bitwise_and,
    "or": dnp.bitwise_or,
    "xor": dnp.bitwise_xor,
    "lshift": dnp.left_shift,
    "rshift": dnp.right_shift,
}
COMPARE = {
    "lt": dnp.less,
    "le": dnp.less_equal,
    "gt": dnp.greater,
    "ge": dnp.greater_equal,
    "eq": dnp.equal,
    "ne": dnp.not_equal,
}
AUGMENTED = {"iadd": ("+=", dnp.add), "isub": ("-=", dnp.subtract), "imul": ("*=", dnp.multiply)}
AUGMENTED["itruediv"] = ("/=", dnp.divide)
AUGMENTED["ifloordiv"] = ("//=", dnp.floor_divide)
AUGMENTED["imod"] = ("%=", dnp.remainder)
AUGMENTED["iand"] = ("&=", dnp.bitwise_and)
AUGMENTED["ior"] = ("|=", dnp.bitwise_or)
AUGMENTED["ixor"] = ("^=", dnp.bitwise_xor)
AUGMENTED["ilshift"] = ("<<=", dnp.left_shift)
AUGMENTED["irshift"] = (">>=", dnp.right_shift)
INPLACE: dict[str, Callable[..., Array]] = {
    "add_": dnp.add,
    "sub_": dnp.subtract,
    "mul_": dnp.multiply,
    "div_": dnp.divide,
    "pow_": dnp.power,
    "exp_": dnp.exp,
    "log_": dnp.log,
    "sqrt_": dnp.sqrt,
    "sin_": dnp.sin,
    "cos_": dnp.cos,
    "tanh_": dnp.tanh,
    "abs_": dnp.abs,
    "neg_": dnp.negative,
    "relu_": nn.relu,
    "sigmoid_": nn.sigmoid,
    "clip_": dnp.clip,
    "scale_": _scale,
    "zero_": lambda x: _fill(x, 0),
    "fill_": _fill,
}

# NumPy ufuncs and functions called on traced arrays dispatch to dsl.numpy by name.
_UFUNC_NAMES = {"true_divide": "divide", "absolute": "abs"}


def _array_ufunc(self: Array, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
    name = _UFUNC_NAMES.get(ufunc.__name__, ufunc.__name__)
    fn = getattr(dnp, name, None)
    if method != "__call__" or fn is None or kwargs:
        raise tracing.user_error(
            TraceError, f"numpy.{ufunc.__name__} ({method}) is not supported on traced arrays; use dsl.numpy"
        )
    return fn(*inputs)


def _array_function(self: Array, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
    fn = getattr(dnp, func.__name__, None)
    if fn is None:
        raise tracing.user_error(
            TraceError, f"numpy.{func.__name__} is not supported on traced arrays; use dsl.numpy"
        )
    return fn(*args, **kwargs)


def install(cls: type[Array]) -> None:
    """Attach every operator and method to ``Array`` (called once when ``dsl.array`` loads)."""
    for name, f in BINARY.items():
        setattr(cls, f"__{name}__", f)
        setattr(cls, f"__r{name}__", _swap(f))
    setattr(cls, "__divmod__", dnp.divmod)  # noqa: B010 (a tuple result: not in BINARY's type)
    setattr(cls, "__rdivmod__", lambda x, y: dnp.divmod(y, x))  # noqa: B010
    for name, f in COMPARE.items():
        setattr(cls, f"__{name}__", f)
    for name, (request, op) in AUGMENTED.items():
        setattr(cls, f"__{name}__", _inplace(request, op))
    for name, compute in INPLACE.items():
        setattr(cls, name, _inplace(name, compute))
    for name, value in _plain_methods().items():
        setattr(cls, name, value)


def _reshape(self: Array, *shape: Any) -> Array:
    return ops.reshape(self, shape[0] if len(shape) == 1 else shape)


def _transpose(self: Array, *axes: Any) -> Array:
    if len(axes) == 1 and not isinstance(axes[0], int):
        axes = tuple(axes[0])
    return ops.transpose(self, axes or None)


def _positive(self: Array) -> Array:
    """``+x``: a new array in NumPy, not ``x``, laid out as a ufunc's result."""
    return ops.new_storage(self, ops.ufunc_shadow([self]))


def _reducer(fn: Callable[..., Array]) -> Callable[..., Array]:
    def method(self: Array, axis: Any = None, keepdims: bool = False) -> Array:
        return fn(self, axis, keepdims)

    return method


def _plain_methods() -> dict[str, Any]:
    return {
        "copy_": _inplace("copy_", _copy_from, casting="unsafe"),
        "__neg__": dnp.negative,
        "__pos__": _positive,
        "__abs__": dnp.abs,
        "__invert__": dnp.invert,
        "__array_ufunc__": _array_ufunc,
        "__array_function__": _array_function,
        "reshape": _reshape,
        "transpose": _transpose,
        "sum": _reducer(dnp.sum),
        "mean": _reducer(dnp.mean),
        "max": _reducer(dnp.max),
        "min": _reducer(dnp.min),
        "astype": dnp.astype,
        "copy": ops.new_storage,
        "clip": dnp.clip,
        "ravel": dnp.ravel,
        "flatten": lambda self: ops.new_storage(dnp.ravel(self)),
        "squeeze": dnp.squeeze,
        "dot": dnp.dot,
    }
