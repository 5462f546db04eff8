"""The ``dslc`` command line: every subcommand and ``--emit`` kind, exit statuses, one-line errors
naming the user's file and line, complete ``--help``, ``run`` on IR text, and ``plan --plot``."""

from __future__ import annotations

import argparse
import os
import re
import struct
import subprocess
import sys
import warnings

import numpy as np
import pytest
from mlir_tools import find_mlir_opt

from compiler import cli
from compiler.pipeline import PASSES
from compiler.plot import figure_pixels

MODEL = os.path.join(os.path.dirname(__file__), "lit", "Inputs", "model.py")
MLP = [f"{MODEL}:mlp", "--arg", "f32[4,8]", "--arg", "f32[8,8]", "--arg", "f32[8,3]"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SGD_ARGS = ["--arg", "f32[256,128]", "--arg", "f32[256,128]", "--arg", "f32"]  # samples/sgd_step.py
IR = """func.func @affine(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<f32>) {
  %0 = "dsl.broadcast"(%arg1) {shape = array<i64: 2, 3>} : (tensor<3xf32>) -> tensor<2x3xf32>
  %1 = "dsl.add"(%arg0, %0) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = "dsl.reduce_sum"(%1) {axes = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
  return %1, %2 : tensor<2x3xf32>, tensor<f32>
}
"""


def dslc(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``dslc argv`` in this process; (exit status, stdout, stderr). Usage errors exit via SystemExit."""
    try:
        code = cli.main(list(argv))
    except SystemExit as stop:
        code = int(stop.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def ir_file(tmp_path) -> str:
    path = tmp_path / "affine.mlir"
    path.write_text(IR)
    return str(path)


# ---- help and usage -----------------------------------------------------------------------------


def _all_parsers() -> list[argparse.ArgumentParser]:
    parser = cli.build_parser()
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return [parser, *subs[0].choices.values()]


def test_every_option_of_every_command_has_help() -> None:
    for parser in _all_parsers():
        for action in parser._actions:
            assert action.help, f"{parser.prog}: {action.option_strings or action.dest} has no help text"


@pytest.mark.parametrize("command", [[], ["compile"], ["opt"], ["plan"], ["run"]])
def test_help_exits_0_and_lists_options(capsys, command: list[str]) -> None:
    code, out, _ = dslc(capsys, *command, "--help")
    assert code == 0
    if not command:
        assert all(name in out for name in ("compile", "opt", "plan", "run"))
    else:
        assert "--" in out and "usage: dslc" in out


@pytest.mark.parametrize(
    "argv",
    [
        [],  # no command
        ["compile", f"{MODEL}:mlp", "--arg", "f16[4]"],  # a dtype dslc does not have
        ["compile", MODEL, "--arg", "f32[4]"],  # no :FUNC
        ["compile", *MLP, "--emit", "asm"],
        ["opt", "-", "--passes", "simplify,nonsense"],
        ["run", "-", "--input", "a.npy", "--arg", "f32[2]"],
        ["compile", f"{MODEL}:scaled", "--arg", "f32[4,]"],  # a dimension missing (was f32[4])
        ["compile", f"{MODEL}:scaled", "--arg", "f32[4,,2]"],
        ["compile", f"{MODEL}:scaled", "--arg", "f32[4]", "--emit", "ptx", "--arch", "sm_1"],
    ],
)
def test_usage_errors_exit_2(capsys, argv: list[str]) -> None:
    code, _, err = dslc(capsys, *argv)
    assert code == 2, err
    assert "usage:" in err


# ---- user errors: one line naming the user's file and line ---------------------------------------


def test_shape_error_in_the_traced_function_is_one_line_naming_its_line(capsys) -> None:
    code, out, err = dslc(capsys, "compile", f"{MODEL}:mismatched", "--arg", "f32[4,8]", "--arg", "f32[4,8]")
    assert code == 1 and out == ""
    assert len(err.splitlines()) == 1
    assert re.match(r"dslc: error: .*model\.py:17: matmul: shapes \(4, 8\) and \(4, 8\) are not aligned", err)


def test_python_error_in_user_code_names_the_line_and_debug_shows_the_traceback(capsys) -> None:
    argv = ["compile", f"{MODEL}:undefined_name", "--arg", "f32[4]"]
    code, _, err = dslc(capsys, *argv)
    assert code == 1 and len(err.splitlines()) == 1
    assert re.search(r"model\.py:21: NameError: name 'missing_variable' is not defined", err)
    for debug in (["--debug", *argv], [*argv, "--debug"]):
        code, _, err = dslc(capsys, *debug)
        assert code == 1 and "Traceback (most recent call last)" in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["compile", "nowhere.py:f", "--arg", "f32[2]"], "no such file: nowhere.py"),
        (["compile", f"{MODEL}:nope"], "has no function named 'nope'"),
        (["opt", "missing.mlir"], "cannot read missing.mlir"),
        (
            ["compile", f"{MODEL}:mlp", "--arg", "f32[4]"],
            "model.py:7: mlp: missing a required argument: 'w1'",
        ),
        # (was an internal error: FileNotFoundError)
        (["compile", *MLP, "-o", "/nonexistent-dir/out.mlir"], "cannot write /nonexistent-dir/out.mlir"),
        # the function's own line (was the dslc script's)
        (["compile", *MLP, "--grad", "5"], "model.py:7: argnums 5 is out of range"),
    ],
)
def test_user_errors_exit_1(capsys, argv: list[str], message: str) -> None:
    code, _, err = dslc(capsys, *argv)
    assert code == 1 and message in err and len(err.splitlines()) == 1


def test_console_script_exit_status(tmp_path) -> None:
    """The real process: a usage error exits 2, a user error 1 with one line and no traceback."""
    run = [sys.executable, "-m", "compiler.cli"]
    usage = subprocess.run([*run, "compile"], capture_output=True, text=True, timeout=120)
    assert usage.returncode == 2 and "usage: dslc compile" in usage.stderr
    path = tmp_path / "bad.mlir"
    path.write_text('func.func @f() {\n  "dsl.nope"() : () -> ()\n  return\n}\n')
    user = subprocess.run([*run, "opt", str(path)], capture_output=True, text=True, timeout=120)
    assert user.returncode == 1 and user.stderr.count("\n") == 1 and "bad.mlir:2:" in user.stderr


# ---- compile --emit ---------------------------------------------------------------------------


def test_print_ir_after_all_names_each_pass(capsys) -> None:
    code, out, _ = dslc(capsys, "compile", *MLP, "--print-ir-after-all")
    assert code == 0
    headers = re.findall(r"// -----// IR Dump After (.*) //----- //", out)
    assert headers == [
        "trace (traced)",
        "close_regions (closed)",
        "functionalize (functional)",
        "autodiff (grad)",
        "unroll_regions (unrolled)",
        "simplify (simplified)",
        "if_to_select (selected)",
        "remat (rematerialized)",
        "schedule (optimized)",
        "fuse (fused)",
        "rows (row_fused)",
        "plan (planned)",
        "loops (looped)",
        "kernels (kernels)",
        "regions (regions)",
        "scratch (scratch)",
        "bufferize (bufferized)",
    ]


def test_emit_plan_and_numba(capsys) -> None:
    assert "peak 192 bytes" in dslc(capsys, "compile", *MLP, "--emit", "plan")[1]
    source = dslc(capsys, "compile", *MLP, "--emit", "numba")[1]
    assert "@numba.njit" in source and "def run(arena" in source


def test_a_syntax_error_in_the_users_file_is_a_user_error_at_its_line(capsys, tmp_path) -> None:
    src = tmp_path / "broken.py"
    src.write_text("import dsl\n\ndef f(x:\n    return x\n")
    code, _, err = dslc(capsys, "compile", f"{src}:f", "--arg", "f32[2]")
    assert code == 1 and err.startswith(f"dslc: error: {src}:3: SyntaxError: ") and "internal" not in err


def test_plan_of_a_gradient_is_compiles_plan(capsys) -> None:
    loss = [f"{MODEL}:loss", "--arg", "f32[16,8]", "--arg", "f32[8,8]"]
    code, out, _ = dslc(capsys, "plan", *loss, "--grad", "1")
    assert code == 0 and "peak" in out
    assert out == dslc(capsys, "compile", *loss, "--grad", "1", "--emit", "plan")[1]
    assert out != dslc(capsys, "plan", *loss)[1]


def test_emit_llvm_has_every_kernel_and_the_driver(capsys) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning of Numba's on the user's terminal
        code, out, _ = dslc(capsys, "compile", *MLP, "--emit", "llvm")
    assert code == 0
    # the float matmuls are calls of the runtime's gemm_rows (shown once: one signature)
    assert re.findall(r"^; ---- (\w+)\(", out, re.M) == [
        "gemm_rows_serial",
        "k1_tanh",
        "k3_reduce_sum",
        "run",
    ]
    assert out.count("\ndefine ") >= 4 and "target triple" in out and "numba_xxgemm" in out


def test_emit_ptx_for_each_arch(capsys) -> None:
    from cuda_ptx import PTX_AVAILABLE, PTX_UNAVAILABLE

    if not PTX_AVAILABLE:
        pytest.skip(PTX_UNAVAILABLE)
    for arch in ("sm_80", "sm_90"):
        code, out, _ = dslc(capsys, "compile", *MLP, "--emit", "ptx", "--arch", arch)
        assert code == 0
        kernels = re.findall(r"^// ===== kernel (\w+) \((sm_\d+)\)", out, re.M)
        assert kernels and {a for _, a in kernels} == {arch}
        assert out.count(f".target {arch}") == len(kernels)
        assert "_matmul_f32" in {k for k, _ in kernels}
    assert dslc(capsys, "compile", *MLP, "--emit", "ptx", "--arch", "volta")[0] == 2  # a usage error


def test_compile_for_cuda_needs_no_gpu(capsys) -> None:
    """``--target cuda`` compiles, plans and prints on a machine without a GPU (issue 26, item 5):
    the device is needed to run, not to compile."""
    from cuda_ptx import PTX_AVAILABLE, PTX_UNAVAILABLE

    sample = [os.path.join(ROOT, "samples", "sgd_step.py") + ":sgd_step", *SGD_ARGS]
    for emit in ("plan", "bufferized", "numba"):
        code, out, err = dslc(capsys, "compile", *sample, "--target", "cuda", "--emit", emit)
        assert code == 0, err
    assert "cuda.jit" in out
    code, out, err = dslc(capsys, "plan", *sample, "--target", "cuda")
    assert code == 0 and "peak" in out, err
    if not PTX_AVAILABLE:
        pytest.skip(PTX_UNAVAILABLE)
    code, out, err = dslc(capsys, "compile", *sample, "--target", "cuda", "--emit", "ptx")
    assert code == 0 and ".target sm_90" in out, err


def test_opt_runs_every_pass_of_the_pipeline_by_name(capsys, tmp_path) -> None:
    path = tmp_path / "affine.mlir"
    path.write_text(IR)
    names = [p.name for p in PASSES]
    code, out, err = dslc(capsys, "opt", str(path), "--passes", ",".join(names), "--print-ir-after-all")
    assert code == 0, err
    headers = re.findall(r"// -----// IR Dump After (\w+) \((\w+)\) //----- //", out)
    assert headers == [(p.name, p.stage) for p in PASSES]
    assert "memref<2x3xf32>" in out.rsplit("IR Dump After", 1)[1]
    code, _, err = dslc(capsys, "opt", str(path), "--passes", "plan")
    assert code == 1 and "pass 'plan' needs the fusion plan that pass 'fuse' makes" in err


def test_emit_mlir_is_upstream_mlir(capsys, tmp_path) -> None:
    out_file = tmp_path / "mlp.mlir"
    code, _, _ = dslc(capsys, "compile", *MLP, "--emit", "mlir", "-o", str(out_file))
    text = out_file.read_text()
    assert code == 0 and "linalg.matmul" in text and "math.tanh" in text and '"dsl.' not in text
    mlir_opt = find_mlir_opt()
    if mlir_opt is not None:
        proc = subprocess.run([mlir_opt, str(out_file)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


def _check_dot(text: str) -> tuple[set[str], list[tuple[str, str]]]:
    """A small DOT structure check: balanced braces, one statement per line, edges between nodes."""
    assert text.startswith("digraph ") and text.rstrip().endswith("}")
    assert text.count("{") == text.count("}")
    nodes, edges = set(), []
    for line in text.splitlines()[1:-1]:
        line = line.strip()
        if m := re.fullmatch(r'(\w+) -> (\w+) \[label="[^"]*"\];', line):
            edges.append((m.group(1), m.group(2)))
        elif m := re.fullmatch(r"(\w+) \[shape=\w+(?:, [a-z]+=\w+)*, label=\"(?:[^\"\\]|\\.)*\"\];", line):
            nodes.add(m.group(1))
        else:
            assert re.fullmatch(r"(rankdir=TB;|node \[.*\];|subgraph cluster_\d+ \{|label=.*;|\})", line), (
                line
            )
    assert all(a in nodes and b in nodes for a, b in edges)
    return nodes, edges


def test_emit_dot_is_a_dataflow_graph(capsys) -> None:
    code, out, _ = dslc(capsys, "compile", *MLP, "--emit", "dot")
    assert code == 0
    nodes, edges = _check_dot(out)
    assert nodes == {"arg0", "arg1", "arg2", "op0", "op1", "op2", "op3", "result0"}
    assert ("op0", "op1") in edges and ("op3", "result0") in edges
    assert 'label="tanh\\ntensor<4x8xf32>\\nmodel.py:8"' in out


def test_emit_dot_clusters_fused_kernels(capsys) -> None:
    code, out, _ = dslc(
        capsys, "compile", f"{MODEL}:loss", "--arg", "f32[4,8]", "--arg", "f32[8,3]", "--emit", "dot"
    )
    assert code == 0
    nodes, _ = _check_dot(out)
    clusters = re.findall(r"subgraph cluster_\d+ \{\n    label=\"kernel \d+ \((\w+)\)\"", out)
    assert "reduce" in clusters  # tanh, square and the sum run as one kernel
    assert {"op0", "arg0", "arg1", "result0"} <= nodes


def test_emit_with_grad(capsys) -> None:
    code, out, _ = dslc(
        capsys, "compile", f"{MODEL}:loss", "--arg", "f32[4,8]", "--arg", "f32[8,3]", "--grad", "1"
    )
    assert code == 0 and "-> tensor<8x3xf32>" in out


# ---- run ----------------------------------------------------------------------------------------


def test_run_random_inputs_prints_results_and_saves_them(capsys, ir_file, tmp_path) -> None:
    code, out, err = dslc(capsys, "run", ir_file, "--seed", "3", "--save-dir", str(tmp_path / "out"))
    assert code == 0, err
    assert out.startswith("result 0: tensor<2x3xf32>  min ") and "result 1: tensor<f32>" in out
    rng = np.random.default_rng(3)
    x, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    np.testing.assert_allclose(np.load(tmp_path / "out" / "result0.npy"), x + b, rtol=1e-6)
    np.testing.assert_allclose(np.load(tmp_path / "out" / "result1.npy"), (x + b).sum(), rtol=1e-5)


def test_run_npy_inputs(capsys, ir_file, tmp_path) -> None:
    np.save(tmp_path / "x.npy", np.ones((2, 3), np.float32))
    np.save(tmp_path / "b.npy", np.arange(3, dtype=np.float32))
    code, out, _ = dslc(
        capsys, "run", ir_file, "--input", str(tmp_path / "x.npy"), "--input", str(tmp_path / "b.npy")
    )
    assert code == 0
    assert (
        "[[1., 2., 3.],\n [1., 2., 3.]]" in out
        and "result 1: tensor<f32>  min 12  max 12  mean 12\n12." in out
    )


@pytest.mark.parametrize(
    "inputs, message",
    [
        ([((2, 3), np.float32)], "@affine takes 2 arguments, 1 were given"),
        ([((2, 3), np.float32), ((4,), np.float32)], "argument 1 of @affine is tensor<3xf32>"),
        ([((2, 3), np.float64), ((3,), np.float32)], "float64 array of shape (2, 3)"),
    ],
)
def test_run_checks_inputs_against_the_signature(capsys, ir_file, tmp_path, inputs, message) -> None:
    argv = ["run", ir_file]
    for i, (shape, dtype) in enumerate(inputs):
        np.save(tmp_path / f"in{i}.npy", np.zeros(shape, dtype))
        argv += ["--input", str(tmp_path / f"in{i}.npy")]
    code, _, err = dslc(capsys, *argv)
    assert code == 1 and message in err and len(err.splitlines()) == 1


def test_run_arg_specs_are_checked(capsys, ir_file) -> None:
    assert dslc(capsys, "run", ir_file, "--arg", "f32[2,3]", "--arg", "f32[3]")[0] == 0
    code, _, err = dslc(capsys, "run", ir_file, "--arg", "f32[2,3]", "--arg", "i32[3]")
    assert code == 1 and "argument 1 of @affine is tensor<3xf32>" in err


# ---- plan --plot --------------------------------------------------------------------------------


def _png_size(path: str) -> tuple[int, int]:
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def test_plan_plot_writes_a_png_of_the_figure_size(capsys, tmp_path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "memory.png"
    code, out, _ = dslc(capsys, "plan", *MLP, "--plot", str(png))
    assert code == 0 and "peak 192 bytes" in out
    assert _png_size(str(png)) == figure_pixels() == (1000, 500)


def test_plot_without_matplotlib_says_how_to_install_it(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    code, _, err = dslc(capsys, "plan", *MLP, "--plot", str(tmp_path / "m.png"))
    assert code == 1 and "pip install 'dslc[plot]'" in err


def test_compile_precision(capsys) -> None:
    """``--precision tf32`` reaches the float matmuls' launchers (dsl.compile's ``precision``); an
    unknown value is a usage error (exit status 2)."""
    for precision, spelled in (("highest", ", stream)"), ("tf32", ", stream, 'tf32')")):
        code, out, err = dslc(
            capsys, "compile", *MLP, "--target", "cuda", "--emit", "numba", "--precision", precision
        )
        launchers = [line for line in out.splitlines() if "_matmul_launcher(_fast_launch(" in line]
        assert code == 0 and launchers and all(line.endswith(spelled) for line in launchers), err
    assert dslc(capsys, "compile", *MLP, "--precision", "fp16")[0] == 2


def test_compiling_needs_no_memory_for_the_arguments(capsys) -> None:
    """``--arg f32[100000,100000]`` (40 GB) compiles: lowering reads shapes and dtypes only (the CLI
    allocated zeros of every argument, a MemoryError reported as an internal error)."""
    code, out, err = dslc(capsys, "plan", f"{MODEL}:scaled", "--arg", "f32[100000,100000]")
    assert code == 0, err
    assert "peak" in out


def test_a_static_argument_takes_a_python_value(capsys) -> None:
    """``--arg 3`` passes 3; the decorator's ``static_argnums`` keep it static (it was traced as an
    i64 argument, the decorator's options dropped, and no value could be given)."""
    code, out, err = dslc(capsys, "compile", f"{MODEL}:repeated", "--arg", "f32[4]", "--arg", "3")
    assert code == 0, err
    assert out.count('"dsl.mul"') == 3 and "tensor<i64>" not in out, out


def test_an_output_naming_the_input_file_is_refused(tmp_path, capsys, ir_file) -> None:
    """``-o model.py`` (or ``--plot model.py``) replaced the user's source with IR text or a PNG
    and exited 0 (found 2026-11-27): a usage error now, the file untouched."""
    source = "import dsl.numpy as dnp\ndef f(x, w):\n    return dnp.tanh(x @ w).sum()\n"
    model = tmp_path / "model.py"
    model.write_text(source)
    target = f"{model}:f"
    for argv in (
        ("compile", target, "--arg", "f32[3,4]", "--arg", "f32[4,2]", "-o", str(model)),
        ("plan", target, "--arg", "f32[3,4]", "--arg", "f32[4,2]", "--plot", str(model)),
        ("opt", ir_file, "-o", ir_file),
    ):
        code, _, err = dslc(capsys, *argv)
        assert code == 2 and "is the input file" in err, (argv, err)
    assert model.read_text() == source and "func.func" in open(ir_file).read()


DECORATED = """import dsl, dsl.numpy as dnp

def chain(x):
    a = dnp.exp(x) @ x
    b = dnp.sin(a) @ x
    return (b @ x).sum()

noinp = dsl.compile(chain, inplace=False)
tf32 = dsl.compile(lambda x, w: x @ w, target="cuda", precision="tf32")
"""


def test_the_decorators_options_are_the_programs(capsys, tmp_path) -> None:
    """``dslc plan`` of ``@dsl.compile(inplace=False)`` is its reference plan, as ``noinp.lower(x)``'s
    (it planned with reuse, found 2026-11-27), and its target and precision are the decorator's; an
    option given on the command line wins."""
    import importlib.util

    src = tmp_path / "dec.py"
    src.write_text(DECORATED)
    spec = importlib.util.spec_from_file_location("dec", src)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = np.zeros((4, 4), np.float32)
    peak = module.noinp.lower(x).memory_plan().peak_bytes
    code, out, err = dslc(capsys, "plan", f"{src}:noinp", "--arg", "f32[4,4]")
    assert code == 0 and f"peak {peak} bytes" in out and peak == 320, err
    assert "peak 320 bytes" not in dslc(capsys, "plan", f"{src}:chain", "--arg", "f32[4,4]")[1]
    two = ["--arg", "f32[4,4]", "--arg", "f32[4,4]", "--emit", "numba"]
    code, out, err = dslc(capsys, "compile", f"{src}:tf32", *two)
    assert code == 0 and "_matmul_launcher(_fast_launch(" in out and "'tf32')" in out, err
    code, out, err = dslc(capsys, "compile", f"{src}:tf32", *two, "--target", "cpu")
    assert code == 0 and "_matmul_launcher" not in out, err


def test_a_failed_write_leaves_the_old_output_and_is_a_user_error(capsys, tmp_path, monkeypatch) -> None:
    """A full disk while writing ``-o OUT`` (or ``--plot``) truncated OUT and was an internal error
    (found 2026-11-27): OUT keeps its old contents, and the error is one line naming it."""
    out = tmp_path / "out.mlir"
    out.write_text("old\n")
    real_open = open

    def full_disk(path, mode="r", *args, **kwargs):  # the write fails once the file is open
        f = real_open(path, mode, *args, **kwargs)
        if "w" in mode:
            f.close()
            raise OSError(28, "No space left on device")
        return f

    monkeypatch.setattr(cli, "open", full_disk, raising=False)  # the CLI's own writes only
    code, _, err = dslc(capsys, "compile", *MLP, "-o", str(out))
    assert code == 1 and err == f"dslc: error: cannot write {out}: No space left on device\n"
    monkeypatch.undo()
    assert out.read_text() == "old\n" and os.listdir(tmp_path) == ["out.mlir"]  # no temporary left
    code, _, err = dslc(capsys, "compile", *MLP, "-o", str(out))
    assert code == 0 and "func.func @mlp" in out.read_text()
    if os.path.exists("/dev/full"):  # not a regular file: written in place (and it is always full)
        code, _, err = dslc(capsys, "compile", *MLP, "-o", "/dev/full")
        assert code == 1 and err == "dslc: error: cannot write /dev/full: No space left on device\n"


def test_a_failed_plot_leaves_the_old_png(capsys, tmp_path, monkeypatch) -> None:
    png = tmp_path / "m.png"
    png.write_bytes(b"old")

    def fail(plan, path, title="") -> None:
        with open(path, "wb") as f:
            f.write(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("compiler.plot.plot_memory_plan", fail)
    code, _, err = dslc(capsys, "plan", *MLP, "--plot", str(png))
    assert code == 1 and err == f"dslc: error: cannot write {png}: No space left on device\n"
    assert png.read_bytes() == b"old" and os.listdir(tmp_path) == ["m.png"]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--grad", "7"], "--grad 7 is out of range for @affine, a function of 2 arguments"),
        (["--grad", "-5"], "--grad -5 is out of range for @affine"),
        (["--donate", "9"], "--donate 9 is out of range for @affine, a function of 2 arguments"),
    ],
)
def test_opt_argument_numbers_out_of_range(capsys, ir_file, flags: list[str], message: str) -> None:
    """(``--grad 7`` was an internal IndexError, ``--donate 9`` silently did nothing.)"""
    code, out, err = dslc(capsys, "opt", ir_file, "--passes", "autodiff,simplify", *flags)
    assert code == 1 and out == "" and len(err.splitlines()) == 1
    assert err.startswith(f"dslc: error: {ir_file}: {message}")


