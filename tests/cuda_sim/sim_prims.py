"""Every primitive on the CUDA backend, in the simulator: forward (the registry table's programs) and
backward (each vjp rule's joint program), with in-place on and off, against the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest
import test_prims_registry as registry
import test_vjp_rules as rules

from compiler.codegen import build_cuda_executable
from compiler.interpreter import interpret
from compiler.ir.core import Op, Value
from compiler.pipeline import Options, plan_program


def run_cuda(func, args, inplace: bool) -> list[np.ndarray]:
    executable, *_ = build_cuda_executable(plan_program(func, Options(target="cuda", inplace=inplace)))
    with np.errstate(all="ignore"):
        return list(executable(*args))


@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "no-inplace"])
@pytest.mark.parametrize("name", registry.ARRAY_PRIMS)
def test_forward(name: str, inplace: bool) -> None:
    cases = registry.TABLE[name].cases()
    func, args = registry.build(name, cases)
    with np.errstate(all="ignore"):
        want = interpret(func, args)
    got = run_cuda(func, args, inplace)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        shapes = [a.shape for a in cases[i].operands]
        registry.assert_same(g, w, f"{name} case {i}: {cases[i].attrs} {shapes}")


@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "no-inplace"])
@pytest.mark.parametrize("name", rules.DIFFERENTIABLE)
def test_backward(name: str, inplace: bool) -> None:
    """forward + the rule's backward ops as one program: every cotangent it computes."""
    for i, case in enumerate(rules.cases_of(name)):
        params, ops, out = rules.forward(name, case)
        diff = rules.diff_operands(case, params)
        ct = Value(out.type)
        emitted: list[Op] = []
        grads = rules.reverse_sweep(ops, [(out, ct)], [params[k] for k in diff], emitted)
        present = [out] + [g for g in grads if g is not None]
        func = rules.program(params + [ct], ops + emitted, present)
        args = list(case.operands) + [rules.normal(*out.type.shape).astype(out.type.dtype.np)]
        with np.errstate(all="ignore"):
            want = interpret(func, args)
        got = run_cuda(func, args, inplace)
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            registry.assert_same(g, w, f"{name} case {i} result {k}")
