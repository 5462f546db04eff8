"""CUDA graphs (``runtime/cuda_graphs.py``): one launch per call.

Here, without a GPU: the cost rule, why an executable stays eager, and the driver facts the choice
reads (``host_reads``, ``launch_count`` of ``compiler/codegen/cuda/driver.py``). On a GPU (skipped
elsewhere): graphs on against graphs off, bit for bit, on the suite's programs and on write-backs,
donation, device and host arguments, calls with new arguments, loops, interleaved executables and
threads. ``tests/cuda_sim/sim_graphs.py`` checks in the simulator that the eager path is the one taken.
"""

from __future__ import annotations

import gc
import math
import os
import sys
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
from dsl import pytree
from runtime import cuda_graphs
from runtime.devices import cuda_available

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import suite_programs  # noqa: E402

F32 = np.float32
RNG = np.random.default_rng(0)

# ---- the choice, without a GPU -----------------------------------------------------------------------


def test_cost_rule_prefers_graphs_for_many_small_kernels() -> None:
    # the transformer block at the CPU suite's size: 46 launches, ~7 MB of arguments and gradients
    assert cuda_graphs.graphs_pay(launches=46, staged_bytes=7_350_276, copies=19)
    # a few launches over big arrays: the copies would cost more than the launches they save
    assert not cuda_graphs.graphs_pay(launches=1, staged_bytes=80_000_000, copies=2)  # the chain, 10^7
    assert not cuda_graphs.graphs_pay(launches=46, staged_bytes=4_000_000_000, copies=19)
    # the copies' host time counts too: one kernel with many small arguments stays eager
    assert not cuda_graphs.graphs_pay(launches=1, staged_bytes=64, copies=12)
    # what a call stages: every argument in, every public result and write-back out
    assert cuda_graphs.staging([40, 8, 4], [4], writeback=[0]) == (40 + 8 + 4 + 4 + 40, 5)


