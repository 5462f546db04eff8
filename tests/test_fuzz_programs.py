"""Differential fuzzing: random well-typed programs, every compiled form agrees with the oracles.

Hypothesis draws one or two float64 inputs of small shapes (0-d and size-1 dims included) and a
sequence of steps covering every primitive kind: bounded elementwise unary ops, broadcasting binary
ops, comparisons with ``where`` and counted masks (bool, int64 and casts), reductions, matmul,
concatenate/stack, ``arange`` and ``full`` sources, copies, views (strided slices with ``None``,
transposes, reshapes) and writes through them (``v[idx] = e``, ``v += e``), and in-place methods.
A program is a list of plain step tuples; ``run_steps`` executes it on a *backend* (NumPy, or
dsl.numpy plus the in-place methods), so the same closure runs eagerly in NumPy and traced in dslc.

Every program (``test_random_programs``) is checked, results and final input contents alike:

    reference interpreter on the traced IR == on the optimized IR ~= NumPy running the closure
    compiled (in place) == compiled (inplace=False) == compiled under the sanitizer   bit for bit
    every IR stage: print -> parse -> print is the identity
    grad of a weighted sum of all results ~= float64 central differences along a random direction
    inputs the program does not write are unchanged after every call (the grad call: all inputs)

Compiling a program with Numba costs ~0.5 s (one njit per fused kernel), so this per-program tier
runs the generated module as plain Python (``numba.config.DISABLE_JIT``: the module cache names
such modules apart): it checks the whole compiler, plan and generated code, but not Numba's own
compilation of it. That is checked by ``test_batched_programs_under_numba``: many independent
programs traced into *one* function (one compile checks a batch), compiled by Numba for real, each
program's results compared separately so a failure names its program.

CI runs a fixed-seed 1,000 programs (and 4 Numba batches of 25). A longer campaign:

    DSL_FUZZ_EXAMPLES=20000 DSL_FUZZ_NUMBA_BATCHES=40 python -m pytest tests/test_fuzz_programs.py -q

A failure prints the program as Python-like lines (hypothesis ``note``). Generation runs the program
on NumPy dummies as it goes, so each step is drawn knowing the shapes, which values are writable
arrays, and which are views of what: every drawn program is valid in both worlds.
"""

from __future__ import annotations

import math
import operator
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from helpers import python_kernels
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

import dsl
import dsl.nn as dnn
import dsl.numpy as dnp
from compiler.interpreter import interpret
from compiler.ir.parser import parse_module
from compiler.ir.printer import print_function, print_module
from compiler.pipeline import Options, run_passes
from dsl import pytree

EXAMPLES = int(os.environ.get("DSL_FUZZ_EXAMPLES", "1000"))
NUMBA_BATCHES = int(os.environ.get("DSL_FUZZ_NUMBA_BATCHES", "4"))
BATCH = 25
MAX_STEPS = 10
DIMS = (1, 1, 2, 3, 4)  # size-1 dims twice as likely: they stress broadcasting and reshape
CONSTANTS = (0.5, -1.5, 2.0)
# Loose against NumPy and the interpreter (summation order, BLAS, libm); the compiled modes are exact.
RTOL = 1e-9
GRAD_RTOL = 1e-5

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _np_gelu(v: Any) -> Any:
    return 0.5 * v * (1.0 + _erf(v / math.sqrt(2.0)))


