"""The samples run end to end, and every IR stage of their programs round-trips and passes mlir-opt."""

from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest
from cuda_ptx import PTX_AVAILABLE, check_ptx
from helpers import check_lowered

SAMPLES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "samples")


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"sample_{name}", os.path.join(SAMPLES, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", sorted(f[:-3] for f in os.listdir(SAMPLES) if f.endswith(".py")))
def test_sample_runs(name: str, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each sample runs (checking its own results against NumPy; it raises on a mismatch), and every
    program it compiles also compiles to PTX for sm_80 and sm_90 where NVVM is installed."""
    dsl_compile = sys.modules["dsl.compile"]  # the module (``dsl.compile`` is the function)
    compiled = []
    original = dsl_compile.compile_function

    def record(func, options):
        program = original(func, options)
        compiled.append(program.stages["optimized"])
        return program

    monkeypatch.setattr(dsl_compile, "compile_function", record)
    load(name).main()
    assert capsys.readouterr().out
    assert compiled, f"sample {name} compiled nothing"
    if PTX_AVAILABLE:
        for i, func in enumerate(compiled):
            check_ptx(func, f"sample {name} program {i}")


def test_sample_programs_text_form() -> None:
    rng = np.random.default_rng(0)
    mlp = load("mlp_forward")
    params = [(rng.standard_normal((8, 4)).astype(np.float32), np.zeros(4, np.float32))] * 2
    check_lowered(
        mlp.mlp.lower(
            rng.standard_normal((3, 8)).astype(np.float32), [params[0], (params[0][0][:4], params[0][1])]
        )
    )
    dump = load("ir_dump")
    check_lowered(dump.normalize_rows.lower(np.ones((3, 4), np.float32), 1e-5))
    sgd = load("sgd_step")
    check_lowered(sgd.sgd_step.lower(np.ones(5, np.float32), np.ones(5, np.float32), 0.1))


def _sample_programs():
    rng = np.random.default_rng(1)
    mlp = load("mlp_forward")
    params = [
        (rng.standard_normal((8, 6)).astype(np.float32), rng.standard_normal(6).astype(np.float32)),
        (rng.standard_normal((6, 4)).astype(np.float32), np.zeros(4, np.float32)),
    ]
    x = rng.standard_normal((5, 8)).astype(np.float32)
    yield mlp.mlp.__wrapped__, (x, params)
    yield load("ir_dump").normalize_rows.__wrapped__, (rng.standard_normal((3, 4)).astype(np.float32), 1e-5)
    w, g = rng.standard_normal(7).astype(np.float32), rng.standard_normal(7).astype(np.float32)
    yield load("sgd_step").sgd_step.__wrapped__, (w, g, 0.1)


def test_samples_identical_with_inplace_off_and_under_the_sanitizer(monkeypatch) -> None:
    import copy

    import dsl

    for fn, args in _sample_programs():
        outputs = []
        for mode in ("on", "off", "sanitize"):
            monkeypatch.setenv("DSL_SANITIZE", "1" if mode == "sanitize" else "0")
            compiled = dsl.compile(fn, inplace=mode != "off")
            mode_args = copy.deepcopy(args)  # sgd_step mutates its first argument
            outputs.append((compiled(*mode_args), mode_args))
        (first, first_args), *rest = outputs
        for out, mode_args in rest:
            np.testing.assert_equal(out, first)
            np.testing.assert_equal(mode_args, first_args)
