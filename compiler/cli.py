"""``dslc``: the compiler from the shell.

    dslc compile FILE.py:FUNC --arg f32[128,64] --arg f32[64] [--emit STAGE] [-o OUT]
    dslc opt FILE.mlir [--passes simplify,dce] [--print-ir-after-all]
    dslc plan FILE.py:FUNC --arg ...

Exit status: 0 on success, 1 on a user error (one line, no traceback unless ``--debug``), 2 on a
usage error. ``compile`` and ``plan`` trace Python code, so they import the ``dsl`` frontend lazily;
``opt`` works on IR text alone.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import traceback
from collections.abc import Sequence
from typing import Any

import numpy as np

from compiler.ir.core import Function
from compiler.ir.printer import print_function, print_module
from compiler.ir.types import DType
from compiler.pipeline import PASSES, PASSES_BY_NAME, STAGES, Options, Pass, run_passes
from runtime.errors import DSLError

EMIT_CHOICES = STAGES + ("plan", "numba")
_ARG_RE = re.compile(r"^(f32|f64|i32|i64|i1)(?:\[([0-9, ]*)\])?$")


class UserError(DSLError):
    """A mistake in what the user asked the CLI to do."""


def parse_arg_spec(spec: str) -> np.ndarray:
    """``f32[128,64]`` -> a float32 array of that shape (the values only matter to ``run``)."""
    m = _ARG_RE.match(spec.strip())
    if not m:
        raise UserError(f"bad --arg {spec!r}: expected DTYPE[DIMS] such as f32[128,64], i64[] or f64")
    dims = tuple(int(d) for d in m.group(2).split(",") if d.strip()) if m.group(2) else ()
    return np.zeros(dims, dtype=DType(m.group(1)).np)


def load_function(target: str) -> Any:
    """``path/to/file.py:func`` -> the function object (a ``dsl.compile``d one or a plain one)."""
    path, sep, name = target.rpartition(":")
    if not sep or not path.endswith(".py") or not name:
        raise UserError(f"expected FILE.py:FUNC, got {target!r}")
    spec = importlib.util.spec_from_file_location("_dslc_user_module", path)
    if spec is None or spec.loader is None:
        raise UserError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except FileNotFoundError:
        raise UserError(f"no such file: {path}") from None
    fn = getattr(module, name, None)
    if fn is None:
        raise UserError(f"{path} has no function named {name!r}")
    return fn


def _lower(args: argparse.Namespace) -> Any:
    import dsl  # the frontend: only the subcommands that trace Python need it

    fn = load_function(args.target)
    if getattr(args, "grad", None):
        try:
            nums = tuple(int(n) for n in args.grad.split(","))
        except ValueError:
            raise UserError(f"--grad takes argument numbers like 0 or 0,2; got {args.grad!r}") from None
        fn = dsl.grad(fn, argnums=nums[0] if len(nums) == 1 else nums)
    compiled = dsl.compile(fn, target=args.target_device, inplace=not args.no_inplace)
    arrays = [parse_arg_spec(a) for a in args.arg]
    return compiled.lower(*arrays)


def _write(text: str, out: str | None) -> None:
    if out:
        with open(out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


def cmd_compile(args: argparse.Namespace) -> None:
    lowered = _lower(args)
    if args.print_ir_after_all:
        for stage in lowered.stages():
            sys.stdout.write(f"// -----// IR Dump After {stage} //----- //\n{lowered.ir(stage)}")
    if args.emit == "plan":
        _write(str(lowered.memory_plan()), args.output)
    elif args.emit == "numba":
        _write(lowered.source(), args.output)
    else:
        _write(lowered.ir(args.emit), args.output)


def cmd_plan(args: argparse.Namespace) -> None:
    if args.plot:
        raise UserError("--plot is not available in this version of dslc")
    _write(str(_lower(args).memory_plan()), args.output)


def cmd_opt(args: argparse.Namespace) -> None:
    from compiler.ir.parser import parse_module

    if args.file == "-":
        text, name = sys.stdin.read(), "<stdin>"
    else:
        try:
            with open(args.file) as f:
                text, name = f.read(), args.file
        except OSError as err:
            raise UserError(f"cannot read {args.file}: {err.strerror}") from None
    passes = _pass_list(args.passes)
    funcs = parse_module(text, name)
    out: list[Function] = []
    for func in funcs:

        def observe(p: Pass, f: Function) -> None:
            if args.print_ir_after_all:
                sys.stdout.write(f"// -----// IR Dump After {p.name} //----- //\n{print_function(f)}")

        options = Options(verify=True, donate_argnums=tuple(args.donate))
        if args.no_inplace:
            options.inplace = False
        stages = run_passes(func, options, passes, observe)
        out.append(list(stages.values())[-1])
    _write(print_module(out), args.output)


def _pass_list(spec: str | None) -> tuple[Pass, ...]:
    if spec is None:
        return ()
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in PASSES_BY_NAME]
    if unknown:
        raise UserError(f"unknown pass {unknown[0]!r}; passes: {', '.join(PASSES_BY_NAME)}")
    return tuple(PASSES_BY_NAME[n] for n in names)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dslc", description="The dslc array compiler.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add_lowering(p: argparse.ArgumentParser) -> None:
        p.add_argument("target", metavar="FILE.py:FUNC", help="the Python function to compile")
        p.add_argument(
            "--arg", action="append", default=[], metavar="SPEC", help="argument type: f32[128,64]"
        )
        p.add_argument("--target", dest="target_device", default="cpu", choices=("cpu", "cuda", "auto"))
        p.add_argument("--no-inplace", action="store_true", help="the reference plan: no buffer reuse")
        p.add_argument("-o", "--output", help="write to this file instead of stdout")

    p = sub.add_parser("compile", help="trace and compile a Python function; print one stage")
    add_lowering(p)
    p.add_argument("--emit", default="optimized", choices=EMIT_CHOICES, help="what to print")
    p.add_argument("--grad", metavar="ARGNUMS", help="differentiate w.r.t. these arguments")
    p.add_argument("--print-ir-after-all", action="store_true", help="print every stage with a header")
    p.set_defaults(run=cmd_compile)

    p = sub.add_parser("plan", help="print the memory plan of a Python function")
    add_lowering(p)
    p.add_argument("--plot", metavar="PNG", help="draw the arena over program time")
    p.set_defaults(run=cmd_plan)

    passes = ", ".join(f"{p.name} ({p.doc})" for p in PASSES_BY_NAME.values())
    p = sub.add_parser("opt", help="parse IR text, run passes, print IR", description=f"passes: {passes}")
    p.add_argument("file", metavar="FILE.mlir", help="IR text ('-' for stdin)")
    p.add_argument(
        "--passes",
        help=f"comma-separated passes (default: none; pipeline: {','.join(p.name for p in PASSES)})",
    )
    p.add_argument("--print-ir-after-all", action="store_true", help="print the IR after each pass")
    p.add_argument("--no-inplace", action="store_true", help="plan with the reference plan: no reuse")
    p.add_argument("--donate", type=int, action="append", default=[], metavar="K", help="donate argument K")
    p.add_argument("-o", "--output", help="write to this file instead of stdout")
    p.set_defaults(run=cmd_opt)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    except (DSLError, TypeError, ValueError) as err:
        if args.debug:
            traceback.print_exc()
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        sys.stderr.write(f"dslc: error: {message}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
