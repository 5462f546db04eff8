"""NumPy's ufunc and reduction keywords on ``dsl.numpy``'s functions: ``out=``, ``where=``, ``dtype=``.

``install`` (called once at the end of ``dsl/numpy.py``) wraps the module's elementwise functions
(NumPy's ufuncs), its reductions and a few functions NumPy gives an ``out`` (``clip``, ``matmul``,
``cumsum`` ...), so that a program written for NumPy keeps its meaning:

- ``out=o`` (or ``out=(o,)``, how NumPy's ufunc protocol passes it) writes the result into ``o`` in
  place, as ``o[...] = r`` with NumPy's ``same_kind`` casting (``dsl.CastingError`` otherwise), and
  returns ``o`` itself; ``o`` must be an array of the compiled function (an argument or a value
  computed in it), which the plan may then update without a copy.
- ``where=m`` on an elementwise function needs ``out``: the elements of ``o`` where ``m`` is False
  keep their values (without ``out`` NumPy leaves them undefined: this raises, naming the line).
  On a reduction it reduces only the elements where ``m`` is True (``max``/``min`` need
  ``initial``, as in NumPy; ``mean``/``var``/``std`` divide by the count of them).
- ``dtype=`` on an elementwise function casts the operands to it first (NumPy's loop dtype, under
  ``casting``); ``casting=`` also rules the write into ``out``.

A call the function's signature refuses (``dnp.exp(x, order="F")``) raises ``dsl.CallError``, a
``TypeError``, at the user's line.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from dsl import ops, tracing
from dsl.array import Array
from dsl.binding import CallError
from dsl.errors import CastingError, ShapeError

UNARY = (
    "negative positive abs absolute sign square reciprocal floor ceil trunc rint isnan isinf isfinite "
    "exp log log1p expm1 cbrt signbit sqrt sin cos tan arcsin arccos arctan sinh cosh arcsinh arccosh "
    "arctanh log2 log10 exp2 tanh logical_not invert bitwise_not bitwise_invert"
).split()
BINARY = (
    "add subtract multiply divide true_divide fmod floor_divide remainder mod power maximum minimum "
    "fmax fmin copysign arctan2 hypot logaddexp logaddexp2 less less_equal greater greater_equal equal "
    "not_equal logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor left_shift right_shift"
).split()
REDUCTIONS = "sum prod max min amax amin any all mean var std".split()
OUT_ONLY = "clip matmul dot cumsum cumprod argmax argmin round around".split()


def install(namespace: dict[str, Any]) -> None:
    """Wrap the functions of ``namespace`` (``dsl.numpy``'s globals) named above, and give every other
    public function the error at the user's line for a call its signature refuses."""
    for name in UNARY + BINARY:
        if name in namespace:
            namespace[name] = _ufunc(namespace[name], name)
    for name in REDUCTIONS:
        namespace[name] = _reduction(namespace[name], name, namespace)
    for name in OUT_ONLY:
        namespace[name] = _with_out(namespace[name], name)


def _checked(fn: Callable[..., Any], name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``fn(*args, **kwargs)``; a TypeError because the signature refuses the call names the line."""
    try:
        return fn(*args, **kwargs)
    except TypeError:
        try:
            inspect.signature(fn).bind(*args, **kwargs)
        except TypeError as err:
            raise tracing.user_error(CallError, f"dsl.numpy.{name}(): {err}") from None
        raise


def _since() -> int:
    return len(tracing.current().ops)


def _ufunc(fn: Callable[..., Array], name: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapped(
        *args: Any,
        out: Any = None,
        where: Any = True,
        dtype: Any = None,
        casting: str = "same_kind",
        **kwargs: Any,
    ) -> Any:
        since = _since()
        if dtype is not None:
            target = ops.ir_dtype(dtype)
            args = tuple(_loop_operand(a, target, casting, name) for a in args)
        result = _checked(fn, name, args, kwargs)
        if out is None:
            if where is not True:
                raise tracing.user_error(
                    CallError,
                    f"dsl.numpy.{name}(..., where=...) needs out=: NumPy leaves the elements where the "
                    f"mask is False undefined; pass out=, or write dsl.numpy.where(mask, "
                    f"dsl.numpy.{name}(...), other)",
                )
            return result
        return write_out(out, result, where, casting, name, since)

    return wrapped


def _loop_operand(a: Any, target: ops.DType, casting: str, name: str) -> Any:
    """An operand of a ufunc called with ``dtype``: cast to it, under NumPy's casting rule (a Python
    number by its kind: NumPy casts it to the loop's type). The result is of that dtype, typed, as
    NumPy's (``remainder(5, 3, dtype=np.int64)`` is an int64, not a weak int)."""
    if not isinstance(a, Array):
        a = ops.asarray(a)
    if not ops.castable(a, target, casting):
        raise tracing.user_error(
            CastingError,
            f"dsl.numpy.{name}(..., dtype={target.np.name}): cannot cast a {a.dtype} operand to "
            f"{target.np.name} with casting rule '{casting}'; pass casting='unsafe' or use .astype()",
        )
    return ops.weakness(ops.cast(a, target), False)


def write_out(out: Any, result: Any, where: Any, casting: str, name: str, since: int) -> Array:
    """``out[...] = result`` (where ``where`` is True) as NumPy's ``out=``; returns ``out``."""
    if isinstance(out, tuple) and len(out) == 1:
        out = out[0]
    if isinstance(out, np.ndarray):  # (``a += x`` on a default's, a global's or a closure's array)
        raise tracing.user_error(
            CallError,
            f"dsl.numpy.{name}(..., out=...): out must be an array of the compiled function (an "
            "argument, or a value computed in it), not ndarray: a NumPy array (made in the body, a "
            "global, a closure's, or a parameter's default value, which, not passed, is a constant "
            "captured at definition time) cannot be written in place; pass it as an argument, or "
            "return the result instead",
        )
    if not isinstance(out, Array):
        raise tracing.user_error(
            CallError,
            f"dsl.numpy.{name}(..., out=...): out must be an array of the compiled function (an "
            f"argument, or a value computed in it), not {type(out).__name__}; return the result instead",
        )
    new = ops.fit(ops.asarray(result), out, casting, f"{name}(out=)")
    if where is not True:
        new = ops.where(ops.asarray(where), new, out)
    out.write(new.value, f"{name}(out=)", since)
    return out


def _with_out(fn: Callable[..., Array], name: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapped(*args: Any, out: Any = None, **kwargs: Any) -> Any:
        since = _since()
        result = _checked(fn, name, args, kwargs)
        return result if out is None else write_out(out, result, True, "same_kind", name, since)

    return wrapped


def _reduction(fn: Callable[..., Array], name: str, dnp: dict[str, Any]) -> Callable[..., Any]:
    # NumPy's mean writes its quotient into ``out`` unsafely (np.mean(x, out=int_array) truncates)
    casting = "unsafe" if name in ("mean", "var", "std") else "same_kind"

    @functools.wraps(fn)
    def wrapped(x: Any, *args: Any, out: Any = None, where: Any = True, **kwargs: Any) -> Any:
        since = _since()
        if where is True:
            result = _checked(fn, name, (x, *args), kwargs)
        else:
            result = _masked(fn, name, dnp, ops.asarray(x), ops.asarray(where), args, kwargs)
        return result if out is None else write_out(out, result, True, casting, name, since)

    return wrapped


def _masked(
    fn: Callable[..., Array],
    name: str,
    dnp: dict[str, Any],
    x: Array,
    mask: Array,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Array:
    """A reduction over the elements where ``mask`` (broadcast to ``x``) is True."""
    mask = ops.broadcast_to(ops.cast(mask, ops.DType.i1), x.shape)
    bound = inspect.signature(fn).bind(x, *args, **kwargs)  # (a refused call raised already: _checked)
    params = bound.arguments
    if name in ("mean", "var", "std"):
        return _masked_moment(name, x, mask, params)
    if name in ("max", "min", "amax", "amin"):
        if params.get("initial") is None:
            ufunc = "maximum" if name in ("max", "amax") else "minimum"
            raise tracing.user_error(
                ShapeError,
                f"reduction operation '{ufunc}' does not have an identity, so to use a where mask one "
                "has to specify 'initial'",
            )
        fill: Any = params["initial"]
    else:
        fill = {"sum": 0, "prod": 1, "any": False, "all": True}[name]
    first = next(iter(params))
    params[first] = dnp["where"](mask, x, ops.cast(ops.asarray(fill), x.ir_dtype))
    return fn(*bound.args, **bound.kwargs)


def _masked_moment(name: str, x: Array, mask: Array, params: dict[str, Any]) -> Array:
    """``np.mean/var/std(..., where=mask)`` (``numpy_stats``'s masked forms)."""
    from dsl import numpy_stats  # (imports dsl.numpy, which installs these keywords)

    axis, keepdims = params.get("axis"), params.get("keepdims", False)
    x = numpy_stats.moment_input(x, params.get("dtype"))
    if name == "mean":
        return numpy_stats.masked_mean(x, mask, axis, keepdims)
    correction = params.get("correction")
    ddof: float = correction if correction is not None else params.get("ddof", 0)
    v = numpy_stats.masked_var(x, mask, axis, ddof, keepdims)
    return numpy_stats.root_of_variance(v) if name == "std" else v
