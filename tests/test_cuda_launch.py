"""``runtime.cuda_launch.fast_launch`` without a GPU: Numba's launch internals replaced by recording
fakes, to check what is flattened again and what is reused. On a GPU every kernel of the CUDA suite
(``tests/cuda_sim``) launches through it for real."""

from __future__ import annotations

import ctypes
import importlib
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from runtime.cuda_launch import fast_launch, flat_pieces

dispatcher_module = pytest.importorskip("numba.cuda.dispatcher", reason="numba's CUDA target")


class Buffer:
    """Stands for a device array: flattened into its ``address``."""

    def __init__(self, address: int) -> None:
        self.address = address


class FakeKernel:
    def __init__(self, n_args: int) -> None:
        self.argument_types = ["array"] * n_args
        self.flattened: list[Any] = []
        self._codelibrary = SimpleNamespace(get_cufunc=lambda: SimpleNamespace(kernel="function"))

    def _prepare_args(self, ty: Any, value: Any, stream: Any, retr: list[Any], pieces: list[Any]) -> None:
        self.flattened.append(value)
        if isinstance(value, Buffer):
            pieces += ["meminfo", value.address]
        else:  # a host value: Numba copies it to the device and back after the launch
            retr.append(lambda: None)
            pieces.append(value)


@pytest.fixture
def numba_launch(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    launched: list[tuple[Any, ...]] = []
    monkeypatch.setattr(dispatcher_module, "launch", lambda stream, config, fn, *a: launched.append((fn, *a)))
    monkeypatch.setattr(dispatcher_module, "LaunchConfig", lambda **kw: kw)
    assert importlib.import_module("numba.cuda.dispatcher") is dispatcher_module
    return launched


def configured_launch(kernel: FakeKernel) -> Any:
    slow: list[tuple[Any, ...]] = []

    class Configured:
        dispatcher = SimpleNamespace(overloads={("array",) * 3: kernel}, typeof_pyval=lambda a: "array")
        stream, griddim, blockdim, sharedmem = "stream", (4, 1, 1), (256, 1, 1), 0

        def __call__(self, *args: Any) -> None:
            slow.append(args)

    return Configured(), slow


def test_only_changed_arguments_are_flattened_again(numba_launch: list[tuple[Any, ...]]) -> None:
    kernel = FakeKernel(3)
    configured, slow = configured_launch(kernel)
    launch = fast_launch(configured)
    arena, param, other = Buffer(100), Buffer(200), Buffer(300)
    launch(arena, param, other)  # the first launch: Numba's own (compiles and types)
    assert slow == [(arena, param, other)] and numba_launch == []
    launch(arena, param, other)
    assert kernel.flattened == [arena, param, other]
    assert numba_launch[-1] == ("function", "meminfo", 100, "meminfo", 200, "meminfo", 300)
    kernel.flattened.clear()
    launch(arena, param, other)  # nothing changed: nothing flattened
    assert kernel.flattened == [] and numba_launch[-1] == numba_launch[-2]
    new_param = Buffer(400)
    launch(arena, new_param, other)  # a new parameter array: only it
    assert kernel.flattened == [new_param]
    assert numba_launch[-1] == ("function", "meminfo", 100, "meminfo", 400, "meminfo", 300)
    del new_param  # held weakly: a new object at the next call is flattened anew, not mistaken for it
    launch(arena, Buffer(500), other)
    assert numba_launch[-1][4] == 500


def test_host_arguments_go_through_numbas_launch(numba_launch: list[tuple[Any, ...]]) -> None:
    kernel = FakeKernel(3)
    configured, slow = configured_launch(kernel)
    launch = fast_launch(configured)
    arena, other = Buffer(1), Buffer(2)
    launch(arena, Buffer(3), other)
    launch(arena, "host array", other)  # Numba copies it in and back: its own launch does that
    assert slow[-1] == (arena, "host array", other) and numba_launch == []


def test_the_simulators_launches_are_left_alone() -> None:
    fake = SimpleNamespace()  # a simulator kernel has none of Numba's launch internals
    assert fast_launch(fake) is fake


def test_a_loops_views_are_flattened_once(numba_launch: list[tuple[Any, ...]]) -> None:
    """A loop's launch cycling through the views of its rows (made once in bind) flattens each view at
    its first launch only, call after call."""
    kernel = FakeKernel(3)
    configured, _ = configured_launch(kernel)
    launch = fast_launch(configured)
    carry, other, rows = Buffer(1), Buffer(2), [Buffer(100 + t) for t in range(5)]
    for _ in range(3):  # three calls of a scan of five rows
        for row in rows:
            launch(carry, row, other)
    assert kernel.flattened == [carry, rows[1], other, *rows[2:], rows[0]]  # (the first launch is Numba's)
    assert [launched[4] for launched in numba_launch] == [101, 102, 103, 104] + [100, 101, 102, 103, 104] * 2


def test_arrays_made_per_call_are_forgotten_when_they_die(numba_launch: list[tuple[Any, ...]]) -> None:
    kernel = FakeKernel(3)
    configured, _ = configured_launch(kernel)
    launch = fast_launch(configured)
    arena, other = Buffer(1), Buffer(2)
    for address in range(100):  # a result array made per call, dropped after it
        launch(arena, Buffer(address), other)
        kernel.flattened.clear()  # (the fake's record of them)
    (state,) = [c.cell_contents for c in launch.__closure__ if isinstance(c.cell_contents, dict)]
    assert [len(table) for table in state["seen"]] == [1, 0, 1]


class _Memory:
    """What a Numba ``DeviceNDArray`` asks of its memory (no GPU behind it)."""

    def __init__(self, address: int, nbytes: int) -> None:
        self.size = nbytes
        self.device_ctypes_pointer = ctypes.c_void_p(address)

    def view(self, start: int, stop: int | None = None) -> _Memory:
        return _Memory(self.device_ctypes_pointer.value + start, self.size - start)


def device_array(shape: tuple[int, ...], dtype: Any, address: int = 0x7F0000000000, step: int = 1) -> Any:
    """A Numba device array over fake memory (of every ``step``-th element of a C-ordered one)."""
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    host = np.zeros(shape, dtype)
    host = host[..., ::step] if step > 1 else host
    memory = _Memory(address, host.nbytes * step)
    return DeviceNDArray(host.shape, host.strides, host.dtype, stream=0, gpu_data=memory)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32, np.bool_])
