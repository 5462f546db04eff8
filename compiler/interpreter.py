"""The reference interpreter: runs IR with each primitive's NumPy reference. The oracle of the tests."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.ir.core import Block, Function, Value


def interpret(func: Function, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Evaluate ``func`` on NumPy arrays; returns one array per function result (write-backs included)."""
    if len(args) != len(func.params):
        raise TypeError(f"{func.name} takes {len(func.params)} arguments, got {len(args)}")
    env: dict[Value, np.ndarray] = {}
    for param, arg in zip(func.params, args, strict=True):
        env[param] = np.asarray(arg, dtype=param.type.dtype.np).reshape(param.type.shape)
    return [np.array(v, copy=True) for v in _run_block(func.body, env)]


def _run_block(block: Block, env: dict[Value, np.ndarray]) -> list[np.ndarray]:
    """Run ``block`` with its arguments already in ``env``; a region op runs its own blocks, reading the
    values of the blocks around it from the same ``env`` (a region sees the values above it)."""

    def run_region(region: Block, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        for param, arg in zip(region.args, args, strict=True):
            env[param] = arg
        return _run_block(region, env)

    for op in block.ops:
        operands = [env[v] for v in op.operands]
        if op.prim.region_reference is not None:
            results = op.prim.region_reference(operands, op.attrs, op.regions, run_region)
            env.update(zip(op.results, results, strict=True))
        else:
            (result,) = op.results
            env[result] = op.prim.run_reference(operands, op.attrs)
    return [env[v] for v in block.results]
