"""Kernel launches with less host work per call than Numba's configured launch.

A generated CUDA module launches the same kernels with mostly the same arguments on every call: the
arena views, constants and scratch buffers are bound once, only the program's parameters and results
change. Numba's ``kernel[grid, block, stream](*args)`` types every argument, looks the compiled
kernel up, fetches its function handle and flattens every array into kernel parameters on each
launch; on an H200 the host side of the MLP training step of ``benchmarks/bench_cuda.py`` was
slower than its GPU side (4.6 ms a step with or without waiting for the GPU). ``fast_launch`` does
the first launch through Numba (which compiles and types), keeps the compiled kernel, its function
handle and launch configuration, and from then on flattens only arguments it has not seen at that
position: every live array seen there (``weakref``: not kept alive, forgotten when it dies), so a
loop's launches cycling through the views of its rows made once in ``bind`` flatten each once, and
the last scalar; then it launches through ``cuda.core.launch`` as Numba itself does.

A flat C-contiguous Numba device array (every device buffer a generated driver passes is flat, and
a call's results and flat views of its arguments are new arrays every call) is flattened here
(``flat_pieces``), into the pieces Numba's ``_prepare_args`` makes of it, without its
``Out.to_device`` (imports at every call) and strided-memory shim: 0.3-0.5 us a new array on the CI
machine, where Numba's took 7-12 us.

It falls back to Numba's launch for anything it does not expect: the simulator, a debug kernel,
an argument Numba would copy to the device (a host array), or a Numba without these internals.
"""

from __future__ import annotations

import importlib
import weakref
from collections.abc import Callable
from typing import Any

REMEMBERED = 4096  # at most as many live arrays' pieces per position (codegen/cuda/driver.py: ROW_VIEWS)


def fast_launch(configured: Any) -> Callable[..., None]:
    """A callable launching ``configured`` (Numba's ``kernel[grid, block, stream]``) with the same
    arguments, with the host work described in the module docstring."""
    try:
        numba_dispatcher: Any = importlib.import_module("numba.cuda.dispatcher")
        core_launch, launch_config = numba_dispatcher.launch, numba_dispatcher.LaunchConfig
        ge_1_0 = numba_dispatcher.CUDA_CORE_GE_1_0
        dispatcher, stream = configured.dispatcher, configured.stream
        griddim, blockdim, sharedmem = configured.griddim, configured.blockdim, configured.sharedmem
    except (ImportError, AttributeError):  # the simulator, or other internals: Numba's own launch
        return configured  # type: ignore[no-any-return]
    state: dict[str, Any] = {}
    device_array = _device_array_type()

    def first(args: tuple[Any, ...]) -> None:
        configured(*args)  # compiles, types and launches
        kernel = dispatcher.overloads.get(tuple(dispatcher.typeof_pyval(a) for a in args))
        if kernel is None or getattr(kernel, "debug", False) or getattr(kernel, "cooperative", False):
            state["slow"] = True
            return
        cooperative = {"is_cooperative": False} if ge_1_0 else {"cooperative_launch": False}
        state["config"] = launch_config(grid=griddim, block=blockdim, shmem_size=sharedmem, **cooperative)
        state["function"] = kernel._codelibrary.get_cufunc().kernel
        state["kernel"] = kernel
        state["seen"] = [{} for _ in args]  # per position: _remember's table
        array_type: Any = getattr(numba_dispatcher.types, "Array", type(None))
        plain = not getattr(kernel, "extensions", None)
        state["flat"] = [  # the positions typed as flat C-contiguous arrays (``flat_pieces``)
            plain and isinstance(ty, array_type) and ty.ndim == 1 and ty.layout == "C"
            for ty in kernel.argument_types
        ]

    def launch(*args: Any) -> None:
        if "kernel" not in state:
            if state.get("slow"):
                configured(*args)
            else:
                first(args)
            return
        kernel, seen, flat_at = state["kernel"], state["seen"], state["flat"]
        flat: list[Any] = []
        for i, (ty, value) in enumerate(zip(kernel.argument_types, args, strict=True)):
            ref, pieces = seen[i].get(id(value)) or seen[i].get(None, (None, ()))
            if ref is None or (ref() if isinstance(ref, weakref.ref) else ref) is not value:
                pieces = flat_pieces(value) if flat_at[i] and type(value) is device_array else None
                if pieces is None:
                    pieces, retr = [], list[Any]()
                    kernel._prepare_args(ty, value, stream, retr, pieces)
                    if retr:  # Numba copied a host array to the device: its launch copies it back
                        configured(*args)
                        return
                _remember(seen[i], value, pieces)
            flat.extend(pieces)
        core_launch(stream, state["config"], state["function"], *flat)

    return launch


def _device_array_type() -> type | None:
    """Numba's ``DeviceNDArray`` (``None`` where it cannot be imported)."""
    try:
        from numba.cuda.cudadrv.devicearray import DeviceNDArray
    except ImportError:  # pragma: no cover - numba-cuda always has it
        return None
    return DeviceNDArray


def flat_pieces(value: Any) -> list[Any] | None:
    """What Numba's ``_prepare_args`` makes of the flat C-contiguous Numba device array ``value`` for a
    parameter typed as one (no meminfo, no parent, its size, item size, data address, shape and
    strides), or ``None`` for any other array (Numba flattens it)."""
    if value.ndim != 1 or not value.shape[0]:  # (an empty array: Numba's, whose address is None)
        return None
    n, itemsize, stride = value.shape[0], value.dtype.itemsize, value.strides[0]
    if n > 1 and stride != itemsize:
        return None
    return [0, 0, n, itemsize, value.device_ctypes_pointer.value or 0, n, stride]


def _remember(table: dict[int | None, tuple[Any, list[Any]]], value: Any, pieces: list[Any]) -> None:
    """Keep ``value``'s flattened ``pieces`` in ``table``: an array under its id with a weak reference
    that removes it when the array dies (a new object may then take its id), a scalar (no weak
    reference: kept, and small) in the one slot ``None``."""
    key = id(value)
    try:
        ref = weakref.ref(value, lambda _: table.pop(key, None))
    except TypeError:
        table[None] = (value, pieces)
        return
    if len(table) >= REMEMBERED:
        table.clear()
    table[key] = (ref, pieces)