@pytest.mark.parametrize("n", [1, 2, 1000])
def test_flat_device_arrays_are_flattened_as_numba_does(dtype: Any, n: int) -> None:
    """``flat_pieces`` gives what Numba's ``_prepare_args`` gives for a flat C-contiguous device array
    (values and their Python types), without its strided memory view; other layouts are Numba's."""
    from numba import from_dtype
    from numba.core import types

    array = device_array((n,), dtype)
    numbas: list[Any] = []
    kernel = SimpleNamespace(extensions=[])
    dispatcher_module._Kernel._prepare_args(
        kernel, types.Array(from_dtype(np.dtype(dtype)), 1, "C"), array, 0, [], numbas
    )
    ours = flat_pieces(array)
    assert ours == numbas and [type(p) for p in ours] == [type(p) for p in numbas]
    assert flat_pieces(device_array((n, 2), dtype)) is None
    strided = device_array((2 * n,), dtype, step=2)  # (one element of a stride of two: Numba's stride)
    if n == 1:
        numbas = []
        dispatcher_module._Kernel._prepare_args(
            kernel, types.Array(from_dtype(np.dtype(dtype)), 1, "C"), strided, 0, [], numbas
        )
        assert flat_pieces(strided) == numbas
    else:
        assert flat_pieces(strided) is None


