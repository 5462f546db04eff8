"""Compiling a new generated module's kernels in several processes at once.

Numba compiles one function at a time, in one thread (it holds the GIL), and a program's first call
compiles every kernel: most of a cold first call (a transformer block's 22 kernels: 23 s on the
2-core CI machine). The kernels of one module are independent, so before the first call of a module
that Numba has never compiled, ``precompile`` starts ``jobs - 1`` helper processes, and every process
takes the kernels in the same order, heaviest first (by the length of their source, the best
predictor we have of Numba's time), each compiling those it claims first (a file created atomically
in a shared folder): a process that finishes early, or a helper that starts late, simply takes the
next one, so the shares balance whatever the weights got wrong (a static split by weight left the
transformer block's helper 1.8 s behind). A helper is this process forked where that is safe
(``fork_safe``: no other thread): it starts in milliseconds with Numba and the module loaded, where a
new Python process took ~1.1 s to its first compile and got little of a small module's work (the
scan MLP of ``benchmarks/bench_loops.py``). Helpers compile into Numba's on-disk cache
(``cache=True``; a new helper process imports the module file under the same name, so the cache
entries are the ones this process looks up). When this process then builds the kernel table, the
helpers' kernels load from the cache. Nothing depends on the helpers: a kernel a helper did not
compile (it failed or was killed) is compiled here.
Runtime functions a module calls (``runtime.blas.gemm_rows``) are shared out like kernels until
Numba's cache holds them, and so is the driver (it calls the kernels through their addresses, so it
compiles without them: the second derivative's driver took 0.7 s alone after the kernels). A module
with too little to compile to pay for a helper's start (``HELPER_START_WEIGHT``) gets none.

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
import signal
import subprocess
import sys
import tempfile
import threading
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
# Weights are about 3,000 per second of Numba's compile on the 2-core CI machine (a kernel's weight
# is its source length: the second derivative's kernels, 9,400 characters, take ~3 s). A runtime
# function the module imports weighs its own measured compile time (compile_phases.py).
RUNTIME_FUNCTION_WEIGHTS = {
    "gemm_rows": 2400,
    "gemm_rows_tiles": 4800,
    "gemm_rows_block": 4800,
    "parallel_for": 600,
}
RUNTIME_FUNCTION_WEIGHT = 1000  # any other (the serial gemm_rows forms: ~0.3 s)
# A helper's start (a Python process importing Numba and the module: ~0.4 s) costs about this much
# compile work; a share lighter than it is compiled faster where it is.
HELPER_START_WEIGHT = 1300
# Runtimes whose threads make a forked child unsafe by their own documentation (JAX warns that
# "os.fork() is incompatible with multithreaded code"): with one loaded, helpers are new processes.
FORK_HOSTILE = ("jax", "jaxlib", "tensorflow")
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
    """Whether Numba's cache holds code of ``dispatcher`` (for any signature). Where Numba's cache
    layout cannot be read, say yes."""
    cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
    index = getattr(cache_file, "_index_path", None)
    return not isinstance(index, str) or os.path.exists(index)


def by_weight(weights: Mapping[str, int]) -> list[str]:
    """Function names heaviest first: the order every process takes them in, so the last to finish
    are light ones (longest processing time first)."""
    return sorted(weights, key=lambda n: (-weights[n], n))


def claim(claims: str, name: str) -> bool:
    """Take ``name`` for this process: true for exactly one of the processes sharing ``claims`` (a
    folder; the claim is a file created there atomically)."""
    try:
        os.close(os.open(os.path.join(claims, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def compile_claimed(module: types.ModuleType, signatures: Signatures, claims: str) -> None:
    """Compile, in order, each function of ``signatures`` no other process has claimed."""
    for name, overloads in signatures.items():
        if claim(claims, name):
            compile_kernels(module, {name: overloads})


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
    entry_signature: KernelSignature | None = None,
) -> Any:
    """Before a module's first call: compile its kernels ahead (in several processes if Numba never
    compiled the module) and return the driver's kernel table (``KernelTable.addresses``).

    With ``entry_signature`` (the driver's argument types) the driver is shared out with the kernels
    (it calls them through the table, so it does not need them compiled): whichever process claims
    it compiles it into Numba's cache, and the first call finds it there."""
    signatures: dict[str, list[KernelSignature]] = {}
    for name, signature in slots:
        known = signatures.setdefault(name, [])
        if signature not in known:
            known.append(signature)
    if entry_signature is not None:
        signatures[entry] = [entry_signature]
    precompile(module, signatures, weights)
    return kernel_table(module, slots)


def _array_type(dtype: str, ndim: int | None) -> Any:
    scalar = numba.from_dtype(np.dtype(dtype))
    if ndim is None:
        return scalar
    return numba.types.Array(scalar, 1 if ndim == FLAT else ndim, "C")  # FLAT: the kernel gets 1-D


def precompile(module: types.ModuleType, signatures: Signatures, weights: Mapping[str, int]) -> int:
    """Compile the functions of ``signatures`` that Numba's cache does not hold in ``compile_jobs()``
    processes (the module docstring); returns the number of helper processes started (0: too little
    left to share). A function counts as held once any process compiled it, so a module whose helper
    failed shares out only what is still missing."""
    if getattr(numba_config, "DISABLE_JIT", False):
        return 0
    todo = {n: s for n, s in signatures.items() if not compiled_before(getattr(module, n))}
    loads = {n: _weight(n, weights) for n in todo}
    # A helper costs a process start: two or more functions, and a share worth it, each.
    jobs = min(compile_jobs(), len(todo) // 2, sum(loads.values()) // HELPER_START_WEIGHT)
    if jobs < 2:
        return 0
    order = {n: todo[n] for n in by_weight(loads)}
    with tempfile.TemporaryDirectory(prefix="dslc-claims-") as claims:
        helpers = [_start_helper(module, order, claims) for _ in range(jobs - 1)]
        try:
            compile_claimed(module, order, claims)
        finally:
            deadline = time.monotonic() + HELPER_TIMEOUT_S
            for helper in helpers:
                try:
                    helper.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    helper.kill()
                    helper.wait()
    return len(helpers)


def _weight(name: str, weights: Mapping[str, int]) -> int:
    """A kernel's share of the compile work: its source length (the driver's: ``weights`` says); a
    runtime function the module imports (``runtime.blas.gemm_rows``): its measured compile time."""
    if name in weights:
        return weights[name]
    return RUNTIME_FUNCTION_WEIGHTS.get(name, RUNTIME_FUNCTION_WEIGHT)


def fork_safe() -> bool:
    """Whether a helper may be this process forked: on Linux, with no other Python thread (one could
    hold a lock, Numba's compile lock or the import lock, that the child would then wait on forever)
    and none of the runtimes that forbid it loaded (``FORK_HOSTILE``). Native worker pools that
    handle fork themselves (OpenBLAS's, started by NumPy's import) do not count."""
    return (
        sys.platform.startswith("linux")
        and threading.active_count() == 1
        and not any(name in sys.modules for name in FORK_HOSTILE)
    )


class _Forked:
    """A helper that is this process forked (``Popen``'s ``wait`` and ``kill``)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG if deadline is not None else 0)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
            elif deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"helper {self.pid}", timeout or 0.0)
            else:
                time.sleep(0.002)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _fork_helper(module: types.ModuleType, signatures: Signatures, claims: str) -> _Forked:
    """This process forked: the child has the module imported and Numba loaded already, compiles
    what it claims into Numba's cache and exits without running anything of the parent's."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # (or the child's exit would not write them twice: it never flushes)
    pid = os.fork()
    if pid:
        return _Forked(pid)
    code = 1
    try:  # pragma: no cover - runs in the child (its coverage is not collected)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        compile_claimed(module, signatures, claims)
        code = 0
    finally:
        os._exit(code)


def _start_helper(
    module: types.ModuleType, signatures: Signatures, claims: str
) -> _Forked | subprocess.Popen[bytes]:
    """A helper process: this one forked where that is safe (``fork_safe``: it starts in
    milliseconds with everything loaded), else a new Python importing the module (~1 s to its first
    compile on the CI machine)."""
    if fork_safe():
        return _fork_helper(module, signatures, claims)
    spec = {"path": str(module.__file__), "name": module.__name__, "kernels": signatures, "claims": claims}
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
    """A helper process: import the module file under its name and compile, in order, the given
    functions no other process claimed."""
    from runtime.module_cache import import_module_file

    spec = json.loads(spec_json)  # signatures arrive as lists of [dtype, ndim] pairs, in order
    compile_claimed(import_module_file(spec["name"], Path(spec["path"])), spec["kernels"], spec["claims"])


if __name__ == "__main__":
    _helper_main(sys.argv[1])
