"""Host time of a compiled call outside its executable: binding the arguments, the signature key, the
cache lookup, the scalar checks and the result pytree (issue 27's host budget is 20 us + 2 us per
kernel for a whole GPU call, and this part is the same on every target).

    python benchmarks/call_overhead.py [--batches 30] [--calls 50] [--device]

For each of the suite's programs at the CPU suite's sizes (``suite_programs.BUILDERS``): the
executable's ``__call__`` is replaced by one returning its first results again, and the best of
``batches`` means of ``calls`` calls is printed (the minimum: this machine's other load only adds),
beside the number of argument leaves. Needs no GPU.

``--device``: the programs compiled for ``target="cuda"`` and called with Numba device arrays, as on a
GPU, but over fake memory (a ``DeviceNDArray`` built on an object with a device pointer: nothing
reads it), so this too runs without a GPU. The executable is a stub returning the CPU's results;
a second column times the CUDA executable's own checks of the arguments (``_checked`` of each, and
``_check_written`` where the program writes one), which a call runs before it launches anything.

``--replay``: the whole call of a CUDA executable that replays its graph (``CudaExecutable._replay``:
the checks, the staging copies, the launch, the results from the pool), on fake device arrays, with
the driver API (``cuda.bindings.driver``) replaced by calls that do nothing: the host work of a call
that is Python's, without the driver's own time per call (on an H100: a few microseconds each, for
the staging copies, the allocations, the launch and the synchronization, counted beside it). Three
forms (``FORMS``): the arguments elsewhere than the graph reads them (each staged: copied in) and the
results copied out; the arguments where the graph reads them in place (a loop passing the same
arrays: ``CallGraph.direct``); and those with the graph's results handed out (``CallGraph.hands_out``:
a loop dropping each call's results).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from suite_programs import BUILDERS  # noqa: E402

import dsl  # noqa: E402
from dsl import pytree  # noqa: E402


def overhead(name: str, batches: int, calls: int) -> tuple[float, int]:
    """Seconds per call outside the executable, and the argument leaves, of program ``name``."""
    program = BUILDERS[name]()
    f, args = program.dslc, program.args
    f(*args)
    executable = f.lower(*args).program.executable
    kind = type(executable)
    real = kind.__call__
    kept: dict[str, Any] = {}

    def replay(self: Any, *arrays: Any) -> Any:
        if "results" not in kept:
            kept["results"] = real(self, *arrays)
        return kept["results"]

    kind.__call__ = replay  # type: ignore[method-assign]
    try:
        f(*args)
        best = _best(lambda: f(*args), batches, calls)
    finally:
        kind.__call__ = real  # type: ignore[method-assign]
    return best, len(pytree.flatten(args)[0])


def _best(call: Callable[[], Any], batches: int, calls: int) -> float:
    """The least mean seconds of ``call`` over ``batches`` batches of ``calls`` calls."""
    best = float("inf")
    for _ in range(batches):
        begin = time.perf_counter()
        for _ in range(calls):
            call()
        best = min(best, (time.perf_counter() - begin) / calls)
    return best


class _FakeMemory:
    """What a ``DeviceNDArray`` asks of its memory, with no GPU behind it (each at its own address)."""

    next_address = 0x7F0000000000

    def __init__(self, nbytes: int) -> None:
        self.size = nbytes
        self.device_ctypes_pointer = ctypes.c_void_p(_FakeMemory.next_address)
        _FakeMemory.next_address += (nbytes + 255) // 256 * 256

    def view(self, start: int, stop: int | None = None) -> _FakeMemory:
        return self


def fake_device_array(a: np.ndarray) -> Any:
    """A Numba device array of ``a``'s shape and dtype over fake memory (``--device``)."""
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    c = np.ascontiguousarray(a)
    return DeviceNDArray(c.shape, c.strides, c.dtype, stream=0, gpu_data=_FakeMemory(max(c.nbytes, 1)))


