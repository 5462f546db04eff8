"""``tests/test_numpy_more.py``'s table (``dsl/numpy_more.py``) in one program on the CUDA backend
(simulator or GPU), against NumPy."""

from __future__ import annotations

from typing import Any

import test_numpy_more as more
from helpers import assert_same

import dsl


def test_numpy_more_on_cuda() -> None:
    names = sorted(more.CASES)
    args = [a for n in names for a in more.CASES[n][2]]

    def program(*flat: Any) -> tuple:
        it = iter(flat)
        return tuple(more.CASES[n][0](*[next(it) for _ in more.CASES[n][2]]) for n in names)

    got = dsl.compile(program, target="cuda")(*args)
    for name, g in zip(names, got, strict=True):
        assert_same(g, more._want(name), rtol=1e-12)
