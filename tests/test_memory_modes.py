"""Memory planning changes where values live, never what they are.

Every program of the ``dsl.numpy``/``dsl.nn`` tables (test_numpy_api.CASES, NN_CASES) and every
views/in-place case (test_views_inplace.CASES) runs four ways:

- compiled with the planner's reuse and in-place decisions on (``inplace=True``);
- compiled with the reference plan (``inplace=False``: every buffer its own slot);
- compiled under ``DSL_SANITIZE=1`` (dead buffers poisoned right after their last use, plan checked
  for overlapping live buffers), in-place on;
- the reference interpreter (``interpret_fn``).

The compiled runs must agree bit for bit (results and the arguments' final contents, NaNs in the
same places): the plans differ only in offsets, so any difference is a buffer read after it was
reused or poisoned. Each must be close to the interpreter (rtol 1e-5 for float32, 1e-12 for
float64, exact for integers and booleans). Every run gets its own copy of the arguments.

The full tables are used (no subset): programs are tiny, so most of the time is Numba compiling
three variants of each (measure with ``python -m pytest tests/test_memory_modes.py --durations=5``).
Most table programs are one or two ops, so their two plans rarely differ (the sanitizer still
catches a buffer read after its last use); reuse and in-place across longer programs are covered
by test_fuzz_programs.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import test_numpy_api
import test_views_inplace
from helpers import interpret_fn

import dsl
from dsl import pytree

Run = tuple[list[np.ndarray], list[Any]]  # (result leaves, the arguments after the call)


def _positional(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` called with the table's positional arguments only. dsl.compile binds a signature's
    defaults as traced arguments (``gelu(x, approximate=True)`` would trace ``approximate``), which
    this test is not about; the interpreter path never binds defaults."""
    return lambda *args: fn(*args)


def _programs() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    programs = {}
    for name, (fn, _, args) in {**test_numpy_api.CASES, **test_numpy_api.NN_CASES}.items():
        programs[name] = (_positional(fn), args)
    for fn in test_views_inplace.CASES:
        # The same argument as test_views_inplace: distinct values, so misplaced writes show.
        programs[f"views.{fn.__name__}"] = (fn, (np.arange(6, dtype=np.float64).reshape(2, 3) + 0.25,))
    return programs


PROGRAMS = _programs()


def _fresh(args: tuple[Any, ...]) -> list[Any]:
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def _leaves(out: Any) -> list[np.ndarray]:
    leaves, _ = pytree.flatten(out)
    return [np.asarray(x) for x in leaves]


def _run_compiled(fn: Callable[..., Any], args: tuple[Any, ...], inplace: bool) -> Run:
    # A new Compiled object per mode: options and DSL_SANITIZE are read when it compiles.
    call_args = _fresh(args)
    out = dsl.compile(fn, inplace=inplace)(*call_args)
    return _leaves(out), call_args


def _run_interpreter(fn: Callable[..., Any], args: tuple[Any, ...]) -> Run:
    call_args = _fresh(args)
    out = interpret_fn(fn, *call_args)
    return _leaves(out), call_args


def assert_bit_identical(got: list[Any], want: list[Any], what: str) -> None:
    assert len(got) == len(want), f"{what}: {len(got)} values != {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert (g.shape, g.dtype) == (w.shape, w.dtype), (
            f"{what}[{i}]: {g.shape} {g.dtype} != {w.shape} {w.dtype}"
        )
        np.testing.assert_array_equal(g, w, err_msg=f"{what}[{i}]", strict=True)


def assert_close(got: list[Any], want: list[Any], what: str) -> None:
    """Close to the interpreter: the compiled kernels may sum or multiply in another order."""
    assert len(got) == len(want), f"{what}: {len(got)} values != {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert (g.shape, g.dtype) == (w.shape, w.dtype), (
            f"{what}[{i}]: {g.shape} {g.dtype} != {w.shape} {w.dtype}"
        )
        if w.dtype.kind == "f":
            rtol = 1e-5 if w.dtype == np.float32 else 1e-12
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, equal_nan=True, err_msg=f"{what}[{i}]")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{what}[{i}]")


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_plans_agree(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fn, args = PROGRAMS[name]
    monkeypatch.delenv("DSL_NO_INPLACE", raising=False)
    monkeypatch.delenv("DSL_SANITIZE", raising=False)
    runs = {
        "inplace": _run_compiled(fn, args, inplace=True),
        "reference": _run_compiled(fn, args, inplace=False),
    }
    monkeypatch.setenv("DSL_SANITIZE", "1")
    runs["sanitized"] = _run_compiled(fn, args, inplace=True)
    want_out, want_args = _run_interpreter(fn, args)

    base_out, base_args = runs["reference"]
    for mode, (out, final_args) in runs.items():
        assert_bit_identical(out, base_out, f"{mode} results vs reference plan")
        assert_bit_identical(final_args, base_args, f"{mode} arguments after the call vs reference plan")
    assert_close(base_out, want_out, "compiled results vs interpreter")
    assert_close(base_args, want_args, "arguments after the call vs interpreter")


def test_every_table_program_is_covered() -> None:
    tables = len(test_numpy_api.CASES) + len(test_numpy_api.NN_CASES) + len(test_views_inplace.CASES)
    assert len(PROGRAMS) == tables


def _dying_intermediate(x, w):
    h = x @ w  # a materialized arena buffer whose last reader is the reduction
    return h.sum(axis=0)


def test_sanitizer_poisons_dead_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards the test above against a sanitizer that silently does nothing: after a sanitized
    call, the arena block of the dead matmul result holds NaN; without the sanitizer it holds h."""
    x, w = np.ones((4, 3)), np.full((3, 5), 2.0)
    monkeypatch.delenv("DSL_SANITIZE", raising=False)
    plain = dsl.compile(_dying_intermediate).lower(x, w)
    monkeypatch.setenv("DSL_SANITIZE", "1")
    sanitized_fn = dsl.compile(_dying_intermediate)
    np.testing.assert_array_equal(sanitized_fn(x, w), np.full(5, 24.0))
    sanitized = sanitized_fn.lower(x, w)
    assert sanitized.source() != plain.source()
    (row,) = [r for r in sanitized.memory_plan().buffers if r.bytes == 4 * 5 * 8]
    arena = sanitized._program.executable.arena
    block = arena[row.offset : row.offset + row.bytes].view(np.float64)
    assert np.isnan(block).all(), f"the dead buffer of x @ w holds {block}, not the poison NaN"
