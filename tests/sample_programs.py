"""Every compiled program of samples/*.py, lowered on small inputs: one table for the tests that walk
all samples (mlir-opt on each IR stage, the MLIR export). A sample whose programs are missing here
fails ``test_every_sample_has_programs``."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from compiler.ir.core import Function
from compiler.passes.fuse import fuse
from compiler.passes.plan import MemoryPlan, plan_buffers
from compiler.pipeline import Options, run_passes

SAMPLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "samples")


def load_sample(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"sample_{name}", os.path.join(SAMPLES_DIR, f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sample_names() -> list[str]:
    return sorted(f[:-3] for f in os.listdir(SAMPLES_DIR) if f.endswith(".py"))


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _mlp_forward(m: Any, rng: np.random.Generator) -> tuple[Any, ...]:
    params = [(_f32(rng, 8, 6), _f32(rng, 6)), (_f32(rng, 6, 4), _f32(rng, 4))]
    return (_f32(rng, 5, 8), params)


def _hessian_args(m: Any, rng: np.random.Generator) -> tuple[Any, ...]:
    params = [(rng.standard_normal((a, b)), rng.standard_normal(b)) for a, b in [(1, 4), (4, 4), (4, 1)]]
    return (params, rng.standard_normal((3, 1)))


def _train_mlp(m: Any, rng: np.random.Generator) -> tuple[Any, ...]:
    params = [_f32(rng, 2, 8), _f32(rng, 8), _f32(rng, 8, 1), _f32(rng, 1)]
    return (params, _f32(rng, 6, 2), _f32(rng, 6, 1), 0.1)


def _char_model(m: Any, rng: np.random.Generator) -> tuple[Any, ...]:
    params = m.init_params(rng, 5)
    return (params, rng.integers(0, 5, (4, m.CONTEXT)), rng.integers(0, 5, 4), 0.5)


# "sample:function" -> the arguments to trace it with (small shapes).
PROGRAMS: dict[str, Callable[[Any, np.random.Generator], tuple[Any, ...]]] = {
    "mlp_forward:mlp": _mlp_forward,
    "ir_dump:normalize_rows": lambda m, rng: (_f32(rng, 3, 4), 1e-5),
    "sgd_step:sgd_step": lambda m, rng: (_f32(rng, 7), _f32(rng, 7), 0.1),
    "train_mlp:step": _train_mlp,
    "char_model:step": _char_model,
    "hessian_mlp:d2u_dx2": _hessian_args,
    "hessian_mlp:d2u_dx2_unpruned": _hessian_args,
}


@cache
def sample_stages(program: str) -> dict[str, Function]:
    """Every IR stage of one sample program, ``bufferized`` included; no code is generated."""
    sample, _, fn_name = program.partition(":")
    module = load_sample(sample)
    compiled = getattr(module, fn_name)
    func, _, _, _ = compiled._trace(PROGRAMS[program](module, np.random.default_rng(0)))
    stages = run_passes(func, Options(verify=True, inplace=True))
    return stages


def sample_plan(program: str) -> MemoryPlan:
    """The memory plan ``Lowered.memory_plan()`` reports for the sample program."""
    optimized = sample_stages(program)["optimized"]
    return plan_buffers(optimized, fuse(optimized))
