"""Where the time of a CUDA call goes (needs an NVIDIA GPU; PyTorch with CUDA for its rows):

    python benchmarks/cuda_overheads.py

For each program, the whole call (``dsl.compile``'s wrapper, the executable's checks and result
allocation, the launches, the wait) against the generated driver's ``run`` alone on preallocated
results, with and without waiting for the GPU (the latter is the host's launch time); then the
executable's own parts (argument checks, result allocation, the wait) for a one-kernel program and
the MLP training step of ``bench_cuda.py``; a call through ``dsl.compile`` against the executable
alone, and results dropped against kept alive; and single operations against PyTorch. Medians of 30
calls after 5 warm-up calls, in ms. Figures are printed, not written: see results/cuda_notes.md.
"""

from __future__ import annotations

import collections
import os
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
from bench_cuda import median_time, mlp_host_inputs, mlp_step  # noqa: E402
from numba import cuda  # noqa: E402
from numba.cuda.cudadrv import driver  # noqa: E402
from suite_programs import chain  # noqa: E402

import dsl  # noqa: E402
import dsl.numpy as dnp  # noqa: E402
import runtime.cuda_executable as ce  # noqa: E402


def ms(fn: Callable[[], object], wait: bool = True) -> float:
    return median_time(fn, repeats=30, warmup=5, wait=wait) * 1e3


def mlp_inputs(rng: np.random.Generator) -> tuple[Any, Any, Any]:
    host, x, y = mlp_host_inputs(rng, 1024, 4096)
    return [(cuda.to_device(w), cuda.to_device(b)) for w, b in host], cuda.to_device(x), cuda.to_device(y)


def whole_and_run(rng: np.random.Generator) -> None:
    n = 10**8
    x = cuda.to_device(rng.standard_normal(n).astype(np.float32))
    print(f"allocating 10^8 float32 (cuda.device_array): {ms(lambda: cuda.device_array(n, np.float32)):.3f}")
    copy = cuda.device_array_like(x)
    print(f"device copy of 400 MB: {ms(lambda: copy.copy_to_device(x)):.3f}")
    m = cuda.to_device(rng.standard_normal((8192, 8192)).astype(np.float32))
    flat = m.reshape(8192 * 8192)
    cases = [
        ("8-op chain, 10^8", lambda v: chain(dnp, v), x, x, n),
        ("row sums 8192^2", lambda a: a.sum(axis=1), m, flat, 8192),
        ("column sums 8192^2", lambda a: a.sum(axis=0), m, flat, 8192),
    ]
    for name, fn, arg, flat_arg, n_out in cases:
        f = dsl.compile(fn, target="cuda")
        f(arg)
        run = f.lower(arg.copy_to_host()).program.executable.run
        out = cuda.device_array(n_out, np.float32)
        whole = ms(lambda f=f, arg=arg: f(arg))
        alone = ms(lambda run=run, out=out, flat_arg=flat_arg: run(out, flat_arg))
        launch = ms(lambda run=run, out=out, flat_arg=flat_arg: run(out, flat_arg), wait=False)
        print(f"{name}: whole call {whole:.3f}, run alone {alone:.3f}, its host launch time {launch:.3f}")


def parts(rng: np.random.Generator) -> None:
    spent: collections.Counter[str] = collections.Counter()

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - t0

        return wrapper

    t = cuda.to_device(rng.standard_normal((4096, 1024)).astype(np.float32))
    f_tanh = dsl.compile(lambda v: dnp.tanh(v), target="cuda")
    params, xb, yb = mlp_inputs(rng)
    f_step = dsl.compile(mlp_step, target="cuda")
    cases = [("tanh 4096x1024", lambda: f_tanh(t), 50), ("MLP step", lambda: f_step(params, xb, yb), 20)]
    for _, fn, _ in cases:
        fn()
    ce.CudaExecutable._to_device = timed("arguments", ce.CudaExecutable._to_device)  # type: ignore[method-assign]
    ce.CudaExecutable._check_written = timed("write checks", ce.CudaExecutable._check_written)  # type: ignore[method-assign]
    ce.CudaExecutable.__call__ = timed("executable", ce.CudaExecutable.__call__)  # type: ignore[method-assign]
    cuda.device_array = timed("allocation", cuda.device_array)
    driver.Stream.synchronize = timed("wait", driver.Stream.synchronize)  # type: ignore[method-assign]
    for name, fn, reps in cases:
        fn()
        cuda.synchronize()
        spent.clear()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        total = (time.perf_counter() - t0) / reps * 1e3
        shares = ", ".join(f"{k} {v / reps * 1e3:.3f}" for k, v in spent.most_common())
        print(f"{name}: {total:.3f} per call; of it {shares}")


def wrapper_and_frees(rng: np.random.Generator) -> None:
    """A one-kernel program's call through ``dsl.compile`` against its executable called directly,
    and with each result dropped at once against kept alive (Numba frees dropped device arrays in
    batches with ``cuMemFree``). Host time per call, without waiting for the GPU in between."""
    t = cuda.to_device(rng.standard_normal((4096, 1024)).astype(np.float32))
    f = dsl.compile(lambda v: dnp.tanh(v), target="cuda")
    f(t)
    executable = f.lower(t.copy_to_host()).program.executable
    kept: list[Any] = []
    whole = ms(lambda: f(t), wait=False)
    direct = ms(lambda: executable(t), wait=False)
    alive = ms(lambda: kept.append(f(t)), wait=False)
    print(f"tanh 4096x1024: through dsl.compile {whole:.3f}, executable alone {direct:.3f}", end="")
    print(f"; results kept alive {alive:.3f}")


def against_torch(rng: np.random.Generator) -> None:
    try:
        import torch
    except ImportError:
        print("no PyTorch: no comparison")
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    a, w = torch.randn(4096, 1024, device="cuda"), torch.randn(1024, 1024, device="cuda")
    ad, wd = cuda.as_cuda_array(a), cuda.as_cuda_array(w)
    cases = [
        ("matmul 4096x1024x1024", lambda: a @ w, lambda p, q: p @ q, (ad, wd)),
        ("tanh 4096x1024", lambda: torch.tanh(a), lambda v: dnp.tanh(v), (ad,)),
        ("column sums 4096x1024", lambda: a.sum(0), lambda v: v.sum(axis=0), (ad,)),
    ]
    for name, peer, fn, args in cases:
        f = dsl.compile(fn, target="cuda")
        f(*args)
        print(f"{name}: dslc whole call {ms(lambda f=f, args=args: f(*args)):.3f}, torch {ms(peer):.3f}")


if __name__ == "__main__":
    if not cuda.is_available():
        sys.exit("cuda_overheads: no usable NVIDIA GPU here; nothing run")
    generator = np.random.default_rng(0)
    whole_and_run(generator)
    wrapper_and_frees(generator)
    against_torch(generator)
    parts(generator)  # last: it wraps the executable's methods in timers
