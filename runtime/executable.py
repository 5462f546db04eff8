"""A compiled program ready to call: the native driver, its arena and the call-time checks.

The arena is allocated once per ``Executable`` and reused by every call; a lock serializes calls
because they share it (the driver itself releases the GIL). Everything a call needs is computed at
construction so the per-call Python path is a few list operations around one native call.
Write-back results (the new values of arguments the program mutates) are copied into the caller's
arrays only after the driver returned, so an exception leaves every caller array untouched.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from runtime.errors import DSLError, ShapeError

InputType = tuple[tuple[int, ...], np.dtype]


class Executable:
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
    ) -> None:
        self.driver = driver
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
        if not 0 <= self.n_public <= n_results:
            raise ValueError(f"{n_results} results cannot hold {len(self.writeback)} write-backs")

    def __call__(self, *arrays: Any) -> tuple[np.ndarray, ...]:
        if len(arrays) != len(self._dtypes):
            raise TypeError(f"{self.name} takes {len(self._dtypes)} arguments, got {len(arrays)}")
        args = [np.asarray(a, dtype=d, order="C") for a, d in zip(arrays, self._dtypes)]
        if [a.shape for a in args] != self._shapes:
            self._shape_error(args)
        if self._written:
            self._check_writeback_targets(arrays)
        outs = [np.empty(s, d) for s, d in self._outs]
        with self._lock:
            results = self.driver(self.arena, *outs, *args)
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
                    f"{self.name}: argument {i} has shape {a.shape}, but the program was compiled for "
                    f"shape {shape}; compile it again for the new shape"
                )

    def _arg(self, i: int) -> str:
        return f"'{self._arg_names[i]}'" if i < len(self._arg_names) else str(i)

    def _check_writeback_targets(self, arrays: Sequence[Any]) -> None:
        """Every array the program writes into (mutated or donated) must be writable and must not
        overlap another argument; checked before the call so a failure leaves all caller arrays as
        they were. The one call-time safety check: ``dsl`` relies on it."""
        for index in self._written:
            target, name = arrays[index], self._arg(index)
            if not isinstance(target, np.ndarray):
                raise DSLError(
                    f"{self.name}: argument {name} is modified in place (or donated), so it must be a NumPy "
                    f"array, not {type(target).__name__}"
                )
            if not target.flags.writeable:
                raise DSLError(
                    f"{self.name}: argument {name} is read-only, but the program modifies it in place "
                    "(or it is donated); pass a writeable array (e.g. a.copy())"
                )
            for other, a in enumerate(arrays):
                if other != index and isinstance(a, np.ndarray) and np.may_share_memory(target, a):
                    raise DSLError(
                        f"{self.name}: arguments {name} and {self._arg(other)} share memory, but the program "
                        f"modifies (or was donated) {name}; pass separate arrays (e.g. a.copy())"
                    )
