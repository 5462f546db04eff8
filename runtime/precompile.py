"""Compiling a new generated module's kernels in several processes at once.

Numba compiles one function at a time, in one thread (it holds the GIL), and a program's first call
compiles every kernel: most of a cold first call (a transformer block's 22 kernels: 23 s on the
2-core CI machine). The kernels of one module are independent, so before the first call of a module
that Numba has never compiled, ``precompile`` splits them into ``jobs`` shares of about equal size
(the length of their source, the best predictor we have of Numba's time): helper processes compile
theirs into Numba's on-disk cache (``cache=True``; a helper imports the module file under the same
name, so the cache entries are the ones this process looks up) while this process compiles its own.
When this process then builds the kernel table, the helpers' kernels load from the cache. Nothing
depends on the helpers: a kernel a helper did not compile (it failed or was killed) is compiled here.
Runtime functions a module calls (``runtime.blas.gemm_rows``) are shared out like kernels until
Numba's cache holds them.

The driver calls its kernels through a table of their native addresses (``kernel_table``, passed to
it on every call; ``runtime.intrinsics.call_kernel``), not by name: Numba links a kernel called by
name into the caller and generates its machine code a second time, there in one process. So a
kernel is compiled once, in whichever process compiled it, and the driver's own compile is small.
``prepare`` compiles ahead and then builds the table, which keeps the compiled kernels alive.

``DSL_COMPILE_JOBS`` sets the number of processes (default: the CPU count, at most 8; 1 turns this
off). A kernel signature is one ``(dtype, ndim)`` per argument (``ndim`` None for a scalar,
``runtime.intrinsics.FLAT`` for an array passed as its flat view): every buffer a kernel receives is
a C-contiguous array (arena views, results and the executable's ``np.asarray(order="C")`` inputs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numba
import numpy as np
from numba.core import config as numba_config
from numba.core.dispatcher import Dispatcher

from runtime.intrinsics import FLAT

# per argument: (NumPy dtype name, ndim), ndim None for a scalar, FLAT for an array passed flat
KernelSignature = Sequence[tuple[str, int | None]]
Slot = tuple[str, KernelSignature]  # an entry of the kernel table: a kernel and one signature
Signatures = Mapping[str, Sequence[KernelSignature]]  # kernel name -> the signatures it is called with
HELPER_TIMEOUT_S = 900.0
RUNTIME_FUNCTION_WEIGHT = 600  # ~0.7 s of compile, like a kernel of 600 characters
_ROOT = str(Path(__file__).resolve().parent.parent)  # the directory holding the ``runtime`` package


def compile_jobs() -> int:
    """Processes that compile a new module's kernels (``DSL_COMPILE_JOBS``)."""
    value = os.environ.get("DSL_COMPILE_JOBS", "").strip()
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            return 1
    return max(1, min(os.cpu_count() or 1, 8))


def compiled_before(dispatcher: Any) -> bool:
    """Whether Numba's cache holds code of ``dispatcher`` (for a module's driver: then its kernels
    too, the driver is compiled after them). Where Numba's cache layout cannot be read, say yes."""
    cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
    index = getattr(cache_file, "_index_path", None)
    return not isinstance(index, str) or os.path.exists(index)


def split(weights: Mapping[str, int], jobs: int) -> list[list[str]]:
    """Kernel names in ``jobs`` shares of about equal weight: heaviest first, each to the lightest
    share so far (longest processing time first)."""
    shares: list[list[str]] = [[] for _ in range(jobs)]
    loads = [0] * jobs
    for name in sorted(weights, key=lambda n: (-weights[n], n)):
        i = loads.index(min(loads))
        shares[i].append(name)
        loads[i] += weights[name]
    return shares


def compile_kernels(module: types.ModuleType, signatures: Signatures) -> None:
    """Compile each named kernel of ``module`` for its signatures (loaded from Numba's cache if there).

    A kernel that fails to compile here is left alone: compiling ahead only saves time, and
    ``kernel_table`` compiles it again in the calling process and reports the error there."""
    for name, overloads in signatures.items():
        dispatcher = getattr(module, name)
        for signature in overloads:
            try:
                dispatcher.compile(tuple(_array_type(dtype, ndim) for dtype, ndim in signature))
            except Exception:  # see the docstring: kernel_table decides
                continue