def test_cost_rule_on_the_suite_programs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite's programs at the CPU sizes: graphs where many launches stage few bytes (the MLP
    step, the second derivative, the transformer block), eager for one kernel over 40 MB (the chain)."""
    monkeypatch.setenv("DSL_TARGET", "cuda")  # (compiling needs no GPU)
    chosen = {}
    for name in ("elementwise chain", "MLP training step", "transformer block"):
        program = suite_programs.BUILDERS[name]()
        lowered = program.dslc.lower(*program.args).program
        func, generated = lowered.compilation.func, lowered.generated
        n_public = generated.n_results - len(generated.writeback)
        size = lambda t: math.prod(t.shape) * t.dtype.np.itemsize  # noqa: E731
        staged, copies = cuda_graphs.staging(
            [size(p.type) for p in func.params],
            [size(t) for t in generated.result_types[:n_public]],
            generated.writeback,
        )
        assert not generated.host_reads
        chosen[name] = cuda_graphs.graphs_pay(generated.launches, staged, copies)
    assert chosen == {"elementwise chain": False, "MLP training step": True, "transformer block": True}


def test_graphs_are_a_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    monkeypatch.delenv("DSL_CUDA_GRAPHS", raising=False)
    assert cuda_graphs.graphs_enabled() is cuda_graphs.GRAPHS_BY_DEFAULT
    monkeypatch.setenv("DSL_CUDA_GRAPHS", "0")
    assert not cuda_graphs.graphs_enabled()
    assert "DSL_CUDA_GRAPHS=1" in str(cuda_graphs.eager_reason(False, 76, 0, 1))
    monkeypatch.setenv("DSL_CUDA_GRAPHS", "1")
    assert cuda_graphs.graphs_enabled()
    assert cuda_graphs.eager_reason(False, 76, 1000, 4) is None
    assert "reads device values" in str(cuda_graphs.eager_reason(True, 76, 1000, 4))
    assert "costs more" in str(cuda_graphs.eager_reason(False, 1, 10**9, 2))
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")  # the simulator has no graphs, whatever the flag
    assert not cuda_graphs.graphs_enabled()
    assert "simulator" in str(cuda_graphs.eager_reason(False, 76, 1000, 4))


class RecordingDriver:
    """The few ``cuda.bindings.driver`` calls of the pool, recorded; every one succeeds."""

    def __init__(self, driver: Any) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.CUresult, self.CUdeviceptr = driver.CUresult, driver.CUdeviceptr
        self.CUmemPool_attribute, self.cuuint64_t = driver.CUmemPool_attribute, driver.cuuint64_t

    def _done(self, *values: Any) -> tuple[Any, ...]:
        return (self.CUresult.CUDA_SUCCESS, *values)

    def cuDeviceGet(self, ordinal: int) -> tuple[Any, ...]:
        return self._done(ordinal)

    def cuDeviceGetDefaultMemPool(self, device: Any) -> tuple[Any, ...]:
        return self._done("pool")

    def cuMemPoolSetAttribute(self, pool: Any, attribute: Any, value: Any) -> tuple[Any, ...]:
        self.calls.append(("threshold", int(value)))
        return self._done()

    def cuMemAllocAsync(self, nbytes: int, stream: int) -> tuple[Any, ...]:
        self.calls.append(("alloc", nbytes, stream))
        return self._done(self.CUdeviceptr(4096))

    def cuMemFreeAsync(self, ptr: int, stream: int) -> tuple[Any, ...]:
        self.calls.append(("free", int(ptr), stream))
        return self._done()


class FakeStream:
    def __int__(self) -> int:
        return 77


def test_pool_arrays_are_freed_in_stream_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """A device result from the pool: a Numba array of the result's shape (C order) over the block
    ``cuMemAllocAsync`` gave, handed back with ``cuMemFreeAsync`` on the stream when dropped (the
    driver API recorded, Numba's real array class)."""
    fake = RecordingDriver(pytest.importorskip("cuda.bindings.driver"))
    pytest.importorskip("numba.cuda.cudadrv.devicearray")
    monkeypatch.setattr(cuda_graphs, "_driver", lambda: fake)
    monkeypatch.setattr(cuda_graphs, "_pool_ready", set())
    cuda = SimpleNamespace(current_context=lambda: SimpleNamespace(device=SimpleNamespace(id=0)))
    a = cuda_graphs.pool_array(cuda, (3, 4), np.dtype(F32), FakeStream())
    assert (a.shape, a.strides, a.dtype, a.device_ctypes_pointer.value) == ((3, 4), (16, 4), F32, 4096)
    assert fake.calls == [("threshold", 2**64 - 1), ("alloc", 48, 77)]
    del a
    gc.collect()
    assert fake.calls[-1] == ("free", 4096, 77)


@pytest.mark.parametrize("shape", [(3, 4), (7,), (), (2, 1, 5)])
@pytest.mark.parametrize("dtype", [F32, np.int64, np.bool_])
def test_arrays_over_memory_are_what_numbas_constructor_makes(shape, dtype) -> None:
    """``device_array_over`` copies the attributes of the first array of a shape, built by Numba's
    constructor, into the next ones (a call makes one per result and reshape): each must be what the
    constructor makes of its own memory and stream, with nothing the constructor derives from them
    left over from the first (a Numba that did would fail here)."""
    from numba.cuda.cudadrv.devicearray import DeviceNDArray
    from test_cuda_launch import _Memory

    dtype = np.dtype(dtype)
    nbytes = max(1, math.prod(shape)) * dtype.itemsize
    first, second = _Memory(0x10000, nbytes), _Memory(0x20000, nbytes)
    cuda_graphs._layouts.clear()
    made = [
        cuda_graphs.device_array_over(m, shape, dtype, s) for m, s in ((first, 0), (second, 7), (first, 9))
    ]
    for array, memory, stream in zip(made, (first, second, first), (0, 7, 9), strict=True):
        want = DeviceNDArray(shape, cuda_graphs.c_strides(shape, dtype.itemsize), dtype, stream, memory)
        assert type(array) is DeviceNDArray
        assert {k: v for k, v in vars(array).items() if k != "_dummy"} == {
            k: v for k, v in vars(want).items() if k != "_dummy"
        }
        assert (array.shape, array.strides, array.size, array.nbytes) == (
            want.shape,
            want.strides,
            want.size,
            want.nbytes,
        )
        assert array.device_ctypes_pointer.value == memory.device_ctypes_pointer.value
        assert array.is_c_contiguous() and array.__cuda_array_interface__ == want.__cuda_array_interface__


def test_handed_out_results_keep_their_graph_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A result a graph hands out (``handed_out``, Numba's real array and memory classes over a
    fake buffer): the graph is busy while the array or any view cut from it is alive, free after;
    the array keeps the graph's buffer alive, and reads at its address."""
    from numba.cuda.cudadrv.devicearray import DeviceNDArray
    from test_cuda_launch import device_array

    monkeypatch.setattr(cuda_graphs, "_driver", lambda: pytest.importorskip("cuda.bindings.driver"))
    buffer = device_array((12,), F32, address=0x7F0000001000)
    graph = cuda_graphs.CallGraph.__new__(cuda_graphs.CallGraph)
    graph.stage([], (buffer,), hands_out=True)
    assert not graph.busy()
    context = SimpleNamespace(device=SimpleNamespace(id=0))
    a = cuda_graphs.handed_out(graph, 0, (3, 4), np.dtype(F32), 0, context)
    assert type(a) is DeviceNDArray and (a.shape, a.strides, a.dtype) == ((3, 4), (16, 4), F32)
    assert a.device_ctypes_pointer.value == 0x7F0000001000 and graph.busy()
    # a view, as Numba's slicing makes it (``a[1]`` itself needs a driver for its stream): an array
    # over its memory's view, which keeps the memory it was cut from
    row = DeviceNDArray((4,), (4,), F32, 0, a.gpu_data.view(16, 32))
    assert row.device_ctypes_pointer.value == 0x7F0000001000 + 16
    del a
    gc.collect()
    assert graph.busy()
    kept = row.gpu_data._view._owner.kept  # (the handed-out memory keeps the graph's buffer)
    assert kept is buffer
    del row, kept
    gc.collect()
    assert not graph.busy() and graph.out == []
    b = cuda_graphs.handed_out(graph, 0, (12,), np.dtype(F32), 0, context)
    del graph
    gc.collect()
    assert b.gpu_data.kept is buffer  # the caller's result outlives the graph, its buffer with it


def test_call_arrays_come_from_the_pool_except_in_a_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call's fresh arrays (``result_array``: the driver's results, copies of NumPy arguments) come
    from the stream-ordered pool, eager calls included; from ``cuMemAlloc`` (``cuda.device_array``)
    while a graph is captured, under the simulator, and with ``DSL_CUDA_POOL=0``."""
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    monkeypatch.setattr(cuda_graphs, "POOL_RESULTS", True)
    made: list[tuple[str, Any, Any]] = []
    pool = lambda cuda, shape, dtype, s: made.append(("pool", shape, dtype))  # noqa: E731
    monkeypatch.setattr(cuda_graphs, "pool_array", pool)
    cuda = SimpleNamespace(device_array=lambda shape, dtype, stream: made.append(("alloc", shape, dtype)))
    cuda_graphs.result_array(cuda, 12, F32, FakeStream())
    cuda_graphs.result_array(cuda, (3, 4), np.int64, FakeStream())
    cuda_graphs._capturing.on = True
    try:
        cuda_graphs.result_array(cuda, 12, F32, FakeStream())
    finally:
        cuda_graphs._capturing.on = False
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    cuda_graphs.result_array(cuda, 5, F32, FakeStream())
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM")
    monkeypatch.setattr(cuda_graphs, "POOL_RESULTS", False)
    cuda_graphs.result_array(cuda, 6, F32, FakeStream())
    assert made == [
        ("pool", (12,), np.dtype(F32)),
        ("pool", (3, 4), np.dtype(np.int64)),
        ("alloc", 12, F32),
        ("alloc", 5, F32),
        ("alloc", 6, F32),
    ]


def test_the_driver_allocates_results_through_the_pool() -> None:
    x = RNG.standard_normal(16).astype(F32)
    source = dsl.compile(lambda x: (dnp.exp(x), x), target="cuda").lower(x).program.generated.source
    assert "cuda.device_array(" not in source.split("def bind(")[1]  # per call: _alloc and _dup only
    assert "_dup(" in source  # the returned argument is copied (results never alias inputs)


def _generated(fn: Callable[..., Any], *args: Any) -> Any:
    return dsl.compile(fn, target="cuda").lower(*args).program.generated


def test_driver_facts_of_straight_line_code() -> None:
    x = RNG.standard_normal((8, 16)).astype(F32)
    program = _generated(lambda x: dnp.tanh(x @ x.T).sum(axis=1), x)
    assert not program.host_reads
    assert program.launches >= 2  # the matmul and the tanh-and-sum


def test_driver_facts_of_loops() -> None:
    x = RNG.standard_normal(16).astype(F32)
    body = lambda i, c: dnp.tanh(c) * 0.5  # noqa: E731
    literal = _generated(lambda x: dsl.fori_loop(0, 6, body, x), x)
    assert not literal.host_reads  # a host loop of a fixed count: one fixed sequence of launches
    once = _generated(lambda x: dsl.fori_loop(0, 1, body, x), x)
    assert literal.launches >= 6 * max(once.launches - 1, 1)  # the body's launches, once per trip
    while_ = _generated(lambda x: dsl.while_loop(lambda c: c.sum() < 100.0, lambda c: c * 2.0 + 1.0, x), x)
    assert while_.host_reads  # the condition is read back every trip


# ---- on a GPU ----------------------------------------------------------------------------------------

gpu = pytest.mark.skipif(
    not cuda_available(), reason="needs a usable NVIDIA GPU: CUDA graphs do not exist in the simulator"
)


@pytest.fixture
def graphs_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Graphs on for the executables built in the test, whatever the cost rule says (each test
    program must take the graph path)."""
    monkeypatch.setenv("DSL_CUDA_GRAPHS", "1")
    monkeypatch.setattr(cuda_graphs, "graphs_pay", lambda *a: True)


