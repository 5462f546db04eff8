"""``dslc``: the compiler from the shell.

    dslc compile FILE.py:FUNC --arg f32[128,64] --arg f32[64] [--emit STAGE|plan|numba|llvm|ptx|mlir|dot]
    dslc opt FILE.mlir [--passes simplify,dce] [--print-ir-after-all]
    dslc run FILE.mlir [--arg SPEC ... | --input a.npy ...] [--seed N] [--save-dir DIR]
    dslc plan FILE.py:FUNC --arg ... [--plot memory.png]

Exit status: 0 on success, 1 on a user error (one line naming the user's file and line, no
traceback unless ``--debug``), 2 on a usage error. ``compile`` and ``plan`` trace Python code, so
they import the ``dsl`` frontend lazily; ``opt`` and ``run`` work on IR text alone.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import inspect
import os
import re
import stat
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from compiler.compilation import PRECISIONS
from compiler.ir.core import Function
from compiler.ir.printer import print_function, print_module
from compiler.ir.types import DType, TensorType
from compiler.pipeline import PASSES, PASSES_BY_NAME, STAGES, Options, Pass, run_passes
from runtime.errors import DSLError

_ARG_RE = re.compile(r"^(f32|f64|i32|i64|i1)(?:\[( *(?:[0-9]+ *(?:, *[0-9]+ *)*)?)\])?$")
# The pass whose output each stage is, for --print-ir-after-all headers.
PASS_OF_STAGE = {"traced": "trace", **{p.stage: p.name for p in PASSES}}


class UserError(DSLError):
    """A mistake in what the user asked the CLI to do."""


class UsageError(Exception):
    """A command line that makes no sense (exit status 2, like argparse's own errors)."""


def parse_arg_spec(spec: str) -> TensorType:
    """``f32[128,64]`` -> that tensor type; ``f64`` or ``i64[]`` is a scalar."""
    m = _ARG_RE.match(spec.strip())
    if not m:
        raise argparse.ArgumentTypeError(
            f"bad argument spec {spec!r}: expected DTYPE[DIMS] such as f32[128,64], i64[] or f64 "
            "(dtypes: f32 f64 i32 i64 i1)"
        )
    dims = tuple(int(d) for d in m.group(2).split(",") if d.strip()) if m.group(2) else ()
    return TensorType(dims, DType(m.group(1)))


def parse_lowering_arg(spec: str) -> Any:
    """A ``--arg`` of ``compile``/``plan``: a type (``parse_arg_spec``) or a Python literal (``2``,
    ``0.5``, ``True``, ``(2, 3)``), passed as that value: a static argument of the function (its
    ``static_argnums``) takes its value, any other argument a Python number as a call would."""
    try:
        return parse_arg_spec(spec)
    except argparse.ArgumentTypeError as err:
        try:
            value = ast.literal_eval(spec.strip())
        except (ValueError, SyntaxError):
            raise err from None
        if not isinstance(value, (bool, int, float, tuple)):
            raise err from None
        return value


def load_function(target: str) -> Any:
    """``path/to/file.py:func`` -> the function object (a ``dsl.compile``d one or a plain one)."""
    path, sep, name = target.rpartition(":")
    if not sep or not path.endswith(".py") or not name:
        raise UsageError(f"expected FILE.py:FUNC, got {target!r}")
    if not os.path.isfile(path):
        raise UserError(f"no such file: {path}")
    spec = importlib.util.spec_from_file_location("_dslc_user_module", path)
    if spec is None or spec.loader is None:
        raise UserError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as err:  # the user's file: a user error at its line, not an internal one
        raise UserError(f"{err.filename}:{err.lineno}: SyntaxError: {err.msg}") from None
    except SystemExit as err:  # a script's sys.exit(...) would end dslc with its status and no word
        where = _user_line(err, [path]) or path
        raise UserError(
            f"{where}: the file exits (SystemExit: {err.code}) when dslc imports it; "
            'run that code under `if __name__ == "__main__":`'
        ) from None
    fn = getattr(module, name, None)
    if fn is None:
        raise UserError(f"{path} has no function named {name!r}")
    return fn


def _lower(args: argparse.Namespace) -> Any:
    import dsl  # the frontend: only the subcommands that trace Python need it

    fn = user_fn = load_function(args.target)
    _check_arity(fn, args.target, len(args.arg))
    nums = _grad_nums(args.grad)
    if nums is not None:
        fn = dsl.grad(fn, argnums=nums[0] if len(nums) == 1 else nums)
    # Options set on the command line win over the decorator's, and those over dslc's defaults.
    flags = {
        "target": args.target_device,
        "inplace": False if args.no_inplace else None,
        "precision": args.precision,
    }
    options: dict[str, Any] = {"target": "cpu", "inplace": True}
    for given in (_decorator_options(user_fn), flags):
        options.update((k, v) for k, v in given.items() if v is not None)
    compiled = dsl.compile(fn, **options)
    try:
        return compiled.lower(*_shaped(args.arg))
    except DSLError as err:
        raise _at_the_function(err, user_fn) from None


def _decorator_options(fn: Any) -> dict[str, Any]:
    """The ``dsl.compile`` options of a decorated ``fn`` (none for a plain function), so that
    ``dslc compile``/``plan`` build the program its calls run (``fn.lower(x)``): its ``inplace=False``
    was dropped (found 2026-11-27). ``dsl.compile`` of a compiled function keeps its static arguments
    itself; ``--grad`` compiles the gradient with the same options."""
    from dsl.compile import Compiled  # (the frontend, as _lower's)

    if not isinstance(fn, Compiled):
        return {}
    return {
        "target": fn._target,
        "donate_argnums": fn._donate,
        "inplace": fn._inplace,
        "strict_inplace": fn._strict_inplace,
        "precision": fn._precision,
    }


def _at_the_function(err: DSLError, fn: Any) -> DSLError:
    """``err`` naming the function's ``def`` line where it named no line of the user's file (an
    error of the whole function, ``--grad`` of one returning a tuple, found where this command line
    called it: there is no call line in the user's code to name)."""
    where, sep, rest = str(err).partition(": ")
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if not sep or code is None or where.rpartition(":")[0] not in {"<unknown>", *_CALLERS}:
        return err
    return type(err)(f"{code.co_filename}:{code.co_firstlineno}: {rest}")


def _check_arity(fn: Any, target: str, n: int) -> None:
    """One ``--arg`` per parameter, said at the ``def`` line (before tracing reports it elsewhere)."""
    from dsl.binding import signature_of  # (the frontend, as _load's)

    try:
        signature_of(fn).bind(*range(n))
    except TypeError as err:
        code = getattr(inspect.unwrap(fn), "__code__", None)
        where = f"{code.co_filename}:{code.co_firstlineno}: " if code is not None else ""
        raise UserError(f"{where}{target.rpartition(':')[2]}: {err} (give one --arg per argument)") from None
    except ValueError:  # no signature to check (a builtin, say): tracing will tell
        pass


def _zeros(types: Sequence[Any]) -> list[Any]:
    return [np.zeros(t.shape, t.dtype.np) if isinstance(t, TensorType) else t for t in types]


def _shaped(types: Sequence[Any]) -> list[Any]:
    """Arguments of the given types for lowering, which reads their shapes, dtypes and (C-order)
    strides but never their elements: each a C-ordered view of one element, so that a GPU-sized
    ``--arg f32[100000,100000]`` compiles without allocating it. A Python value is passed as itself."""
    out: list[Any] = []
    for t in types:
        if not isinstance(t, TensorType):  # a Python value (a static argument)
            out.append(t)
            continue
        one = np.zeros(1, t.dtype.np)
        strides = tuple(
            int(np.prod(t.shape[k + 1 :], dtype=np.int64)) * one.itemsize for k in range(len(t.shape))
        )
        out.append(np.lib.stride_tricks.as_strided(one, shape=t.shape, strides=strides, writeable=False))
    return out


def _guard_inputs(args: argparse.Namespace) -> None:
    """An output (``-o``, ``--plot``) naming the command's input file is a usage error: writing it
    would replace the user's source with the output."""
    inputs = [getattr(args, "target", "") and args.target.rpartition(":")[0], getattr(args, "file", "")]
    inputs = [os.path.realpath(p) for p in inputs if isinstance(p, str) and p]
    for flag, out in (("-o", getattr(args, "output", None)), ("--plot", getattr(args, "plot", None))):
        if isinstance(out, str) and out and os.path.realpath(out) in inputs:
            raise UsageError(f"{flag} {out} is the input file: writing it would replace it; choose another")


def _write(text: str, out: str | None) -> None:
    if out:
        write_output(out, lambda path: _write_text(path, text))
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _write_text(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def write_output(out: str, write: Callable[[str], None]) -> None:
    """``write(path)`` the output file ``out`` by way of a new file beside it, renamed over ``out``
    once complete: a failed write (a full disk) leaves an existing ``out`` as it was instead of
    truncated. Something other than a regular file (``/dev/stdout``, a pipe) is written in place:
    a rename would replace the device. An ``OSError`` is a user error naming ``out``."""
    try:
        if os.path.exists(out) and not os.path.isfile(out):  # (both follow symlinks)
            write(out)
        else:  # through a symlink: the link stays, its target is replaced
            _write_and_rename(os.path.realpath(out), write)
    except OSError as err:
        raise UserError(f"cannot write {out}: {err.strerror or err}") from None


def _write_and_rename(path: str, write: Callable[[str], None]) -> None:
    """``write`` a new file in ``path``'s directory, with ``path``'s mode, then rename it to ``path``."""
    if os.path.exists(path):
        mode = stat.S_IMODE(os.stat(path).st_mode)
    else:  # a new output gets the usual mode (mkstemp's file is 0600): read the umask to make it
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    directory, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=os.path.splitext(name)[1], dir=directory)
    os.close(fd)
    try:
        os.chmod(tmp, mode)
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def llvm_ir(program: Any, arrays: Sequence[np.ndarray]) -> str:
    """Numba's LLVM IR of every kernel and the driver of a CPU program, and of the runtime functions
    it calls (``runtime.blas.gemm_rows`` for float matmuls).

    Numba compiles a dispatcher for the argument types it is called with, and code it loaded from
    its on-disk cache has no IR to show; so every dispatcher defined in the generated module is
    switched to Numba's ``NullCache`` (compiled afresh if it already was), and the executable runs
    once on ``arrays``, which compiles the kernels (its kernel table) and the driver. A runtime
    function is compiled again, uncached, as a new dispatcher of its Python function, for each
    signature this program's kernel table holds: its own dispatcher, shared by every program, is
    left alone. Other functions the module defines (the float32 math helpers, which LLVM inlines
    into the kernels that call them) are not listed: their code is in their callers' IR.
    """
    import numba
    from numba.core.caching import NullCache
    from numba.core.dispatcher import Dispatcher

    driver = getattr(program.executable, "driver", None)
    if not isinstance(driver, Dispatcher):
        raise UserError("--emit llvm needs the CPU backend (use --target cpu)")
    module = sys.modules[driver.py_func.__module__]
    dispatchers = {name: obj for name, obj in vars(module).items() if isinstance(obj, Dispatcher)}
    own = {name: obj for name, obj in dispatchers.items() if obj.py_func.__module__ == module.__name__}
    for obj in own.values():
        obj._cache = NullCache()  # type: ignore[attr-defined]  # Numba has no public way to turn caching off
        if obj.signatures:
            obj.recompile()
    program.executable(*[a.copy() for a in arrays])
    used = [(d, key) for d, key, _ in program.executable.kernels.compiled]
    parts = []
    listed = {id(d) for d, _ in used} | {id(driver)}  # the kernel table's functions and the driver
    for name, obj in dispatchers.items():
        if id(obj) not in listed:
            continue
        shown = obj
        if name not in own:
            options = {k: v for k, v in obj.targetoptions.items() if k != "nopython"}  # njit's own: it warns
            shown = numba.njit(**options)(obj.py_func)
            for sig in dict.fromkeys(key for d, key in used if d is obj):
                shown.compile(sig)
        for sig, ir in shown.inspect_llvm().items():
            parts.append(f"; ---- {name}{sig} ----\n{ir}")
    return "\n".join(parts)


def _emit_ptx(lowered: Any, args: argparse.Namespace) -> str:
    m = re.fullmatch(r"sm_?(\d)(\d)", args.arch or "sm_90")
    if not m:
        raise UsageError(f"--arch takes a compute capability like sm_80 or sm_90, not {args.arch!r}")
    return str(lowered.ptx((int(m.group(1)), int(m.group(2)))))


def _emit_mlir(lowered: Any, args: argparse.Namespace) -> str:
    from compiler.codegen.mlir_export import export_module

    return export_module([lowered.program.stages["optimized"]])


def _emit_dot(lowered: Any, args: argparse.Namespace) -> str:
    from compiler.ir.dot import function_to_dot

    planned = lowered.program.compilation  # the kernels the program runs (with their bands)
    return function_to_dot(planned.func, planned.fusion)


# What `--emit` prints besides the IR stages: kind -> (lowered program, arguments) -> text.
EMITTERS: dict[str, Callable[[Any, argparse.Namespace], str]] = {
    "plan": lambda lowered, args: str(lowered.memory_plan()),
    "numba": lambda lowered, args: str(lowered.source()),
    "llvm": lambda lowered, args: llvm_ir(lowered.program, _zeros(args.arg)),
    "ptx": _emit_ptx,
    "mlir": _emit_mlir,
    "dot": _emit_dot,
}
EMIT_CHOICES = STAGES + tuple(EMITTERS)


def cmd_compile(args: argparse.Namespace) -> None:
    lowered = _lower(args)
    if args.print_ir_after_all:
        for stage in lowered.stages():
            header = f"IR Dump After {PASS_OF_STAGE.get(stage, stage)} ({stage})"
            sys.stdout.write(f"// -----// {header} //----- //\n{lowered.ir(stage)}")
    emit = EMITTERS.get(args.emit)
    _write(emit(lowered, args) if emit else lowered.ir(args.emit), args.output)


def cmd_plan(args: argparse.Namespace) -> None:
    lowered = _lower(args)
    plan = lowered.memory_plan()
    if args.plot:
        from compiler.plot import plot_memory_plan

        title = args.target.rpartition(":")[2]
        write_output(args.plot, lambda path: plot_memory_plan(plan, path, title=title))
    _write(str(plan), args.output)


def _read_ir(path: str) -> tuple[str, str]:
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    try:
        with open(path) as f:
            return f.read(), path
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror}") from None


