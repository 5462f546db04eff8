"""``dsl/numpy_more.py``: NumPy functions outside programs reached for and found missing (2026-11-27),
against NumPy (values, dtypes, shapes; the interpreter and the CPU backend), their gradients
against central differences, and ``tests/cuda_sim/sim_numpy_more.py`` the same table on CUDA."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from helpers import assert_same, central_differences, interpret_fn

import dsl
import dsl.numpy as dnp

rng = np.random.default_rng(11)
M = rng.standard_normal((3, 4))
V = rng.standard_normal(6)
W = rng.standard_normal(3)
I34 = rng.integers(-5, 5, (3, 4)).astype(np.int32)
N = np.array([1.0, np.nan, 3.0, -2.0, np.inf, -np.inf])
N4 = np.array([1.0, np.nan, 3.0, -2.0])


def _both(fn: Any, args: tuple) -> tuple[Any, Any, tuple]:
    """A case written once for ``xp`` (``dsl.numpy`` or NumPy)."""
    return (lambda *a: fn(dnp, *a), lambda *a: fn(np, *a), args)


# name -> (the dsl program, the same in NumPy, arguments)
CASES: dict[str, tuple[Any, Any, tuple]] = {
    "linspace_static": (lambda: dnp.linspace(0, 1, 7), lambda: np.linspace(0, 1, 7), ()),
    "linspace_traced": (
        lambda a, b: dnp.linspace(a[0], b[1], 5),
        lambda a, b: np.linspace(a[0], b[1], 5),
        (V, W),
    ),
    "linspace_no_endpoint_step": (
        lambda a, b: dnp.linspace(a[0], b[1], 5, endpoint=False, retstep=True),
        lambda a, b: np.linspace(a[0], b[1], 5, endpoint=False, retstep=True),
        (V, W),
    ),
    "linspace_arrays_axis1": (
        lambda a, b: dnp.linspace(a[:3], b, 4, axis=1),
        lambda a, b: np.linspace(a[:3], b, 4, axis=1),
        (V, W),
    ),
    "linspace_int": (
        lambda a, b: dnp.linspace(a[0] * 10, b[0] * 10, 6, dtype=np.int64),
        lambda a, b: np.linspace(a[0] * 10, b[0] * 10, 6, dtype=np.int64),
        (V, W),
    ),
    "logspace": (
        lambda a: dnp.logspace(a[0], a[1], 4, base=2.0),
        lambda a: np.logspace(a[0], a[1], 4, base=2.0),
        (V,),
    ),
    "tri": (lambda: dnp.tri(3, 4, 1), lambda: np.tri(3, 4, 1), ()),
    "meshgrid": (lambda a, b: dnp.meshgrid(a, b), lambda a, b: tuple(np.meshgrid(a, b)), (V, W)),
    "meshgrid_ij_sparse": (
        lambda a, b: dnp.meshgrid(a, b, indexing="ij", sparse=True),
        lambda a, b: tuple(np.meshgrid(a, b, indexing="ij", sparse=True)),
        (V, W),
    ),
    "broadcast_arrays": (
        lambda a, b: dnp.broadcast_arrays(a[:, None], b),
        lambda a, b: tuple(np.broadcast_arrays(a[:, None], b)),
        (V, W),
    ),
    "diff": (
        lambda m: (dnp.diff(m), dnp.diff(m, 2, axis=0), dnp.diff(m, prepend=0.5, append=m[:, :1])),
        lambda m: (np.diff(m), np.diff(m, 2, axis=0), np.diff(m, prepend=0.5, append=m[:, :1])),
        (M,),
    ),
    "diff_int_bool": (
        lambda i: (dnp.diff(i), dnp.diff(i > 0)),
        lambda i: (np.diff(i), np.diff(i > 0)),
        (I34,),
    ),
    "ediff1d": (
        lambda m: dnp.ediff1d(m, to_end=[1, 2], to_begin=-1),
        lambda m: np.ediff1d(m, to_end=[1, 2], to_begin=-1),
        (M,),
    ),
    "trapezoid": (
        lambda m, w: (dnp.trapezoid(m), dnp.trapezoid(m, dx=0.5, axis=0), dnp.trapezoid(m, x=w, axis=0)),
        lambda m, w: (np.trapezoid(m), np.trapezoid(m, dx=0.5, axis=0), np.trapezoid(m, x=w, axis=0)),
        (M, W),
    ),
    "ptp": (
        lambda m: (dnp.ptp(m), dnp.ptp(m, axis=1, keepdims=True)),
        lambda m: (np.ptp(m), np.ptp(m, axis=1, keepdims=True)),
        (M,),
    ),
    "rot90": (
        lambda m: (dnp.rot90(m), dnp.rot90(m, 2), dnp.rot90(m, 3), dnp.rot90(m, -1, axes=(1, 0))),
        lambda m: (np.rot90(m), np.rot90(m, 2), np.rot90(m, 3), np.rot90(m, -1, axes=(1, 0))),
        (M,),
    ),
    "append_delete": _both(
        lambda xp, m: (
            xp.append(m, [1.0]),
            xp.append(m, m[:1], axis=0),
            xp.delete(m, 1, axis=1),
            xp.delete(m, [0, 2]),
            xp.delete(m, slice(0, 2), axis=0),
        ),
        (M,),
    ),
    "select": (
        lambda m, i: dnp.select([m > 0.5, m < -0.5], [m, i], default=-7),
        lambda m, i: np.select([m > 0.5, m < -0.5], [m, i], default=-7),
        (M, I34),
    ),
    "array_equal": (
        lambda m, n: (
            dnp.array_equal(m, m),
            dnp.array_equal(m, m[:2]),
            dnp.array_equal(n, n),
            dnp.array_equal(n, n, True),
        ),
        lambda m, n: tuple(
            np.asarray(r)
            for r in (
                np.array_equal(m, m),
                np.array_equal(m, m[:2]),
                np.array_equal(n, n),
                np.array_equal(n, n, True),
            )
        ),
        (M, N),
    ),
    "isposinf_isneginf": (
        lambda n, i: (dnp.isposinf(n), dnp.isneginf(n), dnp.isposinf(i)),
        lambda n, i: (np.isposinf(n), np.isneginf(n), np.isposinf(i)),
        (N, I34),
    ),
    "fabs": (
        lambda n, i: (dnp.fabs(n), dnp.fabs(i), dnp.fabs(-0.0 * n)),
        lambda n, i: (np.fabs(n), np.fabs(i), np.fabs(-0.0 * n)),
        (N, I34),
    ),
    "logaddexp2": (
        lambda n, v: (dnp.logaddexp2(n, n[::-1]), dnp.logaddexp2(v, 2.0), dnp.logaddexp2(n, n)),
        lambda n, v: (np.logaddexp2(n, n[::-1]), np.logaddexp2(v, 2.0), np.logaddexp2(n, n)),
        (N, V),
    ),
    "polyval": (
        lambda w, m: (dnp.polyval(w, m), dnp.polyval([1, -2, 3], m)),
        lambda w, m: (np.polyval(w, m), np.polyval([1, -2, 3], m)),
        (W, M),
    ),
    "nanvar_nanstd": _both(
        lambda xp, n, m: (
            xp.nanvar(n),
            xp.nanstd(n, ddof=1),
            xp.nanvar(m, axis=0),
            xp.nanvar(xp.where(m > 0, m, np.nan), axis=1, keepdims=True),
        ),
        (N4, M),
    ),
    "cov_corrcoef": _both(
        lambda xp, m, w: (
            xp.cov(m),
            xp.cov(m, rowvar=False, bias=True),
            xp.cov(m[0], m[1]),
            xp.cov(w),
            xp.corrcoef(m),
            xp.cov(m, ddof=0),
        ),
        (M, W),
    ),
    "convolve_correlate": _both(
        lambda xp, v, w: tuple(
            f(a, b, mode)
            for f in (xp.convolve, xp.correlate)
            for a, b in ((v, w), (w, v))
            for mode in ("full", "same", "valid")
        ),
        (V, W),
    ),
    "convolve_int": (lambda i: dnp.convolve(i[0], i[1][:2]), lambda i: np.convolve(i[0], i[1][:2]), (I34,)),
}


def _want(name: str) -> Any:
    _, ref, args = CASES[name]
    with np.errstate(all="ignore"):
        return ref(*args)


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_numpy_in_the_interpreter(name: str) -> None:
    fn, _, args = CASES[name]
    assert_same(interpret_fn(fn, *args), _want(name), rtol=1e-12)


def test_against_numpy_compiled_on_the_cpu() -> None:
    """Every case in one compiled program."""
    names = sorted(CASES)
    args = [a for n in names for a in CASES[n][2]]

    def program(*flat: Any) -> tuple:
        it = iter(flat)
        return tuple(CASES[n][0](*[next(it) for _ in CASES[n][2]]) for n in names)

    got = dsl.compile(program)(*args)
    for name, g in zip(names, got, strict=True):
        assert_same(g, _want(name), rtol=1e-12)


# name -> (a scalar of one float argument, written for dnp and np alike, the argument)
GRADIENTS: dict[str, tuple[Any, np.ndarray]] = {
    "diff": (lambda np, x: (np.diff(x, 2, axis=1) ** 2).sum(), M),
    "trapezoid": (lambda np, x: np.trapezoid(x * x, x=W, axis=0).sum(), M),
    "ptp": (lambda np, x: np.ptp(x, axis=0).sum(), M),
    "rot90_delete": (
        lambda np, x: (np.rot90(x) * np.arange(12.0).reshape(4, 3)).sum() + np.delete(x, 1).sum(),
        M,
    ),
    "polyval": (lambda np, x: np.polyval(x[0], x[1:]).sum(), M),
    "nanvar": (lambda np, x: np.nanvar(np.where(x > 0, x, np.nan), axis=1).sum(), M + 0.3),
    "cov_corrcoef": (lambda np, x: (np.cov(x) ** 2).sum() + np.corrcoef(x).sum(), M),
    "convolve_correlate": (
        lambda np, x: (np.convolve(x, W, "same") ** 2).sum() + np.correlate(W, x).sum(),
        V,
    ),
    "logaddexp2": (lambda np, x: np.logaddexp2(x, x[::-1] * 2.0).sum(), V),
    "linspace": (lambda np, x: (np.linspace(x[0], x[1], 5) ** 2).sum(), V),
}


@pytest.mark.parametrize("name", sorted(GRADIENTS))
def test_gradients_against_central_differences(name: str) -> None:
    fn, x = GRADIENTS[name]
    got = dsl.grad(lambda x: fn(dnp, x))(x)
    np.testing.assert_allclose(got, central_differences(lambda v: fn(np, v), x), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    "call, error, phrase",
    [
        (lambda x: dnp.delete(x, x[0, 0] > 0), dsl.TraceError, "known at trace time"),
        (lambda x: dnp.convolve(x, x[0]), dsl.ShapeError, "1-D arrays"),
        (lambda x: dnp.select([x > 0], [x, x]), dsl.ShapeError, "same length"),
        (lambda x: dnp.meshgrid(x[0], indexing="ji"), dsl.ShapeError, "'xy' and 'ij'"),
        (lambda x: dnp.linspace(x[0, 0], 1.0, -1), dsl.ShapeError, "must be non-negative"),
    ],
)
def test_clear_errors(call: Any, error: type[Exception], phrase: str) -> None:
    with pytest.raises(error, match=rf"test_numpy_more.py:\d+: .*{phrase}"):
        dsl.compile(call)(M)


@pytest.mark.parametrize("ddof", [0, 1, 2, 3, 1.5])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_nanvar_with_at_most_ddof_numbers_is_nan(axis, ddof) -> None:
    """``nanvar``/``nanstd`` where a slice has at most ``ddof`` numbers: NaN, as NumPy's (``var``'s
    rule, inf, came out; an outside prober, 2026-11-28)."""
    x = np.array([[1.0, np.nan, 3.0, 4.0], [np.nan, np.nan, 2.0, np.nan], [np.nan] * 4])
    for fn, ref in ((dnp.nanvar, np.nanvar), (dnp.nanstd, np.nanstd)):
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = ref(x, axis=axis, ddof=ddof)
        got = dsl.compile(lambda x, fn=fn: fn(x, axis=axis, ddof=ddof))(x)
        np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)
