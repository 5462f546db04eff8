"""Issue 29, items 4 and 5: the rest of NumPy built from existing primitives (``var std logaddexp
linalg.norm split pad round argmax ...``), the array methods and Paddle/PyTorch in-place names, and
errors that teach. Each function against NumPy forward (on the reference interpreter from a table, a
program of them on the CPU backend), and its gradient against central differences in float64."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from helpers import assert_same, interpret_fn

import dsl
import dsl.numpy as dnp

HERE = re.escape(__file__.rsplit("/", 1)[-1])
rng = np.random.default_rng(29)
M34 = rng.standard_normal((3, 4))
F34 = rng.standard_normal((3, 4)).astype(np.float32)
I34 = rng.integers(-9, 9, (3, 4)).astype(np.int32)
V6 = rng.standard_normal(6)
EDGE = np.array(
    [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999999999999994, -0.4, -0.0, 1e300, np.inf, -np.inf, np.nan]
)
TIES = np.array([[1.0, 3.0, 3.0, -2.0], [np.nan, 1.0, np.nan, 0.0], [-1.0, -1.0, -5.0, -5.0]])
W = [(1, 2), (0, 3)]

NANS = np.array([[1.0, np.nan, -2.0, np.nan], [np.nan, np.nan, np.nan, np.nan], [0.5, -0.0, 3.0, np.inf]])
CLOSE = M34 + np.array([[0.0, 1e-9, 1e-3, np.inf], [np.nan, 0.0, -1e-12, 1.0], [0.0, 0.0, 2e-5, -1e-6]])
A23, B32 = M34[:2, :3], rng.standard_normal((3, 2))
T234 = rng.standard_normal((2, 3, 4))


def _composed(name: str, *args: Any, **kwargs: Any) -> tuple[Any, Any, tuple]:
    """A ``dsl.numpy_compose`` function (the NumPy function of the same name is the oracle) on
    ``args`` (arrays: arguments; the rest fixed)."""
    arrays = tuple(a for a in args if isinstance(a, np.ndarray))
    fixed = [None if isinstance(a, np.ndarray) else a for a in args]

    def call(module: Any) -> Any:
        def fn(*arrays_in: Any) -> Any:
            it = iter(arrays_in)
            return getattr(module, name)(*[next(it) if a is None else a for a in fixed], **kwargs)

        return fn

    return call(dnp), call(np), arrays


# dsl.numpy functions composed of others (dsl/numpy_compose.py), each against NumPy's
COMPOSED: dict[str, tuple[Any, Any, tuple]] = {
    "tensordot": _composed("tensordot", T234, M34.T, axes=([1, 2], [1, 0])),
    "tensordot_int": _composed("tensordot", M34, M34.T, 1),
    "tensordot_0": _composed("tensordot", V6[:2], I34, 0),
    "inner": _composed("inner", T234, M34),
    "inner_scalar": _composed("inner", np.float64(2.0), M34),
    "vdot": _composed("vdot", M34, M34 * 2),
    "kron": _composed("kron", A23, B32),
    "kron_mixed": _composed("kron", V6[:2], I34),
    "diagonal": _composed("diagonal", T234, 1, 2, 0),
    "diagonal_negative": _composed("diagonal", M34, -1),
    "diagonal_outside": _composed("diagonal", M34, 5),
    "diag_vector": _composed("diag", V6[:3], -2),
    "diag_matrix": _composed("diag", M34, 1),
    "trace": _composed("trace", M34),
    "trace_int": _composed("trace", I34, 1),
    "tile": _composed("tile", A23, (2, 1, 3)),
    "tile_int": _composed("tile", V6[:2], 3),
    "repeat": _composed("repeat", A23, 2),
    "repeat_axis": _composed("repeat", A23, [1, 0, 3], 1),
    "roll": _composed("roll", M34, 5),
    "roll_axes": _composed("roll", T234, (1, -2), (0, 2)),
    "nansum": _composed("nansum", NANS, 1),
    "nanprod": _composed("nanprod", NANS, 0),
    "nanmean": _composed("nanmean", NANS, 1),
    "nanmax": _composed("nanmax", NANS, 1),
    "nanmin": _composed("nanmin", NANS, 0, keepdims=True),
    "nanmax_int": _composed("nanmax", I34),
    "fmax": _composed("fmax", NANS, NANS[::-1]),
    "fmin": _composed("fmin", NANS, NANS[:, ::-1]),
    "isclose": _composed("isclose", M34, CLOSE),
    "isclose_nan": _composed("isclose", CLOSE, CLOSE, equal_nan=True),
    "isclose_int": _composed("isclose", I34, I34 + 1, atol=1),
    "allclose": _composed("allclose", M34, CLOSE, rtol=1e-3, atol=1.0),
    "average": _composed("average", M34),
    "average_weights": _composed("average", M34, 1, np.arange(4.0)),
    "average_returned": _composed("average", I34, 0, np.abs(M34), True),
    "atleast_3d": _composed("atleast_3d", V6),
    "atleast_2d": _composed("atleast_2d", np.float64(3.0)),
    "atleast_1d_many": _composed("atleast_1d", np.float64(3.0), M34),
    "column_stack": (
        lambda a, b: dnp.column_stack([a, b]),
        lambda a, b: np.column_stack([a, b]),
        (V6[:3], M34[:, :3].T),
    ),
    "dstack": (lambda a, b: dnp.dstack([a, b]), lambda a, b: np.dstack([a, b]), (A23, A23 * 2)),
    "positive": _composed("positive", I34),
    "deg2rad": _composed("deg2rad", M34 * 90),
    "rad2deg_f32": _composed("rad2deg", F34),
    "radians_int": _composed("radians", I34),
    "float_power": _composed("float_power", F34, 2),
    "heaviside": _composed("heaviside", NANS, 0.5),
    "fix": _composed("fix", EDGE),
    "sinc": _composed("sinc", np.append(EDGE, [0.0, 1.0, -3.0])),
    "sinc_f32": _composed("sinc", F34),
    "sinc_int_and_bool": _composed("sinc", np.array([0, 1, 2, -3], np.int32)),  # float64 (bools too)
    "sinc_bool": _composed("sinc", np.array([True, False])),  # (was float32: sinc(True) -2.8e-8)
    "cross": _composed("cross", T234[..., :3], M34[:, 1:]),
    "cross_axes": _composed("cross", M34[:, :3].T, T234[:, 1:, :3], axisa=0, axisb=1, axisc=0),
    "cross_int_and_2": _composed("cross", I34[:, :2], I34[:, 1:]),
    "cross_2_2": _composed("cross", A23[:, :2], M34[:2, 2:]),
    "cross_3_2_axis": _composed("cross", M34[:3, :3], A23[::-1].copy(), axis=0),
    "cbrt": _composed("cbrt", np.append(EDGE, [27.0, -8.0, 1e-310, -2.0])),
    "cbrt_int": _composed("cbrt", I34),
    "copysign": _composed("copysign", EDGE, EDGE[::-1]),
    "copysign_scalar_f32": _composed("copysign", F34, -0.0),
    "copysign_int": _composed("copysign", I34, -1),
    "signbit": _composed("signbit", np.append(EDGE, [-np.nan, -0.0])),
    "signbit_int": _composed("signbit", I34),
    "clip_int_past_int32": _composed("clip", I34, 0, 2**40),
    "clip_int_both_past": _composed("clip", I34, -(2**40), 2**40),
    "mean_int_dtype": _composed("mean", I34, 1, dtype=np.int64),
    "mean_float_as_int32": _composed("mean", M34 * 3, dtype=np.int32),
    "mean_bool_dtype": _composed("mean", I34, 0, dtype=np.bool_, keepdims=True),
}


# name -> (dsl function, NumPy function, arguments)
CASES: dict[str, tuple[Any, Any, tuple]] = {
    "var": (dnp.var, np.var, (M34,)),
    "var_axis_ddof": (lambda x: dnp.var(x, 0, ddof=1), lambda x: np.var(x, 0, ddof=1), (M34,)),
    "var_keepdims": (
        lambda x: dnp.var(x, (0, 1), keepdims=True),
        lambda x: np.var(x, (0, 1), keepdims=True),
        (F34,),
    ),
    "var_int": (lambda x: dnp.var(x, 1), lambda x: np.var(x, 1), (I34,)),
    "var_correction": (lambda x: dnp.var(x, 1, correction=1), lambda x: np.var(x, 1, correction=1), (M34,)),
    "std": (
        lambda x: dnp.std(x, axis=-1, ddof=1, keepdims=True),
        lambda x: np.std(x, -1, ddof=1, keepdims=True),
        (F34,),
    ),
    "logaddexp": (dnp.logaddexp, np.logaddexp, (M34, M34[::-1] * 30)),
    "logaddexp_edges": (dnp.logaddexp, np.logaddexp, (EDGE, EDGE[::-1])),
    "logaddexp_same": (dnp.logaddexp, np.logaddexp, (EDGE, EDGE)),
    "logaddexp_int": (dnp.logaddexp, np.logaddexp, (I34, 1)),
    "norm": (dnp.linalg.norm, np.linalg.norm, (M34,)),
    "norm_keepdims": (
        lambda x: dnp.linalg.norm(x, keepdims=True),
        lambda x: np.linalg.norm(x, keepdims=True),
        (F34,),
    ),
    "norm_vec_axis": (lambda x: dnp.linalg.norm(x, axis=1), lambda x: np.linalg.norm(x, axis=1), (M34,)),
    "norm_1": (lambda x: dnp.linalg.norm(x, 1), lambda x: np.linalg.norm(x, 1), (V6,)),
    "norm_inf": (lambda x: dnp.linalg.norm(x, np.inf), lambda x: np.linalg.norm(x, np.inf), (V6,)),
    "norm_-inf": (lambda x: dnp.linalg.norm(x, -np.inf), lambda x: np.linalg.norm(x, -np.inf), (V6,)),
    "norm_0": (lambda x: dnp.linalg.norm(x, 0, axis=0), lambda x: np.linalg.norm(x, 0, axis=0), (I34,)),
    "norm_3": (lambda x: dnp.linalg.norm(x, 3, axis=0), lambda x: np.linalg.norm(x, 3, axis=0), (M34,)),
    "norm_fro": (lambda x: dnp.linalg.norm(x, "fro"), lambda x: np.linalg.norm(x, "fro"), (M34,)),
    "norm_mat_1": (lambda x: dnp.linalg.norm(x, 1), lambda x: np.linalg.norm(x, 1), (M34,)),
    "norm_mat_inf": (lambda x: dnp.linalg.norm(x, np.inf), lambda x: np.linalg.norm(x, np.inf), (M34,)),
    # of nothing: 0 (NumPy's and JAX's initial=0; the max of nothing raised)
    "norm_inf_empty": (lambda x: dnp.linalg.norm(x, np.inf), lambda x: np.linalg.norm(x, np.inf), (V6[:0],)),
    "norm_mat_inf_empty": (
        lambda x: dnp.linalg.norm(x, np.inf),
        lambda x: np.linalg.norm(x, np.inf),
        (M34[:0],),
    ),
    "norm_mat_1_empty_axes": (
        lambda x: dnp.linalg.norm(x, 1, axis=(1, 0)),
        lambda x: np.linalg.norm(x, 1, axis=(1, 0)),
        (M34[:0],),
    ),
    "norm_mat_-1_axes": (
        lambda x: dnp.linalg.norm(x, -1, axis=(1, 0), keepdims=True),
        lambda x: np.linalg.norm(x, -1, axis=(1, 0), keepdims=True),
        (M34,),
    ),
    "split": (lambda x: dnp.split(x, 2, axis=1), lambda x: np.split(x, 2, axis=1), (M34,)),
    "split_indices": (lambda x: dnp.split(x, [1, 5, -2, 2]), lambda x: np.split(x, [1, 5, -2, 2]), (V6,)),
    "array_split": (lambda x: dnp.array_split(x, 4), lambda x: np.array_split(x, 4), (V6,)),
    "pad": (lambda x: dnp.pad(x, 2), lambda x: np.pad(x, 2), (M34,)),
    "pad_pairs_value": (
        lambda x: dnp.pad(x, W, constant_values=-7),
        lambda x: np.pad(x, W, constant_values=-7),
        (I34,),
    ),
    "pad_per_axis_values": (
        lambda x: dnp.pad(x, W, constant_values=((1, 2), (3, 4))),
        lambda x: np.pad(x, W, constant_values=((1, 2), (3, 4))),
        (M34,),
    ),
    "pad_traced_value": (
        lambda x: dnp.pad(x, W, constant_values=x.max()),
        lambda x: np.pad(x, W, constant_values=x.max()),
        (M34,),
    ),
    "pad_reflect_odd": (
        lambda x: dnp.pad(x, W, "reflect", reflect_type="odd"),
        lambda x: np.pad(x, W, "reflect", reflect_type="odd"),
        (M34,),
    ),
    "pad_symmetric_odd_ints": (
        lambda x: dnp.pad(x, ((2, 1), (4, 0)), "symmetric", reflect_type="odd"),
        lambda x: np.pad(x, ((2, 1), (4, 0)), "symmetric", reflect_type="odd"),
        (I34,),
    ),
    "roll_shifts_of_one_axis_add_up": (
        lambda x: dnp.roll(x, (1, 2), axis=0),
        lambda x: np.roll(x, (1, 2), axis=0),
        (M34,),
    ),
    "pad_edge": (lambda x: dnp.pad(x, W, "edge"), lambda x: np.pad(x, W, "edge"), (M34,)),
    "pad_wrap": (lambda x: dnp.pad(x, W, "wrap"), lambda x: np.pad(x, W, "wrap"), (M34,)),
    "pad_reflect": (lambda x: dnp.pad(x, W, "reflect"), lambda x: np.pad(x, W, "reflect"), (M34,)),
    "pad_symmetric": (
        lambda x: dnp.pad(x, ((3, 0), (4, 1)), "symmetric"),
        lambda x: np.pad(x, ((3, 0), (4, 1)), "symmetric"),
        (M34,),
    ),
    # past one period, and reflecting an axis of one: they raised "pad in several calls"
    **{
        f"pad_{mode}_wide": (
            lambda x, mode=mode: dnp.pad(x[:1], ((2, 7), (5, 9)), mode),
            lambda x, mode=mode: np.pad(x[:1], ((2, 7), (5, 9)), mode),
            (M34,),
        )
        for mode in ("reflect", "symmetric", "wrap")
    },
    # reflect_type="odd" past one period: raised (NumPy reflects chunk by chunk about each new edge)
    **{
        f"pad_{mode}_odd_wide_{x.dtype}": (
            lambda x, mode=mode: dnp.pad(x[:, :2], ((5, 11), (9, 4)), mode, reflect_type="odd"),
            lambda x, mode=mode: np.pad(x[:, :2], ((5, 11), (9, 4)), mode, reflect_type="odd"),
            (x,),
        )
        for mode in ("reflect", "symmetric")
        for x in (M34, I34, I34 > 0)
    },
    # bools reflected odd: NumPy stores 2 * edge - x in the bool array (nonzero: True); ints came out
    # (2026-11-28, an outside prober)
    **{
        f"pad_{mode}_odd_bools": (
            lambda x, mode=mode: dnp.pad(x, ((2, 1), (3, 2)), mode, reflect_type="odd"),
            lambda x, mode=mode: np.pad(x, ((2, 1), (3, 2)), mode, reflect_type="odd"),
            (I34 > 0,),
        )
        for mode in ("reflect", "symmetric")
    },
    **COMPOSED,
    "clip_lower": (lambda x: dnp.clip(x, 0.1, None), lambda x: np.clip(x, 0.1, None), (M34,)),
    "clip_upper_kw": (lambda x: dnp.clip(x, max=0), lambda x: np.clip(x, max=0), (I34,)),
    "clip_none": (lambda x: dnp.clip(x, None, None), lambda x: np.clip(x, None, None), (F34,)),
    "clip_promotes": (lambda x: dnp.clip(x, 0.5, 2), lambda x: np.clip(x, 0.5, 2), (I34,)),
    "round": (dnp.round, np.round, (EDGE,)),
    "round_f32": (dnp.round, np.round, (F34 * 10,)),
    "round_decimals": (lambda x: dnp.round(x, 2), lambda x: np.round(x, 2), (M34 * 10,)),
    "round_negative_decimals": (lambda x: dnp.round(x, -1), lambda x: np.round(x, -1), (M34 * 100,)),
    "round_int": (
        lambda x: dnp.round(x, -1),
        lambda x: np.round(x, -1),
        (np.array([15, 25, -15, -25, 14, 5, -5]),),
    ),
    "round_int_positive": (lambda x: dnp.round(x, 1), lambda x: np.round(x, 1), (I34,)),
    "rint": (dnp.rint, np.rint, (EDGE,)),
    "floor_divide": (dnp.floor_divide, np.floor_divide, (M34, 0.3)),
    "mod": (dnp.mod, np.mod, (I34, 4)),
    "isnan": (dnp.isnan, np.isnan, (EDGE,)),
    "isinf": (dnp.isinf, np.isinf, (EDGE,)),
    "isfinite": (dnp.isfinite, np.isfinite, (EDGE,)),
    "isfinite_int": (dnp.isfinite, np.isfinite, (I34,)),
    "nan_to_num": (dnp.nan_to_num, np.nan_to_num, (EDGE,)),
    "argmax": (dnp.argmax, np.argmax, (M34,)),
    "argmax_axis": (lambda x: dnp.argmax(x, axis=1), lambda x: np.argmax(x, axis=1), (TIES,)),
    "argmin_axis0_keepdims": (
        lambda x: dnp.argmin(x, 0, keepdims=True),
        lambda x: np.argmin(x, 0, keepdims=True),
        (TIES,),
    ),
    "argmin_all_keepdims": (
        lambda x: dnp.argmin(x, keepdims=True),
        lambda x: np.argmin(x, keepdims=True),
        (I34,),
    ),
    "argmax_bool": (lambda x: dnp.argmax(x > 0, axis=0), lambda x: np.argmax(x > 0, axis=0), (I34,)),
    "any_all": (
        lambda x: (dnp.any(x > 8), dnp.all(x < 9, axis=0), dnp.any(x[:0])),
        lambda x: (np.any(x > 8), np.all(x < 9, axis=0), np.any(x[:0])),
        (I34,),
    ),
    "cumsum": (dnp.cumsum, np.cumsum, (M34,)),
    "cumsum_axis": (
        lambda x: dnp.cumsum(x, axis=1),
        lambda x: np.cumsum(x, axis=1),
        (rng.standard_normal((3, 37)),),
    ),
    "cumsum_int32": (lambda x: dnp.cumsum(x, 0), lambda x: np.cumsum(x, 0), (I34,)),
    "cumsum_bool_dtype": (
        lambda x: (dnp.cumsum(x > 0, -1), dnp.cumsum(x, 0, dtype=np.float32)),
        lambda x: (np.cumsum(x > 0, -1), np.cumsum(x, 0, dtype=np.float32)),
        (I34,),
    ),
    "cumsum_one": (lambda x: dnp.cumsum(x[:, :1], 1), lambda x: np.cumsum(x[:, :1], 1), (M34,)),
    "cumprod": (lambda x: dnp.cumprod(x, axis=0), lambda x: np.cumprod(x, axis=0), (M34,)),
    "cumprod_int": (dnp.cumprod, np.cumprod, (I34 % 3 + 1,)),
    "prod": (
        lambda x: (dnp.prod(x), dnp.prod(x, axis=-1)),
        lambda x: (np.prod(x), np.prod(x, axis=-1)),
        (M34,),
    ),
    "prod_axes_keepdims": (
        lambda x: (dnp.prod(x[None], axis=(0, 2), keepdims=True), x.prod(0), dnp.prod(x[:0], axis=0)),
        lambda x: (np.prod(x[None], axis=(0, 2), keepdims=True), x.prod(0), np.prod(x[:0], axis=0)),
        (M34,),
    ),
    "prod_int_bool_dtype": (
        lambda x: (dnp.prod(x % 3 + 1, axis=1), dnp.prod(x > 0), dnp.prod(x, 0, dtype=np.float64)),
        lambda x: (np.prod(x % 3 + 1, axis=1), np.prod(x > 0), np.prod(x, 0, dtype=np.float64)),
        (I34,),
    ),
    "count_nonzero": (lambda x: dnp.count_nonzero(x, axis=1), lambda x: np.count_nonzero(x, axis=1), (I34,)),
    "flip": (lambda x: dnp.flip(x, 1), lambda x: np.flip(x, 1), (M34,)),
    "flip_all": (dnp.flip, np.flip, (M34,)),
    "swapaxes": (lambda x: dnp.swapaxes(x, 0, -1), lambda x: np.swapaxes(x, 0, -1), (M34,)),
    "moveaxis": (
        lambda x: dnp.moveaxis(x, [0, 1], [-1, 0]),
        lambda x: np.moveaxis(x, [0, 1], [-1, 0]),
        (rng.random((2, 3, 4)),),
    ),
    "hstack_vstack": (
        lambda x, v: (dnp.hstack([x, x]), dnp.vstack([v, v]), dnp.hstack([v, v])),
        lambda x, v: (np.hstack([x, x]), np.vstack([v, v]), np.hstack([v, v])),
        (M34, V6),
    ),
    "outer": (dnp.outer, np.outer, (V6, M34)),
    "tril_triu": (
        lambda x: (dnp.tril(x), dnp.triu(x, 1), dnp.tril(x, -1)),
        lambda x: (np.tril(x), np.triu(x, 1), np.tril(x, -1)),
        (rng.random((2, 3, 4)),),
    ),
    "eye": (
        lambda: (dnp.eye(3, 4, k=1), dnp.identity(2, np.int32)),
        lambda: (np.eye(3, 4, k=1), np.identity(2, np.int32)),
        (),
    ),
    "empty_concat_pow": (
        lambda x: (dnp.empty((2, 2)), dnp.concat([x, x]), dnp.pow(x, 2), dnp.permute_dims(x, (1, 0))),
        lambda x: (np.zeros((2, 2)), np.concat([x, x]), np.pow(x, 2), np.permute_dims(x, (1, 0))),
        (M34,),
    ),
    "numpy_dispatch": (
        lambda x: (
            np.var(x),
            np.round(x, 1),
            np.linalg.norm(x),
            np.logaddexp(x, 0.0),
            np.split(x, 3)[1],
            np.pad(x, 1),
        ),
        lambda x: (
            np.var(x),
            np.round(x, 1),
            np.linalg.norm(x),
            np.logaddexp(x, 0.0),
            np.split(x, 3)[1],
            np.pad(x, 1),
        ),
        (M34,),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_numpy(name: str) -> None:
    fn, ref, args = CASES[name]
    with np.errstate(all="ignore"):
        want = ref(*args)
    got = interpret_fn(fn, *args)
    rtol = 1e-5 if np.asarray(args[0] if args else 0.0).dtype == np.float32 else 1e-12
    if isinstance(want, list):  # split: a list of arrays
        want, got = tuple(want), tuple(got)
    assert_same(got, want, rtol=rtol)


def test_round_is_half_to_even_and_keeps_signed_zeros_bitwise() -> None:
    x = np.concatenate([EDGE[EDGE != 1e300], np.arange(-8, 8) + 0.5, rng.standard_normal(50) * 4])
    got = dsl.compile(lambda v: (dnp.round(v), dnp.round(v.astype(np.float32))))(x)
    np.testing.assert_array_equal(got[0], np.round(x))
    np.testing.assert_array_equal(np.signbit(got[0]), np.signbit(np.round(x)))
    np.testing.assert_array_equal(got[1], np.round(x.astype(np.float32)))


def test_bool_arange_follows_numpy() -> None:
    """NumPy refuses ``arange(n, dtype=bool)`` past 2 elements: dslc raises too (it returned a
    value)."""
    f = dsl.compile(
        lambda x, n: (dnp.arange(n, dtype=dnp.bool_), dnp.arange(1, 3, dtype=bool)), static_argnums=1
    )
    got = f(np.zeros(1), 2)
    np.testing.assert_array_equal(got[0], np.arange(2, dtype=bool))
    np.testing.assert_array_equal(got[1], np.arange(1, 3, dtype=bool))
    with pytest.raises(TypeError, match=rf"{HERE}:\d+: arange with dtype=bool .* at most 2"):
        f(np.zeros(1), 5)


ARANGE_BOUNDS = [(0.5, 2, 1), (0.5, 4, 1.5), (-0.5, 3, 1), (2.7, 10, 2.2), (0, 2, 0.5), (3, 0, -1)]


@pytest.mark.parametrize(
    "args, dtype",
    [(a, d) for a in ARANGE_BOUNDS for d in (np.int64, np.int32)]
    + [(a, bool) for a in ARANGE_BOUNDS if len(np.arange(*a)) <= 2],  # (NumPy's bool: 2 at most)
)
def test_integer_arange_of_float_bounds_as_numpy(args, dtype) -> None:
    """An integer or bool ``arange`` with a float start or step takes its first two values in the
    dtype and repeats their difference, as NumPy (``arange(0.5, 4, 1.5, dtype=int)`` is [0, 2, 4]; it
    gave [0, 1, 2], and ``arange(0.5, 2, dtype=bool)`` [False, True])."""
    got = dsl.compile(lambda x: dnp.arange(*args, dtype=dtype))(np.zeros(1))
    want = np.arange(*args, dtype=dtype)
    assert got.dtype == want.dtype and np.array_equal(got, want), (got, want)


def test_boolean_mask_read_explains_the_shape_and_suggests_where() -> None:
    f = dsl.compile(lambda x: x[x > 0])
    with pytest.raises(
        dsl.TraceError, match=rf"{HERE}:\d+: x\[mask\] .* not known at trace time.*numpy.where"
    ):
        f(np.arange(4.0))


# ---- gradients against central differences (float64) -------------------------------------------------


def _numeric_grad(f: Any, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2 * eps)
    return g


# name -> (a scalar function of one float64 array, written with dsl.numpy, and with NumPy; its argument)
GRADS: dict[str, tuple[Any, Any, np.ndarray]] = {
    "var": (lambda x: dnp.var(x, axis=0, ddof=1).sum(), lambda x: np.var(x, axis=0, ddof=1).sum(), M34),
    "std": (
        lambda x: (dnp.std(x, axis=1) * np.arange(3)).sum(),
        lambda x: (np.std(x, axis=1) * np.arange(3)).sum(),
        M34,
    ),
    "logaddexp": (
        lambda x: dnp.logaddexp(x, x[::-1] * 2).sum(),
        lambda x: np.logaddexp(x, x[::-1] * 2).sum(),
        V6,
    ),
    "norm": (dnp.linalg.norm, np.linalg.norm, M34),
    "norm_axis": (lambda x: dnp.linalg.norm(x, axis=0).sum(), lambda x: np.linalg.norm(x, axis=0).sum(), M34),
    "norm_3": (lambda x: dnp.linalg.norm(x, 3), lambda x: np.linalg.norm(x, 3), V6),
    "norm_inf_mat": (lambda x: dnp.linalg.norm(x, np.inf), lambda x: np.linalg.norm(x, np.inf), M34),
    "pad": (
        lambda x: (dnp.pad(x, W, constant_values=2.0) ** 2).sum(),
        lambda x: (np.pad(x, W, constant_values=2.0) ** 2).sum(),
        M34,
    ),
    "pad_reflect": (
        lambda x: (dnp.pad(x, W, "reflect") ** 3).sum(),
        lambda x: (np.pad(x, W, "reflect") ** 3).sum(),
        M34,
    ),
    **{
        f"composed_{name}": (lambda x, f=f: (f(x) ** 2).sum(), lambda x, g=g: (g(x) ** 2).sum(), M34)
        for name, f, g in (
            ("tensordot", lambda x: dnp.tensordot(x, x.T, 1), lambda x: np.tensordot(x, x.T, 1)),
            ("kron", lambda x: dnp.kron(x[:2, :2], x), lambda x: np.kron(x[:2, :2], x)),
            ("trace", lambda x: dnp.trace(x @ x.T), lambda x: np.trace(x @ x.T)),
            ("diag", lambda x: dnp.diag(dnp.diagonal(x, 1)), lambda x: np.diag(np.diagonal(x, 1))),
            (
                "tile_roll",
                lambda x: dnp.roll(dnp.tile(x, 2), 3) * np.arange(24).reshape(3, 8),
                lambda x: np.roll(np.tile(x, 2), 3) * np.arange(24).reshape(3, 8),
            ),
            ("repeat", lambda x: dnp.repeat(x, [1, 0, 2], 0), lambda x: np.repeat(x, [1, 0, 2], 0)),
            (
                "nanmean",
                lambda x: dnp.nanmean(dnp.where(x > 1, np.nan, x), 1),
                lambda x: np.nanmean(np.where(x > 1, np.nan, x), 1),
            ),
            ("average", lambda x: dnp.average(x, 1, x[0] ** 2), lambda x: np.average(x, 1, x[0] ** 2)),
            ("sinc", dnp.sinc, np.sinc),
            ("cbrt", lambda x: dnp.cbrt(x * 3), lambda x: np.cbrt(x * 3)),
            ("copysign", lambda x: dnp.copysign(x, x[::-1]), lambda x: np.copysign(x, x[::-1])),
            (
                "cross",
                lambda x: dnp.cross(x[:, :3], x[:, 1:]) * dnp.cross(x[:, 2:], x[:, :3], axis=1)[:, :1],
                lambda x: np.cross(x[:, :3], x[:, 1:]) * np.cross(x[:, 2:], x[:, :3], axis=1)[:, :1],
            ),
        )
    },
    "pad_reflect_wide": (
        lambda x: (dnp.pad(x, ((5, 1), (9, 2)), "reflect") ** 3).sum(),
        lambda x: (np.pad(x, ((5, 1), (9, 2)), "reflect") ** 3).sum(),
        M34,
    ),
    "pad_odd_wide": (
        lambda x: (dnp.pad(x, ((7, 1), (2, 9)), "reflect", reflect_type="odd") ** 3).sum(),
        lambda x: (np.pad(x, ((7, 1), (2, 9)), "reflect", reflect_type="odd") ** 3).sum(),
        M34,
    ),
    "split": (
        lambda x: (dnp.split(x, 2, 1)[0] * dnp.split(x, 2, 1)[1]).sum(),
        lambda x: (np.split(x, 2, 1)[0] * np.split(x, 2, 1)[1]).sum(),
        M34,
    ),
    "clip_one_sided": (
        lambda x: (dnp.clip(x, None, 0.3) ** 2).sum(),
        lambda x: (np.clip(x, None, 0.3) ** 2).sum(),
        M34,
    ),
    "round_is_flat": (lambda x: (dnp.round(x * 3) * x).sum(), lambda x: (np.round(x * 3) * x).sum(), M34),
    "cumsum": (lambda x: (dnp.cumsum(x, 1) ** 2).sum(), lambda x: (np.cumsum(x, 1) ** 2).sum(), M34),
    "cumprod_with_a_zero": (
        lambda x: (dnp.cumprod(x * np.array([1.0, 0.0, 1.0, 1.0, 1.0, 1.0])) * np.arange(6)).sum(),
        lambda x: (np.cumprod(x * np.array([1.0, 0.0, 1.0, 1.0, 1.0, 1.0])) * np.arange(6)).sum(),
        V6,
    ),
    "tril_flip": (
        lambda x: (dnp.tril(x) * dnp.flip(x)).sum(),
        lambda x: (np.tril(x) * np.flip(x)).sum(),
        M34,
    ),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradient_against_finite_differences(name: str) -> None:
    fn, ref, x = GRADS[name]
    got = dsl.grad(fn)(x)
    np.testing.assert_allclose(got, _numeric_grad(ref, x), rtol=1e-6, atol=1e-7)


def test_logaddexp_derivative_at_ties_is_one_half() -> None:
    got = dsl.grad(lambda x, y: dnp.logaddexp(x, y).sum(), argnums=(0, 1))(V6, V6.copy())
    np.testing.assert_allclose(got, (np.full(6, 0.5), np.full(6, 0.5)))


def test_power_derivative_in_the_base_at_a_zero_exponent_is_zero() -> None:
    """``x ** 0`` is 1 for every ``x``: its derivative is 0, also at ``x == 0`` where the chain rule's
    ``0 * 0 ** -1`` is NaN (found by the fuzzer: ``v **= sum(...)`` of a zero sum; PyTorch gives 0,
    JAX too for an integer exponent), at second order too."""
    x, y = np.array([0.0, 2.0, 0.0, 3.0]), np.array([0.0, 0.0, 2.0, 1.5])
    got = dsl.grad(lambda x, y: (x**y).sum())(x, y)
    np.testing.assert_array_equal(got, [0.0, 0.0, 0.0, 1.5 * 3.0**0.5])
    np.testing.assert_array_equal(dsl.hessian(lambda x: (x**0.0).sum())(x[:2]), np.zeros((2, 2)))


def test_remainder_derivative_at_exact_multiples_is_the_slope_on_both_sides() -> None:
    """``x % y`` has slope 1 in ``x`` and ``-floor(x / y)`` in ``y`` on both sides of an exact multiple
    (JAX's, and central differences'): the zero there was a constant (with ``y``'s sign), so both
    derivatives were 0 (found 2026-11-27). Values keep NumPy's signed zeros."""
    x = np.array([2.0, -2.0, 3.0, 2.5, 0.0, -0.0, 7.0, -7.5])
    y = np.array([1.0, 1.0, 1.5, 1.0, 1.0, -2.0, -3.5, 2.0])
    for op in (lambda a, b: a % b, dnp.remainder, lambda a, b: dnp.divmod(a, b)[1]):
        dx, dy = dsl.grad(lambda a, b, op=op: (op(a, b) * np.arange(1, 9)).sum(), argnums=(0, 1))(x, y)
        np.testing.assert_array_equal(dx, np.arange(1, 9))
        np.testing.assert_array_equal(dy, -np.floor(x / y) * np.arange(1, 9))
        got = dsl.compile(op)(x, y)
        np.testing.assert_array_equal(got, x % y)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(x % y))


