"""Python int arguments that meet narrower integer arrays: NumPy 2's ``OverflowError`` at call time.

A Python number passed to a compiled function is traced as a weak scalar of the widest dtype of its
kind (``int64`` for an ``int``), whose value is known only when the function is called. Where it meets
an ``int32`` array, NumPy 2 (NEP 50) converts it to ``int32`` and raises ``OverflowError`` if it does
not fit: ``np.ones(3, np.int32) + 2**40``. The same literal written in the body raises at trace time
(``ops.constant``); an argument is checked on every call instead, before the program runs.

The tracer records which weak values were narrowed (``ops.note_narrowing``); ``narrowed_attrs`` names
the parameters among them in the traced function's attribute ``dsl.int32_scalars`` (a fact about the
calling convention, like ``dsl.writeback``), and ``call_check`` builds the check a call runs. Programs
without such a parameter pay one ``is None`` test per call.

Python float arguments stored into integer arrays (``x[i] = s``, ``x.fill_(s)``) are checked alike
(``dsl.floats_into_int32`` / ``dsl.floats_into_int64``): NumPy converts the float with ``int()``, so
NaN raises ``ValueError`` and an infinity or a number out of the dtype's range ``OverflowError``, where
a cast inside the program would store the integer minimum.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from compiler.ir.core import Function, Value
from compiler.ir.types import DType
from dsl import tracing
from runtime.errors import DSLError

INT32_SCALARS = "dsl.int32_scalars"
# Python float arguments stored into int32 / int64 arrays (``x[i] = s``): NumPy converts the float
# with ``int()``, raising ValueError for NaN and OverflowError for an infinity or a number out of range.
FLOATS_INTO = {DType.i32: "dsl.floats_into_int32", DType.i64: "dsl.floats_into_int64"}
_INT32 = np.iinfo(np.int32)
_INT64 = np.iinfo(np.int64)


class ScalarOverflowError(DSLError, OverflowError):
    """A Python int argument does not fit the integer dtype of the array it meets (NumPy 2 raises
    ``OverflowError`` for the same expression), or a float stored into an integer array does not."""


class ScalarValueError(DSLError, ValueError):
    """A float NaN stored into an integer array (NumPy raises ``ValueError``: no integer is NaN)."""


def int_of_float(value: float, dtype: DType, what: str) -> int:
    """NumPy's ``int()`` of a float stored into an array of integer ``dtype``: truncated toward zero;
    NaN raises ``ScalarValueError``, an infinity or a number out of the dtype's range
    ``ScalarOverflowError`` (``what`` names the store in the message, after the user's line)."""
    where = f"{tracing.user_location()}: {what}"
    if value != value:
        raise ScalarValueError(f"{where}: cannot convert float NaN to integer (NumPy raises ValueError too)")
    bounds = np.iinfo(dtype.np)
    if math.isinf(value) or not bounds.min <= int(value) <= bounds.max:
        raise ScalarOverflowError(
            f"{where}: {value!r} does not fit the {dtype.np} array it is stored into "
            "(NumPy raises OverflowError too)"
        )
    return int(value)


def narrowed_attrs(trace: tracing.Trace, params: Sequence[Value]) -> dict[str, tuple[int, ...]]:
    """The function attributes naming the parameters (Python number arguments) a call must check:
    ints narrowed to int32, floats stored into int32 or int64 arrays."""
    attrs = {}
    found = tuple(k for k, p in enumerate(params) if trace.narrowed.get(p) is DType.i32)
    if found:
        attrs[INT32_SCALARS] = found
    for dtype, name in FLOATS_INTO.items():
        found = tuple(k for k, p in enumerate(params) if trace.assigned_floats.get(p) is dtype)
        if found:
            attrs[name] = found
    return attrs


def int64_overflow(leaves: Sequence[Any], names: Sequence[str]) -> ScalarOverflowError | None:
    """The error for a Python int argument past int64, the type every Python int argument is
    passed as (converting it raised a bare ``OverflowError``), or None if there is none."""
    for k, value in enumerate(leaves):
        if type(value) is int and not _INT64.min <= value <= _INT64.max:
            name = names[k] if k < len(names) else f"arg{k}"
            return ScalarOverflowError(
                f"{tracing.user_location()}: argument '{name}': Python integer {value} does not fit int64, "
                f"the type a Python int argument is passed as; pass it as a float (float({name})) or "
                "write it into the function"
            )
    return None


def call_check(func: Function) -> Callable[[Sequence[Any]], None] | None:
    """The check a call of ``func`` runs on its argument leaves, or None when there is none."""
    indices = tuple(int(k) for k in func.attrs.get(INT32_SCALARS, ()))
    floats = [(int(k), dtype) for dtype, attr in FLOATS_INTO.items() for k in func.attrs.get(attr, ())]
    if not indices and not floats:
        return None
    names = func.arg_names

    def name(k: int) -> str:
        return names[k] if k < len(names) else f"arg{k}"

    def check(leaves: Sequence[Any]) -> None:
        for k in indices:
            value = leaves[k]
            if not _INT32.min <= value <= _INT32.max:
                raise ScalarOverflowError(
                    f"{tracing.user_location()}: argument '{name(k)}': Python integer {value} out of bounds "
                    "for int32 (it meets an int32 array, where NumPy 2 raises OverflowError too); "
                    "pass it as np.int64 or make the array int64"
                )
        for k, dtype in floats:
            int_of_float(float(leaves[k]), dtype, f"argument '{name(k)}'")

    return check
