"""One launch per call: a CUDA executable's kernel sequence captured once into a CUDA graph and
replayed (issue 27).

At the CPU suite's sizes a CUDA call is host-bound: each launch costs tens of microseconds of
Python and driver work, while its kernel runs for a few. A graph replays the whole sequence with one
``cuGraphLaunch``. The driver API comes from ``cuda.bindings.driver`` (the ``cuda`` extra): Numba has
no graph API (numba-cuda issue #832), and cuda-core's ``GraphBuilder`` records what is launched on
the builder itself (numba-cuda 0.30 accepts one as a launch's stream), while cuBLAS and Numba's
copies take a stream handle; capturing a stream records every one of them, whoever makes it.

How a call is captured (``capture``): the generated driver is bound a second time, to a process-wide
non-blocking *capture stream* (a capture on a blocking stream would fail, and fail the other
thread's call, whenever any thread touches the legacy default stream meanwhile), and its ``run`` is
called between ``cuStreamBeginCapture`` (relaxed mode: the driver allocates its ``_dup`` results
with ``cuMemAlloc`` while capturing) and ``cuStreamEndCapture``; nothing runs then. The first call
of an executable runs eagerly (it compiles and loads every kernel, picks cuBLAS, creates the
handle: none of that may happen inside a capture), the second captures, instantiates and launches.

Addresses: a captured kernel holds the addresses it was given. Those of the arena, the constants and
the kernels' scratch never change; the results' do, every call, and the arguments' may. The graph is
made address-independent by *staging*: it is captured on executable-owned buffers, one per argument
(``CallGraph.args``) and the results the capture produced (``CallGraph.results``); a call copies
each argument in (device to device, or host to device where the NumPy path copied anyway), launches
the graph, and copies each result out (into a fresh array from the device's stream-ordered pool, or
to the host where the NumPy path copied anyway). Updating the captured kernel nodes' parameters
(``cuGraphExecKernelNodeSetParams``) instead would spare the copies, but it needs every kernel's
flattened Numba parameters decoded, and a cuBLAS gemm node (opaque parameters) or a memcpy node
reading an argument cannot be updated that way at all; staging works for every node.

Arguments that stay put are read in place (``CallGraph.direct``): a device argument at the address
it had at the executable's last eager call or capture (a loop passing the same arrays: weights
updated in place, a buffer refilled each step) is captured at that address, as an eager launch
reads it, and a replay checks that the argument is still there instead of copying it (layer norm at
the CPU suite's sizes stages 32 MB of inputs a call: some 20 us of device time at 3 TB/s, beside its
kernels' 0.15 ms; the MLP step at the GPU sizes 84 MB). A device argument found elsewhere drops the
graphs that read it in place (up to three, captured again as calls need them) and is staged from
then on (``CudaExecutable._moved``): each argument moves once at most. A host (NumPy) argument moves
nothing: a graph that stages it serves the call. Nothing of the caller's is kept for the address: a
replay reads it only when the call passes an array there, whatever array that is (an address taken
again by a new array of the signature is read as that array). A mutated argument read in place is
written in place too, by the graph itself, as the eager call writes it.

Results handed out (``CallGraph.hands_out``): a call with device results may get the graph's own
result buffers, with no copy out, where that graph's earlier results are all dropped (``busy``: a
weak reference per handed-out buffer, ``handed_out``, which every view of it keeps alive). A loop
that drops each call's results before the next but one (``loss = f(...)`` rebinds after the call)
alternates between two such graphs (``HANDOUT_GRAPHS``); a caller keeping results (a list of
losses) has them all busy, and its calls replay one graph that copies results out, as before.
Each graph has its own staging and result buffers (up to ``HANDOUT_GRAPHS + 1`` sets), and its own
capture (a few milliseconds each, once). A capture that fails after the first (out of memory for
another set of buffers) stops captures, not graphs: those there serve on, and a call none can serve
runs eagerly.

When (``eager_reason``): graphs are on by default (``GRAPHS_BY_DEFAULT``: validated on an H100 on
2026-11-27, ``benchmarks/results/2026-11-27-gpu-lease.md``; ``DSL_CUDA_GRAPHS=0`` turns them off),
never under the CUDA simulator (it has no graphs), never for a driver
that reads device values back (a ``while``, a branch, a run-time bound: ``codegen/cuda/driver.py:
host_reads``; those calls are not one fixed sequence), and only where the cost rule says so.

The cost rule (``graphs_pay``): staging costs device time (its bytes, read and written) and a
driver call per copy; graphs save a launch's host time per kernel. A host-bound call gains the whole
saving, but a device-bound one gains nothing (launches overlap the kernels) and pays the copies. So
graphs are chosen where the copies would take at most ``STAGING_SHARE`` of the launch time saved:
``staged_bytes / COPY_BYTES_PER_S + copies * COPY_HOST_S <= STAGING_SHARE * launches * LAUNCH_HOST_S``,
with every argument, public result and write-back counted as a device copy (the worst case).

Results' memory (eager calls and replays alike, ``result_array``): a call's fresh device arrays (its
results, the copies of NumPy arguments) come from the device's stream-ordered pool (``cuMemAllocAsync``,
the pool keeps freed memory for the next call: ~0.01 ms where ``cuMemAlloc`` of 64 MB costs ~0.2 ms)
and are freed in the executable's stream order (``cuMemFreeAsync``) when their last reference dies.
While a graph is captured they come from ``cuMemAlloc`` instead (a pool allocation there would become
the graph's own memory node, freed and reallocated at each replay), and under the simulator too.
PyTorch's rule for arrays used on another stream holds, without ``record_stream``: a call returns
after its stream finished, so a result is ready for any stream; work queued on another stream that
reads a result must finish before the result is dropped (keep the array alive until then, or
synchronize that stream).
"""

