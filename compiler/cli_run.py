"""``dslc run FILE.mlir``: compile IR text with the pipeline and run it on given or random inputs.

Inputs come from ``--input`` ``.npy`` files, one per argument, or are drawn from a seeded generator
for the function's argument types; either way they are checked against the signature first, with
an error naming the argument, the expected type and what was given.
"""

from __future__ import annotations

import argparse
import functools
import os

import numpy as np

from compiler.cli import UserError, write_output
from compiler.ir.core import Function
from compiler.ir.parser import parse_module
from compiler.ir.printer import BUFFERIZED
from compiler.ir.types import DType, TensorType
from compiler.pipeline import Options, compile_function

PRINT_VALUES_UP_TO = 64  # every element of results this small is printed


def _pick_function(funcs: list[Function], name: str | None, path: str) -> Function:
    if name is not None:
        found = [f for f in funcs if f.name == name]
        if not found:
            raise UserError(f"{path} has no function @{name}; it has: {', '.join(f.name for f in funcs)}")
        return found[0]
    if len(funcs) != 1:
        raise UserError(f"{path} holds {len(funcs)} functions; choose one with --func NAME")
    return funcs[0]


def _describe(t: TensorType) -> str:
    return f"{t} ({t.dtype.np.name} array of shape {t.shape})"


def run_inputs(func: Function, args: argparse.Namespace) -> list[np.ndarray]:
    """The arrays ``dslc run`` passes: loaded ``--input`` files, or seeded random values."""
    params = [p.type for p in func.params]
    given: list[tuple[str, TensorType]] = []
    arrays: list[np.ndarray] | None = None
    if args.input:
        arrays = [_load_npy(path) for path in args.input]
        given = [(path, TensorType(a.shape, _dtype_of(a, path))) for path, a in zip(args.input, arrays)]
    elif args.arg:
        given = [(f"--arg {t.dtype}{list(t.shape)}", t) for t in args.arg]
    if given and len(given) != len(params):
        raise UserError(f"@{func.name} takes {len(params)} arguments, {len(given)} were given")
    for i, ((where, got), want) in enumerate(zip(given, params)):
        if got != want:
            raise UserError(f"argument {i} of @{func.name} is {_describe(want)}; {where} is {_describe(got)}")
    if arrays is not None:
        return arrays
    rng = np.random.default_rng(args.seed)
    return [_random(rng, t) for t in params]


def _random(rng: np.random.Generator, t: TensorType) -> np.ndarray:
    """Floats ~ N(0, 1), integers in [1, 10) (safe divisors), bools fair coins."""
    if t.dtype.is_float:
        return rng.standard_normal(t.shape).astype(t.dtype.np)
    if t.dtype.is_bool:
        return rng.random(t.shape) < 0.5
    return rng.integers(1, 10, t.shape).astype(t.dtype.np)


def _load_npy(path: str) -> np.ndarray:
    try:
        return np.asarray(np.load(path, allow_pickle=False))
    except (OSError, ValueError) as err:
        raise UserError(f"cannot read {path} as a .npy array: {err}") from None


def _dtype_of(a: np.ndarray, path: str) -> DType:
    try:
        return DType.from_numpy(a.dtype)
    except TypeError as err:
        raise UserError(f"{path}: {err}") from None


def summarize(index: int, value: np.ndarray) -> str:
    """One line per result (type, and min/max/mean of numbers), then its values if it is small."""
    t = TensorType(value.shape, DType.from_numpy(value.dtype))
    line = f"result {index}: {t}"
    if value.size and value.dtype.kind in "fiu":
        line += f"  min {value.min():.6g}  max {value.max():.6g}  mean {value.mean():.6g}"
    if value.size <= PRINT_VALUES_UP_TO:
        line += "\n" + np.array2string(value, precision=6, separator=", ", threshold=PRINT_VALUES_UP_TO)
    return line


def run_ir_file(args: argparse.Namespace, text: str, name: str) -> str:
    """Parse, compile and run one function of IR ``text``; the printed results (and saved files)."""
    func = _pick_function(parse_module(text, name), args.func, name)
    if BUFFERIZED in func.attrs:
        raise UserError(f"{name}: `dslc run` takes tensor IR (a stage before 'bufferized')")
    inputs = run_inputs(func, args)
    program = compile_function(func, Options(verify=True, inplace=not args.no_inplace))
    results = program.executable(*inputs)
    if args.save_dir:
        os.makedirs(args.save_dir, exist_ok=True)
        for i, r in enumerate(results):
            save = functools.partial(np.save, arr=np.asarray(r))
            write_output(os.path.join(args.save_dir, f"result{i}.npy"), save)
    return "\n".join(summarize(i, np.asarray(r)) for i, r in enumerate(results))