def test_std_gradient_where_the_values_are_equal_is_zero() -> None:
    """std of one element is zero whatever the element: its derivative is zero (sqrt's chain rule
    gives 0 / 0, NaN, as JAX and PyTorch do; found by the fuzzer). Where several equal values make
    a kink (a minimum of the convex std), zero is the least subgradient, as abs's at zero; elsewhere
    the gradient is sqrt's. Values are NumPy's, NaN and infinity included."""
    grad = dsl.grad(lambda x: (dnp.std(x, axis=-1) * np.arange(1, 4)).sum())
    x = np.array([[2.5], [-1.0], [0.0]])
    np.testing.assert_array_equal(grad(x), np.zeros((3, 1)))
    np.testing.assert_array_equal(grad(np.full((3, 4), 0.75)), np.zeros((3, 4)))
    y = np.array([[1.0, 2.0, 4.0], [0.5, 0.5, 0.5], [3.0, -1.0, 0.0]])
    np.testing.assert_allclose(grad(y)[0], _numeric_grad(lambda v: np.std(v), y[0]), rtol=1e-6)
    np.testing.assert_allclose(grad(y)[2], 3 * _numeric_grad(lambda v: np.std(v), y[2]), rtol=1e-6)
    np.testing.assert_array_equal(grad(y)[1], np.zeros(3))
    z = np.array([[np.nan, 1.0], [np.inf, 1.0], [0.0, 0.0], [1.0, 3.0]])
    got = dsl.compile(
        lambda z: (dnp.std(z, axis=1), dnp.std(z, axis=1, ddof=1), dnp.std(z[:, :1], axis=1, ddof=1))
    )(z)
    with np.errstate(all="ignore"):
        want = (np.std(z, axis=1), np.std(z, axis=1, ddof=1), np.std(z[:, :1], axis=1, ddof=1))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