class KernelTable:
    """What a driver receives to call its kernels: ``addresses[i]`` is the native entry point of slot
    ``i`` (a ``uint64`` array; a tuple of the Python functions under ``NUMBA_DISABLE_JIT``). Holds the
    compiled kernels, so their code stays loaded while the table lives."""

    def __init__(self, addresses: Any, compiled: Sequence[tuple[Any, tuple[Any, ...], Any]]) -> None:
        self.addresses = addresses
        # per slot: the dispatcher, the Numba argument types, the compile result (kept alive)
        self.compiled = list(compiled)


def kernel_table(module: types.ModuleType, slots: Sequence[Slot]) -> KernelTable:
    """Compile (or load from Numba's cache) each slot's kernel for its signature and collect the
    native addresses in slot order (a module imported as plain Python gets its functions instead)."""
    kernels = [getattr(module, name) for name, _ in slots]
    if not all(isinstance(k, Dispatcher) for k in kernels):  # imported under NUMBA_DISABLE_JIT
        return KernelTable(tuple(kernels), ())
    addresses, compiled = np.zeros(len(slots), np.uint64), []
    for i, (dispatcher, (_, signature)) in enumerate(zip(kernels, slots)):
        key = tuple(_array_type(dtype, ndim) for dtype, ndim in signature)
        dispatcher.compile(key)
        result = dispatcher.overloads[key]
        addresses[i] = result.library.get_pointer_to_function(result.fndesc.llvm_func_name)
        compiled.append((dispatcher, key, result))
    return KernelTable(addresses, compiled)


def prepare(
    module: types.ModuleType,
    slots: Sequence[Slot],
    weights: Mapping[str, int],
    entry: str,
) -> Any:
    """Before a module's first call: compile its kernels ahead (in several processes if Numba never
    compiled the module) and return the driver's kernel table (``KernelTable.addresses``)."""
    signatures: dict[str, list[KernelSignature]] = {}
    for name, signature in slots:
        known = signatures.setdefault(name, [])
        if signature not in known:
            known.append(signature)
    precompile(module, signatures, weights, entry)
    return kernel_table(module, slots)


def _array_type(dtype: str, ndim: int | None) -> Any:
    scalar = numba.from_dtype(np.dtype(dtype))
    if ndim is None:
        return scalar
    return numba.types.Array(scalar, 1 if ndim == FLAT else ndim, "C")  # FLAT: the kernel gets 1-D


def precompile(
    module: types.ModuleType,
    signatures: Signatures,
    weights: Mapping[str, int],
    entry: str,
) -> int:
    """Compile a module's kernels in ``compile_jobs()`` processes if Numba never compiled the module;
    returns the number of helper processes started (0: nothing to share, or compiled before)."""
    jobs = min(compile_jobs(), len(signatures) // 2)  # a helper costs a process start: 2+ kernels each
    if jobs < 2 or getattr(numba_config, "DISABLE_JIT", False) or compiled_before(getattr(module, entry)):
        return 0
    mine, *theirs = split({n: _weight(module, n, weights) for n in signatures}, jobs)
    helpers = [_start_helper(module, {n: signatures[n] for n in share}) for share in theirs]
    try:
        compile_kernels(module, {n: signatures[n] for n in mine})
    finally:
        deadline = time.monotonic() + HELPER_TIMEOUT_S
        for helper in helpers:
            try:
                helper.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                helper.kill()
                helper.wait()
    return len(helpers)


def _weight(module: types.ModuleType, name: str, weights: Mapping[str, int]) -> int:
    """A kernel's share of the compile work: its source length; a runtime function the module
    imports (``runtime.blas.gemm_rows``) weighs like a small kernel until Numba's cache has it,
    then nothing (it loads)."""
    if name in weights:
        return weights[name]
    return 0 if compiled_before(getattr(module, name)) else RUNTIME_FUNCTION_WEIGHT


def _start_helper(module: types.ModuleType, signatures: Signatures) -> subprocess.Popen[bytes]:
    spec = {"path": str(module.__file__), "name": module.__name__, "kernels": signatures}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH", "")) if p)
    return subprocess.Popen(
        [sys.executable, "-m", "runtime.precompile", json.dumps(spec)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _helper_main(spec_json: str) -> None:
    """A helper process: import the module file under its name and compile the given kernels."""
    from runtime.module_cache import import_module_file

    spec = json.loads(spec_json)  # signatures arrive as lists of [dtype, ndim] pairs
    compile_kernels(import_module_file(spec["name"], Path(spec["path"])), spec["kernels"])


if __name__ == "__main__":
    _helper_main(sys.argv[1])
