"""``runtime.cuda_launch.fast_launch`` without a GPU: Numba's launch internals replaced by recording
fakes, to check what is flattened again and what is reused. On a GPU every kernel of the CUDA suite
(``tests/cuda_sim``) launches through it for real."""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

import pytest

from runtime.cuda_launch import fast_launch

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