from __future__ import annotations

import math
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from runtime.devices import simulator_enabled
from runtime.errors import DeviceError

GRAPHS_BY_DEFAULT = True  # tests/test_cuda_graphs.py passed on an H100 (2026-11-27; issue 27)

# The cost rule's figures, from an H100 (2026-11-27: benchmarks/cuda_graphs.py and bench_gpu.py):
LAUNCH_HOST_S = 40e-6  # host time of one eager launch (the suite's programs: 37-43 us each)
COPY_HOST_S = 3e-6  # host time of one staging copy (cuMemcpy*Async through cuda.bindings)
COPY_BYTES_PER_S = 1.5e12  # bytes a device-to-device copy moves per second (1.5-1.9e12 measured)
STAGING_SHARE = 0.5  # the copies may cost at most this share of the launch time graphs save
POOL_RESULTS = os.environ.get("DSL_CUDA_POOL", "1").strip() != "0"  # ``result_array``
# ``DSL_CUDA_STAGE_ALL=1``: every argument staged and every result copied out, as before 2026-11-28 (an A/B)
STAGE_ALL = os.environ.get("DSL_CUDA_STAGE_ALL", "0").strip() == "1"
HANDOUT_GRAPHS = 0 if STAGE_ALL else 2  # graphs whose results a call gets without a copy (a loop alternates)


def graphs_enabled() -> bool:
    """Whether CUDA executables may replay graphs: ``DSL_CUDA_GRAPHS`` (``1``/``0``), else
    ``GRAPHS_BY_DEFAULT``; never under the simulator."""
    if simulator_enabled():
        return False
    flag = os.environ.get("DSL_CUDA_GRAPHS")
    return GRAPHS_BY_DEFAULT if flag is None else flag == "1"


def graphs_pay(launches: int, staged_bytes: int, copies: int) -> bool:
    """The cost rule (module docstring): whether a call of ``launches`` kernels gains from a graph
    when ``copies`` staging copies moving ``staged_bytes`` bytes in all come with it."""
    staging = staged_bytes / COPY_BYTES_PER_S + copies * COPY_HOST_S
    return staging <= STAGING_SHARE * launches * LAUNCH_HOST_S


def staging(inputs: Sequence[int], results: Sequence[int], writeback: Sequence[int]) -> tuple[int, int]:
    """``(bytes, copies)`` a call through a graph stages, from the bytes of each argument and public
    result: every argument copied in, every public result and every write-back copied out."""
    copies = len(inputs) + len(results) + len(writeback)
    return sum(inputs) + sum(results) + sum(inputs[i] for i in writeback), copies


def eager_reason(host_reads: bool, launches: int, staged_bytes: int, copies: int) -> str | None:
    """Why an executable launches eagerly, or ``None`` where it replays a graph."""
    if simulator_enabled():
        return "the CUDA simulator has no graphs"
    if not graphs_enabled():
        return "graphs are off (DSL_CUDA_GRAPHS=1 turns them on)"
    if host_reads:
        return "the program reads device values back on the host (a while, a branch, a run-time bound)"
    if not graphs_pay(launches, staged_bytes, copies):
        return f"staging {staged_bytes} bytes in {copies} copies costs more than {launches} launches save"
    return None


