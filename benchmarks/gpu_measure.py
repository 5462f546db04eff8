"""What the GPU benchmarks (``bench_cuda.py``, ``bench_gpu.py``) measure the same way: synchronized
times of calls, the device's copy bandwidth, the GPU time of a call's kernels (from the profiler),
and a suite program compiled for the GPU.

The importer sets ``NUMBA_ENABLE_CUDASIM`` before importing this module when it runs in the simulator.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from numba import cuda

import dsl


def sync() -> None:
    """Waits for the device: Numba's context synchronize, and PyTorch's streams where PyTorch is in use."""
    cuda.synchronize()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.synchronize()


def synced_times(fn: Callable[[], object], repeats: int, warmup: int = 2, wait: bool = True) -> list[float]:
    """Seconds of each of ``repeats`` calls of ``fn`` after ``warmup`` calls, each timed up to the GPU's
    end of its work (``wait``) or only up to its return (the host's share)."""
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        if wait:
            sync()
        times.append(time.perf_counter() - t0)
    return times


def median_time(fn: Callable[[], object], repeats: int, warmup: int = 2, wait: bool = True) -> float:
    """Median seconds of ``fn`` (``synced_times``)."""
    return statistics.median(synced_times(fn, repeats, warmup, wait))


def copy_bandwidth(x: Any, repeats: int) -> tuple[float, str]:
    """Bytes per second the device moves copying the device array ``x`` (read once, written once), and
    how: the faster of a device-to-device ``cuMemcpy`` and, where PyTorch has the GPU, its vectorized
    elementwise kernel writing ``-x`` (on an H100 the copy engines' memcpy reached 1.5 TB/s where
    kernels stream about 3 TB/s: benchmarks/results/2026-11-27-gpu-lease-b.md, so the memcpy alone
    would put the roofline at half the memory's speed)."""
    copy = cuda.device_array_like(x)
    best = (2 * x.nbytes / median_time(lambda: copy.copy_to_device(x), repeats), "cuMemcpy")
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        src, dst = torch.as_tensor(x, device="cuda"), torch.as_tensor(copy, device="cuda")
        kernel = 2 * x.nbytes / median_time(lambda: torch.neg(src, out=dst), repeats)
        best = max(best, (kernel, "a PyTorch elementwise kernel"))
    return best


def device_time(
    fn: Callable[[], object], calls: int, by_name: dict[str, list[float]] | None = None
) -> tuple[float, float]:
    """GPU seconds per call of ``fn`` (the sum of the durations of its kernels, copies and fills) and
    how many of those operations a call launches, from ``torch.profiler``: Kineto asks CUPTI for every
    CUDA activity of the process, so Numba's kernels and XLA's are recorded beside PyTorch's.
    ``by_name`` (filled when given): each operation's name -> [seconds per call, launches per call]."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    # Without a GPU (the simulator) the CPU's activity stands in: the same parsing, no kernel found.
    activity = ProfilerActivity.CUDA if torch.cuda.is_available() else ProfilerActivity.CPU
    sync()
    with profile(activities=[activity]) as prof:
        for _ in range(calls):
            fn()
        sync()
    gpu = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    if by_name is not None:
        for e in gpu:
            entry = by_name.setdefault(e.name, [0.0, 0.0])
            entry[0] += e.time_range.elapsed_us() * 1e-6 / calls
            entry[1] += 1 / calls
    return sum(e.time_range.elapsed_us() for e in gpu) * 1e-6 / calls, len(gpu) / calls


def on_gpu(fn: Callable[..., Any]) -> Any:
    """A suite program's function (``dsl.compile``'d or a transform) compiled for the GPU."""
    inner = getattr(fn, "_fn", fn)
    return dsl.compile(lambda *a: inner(*a), target="cuda")
