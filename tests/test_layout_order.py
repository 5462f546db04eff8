"""A computed array is laid out as NumPy lays it out (order K), so later reshapes are views or copies
exactly where NumPy's are: ``exp`` of a Fortran-ordered argument is Fortran-ordered, and a write
through its ``reshape(-1)`` (a copy) does not reach it. Checked two ways: ``dsl.layout``'s rules
against the strides NumPy gives random layouts, and programs run eagerly by NumPy against the same
programs compiled, results and arguments alike, for every op family on every argument layout.
"""

from __future__ import annotations

import itertools

import helpers
import numpy as np
import pytest
from helpers import assert_same, interpret_fn, python_kernels

import dsl
import dsl.numpy as dnp
from dsl import layout

# ---- the fuzzer's finding (benchmarks/results/fuzz_campaign.md, seed 12) ---------------------------


def fuzz_seed_12(v0, mul_):
    v1 = np.exp(v0)
    v2 = v1.reshape((2, 8))  # a copy in NumPy: v1 is Fortran-ordered like v0
    v3 = v2[1::-1, 0::-1]
    mul_(v3, v3)
    v7 = v3[...]
    v8 = v1 @ v0
    return v7, v8


@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "no_inplace"])
def test_fuzzer_finding_fortran_argument_reshape_after_exp(inplace) -> None:
    def make():
        return np.asfortranarray(np.linspace(-1.0, 1.0, 16).reshape(4, 2, 2))

    x_np, x_dsl = make(), make()
    want = fuzz_seed_12(x_np, lambda a, b: np.multiply(a, b, out=a))
    with python_kernels():
        got = dsl.compile(lambda v0: fuzz_seed_12(v0, lambda a, b: a.mul_(b)), inplace=inplace)(x_dsl)
    assert_same(got, want)
    np.testing.assert_array_equal(x_dsl, x_np)


# ---- the rules against NumPy's strides -------------------------------------------------------------