def device_overhead(name: str, batches: int, calls: int) -> tuple[float, float, int]:
    """``--device``: seconds per call outside the executable and of the CUDA executable's argument
    checks, and the argument leaves, of program ``name`` compiled for CUDA on device arrays."""
    from runtime.cuda_executable import CudaExecutable

    program = BUILDERS[name]()
    results = program.dslc.lower(*program.args).program.executable(*pytree.flatten(program.args)[0])
    inner = getattr(program.dslc, "_fn", program.dslc)
    f = dsl.compile(lambda *a: inner(*a), target="cuda")
    flat, tree = pytree.flatten(program.args)
    args = pytree.unflatten(tree, [fake_device_array(a) for a in flat])
    lowered = f.lower(*args)
    (entry,) = f._cache.values()
    entry._run = lambda *leaves: results
    f(*args)
    outside = _best(lambda: f(*args), batches, calls)
    leaves = pytree.flatten(args)[0]
    checks = CudaExecutable.__new__(CudaExecutable)  # (its constructor needs a GPU; the checks do not)
    checks.cuda = None
    checks.name = name
    checks.set_inputs([(tuple(a.shape), np.dtype(a.dtype)) for a in leaves])
    checks._written = tuple(lowered.program.generated.writeback)  # (the suite donates nothing)
    checks._arg_names = [str(i) for i in range(len(leaves))]

    def check() -> None:
        if checks._written:
            checks._check_written(leaves)
        for i, a in enumerate(leaves):
            checks._checked(i, a)

    check()
    return outside, _best(check, batches, calls), len(leaves)


class _IdleDriver:
    """``cuda.bindings.driver`` for ``--replay``: each call a replay makes succeeds and does nothing."""

    class CUresult:
        CUDA_SUCCESS = 0

    @staticmethod
    def _done(*_: Any) -> tuple[int]:
        return (0,)

    cuGraphLaunch = cuMemFreeAsync = _done
    copies = 0  # the staging copies made

    @classmethod
    def cuMemcpyDtoDAsync(cls, *_: Any) -> tuple[int]:
        cls.copies += 1
        return (0,)

    @staticmethod
    def cuMemAllocAsync(nbytes: int, stream: int) -> tuple[int, int]:
        return 0, _FakeMemory(nbytes).device_ctypes_pointer.value or 0

    @staticmethod
    def CUdeviceptr(address: int) -> Any:
        from cuda.bindings import driver

        return driver.CUdeviceptr(address)


class _IdleStream:
    def __int__(self) -> int:
        return 0x5EED

    def synchronize(self) -> None:
        pass


FORMS = ("staged", "read in place", "results handed out")  # ``--replay``'s graphs