_driver_module: Any = None


def _driver() -> Any:
    """``cuda.bindings.driver``, imported at the first use (a call's copies ask for it each time)."""
    global _driver_module
    if _driver_module is None:
        from cuda.bindings import driver

        _driver_module = driver
    return _driver_module


def check(result: Any, what: str) -> Any:
    """The value of a ``cuda.bindings`` call's ``(CUresult, value...)`` tuple (``None`` for none),
    or a ``DeviceError`` naming the call and the error."""
    err, *values = result
    if err != _driver().CUresult.CUDA_SUCCESS:
        raise DeviceError(f"{what} failed: {getattr(err, 'name', err)}")
    return values[0] if len(values) == 1 else tuple(values) or None


def stream_handle(stream: Any) -> int:
    """The driver's handle of a Numba stream, for ``cuda.bindings`` calls."""
    return int(stream)


def copy_async(dst: int, src: int, nbytes: int, stream: int) -> None:
    """A device-to-device copy of ``nbytes`` bytes on ``stream`` (addresses and handle as ints)."""
    if nbytes:
        check(_driver().cuMemcpyDtoDAsync(dst, src, nbytes, stream), "cuMemcpyDtoDAsync")


_CAPTURE_LOCK = threading.Lock()  # one capture at a time on a device's capture stream
_capture_streams: dict[int, Any] = {}


def _capture_stream(cuda: Any) -> Any:
    """The current device's capture stream (non-blocking, created once), as a Numba stream."""
    device = cuda.get_current_device().id
    if device not in _capture_streams:
        driver = _driver()
        flags = int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)
        handle = check(driver.cuStreamCreate(flags), "cuStreamCreate")
        _capture_streams[device] = cuda.external_stream(int(handle))  # lives as long as the process
    return _capture_streams[device]


class CallGraph:
    """A captured call: the instantiated graph, the staging buffers of the arguments it reads (or
    the address of each argument it reads in place), and the results it writes (flat device arrays,
    the order of the driver's). It also keeps the driver bound for the capture alive: the constants
    and views its kernels read are that binding's."""

    def __init__(
        self,
        exec_handle: Any,
        args: list[Any],
        results: tuple[Any, ...],
        keep: Any,
        direct: Sequence[bool] = (),
        hands_out: bool = False,
    ) -> None:
        self.stage(args, results, direct=direct, hands_out=hands_out)
        self._exec = exec_handle
        self._keep = keep
        done = weakref.finalize(self, _destroy, exec_handle)
        done.atexit = False  # the driver may be gone at exit; the process frees the graph then

    def stage(
        self,
        args: list[Any],
        results: tuple[Any, ...],
        at: Callable[[Any], int] | None = None,
        direct: Sequence[bool] = (),
        hands_out: bool = False,
    ) -> None:
        """Its buffers: the arguments it reads and the results it writes, with the address (``at``,
        by default ``address``) and the bytes of each, which a replay reads (a stand-in for a graph
        sets them here too). ``direct``: which arguments it reads in place, at the caller's address
        (the module docstring); it keeps no reference to those (``args`` holds ``None`` there).
        ``hands_out``: whether a call may get its result buffers (``handed_out``)."""
        at = at or address
        self.hands_out = hands_out
        self.out: list[weakref.ref[Any]] = []  # the memory of the results handed out (``busy``)
        self.pointers: dict[int, Any] = {}  # result -> its driver pointer object (``handed_out``)
        self.direct = list(direct) or [False] * len(args)
        self.arg_addresses = [at(a) for a in args]
        self.arg_bytes = [int(a.nbytes) for a in args]
        self.args: list[Any] = [None if d else a for a, d in zip(args, self.direct, strict=True)]
        self.read_at = [(i, a) for i, (a, d) in enumerate(zip(self.arg_addresses, self.direct)) if d]
        self.addresses = [at(r) for r in results]
        self.result_bytes = [int(r.nbytes) for r in results]
        mine = [a for a, d in zip(args, self.direct, strict=True) if d]
        self.results: tuple[Any, ...] = tuple(None if any(r is a for a in mine) else r for r in results)

    def launch(self, stream: int) -> None:
        check(_driver().cuGraphLaunch(self._exec, stream), "cuGraphLaunch")

    def busy(self) -> bool:
        """Whether a result it handed out is still alive (a launch would overwrite it)."""
        if self.out:
            self.out = [r for r in self.out if r() is not None]
        return bool(self.out)


