"""Threads: one compiled function called from 8 threads at once (its first call included) gives the
right answers, and so do different functions whose parallel kernels run at the same time.

Numba's ``workqueue`` threading layer aborts the process when two threads launch parallel kernels
at once; ``runtime.executable`` selects a thread-safe layer (tbb or omp) when one loads, else it
serializes every call (see its docstring). Two processes sharing a cache: ``test_module_cache.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numba
import numpy as np
from helpers import parallel_loops

import dsl
import dsl.numpy as dnp
from compiler.passes.rows import PARALLEL_MIN_ELEMENTS
from runtime import executable

N = 8
SHAPE = (256, 320)  # above PARALLEL_MIN_ELEMENTS: the elementwise kernels run with parallel=True
assert SHAPE[0] * SHAPE[1] >= PARALLEL_MIN_ELEMENTS


def _layer(x, w):
    h = dnp.tanh(x @ w) * 0.5 + x
    h += 1.0
    return h.sum(axis=0), (h * h).max()


def _numpy_layer(x, w):
    h = np.tanh(x @ w) * 0.5 + x + 1.0
    return h.sum(axis=0), (h * h).max()


def _scale(x, w):  # plain arithmetic: a parallel loop kernel (no NumPy-assisted path)
    return (x * 2.0 - w[0, 0]) * x


def _numpy_scale(x, w):
    return (x * 2.0 - w[0, 0]) * x


def _run_threads(work: Callable[[int], Any]) -> list[Any]:
    barrier = threading.Barrier(N)
    results: list[Any] = [None] * N
    errors: list[BaseException] = []

    def body(i: int) -> None:
        barrier.wait()  # start together
        try:
            results[i] = work(i)
        except BaseException as err:  # reported below, with the thread's number
            errors.append(err)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(N)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    return results


def _inputs(i: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(i)
    return rng.standard_normal(SHAPE), rng.standard_normal((SHAPE[1], SHAPE[1])) / 20


def test_one_function_from_eight_threads_including_its_first_call() -> None:
    f = dsl.compile(_layer)

    def work(i: int) -> list[bool]:
        x, w = _inputs(i)
        want = _numpy_layer(x, w)
        oks = []
        for _ in range(3):
            got = f(x, w)
            oks.append(all(np.allclose(g, v, rtol=1e-10) for g, v in zip(got, want)))
        return oks

    assert _run_threads(work) == [[True] * 3] * N
    assert f.trace_count == 1  # eight threads asked for the same signature at once: traced once


def test_different_functions_run_parallel_kernels_at_the_same_time() -> None:
    fns = [(dsl.compile(_layer), _numpy_layer), (dsl.compile(_scale), _numpy_scale)]
    for f, _ in fns:  # compiled first: this test is about running, not compiling
        f(*_inputs(0))

    def work(i: int) -> bool:
        f, ref = fns[i % 2]
        x, w = _inputs(i)
        want = ref(x, w)
        ok = True
        for _ in range(4):
            got = f(x, w)
            pairs = zip(got, want) if isinstance(got, tuple) else [(got, want)]
            ok = ok and all(np.allclose(g, v, rtol=1e-10) for g, v in pairs)
        return ok

    assert _run_threads(work) == [True] * N


def test_the_threading_layer_is_thread_safe_or_calls_are_serialized() -> None:
    f = dsl.compile(_scale)
    assert parallel_loops(f.lower(*_inputs(1)).source())
    f(*_inputs(1))  # a parallel kernel has run: the layer is chosen now
    layer = numba.threading_layer()
    if executable.THREADSAFE_LAYER:
        assert layer in ("tbb", "omp")
    else:
        assert layer == "workqueue" and isinstance(executable._GLOBAL_LOCK, type(threading.Lock()))
