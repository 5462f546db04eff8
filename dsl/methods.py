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
    return dnp.add(dnp.multiply(x, scale), bias) if bias_after_scale else dnp.multiply(dnp.add(x, bias), scale)


def _fill(x: Array, value: Any) -> Array:
    return ops.broadcast_to(ops.to_dtype(value, x.ir_dtype), x.shape)


def _copy_from(x: Array, src: Any) -> Array:
    return ops.cast(ops.broadcast_to(src, x.shape), x.ir_dtype)  # like torch's copy_: any cast


BINARY = {
    "add": dnp.add,
    "sub": dnp.subtract,
    "mul": dnp.multiply,
    "truediv": dnp.divide,
    "pow": dnp.power,
    "matmul": dnp.matmul,
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
INPLACE = {
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
    for name, f in COMPARE.items():
        setattr(cls, f"__{name}__", f)
    for name, (request, f) in AUGMENTED.items():
        setattr(cls, f"__{name}__", _inplace(request, f))
    for name, f in INPLACE.items():
        setattr(cls, name, _inplace(name, f))
    cls.copy_ = _inplace("copy_", _copy_from, casting="unsafe")  # type: ignore[attr-defined]
    cls.__neg__ = dnp.negative  # type: ignore[assignment]
    cls.__pos__ = lambda self: self  # type: ignore[assignment]
    cls.__abs__ = dnp.abs  # type: ignore[assignment]
    cls.__and__ = dnp.logical_and  # type: ignore[assignment]
    cls.__or__ = dnp.logical_or  # type: ignore[assignment]
    cls.__invert__ = dnp.logical_not  # type: ignore[assignment]
    cls.__array_ufunc__ = _array_ufunc  # type: ignore[attr-defined]
    cls.__array_function__ = _array_function  # type: ignore[attr-defined]
    cls.reshape = lambda self, *shape: ops.reshape(self, shape[0] if len(shape) == 1 else shape)  # type: ignore[assignment]
    cls.transpose = lambda self, *axes: ops.transpose(  # type: ignore[assignment]
        self, (axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes) or None
    )
    cls.sum = lambda self, axis=None, keepdims=False: dnp.sum(self, axis, keepdims)  # type: ignore[attr-defined]
    cls.mean = lambda self, axis=None, keepdims=False: dnp.mean(self, axis, keepdims)  # type: ignore[attr-defined]
    cls.max = lambda self, axis=None, keepdims=False: dnp.max(self, axis, keepdims)  # type: ignore[attr-defined]
    cls.min = lambda self, axis=None, keepdims=False: dnp.min(self, axis, keepdims)  # type: ignore[attr-defined]
    cls.astype = dnp.astype  # type: ignore[attr-defined]
    cls.copy = ops.new_storage  # type: ignore[attr-defined]
    cls.clip = dnp.clip  # type: ignore[attr-defined]
    cls.ravel = dnp.ravel  # type: ignore[attr-defined]
    cls.flatten = lambda self: ops.new_storage(dnp.ravel(self))  # type: ignore[attr-defined]
    cls.squeeze = dnp.squeeze  # type: ignore[attr-defined]
    cls.dot = dnp.dot  # type: ignore[attr-defined]