def _tree(x: Any, leaf: Callable[[Any], Any]) -> Any:
    leaves, treedef = pytree.flatten(x)
    return pytree.unflatten(treedef, [leaf(a) if isinstance(a, np.ndarray) else a for a in leaves])


def _on_device(x: Any) -> Any:
    from numba import cuda

    return _tree(x, cuda.to_device)


def _host(x: Any) -> list[np.ndarray]:
    leaves, _ = pytree.flatten(x)
    return [np.asarray(a.copy_to_host() if hasattr(a, "copy_to_host") else a) for a in leaves]


def _same(got: Any, want: Any) -> None:
    for g, w in zip(_host(got), _host(want), strict=True):
        np.testing.assert_array_equal(g, w)


def _executable(f: Any, *args: Any) -> Any:
    return f.lower(*args).program.executable


def _calls(f: Callable[..., Any], args: Any, n: int, device: bool) -> list[tuple[Any, list[np.ndarray]]]:
    """``n`` calls of ``f`` on fresh copies of ``args``: each call's result and its arguments after it
    (write-backs)."""
    out = []
    for _ in range(n):
        copy = _tree(args, np.copy)
        given = _on_device(copy) if device else copy
        out.append((f(*given), _host(given)))
    return out


# every program with its arguments on the device; two with NumPy arguments too (a signature each)
SUITE = [(name, True) for name in suite_programs.BUILDERS] + [
    ("layer norm", False),
    ("MLP training step", False),
]