# ---- the CPU backend: one program of many functions -----------------------------------------------------


BREADTH_ARGS = (M34, EDGE, I34)


def breadth_program(x, e, i):
    return (
        dnp.var(x, 1, ddof=1),
        x.std(),
        dnp.argmax(x, 0),
        dnp.argmin(e),
        dnp.linalg.norm(x, axis=1, keepdims=True),
        dnp.linalg.norm(x, 1),
        dnp.logaddexp(e, e[::-1]),
        dnp.pad(x, W, constant_values=((1, 2), (3, 4))),
        dnp.pad(x, W, "reflect"),
        *dnp.split(x, [1, 3], axis=1),
        dnp.clip(i, min=-2),
        dnp.isnan(e),
        dnp.isinf(e),
        dnp.isfinite(e),
        dnp.round(x * 7, 1),
        dnp.tril(x, 1),
        x.argmax(axis=1, keepdims=True),
        dnp.cumsum(x, 1),
        x.cumprod(0),
    )


def breadth_reference(x, e, i):
    return (
        np.var(x, 1, ddof=1),
        x.std(),
        np.argmax(x, 0),
        np.argmin(e),
        np.linalg.norm(x, axis=1, keepdims=True),
        np.linalg.norm(x, 1),
        np.logaddexp(e, e[::-1]),
        np.pad(x, W, constant_values=((1, 2), (3, 4))),
        np.pad(x, W, "reflect"),
        *np.split(x, [1, 3], axis=1),
        np.clip(i, min=-2),
        np.isnan(e),
        np.isinf(e),
        np.isfinite(e),
        np.round(x * 7, 1),
        np.tril(x, 1),
        x.argmax(axis=1, keepdims=True),
        np.cumsum(x, 1),
        x.cumprod(0),
    )


