"""A compiled program ready to call: the native driver, its arena and the call-time checks.

The arena is allocated once per ``Executable`` and reused by every call; a lock serializes calls
because they share it (the driver itself releases the GIL). Everything a call needs is computed at
construction so the per-call Python path is a few list operations around one native call.
Write-back results (the new values of arguments the program mutates) are copied into the caller's
arrays only after the driver returned, so an exception leaves every caller array untouched. An
argument the driver writes into (``direct_writeback``, ``args_written``) is snapshotted first when
the driver can raise midway (it runs object-mode kernels, or is plain Python) and restored if it does.

Concurrency: calls of one executable are serialized (the arena); calls of different executables run
in parallel. Numba's ``workqueue`` threading layer aborts when two threads launch parallel kernels at
once, so importing this module selects a thread-safe layer (``tbb`` or ``omp``, Numba's
``threadsafe`` choice) unless ``NUMBA_THREADING_LAYER`` is set; if neither can be loaded, all calls
take one global lock instead.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numba
import numpy as np

from runtime.errors import DSLError, ReadOnlyError, ShapeError
from runtime.precompile import KernelTable

InputType = tuple[tuple[int, ...], np.dtype]


def _select_threadsafe_layer() -> bool:
    """Whether concurrent parallel kernels are safe: picks ``tbb``/``omp`` if one loads."""
    chosen = os.environ.get("NUMBA_THREADING_LAYER", "")
    if chosen and chosen != "default":
        return chosen != "workqueue"
    for pool in ("tbbpool", "omppool"):
        try:
            importlib.import_module(f"numba.np.ufunc.{pool}")
        except ImportError:
            continue
        numba.config.THREADING_LAYER = "threadsafe"  # type: ignore[attr-defined]
        return True
    return False


THREADSAFE_LAYER = _select_threadsafe_layer()
# Held around every driver call when only the workqueue layer exists (it is not thread-safe).
_GLOBAL_LOCK: contextlib.AbstractContextManager[Any] = (
    contextlib.nullcontext() if THREADSAFE_LAYER else threading.Lock()
)

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PACKAGE_DIRS = tuple(os.path.join(_ROOT, pkg) + os.sep for pkg in ("dsl", "compiler", "runtime"))


def caller_location() -> str:
    """``file:line`` of the innermost stack frame outside dslc (the user's call)."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(_PACKAGE_DIRS) and not name.startswith("<frozen"):
            return f"{name}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return "<unknown>"


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays share a byte: bounds first (cheap), then NumPy's exact test, bounded in
    work (interleaved views like ``x[::2]`` and ``x[1::2]`` are told apart); too hard counts as yes."""
    if not np.may_share_memory(a, b):
        return False
    try:
        return bool(np.shares_memory(a, b, max_work=10_000))  # type: ignore[arg-type]  # stubs: -1 or 0 only
    except np.exceptions.TooHardError:
        return True


def _self_overlap(a: np.ndarray) -> bool:
    """Whether two elements of ``a`` may share a byte (a writeable ``as_strided`` window, a zero
    stride): with the axes ordered by stride, each stride must step past everything the smaller ones
    span. (An interleaved layout that satisfies no such order counts as overlapping: NumPy makes
    none.)"""
    if a.size == 0:
        return False
    span = a.itemsize
    for stride, n in sorted((abs(s), n) for s, n in zip(a.strides, a.shape, strict=True) if n > 1):
        if stride < span:
            return True
        span += stride * (n - 1)
    return False


def _may_raise_midway(driver: Callable[..., Any]) -> bool:
    """Whether the driver can raise after it started writing: nopython code with NumPy's error model
    cannot (no bounds checks, no Python calls); object-mode kernels and plain Python drivers can,
    unless the driver says otherwise (a big program's table driver: Python around native code,
    ``raises_midway`` false when it calls no NumPy kernel)."""
    says = getattr(driver, "raises_midway", None)
    if isinstance(says, bool) and not numba.config.DISABLE_JIT:  # type: ignore[attr-defined]
        return says
    py_func = getattr(driver, "py_func", None)
    if py_func is None:  # not a Numba dispatcher (NUMBA_DISABLE_JIT): any line may raise
        return True
    return "objmode" in py_func.__code__.co_names


class ArgumentChecks:
    """Call-time checks shared by the CPU and CUDA executables: argument names in messages, and the
    rule for a host array the program writes into (mutated or donated)."""

    name: str
    _arg_names: list[str]

    def _arg(self, i: int) -> str:
        return f"'{self._arg_names[i]}'" if i < len(self._arg_names) else str(i)

    def _check_host_target(self, arrays: Sequence[Any], index: int) -> None:
        """Argument ``index`` is written: it must be a writeable NumPy array sharing no byte with
        another argument."""
        target, name = arrays[index], self._arg(index)
        if not isinstance(target, np.ndarray):
            raise DSLError(
                f"{caller_location()}: {self.name}: argument {name} is modified in place (or donated), "
                f"so it must be a NumPy array, not {type(target).__name__}"
            )
        if not target.flags.writeable:
            raise ReadOnlyError(
                f"{caller_location()}: {self.name}: argument {name} is read-only, but the program "
                "modifies it in place (or it is donated); pass a writeable array (e.g. a.copy())"
            )
        if _self_overlap(target):
            raise DSLError(
                f"{caller_location()}: {self.name}: argument {name} has elements that share memory (a "
                "view made with as_strided or broadcast_to and made writeable), but the program modifies "
                "it in place, which would write one element through several; pass a copy (e.g. a.copy())"
            )
        for other, a in enumerate(arrays):
            if other != index and isinstance(a, np.ndarray) and _overlap(target, a):
                raise DSLError(
                    f"{caller_location()}: {self.name}: arguments {name} and {self._arg(other)} share "
                    f"memory, but the program modifies (or was donated) {name}; "
                    "pass separate arrays (e.g. a.copy())"
                )


class Executable(ArgumentChecks):
    def __init__(
        self,
        driver: Callable[..., tuple[np.ndarray, ...]],
        arena_bytes: int,
        n_results: int,
        writeback: Sequence[int],
        input_types: Sequence[tuple[Sequence[int], Any]],
        name: str = "program",
        out_types: Sequence[tuple[Sequence[int], Any]] = (),
        direct_writeback: Sequence[int] = (),
        arg_names: Sequence[str] = (),
        donated: Sequence[int] = (),
        prepare: Callable[[], KernelTable] | None = None,
        args_written: Sequence[int] = (),
    ) -> None:
        self.driver = driver
        # Run once before the first call: compiles the kernels and gives the driver's kernel table
        # (runtime/precompile.py), passed to every call after the arena.
        self._prepare = prepare
        self.kernels = KernelTable(np.zeros(0, np.uint64), ())
        self.name = name
        self.arena = np.empty(max(int(arena_bytes), 1), np.uint8)
        self.n_results = n_results
        self.writeback = tuple(writeback)
        self.n_public = n_results - len(self.writeback)
        self.input_types: list[InputType] = [(tuple(s), np.dtype(d)) for s, d in input_types]
        self._dtypes = [d for _, d in self.input_types]
        self._shapes = [s for s, _ in self.input_types]
        # Results allocated here with NumPy (huge-page friendly) and passed to the driver first.
        self._outs = [(tuple(s), np.dtype(d)) for s, d in out_types]
        # Arguments whose new value the driver stores directly into the array it was given.
        self.direct = frozenset(direct_writeback)
        # Arguments the call writes into (write-backs and donations): checked before every call.
        self._written = tuple(dict.fromkeys((*self.writeback, *donated)))
        self._arg_names = list(arg_names)
        self._lock = threading.Lock()
        # Arguments written directly by a driver that may raise midway: snapshotted before each call
        # (direct write-backs, and arguments whose memory holds intermediate values of the plan).
        written = sorted({*self.direct, *args_written})
        self._guarded = tuple(written) if written and _may_raise_midway(driver) else ()
        if not 0 <= self.n_public <= n_results:
            raise ValueError(f"{n_results} results cannot hold {len(self.writeback)} write-backs")

    def __call__(self, *arrays: Any) -> tuple[np.ndarray, ...]:
        if len(arrays) != len(self._dtypes):
            raise TypeError(
                f"{caller_location()}: {self.name} takes {len(self._dtypes)} arguments, got {len(arrays)}"
            )
        args = [np.asarray(a, dtype=d, order="C") for a, d in zip(arrays, self._dtypes)]
        if [a.shape for a in args] != self._shapes:
            self._shape_error(args)
        if self._written:
            self._check_writeback_targets(arrays)
        outs = [np.empty(s, d) for s, d in self._outs]
        saved = [(args[i], args[i].copy()) for i in self._guarded]
        with self._lock, _GLOBAL_LOCK:
            if self._prepare is not None:
                self.kernels = self._prepare()
                self._prepare = None
            try:
                results = self.driver(self.arena, self.kernels.addresses, *outs, *args)
            except BaseException:
                for target, before in saved:  # no caller array is left half-written
                    np.copyto(target, before)
                raise
        if self.writeback:
            for index, new in zip(self.writeback, results[self.n_public :]):
                if index not in self.direct or args[index] is not arrays[index]:
                    # not written directly, or the driver wrote into a converted copy of the argument
                    np.copyto(arrays[index], new, casting="unsafe")
            return results[: self.n_public]
        return results

    def _shape_error(self, args: list[np.ndarray]) -> None:
        for i, (a, shape) in enumerate(zip(args, self._shapes)):
            if a.shape != shape:
                raise ShapeError(
                    f"{caller_location()}: {self.name}: argument {self._arg(i)} has shape {a.shape}, "
                    "but the program was compiled for "
                    f"shape {shape}; compile it again for the new shape"
                )

    def _check_writeback_targets(self, arrays: Sequence[Any]) -> None:
        """Every array the program writes into (mutated or donated) must be writable and must not
        overlap another argument; checked before the call so a failure leaves all caller arrays as
        they were. The one call-time safety check: ``dsl`` relies on it."""
        for index in self._written:
            self._check_host_target(arrays, index)
