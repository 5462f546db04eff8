"""The reference interpreter: runs IR with each primitive's NumPy reference. The oracle of the tests."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.ir.core import Function, Value


def interpret(func: Function, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Evaluate ``func`` on NumPy arrays; returns one array per function result (write-backs included)."""
    if len(args) != len(func.params):
        raise TypeError(f"{func.name} takes {len(func.params)} arguments, got {len(args)}")
    env: dict[Value, np.ndarray] = {}
    for param, arg in zip(func.params, args, strict=True):
        env[param] = np.asarray(arg, dtype=param.type.dtype.np).reshape(param.type.shape)
    for op in func.ops:
        (result,) = op.results
        env[result] = op.prim.run_reference([env[v] for v in op.operands], op.attrs)
    return [np.array(env[v], copy=True) for v in func.results]