def test_cpu_backend_agrees_with_numpy() -> None:
    args = BREADTH_ARGS
    with np.errstate(all="ignore"):
        assert_same(dsl.compile(breadth_program)(*args), breadth_reference(*args), rtol=1e-12)


# ---- array methods ------------------------------------------------------------------------------------

P34 = np.abs(M34) + 0.5


def _outside_methods(xp: Any, x: Any) -> tuple:
    """NumPy's methods an outside program reached for, with ``xp`` dsl.numpy or NumPy."""
    return (
        x.repeat(2, axis=0), x.repeat(3), x.take([0, 2], axis=1), x.take([1, 5]), x.diagonal(1),
        x.trace(), x.trace(offset=-1), round(x[1, 1], 1), x.ravel("F"), xp.ravel(x.T, order="A"),
        xp.ravel(x.T, "K"),
    )  # fmt: skip


# name -> (a call of methods on a traced array, the same in NumPy)
METHOD_CASES: dict[str, tuple[Any, Any]] = {
    # (2026-11-27: they were missing; ravel('F') and round(x) raised bare TypeErrors)
    "repeat take diagonal trace round ravel": (
        lambda x: _outside_methods(dnp, x),
        lambda x: _outside_methods(np, x),
    ),
    "exp log sqrt": (
        lambda x: (x.exp(), x.log(), x.sqrt(), x.log1p(), x.expm1()),
        lambda x: (np.exp(x), np.log(x), np.sqrt(x), np.log1p(x), np.expm1(x)),
    ),
    "tanh abs neg sign": (
        lambda x: (x.tanh(), (-x).abs(), x.neg(), x.sign(), x.negative()),
        lambda x: (np.tanh(x), np.abs(-x), -x, np.sign(x), -x),
    ),
    "rsqrt reciprocal square": (
        lambda x: (x.rsqrt(), x.reciprocal(), x.square()),
        lambda x: (1 / np.sqrt(x), 1 / x, x * x),
    ),
    "floor ceil trunc frac round": (
        lambda x: (x.floor(), x.ceil(), x.trunc(), (x * -3).frac(), x.round(1)),
        lambda x: (np.floor(x), np.ceil(x), np.trunc(x), (x * -3) - np.trunc(x * -3), np.round(x, 1)),
    ),
    "scale": (
        lambda x: (x.scale(2.0), x.scale(2.0, bias=1.0), x.scale(3.0, 1.0, bias_after_scale=False)),
        lambda x: (x * 2, x * 2 + 1, (x + 1) * 3),
    ),
    "add sub alpha": (
        lambda x: (x.add(x, alpha=2), x.sub(1.0, alpha=3), x.mul(x), x.div(2)),
        lambda x: (3 * x, x - 3, x * x, x / 2),
    ),
    "pow maximum matmul": (
        lambda x: (x.pow(2), x.maximum(1.0), x.matmul(x.T)),
        lambda x: (x**2, np.maximum(x, 1.0), x @ x.T),
    ),
    "clip clamp": (
        lambda x: (x.clip(1.0), x.clamp(max=1.0), x.clip(min=0.7, max=1.2)),
        lambda x: (np.clip(x, 1.0, None), np.clip(x, None, 1.0), np.clip(x, 0.7, 1.2)),
    ),
    "var std numpy": (
        lambda x: (x.var(), x.std(axis=0), x.var(1, ddof=1, keepdims=True)),
        lambda x: (x.var(), x.std(axis=0), x.var(1, ddof=1, keepdims=True)),
    ),
    "var std torch": (
        lambda x: (x.var(unbiased=True), x.std(dim=1, keepdim=True)),
        lambda x: (x.var(ddof=1), x.std(axis=1, keepdims=True)),
    ),
    "argmax any all": (
        lambda x: (
            x.argmax(),
            x.argmin(axis=0),
            (x > 1).any(axis=1),
            (x > 0).all(),
            x.cumsum(1),
            x.cumprod(),
        ),
        lambda x: (
            x.argmax(),
            x.argmin(axis=0),
            (x > 1).any(axis=1),
            (x > 0).all(),
            x.cumsum(1),
            x.cumprod(),
        ),
    ),
    "unsqueeze squeeze": (
        lambda x: (x.unsqueeze(0), x.unsqueeze(-1).squeeze(-1), x[None].squeeze()),
        lambda x: (x[None], x, x),
    ),
    "flatten": (
        lambda x: (x.flatten(), x.flatten("F"), x[None].flatten(1), x.reshape(1, 3, 4).flatten(0, 1)),
        lambda x: (x.flatten(), x.flatten("F"), x.reshape(1, 12), x.reshape(3, 4)),
    ),
    "permute t expand flip": (
        lambda x: (x.permute(1, 0), x.t(), x[:1].expand(3, -1), x.flip(0), x.swapaxes(0, 1)),
        lambda x: (x.T, x.T, np.broadcast_to(x[:1], (3, 4)), x[::-1], x.T),
    ),
    "comparisons logical": (
        lambda x: (
            x.eq(x),
            x.lt(1.0),
            x.greater_than(1.0),
            (x > 1).logical_not(),
            (x > 1).logical_and(x < 2),
        ),
        lambda x: (x == x, x < 1.0, x > 1.0, ~(x > 1), (x > 1) & (x < 2)),
    ),
    "isnan nan_to_num norm": (
        lambda x: (x.isnan(), x.isfinite(), x.nan_to_num(), x.norm()),
        lambda x: (np.isnan(x), np.isfinite(x), x, np.linalg.norm(x)),
    ),
    "tril softmax": (lambda x: (x.tril(), x.triu(1)), lambda x: (np.tril(x), np.triu(x, 1))),
}


