"""Random well-typed programs: every memory plan computes what NumPy computes.

Hypothesis draws one or two float64 inputs of small shapes (0-d and size-1 dims included) and a
sequence of steps: bounded elementwise unary ops, broadcasting binary ops, reductions, matmul,
views (strided slices, transposes, reshapes) and writes through them (``v[idx] = e``, ``v += e``),
and in-place methods (``mul_``, ``add_``, ``clip_``, ``exp_``). A program is a list of plain step
tuples; ``run_steps`` executes it on a *backend* (NumPy, or dsl.numpy plus the in-place methods),
so the same closure runs eagerly in NumPy and traced in dslc. Each program must give, for its
results and for the final contents of its (possibly mutated) inputs:

    compiled (in-place on) == compiled (inplace=False) == compiled under DSL_SANITIZE=1   bit for bit
                           ~= interpret_fn ~= NumPy running the same closure

A failure prints the program as Python-like lines (hypothesis ``note``). Generation runs the
program on NumPy dummies as it goes, so each step is drawn knowing the shapes, which values are
writable arrays, and which are views of what: every drawn program is valid in both worlds.

Default: 40 examples (each compiles three programs). A longer campaign:

    DSL_FUZZ_EXAMPLES=1000 python -m pytest tests/test_fuzz_programs.py -q

(about 26 minutes and 9 GB of memory on a 2-core machine: every compiled program stays imported).
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from helpers import interpret_fn
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import dsl
import dsl.numpy as dnp
from dsl import pytree

EXAMPLES = int(os.environ.get("DSL_FUZZ_EXAMPLES", "40"))
MAX_STEPS = 10
DIMS = (1, 1, 2, 3, 4)  # size-1 dims twice as likely: they stress broadcasting and reshape
CONSTANTS = (0.5, -1.5, 2.0)
# Loose against NumPy and the interpreter (summation order, BLAS); the compiled modes must be exact.
RTOL = 1e-9

# The same op names on both backends. ``exp`` takes a tanh-bounded argument so chains stay finite;
# ``clip_`` / ``exp_`` bound their target first for the same reason.
NUMPY: dict[str, Callable[..., Any]] = {
    "exp": lambda v: np.exp(np.tanh(v)),
    "sin": np.sin,
    "tanh": np.tanh,
    "abs": np.abs,
    "negative": np.negative,
    "add": np.add,
    "multiply": np.multiply,
    "maximum": np.maximum,
    "subtract": np.subtract,
    "sum": np.sum,
    "max": np.max,
    "mean": np.mean,
    "matmul": np.matmul,
    "mul_": lambda a, b: np.multiply(a, b, out=a),
    "add_": lambda a, b: np.add(a, b, out=a),
    "clip_": lambda a: np.clip(a, -1.5, 1.5, out=a),
    "exp_": lambda a: np.exp(np.clip(a, -2.0, 2.0, out=a), out=a),
}
DSL: dict[str, Callable[..., Any]] = {
    "exp": lambda v: dnp.exp(dnp.tanh(v)),
    "sin": dnp.sin,
    "tanh": dnp.tanh,
    "abs": dnp.abs,
    "negative": dnp.negative,
    "add": dnp.add,
    "multiply": dnp.multiply,
    "maximum": dnp.maximum,
    "subtract": dnp.subtract,
    "sum": dnp.sum,
    "max": dnp.max,
    "mean": dnp.mean,
    "matmul": dnp.matmul,
    "mul_": lambda a, b: a.mul_(b),
    "add_": lambda a, b: a.add_(b),
    "clip_": lambda a: a.clip_(-1.5, 1.5),
    "exp_": lambda a: a.clip_(-2.0, 2.0).exp_(),
}
UNARY = ("exp", "sin", "tanh", "abs", "negative")
BINARY = ("add", "multiply", "maximum", "subtract")
REDUCE = ("sum", "max", "mean")
AUGMENTED = {"+=": operator.iadd, "-=": operator.isub, "*=": operator.imul}

# ---- running a program --------------------------------------------------------------------------
# A step is a tuple (kind, ...). Operands are env indices (int) or Python float constants.


def _operand(env: list[Any], j: int | float) -> Any:
    return env[j] if isinstance(j, int) else j


def _setitem(env: list[Any], t: int, index: Any, j: int | float) -> None:
    env[t][index] = _operand(env, j)


STEP_RUNNERS: dict[str, Callable[..., Any]] = {
    "unary": lambda env, B, name, i: env.append(B[name](env[i])),
    "binary": lambda env, B, name, i, j: env.append(B[name](env[i], _operand(env, j))),
    "reduce": lambda env, B, name, i, axis, keep: env.append(B[name](env[i], axis=axis, keepdims=keep)),
    "matmul": lambda env, B, i, j: env.append(B["matmul"](env[i], env[j])),
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
        if isinstance(s, int):
            parts.append(str(s))
        else:
            parts.append(f"{s.start}:" + (f":{s.step}" if s.step != 1 else ""))
    return ", ".join(parts)


def _o(j: int | float) -> str:
    return f"v{j}" if isinstance(j, int) else repr(j)


STEP_LINES: dict[str, Callable[..., str]] = {
    "unary": lambda new, name, i: f"{new} = {TEXT.get(name, name + '({})').format(f'v{i}')}",
    "binary": lambda new, name, i, j: f"{new} = {name}(v{i}, {_o(j)})",
    "reduce": lambda new, name, i, axis, keep: f"{new} = {name}(v{i}, axis={axis}, keepdims={keep})",
    "matmul": lambda new, i, j: f"{new} = v{i} @ v{j}",
    "slice": lambda new, i, index: f"{new} = v{i}[{_fmt_index(index)}]",
    "transpose": lambda new, i, axes: f"{new} = v{i}.transpose({axes})",
    "reshape": lambda new, i, shape: f"{new} = v{i}.reshape({shape})",
    "setitem": lambda new, t, index, j: f"v{t}[{_fmt_index(index)}] = {_o(j)}",
    "augmented": lambda new, op, t, j: f"v{t} {op} {_o(j)}",
    "method": lambda new, name, t, *j: f"v{t}.{TEXT.get(name, name + '({})').format(*map(_o, j))}",
}
TEXT = {"exp": "exp(tanh({}))", "clip_": "clip_(-1.5, 1.5)", "exp_": "clip_(-2.0, 2.0).exp_()"}
CREATES = {"unary", "binary", "reduce", "matmul", "slice", "transpose", "reshape"}


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


def _draw_index(draw, shape: tuple[int, ...]) -> Any:
    """A basic index selecting a nonempty view: strided slices, an int on the first axis when
    other axes remain (a view in NumPy; a full int index would give a scalar copy), or ``...``."""
    if not shape or draw(st.integers(0, 4)) == 0:
        return Ellipsis
    parts: list[Any] = []
    for axis, n in enumerate(shape[: draw(st.integers(1, len(shape)))]):
        if axis == 0 and len(shape) >= 2 and draw(st.integers(0, 3)) == 0:
            parts.append(draw(st.integers(-n, n - 1)))
        else:
            parts.append(slice(draw(st.integers(0, n - 1)), None, draw(st.sampled_from((1, 1, 2, -1, -2)))))
    return tuple(parts)


def _reshape_targets(size: int) -> list[tuple[int, ...]]:
    targets = [(size,), (-1,), (1, size), (size, 1)] + ([()] if size == 1 else [])
    targets += [(d, size // d) for d in range(2, size) if size % d == 0]
    targets += [(d, 1, size // d) for d in range(2, size) if size % d == 0]
    return targets


def gen_unary(draw, env):
    return ("unary", draw(st.sampled_from(UNARY)), _pick(draw, range(len(env))))


def gen_binary(draw, env):
    i = _pick(draw, range(len(env)))
    partners = [k for k, v in enumerate(env) if _broadcasts(np.shape(env[i]), np.shape(v))]
    return ("binary", draw(st.sampled_from(BINARY)), i, draw(st.sampled_from(partners + list(CONSTANTS))))


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


def gen_view(draw, env):
    arrays = [k for k in _writable(env) if env[k].ndim >= 1]  # views of NumPy scalars are copies
    if not arrays:
        return None
    i = _pick(draw, arrays)
    shape = env[i].shape
    kind = draw(st.sampled_from(("slice", "slice", "transpose", "reshape")))
    if kind == "slice":
        return ("slice", i, _draw_index(draw, shape))
    if kind == "transpose":
        return ("transpose", i, tuple(draw(st.permutations(range(len(shape))))))
    return ("reshape", i, draw(st.sampled_from(_reshape_targets(env[i].size))))


def gen_setitem(draw, env):
    t = _pick(draw, _writable(env))
    index = _draw_index(draw, env[t].shape)
    return ("setitem", t, index, _source(draw, env, env[t][index].shape))


def gen_augmented(draw, env):
    t = _pick(draw, _writable(env))
    return ("augmented", draw(st.sampled_from(tuple(AUGMENTED))), t, _source(draw, env, env[t].shape))


def gen_method(draw, env):
    t = _pick(draw, _writable(env))
    name = draw(st.sampled_from(("mul_", "add_", "clip_", "exp_")))
    if name in ("clip_", "exp_"):
        return ("method", name, t)
    return ("method", name, t, _source(draw, env, env[t].shape))


GENERATORS = {
    "unary": gen_unary,
    "binary": gen_binary,
    "reduce": gen_reduce,
    "matmul": gen_matmul,
    "view": gen_view,
    "setitem": gen_setitem,
    "augmented": gen_augmented,
    "method": gen_method,
}

# Materializing steps (matmul) and views twice as likely: they create buffers and odd access patterns.
KIND_WEIGHTS = (*GENERATORS, "matmul", "view")

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


def _leaves(out: Any) -> list[np.ndarray]:
    leaves, _ = pytree.flatten(out)
    return [np.array(x) for x in leaves]  # a copy: NumPy's results may be views of its inputs


def run_numpy(program: Program) -> tuple[list[np.ndarray], list[np.ndarray]]:
    args = program.inputs()
    return _leaves(program.closure(NUMPY)(*args)), list(args)


def run_interpreter(program: Program) -> tuple[list[np.ndarray], list[np.ndarray]]:
    args = program.inputs()
    return _leaves(interpret_fn(program.closure(DSL), *args)), list(args)


def run_compiled(program: Program, inplace: bool) -> tuple[list[np.ndarray], list[np.ndarray]]:
    args = program.inputs()
    return _leaves(dsl.compile(program.closure(DSL), inplace=inplace)(*args)), list(args)


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


def check_program(program: Program) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("DSL_NO_INPLACE", raising=False)
        mp.delenv("DSL_SANITIZE", raising=False)
        runs = {"in-place": run_compiled(program, True), "reference plan": run_compiled(program, False)}
        mp.setenv("DSL_SANITIZE", "1")
        runs["sanitized"] = run_compiled(program, True)
    base = runs["reference plan"]
    for mode, (out, args) in runs.items():
        assert_values(out, base[0], f"results, {mode} vs reference plan", exact=True)
        assert_values(args, base[1], f"inputs after the call, {mode} vs reference plan", exact=True)
    for name, (out, args) in {"interpreter": run_interpreter(program), "NumPy": run_numpy(program)}.items():
        assert_values(base[0], out, f"results, compiled vs {name}", exact=False)
        assert_values(base[1], args, f"inputs after the call, compiled vs {name}", exact=False)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(programs())
def test_random_programs_agree_across_plans_and_with_numpy(program: Program) -> None:
    note(program.describe())
    check_program(program)


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
