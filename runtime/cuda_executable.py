"""A compiled program on an NVIDIA GPU: one device arena, one stream, the generated host driver.

Arguments may be NumPy arrays (copied to the device, results copied back) or any object with
``__cuda_array_interface__`` (Numba device arrays, CuPy, PyTorch CUDA tensors), used in place with
no copy; when any argument is on the device, results stay on the device (Numba device arrays,
which themselves have ``__cuda_array_interface__``). Every device buffer the driver sees is flat.

Write-backs (arguments the program mutates) follow the CPU executable's rule: caller arrays change
only after every kernel ran; a NumPy argument gets the new value copied back, a device argument is
written in place (directly by the kernels when the plan says so, else by a device copy).

A call launches its kernels one by one (eagerly), or, where ``runtime/cuda_graphs.py`` says so
(graphs on, a driver without host reads, the cost rule), replays a captured graph (``_graph``):
arguments that stayed put read in place, the others through staging buffers; results handed out
from the graph's own buffers where its last ones were dropped, else copied out.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from runtime import cuda_graphs
from runtime.errors import DeviceError, DSLError, ShapeError
from runtime.executable import ArgumentChecks, caller_location


def cuda_module() -> Any:
    """``numba.cuda``, or a ``DeviceError`` saying how to install it."""
    try:
        from numba import cuda
    except ImportError as err:  # pragma: no cover - numba always has a cuda module or numba-cuda
        raise DeviceError(f"the CUDA backend needs numba-cuda: pip install 'dslc[cuda]' ({err})") from None
    return cuda


_NUMBA_ARRAYS = ("DeviceNDArray", "MappedNDArray", "ManagedNDArray")


_numba_array_types: dict[type, bool] = {}  # type -> whether it is one of Numba's device arrays
_plain_array_types: dict[type, bool] = {}  # type -> whether it is Numba's ``DeviceNDArray`` itself


def is_numba_device_array(x: Any) -> bool:
    """Whether ``x`` is one of Numba's own device arrays (read through plain attributes: building
    its ``__cuda_array_interface__`` dict costs microseconds, and a call looks at every argument)."""
    t = type(x)
    known = _numba_array_types.get(t)
    if known is None:
        known = _numba_array_types[t] = t.__name__ in _NUMBA_ARRAYS and t.__module__.startswith("numba")
    return known


def is_plain_device_array(x: Any) -> bool:
    """Whether ``x`` is Numba's ``DeviceNDArray`` (not a mapped or managed array: those are NumPy
    arrays too, and lack some of its methods, ``is_c_contiguous``)."""
    t = type(x)
    known = _plain_array_types.get(t)
    if known is None:
        known = _plain_array_types[t] = t.__name__ == "DeviceNDArray" and is_numba_device_array(x)
    return known


def is_device_array(x: Any) -> bool:
    """Whether ``x`` is a GPU array: it has ``__cuda_array_interface__``, or it is a device array
    of Numba's CUDA simulator (which has none)."""
    if isinstance(x, np.ndarray):
        return False
    if is_numba_device_array(x):
        return True
    return hasattr(x, "__cuda_array_interface__") or type(x).__name__ == "FakeCUDAArray"


def device_interface(x: Any) -> dict[str, Any]:
    """The ``__cuda_array_interface__`` of a device array (the host view's, under the simulator)."""
    if hasattr(x, "__cuda_array_interface__"):
        return dict(x.__cuda_array_interface__)
    return dict(x._ary.__array_interface__)  # simulator: the array lives in host memory


def device_layout(x: Any) -> tuple[int, np.dtype, tuple[int, ...], tuple[int, ...] | None]:
    """``(address, dtype, shape, byte strides)`` of a device array (strides ``None``: C order);
    Numba's own arrays are read through their attributes."""
    if is_numba_device_array(x):
        return int(x.device_ctypes_pointer.value or 0), x.dtype, tuple(x.shape), tuple(x.strides)
    iface = device_interface(x)
    strides = iface.get("strides")
    shape = tuple(int(n) for n in iface["shape"])
    return (
        int(iface["data"][0]),
        np.dtype(iface["typestr"]),
        shape,
        None if strides is None else tuple(strides),
    )


