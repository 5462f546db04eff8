"""The real ``mlir-opt`` accepts every dump, and its own re-printing of a dump parses back to the same IR."""

from __future__ import annotations

import os

import pytest
from mlir_tools import check_with_mlir_opt, find_mlir_opt, run_mlir_opt
from sample_programs import PROGRAMS, sample_stages
from test_ir_parser import ROUND_TRIP_CASES

from compiler.ir.parser import parse_module
from compiler.ir.printer import print_module
from compiler.pipeline import STAGES


@pytest.mark.parametrize("case", sorted(ROUND_TRIP_CASES))
def test_mlir_opt_accepts_the_dump(case: str) -> None:
    check_with_mlir_opt(print_module(ROUND_TRIP_CASES[case]))


@pytest.mark.parametrize("case", sorted(ROUND_TRIP_CASES))
def test_mlir_opt_output_parses_back(case: str) -> None:
    """MLIR re-prints floats (``2.500000e+00``) and strings (``\\22``) its own way; values must survive."""
    funcs = ROUND_TRIP_CASES[case]
    text = print_module(funcs)
    reprinted = run_mlir_opt(text, "--mlir-print-debuginfo", "--mlir-print-local-scope")
    back = parse_module(reprinted, "mlir-opt-output.mlir")
    # mlir-opt gives every argument a location; keep only those the original had.
    back = [
        b.replace_body(b.body, arg_locs=b.arg_locs[: len(f.arg_locs)])
        for f, b in zip(funcs, back, strict=True)
    ]
    assert print_module(back) == text


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_every_stage_of_every_sample_passes_mlir_opt(program: str) -> None:
    """Each stage of each program in samples/ (one module, a function per stage, renamed apart)."""
    stages = sample_stages(program)
    assert list(stages) == list(STAGES)
    funcs = [f.replace_body(f.body, name=f"{f.name}_{stage}") for stage, f in stages.items()]
    check_with_mlir_opt(print_module(funcs))


def test_check_reports_mlir_opt_errors() -> None:
    broken = 'func.func @f() {\n  %0 = "dsl.neg"(%1) : (tensor<f32>) -> tensor<f32>\n  return\n}\n'
    with pytest.raises(AssertionError, match="use of undeclared SSA value"):
        check_with_mlir_opt(broken)


@pytest.mark.skipif(not os.path.exists("/usr/lib/llvm-22/bin/mlir-opt"), reason="no LLVM 22 install here")
def test_finds_the_installed_mlir_opt() -> None:
    assert find_mlir_opt() is not None


def test_a_batch_with_one_bad_module_fails_naming_it() -> None:
    """``check_all_with_mlir_opt`` (the tests' batched check): one module mlir-opt rejects fails the
    batch, the message shows that module, and the good ones are still accepted alone."""
    from mlir_tools import check_all_with_mlir_opt

    if find_mlir_opt() is None:
        pytest.skip("mlir-opt not installed: apt-get install mlir-22-tools")
    good = ["func.func @f() {\n  return\n}\n", "func.func @g() {\n  return\n}\n"]
    bad = "func.func @h() {\n  %0 = arith.constant 1 : i32\n  return %0 : i32\n}\n"
    with pytest.raises(AssertionError, match=r"(?s)returns 0.*@h"):
        check_all_with_mlir_opt([good[0], bad, good[1]])
    check_all_with_mlir_opt(good)