def test_opt_argument_numbers_count_from_the_last_when_negative(capsys, ir_file) -> None:
    """As ``dsl.compile``'s argnums: ``--grad -1`` is ``--grad 1``."""
    scalar = ["--passes", "autodiff"]
    text = IR.replace("%1, %2 : tensor<2x3xf32>, tensor<f32>", "%2 : tensor<f32>")
    text = text.replace("-> (tensor<2x3xf32>, tensor<f32>)", "-> tensor<f32>")
    path = os.path.join(os.path.dirname(ir_file), "loss.mlir")
    with open(path, "w") as f:
        f.write(text)
    last = dslc(capsys, "opt", path, *scalar, "--grad", "-1")
    assert last[0] == 0 and last == dslc(capsys, "opt", path, *scalar, "--grad", "1")


def test_an_empty_grad_is_a_usage_error(capsys, ir_file) -> None:
    """``--grad ''`` compiled the forward program."""
    for argv in (["compile", *MLP, "--grad", ""], ["opt", ir_file, "--passes", "autodiff", "--grad", ""]):
        code, _, err = dslc(capsys, *argv)
        assert code == 2 and "--grad takes argument numbers like 0 or 0,2; got ''" in err


def test_a_file_that_exits_when_imported_is_a_user_error(capsys, tmp_path) -> None:
    """``sys.exit(3)`` at import ended dslc with status 3 and no message."""
    src = tmp_path / "script.py"
    src.write_text("import sys\n\ndef f(x):\n    return x\n\nsys.exit(3)\n")
    code, _, err = dslc(capsys, "compile", f"{src}:f", "--arg", "f32[2]")
    assert code == 1 and len(err.splitlines()) == 1
    assert err.startswith(f"dslc: error: {src}:6: the file exits (SystemExit: 3) when dslc imports it")