def replay_overhead(
    name: str, batches: int, calls: int, form: str
) -> tuple[float, float, int, int, int, int]:
    """``--replay``: seconds per whole call and in the executable, of program ``name`` compiled for
    CUDA and replaying a graph over fake memory; its argument leaves, public results, launches and
    staging copies a call. ``form``: one of ``FORMS``."""
    import math
    import threading
    from types import SimpleNamespace

    from runtime import cuda_graphs
    from runtime.cuda_executable import CudaExecutable

    program = BUILDERS[name]()
    flat, tree = pytree.flatten(program.args)
    leaves = [fake_device_array(a) for a in flat]
    inner = getattr(program.dslc, "_fn", program.dslc)
    f = dsl.compile(lambda *a: inner(*a), target="cuda")
    lowered = f.lower(*pytree.unflatten(tree, leaves))
    generated, func = lowered.program.generated, lowered.program.compilation.func
    context = SimpleNamespace(device=SimpleNamespace(id=0))
    ex = CudaExecutable.__new__(CudaExecutable)  # (its constructor needs a GPU; a replay does not)
    ex.cuda = SimpleNamespace(current_context=lambda: context)
    ex.name, ex.stream = func.name, _IdleStream()
    ex.n_results, ex.writeback = generated.n_results, tuple(generated.writeback)
    ex.n_public = ex.n_results - len(ex.writeback)
    ex.set_inputs([(p.type.shape, p.type.dtype.np) for p in func.params])
    ex.result_types = [(tuple(t.shape), np.dtype(t.dtype.np)) for t in generated.result_types]
    ex.direct, ex._written = frozenset(generated.direct_writeback), ex.writeback
    ex._arg_names = list(func.arg_names)
    ex._lock, ex._threads, ex.eager_reason, ex._warm = threading.Lock(), threading.local(), None, True
    ex._seen, ex._moved, ex._no_capture = [], set(), None
    stages = [fake_device_array(np.empty(math.prod(s), d)) for s, d in ex.input_types]
    outs = [fake_device_array(np.empty(math.prod(s), d)) for s, d in ex.result_types]
    graph = cuda_graphs.CallGraph.__new__(cuda_graphs.CallGraph)  # (what a capture makes, not launched)
    if form == "staged":
        graph.stage(stages, tuple(outs))
    else:
        flat = [_flat(a) for a in leaves]
        for j, index in enumerate(ex.writeback):  # the plan's in-place write-backs: the argument itself
            if index in ex.direct:
                outs[ex.n_public + j] = flat[index]
        direct = [True] * len(leaves)
        graph.stage(flat, tuple(outs), direct=direct, hands_out=form != "read in place")
    graph._exec = None
    ex.graphs = [graph]
    (entry,) = f._cache.values()
    entry._run = ex
    saved = cuda_graphs._driver_module, set(cuda_graphs._pool_ready), cuda_graphs.HANDOUT_GRAPHS
    cuda_graphs._driver_module = _IdleDriver()
    cuda_graphs._pool_ready.add(0)
    cuda_graphs.HANDOUT_GRAPHS = int(graph.hands_out)  # (none to capture: the one graph serves)
    args = pytree.unflatten(tree, leaves)
    try:
        f(*args)
        _IdleDriver.copies = 0
        f(*args)
        copies = _IdleDriver.copies
        whole = _best(lambda: f(*args), batches, calls)
        inside = _best(lambda: ex(*leaves), batches, calls)
        assert ex.graphs == [graph], "the replays did not all go through the graph"
    finally:
        cuda_graphs._driver_module, cuda_graphs.HANDOUT_GRAPHS = saved[0], saved[2]
        cuda_graphs._pool_ready.clear()
        cuda_graphs._pool_ready.update(saved[1])
    return whole, inside, len(leaves), ex.n_public, generated.launches, copies


def _flat(array: Any) -> Any:
    """A C-ordered device array as the flat array a call binds (its memory)."""
    from runtime.cuda_executable import _reshaped

    return _reshaped(array, (array.size,))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--device", action="store_true", help="target cuda, Numba device arrays (no GPU)")
    replay_help = "target cuda, a graph replay's whole call (no GPU)"
    parser.add_argument("--replay", action="store_true", help=replay_help)
    args = parser.parse_args()
    if args.replay:
        print(
            "| program | argument leaves | results | launches | graph | staging copies "
            "| us a call | us of it in the executable |"
        )
        print("|---|---:|---:|---:|---|---:|---:|---:|")
        for name in BUILDERS:
            for form in FORMS:
                whole, inside, leaves, results, launches, copies = replay_overhead(
                    name, args.batches, args.calls, form
                )
                row = f"| {name} | {leaves} | {results} | {launches} | {form} | {copies} "
                print(f"{row}| {whole * 1e6:.1f} | {inside * 1e6:.1f} |", flush=True)
        return
    if args.device:
        print("| program | argument leaves | us a call outside the executable | us of the argument checks |")
        print("|---|---:|---:|---:|")
        for name in BUILDERS:
            outside, checks, leaves = device_overhead(name, args.batches, args.calls)
            print(f"| {name} | {leaves} | {outside * 1e6:.1f} | {checks * 1e6:.1f} |", flush=True)
        return
    print("| program | argument leaves | us per call outside the executable |")
    print("|---|---:|---:|")
    for name in BUILDERS:
        seconds, leaves = overhead(name, args.batches, args.calls)
        print(f"| {name} | {leaves} | {seconds * 1e6:.1f} |", flush=True)


if __name__ == "__main__":
    main()