def device_address(x: Any) -> int:
    """The device address of a device array's first element."""
    if is_numba_device_array(x):  # (only the address: a replay asks for each argument's and result's)
        return int(x.device_ctypes_pointer.value or 0)
    return device_layout(x)[0]


def _address(given: Any, used: Any) -> int:
    """The device address of an argument the caller passed on the device (``used``: as the call
    uses it), else 0 (a host value, which a call copies anyway, or an empty array)."""
    if not is_device_array(given) or not used.size:
        return 0
    return device_address(used)


def _extent(x: Any) -> tuple[int, int]:
    """``(first byte, last byte + 1)`` of a device array's memory (for the overlap check)."""
    if is_plain_device_array(x) and x.size and x.is_c_contiguous():  # (the common case, read cheaply)
        ptr = int(x.device_ctypes_pointer.value or 0)
        return ptr, ptr + x.size * x.dtype.itemsize
    ptr, dtype, shape, strides = device_layout(x)
    itemsize = dtype.itemsize
    if not shape or math.prod(shape) == 0:
        return ptr, ptr + (itemsize if not shape else 0)
    if strides is None:
        return ptr, ptr + math.prod(shape) * itemsize
    lo = ptr + sum(s * (n - 1) for s, n in zip(strides, shape) if s < 0)
    hi = ptr + sum(s * (n - 1) for s, n in zip(strides, shape) if s > 0) + itemsize
    return lo, hi


def _reshaped(x: Any, shape: tuple[int, ...]) -> Any:
    """The C-contiguous device array ``x`` as ``shape`` (as many elements), sharing its memory: a
    Numba ``DeviceNDArray`` built directly (``cuda_graphs.device_array_over``), as its ``reshape``
    builds it (which costs ~9 us on the CI machine, and a call reshapes each argument and result),
    anything else through its ``reshape``."""
    if tuple(x.shape) == shape:
        return x
    if not is_plain_device_array(x) or not x.size or not x.is_c_contiguous():
        return x.reshape(shape)
    return cuda_graphs.device_array_over(x.gpu_data, shape, x.dtype, 0, type(x))  # (stream 0: Numba's)