@gpu
@pytest.mark.parametrize("name, device", SUITE, ids=[f"{n}-{'device' if d else 'host'}" for n, d in SUITE])
def test_suite_programs_replay_bit_for_bit(
    graphs_on: None, monkeypatch: pytest.MonkeyPatch, name: str, device: bool
) -> None:
    monkeypatch.setenv("DSL_TARGET", "cuda")
    program = suite_programs.BUILDERS[name]()
    # the first call is eager, the second captures and replays, the third replays
    (eager, eager_args), *replays = _calls(program.dslc, program.args, 3, device)
    executable = _executable(program.dslc, *(_on_device(program.args) if device else program.args))
    assert executable.eager_reason is None and executable.graph is not None, executable.eager_reason
    for result, args in replays:
        _same(result, eager)
        _same(args, eager_args)  # write-backs (the MLP step's SGD update)


def _eager(fn: Callable[..., Any], *args: Any, **options: Any) -> Any:
    """``fn`` compiled for ``args``' signature, its executable kept eager (the reference). Host and
    device arguments are two signatures: pass the kind the test calls with."""
    f = dsl.compile(fn, target="cuda", **options)
    _executable(f, *args).eager_reason = "the test's eager reference"
    return f


def _step(w: Any, x: Any) -> Any:
    loss = dnp.tanh(x @ w).sum()
    w -= 0.1 * x.T @ dnp.tanh(x @ w)
    return loss


@gpu
@pytest.mark.parametrize("device", [False, True], ids=["host", "device"])
def test_new_arguments_every_call(graphs_on: None, device: bool) -> None:
    w0 = RNG.standard_normal((16, 8)).astype(F32)
    xs = [RNG.standard_normal((4, 16)).astype(F32) for _ in range(5)]
    fast = dsl.compile(_step, target="cuda")
    runs = []
    given = (lambda a: _on_device(a)) if device else (lambda a: a)  # noqa: E731
    for f in (fast, _eager(_step, given(w0), given(xs[0]))):
        w = given(w0.copy())
        losses = [f(w, given(x)) for x in xs]
        runs.append((losses, _host(w)))
    _same(runs[0], runs[1])
    assert _executable(fast, given(w0), given(xs[0])).graph is not None


@gpu
def test_donated_arguments(graphs_on: None) -> None:
    fn = lambda a, b: (dnp.exp(a) + b, a * b)  # noqa: E731
    a, b = RNG.standard_normal(100).astype(F32), RNG.standard_normal(100).astype(F32)
    fast = dsl.compile(fn, target="cuda", donate_argnums=(0,))
    slow = _eager(fn, _on_device(a), _on_device(b), donate_argnums=(0,))
    for _ in range(3):
        _same(fast(_on_device(a), _on_device(b)), slow(_on_device(a), _on_device(b)))