def _grad_nums(spec: str | None) -> tuple[int, ...] | None:
    """``--grad 0,2`` -> (0, 2); None without ``--grad``. ``--grad ''`` is a usage error (it compiled
    the forward program)."""
    if spec is None:
        return None
    try:
        return tuple(int(n) for n in spec.split(","))
    except ValueError:
        raise UsageError(f"--grad takes argument numbers like 0 or 0,2; got {spec!r}") from None


def _argnums(flag: str, nums: Sequence[int], func: Function, name: str) -> tuple[int, ...]:
    """``--grad``/``--donate`` numbers as indices of ``func``'s arguments, negative ones counted from
    the last (as ``dsl.compile``'s argnums); one out of range is a user error, not an IndexError
    (``--grad``) or nothing at all (``--donate``)."""
    n = len(func.params)
    for k in nums:
        if not -n <= k < n:
            what = f"@{func.name}, a function of {n} arguments"
            raise UserError(f"{name}: {flag} {k} is out of range for {what}")
    return tuple(k % n for k in nums)


def cmd_opt(args: argparse.Namespace) -> None:
    from compiler.autodiff import GradSpec
    from compiler.ir.parser import parse_module

    passes = _pass_list(args.passes)  # a usage error before reading stdin
    grad = _grad_nums(args.grad)
    text, name = _read_ir(args.file)
    out: list[Function] = []
    for func in parse_module(text, name):

        def observe(p: Pass, f: Function) -> None:
            if args.print_ir_after_all:
                sys.stdout.write(
                    f"// -----// IR Dump After {p.name} ({p.stage}) //----- //\n{print_function(f)}"
                )

        options = Options(
            target=args.target_device,
            verify=True,
            donate_argnums=_argnums("--donate", args.donate, func, name),
            grad=None if grad is None else GradSpec(_argnums("--grad", grad, func, name)),
        )
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
        raise UsageError(f"unknown pass {unknown[0]!r}; passes: {', '.join(PASSES_BY_NAME)}")
    return tuple(PASSES_BY_NAME[n] for n in names)


