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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from compiler.ir.core import Function, Value
from compiler.ir.types import DType
from dsl import tracing
from runtime.errors import DSLError

INT32_SCALARS = "dsl.int32_scalars"
_INT32 = np.iinfo(np.int32)


class ScalarOverflowError(DSLError, OverflowError):
    """A Python int argument does not fit the integer dtype of the array it meets (NumPy 2 raises
    ``OverflowError`` for the same expression)."""


def narrowed_attrs(trace: tracing.Trace, params: Sequence[Value]) -> dict[str, tuple[int, ...]]:
    """The function attribute naming the parameters (Python int arguments) narrowed to int32."""
    found = tuple(k for k, p in enumerate(params) if trace.narrowed.get(p) is DType.i32)
    return {INT32_SCALARS: found} if found else {}


def call_check(func: Function) -> Callable[[Sequence[Any]], None] | None:
    """The check a call of ``func`` runs on its argument leaves, or None when there is none."""
    indices = tuple(int(k) for k in func.attrs.get(INT32_SCALARS, ()))
    if not indices:
        return None
    names = func.arg_names

    def check(leaves: Sequence[Any]) -> None:
        for k in indices:
            value = leaves[k]
            if not _INT32.min <= value <= _INT32.max:
                name = names[k] if k < len(names) else f"arg{k}"
                raise ScalarOverflowError(
                    f"{tracing.user_location()}: argument '{name}': Python integer {value} out of bounds "
                    "for int32 (it meets an int32 array, where NumPy 2 raises OverflowError too); "
                    "pass it as np.int64 or make the array int64"
                )

    return check