class CudaExecutable(ArgumentChecks):
    def __init__(
        self,
        module: Any,
        entry: str,
        arena_bytes: int,
        n_results: int,
        writeback: Sequence[int],
        input_types: Sequence[tuple[Sequence[int], Any]],
        result_types: Sequence[tuple[Sequence[int], Any]],
        out_types: Sequence[tuple[Sequence[int], Any]] = (),
        name: str = "program",
        direct_writeback: Sequence[int] = (),
        arg_names: Sequence[str] = (),
        donated: Sequence[int] = (),
        launches: int = 0,
        host_reads: bool = True,
        blas: bool = False,
    ) -> None:
        cuda = cuda_module()
        self.cuda = cuda
        self.name = name
        self.stream = cuda.stream()
        self.arena = cuda.device_array(max(int(arena_bytes), 1), np.uint8, stream=self.stream)
        self._bind = getattr(module, entry)
        self._blas = blas  # its matmuls may run on cuBLAS
        self.run = self._bind(self.arena, self.stream)
        self.n_results = n_results
        self.writeback = tuple(writeback)
        self.n_public = n_results - len(self.writeback)
        self.set_inputs(input_types)
        self.result_types = [(tuple(s), np.dtype(d)) for s, d in result_types]
        self._outs = [(math.prod(s), np.dtype(d)) for s, d in out_types]
        self.direct = frozenset(direct_writeback)
        self._written = tuple(dict.fromkeys((*self.writeback, *donated)))
        self._arg_names = list(arg_names)
        self._lock = threading.Lock()
        self._threads = threading.local()  # ``context``: Numba made it current in this thread
        nbytes = lambda types: [math.prod(s) * d.itemsize for s, d in types]  # noqa: E731
        staged, copies = cuda_graphs.staging(
            nbytes(self.input_types), nbytes(self.result_types[: self.n_public]), self.writeback
        )
        self.eager_reason = cuda_graphs.eager_reason(host_reads, launches, staged, copies)  # None: graphs
        self.graphs: list[cuda_graphs.CallGraph] = []  # (``_graph``)
        self.graph: cuda_graphs.CallGraph | None = None  # the last replay's
        self._warm = False  # a first, eager call compiled and loaded every kernel
        self._seen: list[int] = []  # each argument's device address at the last eager call or capture
        self._moved: set[int] = set()  # arguments a graph stages (found elsewhere once it read in place)
        self._no_capture: str | None = None  # why no more graphs are captured (a later capture failed)

    def set_inputs(self, input_types: Sequence[tuple[Sequence[int], Any]]) -> None:
        """The compiled signature's ``(shape, dtype)`` per argument, and the byte strides of a
        C-ordered device array of each (``_checked``'s common case)."""
        self.input_types = [(tuple(s), np.dtype(d)) for s, d in input_types]
        self._c_strides = [cuda_graphs.c_strides(s, d.itemsize) for s, d in self.input_types]

    def __call__(self, *arrays: Any) -> tuple[Any, ...]:
        if len(arrays) != len(self.input_types):
            raise TypeError(f"{self.name} takes {len(self.input_types)} arguments, got {len(arrays)}")
        on_device = any(is_device_array(a) for a in arrays)
        if self._written:
            self._check_written(arrays)
        with self._lock:
            if self.eager_reason is None and self._warm:
                return self._replay(arrays, on_device)
            self._warm = True
            return self._eager(arrays, on_device)

    def _eager(self, arrays: Sequence[Any], on_device: bool) -> tuple[Any, ...]:
        """A call launching every kernel (the lock held)."""
        stream = self.stream
        args = [self._to_device(i, a) for i, a in enumerate(arrays)]
        if self.eager_reason is None:  # (the next call's capture reads in place what stayed put)
            self._seen = [_address(a, g) for a, g in zip(arrays, args, strict=True)]
        outs = [cuda_graphs.result_array(self.cuda, n, d, stream) for n, d in self._outs]
        results = self.run(*outs, *args)
        for index, new in zip(self.writeback, results[self.n_public :]):
            if not new.size:  # nothing to write (and Numba refuses a copy between empty layouts)
                continue
            if is_device_array(arrays[index]):
                if not (index in self.direct and new is args[index]):
                    args[index].copy_to_device(new, stream=stream)
            else:
                self._write_host(arrays, index, new)
        public = [_reshaped(r, s) for r, (s, _) in zip(results, self.result_types)]
        public = public[: self.n_public]
        if on_device:
            stream.synchronize()
            return tuple(public)
        host = [r.copy_to_host(stream=stream) for r in public]
        stream.synchronize()
        return tuple(host)

    def _write_host(self, arrays: Sequence[Any], index: int, new: Any) -> None:
        """The NumPy argument ``index`` set to the device value ``new`` (a write-back)."""
        staged = np.empty(new.shape, new.dtype)
        new.copy_to_host(staged, stream=self.stream)
        self.stream.synchronize()
        np.copyto(arrays[index], staged.reshape(self.input_types[index][0]), casting="unsafe")

    def _replay(self, arrays: Sequence[Any], on_device: bool) -> tuple[Any, ...]:
        """A call through a graph (``_graph``: captured at the first replay that needs it): the
        arguments copied into its staging buffers (those it reads in place checked to be where it
        reads them), one launch, the write-backs copied back, and the results handed out (its own
        buffers) or copied out of them."""
        stream = self.stream
        handle = cuda_graphs.stream_handle(stream)
        context = getattr(self._threads, "context", None)
        if context is None:  # the driver API calls below need a context
            context = self._threads.context = self.cuda.current_context()
        given = [self._checked(i, a) for i, a in enumerate(arrays)]
        hand_out = on_device and cuda_graphs.HANDOUT_GRAPHS > 0
        graph = self._graph(given, hand_out)
        if graph is None:  # eager: this call, or from now on where a first capture failed (eager_reason)
            return self._eager(arrays, on_device)
        self.graph = graph
        staged = zip(graph.args, graph.arg_addresses, graph.arg_bytes, given, graph.direct)
        for stage, address, nbytes, a, direct in staged:
            if direct:
                continue
            if isinstance(a, np.ndarray):
                if a.size:
                    stage.copy_to_device(a, stream=stream)
            else:
                cuda_graphs.copy_async(address, device_address(a), nbytes, handle)
        graph.launch(handle)
        n = self.n_public
        written = zip(self.writeback, graph.results[n:], graph.addresses[n:], graph.result_bytes[n:])
        for index, new, address, nbytes in written:
            target = given[index]
            if not nbytes:
                continue
            if isinstance(target, np.ndarray):
                self._write_host(arrays, index, new)
            elif not (graph.direct[index] and address == graph.arg_addresses[index]):  # (else in place)
                cuda_graphs.copy_async(device_address(target), address, nbytes, handle)
        public = zip(graph.results[:n], graph.addresses, graph.result_bytes, self.result_types)
        if not on_device:
            host = [r.copy_to_host(stream=stream).reshape(s) for r, _, _, (s, _) in public]
            stream.synchronize()
            return tuple(host)
        fresh = []
        if graph.hands_out:
            for k, (s, dtype) in enumerate(self.result_types[:n]):
                fresh.append(cuda_graphs.handed_out(graph, k, s, dtype, stream, context))
        else:
            for _, address, nbytes, (s, dtype) in public:
                out = cuda_graphs.pool_array(self.cuda, s, dtype, stream)
                cuda_graphs.copy_async(device_address(out), address, nbytes, handle)
                fresh.append(out)
        stream.synchronize()
        return tuple(fresh)

    def _graph(self, given: Sequence[Any], hand_out: bool) -> cuda_graphs.CallGraph | None:
        """The graph a call with the arguments ``given`` replays, ``None`` where it runs eagerly (a
        first capture failed: ``eager_reason``; or no graph fits and none may be captured).

        Graphs that read in place a device argument found elsewhere are dropped, and that argument
        is staged from then on (``_moved``); a host (NumPy) argument moves nothing, but only a graph
        that stages it serves the call. Of those that fit, one not busy (``CallGraph.busy``) that
        hands its results out where the call may take them (``hand_out``: device results); else a
        new one while fewer than ``HANDOUT_GRAPHS`` do; else one that copies results out (captured
        once); else any that is not busy."""
        host = {i for i, a in enumerate(given) if isinstance(a, np.ndarray)}
        moved = {
            i for g in self.graphs for i, at in g.read_at if i not in host and device_address(given[i]) != at
        }
        if moved:
            self._moved |= moved
            self.graphs = [g for g in self.graphs if not any(g.direct[i] for i in moved)]
        fits = [g for g in self.graphs if not any(g.direct[i] for i in host)]
        for g in fits:
            if (g.hands_out or not hand_out) and not g.busy():
                return g
        if self._no_capture is None:
            if hand_out and sum(g.hands_out for g in self.graphs) < cuda_graphs.HANDOUT_GRAPHS:
                return self._capture(given, hands_out=True)
            if all(g.hands_out for g in self.graphs):
                return self._capture(given, hands_out=False)
        return next((g for g in fits if not g.busy()), None)

    def _capture(self, given: Sequence[Any], hands_out: bool) -> cuda_graphs.CallGraph | None:
        """A new graph of a call with the arguments ``given`` (``_checked``), kept in ``graphs``:
        a device argument at the address it had at the last eager call or capture read in place
        (unless it moved once before), the others from new staging buffers; ``None`` (and
        ``eager_reason`` set, or ``_no_capture`` where other graphs serve) where the capture fails."""
        stream = self.stream
        seen = [_address(a, a) for a in given]
        direct = [
            bool(now) and i not in self._moved and i < len(self._seen) and now == self._seen[i]
            for i, now in enumerate(seen)
        ]
        if cuda_graphs.STAGE_ALL:
            direct = [False] * len(seen)
        self._seen = seen
        try:  # (an allocation failing here, out of memory, means eager too)
            args = [
                _reshaped(a, (a.size,)) if d else self.cuda.device_array(math.prod(s), t, stream=stream)
                for a, d, (s, t) in zip(given, direct, self.input_types, strict=True)
            ]
            outs = [self.cuda.device_array(n, d, stream=stream) for n, d in self._outs]
            stream.synchronize()
            graph = cuda_graphs.capture(
                self.cuda, self._bind, self.arena, outs, args, self._blas, direct=direct, hands_out=hands_out
            )
        except Exception as err:  # any failure of a capture means: launch eagerly (or replay the others)
            reason = f"the capture failed ({type(err).__name__}: {err})"
            if self.graphs:  # (out of memory for a third graph: the two there serve on, or eager calls)
                self._no_capture = reason
            else:
                self.eager_reason = reason
            return None
        self.graphs.append(graph)
        return graph

    def _to_device(self, i: int, a: Any) -> Any:
        """Argument ``i`` as a flat device array: device arrays in place, others copied."""
        checked = self._checked(i, a)
        if isinstance(checked, np.ndarray):
            copy = cuda_graphs.result_array(self.cuda, checked.size, checked.dtype, self.stream)
            if checked.size:
                copy.copy_to_device(checked, stream=self.stream)
            return copy
        return _reshaped(checked, (checked.size,))

    def _where(self, i: int) -> str:
        """The start of an error about argument ``i``: the caller's line, the program, the argument."""
        return f"{caller_location()}: {self.name}: argument {self._arg(i)}"

    def _checked(self, i: int, a: Any) -> Any:
        """Argument ``i`` checked against the compiled signature: a Numba device array of its shape
        (a device argument, in place) or a flat C-ordered NumPy array (anything else)."""
        shape, dtype = self.input_types[i]
        if is_plain_device_array(a) and a.shape == shape and a.strides == self._c_strides[i]:
            if a.dtype == dtype:  # (the common case: Numba's C-ordered array of the signature)
                return a
        if is_device_array(a):
            numba_own = is_numba_device_array(a) or not hasattr(self.cuda, "as_cuda_array")
            d = a if numba_own else self.cuda.as_cuda_array(a)
            if d.dtype != dtype:
                raise DSLError(
                    f"{self._where(i)} is a device array of dtype {d.dtype}, but the "
                    f"program was compiled for {dtype}; convert it on the device first"
                )
            if tuple(d.shape) != shape:
                raise ShapeError(
                    f"{self._where(i)} has shape {tuple(d.shape)}, but the program "
                    f"was compiled for shape {shape}; compile it again for the new shape"
                )
            if not d.is_c_contiguous():
                raise DSLError(
                    f"{self._where(i)} is a non-contiguous device array; pass a "
                    "C-contiguous one (e.g. .copy() on the device)"
                )
            return d
        host = np.asarray(a, dtype=dtype, order="C")
        if host.shape != shape:
            raise ShapeError(
                f"{self._where(i)} has shape {host.shape}, but the program was compiled "
                f"for shape {shape}; compile it again for the new shape"
            )
        return host.reshape(-1)

    def _check_written(self, arrays: Sequence[Any]) -> None:
        """Arguments the program writes (mutated or donated) must be writable arrays that share no
        memory with another argument; checked before anything runs. Host arrays follow the CPU
        executable's rule; device arrays are compared by address range."""
        extents = {i: _extent(a) for i, a in enumerate(arrays) if is_device_array(a)}  # once each
        spans = sorted(extents.values())  # none overlapping its successor: none overlapping at all
        apart = all(a_hi <= b_lo for (_, a_hi), (b_lo, _) in zip(spans, spans[1:]))
        for index in self._written:
            if index not in extents:
                self._check_host_target(arrays, index)
                continue
            if apart:
                continue
            lo, hi = extents[index]
            for other, (o_lo, o_hi) in extents.items():
                if other != index and lo < o_hi and o_lo < hi:
                    raise DSLError(
                        f"{caller_location()}: {self.name}: arguments {self._arg(index)} and "
                        f"{self._arg(other)} share device memory, but the program modifies (or was "
                        f"donated) {self._arg(index)}; pass separate arrays"
                    )
