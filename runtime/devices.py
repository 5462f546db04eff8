"""Which devices are usable. ``target="auto"`` asks here; running a ``target="cuda"`` program without a
GPU fails here (``require_device``)."""

from __future__ import annotations

import ctypes
import functools
import os
import sys

from runtime.errors import DeviceError

TARGETS = ("cpu", "cuda", "auto")


@functools.cache
def cuda_available() -> bool:
    """True when numba's CUDA target finds a driver and a GPU (never raises)."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False  # the simulator is for tests of generated kernels, not a device to run on
    if not _driver_library_loads():
        return False  # no NVIDIA driver: skip importing numba's whole CUDA target on every first compile
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:
        return False


def _driver_library_loads() -> bool:
    """Whether the CUDA driver library can be loaded (a cheap ``dlopen``; numba's own check imports
    its whole CUDA target). ``NUMBA_CUDA_DRIVER`` (a custom driver path) defers to numba."""
    if os.environ.get("NUMBA_CUDA_DRIVER"):
        return True
    name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
    try:
        ctypes.CDLL(name)
    except OSError:
        return False
    return True


def simulator_enabled() -> bool:
    """``NUMBA_ENABLE_CUDASIM=1``: numba.cuda runs kernels in its Python simulator."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


def resolve_target(requested: str | None) -> str:
    """``"cpu"`` or ``"cuda"`` for a requested target (argument, else ``DSL_TARGET``, else auto).

    ``auto`` is CUDA when a GPU is usable, else the CPU. ``cuda`` is a compile target whether or not
    a GPU is present: compiling needs none, running does (``require_device``).
    """
    target = requested or os.environ.get("DSL_TARGET") or "auto"
    if target not in TARGETS:
        raise DeviceError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    if target == "auto":
        return "cuda" if cuda_available() else "cpu"
    return target


def require_device(target: str) -> None:
    """Running a ``target`` program needs its device: for ``cuda`` a GPU, or the CUDA simulator
    switched on explicitly (tests of the generated kernels); without either it is a ``DeviceError``."""
    if target == "cuda" and not (cuda_available() or simulator_enabled()):
        raise DeviceError(
            "target='cuda' needs a usable NVIDIA GPU and driver to run, and none was found "
            "(numba.cuda.is_available() is False); compiling and inspecting (lower, memory_plan, "
            "PTX) need none; use target='cpu' or 'auto' to run here"
        )