def handed_out(
    graph: CallGraph, k: int, shape: tuple[int, ...], dtype: np.dtype, stream: Any, context: Any
) -> Any:
    """Result ``k`` of ``graph`` given to the caller as it is, no copy: a device array of ``shape``
    over new memory at the buffer's address (in ``context``; it keeps the buffer alive: the caller
    may outlive the graph), weakly referenced by the graph until it and every view of it are gone
    (a view keeps the memory it was cut from: Numba's ``MemoryPointer.view``)."""
    at = graph.pointers.get(k)
    if at is None:
        at = graph.pointers[k] = _driver().CUdeviceptr(graph.addresses[k])
    memory = _numba_types()[1](context, at, graph.result_bytes[k])
    memory.kept = graph.results[k]
    graph.out.append(weakref.ref(memory))
    return device_array_over(memory, shape, dtype, stream)


def address(array: Any) -> int:
    """A Numba device array's address (0 for an empty one)."""
    return int(array.device_ctypes_pointer.value or 0)


def _destroy(exec_handle: Any) -> None:
    _driver().cuGraphExecDestroy(exec_handle)


def capture(
    cuda: Any,
    bind: Callable[..., Any],
    arena: Any,
    outs: Sequence[Any],
    args: list[Any],
    blas: bool,
    direct: Sequence[bool] = (),
    hands_out: bool = False,
) -> CallGraph:
    """Capture one call of the generated driver ``bind`` (``codegen/cuda/driver.py``) on ``arena``,
    with the staging buffers ``outs`` (its caller-allocated results) and ``args`` (its arguments:
    staging buffers, or the caller's own arrays where ``direct`` says so); with ``blas``, its cuBLAS
    calls get a workspace of the graph's own. ``hands_out``: ``CallGraph.hands_out``.

    Every buffer ``run`` allocates is one of its results (the driver allocates only results per
    call), so keeping the results keeps every address the graph holds alive."""
    from runtime import cublas  # (it imports the executable, which imports this module)

    driver = _driver()
    relaxed = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
    workspace = cuda.device_array(_blas_workspace_bytes(cuda) if blas else 0, np.uint8)
    with _CAPTURE_LOCK:
        stream = _capture_stream(cuda)
        run = bind(arena, stream)
        stream.synchronize()  # bind copied the constants to the device on this stream
        handle = stream_handle(stream)
        if blas:
            cublas.capture_workspace(handle, int(workspace.device_ctypes_pointer.value), workspace.nbytes)
        with cuda.defer_cleanup():  # no cuMemFree while capturing
            check(driver.cuStreamBeginCapture(handle, relaxed), "cuStreamBeginCapture")
            _capturing.on = True  # the driver's results from cuMemAlloc (``result_array``)
            try:
                results = run(*outs, *args)
            finally:  # ends the capture even when run failed (its error is the one raised)
                _capturing.on = False
                ended = driver.cuStreamEndCapture(handle)
                cublas.capture_workspace(handle, None)
            graph = check(ended, "cuStreamEndCapture")
        try:
            exec_handle = check(driver.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
        finally:
            driver.cuGraphDestroy(graph)  # the executable graph is independent of it
    return CallGraph(exec_handle, args, tuple(results), (run, tuple(outs), workspace), direct, hands_out)


def _blas_workspace_bytes(cuda: Any) -> int:
    """The size of cuBLAS's own workspace on the current device (its documentation: 32 MiB on
    Hopper and later, 4 MiB before), so that a captured gemm picks the algorithm an eager one does."""
    major, _ = cuda.get_current_device().compute_capability
    return (32 if major >= 9 else 4) * 2**20


_pool_ready: set[int] = set()
# a stream -> the context of its first pool allocation (its device's: a stream belongs to one context)
_stream_contexts: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_capturing = threading.local()  # ``on``: this thread is capturing a graph (``capture``)


def result_array(cuda: Any, shape: int | tuple[int, ...], dtype: Any, stream: Any) -> Any:
    """A call's fresh device array (the generated driver's results and copies, the executable's
    caller-allocated results): from the stream-ordered pool (``pool_array``), except under the
    simulator, while a graph is captured, or with ``DSL_CUDA_POOL=0`` (``cuda.device_array``)."""
    if POOL_RESULTS and not getattr(_capturing, "on", False) and not simulator_enabled():
        return pool_array(cuda, (shape,) if isinstance(shape, int) else tuple(shape), np.dtype(dtype), stream)
    return cuda.device_array(shape, dtype, stream=stream)


def pool_array(cuda: Any, shape: tuple[int, ...], dtype: np.dtype, stream: Any) -> Any:
    """A C-ordered device array of ``shape`` from the device's stream-ordered pool, freed on
    ``stream`` when its last reference dies (the module docstring's rule)."""
    nbytes = math.prod(shape) * dtype.itemsize
    if not nbytes:
        return cuda.device_array(shape, dtype, stream=stream)
    driver, handle = _driver(), int(stream)
    context = _stream_contexts.get(stream)  # (``cuda.current_context()`` looks it up anew each call)
    if context is None:
        context = _stream_contexts[stream] = cuda.current_context()
    if context.device.id not in _pool_ready:  # keep freed blocks for the next call
        _keep_pool_memory(driver, context.device.id)
    ptr = int(check(driver.cuMemAllocAsync(nbytes, handle), "cuMemAllocAsync"))
    memory = _numba_types()[1](context, driver.CUdeviceptr(ptr), nbytes, finalizer=_freer(ptr, stream))
    return device_array_over(memory, shape, dtype, stream)


_numba_classes: tuple[type, type] | None = None


def _numba_types() -> tuple[type, type]:
    """Numba's ``DeviceNDArray`` and ``MemoryPointer``, imported at the first use (a function's
    ``from ... import`` costs a microsecond at every call)."""
    global _numba_classes
    if _numba_classes is None:
        from numba.cuda.cudadrv.devicearray import DeviceNDArray
        from numba.cuda.cudadrv.driver import MemoryPointer

        _numba_classes = (DeviceNDArray, MemoryPointer)
    return _numba_classes


_layouts: dict[tuple[type, tuple[int, ...], np.dtype], dict[str, Any]] = {}
_OWN = ("gpu_data", "stream")  # the attributes a ``DeviceNDArray`` keeps of its memory and stream
_LAYOUTS_KEPT = 4096  # at most as many shapes' attributes (a long session's programs')


def device_array_over(
    memory: Any, shape: tuple[int, ...], dtype: np.dtype, stream: Any, kind: Any = None
) -> Any:
    """A C-ordered Numba device array (``kind``, by default ``DeviceNDArray``) of ``shape`` over
    ``memory`` on ``stream``: the first of each shape built by Numba's constructor, the next ones
    with its attributes but their own memory and stream (0.3 us on the CI machine, where the
    constructor takes 2.5: a call makes one per result and reshape). ``tests/test_cuda_graphs.py``
    checks that the constructor sets nothing else from its memory or stream."""
    kind = kind or _numba_types()[0]
    key = (kind, shape, dtype)
    attributes = _layouts.get(key)
    if attributes is None:
        array = kind(shape, c_strides(shape, dtype.itemsize), dtype, stream, memory)
        if len(_layouts) >= _LAYOUTS_KEPT:
            _layouts.clear()
        _layouts[key] = {k: v for k, v in vars(array).items() if k not in _OWN}
        return array
    array = kind.__new__(kind)
    vars(array).update(attributes)
    array.gpu_data = memory
    array.stream = stream
    return array


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """The byte strides of a C-ordered array of ``shape`` (``()`` for a 0-d one)."""
    strides: list[int] = []
    step = itemsize
    for n in reversed(shape):
        strides.insert(0, step)
        step *= n
    return tuple(strides)


def _freer(ptr: int, stream: Any) -> Callable[[], None]:
    """``ptr``'s finalizer: freed in ``stream``'s order (the closure keeps the stream alive)."""

    def free() -> None:
        _driver().cuMemFreeAsync(ptr, int(stream))

    return free


def _keep_pool_memory(driver: Any, device: int) -> None:
    """The device's default pool keeps the memory freed into it (its default threshold of 0 hands
    it back to the driver at every synchronization, and the next call's allocation costs again)."""
    handle = check(driver.cuDeviceGet(device), "cuDeviceGet")
    pool = check(driver.cuDeviceGetDefaultMemPool(handle), "cuDeviceGetDefaultMemPool")
    threshold = driver.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
    check(
        driver.cuMemPoolSetAttribute(pool, threshold, driver.cuuint64_t(2**64 - 1)), "cuMemPoolSetAttribute"
    )
    _pool_ready.add(device)
