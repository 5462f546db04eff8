"""Every reduction's declared facts (``Reducer`` in compiler/prims/base.py) against its NumPy reference:
what a backend may do because of them must not change the result beyond what they promise."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.ir.types import DType
from compiler.prims import REDUCTIONS, REGISTRY

rng = np.random.default_rng(5)
FLOATS = (DType.f32, DType.f64)


def _values(dtype: DType) -> np.ndarray:
    x = rng.standard_normal(1000).astype(dtype.np)
    x[::97] = 0.0
    x[::89] = -0.0  # both signed zeros, for the selecting reductions' order
    return x


def _reduce(name: str, x: np.ndarray) -> np.ndarray:
    return REGISTRY[name].run_reference([x], {"axes": (0,)})


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", sorted(p.name for p in REDUCTIONS))
def test_a_selecting_reduction_is_exact_in_any_order(name: str, dtype: DType) -> None:
    """``selects``: the result is the greatest or least element, whatever order or grouping the
    elements are combined in (so chunks and integer keys may be used)."""
    reducer = REGISTRY[name].reducer
    assert reducer is not None
    if reducer.selects is None:
        pytest.skip(f"{name} selects nothing")
    x = _values(dtype)
    whole = _reduce(name, x)
    assert whole in x
    assert whole == (x.max() if reducer.selects == "max" else x.min())
    for _ in range(5):
        parts = np.array_split(rng.permutation(x), 7)
        partials = np.array([_reduce(name, p) for p in parts], dtype.np)
        assert _reduce(name, partials).tobytes() == whole.tobytes()  # signed zeros included


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", sorted(p.name for p in REDUCTIONS))
def test_a_reassociable_reduction_changes_only_by_rounding(name: str, dtype: DType) -> None:
    """``reassociable``: partial results regrouped (a backend's several accumulators) give the same
    value up to rounding; a reduction that is not declared so is exactly order-independent or says
    which of its elements it picks (``selects``)."""
    reducer = REGISTRY[name].reducer
    assert reducer is not None
    assert reducer.reassociable != (reducer.selects is not None), f"{name}: declare one of the two"
    if not reducer.reassociable:
        return
    x = _values(dtype)
    whole = _reduce(name, x)
    partials = np.array([_reduce(name, p) for p in np.array_split(rng.permutation(x), 8)], dtype.np)
    rtol = 1e-5 if dtype is DType.f32 else 1e-12
    np.testing.assert_allclose(_reduce(name, partials), whole, rtol=rtol, atol=rtol)