@gpu
def test_device_results_are_fresh_arrays(graphs_on: None) -> None:
    f = dsl.compile(lambda x: dnp.sin(x) * 2.0, target="cuda")
    xs = [_on_device(RNG.standard_normal(64).astype(F32)) for _ in range(4)]
    results = [f(x) for x in xs]  # the later ones replay the graph: their results must not share memory
    eager = _eager(lambda x: dnp.sin(x) * 2.0, xs[0])  # (CUDA's sin may differ from NumPy's by an ulp)
    for x, r in zip(xs, results):
        _same(r, eager(x))
    assert len({r.device_ctypes_pointer.value for r in results}) == len(results)


@gpu
def test_eager_results_come_from_the_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """Graphs off: every call's results (and the copies of NumPy arguments) come from the pool and
    go back to it; values as with ``DSL_CUDA_POOL=0``."""
    from cuda.bindings import driver

    monkeypatch.setenv("DSL_CUDA_GRAPHS", "0")
    fn = lambda x, y: (dnp.exp(x) * y, x, y.sum())  # noqa: E731  (a returned argument: _dup)
    x, y = RNG.standard_normal(2**18).astype(F32), RNG.standard_normal(2**18).astype(F32)
    f = dsl.compile(fn, target="cuda")
    monkeypatch.setattr(cuda_graphs, "POOL_RESULTS", False)
    want = dsl.compile(fn, target="cuda")(x, y)
    monkeypatch.setattr(cuda_graphs, "POOL_RESULTS", True)
    for given in ((x, y), (_on_device(x), _on_device(y))):
        for _ in range(3):
            _same(f(*given), want)
    free_before = cuda_graphs.check(driver.cuMemGetInfo(), "cuMemGetInfo")[0]
    for _ in range(200):
        f(_on_device(x), y)
    free_after = cuda_graphs.check(driver.cuMemGetInfo(), "cuMemGetInfo")[0]
    assert free_before - free_after < 64 * 2**20, (free_before, free_after)


@gpu
def test_results_memory_goes_back_to_the_pool(graphs_on: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Results copied out of a graph (none handed out: ``HANDOUT_GRAPHS`` 0) come from the pool and go
    back to it when dropped."""
    from cuda.bindings import driver

    monkeypatch.setattr(cuda_graphs, "HANDOUT_GRAPHS", 0)
    f = dsl.compile(lambda x: x * 2.0, target="cuda")
    x = _on_device(RNG.standard_normal(2**18).astype(F32))  # 1 MiB results
    for _ in range(3):
        f(x)
    free_before = cuda_graphs.check(driver.cuMemGetInfo(), "cuMemGetInfo")[0]
    for _ in range(300):  # each result dropped at once: freed in the stream's order
        f(x)
    free_after = cuda_graphs.check(driver.cuMemGetInfo(), "cuMemGetInfo")[0]
    assert free_before - free_after < 64 * 2**20, (free_before, free_after)


@gpu
def test_loops(graphs_on: None) -> None:
    x = RNG.standard_normal(32).astype(F32)
    literal = lambda x: dsl.fori_loop(0, 5, lambda i, c: dnp.tanh(c) * 1.5, x)  # noqa: E731
    while_ = lambda x: dsl.while_loop(lambda c: c.sum() < 1e4, lambda c: c * 2.0 + 1.0, x)  # noqa: E731
    for fn, captured in ((literal, True), (while_, False)):
        fast, slow = dsl.compile(fn, target="cuda"), _eager(fn, x)
        for _ in range(3):
            _same(fast(x), slow(x))
        executable = _executable(fast, x)
        assert (executable.graph is not None) is captured, executable.eager_reason
        if not captured:
            assert "reads device values" in executable.eager_reason


@gpu
def test_interleaved_executables_and_threads(graphs_on: None) -> None:
    fns = [lambda x: dnp.tanh(x @ x.T).sum(axis=0), lambda x: dnp.exp(x).sum() * x]
    xs = [RNG.standard_normal((8, 8)).astype(F32) for _ in range(6)]
    fast = [dsl.compile(fn, target="cuda") for fn in fns]
    want = [[_host(f(x)) for x in xs] for f in (_eager(fn, xs[0]) for fn in fns)]
    for x, *expected in zip(xs, *want):  # interleaved in one thread
        for f, w in zip(fast, expected):
            _same(f(x), w)
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for i in range(20):
                j = (i + k) % len(xs)
                _same(fast[k % 2](_on_device(xs[j])), want[k % 2][j])
        except BaseException as err:  # reported by the main thread
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