def cmd_run(args: argparse.Namespace) -> None:
    from compiler.cli_run import run_ir_file

    if args.input and args.arg:
        raise UsageError("give the inputs either as --input files or as --arg specs, not both")
    _write(run_ir_file(args, *_read_ir(args.file)), None)


def build_parser() -> argparse.ArgumentParser:
    """The ``dslc`` argument parser: one subparser per command, every option with its help."""
    parser = argparse.ArgumentParser(
        prog="dslc",
        description="The dslc array compiler: trace Python to IR, optimize, plan memory, generate code.",
        epilog="Exit status: 0 success, 1 user error (one line; --debug for the traceback), 2 usage error.",
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", help="what to do")

    def add_lowering(p: argparse.ArgumentParser) -> None:
        p.add_argument("target", metavar="FILE.py:FUNC", help="the Python function to compile")
        p.add_argument(
            "--arg",
            action="append",
            default=[],
            type=parse_lowering_arg,
            metavar="SPEC",
            help="type of the next argument, e.g. f32[128,64], i64[] or f64, or a Python value for a "
            "static argument, e.g. 3 (repeat once per argument)",
        )
        p.add_argument(
            "--target",
            dest="target_device",
            choices=("cpu", "cuda", "auto"),
            help="backend to compile for (default: the dsl.compile decorator's, else cpu)",
        )
        p.add_argument(
            "--precision",
            choices=PRECISIONS,
            help="float32 matmuls on a GPU: full float32, or TensorFloat-32 allowed (default: the "
            "decorator's, else highest)",
        )
        p.add_argument(
            "--no-inplace",
            action="store_true",
            help="the reference plan: no buffer reuse (whatever the decorator's inplace)",
        )
        p.add_argument("-o", "--output", metavar="OUT", help="write to this file instead of stdout")
        p.add_argument(
            "--grad", metavar="ARGNUMS", help="compile the gradient w.r.t. these arguments (0 or 0,2)"
        )

    p = sub.add_parser("compile", help="trace and compile a Python function; print one stage")
    add_lowering(p)
    p.add_argument(
        "--emit",
        default="optimized",
        choices=EMIT_CHOICES,
        help="what to print: an IR stage, the memory plan, the Numba source, Numba's LLVM IR, PTX "
        "(CUDA), upstream MLIR (func/arith/math/tensor/linalg) or the dataflow graph in DOT "
        "(default: optimized)",
    )
    p.add_argument(
        "--arch",
        default="sm_90",
        metavar="SM",
        help="the GPU architecture of --emit ptx: sm_80, sm_90 ... (default: sm_90; no GPU needed)",
    )
    p.add_argument(
        "--print-ir-after-all", action="store_true", help="print every stage with a header naming its pass"
    )
    p.set_defaults(run=cmd_compile)

    p = sub.add_parser("plan", help="print the memory plan of a Python function (and draw it)")
    add_lowering(p)
    p.add_argument("--plot", metavar="PNG", help="also draw the arena over program time into this PNG")
    p.set_defaults(run=cmd_plan)

    passes = ", ".join(f"{p.name} ({p.doc})" for p in PASSES_BY_NAME.values())
    p = sub.add_parser("opt", help="parse IR text, run passes, print IR", description=f"passes: {passes}")
    p.add_argument("file", metavar="FILE.mlir", help="IR text ('-' for stdin)")
    p.add_argument(
        "--passes",
        help=f"comma-separated passes (default: none; pipeline: {','.join(p.name for p in PASSES)})",
    )
    p.add_argument("--print-ir-after-all", action="store_true", help="print the IR after each pass")
    p.add_argument(
        "--grad", metavar="ARGNUMS", help="what the autodiff pass differentiates: result 0 w.r.t. these"
    )
    p.add_argument("--no-inplace", action="store_true", help="plan with the reference plan: no reuse")
    p.add_argument("--donate", type=int, action="append", default=[], metavar="K", help="donate argument K")
    p.add_argument(
        "--target",
        dest="target_device",
        default="cpu",
        choices=("cpu", "cuda"),
        help="the target the kernel passes plan for (rows forms bands for the CPU only; default: cpu)",
    )
    p.add_argument("-o", "--output", metavar="OUT", help="write to this file instead of stdout")
    p.set_defaults(run=cmd_opt)

    p = sub.add_parser(
        "run",
        help="compile IR text and run it on random or given inputs",
        description="Runs the pipeline passes on the IR, builds the CPU executable and prints each result "
        "(type, min/max/mean, and the values of small arrays). Inputs: --input files, else random "
        "values of the function's argument types (floats ~ N(0,1), integers in [1,10)).",
    )
    p.add_argument("file", metavar="FILE.mlir", help="IR text of a tensor stage ('-' for stdin)")
    p.add_argument("--func", metavar="NAME", help="the function to run when the file holds several")
    p.add_argument(
        "--arg",
        action="append",
        default=[],
        type=parse_arg_spec,
        metavar="SPEC",
        help="expected type of the next argument (checked against the function), e.g. f32[4,8]",
    )
    p.add_argument(
        "--input", action="append", default=[], metavar="NPY", help="a .npy file per argument, in order"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: 0)")
    p.add_argument("--save-dir", metavar="DIR", help="save result K as DIR/resultK.npy")
    p.add_argument("--no-inplace", action="store_true", help="run with the reference plan: no buffer reuse")
    p.set_defaults(run=cmd_run)
    for command in sub.choices.values():  # `dslc compile ... --debug` works as well as `dslc --debug compile`
        command.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help="show the traceback of an error"
        )
    return parser


