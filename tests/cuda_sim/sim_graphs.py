"""The CUDA executable with and without graphs (``runtime/cuda_graphs.py``), against the CPU backend.

Graphs off (always in the simulator, which has none, and on a GPU with ``DSL_CUDA_GRAPHS=0``): the
executable launches every kernel on every call and captures nothing. Graphs forced on: calls after
the first go through the staging buffers; in the simulator a recorded run stands in for the graph
(``ReplayedRun``), on a GPU the graph is real."""

from __future__ import annotations

import ctypes
import os
import weakref

import numpy as np
import pytest
from numba import cuda

import dsl
import dsl.numpy as dnp
from runtime import cuda_graphs
from runtime.cuda_executable import device_address

RNG = np.random.default_rng(5)


def _step(w, x):
    loss = dnp.tanh(x @ w).sum()
    w -= 0.1 * x.T @ dnp.tanh(x @ w)
    return loss


def test_graphs_off_launches_eagerly(monkeypatch: pytest.MonkeyPatch) -> None:
    simulator = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
    monkeypatch.setenv("DSL_CUDA_GRAPHS", "1" if simulator else "0")  # the simulator has none anyway
    w0 = RNG.standard_normal((8, 4)).astype(np.float32)
    xs = [RNG.standard_normal((3, 8)).astype(np.float32) for _ in range(3)]
    on_gpu, on_cpu = dsl.compile(_step, target="cuda"), dsl.compile(_step, target="cpu")
    w_gpu, w_cpu = w0.copy(), w0.copy()
    for x in xs:
        np.testing.assert_allclose(on_gpu(w_gpu, x), on_cpu(w_cpu, x), rtol=1e-5)
        np.testing.assert_allclose(w_gpu, w_cpu, rtol=1e-5, atol=1e-6)
    executable = on_gpu.lower(w0, xs[0]).program.executable
    assert executable.graph is None
    assert executable.eager_reason == cuda_graphs.eager_reason(False, 0, 0, 0)  # off or simulator


class ReplayedRun:
    """Stands for a captured graph in the simulator (which has none): "capturing" binds the driver
    and runs it once on the staging buffers; each launch runs it again and moves its results into
    the first run's buffers, as a graph writes to the addresses it captured. What is checked is the
    executable's side: arguments copied in, write-backs and results copied out."""

    def __init__(self, cuda, bind, arena, outs, args, blas, direct=(), hands_out=False) -> None:
        self.run = bind(arena, cuda.stream())
        self.outs, self.read = list(outs), list(args)  # (a graph reads the caller's at their addresses)
        read_in_place = [(a, a.copy_to_host()) for a, d in zip(args, direct) if d]
        results = tuple(self.run(*self.outs, *args))
        for a, before in read_in_place:  # a capture runs nothing: the caller's arrays stay as they were
            a.copy_to_device(before)
        cuda_graphs.CallGraph.stage(self, args, results, device_address, direct, hands_out)  # type: ignore[arg-type]
        self.launches = 0

    busy = cuda_graphs.CallGraph.busy

    def launch(self, stream: int) -> None:
        self.launches += 1
        for mine, new in zip(self.results, self.run(*self.outs, *self.read)):
            if mine is not None and new is not mine and mine.size:
                mine.copy_to_device(new)


def _memmove(dst: int, src: int, nbytes: int, stream: int) -> None:
    ctypes.memmove(dst, src, nbytes)  # the simulator's device memory is the host's


