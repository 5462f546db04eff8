"""The table driver of big programs (``compiler/codegen/cpu/steps.py``): a program with many kernel
calls or arrays gets a native loop over a table of steps, whose source does not grow with the
program, and a Python ``run`` around it; its results are the same bits as the one-function
driver's. (First-call times against size: ``python benchmarks/compile_scaling.py``.)"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from helpers import tanh_mlp

import dsl
import dsl.nn
import dsl.numpy as dnp
from compiler.codegen.cpu import steps
from compiler.passes import rows

rng = np.random.default_rng(7)


@contextmanager
def driver(form: str) -> Iterator[None]:
    """Every program compiled inside gets the ``table`` driver, or the ``one``-function driver."""
    saved = steps.TABLE_STEPS, steps.TABLE_ARRAYS
    limit = -1 if form == "table" else 1 << 30
    steps.TABLE_STEPS = steps.TABLE_ARRAYS = limit
    try:
        yield
    finally:
        steps.TABLE_STEPS, steps.TABLE_ARRAYS = saved


def mlp_loss(params: Any, x: Any) -> Any:
    h = x
    for w, b in params:
        h = dnp.tanh(h @ w + b)
    return (h * h).mean()


def mlp_params(layers: int, width: int = 16) -> list[tuple[np.ndarray, np.ndarray]]:
    return [
        (
            (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32),
            (0.1 * rng.standard_normal(width)).astype(np.float32),
        )
        for _ in range(layers)
    ]


def native_loop(source: str) -> str:
    return source[source.index(f"def {steps.NATIVE}(") : source.index(f"\ndef {steps.ENTRY}(")]


def test_a_big_program_gets_the_table_driver_and_its_gradients() -> None:
    params, x = mlp_params(30), rng.standard_normal((8, 16)).astype(np.float32)
    f = dsl.compile(dsl.grad(mlp_loss))
    source = f.lower(params, x).source()
    assert f"def {steps.NATIVE}(" in source and "data_addresses(" in source  # 121 arrays: a table
    got = f(params, x)
    with driver("one"):
        want = dsl.compile(dsl.grad(mlp_loss))(params, x)
    for g, w in zip(got, want, strict=True):
        for a, b in zip(g, w, strict=True):
            np.testing.assert_array_equal(a, b)
    # against float64 NumPy: the last layer's weight gradient
    h = [x.astype(np.float64)]
    for w, b in params:
        h.append(np.tanh(h[-1] @ w + b))
    dz = 2 * h[-1] / h[-1].size * (1 - h[-1] ** 2)
    np.testing.assert_allclose(got[-1][0], h[-2].T @ dz, rtol=2e-4, atol=1e-6)


def test_the_native_loop_does_not_grow_with_the_program() -> None:
    """Twice the layers: the same native loop (one call site per kernel signature), a longer table."""
    x = rng.standard_normal((8, 16)).astype(np.float32)
    loops, rows = [], []
    for layers in (20, 40):
        lowered = dsl.compile(dsl.grad(mlp_loss)).lower(mlp_params(layers), x)
        loops.append(native_loop(lowered.source()))
        rows.append(lowered._program.generated.constants[steps.STEPS].shape[0])
    assert loops[0] == loops[1]
    assert rows[1] > 1.9 * rows[0]
    assert loops[0].count("call_kernel(") <= 4  # gemm, tanh forward, backward, the loss


def test_small_programs_keep_the_one_function_driver() -> None:
    source = dsl.compile(dsl.grad(mlp_loss)).lower(mlp_params(2), np.ones((8, 16), np.float32)).source()
    assert f"def {steps.NATIVE}(" not in source
    assert not steps.table_driven(steps.TABLE_STEPS, steps.TABLE_ARRAYS)
    assert steps.table_driven(steps.TABLE_STEPS + 1, 1) and steps.table_driven(1, steps.TABLE_ARRAYS + 1)


def _sgd_step(params: Any, x: Any, lr: float) -> Any:
    """An optimizer step: every parameter updated in place (written into the caller's arrays)."""
    loss, grads = dsl.value_and_grad(mlp_loss)(params, x)
    for (w, b), (gw, gb) in zip(params, grads):
        w -= lr * gw
        b -= lr * gb
    return loss


def _column_partials(x: Any) -> Any:
    """A parallel kernel with partial results combined after its loop: called with the table slots
    of its chunk function and ``parallel_for``."""
    y = dsl.nn.softmax(x * 2.0, axis=-1)
    return y.sum(axis=0), dnp.tanh(x).max(axis=1)


def _direct_band(x: Any) -> Any:
    """A band on a big array run directly by the driver: its frame, its per-chunk scratch rows."""
    return dsl.nn.softmax(x, axis=-1) * 3.0


def _numpy_kernel(a: Any, w: Any, b: Any) -> Any:
    """A float64 tanh over a big group: a NumPy kernel (object mode in the one-function driver)."""
    h = a @ w
    y = dnp.tanh(h + b)
    return (y @ w.T).sum(axis=1), dnp.exp(-y) * 2.0


def _second_derivative(p: Any, x: Any) -> Any:
    """Row-block regions (driver lines of their own: a form each in the table)."""
    du = lambda x: dsl.grad(lambda x: tanh_mlp(p, x).sum())(x)  # noqa: E731
    return dsl.grad(lambda x: du(x).sum())(x)


def _layers(widths: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    return [
        (
            (rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32),
            (0.1 * rng.standard_normal(b)).astype(np.float32),
        )
        for a, b in zip(widths[:-1], widths[1:])
    ]


CASES: dict[str, tuple[Callable[..., Any], Callable[[], tuple[Any, ...]], str]] = {
    "sgd step (written arguments)": (
        _sgd_step,
        lambda: (mlp_params(3), rng.standard_normal((8, 16)).astype(np.float32), 0.1),
        "call_kernel(",
    ),
    "parallel kernel with partials": (
        _column_partials,
        lambda: (rng.standard_normal((512, 256)).astype(np.float32),),
        "kernel_table[steps[s, 4]]",
    ),
    "band run directly": (
        _direct_band,
        lambda: (rng.standard_normal((1024, 256)).astype(np.float32),),
        "kernel_table[steps[s, 2]], steps[s, 3], frame)",  # the direct form's parallel_for
    ),
    "NumPy kernel": (
        _numpy_kernel,
        lambda: (
            rng.standard_normal((128, 256)),
            rng.standard_normal((256, 256)) / 16,
            rng.standard_normal(256),
        ),
        "np.tanh(",
    ),
    "row-block region": (
        _second_derivative,
        lambda: (_layers([1, 64, 64, 64, 1]), rng.uniform(-2, 2, (2048, 1)).astype(np.float32)),
        "def region",
    ),
}


def _copy(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Fresh copies of the arrays (the programs may write into them)."""

    def copy(a: Any) -> Any:
        if isinstance(a, list):
            return [(w.copy(), b.copy()) for w, b in a]
        return a.copy() if isinstance(a, np.ndarray) else a

    return tuple(copy(a) for a in args)


def _flat(tree: Any) -> list[np.ndarray]:
    if isinstance(tree, (list, tuple)):
        return [leaf for t in tree for leaf in _flat(t)]
    return [np.asarray(tree)]


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "sanitized"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_table_driver_gives_the_one_function_drivers_bits(
    name: str, sanitize: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    fn, make, marker = CASES[name]
    if sanitize:
        monkeypatch.setenv("DSL_SANITIZE", "1")
    else:
        monkeypatch.delenv("DSL_SANITIZE", raising=False)
    args = make()
    results = {}
    for form in ("one", "table"):
        with driver(form):
            f = dsl.compile(fn)
            called = _copy(args)
            out = f(*called)
            out2 = f(*called)  # a second call: the arena reused, the written arguments again
            results[form] = _flat([out, out2, called])
            source = f.lower(*_copy(args)).source()
            assert (f"def {steps.NATIVE}(" in source) == (form == "table")
    assert marker in source or sanitize  # (the sanitizer's poison keeps regions from forming)
    for a, b in zip(results["one"], results["table"], strict=True):
        np.testing.assert_array_equal(a, b)


def test_sanitized_table_driver_poisons_dead_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSL_SANITIZE", "1")
    x, w = np.ones((4, 3)), np.full((3, 5), 2.0)
    with driver("table"):
        f = dsl.compile(lambda x, w: (x @ w).sum(axis=0))
        np.testing.assert_array_equal(f(x, w), np.full(5, 24.0))
        lowered = f.lower(x, w)
    poison = (
        "array_at(bases[0] + np.uint64(steps[s, 1]), (steps[s, 2],), np.float64)[:] = np.float64(math.nan)"
    )
    assert poison in lowered.source()
    (row,) = [r for r in lowered.memory_plan().buffers if r.bytes == 4 * 5 * 8]
    arena = lowered._program.executable.arena
    assert np.isnan(arena[row.offset : row.offset + row.bytes].view(np.float64)).all()


def test_table_driver_snapshots_written_arguments_only_around_numpy_kernels() -> None:
    """The executable restores arguments the driver writes directly if it raises midway; the table
    driver says whether it can (only a NumPy kernel, run from Python between native steps, can)."""
    params, x = mlp_params(3), rng.standard_normal((8, 16)).astype(np.float32)
    with driver("table"):
        f = dsl.compile(_sgd_step)
        f(_copy((params,))[0], x, 0.1)
    (entry,) = f._cache.values()
    assert entry.run.direct and entry.run.driver.raises_midway is False and not entry.run._guarded


def test_a_long_run_of_row_local_steps_is_bands_of_bounded_size() -> None:
    """40 unrolled row normalizations: bands of at most ``BAND_MAX_GROUPS`` groups, the equal ones
    one function (one kernel growing with the program took 47 s to compile at this size)."""

    def normalize(x: Any) -> Any:
        for _ in range(40):
            x = dnp.tanh(x * 0.9 + 0.1)
            x = x - x.mean(axis=1, keepdims=True) * 0.5
        return x

    x = rng.standard_normal((64, 32))
    f = dsl.compile(normalize)
    lowered = f.lower(x)
    bands = lowered._program.compilation.fusion.bands
    assert len(bands) >= 5 and all(len(b.groups) <= rows.BAND_MAX_GROUPS for b in bands)
    assert lowered.source().count("@numba.njit") <= 4  # a band kernel or two, the last one, the driver
    want = x
    for _ in range(40):
        want = np.tanh(want * 0.9 + 0.1)
        want = want - want.mean(axis=1, keepdims=True) * 0.5
    np.testing.assert_allclose(f(x), want, rtol=1e-12, atol=1e-12)