def _user_line(err: BaseException, files: Sequence[str]) -> str | None:
    """``file:line`` of the innermost traceback frame in one of the user's ``files``."""
    wanted = {os.path.abspath(f) for f in files}
    found = None
    for frame, line in traceback.walk_tb(err.__traceback__):
        if os.path.abspath(frame.f_code.co_filename) in wanted:
            found = f"{frame.f_code.co_filename}:{line}"
    return found


_CALLERS: set[str] = set()  # the files of the frames that called ``main`` (the console script ...)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dslc`` console script; returns the exit status."""
    frame = sys._getframe(1)
    while frame is not None:
        _CALLERS.add(frame.f_code.co_filename)
        frame = frame.f_back  # type: ignore[assignment]
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _guard_inputs(args)
        args.run(args)
    except UsageError as err:
        parser.print_usage(sys.stderr)
        sys.stderr.write(f"dslc: error: {err}\n")
        return 2
    except Exception as err:
        if args.debug:
            traceback.print_exc()
        message = str(err).splitlines()[0] if str(err) else ""
        if not isinstance(err, DSLError):
            # An error raised by the user's own code (a NameError in the traced function, say):
            # name the line in their file. Anything else but a TypeError/ValueError is ours.
            user_file = getattr(args, "target", "").rpartition(":")[0]
            where = _user_line(err, [user_file]) if user_file else None
            kind = type(err).__name__
            if where is not None:
                message = f"{where}: {kind}: {message}"
            elif isinstance(err, OSError) and err.filename:  # a --save-dir it cannot make, say
                message = f"cannot write {err.filename}: {err.strerror}"
            elif not isinstance(err, (TypeError, ValueError)):
                message = f"internal error: {kind}: {message} (run with --debug for the traceback)"
        sys.stderr.write(f"dslc: error: {message or type(err).__name__}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