def _random_layout(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """An array of ``shape``: axes permuted, some reversed or every other element, C or F base."""
    nd = len(shape)
    perm = [int(p) for p in rng.permutation(nd)]
    steps = [int(rng.choice([1, 1, 2, -1, -2])) for _ in range(nd)]
    base = np.zeros([shape[p] * abs(steps[p]) for p in perm])
    if nd and rng.random() < 0.3:
        base = np.asfortranarray(base)
    x = base.transpose([int(p) for p in np.argsort(perm)]) if nd else base
    return x[tuple(slice(None, None, s) for s in steps)]


def _random_operand(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """An operand broadcasting to ``shape``: fewer axes or unit axes now and then, or a broadcast view."""
    nd = len(shape)
    k = int(rng.integers(0, nd + 1)) if rng.random() < 0.3 else nd
    sub = tuple(1 if rng.random() < 0.2 else d for d in shape[nd - k :])
    x = _random_layout(rng, sub)
    return np.broadcast_to(x, shape) if rng.random() < 0.15 else x


def _layout_of(strides: tuple[int, ...], shape: tuple[int, ...], itemsize: int) -> tuple[int | None, ...]:
    """Strides in elements, unit axes left out (NumPy's reshapes and contiguity ignore them)."""
    return tuple(s // itemsize if n != 1 else None for s, n in zip(strides, shape))


def _assert_laid_out_as(shadow: np.ndarray, want: np.ndarray, what: object) -> None:
    assert shadow.shape == want.shape
    if want.size:
        got_layout = _layout_of(shadow.strides, shadow.shape, 1)
        assert got_layout == _layout_of(want.strides, want.shape, want.itemsize), what


def _reduced_order(x: np.ndarray, axes: tuple[int, ...]) -> layout.Order:
    kept = [a for a in layout.ufunc_order([x]) if a not in axes]
    rank = {a: i for i, a in enumerate(sorted(kept))}
    return tuple(rank[a] for a in kept)


@pytest.mark.parametrize("seed", range(4))
def test_layout_rules_give_numpys_strides(seed) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(300):
        shape = tuple(int(rng.choice([1, 2, 3, 4])) for _ in range(int(rng.integers(0, 5))))
        ops = [_random_operand(rng, shape) for _ in range(int(rng.integers(1, 4)))]
        # ufuncs: one operand (negative), two (add), three (where: its condition laid out as its input)
        if len(ops) == 1:
            want = np.negative(ops[0])
            operands = ops
        elif len(ops) == 2:
            want = np.add(*ops)
            operands = ops
        else:
            want = np.where(ops[0] > 1, ops[1], ops[2])
            operands = [layout.shadow(ops[0].shape, layout.ufunc_order([ops[0]]))] + ops[1:]
        operands = [np.broadcast_to(o, want.shape) for o in operands]
        shadow = layout.shadow(want.shape, layout.ufunc_order(operands))
        _assert_laid_out_as(shadow, want, ("ufunc", [(o.shape, o.strides) for o in ops]))
        # reductions over every set of axes, and astype
        x = _random_layout(rng, shape)
        for axes in itertools.chain.from_iterable(
            itertools.combinations(range(len(shape)), r) for r in range(len(shape) + 1)
        ):
            want = np.add.reduce(x, axis=axes)
            shadow = layout.shadow(want.shape, _reduced_order(x, axes))
            _assert_laid_out_as(shadow, want, ("reduce", axes, x.shape, x.strides))
        for o in ops:
            shadow = layout.shadow(o.shape, layout.like_order(o))
            _assert_laid_out_as(shadow, o.astype(np.float32), ("astype", o.shape, o.strides))
        # concatenate along each axis
        parts = [_random_layout(rng, shape) for _ in range(len(ops))]
        for axis in range(len(shape)):
            want = np.concatenate(parts, axis=axis)
            shadow = layout.shadow(want.shape, layout.concatenate_order(parts))
            _assert_laid_out_as(shadow, want, ("concatenate", axis, [(p.shape, p.strides) for p in parts]))


# ---- every op family on every argument layout, compiled against NumPy --------------------------------


def _base(shape: tuple[int, ...]) -> np.ndarray:
    return np.arange(float(np.prod(shape))).reshape(shape) * 0.25 - 2.0


def _c(shape):
    return _base(shape)


def _fortran(shape):
    return np.asfortranarray(_base(shape))


def _transposed(shape):
    """Middle axis outermost, first innermost (neither C nor F)."""
    return _base((shape[1], shape[2], shape[0])).transpose(2, 0, 1) if len(shape) == 3 else _fortran(shape)


def _reversed(shape):
    return _base(shape)[::-1, ..., ::-1]


def _fortran_reversed(shape):
    return np.asfortranarray(_base(shape))[::-1]


def _every_other(shape):
    return _base(shape[:-1] + (2 * shape[-1],))[..., ::2]


LAYOUTS = [_c, _fortran, _transposed, _reversed, _fortran_reversed, _every_other]


def _shadow_of(y):
    _shadow_of.seen = y._shadow  # type: ignore[attr-defined]
    return y


def trace(fn, x):
    """Traces ``fn(x)``; the last element is the shadow ``_shadow_of`` saw."""
    return (*helpers.trace(fn, x), _shadow_of.seen)  # type: ignore[attr-defined]


def _probe(y):
    """Writes through reshapes of ``y`` (all of it, its transpose, each pair of adjacent axes merged):
    each is a view in NumPy for some layouts and a copy for the others, so the values returned say
    which were views."""
    views = [y.reshape(-1), y.T.reshape(-1)]
    views += [y.reshape(y.shape[:i] + (-1,) + y.shape[i + 2 :]) for i in range(y.ndim - 1)]
    for k, v in enumerate(views):
        first = v[(0,) * v.ndim]
        v[(0,) * v.ndim] = np.logical_not(first) if y.dtype == np.bool_ else first * 3 + (k + 1)
    return [y] + views


# Each takes the argument x, of shape (2, 3, 4), and returns the array whose layout is probed.
FAMILIES = {
    "exp": lambda x: np.exp(x),
    "negative": lambda x: -x,
    "positive": lambda x: +x,
    "abs": lambda x: abs(x),
    "floor": lambda x: np.floor(x),
    "square": lambda x: np.square(x),
    "floor_divide": lambda x: x // 0.75,
    "plus_scalar": lambda x: x + 1.0,
    "times_c_order": lambda x: x * _c(x.shape),
    "times_fortran": lambda x: x * _fortran(x.shape),
    "plus_itself": lambda x: x + x,
    "plus_row": lambda x: x + np.arange(4.0),
    "plus_column": lambda x: x - np.arange(3.0).reshape(3, 1),
    "maximum_transposed": lambda x: np.maximum(x, _transposed(x.shape)),
    "compare": lambda x: x > 0.0,
    "logical_and": lambda x: np.logical_and(x > -1.0, x < 1.0),
    "where_values": lambda x: np.where(x > 0.0, x, 0.0),
    "where_scalars": lambda x: np.where(x > 0.0, 1.0, 2.0),
    "clip": lambda x: np.clip(x, -1.0, 1.0),
    "astype_float32": lambda x: x.astype(np.float32),
    "astype_int32": lambda x: (x * 4).astype(np.int32),
    "astype_of_broadcast": lambda x: np.broadcast_to(x[:, :1], x.shape).astype(np.float32),
    "copy": lambda x: x.copy(),
    "sum_axis0": lambda x: x.sum(axis=0),
    "sum_axis1_keepdims": lambda x: x.sum(axis=1, keepdims=True),
    "mean_axis2": lambda x: x.mean(axis=2),
    "max_axis1": lambda x: x.max(axis=1),
    "concatenate_axis0": lambda x: np.concatenate([x, x], axis=0),
    "concatenate_axis2": lambda x: np.concatenate([x, x + 1.0], axis=2),
    "stack_axis1": lambda x: np.stack([x, x], axis=1),
    "batched_matmul": lambda x: x[:, :, None, :] @ np.ones((4, 2)),
    "dot": lambda x: np.dot(x[:, :, None, :], np.ones((4, 2))),
}


@pytest.mark.parametrize("make", LAYOUTS, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("family", FAMILIES)
def test_reshape_after_op_as_numpy(family, make) -> None:
    """The traced result's shadow has NumPy's strides, and writes through its reshapes reach it
    exactly as in NumPy (traced, optimized and run by the reference interpreter)."""
    op = FAMILIES[family]
    x_np, x_dsl = make((2, 3, 4)), make((2, 3, 4))
    _assert_laid_out_as(trace(lambda x: _shadow_of(op(x)), x_dsl)[3], op(x_np), family)
    want = _probe(op(x_np))
    got = interpret_fn(lambda x: _probe(op(x)), x_dsl)
    assert_same(got, want)
    np.testing.assert_array_equal(x_dsl, x_np)


@pytest.mark.parametrize("family", ["exp", "plus_row", "sum_axis1_keepdims", "astype_int32", "stack_axis1"])
def test_reshape_after_op_compiled(family) -> None:
    op = FAMILIES[family]
    x_np, x_dsl = _fortran((2, 3, 4)), _fortran((2, 3, 4))
    want = _probe(op(x_np))
    with python_kernels():
        got = dsl.compile(lambda x: _probe(op(x)))(x_dsl)
    assert_same(got, want)
    np.testing.assert_array_equal(x_dsl, x_np)


def test_ravel_and_inplace_after_exp_of_fortran_argument() -> None:
    """ravel of an F-ordered result copies; a write into the argument's own exp does not come back."""

    def f(x):
        y = dnp.exp(x)
        r = y.ravel()
        r *= 2.0
        y.reshape(-1)[0] = 5.0
        return y, r

    x = _fortran((2, 3, 4))
    y = np.exp(x)
    r = y.ravel()
    r *= 2.0
    y.reshape(-1)[0] = 5.0
    with python_kernels():
        assert_same(dsl.compile(f)(x.copy(order="F")), (y, r))