@pytest.fixture
def replayed(monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether the graph is a stand-in (the simulator); on a GPU the executable replays a real one."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        return False
    monkeypatch.setattr(cuda_graphs, "capture", ReplayedRun)
    monkeypatch.setattr(cuda_graphs, "copy_async", _memmove)
    monkeypatch.setattr(cuda_graphs, "stream_handle", lambda stream: 0)
    monkeypatch.setattr(
        cuda_graphs, "pool_array", lambda cuda, shape, dtype, stream: cuda.device_array(shape, dtype)
    )
    monkeypatch.setattr(cuda_graphs, "handed_out", _handed_out)
    return True


def _handed_out(graph, k, shape, dtype, stream, context):
    """``cuda_graphs.handed_out`` in the simulator: the stand-in's own result buffer (a view of it,
    of the result's shape), weakly referenced by the graph."""
    array = graph.results[k].reshape(shape)
    assert device_address(array) == graph.addresses[k]  # (the buffer itself, not a copy)
    graph.out.append(weakref.ref(array))
    return array


def _graphs_forced(f, *args):
    executable = f.lower(*args).program.executable
    executable.eager_reason = None
    return executable


def _ret_arg_too(a, b):
    a += b  # a write-back
    return dnp.exp(b).sum(), b, a * 2.0  # b: an argument returned (the driver's copy)


@pytest.mark.parametrize("device", [False, True], ids=["host", "device"])
def test_replayed_calls_stage_arguments_and_results(replayed: bool, device: bool) -> None:
    put = (lambda x: cuda.to_device(x)) if device else (lambda x: x)
    get = (lambda x: x.copy_to_host()) if device else np.asarray
    f, ref = dsl.compile(_ret_arg_too, target="cuda"), dsl.compile(_ret_arg_too, target="cpu")
    inputs = [
        (RNG.standard_normal((4, 5)).astype(np.float32), RNG.standard_normal((4, 5)).astype(np.float32))
    ]
    inputs += [(a + 1.0, b * 3.0) for a, b in inputs * 3]
    executable = _graphs_forced(f, put(inputs[0][0]), put(inputs[0][1]))
    for a, b in inputs:  # the first call eager, the others "replayed", each on new arguments
        a_gpu, a_cpu = put(a.copy()), a.copy()
        got, want = f(a_gpu, put(b)), ref(a_cpu, b)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(get(g), w, rtol=1e-5)
        np.testing.assert_allclose(get(a_gpu), a_cpu, rtol=1e-6)
    assert executable.graph is not None
    assert not replayed or sum(g.launches for g in executable.graphs) == len(inputs) - 1
    results = [f(put(a.copy()), put(b))[2] for a, b in inputs[:2]]  # fresh arrays, not the graph's
    np.testing.assert_allclose(get(results[0]), (inputs[0][0] + inputs[0][1]) * 2.0, rtol=1e-5)


def test_replayed_donated_and_mutated_arguments(replayed: bool) -> None:
    fn = lambda w, x, y: (dnp.tanh(x @ w).sum(), w, x * 2.0)  # noqa: E731

    def step(w, x, y):
        w -= 0.1 * x.T @ (dnp.tanh(x @ w) - y)
        return dnp.tanh(x @ w).sum()

    w0, y = RNG.standard_normal((6, 3)).astype(np.float32), RNG.standard_normal((5, 3)).astype(np.float32)
    xs = [RNG.standard_normal((5, 6)).astype(np.float32) for _ in range(4)]
    for body, options in ((step, {}), (fn, {"donate_argnums": (1,)})):
        f, ref = dsl.compile(body, target="cuda", **options), dsl.compile(body, target="cpu", **options)
        w_gpu, w_cpu = cuda.to_device(w0.copy()), w0.copy()
        executable = _graphs_forced(f, w_gpu, cuda.to_device(xs[0]), cuda.to_device(y))
        for x in xs:
            got, want = f(w_gpu, cuda.to_device(x.copy()), cuda.to_device(y)), ref(w_cpu, x.copy(), y)
            for g, w in zip(
                got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)
            ):
                np.testing.assert_allclose(g.copy_to_host(), w, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(w_gpu.copy_to_host(), w_cpu, rtol=1e-4, atol=1e-5)
        assert executable.graph is not None


def test_a_failed_capture_falls_back_to_eager(replayed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args):
        raise cuda_graphs.DeviceError("cuStreamBeginCapture failed: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")

    monkeypatch.setattr(cuda_graphs, "capture", refuse)
    f, ref = dsl.compile(_ret_arg_too, target="cuda"), dsl.compile(_ret_arg_too, target="cpu")
    a, b = RNG.standard_normal(7).astype(np.float32), RNG.standard_normal(7).astype(np.float32)
    executable = _graphs_forced(f, a, b)
    for _ in range(3):
        a_gpu, a_cpu = a.copy(), a.copy()
        for g, w in zip(f(a_gpu, b), ref(a_cpu, b), strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-5)
        np.testing.assert_allclose(a_gpu, a_cpu, rtol=1e-6)
    assert executable.graph is None and "capture failed" in executable.eager_reason


def _counted_copies(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The (destination, source) of each staging copy a replay makes from now on."""
    copies: list[tuple[int, int]] = []
    copy = cuda_graphs.copy_async

    def counted(dst: int, src: int, nbytes: int, stream: int) -> None:
        copies.append((dst, src))
        copy(dst, src, nbytes, stream)

    monkeypatch.setattr(cuda_graphs, "copy_async", counted)
    return copies


def _train(w, b, x, y):
    h = dnp.tanh(x @ w + b)
    loss = ((h - y) ** 2).sum()
    w -= 0.05 * x.T @ (2.0 * (h - y) * (1.0 - h * h))  # mutated arguments, updated every call
    b -= 0.05 * (2.0 * (h - y) * (1.0 - h * h)).sum(0)
    return loss, h


def test_arguments_that_stay_put_are_read_in_place(replayed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A loop passing the same device arrays: the graph reads them (and writes the mutated ones)
    where they are, with no staging copy in or back; only the results are copied out."""
    w0, b0 = RNG.standard_normal((6, 3)).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    x, y = RNG.standard_normal((5, 6)).astype(np.float32), RNG.standard_normal((5, 3)).astype(np.float32)
    f, ref = dsl.compile(_train, target="cuda"), dsl.compile(_train, target="cpu")
    w_gpu, b_gpu, x_gpu, y_gpu = (cuda.to_device(a.copy()) for a in (w0, b0, x, y))
    w_cpu, b_cpu = w0.copy(), b0.copy()
    executable = _graphs_forced(f, w_gpu, b_gpu, x_gpu, y_gpu)
    copies = _counted_copies(monkeypatch)
    for step in range(4):
        loss, h = f(w_gpu, b_gpu, x_gpu, y_gpu)
        want_loss, want_h = ref(w_cpu, b_cpu, x, y)
        np.testing.assert_allclose(loss.copy_to_host(), want_loss, rtol=1e-4)
        np.testing.assert_allclose(h.copy_to_host(), want_h, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(w_gpu.copy_to_host(), w_cpu, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(b_gpu.copy_to_host(), b_cpu, rtol=1e-4, atol=1e-6)
        if step == 0:  # the first call is eager; the second captures
            continue
        graph = executable.graph
        assert graph is not None and graph.direct == [True] * 4 and graph.hands_out
        # no argument staged, no result copied: only the write-backs the plan does not make in
        # place (``direct``) are copied back
        wrote = {dst for dst, _ in copies} & {device_address(a) for a in (w_gpu, b_gpu)}
        assert len(wrote) == 2 - len(executable.direct), copies
        assert len(copies) == len(wrote), copies
        copies.clear()
    # (loss, h) of one call are alive during the next: two graphs hand their results out in turn
    assert [g.hands_out for g in executable.graphs] == [True, True]
    assert not replayed or [g.launches for g in executable.graphs] == [2, 1]


def test_an_argument_that_moves_is_staged_from_then_on(
    replayed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An argument the graph read in place, passed elsewhere (a new array, a host array): the
    executable captures again with it staged, once; the others stay read in place."""
    captures = []
    capture = cuda_graphs.capture

    def counted(*args, **kwargs):
        captures.append(kwargs.get("direct"))
        return capture(*args, **kwargs)

    monkeypatch.setattr(cuda_graphs, "capture", counted)
    w0, b0 = RNG.standard_normal((6, 3)).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    xs = [RNG.standard_normal((5, 6)).astype(np.float32) for _ in range(6)]
    y = RNG.standard_normal((5, 3)).astype(np.float32)
    f, ref = dsl.compile(_train, target="cuda"), dsl.compile(_train, target="cpu")
    w_gpu, b_gpu, y_gpu = (cuda.to_device(a.copy()) for a in (w0, b0, y))
    w_cpu, b_cpu = w0.copy(), b0.copy()
    x_gpu = cuda.to_device(xs[0])
    executable = _graphs_forced(f, w_gpu, b_gpu, x_gpu, y_gpu)
    for step, x in enumerate(xs):
        if step >= 2:  # the first two calls pass x at one address, the next ones elsewhere
            x_gpu = cuda.to_device(x) if step != 4 else x  # (step 4: a host array)
        else:
            x_gpu.copy_to_device(x)
        loss, h = f(w_gpu, b_gpu, x_gpu, y_gpu)
        want_loss, want_h = ref(w_cpu, b_cpu, x, y)
        np.testing.assert_allclose(np.asarray(loss.copy_to_host()), want_loss, rtol=1e-4)
        np.testing.assert_allclose(h.copy_to_host(), want_h, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(w_gpu.copy_to_host(), w_cpu, rtol=1e-4, atol=1e-6)
    # the second call's graph, then (x moved) two handing their results out in turn
    assert captures == [[True] * 4, [True, True, False, True], [True, True, False, True]]
    assert [g.direct for g in executable.graphs] == [[True, True, False, True]] * 2


def _reversed_into(a, b):
    c = a[::-1] * 1.0
    a[:] = c + b  # a write-back the plan does not make in place (it reads a reversed)
    return c


@pytest.mark.parametrize("body", [_ret_arg_too, _reversed_into])
def test_mutated_arguments_read_in_place(replayed: bool, body) -> None:
    """The same device arrays every call, one mutated each time (in place by the kernels, or by a
    copy back after the graph): the values of a CPU loop."""
    a0, b = RNG.standard_normal(9).astype(np.float32), RNG.standard_normal(9).astype(np.float32)
    f, ref = dsl.compile(body, target="cuda"), dsl.compile(body, target="cpu")
    a_gpu, b_gpu, a_cpu = cuda.to_device(a0.copy()), cuda.to_device(b), a0.copy()
    executable = _graphs_forced(f, a_gpu, b_gpu)
    for _ in range(4):
        got, want = f(a_gpu, b_gpu), ref(a_cpu, b)
        pairs = zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,))
        for g, w in pairs:
            np.testing.assert_allclose(g.copy_to_host(), w, rtol=1e-5)
        np.testing.assert_allclose(a_gpu.copy_to_host(), a_cpu, rtol=1e-5)
    assert executable.graph is not None and executable.graph.direct == [True, True]
    assert executable.direct == ({0} if body is _ret_arg_too else set())


def test_results_kept_are_never_overwritten(replayed: bool) -> None:
    """A caller keeping every call's results (a list of losses): the two graphs that hand results
    out stay busy once each holds one, and the later calls replay a third that copies them out;
    every kept result keeps its own value."""
    f = dsl.compile(lambda x, s: (dnp.sin(x) * s, (x * s).sum()), target="cuda")
    xs = [RNG.standard_normal(33).astype(np.float32) for _ in range(6)]
    x_gpu, s_gpu = cuda.to_device(xs[0]), cuda.to_device(np.float32(1.5))
    executable = _graphs_forced(f, x_gpu, s_gpu)
    kept = []
    for x in xs:
        x_gpu.copy_to_device(x)  # the same arrays each call: read in place
        kept.append(f(x_gpu, s_gpu))
    for (y, total), x in zip(kept, xs, strict=True):
        np.testing.assert_allclose(y.copy_to_host(), np.sin(x) * np.float32(1.5), rtol=1e-5)
        np.testing.assert_allclose(total.copy_to_host(), (x * np.float32(1.5)).sum(), rtol=1e-5)
    assert [g.hands_out for g in executable.graphs] == [True, True, False]
    assert all(g.direct == [True, True] for g in executable.graphs)
    assert executable.graphs[0].busy() and executable.graphs[1].busy() and not executable.graphs[2].busy()
    assert not replayed or [g.launches for g in executable.graphs] == [1, 1, 3]
    addresses = {device_address(r) for pair in kept for r in pair}
    assert len(addresses) == 12  # no two results share memory
    del kept, y, total
    assert not executable.graphs[0].busy() and not executable.graphs[1].busy()


def test_stage_all_switch(replayed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """``DSL_CUDA_STAGE_ALL=1`` (an A/B): one graph, every argument staged, every result copied out."""
    monkeypatch.setattr(cuda_graphs, "STAGE_ALL", True)
    monkeypatch.setattr(cuda_graphs, "HANDOUT_GRAPHS", 0)
    f = dsl.compile(lambda x, s: (dnp.sin(x) * s, (x * s).sum()), target="cuda")
    x, s = RNG.standard_normal(33).astype(np.float32), np.float32(1.5)
    x_gpu, s_gpu = cuda.to_device(x), cuda.to_device(s)
    executable = _graphs_forced(f, x_gpu, s_gpu)
    copies = _counted_copies(monkeypatch)
    kept = [f(x_gpu, s_gpu) for _ in range(4)]
    for y, total in kept:
        np.testing.assert_allclose(y.copy_to_host(), np.sin(x) * s, rtol=1e-5)
        np.testing.assert_allclose(total.copy_to_host(), (x * s).sum(), rtol=1e-5)
    assert [(g.direct, g.hands_out) for g in executable.graphs] == [([False, False], False)]
    assert len(copies) == 3 * 4  # each of the three replays: two arguments in, two results out


def test_a_host_call_keeps_the_graphs_that_read_in_place(replayed: bool) -> None:
    """A NumPy argument now and then (an evaluation between training steps) moves nothing: it gets a
    graph that stages it, and the graphs reading the device arrays in place stay. (The executable is
    called directly: through ``dsl.compile`` a host argument makes a signature, and an executable, of
    its own; one executable meets both where it is handed the arrays itself.)"""
    f = dsl.compile(lambda x, s: (dnp.sin(x) * s, (x * s).sum()), target="cuda")
    x, s = RNG.standard_normal(17).astype(np.float32), np.float32(0.5)
    x_gpu, s_gpu = cuda.to_device(x), cuda.to_device(s)
    executable = _graphs_forced(f, x_gpu, s_gpu)
    for step in range(7):
        host = step == 4
        y, total = executable(x if host else x_gpu, s_gpu)
        np.testing.assert_allclose(y.copy_to_host(), np.sin(x) * s, rtol=1e-5)
    assert executable._moved == set()
    assert sorted((g.direct, g.hands_out) for g in executable.graphs) == [
        ([False, True], False),  # the host call's: x staged, results copied out
        ([True, True], True),
        ([True, True], True),
    ]


def test_a_later_capture_failing_leaves_the_graphs_there(
    replayed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second capture that fails (out of memory for another graph's buffers) stops captures, not
    graphs: the first graph serves on, and a call it cannot serve (its results still held) runs
    eagerly; the values are the CPU's throughout."""
    captures = []
    capture = cuda_graphs.capture

    def second_fails(*args, **kwargs):
        captures.append(kwargs.get("hands_out"))
        if len(captures) > 1:
            raise cuda_graphs.DeviceError("cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY")
        return capture(*args, **kwargs)

    monkeypatch.setattr(cuda_graphs, "capture", second_fails)
    f = dsl.compile(lambda x: dnp.exp(x) * 2.0, target="cuda")
    x_gpu = cuda.to_device(RNG.standard_normal(9).astype(np.float32))
    executable = _graphs_forced(f, x_gpu)
    kept = [f(x_gpu) for _ in range(5)]  # graph, (capture fails) eager, eager ...
    for y in kept:
        np.testing.assert_allclose(y.copy_to_host(), np.exp(x_gpu.copy_to_host()) * 2.0, rtol=1e-5)
    assert executable.eager_reason is None and "OUT_OF_MEMORY" in executable._no_capture
    assert len(executable.graphs) == 1 and captures == [True, True]
    del kept
    f(x_gpu)  # the graph is free again: it serves
    assert not replayed or executable.graphs[0].launches == 2