# The same op names on both backends. Functions with a restricted domain or fast growth get a
# bounded argument (``exp(tanh(v))``, ``log(|v| + 0.5)``) so chains stay finite and differentiable.
NUMPY: dict[str, Callable[..., Any]] = {
    "exp": lambda v: np.exp(np.tanh(v)),
    "expm1": lambda v: np.expm1(np.tanh(v)),
    "log": lambda v: np.log(np.abs(v) + 0.5),
    "log1p": lambda v: np.log1p(np.abs(v)),
    "sqrt": lambda v: np.sqrt(np.abs(v) + 0.25),
    "reciprocal": lambda v: np.reciprocal(1.0 + v * v),
    "tan": lambda v: np.tan(np.tanh(v)),
    "sigmoid": lambda v: 1.0 / (1.0 + np.exp(-v)),
    "gelu": _np_gelu,
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "abs": np.abs,
    "square": lambda v: np.square(np.tanh(v)),
    "sign": np.sign,
    "negative": np.negative,
    "add": np.add,
    "multiply": np.multiply,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "subtract": np.subtract,
    "divide": lambda a, b: np.divide(a, 2.0 + np.tanh(b)),
    "power": lambda a, b: np.power(np.abs(a) + 0.5, np.tanh(b)),
    "sum": np.sum,
    "max": np.max,
    "min": np.min,
    "mean": np.mean,
    "matmul": np.matmul,
    "where": np.where,
    "concatenate": np.concatenate,
    "stack": np.stack,
    "arange": lambda n: np.arange(n) * 0.25,
    "full": lambda shape, c: np.full(shape, c),
    "count": lambda mask, axis: np.sum(mask, axis=axis).astype(np.float64),
    "lt": np.less,
    "ge": np.greater_equal,
    "eq": lambda a, b: np.equal(a, b),
    "ne": lambda a, b: np.not_equal(a, b),
    "and": lambda a, b: np.logical_and(np.greater(a, 0.0), np.less(b, 0.5)),
    "or": lambda a, b: np.logical_or(np.less(a, -0.5), np.greater(b, 0.0)),
    "not": lambda a, b: np.logical_not(np.less_equal(a, b)),
    "mul_": lambda a, b: np.multiply(a, b, out=a),
    "add_": lambda a, b: np.add(a, b, out=a),
    "sub_": lambda a, b: np.subtract(a, b, out=a),
    "copy_": lambda a, b: np.copyto(a, b),
    "clip_": lambda a: np.clip(a, -1.5, 1.5, out=a),
    "exp_": lambda a: np.exp(np.clip(a, -2.0, 2.0, out=a), out=a),
    "tanh_": lambda a: np.tanh(a, out=a),
    "sin_": lambda a: np.sin(a, out=a),
    "abs_": lambda a: np.abs(a, out=a),
    "neg_": lambda a: np.negative(a, out=a),
    "relu_": lambda a: np.maximum(a, 0.0, out=a),
    "sigmoid_": lambda a: np.divide(1.0, 1.0 + np.exp(-a), out=a),
    "scale_": lambda a: np.add(np.multiply(a, 0.5, out=a), 0.25, out=a),
    "zero_": lambda a: a.fill(0.0),
    "fill_": lambda a: a.fill(-1.5),
}
DSL: dict[str, Callable[..., Any]] = {
    "exp": lambda v: dnp.exp(dnp.tanh(v)),
    "expm1": lambda v: dnp.expm1(dnp.tanh(v)),
    "log": lambda v: dnp.log(dnp.abs(v) + 0.5),
    "log1p": lambda v: dnp.log1p(dnp.abs(v)),
    "sqrt": lambda v: dnp.sqrt(dnp.abs(v) + 0.25),
    "reciprocal": lambda v: dnp.reciprocal(1.0 + v * v),
    "tan": lambda v: dnp.tan(dnp.tanh(v)),
    "sigmoid": dnn.sigmoid,
    "gelu": lambda v: dnn.gelu(v, approximate=False),
    "sin": dnp.sin,
    "cos": dnp.cos,
    "tanh": dnp.tanh,
    "abs": dnp.abs,
    "square": lambda v: dnp.square(dnp.tanh(v)),
    "sign": dnp.sign,
    "negative": dnp.negative,
    "add": dnp.add,
    "multiply": dnp.multiply,
    "maximum": dnp.maximum,
    "minimum": dnp.minimum,
    "subtract": dnp.subtract,
    "divide": lambda a, b: dnp.divide(a, 2.0 + dnp.tanh(b)),
    "power": lambda a, b: dnp.power(dnp.abs(a) + 0.5, dnp.tanh(b)),
    "sum": dnp.sum,
    "max": dnp.max,
    "min": dnp.min,
    "mean": dnp.mean,
    "matmul": dnp.matmul,
    "where": dnp.where,
    "concatenate": dnp.concatenate,
    "stack": dnp.stack,
    "arange": lambda n: dnp.arange(n) * 0.25,
    "full": lambda shape, c: dnp.full(shape, c),
    "count": lambda mask, axis: dnp.sum(mask, axis=axis).astype(np.float64),
    "lt": dnp.less,
    "ge": dnp.greater_equal,
    "eq": dnp.equal,
    "ne": dnp.not_equal,
    "and": lambda a, b: dnp.logical_and(dnp.greater(a, 0.0), dnp.less(b, 0.5)),
    "or": lambda a, b: dnp.logical_or(dnp.less(a, -0.5), dnp.greater(b, 0.0)),
    "not": lambda a, b: dnp.logical_not(dnp.less_equal(a, b)),
    "mul_": lambda a, b: a.mul_(b),
    "add_": lambda a, b: a.add_(b),
    "sub_": lambda a, b: a.sub_(b),
    "copy_": lambda a, b: a.copy_(b),
    "clip_": lambda a: a.clip_(-1.5, 1.5),
    "exp_": lambda a: a.clip_(-2.0, 2.0).exp_(),
    "tanh_": lambda a: a.tanh_(),
    "sin_": lambda a: a.sin_(),
    "abs_": lambda a: a.abs_(),
    "neg_": lambda a: a.neg_(),
    "relu_": lambda a: a.relu_(),
    "sigmoid_": lambda a: a.sigmoid_(),
    "scale_": lambda a: a.scale_(0.5, bias=0.25),
    "zero_": lambda a: a.zero_(),
    "fill_": lambda a: a.fill_(-1.5),
}
UNARY = (
    "exp", "expm1", "log", "log1p", "sqrt", "reciprocal", "tan", "sigmoid", "gelu",
    "sin", "cos", "tanh", "abs", "square", "sign", "negative",
)  # fmt: skip
BINARY = ("add", "multiply", "maximum", "minimum", "subtract", "divide", "power")
REDUCE = ("sum", "max", "min", "mean")
CONDITIONS = ("lt", "ge", "eq", "ne", "and", "or", "not")
METHODS_WITH_SOURCE = ("mul_", "add_", "sub_", "copy_")
METHODS = ("clip_", "exp_", "tanh_", "sin_", "abs_", "neg_", "relu_", "sigmoid_", "scale_", "zero_", "fill_")
AUGMENTED = {"+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv}

# ---- running a program --------------------------------------------------------------------------
# A step is a tuple (kind, ...). Operands are env indices (int) or Python float constants.


def _operand(env: list[Any], j: int | float) -> Any:
    return env[j] if isinstance(j, int) else j


def _setitem(env: list[Any], t: int, index: Any, j: int | float) -> None:
    env[t][index] = _operand(env, j)


def _where(env: list[Any], B: dict, cond: str, i: int, j: int | float) -> None:
    a, b = env[i], _operand(env, j)
    env.append(B["where"](B[cond](a, b), a, b))


STEP_RUNNERS: dict[str, Callable[..., Any]] = {
    "unary": lambda env, B, name, i: env.append(B[name](env[i])),
    "binary": lambda env, B, name, i, j: env.append(B[name](env[i], _operand(env, j))),
    "reduce": lambda env, B, name, i, axis, keep: env.append(B[name](env[i], axis=axis, keepdims=keep)),
    "where": _where,
    "count": lambda env, B, cond, i, j, axis: env.append(B["count"](B[cond](env[i], env[j]), axis)),
    "matmul": lambda env, B, i, j: env.append(B["matmul"](env[i], env[j])),
    "join": lambda env, B, name, i, j, axis: env.append(B[name]((env[i], env[j]), axis=axis)),
    "arange": lambda env, B, i: env.append(env[i] + B["arange"](env[i].shape[-1])),
    "full": lambda env, B, shape, c: env.append(B["full"](shape, c)),
    "copy": lambda env, B, i: env.append(env[i].copy()),
    "slice": lambda env, B, i, index: env.append(env[i][index]),
    "transpose": lambda env, B, i, axes: env.append(env[i].transpose(axes)),
    "reshape": lambda env, B, i, shape: env.append(env[i].reshape(shape)),
    "setitem": lambda env, B, t, index, j: _setitem(env, t, index, j),
    "augmented": lambda env, B, op, t, j: env.__setitem__(t, AUGMENTED[op](env[t], _operand(env, j))),
    "method": lambda env, B, name, t, *j: B[name](env[t], *(_operand(env, k) for k in j)),
}


def run_steps(steps: list[tuple], outputs: tuple[int, ...], backend: dict, inputs: tuple) -> tuple:
    env = list(inputs)
    for kind, *params in steps:
        STEP_RUNNERS[kind](env, backend, *params)
    return tuple(env[k] for k in outputs)


# ---- describing a program -----------------------------------------------------------------------


def _fmt_index(index: Any) -> str:
    if index is Ellipsis:
        return "..."
    parts = []
    for s in index:
        if s is None or isinstance(s, int):
            parts.append(str(s))
        else:
            parts.append(f"{s.start}:" + (f":{s.step}" if s.step != 1 else ""))
    return ", ".join(parts)


def _o(j: int | float) -> str:
    return f"v{j}" if isinstance(j, int) else repr(j)


STEP_LINES: dict[str, Callable[..., str]] = {
    "unary": lambda new, name, i: f"{new} = {name}(v{i})",
    "binary": lambda new, name, i, j: f"{new} = {name}(v{i}, {_o(j)})",
    "reduce": lambda new, name, i, axis, keep: f"{new} = {name}(v{i}, axis={axis}, keepdims={keep})",
    "where": lambda new, cond, i, j: f"{new} = where({cond}(v{i}, {_o(j)}), v{i}, {_o(j)})",
    "count": lambda new, cond, i, j, axis: f"{new} = sum({cond}(v{i}, v{j}), axis={axis}).astype(f64)",
    "matmul": lambda new, i, j: f"{new} = v{i} @ v{j}",
    "join": lambda new, name, i, j, axis: f"{new} = {name}((v{i}, v{j}), axis={axis})",
    "arange": lambda new, i: f"{new} = v{i} + arange(v{i}.shape[-1]) * 0.25",
    "full": lambda new, shape, c: f"{new} = full({shape}, {c})",
    "copy": lambda new, i: f"{new} = v{i}.copy()",
    "slice": lambda new, i, index: f"{new} = v{i}[{_fmt_index(index)}]",
    "transpose": lambda new, i, axes: f"{new} = v{i}.transpose({axes})",
    "reshape": lambda new, i, shape: f"{new} = v{i}.reshape({shape})",
    "setitem": lambda new, t, index, j: f"v{t}[{_fmt_index(index)}] = {_o(j)}",
    "augmented": lambda new, op, t, j: f"v{t} {op} {_o(j)}",
    "method": lambda new, name, t, *j: f"v{t}.{name}({', '.join(map(_o, j))})",
}
CREATES = set(STEP_RUNNERS) - {"setitem", "augmented", "method"}


@dataclass
class Program:
    shapes: tuple[tuple[int, ...], ...]
    seed: int
    steps: list[tuple]
    outputs: tuple[int, ...]

    def inputs(self) -> tuple[np.ndarray, ...]:
        rng = np.random.default_rng(self.seed)
        return tuple(rng.uniform(-1.0, 1.0, s) for s in self.shapes)

    def closure(self, backend: dict) -> Callable[..., Any]:
        if len(self.shapes) == 1:
            return lambda x: run_steps(self.steps, self.outputs, backend, (x,))
        return lambda x, y: run_steps(self.steps, self.outputs, backend, (x, y))

    def describe(self) -> str:
        lines = [f"inputs: {', '.join(f'v{k}: f64{list(s)}' for k, s in enumerate(self.shapes))}"]
        n = len(self.shapes)
        for kind, *params in self.steps:
            lines.append(STEP_LINES[kind](f"v{n}", *params))
            n += kind in CREATES
        lines.append(f"return {', '.join(f'v{k}' for k in self.outputs)}")
        return "\n".join(lines)


# ---- drawing a program --------------------------------------------------------------------------
# Each generator gets the dummy env (NumPy values of the right shapes and kinds) and returns a step,
# or None when the env offers no valid operands for that kind.


def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


def _writable(env: list[Any]) -> list[int]:
    """Targets of writes: real NumPy arrays. A 0-d op result is a NumPy scalar, which has no storage
    to write through, so it is only ever read (dslc would accept the write; NumPy cannot)."""
    return [k for k, v in enumerate(env) if isinstance(v, np.ndarray)]


def _source(draw, env: list[Any], target_shape: tuple[int, ...]) -> int | float:
    """A value assignable to an array of ``target_shape``: broadcasts to it without growing it."""
    fits = [
        k
        for k, v in enumerate(env)
        if _broadcasts(np.shape(v), target_shape)
        and np.broadcast_shapes(np.shape(v), target_shape) == target_shape
    ]
    return draw(st.sampled_from(fits + list(CONSTANTS)))


def _pick(draw, candidates: Any) -> Any:
    """A candidate, the newest half the time: chains of dependent steps are what give the planner
    values that die while a same-sized value is born (reuse, in place), and lists of unrelated
    steps rarely do."""
    candidates = list(candidates)
    return draw(st.one_of(st.just(candidates[-1]), st.sampled_from(candidates)))


def _draw_index(draw, shape: tuple[int, ...], new_axis: bool = False) -> Any:
    """A basic index selecting a nonempty view: strided slices, an int on the first axis when
    other axes remain (a view in NumPy; a full int index would give a scalar copy), ``...``, and
    (for reads) a ``None`` inserting an axis."""
    if not shape or draw(st.integers(0, 4)) == 0:
        return Ellipsis
    parts: list[Any] = []
    for axis, n in enumerate(shape[: draw(st.integers(1, len(shape)))]):
        if axis == 0 and len(shape) >= 2 and draw(st.integers(0, 3)) == 0:
            parts.append(draw(st.integers(-n, n - 1)))
        else:
            parts.append(slice(draw(st.integers(0, n - 1)), None, draw(st.sampled_from((1, 1, 2, -1, -2)))))
    if new_axis and draw(st.integers(0, 3)) == 0:
        parts.insert(draw(st.integers(0, len(parts))), None)
    return tuple(parts)


def _reshape_targets(size: int) -> list[tuple[int, ...]]:
    targets = [(size,), (-1,), (1, size), (size, 1)] + ([()] if size == 1 else [])
    targets += [(d, size // d) for d in range(2, size) if size % d == 0]
    targets += [(d, 1, size // d) for d in range(2, size) if size % d == 0]
    return targets


def gen_unary(draw, env):
    return ("unary", draw(st.sampled_from(UNARY)), _pick(draw, range(len(env))))


def _partners(env: list[Any], i: int) -> list[int]:
    return [k for k, v in enumerate(env) if _broadcasts(np.shape(env[i]), np.shape(v))]


def gen_binary(draw, env):
    i = _pick(draw, range(len(env)))
    j = draw(st.sampled_from(_partners(env, i) + list(CONSTANTS)))
    return ("binary", draw(st.sampled_from(BINARY)), i, j)


def gen_where(draw, env):
    i = _pick(draw, range(len(env)))
    return ("where", draw(st.sampled_from(CONDITIONS)), i, draw(st.sampled_from(_partners(env, i) + [0.5])))


def gen_count(draw, env):
    i = _pick(draw, range(len(env)))
    j = draw(st.sampled_from(_partners(env, i)))
    ndim = len(np.broadcast_shapes(np.shape(env[i]), np.shape(env[j])))
    return ("count", draw(st.sampled_from(CONDITIONS)), i, j, draw(st.sampled_from([None, *range(ndim)])))


def gen_reduce(draw, env):
    i = _pick(draw, range(len(env)))
    ndim = np.ndim(env[i])
    axis = draw(st.sampled_from([None, *range(-ndim, ndim)]))
    return ("reduce", draw(st.sampled_from(REDUCE)), i, axis, draw(st.booleans()))


def gen_matmul(draw, env):
    pairs = [
        (i, j)
        for i, a in enumerate(env)
        for j, b in enumerate(env)
        if np.ndim(a) >= 1 and np.ndim(b) >= 1 and _matmul_ok(np.shape(a), np.shape(b))
    ]
    return ("matmul", *_pick(draw, sorted(pairs, key=max))) if pairs else None


def _matmul_ok(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    try:
        np.matmul(np.zeros(a), np.zeros(b))
        return True
    except ValueError:
        return False


def gen_join(draw, env):
    i = _pick(draw, [k for k, v in enumerate(env) if np.ndim(v) >= 1] or [None])
    if i is None:
        return None
    shape = np.shape(env[i])
    if draw(st.booleans()):
        same = [k for k, v in enumerate(env) if np.shape(v) == shape]
        return (
            "join",
            "stack",
            i,
            draw(st.sampled_from(same)),
            draw(st.integers(-len(shape) - 1, len(shape))),
        )
    axis = draw(st.integers(0, len(shape) - 1))
    fits = [
        k
        for k, v in enumerate(env)
        if np.ndim(v) == len(shape)
        and all(d == e for a, (d, e) in enumerate(zip(np.shape(v), shape)) if a != axis)
    ]
    return ("join", "concatenate", i, draw(st.sampled_from(fits)), axis)


def gen_source(draw, env):
    if draw(st.booleans()):
        arrays = [k for k, v in enumerate(env) if np.ndim(v) >= 1]
        return ("arange", _pick(draw, arrays)) if arrays else None
    return (
        "full",
        draw(st.lists(st.sampled_from(DIMS), max_size=2).map(tuple)),
        draw(st.sampled_from(CONSTANTS)),
    )


def gen_copy(draw, env):
    return ("copy", _pick(draw, range(len(env))))


def gen_view(draw, env):
    arrays = [k for k in _writable(env) if env[k].ndim >= 1]  # views of NumPy scalars are copies
    if not arrays:
        return None
    i = _pick(draw, arrays)
    shape = env[i].shape
    kind = draw(st.sampled_from(("slice", "slice", "transpose", "reshape")))
    if kind == "slice":
        return ("slice", i, _draw_index(draw, shape, new_axis=True))
    if kind == "transpose":
        return ("transpose", i, tuple(draw(st.permutations(range(len(shape))))))
    return ("reshape", i, draw(st.sampled_from(_reshape_targets(env[i].size))))


def _target(draw, env: list[Any]) -> int:
    """A write target; an input a third of the time: a write into an argument whose old value is
    still read later (by a value computed lazily in a later kernel) is a hazard for the planner's
    direct write-back, and the newest-value bias of ``_pick`` rarely picks an input."""
    writable = _writable(env)
    if draw(st.integers(0, 2)) == 0:
        return 0  # the first input: always an array
    return _pick(draw, writable)


def gen_setitem(draw, env):
    t = _target(draw, env)
    index = _draw_index(draw, env[t].shape)
    return ("setitem", t, index, _source(draw, env, env[t][index].shape))


def gen_augmented(draw, env):
    t = _target(draw, env)
    op = draw(st.sampled_from(tuple(AUGMENTED)))
    if op == "/=":  # by a constant: a random divisor could be ~0
        return ("augmented", op, t, draw(st.sampled_from(CONSTANTS)))
    return ("augmented", op, t, _source(draw, env, env[t].shape))


def gen_method(draw, env):
    t = _target(draw, env)
    if draw(st.booleans()):
        return ("method", draw(st.sampled_from(METHODS_WITH_SOURCE)), t, _source(draw, env, env[t].shape))
    return ("method", draw(st.sampled_from(METHODS)), t)


GENERATORS = {
    "unary": gen_unary,
    "binary": gen_binary,
    "where": gen_where,
    "count": gen_count,
    "reduce": gen_reduce,
    "matmul": gen_matmul,
    "join": gen_join,
    "source": gen_source,
    "copy": gen_copy,
    "view": gen_view,
    "setitem": gen_setitem,
    "augmented": gen_augmented,
    "method": gen_method,
}

# Materializing steps (matmul) and views more likely: they create buffers and odd access patterns.
KIND_WEIGHTS = (*GENERATORS, "matmul", "view", "view", "unary", "binary")

shapes_st = st.lists(st.sampled_from(DIMS), max_size=3).map(tuple)


@st.composite
def input_shapes(draw) -> tuple[tuple[int, ...], ...]:
    x = draw(shapes_st)
    if draw(st.booleans()):
        return (x,)
    # A second input that broadcasts against x, can multiply it, or is unrelated.
    suffix = x[len(x) - draw(st.integers(0, len(x))) :]
    broadcast = tuple(d if draw(st.booleans()) else 1 for d in suffix)
    matmul = (x[-1], draw(st.sampled_from(DIMS))) if x else (2,)
    return (x, draw(st.sampled_from((broadcast, matmul, draw(shapes_st)))))


@st.composite
def programs(draw) -> Program:
    shapes = draw(input_shapes())
    env: list[Any] = [np.zeros(s) for s in shapes]  # dummies: only shapes and aliasing matter here
    steps = []
    # sampled_from: uniform over lengths (st.integers favours tiny programs), shrinking to the shortest.
    for _ in range(draw(st.sampled_from(range(2, MAX_STEPS + 1)))):
        step = GENERATORS[draw(st.sampled_from(KIND_WEIGHTS))](draw, env)
        if step is not None:
            STEP_RUNNERS[step[0]](env, NUMPY, *step[1:])
            steps.append(step)
    extra = draw(st.lists(st.integers(0, len(env) - 1), max_size=2))
    outputs = tuple(sorted({len(env) - 1, *extra}))
    return Program(shapes, draw(st.integers(0, 2**16)), steps, outputs)


# ---- checking a program -------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def _fuzz_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DSL_CACHE_DIR", str(tmp_path_factory.mktemp("fuzz_cache")))
        for flag in ("DSL_NO_INPLACE", "DSL_SANITIZE", "DSL_DUMP_IR"):
            mp.delenv(flag, raising=False)
        yield


def _leaves(out: Any) -> list[np.ndarray]:
    leaves, _ = pytree.flatten(out)
    return [np.array(x) for x in leaves]  # a copy: NumPy's results may be views of its inputs


Run = tuple[list[np.ndarray], list[np.ndarray]]  # results, then the inputs' contents after the call


def run_numpy(program: Program) -> Run:
    args = program.inputs()
    return _leaves(program.closure(NUMPY)(*args)), list(args)


def run_interpreter(program: Program) -> dict[str, Run]:
    """The traced and optimized IR on the reference interpreter; checks every stage's text form."""
    args = program.inputs()
    func, _, mutated, _ = dsl.compile(program.closure(DSL))._trace(args)
    stages = run_passes(func, Options(verify=True))
    for stage, func in stages.items():
        text = print_function(func)
        assert print_module(parse_module(text)) == text, f"stage {stage}: print -> parse -> print changed it"
    runs = {}
    for stage in ("traced", "optimized"):
        outs = interpret(stages[stage], args)
        n = len(outs) - len(mutated)
        after = [np.array(a) for a in args]
        for k, value in zip(mutated, outs[n:]):
            after[k] = value
        runs[f"interpreter ({stage})"] = (_leaves(outs[:n]), after)
    return runs


def run_compiled(program: Program, inplace: bool, sanitize: bool = False) -> Run:
    args = program.inputs()
    with pytest.MonkeyPatch.context() as mp:
        if sanitize:
            mp.setenv("DSL_SANITIZE", "1")
        f = dsl.compile(program.closure(DSL), inplace=inplace)
        lowered = f.lower(*args)
        out = f(*args)
    for stage in lowered.stages():  # the bufferized stage only exists here
        text = lowered.ir(stage)
        assert print_module(parse_module(text)) == text, f"stage {stage}: print -> parse -> print changed it"
    return _leaves(out), list(args)


def assert_values(got: list[np.ndarray], want: list[np.ndarray], what: str, exact: bool) -> None:
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, (
            f"{what}[{k}]: {g.shape} {g.dtype} != {w.shape} {w.dtype}"
        )
        if exact:
            np.testing.assert_array_equal(g, w, err_msg=f"{what}[{k}]")
        else:
            atol = RTOL * (1.0 + float(np.max(np.abs(w), initial=0.0)))
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=atol, equal_nan=True, err_msg=f"{what}[{k}]")


def loss_closure(program: Program, backend: dict) -> Callable[..., Any]:
    """A scalar of the program: weighted sums of its float results and of its inputs' final contents.
    Inputs are copied first, so the program's in-place writes never touch a differentiated argument."""
    rng = np.random.default_rng(program.seed + 1)
    want, after = run_numpy(program)
    weights = [rng.uniform(0.5, 1.5, np.shape(v)) for v in (*want, *after)]
    total = backend["sum"]

    def loss(*xs: Any) -> Any:
        xs = tuple(x.copy() for x in xs)
        outs = run_steps(program.steps, program.outputs, backend, xs)
        return sum(total(v * w) for v, w in zip((*outs, *xs), weights))

    return loss


def check_gradient(program: Program) -> bool:
    """dsl.grad ~= central differences along a random direction (float64); False at a kink."""
    args = program.inputs()
    snapshot = [a.copy() for a in args]
    argnums = tuple(range(len(args)))
    grads = dsl.grad(loss_closure(program, DSL), argnums=argnums)(*args)
    for a, s in zip(args, snapshot):
        np.testing.assert_array_equal(a, s, err_msg="dsl.grad modified an input")
    rng = np.random.default_rng(program.seed + 2)
    direction = [rng.standard_normal(a.shape) for a in args]
    f = loss_closure(program, NUMPY)
    h = 1e-6

    def at(t: float) -> float:
        return float(f(*(np.array(a + t * d) for a, d in zip(args, direction))))

    left, mid, right = at(-h), at(0.0), at(h)
    forward, backward = (right - mid) / h, (mid - left) / h
    scale = 1.0 + abs(forward) + abs(backward)
    if abs(forward - backward) > 1e-4 * scale:
        return False  # a kink (abs, max, clip, where ...) within h: differences mean nothing here
    fd = (right - left) / (2 * h)
    ad = sum(float(np.sum(g * d)) for g, d in zip(grads, direction))
    assert abs(ad - fd) <= GRAD_RTOL * (1.0 + abs(fd)), f"gradient {ad} != finite differences {fd}"
    return True


def check_program(program: Program, gradient: bool = True) -> None:
    """All checks on one program; compiled modules run as plain Python (see the module docstring)."""
    with python_kernels():
        runs = {
            "in-place": run_compiled(program, True),
            "reference plan": run_compiled(program, False),
            "sanitized": run_compiled(program, True, sanitize=True),
        }
        base = runs["reference plan"]
        for mode, (out, args) in runs.items():
            assert_values(out, base[0], f"results, {mode} vs reference plan", exact=True)
            assert_values(args, base[1], f"inputs after the call, {mode} vs reference plan", exact=True)
        oracles = {**run_interpreter(program), "NumPy": run_numpy(program)}
        for name, (out, args) in oracles.items():
            assert_values(base[0], out, f"results, compiled vs {name}", exact=False)
            assert_values(base[1], args, f"inputs after the call, compiled vs {name}", exact=False)
        # An input the program does not write is bit-for-bit unchanged, in every mode.
        for k, (before, after) in enumerate(zip(program.inputs(), oracles["NumPy"][1])):
            if np.array_equal(before, after):
                for mode, (_, args) in runs.items():
                    np.testing.assert_array_equal(args[k], before, err_msg=f"{mode} modified input {k}")
        if gradient:
            check_gradient(program)


FUZZ_SETTINGS = dict(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@settings(max_examples=EXAMPLES, **FUZZ_SETTINGS)
@given(programs())
def test_random_programs(program: Program) -> None:
    note(program.describe())
    check_program(program)


# ---- real Numba, many programs per compile --------------------------------------------------------


def batched(batch: list[Program]) -> Callable[..., Any]:
    """One function running every program of ``batch`` on its own inputs: one compile for all."""

    def run_all(*args: Any) -> list[tuple]:
        outs, k = [], 0
        for p in batch:
            n = len(p.shapes)
            outs.append(run_steps(p.steps, p.outputs, DSL, args[k : k + n]))
            k += n
        return outs

    return run_all


def check_batch_under_numba(batch: list[Program]) -> None:
    inputs = [p.inputs() for p in batch]
    args = [a for xs in inputs for a in xs]
    try:
        outs = dsl.compile(batched(batch))(*args)
    except Exception:
        for p in batch:  # attribute the failure to the programs that fail on their own
            try:
                dsl.compile(p.closure(DSL))(*p.inputs())
            except Exception as err:
                raise AssertionError(f"program fails under Numba:\n{p.describe()}") from err
        raise
    failures = []
    for p, out, xs in zip(batch, outs, inputs):
        want = run_numpy(p)
        try:
            assert_values(_leaves(out), want[0], "results, Numba vs NumPy", exact=False)
            assert_values(list(xs), want[1], "inputs after the call, Numba vs NumPy", exact=False)
        except AssertionError as err:
            failures.append(f"{p.describe()}\n{err}")
    assert not failures, "\n\n".join(failures)


@settings(max_examples=max(NUMBA_BATCHES, 1), phases=[Phase.generate], **FUZZ_SETTINGS)
@given(st.lists(programs(), min_size=BATCH, max_size=BATCH))
def test_batched_programs_under_numba(batch: list[Program]) -> None:
    if NUMBA_BATCHES == 0:
        pytest.skip("DSL_FUZZ_NUMBA_BATCHES=0 turns the Numba batches off")
    check_batch_under_numba(batch)


# Hand-written programs for hazards the planner must respect, checked on every run.
HAZARDS = {
    # The matmul result dies where its transpose is read: in place would overwrite unread elements.
    "transposed read of a dying buffer": Program(
        ((3, 3),),
        1,
        [("matmul", 0, 0), ("transpose", 1, (1, 0)), ("unary", "sin", 2), ("matmul", 3, 0)],
        (4,),
    ),
    # A write through a reversed view of an argument, read back through the base.
    "reversed view write into an argument": Program(
        ((4,),),
        2,
        [("slice", 0, (slice(3, None, -1),)), ("augmented", "+=", 1, 0), ("reduce", "sum", 0, None, False)],
        (2,),
    ),
}


@pytest.mark.parametrize("name", sorted(HAZARDS))
def test_hazard_programs(name: str) -> None:
    print(HAZARDS[name].describe())  # pytest shows it on failure
    check_program(HAZARDS[name])
    check_batch_under_numba([HAZARDS[name]])