def test_flat_device_arrays_skip_numbas_flattening(numba_launch: list[tuple[Any, ...]]) -> None:
    """A parameter typed as a flat C-contiguous array takes a new Numba device array's pieces from
    ``flat_pieces``; the kernel flattens only what is not one."""
    from numba.core import types

    kernel = FakeKernel(3)
    kernel.argument_types = [types.Array(types.float32, 1, "C"), "array", types.Array(types.float32, 1, "C")]
    configured, _ = configured_launch(kernel)
    launch = fast_launch(configured)
    arena, other = Buffer(1), Buffer(2)
    launch(device_array((4,), np.float32, 0x1000), arena, other)
    result = device_array((8,), np.float32, 0x2000)
    launch(result, arena, other)
    assert kernel.flattened == [arena, other]  # ``other`` is no device array: Numba's
    assert numba_launch[-1][1:8] == (0, 0, 8, 4, 0x2000, 8, 4)


@pytest.mark.parametrize(
    "shape, new",
    [((256, 1024), (262144,)), ((262144,), (256, 1024)), ((2, 3, 4), (24,)), ((1,), ()), ((), (1,))],
)
def test_executables_reshape_device_arrays_as_numba_does(
    shape: tuple[int, ...], new: tuple[int, ...]
) -> None:
    """``cuda_executable._reshaped`` (each argument flattened, each result shaped, every call) builds
    the array Numba's ``reshape`` does: shape, strides, memory and stream."""
    from runtime.cuda_executable import _reshaped

    array = device_array(shape, np.float32)
    array.stream = object()  # (a call's arrays are on the executable's stream; Numba's reshape gives 0)
    ours, numbas = _reshaped(array, new), array.reshape(new)
    assert (ours.shape, ours.strides, ours.dtype, ours.stream) == (
        numbas.shape,
        numbas.strides,
        numbas.dtype,
        numbas.stream,
    )
    assert ours.gpu_data is numbas.gpu_data is array.gpu_data


def test_mapped_arrays_are_host_arrays_to_a_call() -> None:
    """Numba's mapped (and managed) arrays are NumPy arrays with device memory, and lack some of
    ``DeviceNDArray``'s methods: a call keys and checks them as the NumPy arrays they also are (the
    device arrays' attribute-read signature took them too, and raised, found by review)."""
    from numba.cuda.cudadrv.devicearray import MappedNDArray

    import dsl

    mapped = np.arange(6.0).view(MappedNDArray)
    mapped.device_setup(_Memory(0x1000, 48))
    np.testing.assert_array_equal(dsl.compile(lambda x: x * 2.0, target="cpu")(mapped), np.arange(6.0) * 2.0)


def test_device_arguments_are_checked_against_the_signature() -> None:
    """``CudaExecutable._checked``: Numba's C-ordered array of the compiled shape and dtype is taken
    as it is (read through its attributes), and any other a DSLError that names it, as before."""
    from runtime.cuda_executable import CudaExecutable
    from runtime.errors import DSLError, ShapeError

    checks = CudaExecutable.__new__(CudaExecutable)  # (its constructor needs a GPU; the checks do not)
    checks.cuda, checks.name, checks._arg_names = None, "f", ["x"]
    checks.set_inputs([((4, 6), np.float32)])
    good = device_array((4, 6), np.float32)
    assert checks._checked(0, good) is good
    for dtype in (np.float64, np.int32):  # (int32: the same strides as float32's)
        with pytest.raises(
            DSLError, match=f"dtype {np.dtype(dtype)}, but the program was compiled for float32"
        ):
            checks._checked(0, device_array((4, 6), dtype))
    with pytest.raises(ShapeError, match=r"shape \(6, 4\), but the program was compiled for shape \(4, 6\)"):
        checks._checked(0, device_array((6, 4), np.float32))
    with pytest.raises(DSLError, match="non-contiguous device array"):
        checks._checked(0, device_array((4, 12), np.float32, step=2))
    checks.set_inputs([((1, 6), np.float32)])  # a C-contiguous array whose size-1 axis has any stride
    odd = device_array((1, 6), np.float32)
    odd.strides = (4, 4)
    assert checks._checked(0, odd) is odd