@pytest.mark.parametrize("name", sorted(METHOD_CASES))
def test_method_forms_against_numpy(name: str) -> None:
    fn, ref = METHOD_CASES[name]
    assert_same(interpret_fn(fn, P34), ref(P34), rtol=1e-12)


# ---- in-place methods: NumPy's eager semantics through a strided view -------------------------------------

B = rng.standard_normal((2, 2)) + 3.0  # broadcasts against the (2, 2) view y[1:, ::2]

# name -> (method, arguments, keyword arguments, the view's new value in NumPy)
INPLACE_CASES: dict[str, tuple[str, tuple, dict, Any]] = {
    "add_ alpha": ("add_", (B,), {"alpha": 2}, lambda v: v + 2 * B),
    "sub_ alpha": ("sub_", (B,), {"alpha": 0.5}, lambda v: v - 0.5 * B),
    "subtract_": ("subtract_", (B,), {}, lambda v: v - B),
    "multiply_": ("multiply_", (B,), {}, lambda v: v * B),
    "divide_": ("divide_", (B,), {}, lambda v: v / B),
    "floor_divide_": ("floor_divide_", (0.3,), {}, lambda v: v // 0.3),
    "remainder_": ("remainder_", (0.3,), {}, lambda v: v % 0.3),
    "rsqrt_": ("rsqrt_", (), {}, lambda v: 1 / np.sqrt(v)),
    "reciprocal_": ("reciprocal_", (), {}, lambda v: 1 / v),
    "square_": ("square_", (), {}, np.square),
    "floor_": ("floor_", (), {}, np.floor),
    "ceil_": ("ceil_", (), {}, np.ceil),
    "trunc_": ("trunc_", (), {}, np.trunc),
    "cumsum_": ("cumsum_", (1,), {}, lambda v: np.cumsum(v, 1)),
    "round_": ("round_", (), {}, np.round),
    "round_ decimals": ("round_", (1,), {}, lambda v: np.round(v, 1)),
    "frac_": ("frac_", (), {}, lambda v: v - np.trunc(v)),
    "exp_": ("exp_", (), {}, np.exp),
    "log1p_": ("log1p_", (), {}, np.log1p),
    "sign_": ("sign_", (), {}, np.sign),
    "clamp_": ("clamp_", (1.0, 2.0), {}, lambda v: np.clip(v, 1.0, 2.0)),
    "clip_ min": ("clip_", (), {"min": 1.2}, lambda v: np.clip(v, 1.2, None)),
    "clip_ max": ("clip_", (), {"max": 1.2}, lambda v: np.clip(v, None, 1.2)),
    "clamp_ max": ("clamp_", (None, 1.0), {}, lambda v: np.minimum(v, 1.0)),
    "scale_": ("scale_", (2.0,), {"bias": 1.0, "bias_after_scale": False}, lambda v: (v + 1) * 2),
    "tril_": ("tril_", (), {}, np.tril),
    "nan_to_num_": ("nan_to_num_", (), {}, np.nan_to_num),
    "gt_": ("gt_", (1.5,), {}, lambda v: (v > 1.5).astype(v.dtype)),
    "less_equal_": ("less_equal_", (1.5,), {}, lambda v: (v <= 1.5).astype(v.dtype)),
    "logical_not_": ("logical_not_", (), {}, lambda v: np.logical_not(v).astype(v.dtype)),
}


@pytest.mark.parametrize("name", sorted(INPLACE_CASES))
def test_inplace_method_through_a_view_matches_numpy(name: str) -> None:
    method, args, kwargs, ref = INPLACE_CASES[name]

    def program(x):
        y = x * 1.0
        v = y[1:, ::2]
        assert getattr(v, method)(*args, **kwargs) is v
        return y, v, v * 1.0  # the view, and a value read after the write

    y = P34 * 1.0
    v = y[1:, ::2]
    with np.errstate(all="ignore"):
        v[...] = ref(v.copy())
    assert_same(interpret_fn(program, P34), (y, v, v), rtol=1e-12)


def test_inplace_methods_on_the_cpu_write_the_caller_array_and_are_reported() -> None:
    def step(p, g):
        p.sub_(g, alpha=0.1)
        p[0].clip_(max=0.0)
        p[1:].multiply_(2.0)
        p.round_(3)
        return p.sum()

    p, g = M34.copy(), P34.copy()
    want = M34 - 0.1 * P34
    want[0] = np.minimum(want[0], 0.0)
    want[1:] *= 2.0
    want = np.round(want, 3)
    compiled = dsl.compile(step)
    np.testing.assert_allclose(compiled(p, g), want.sum())
    np.testing.assert_array_equal(p, want)
    report = compiled.lower(M34.copy(), g).explain_inplace()
    for request in ("sub_", "clip_", "multiply_", "round_"):
        assert request in report


def test_shape_changing_inplace_methods_rebind_the_shape_and_keep_the_storage() -> None:
    def program(x):
        y = x * 1.0
        v = y[1:]  # rows 1 and 2: a view of y
        assert v.reshape_((4, 2)) is v and v.shape == (4, 2)
        v[0] = 100.0  # reaches y[1, :2]
        assert v.unsqueeze_(0) is v and v.shape == (1, 4, 2)
        assert v.squeeze_() is v and v.shape == (4, 2)
        assert v.flatten_() is v and v.shape == (8,)
        v += 1.0
        w = y[:1]
        w.transpose_((1, 0))
        w[-1] = -5.0
        return y, v, w

    y = M34 * 1.0
    v = y[1:]
    v.shape = (4, 2)
    v[0] = 100.0
    v.shape = (8,)
    v += 1.0
    w = y[:1].T
    w[-1] = -5.0
    assert_same(interpret_fn(program, M34), (y, v, w), rtol=1e-12)
    assert_same(dsl.compile(program)(M34), (y, v, w), rtol=1e-12)


@pytest.mark.parametrize(
    "kwargs",
    [{"start_dim": 1}, {"start_axis": 1}, {"start_dim": 0, "end_dim": 1}, {"start_axis": 0, "stop_axis": -2}],
)
def test_flatten_takes_pytorch_and_paddle_keywords(kwargs: dict[str, int]) -> None:
    """PyTorch's ``start_dim``/``end_dim`` and Paddle's ``start_axis``/``stop_axis``, in place and
    not (PyTorch's raised a TypeError naming an internal function)."""
    x = np.arange(24.0).reshape(2, 3, 4)
    start = kwargs.get("start_dim", kwargs.get("start_axis", 0))
    stop = kwargs.get("end_dim", kwargs.get("stop_axis", -1)) % 3
    want = x.reshape(x.shape[:start] + (-1,) + x.shape[stop + 1 :])

    def program(x):
        y = x * 1.0
        assert y.flatten_(**kwargs) is y
        return y, x.flatten(**kwargs)

    assert_same(dsl.compile(program)(x), (want, want), rtol=0)


@pytest.mark.parametrize(
    "kwargs", [{"start_dim": 0, "stop_axis": 1}, {"start": 1}, {"start_axis": 1, "end_axis": 2}]
)
def test_flatten_with_unknown_or_mixed_keywords_names_both_spellings(kwargs: dict[str, int]) -> None:
    for method in ("flatten", "flatten_"):
        f = dsl.compile(lambda x, method=method: getattr(x * 1.0, method)(**kwargs))
        with pytest.raises(TypeError, match=rf"{HERE}:\d+: flatten\(.*start_axis=, stop_axis=.*start_dim="):
            f(M34)


def test_reshape_inplace_of_a_transposed_array_raises_as_numpy_shape_assignment() -> None:
    f = dsl.compile(lambda x: (x * 1.0).T.reshape_(12))
    with pytest.raises(dsl.ShapeError, match=rf"{HERE}:\d+: reshape_: incompatible shape for in-place"):
        f(M34)


# ---- errors that teach ------------------------------------------------------------------------------------


def test_a_missing_dsl_numpy_function_names_it_and_the_alternative() -> None:
    with pytest.raises(AttributeError, match=r"dsl.numpy has no function 'unique': its result's shape"):
        dnp.unique  # noqa: B018
    with pytest.raises(AttributeError, match=r"'argmaxx'; did you mean dsl.numpy.argmax"):
        dnp.argmaxx  # noqa: B018
    with pytest.raises(
        AttributeError, match=r"dsl.numpy.linalg has no function 'svd': matrix factorizations"
    ):
        dnp.linalg.svd  # noqa: B018
    assert not hasattr(dnp, "sort") and hasattr(dnp, "var") and hasattr(dnp, "tensordot")


@pytest.mark.parametrize(
    ("call", "phrase"),
    [
        (lambda x: np.median(x), r"numpy.median is not supported on traced arrays: .*'median': sorting"),
        (lambda x: np.sort(x), r"numpy.sort .*'sort': sorting is not supported"),
        (lambda x: np.linalg.svd(x), r"numpy.svd .*dsl.numpy.linalg has no function 'svd'"),
        (lambda x: np.nonzero(x), r"numpy.nonzero .*shape depends on the values.*where"),
        (
            lambda x: np.nanargmax(x),
            r"numpy.nanargmax .*did you mean dsl.numpy.nanmax",
        ),  # (fabs is there now)
        (lambda x: np.maximum.accumulate(x), r"numpy.maximum.accumulate\(...\) is not supported.*cumsum"),
    ],
)
def test_numpy_functions_on_traced_arrays_name_the_alternative(call: Any, phrase: str) -> None:
    with pytest.raises(dsl.TraceError, match=rf"{HERE}:\d+: {phrase}"):
        dsl.compile(call)(M34)


@pytest.mark.parametrize(
    ("call", "error", "phrase"),
    [
        (lambda x: dnp.argmax(x[:0], axis=0), dsl.ShapeError, "attempt to get argmax of an empty sequence"),
        (lambda x: dnp.pad(x, 1, "median"), dsl.ShapeError, "mode 'median' is not supported"),
        (lambda x: dnp.pad(x, -1), dsl.ShapeError, "negative values"),
        (lambda x: dnp.linalg.norm(x, 2), dsl.ShapeError, "needs singular values"),
        (lambda x: dnp.split(x, 5, axis=1), dsl.ShapeError, "does not result in an equal division"),
        (lambda x: x.astype(np.int32).rsqrt_(), dsl.ShapeError, "float64 result into a int32"),
        # found by an outside program (2026-11-27): a silent answer, or NumPy's bare ValueError
        (lambda x: dnp.moveaxis(x, (0, 1), (0, 0)), dsl.ShapeError, "repeated axis in `destination`"),
        (lambda x: dnp.tile(x, -1), dsl.ShapeError, "negative dimensions are not allowed"),
        (lambda x: dnp.repeat(x, [1, 2], axis=0), dsl.ShapeError, "one count per element of axis 0"),
        (lambda x: dnp.roll(x, (1, 2), axis=(0, 1, 1)), dsl.ShapeError, "do not broadcast together"),
        # found by an outside program (2026-11-27): bare TypeErrors and OverflowErrors with no line
        (lambda x: dnp.where(x > 0), dsl.TraceError, "where(condition) with one argument is nonzero"),
        (lambda x: dnp.where(x > 0, x), dsl.ShapeError, "either both or neither of x and y"),
        (lambda x: dnp.zeros(2, dtype=np.int8), dsl.ShapeError, "unsupported dtype int8"),
        (lambda x: dnp.arange(3, dtype="int16"), dsl.ShapeError, "unsupported dtype int16"),
        (lambda x: dnp.int32(2**40) + x, OverflowError, "out of bounds for int32"),
        (lambda x: dnp.ravel(x, "Q"), dsl.ShapeError, "order must be one of"),
    ],
)
def test_clear_errors(call: Any, error: type[Exception], phrase: str) -> None:
    with pytest.raises(error, match=rf"{HERE}:\d+: .*{re.escape(phrase)}"):
        dsl.compile(call)(M34)


def test_composed_functions_compiled_on_the_cpu() -> None:
    """Every ``COMPOSED`` case in one compiled program (the table above runs the interpreter)."""
    names = sorted(COMPOSED)
    args = [a for name in names for a in COMPOSED[name][2]]

    def program(*flat: Any) -> tuple[Any, ...]:
        it = iter(flat)
        return tuple(COMPOSED[n][0](*[next(it) for _ in COMPOSED[n][2]]) for n in names)

    with np.errstate(all="ignore"):
        want = tuple(COMPOSED[n][1](*COMPOSED[n][2]) for n in names)
    got = dsl.compile(program)(*args)
    for name, g, w in zip(names, got, want, strict=True):
        assert_same(g, w, rtol=1e-5 if name.endswith("f32") or name == "float_power" else 1e-12)


def test_div_rounding_modes_as_pytorch() -> None:
    """PyTorch's ``div(y, rounding_mode=...)``: ``"trunc"`` toward zero, ``"floor"`` as ``//`` (the
    keyword raised a TypeError naming no line)."""
    x = np.array([7.0, -7.0, 7.5, -7.5, 0.0, -0.0, 3.0])
    y = np.array([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 0.0])
    i, j = np.array([7, -7, 7, -7, 0, 9]), np.array([2, 2, -2, -2, 3, -1])
    with np.errstate(all="ignore"):
        cases = {"trunc": (np.trunc(x / y), np.array([3, -3, -3, 3, 0, -9])), "floor": (x // y, i // j)}
    for mode, (floats, ints) in cases.items():
        got = dsl.compile(lambda a, b, mode=mode: a.div(b, rounding_mode=mode))(x, y)
        assert_same(got, floats)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(floats))

        def in_place(a, b, mode=mode):
            a.div_(b, rounding_mode=mode)
            return a

        a = i.copy()
        dsl.compile(in_place, static_argnames=("mode",))(a, j)
        np.testing.assert_array_equal(a, ints)
    with pytest.raises(dsl.DSLError, match=rf"{HERE}:\d+: div: rounding_mode must be"):
        dsl.compile(lambda a: a.div(2, rounding_mode="round"))(x)


BOOL_INDICES = [True, False, (0, True), (Ellipsis, False), (slice(None), True, 1), (True, False)]
BOOL_INDICES += [
    (0, slice(None), True),
    (True, slice(None), 0),
    (slice(None), 0, True),
    (np.True_, Ellipsis, 1),
]


@pytest.mark.parametrize("index", BOOL_INDICES, ids=str)
def test_python_bool_indices_as_numpy(index: Any) -> None:
    """NumPy reads a Python bool as a 0-d mask: one new axis of length 1 (all True) or 0 (a False)
    where the first stands, or first when the integers beside it are not adjacent (advanced
    indexing's rule); the read is a copy, a write goes through."""

    def program(x: Any) -> Any:
        y = x[index]
        x[index] = -1.0
        return y, x * 1.0

    want_x = T234.copy()
    want = program(want_x)
    got_x = T234.copy()
    got = dsl.compile(program)(got_x)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(got_x, want_x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cumsum_keeps_the_sign_of_negative_zero(dtype: type) -> None:
    """A running sum starts from -0.0, the identity of IEEE addition: ``cumsum([-0.0, 1.0])`` is
    ``[-0.0, 1.0]`` as NumPy's and JAX's (it started from 0.0: ``[0.0, 1.0]``)."""
    x = np.array([[-0.0, 1.0, -0.0], [-0.0, -0.0, 0.0]], dtype)
    for axis in (0, 1):
        got, want = dsl.compile(lambda v, a=axis: dnp.cumsum(v, axis=a))(x), np.cumsum(x, axis=axis)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_softmax_of_a_row_holding_inf_is_nan_as_jax() -> None:
    """``softmax`` and ``log_softmax`` shift by the row's max itself, as JAX's: a row holding ``inf``
    is NaN throughout (it was NaN at the ``inf`` and 0 elsewhere, a row not summing to 1); rows of
    finite values, ``-inf`` entries and all ``-inf`` rows as before."""
    import dsl.nn

    x = np.array(
        [[np.inf, 0.0, 1.0], [np.inf, np.inf, 1.0], [-np.inf, 0.0, 1.0], [-np.inf, -np.inf, -np.inf]]
    )
    with np.errstate(all="ignore"):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        want = e / e.sum(axis=1, keepdims=True)
        want_log = x - x.max(axis=1, keepdims=True) - np.log(e.sum(axis=1, keepdims=True))
    got, got_log = dsl.compile(lambda v: (dsl.nn.softmax(v), dsl.nn.log_softmax(v)))(x)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_log, want_log)
    assert np.isnan(got[:2]).all() and np.isnan(got[3]).all() and np.isfinite(got[2]).all()


def test_max_norms_share_a_tie_at_zero_with_the_initial_zero_as_jax() -> None:
    """``norm(x, inf)`` is ``max(abs(x), initial=0)`` in NumPy and JAX: at ``x == 0`` JAX's gradient
    shares the tie with that initial value (1/6 each of three zeros; dslc gave 1/3). Numbers from
    ``jax.grad(lambda a: jnp.linalg.norm(a, jnp.inf))`` and the matrix ``1``/``inf`` norms (x64)."""
    cases = [
        (np.inf, np.zeros(3), np.full(3, 1 / 6)),
        (np.inf, np.array([1.0, -3.0, 3.0]), np.array([0.0, -0.5, 0.5])),
        (1, np.zeros((2, 2)), np.full((2, 2), 0.25)),
        (np.inf, np.zeros((2, 2)), np.full((2, 2), 0.25)),
    ]
    for order, x, want in cases:
        got = dsl.grad(lambda a, o=order: dnp.linalg.norm(a, o))(x)
        np.testing.assert_allclose(got, want, rtol=1e-15, err_msg=str((order, x)))
