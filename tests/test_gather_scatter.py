"""Indexing with integer arrays and writing through it (``dsl/gather.py`` on the ``gather``,
``scatter`` and ``scatter_add`` primitives of ``compiler/prims/gather.py``): reads against NumPy,
writes against NumPy and JAX's ``.at[]``, gradients against JAX in float64, repeated, negative and
out-of-range indices (wrapped once; then reads clamp and writes drop, as JAX's), in-place on and off,
a scatter into a dying array computed in place, the errors, and two small training programs
(integer-label cross-entropy and an embedding lookup).

The primitives themselves are in the registry tables (``tests/test_prims_registry.py``,
``tests/test_vjp_rules.py``, PTX and the CUDA simulator); whole programs on the CUDA backend are in
``tests/cuda_sim/sim_gather_scatter.py``.
"""

from __future__ import annotations

import functools
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import central_differences

import dsl
import dsl.numpy as dnp

jax.config.update("jax_enable_x64", True)

HERE = re.escape(__file__.rsplit("/", 1)[-1])

RNG = np.random.default_rng(0)
X = RNG.standard_normal((5, 4))
IDX = np.array([3, 0, -1, 3, 9, -7])  # repeated, negative, past both ends
UNIQUE = np.array([3, 0, -1])


def clamp(i, n: int) -> np.ndarray:
    """How dslc reads an index: wrapped once if negative (NumPy), clamped into the axis (JAX)."""
    i = np.asarray(i)
    return np.clip(np.where(i < 0, i + n, i), 0, n - 1)


def landed(i, n: int) -> list[tuple[int, int]]:
    """How dslc writes at an index: ``(update, row)`` for each update that lands, the index wrapped
    once if negative (NumPy); one still outside the axis is dropped (JAX's ``.at[]``)."""
    i = np.asarray(i).reshape(-1)
    wrapped = np.where(i < 0, i + n, i)
    return [(k, int(r)) for k, r in enumerate(wrapped) if 0 <= r < n]


def close(got, want, rtol: float = 1e-12, atol: float = 1e-14) -> None:
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves, strict=True):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)


INPLACE = pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "no-inplace"])

# ---- reads ------------------------------------------------------------------------------------


def reads(x, i, j):
    return (
        x[i],
        x[:, j],
        x[i, 1:3],
        x[i, j[:6]],
        x[2, j],
        x[np.array([[1, 2], [0, 4]])],
        dnp.take(x, j, axis=1),
        dnp.take(x, i),
        dnp.take_along_axis(x, dnp.argmax(x, axis=1)[:, None], axis=1),
    )


@INPLACE
def test_reads_against_numpy(inplace: bool) -> None:
    j = np.array([1, -1, 3, 7, 0, 2])
    got = dsl.compile(reads, inplace=inplace)(X, IDX, j)
    ci, cj = clamp(IDX, 5), clamp(j, 4)
    want = (
        X[ci],
        X[:, cj],
        X[ci, 1:3],
        X[ci, cj],
        X[2, cj],
        X[np.array([[1, 2], [0, 4]])],
        X[:, cj],
        X.ravel()[clamp(IDX, 20)],
        np.take_along_axis(X, np.argmax(X, axis=1)[:, None], axis=1),
    )
    close(got, want)


def test_reads_match_jax_numpy_for_in_range_indices() -> None:
    i = np.array([3, 0, -1, 3])
    close(dsl.compile(lambda x, i: (x[i], x[i, i]))(X, i), (jnp.asarray(X)[i], jnp.asarray(X)[i, i]))


def test_take_modes_and_list_indices_as_numpy() -> None:
    i = np.array([-7, -1, 0, 3, 4, 9])

    def f(x, i):
        return (
            dnp.take(x, i, axis=0, mode="wrap"),
            dnp.take(x, i, axis=1, mode="clip"),
            x[[0, 2, 2]],
            x[[1], 1:],
        )

    want = (np.take(X, i, 0, mode="wrap"), np.take(X, i, 1, mode="clip"), X[[0, 2, 2]], X[[1], 1:])
    close(dsl.compile(f)(X, i), want)


def test_a_read_is_a_copy() -> None:
    def f(x, i):
        y = x[i]
        y += 1.0  # NumPy: x[i] is a copy, x is unchanged
        return x, y

    x, y = dsl.compile(f)(X, UNIQUE)
    close((x, y), (X, X[clamp(UNIQUE, 5)] + 1))


# ---- writes ------------------------------------------------------------------------------------


def writes(x, i, v):
    a = x.copy()
    a[i] = v  # NumPy: one write per repeated index, the last
    b = x.copy()
    b[i] += 1.0  # read, add, write back: once per repeated index
    c = x.copy()
    c[:, i[:3]] = 0.0
    d = x.copy()
    d[d < 0] = 0.0  # a boolean mask: a where
    e = x.copy()
    e.index_add_(0, i, v)  # PyTorch: repeats accumulate
    f = x.copy()
    f.masked_fill_(f > 1, -1.0)
    return a, b, c, d, e, f, x.at[i].add(v), x.at[i].set(v), x.at[i].get(), x.at[2].add(1.0)


@INPLACE
def test_writes_against_numpy(inplace: bool) -> None:
    v = RNG.standard_normal((len(IDX), 4))
    got = dsl.compile(writes, inplace=inplace)(X, IDX, v)
    ci, lands = clamp(IDX, 5), landed(IDX, 5)
    a, b, e = X.copy(), X.copy(), X.copy()
    for k, r in lands:  # the last write of each row stays; the dropped ones write nothing
        a[r] = v[k]
        b[r] = X[r] + 1.0
        e[r] += v[k]
    c = X.copy()
    c[:, clamp(IDX[:3], 4)] = 0.0
    d = np.where(X < 0, 0.0, X)
    f = np.where(X > 1, -1.0, X)
    g = X.copy()
    g[2] += 1.0
    close(got, (a, b, c, d, e, f, e, a, X[ci], g))
    x = jnp.asarray(X)  # JAX's .at[] agrees out of range too: reads clamp, writes drop
    close(got[6:9], (x.at[IDX].add(v), x.at[IDX].set(v), x.at[IDX].get()))


def test_at_forms_match_jax_for_in_range_indices() -> None:
    i, v = np.array([3, 0, 4, 3, 1]), RNG.standard_normal((5, 4))
    got = dsl.compile(lambda x, i, v: (x.at[i].add(v), x.at[i, 2].add(v[:, 0]), x.at[:, i[:2]].add(1.0)))(
        X, i, v
    )
    x = jnp.asarray(X)
    close(got, (x.at[i].add(v), x.at[i, 2].add(v[:, 0]), x.at[:, i[:2]].add(1.0)))


AT_METHODS = ("set", "add", "mul", "min", "max")
X3 = RNG.standard_normal((2, 3, 4))
I2 = np.array([2, 0, -1])  # 2: outside an axis of 2 (dropped, as JAX's), a wrapped -1


@pytest.mark.parametrize(
    "index",
    [
        lambda j: (slice(None), 1),  # an integer after a slice
        lambda j: (slice(None), -2),
        lambda j: (1, slice(None), -1),  # before and after one
        lambda j: (slice(None), 1, slice(1, 3)),  # between two
        lambda j: (Ellipsis, 3),
        lambda j: (None, slice(None), 1),
        lambda j: (1, 2),
        lambda j: (slice(None), j),  # a traced 0-d integer
        lambda j: (j, slice(None), j),
        lambda j: (slice(None), 1, I2),  # beside an index array, and apart from one
        lambda j: (I2, slice(None), 1),
        lambda j: (j, I2 + 1),  # 3: outside an axis of 3
    ],
    ids=[
        "[:,1]", "[:,-2]", "[1,:,-1]", "[:,1,1:3]", "[...,3]", "[None,:,1]", "[1,2]", "[:,j]", "[j,:,j]",
        "[:,1,idx]", "[idx,:,1]", "[j,idx]",
    ],
)  # fmt: skip
def test_at_with_integers_beside_slices_drops_their_axes_as_jax(index) -> None:
    """An integer in ``x.at[...]`` (a Python int, a negative one, a traced 0-d integer) drops its axis,
    as ``x[:, 1]`` does: ``x.at[:, 1].add(v)`` takes ``v`` of ``x[:, 1]``'s shape (it was kept as a
    unit axis: "updates of shape (2, 4) do not broadcast to the indexed (2, 1, 4)"). Every method,
    float64 values and gradients and int32 values, against JAX; beside an index array, an update
    whose index is outside its axis is dropped (it was clamped into the axis)."""
    j = np.array(1)
    shape = jnp.zeros(X3.shape)[index(1)].shape
    v = RNG.standard_normal(shape) + 0.5
    weights = np.arange(X3.size, dtype=np.float64).reshape(X3.shape)

    def updates(x, v, j):  # mul with unique_indices: JAX's gradient wants it (dslc ignores the hint)
        at = x.at[index(j)]
        return (at.set(v), at.add(v), at.mul(v, unique_indices=True), at.min(v), at.max(v), at.get())

    def loss(np_, x, v, j):
        return sum((np_.sin(u) * weights).sum() for u in updates(x, v, j)[:5])

    want = updates(jnp.asarray(X3), jnp.asarray(v), jnp.asarray(j))
    close(dsl.compile(updates)(X3, v, j), want)
    close(
        dsl.compile(dsl.grad(functools.partial(loss, dnp), argnums=(0, 1)))(X3, v, j),
        jax.grad(functools.partial(loss, jnp), argnums=(0, 1))(X3, v, j),
    )
    xi, vi = (np.arange(X3.size, dtype=np.int32) * 7 % 11).reshape(X3.shape), (v * 9).astype(np.int32)
    got, want = dsl.compile(updates)(xi, vi, j), updates(jnp.asarray(xi), jnp.asarray(vi), jnp.asarray(j))
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and np.array_equal(g, w)


def test_at_with_an_integer_takes_updates_of_numpys_shape() -> None:
    """``x.at[:, 1].set(row)`` takes a row of ``x[:, 1]``'s shape; one with a unit axis more raises,
    as JAX's (it was the shape taken)."""
    x = np.zeros((3, 4))
    close(
        dsl.compile(lambda x: x.at[:, 1].set(np.arange(3.0)))(x), jnp.asarray(x).at[:, 1].set(jnp.arange(3.0))
    )
    with pytest.raises(
        dsl.ShapeError, match=r"updates of shape \(1, 4\) do not broadcast to the indexed \(4,\)"
    ):
        dsl.compile(lambda x: x.at[0].set(np.ones((1, 4))))(x)


def test_a_0d_numpy_index_array_is_an_advanced_index_as_numpy() -> None:
    """A 0-d NumPy integer array in the program (``i = np.array(1)``) indexes as NumPy's: ``x[i]`` is a
    copy of ``x[1]``, ``x[i] = v`` and ``x[i] += v`` write ``x[1]``, ``x.at[i]`` is JAX's; a 0-d
    boolean array is NumPy's ``x[True]`` (it raised "only integers ... are valid indices")."""
    i, yes, no = np.array(1), np.array(True), np.array(False)
    x = RNG.standard_normal((2, 3, 4))

    def program(x, m):
        row = x[i]
        row += 100.0  # a copy: x unchanged
        y = x.copy()
        y[i] = -1.0
        y[:, np.array(-1, np.int32), [0, 2]] += 2.0
        y[i, m] = 0.0  # beside a traced mask
        return row, x[:, i], x[i, :, i], x[yes], x[no], x[..., yes], y, x.at[i].add(1.0), x.at[:, i].get()

    m = x[0, :, 0] > 0
    y = x.copy()
    y[1] = -1.0
    y[:, -1, [0, 2]] += 2.0
    y[1, m] = 0.0
    want = (x[1] + 100.0, x[:, 1], x[1, :, 1], x[yes], x[no], x[..., yes], y)
    got = dsl.compile(program)(x, m)
    close(got[:7], want)
    close(got[7:], (jnp.asarray(x).at[i].add(1.0), jnp.asarray(x)[:, 1]))


def test_at_mul_min_max_match_jax_with_repeated_indices() -> None:
    i, v = np.array([3, 0, 4, 3, 1, 3]), RNG.standard_normal((6, 4))
    v[0, 0] = np.nan  # NaN wins in max and min

    def f(x, i, v):
        return x.at[i].mul(v), x.at[i].max(v), x.at[i].min(v), x.at[:, i[:2]].max(0.0)

    x = jnp.asarray(X)
    want = (x.at[i].mul(v), x.at[i].max(v), x.at[i].min(v), x.at[:, i[:2]].max(0.0))
    close(dsl.compile(f)(X, i, v), want)


def test_at_combines_in_the_promoted_dtype_then_casts_back_as_jax() -> None:
    """An int32 ``x`` with float updates: combined in float64, then cast back once (dslc cast the
    updates to int32 first: ``mul(1.5)`` gave [0, 1, 2, 3]); repeats combine before the cast."""
    i, v = np.array([1, 2]), np.array([1.7, -1.7])

    def f(x, i, v, jnp=None):
        return (
            x.at[i].mul(1.5),
            x.at[i].add(v),
            x.at[np.array([1, 1])].mul(1.5),  # 1 * 1.5 * 1.5 = 2.25: 2 (truncating each step gave 1)
            x.at[i].min(v),
            x.at[i].max(v + 1.0),
            x[2].at[()].mul(1.5),  # a 0-d array: its one element
        )

    x = np.arange(4, dtype=np.int32)
    got = dsl.compile(f)(x, i, v)
    with warnings.catch_warnings():  # JAX: "scatter inputs have incompatible types" (a FutureWarning)
        warnings.simplefilter("ignore", FutureWarning)
        want = f(jnp.asarray(x), i, v)
    assert [g.dtype for g in got] == [np.int32] * len(want)
    close(got, want)
    np.testing.assert_array_equal(got[0], [0, 1, 3, 3])
    np.testing.assert_array_equal(got[1], [0, 2, 0, 3])


@pytest.mark.parametrize(
    "update",
    [lambda y: y.add(2**40), lambda y: y.add(2**31), lambda y: y.mul(-(2**31) - 1), lambda y: y.set(2**40)],
)
def test_at_with_a_python_int_out_of_int32_range_raises_overflow_error(update) -> None:
    """As ``x + 2**40`` (NumPy 2): ``add(2**40)`` added 0 and ``add(2**31)`` wrapped."""
    with pytest.raises(OverflowError, match=rf"{HERE}:\d+: Python integer -?\d+ out of bounds for int32"):
        dsl.compile(lambda x: update(x.at[np.array([1, 2])]))(np.arange(4, dtype=np.int32))


def test_at_with_a_python_int_argument_is_checked_on_every_call() -> None:
    f = dsl.compile(lambda x, s: (x.at[np.array([1, 2])].add(s), x.at[1].set(s)))
    a, b = f(np.arange(4, dtype=np.int32), 5)
    np.testing.assert_array_equal(a, [0, 6, 7, 3])
    np.testing.assert_array_equal(b, [0, 5, 2, 3])
    with pytest.raises(OverflowError, match="argument 's'"):
        f(np.arange(4, dtype=np.int32), 2**40)


@INPLACE
def test_at_mul_min_max_gradients_against_jax(inplace: bool) -> None:
    i, j = np.array([3, 0, 4, 3, 1, 3]), np.array([4, 0, 2])  # repeats for max/min; unique for mul

    def f(x, v, np=dnp):
        return (np.sin(x.at[i].max(v)) + x.at[i].min(v * 2.0) ** 2).sum() + (
            x.at[j].mul(v[:3], unique_indices=True) ** 2
        ).sum()

    v = RNG.standard_normal((6, 4))
    grad = dsl.compile(dsl.value_and_grad(f, argnums=(0, 1)), inplace=inplace)
    want = jax.value_and_grad(lambda x, v: f(x, v, jnp), argnums=(0, 1))(X, v)
    close(grad(X, v), want, rtol=1e-10)


def test_at_mul_gradient_with_repeated_indices_and_zeros(inplace: bool = True) -> None:
    """An update's gradient is its element with the update's own factor left out, other updates at
    that element included (it was ``ct * x`` as if no other landed there: wrong with no error; JAX
    raises). Zeros: one zero among an element's updates gets the product of the others, two give 0."""
    i = np.array([0, 2, 2, 1, 2, 0, 3])
    w = RNG.standard_normal((4, 3))
    v = RNG.standard_normal((7, 3))
    v[[1, 5], 0] = 0.0  # element (2, 0): one zero among three updates; element (0, 0): one of two
    v[[1, 2], 1] = 0.0  # element (2, 1): two zeros
    v[6, 2] = 0.0  # element (3, 2): a zero alone

    def numpy_loss(x: np.ndarray, v: np.ndarray) -> float:
        y = x.copy()
        np.multiply.at(y, i, v)
        return float((y * w).sum())

    grad = dsl.compile(dsl.grad(lambda x, v: (x.at[i].mul(v) * w).sum(), argnums=(0, 1)), inplace=inplace)
    gx, gv = grad(X[:4, :3], v)
    close(gv, central_differences(lambda v: numpy_loss(X[:4, :3], v), v), rtol=1e-7, atol=1e-8)
    close(gx, central_differences(lambda x: numpy_loss(x, v), X[:4, :3].copy()), rtol=1e-7, atol=1e-8)
    # forward mode (the transposed sweep) and a second derivative
    tangent = RNG.standard_normal(v.shape)
    _, jvp = dsl.jvp(lambda v: (dnp.asarray(X[:4, :3]).at[i].mul(v) * w).sum(), (v,), (tangent,))
    close(jvp, (gv * tangent).sum(), rtol=1e-10)
    hessian = dsl.hessian(lambda v: (dnp.asarray(X[:4, :3]).at[i].mul(v) * w).sum())(v)
    rows = [central_differences(lambda u, k=k: grad(X[:4, :3], u)[1].flat[k], v) for k in (3,)]
    close(hessian.reshape(v.size, v.size)[[3]], np.stack([r.ravel() for r in rows]), rtol=1e-6, atol=1e-7)


def test_scatter_and_put_along_axis_against_numpy() -> None:
    def f(x, i, v):
        a = x.copy()
        a.scatter_(1, i, v)  # PyTorch: a[r, i[r, k]] = v[r, k]
        b = x.copy()
        dnp.put_along_axis(b, i, 7.0, axis=1)
        return a, b, x.scatter(1, i, v, reduce="add"), x.index_add(1, i[0], v[:, :2] * 0 + 1.0)

    i = np.array([[0, 2], [3, 3], [1, 0], [2, 2], [3, 1]])
    v = RNG.standard_normal((5, 2))
    a, b, c, e = X.copy(), X.copy(), X.copy(), X.copy()
    for r in range(5):
        for k in range(2):
            a[r, i[r, k]] = v[r, k]
            b[r, i[r, k]] = 7.0
            c[r, i[r, k]] += v[r, k]
    np.add.at(e, (slice(None), i[0]), 1.0)
    close(dsl.compile(f)(X, i, v), (a, b, c, e))


def test_write_into_an_argument_writes_the_callers_array() -> None:
    def step(w, i, g):
        w.index_add_(0, i, g * -0.1)

    w, want = X.copy(), X.copy()
    g = RNG.standard_normal((len(IDX), 4))
    dsl.compile(step)(w, IDX, g)
    for k, r in landed(IDX, 5):
        want[r] += g[k] * -0.1
    close(w, want)


def test_scatter_into_a_dying_array_is_in_place() -> None:
    """``c.at[i].add(v)`` of a temporary nobody reads afterwards: computed over it (no second buffer),
    in both reference modes the same values."""

    def f(x, i, v):
        c = x @ x.T
        c = c.at[i].add(v)
        return c @ x

    x, v = RNG.standard_normal((5, 5)), RNG.standard_normal((len(IDX), 5))
    lowered = dsl.compile(f).lower(x, IDX, v)
    buffers = lowered.memory_plan().buffers  # the matmul's, then the scatter's over it
    assert len(buffers) == 2 and buffers[1].reused_from == buffers[0].name, lowered.explain_inplace()
    want = x @ x.T
    for k, r in landed(IDX, 5):
        want[r] += v[k]
    for inplace in (True, False):
        close(dsl.compile(f, inplace=inplace)(x, IDX, v), want @ x, rtol=1e-10)


# ---- gradients ---------------------------------------------------------------------------------


def loss(x, v, i, j):
    h = dnp.tanh(x.at[i].add(v))
    g = h[j] * 2.0 + dnp.take_along_axis(h[:4], j[:, None] % 4, axis=1)
    s = x.at[j[:3]].set(v[:3] * 3.0)
    return (g**2).sum() + (s * h).sum() + dnp.take(h, j, axis=1).sum()


def loss_jax(x, v, i, j):
    h = jnp.tanh(x.at[i].add(v))
    g = h[j] * 2.0 + jnp.take_along_axis(h[:4], j[:, None] % 4, axis=1)
    s = x.at[j[:3]].set(v[:3] * 3.0)
    return (g**2).sum() + (s * h).sum() + jnp.take(h, j, axis=1).sum()


def test_masked_fill_keeps_the_arrays_dtype_as_pytorch() -> None:
    """A float value into an int32 array is stored as ``x[mask] = 2.7`` stores it, in place or not
    (``masked_fill_`` raised a ShapeError, ``masked_fill`` returned float64)."""

    def f(x, value):
        y = x.copy()
        y.masked_fill_(y > 1, value)
        return y, x.masked_fill(x > 1, value), x.masked_fill(x > 1, 2.7)

    got = dsl.compile(f)(np.arange(4, dtype=np.int32), 2.7)
    for g in got:
        assert g.dtype == np.int32
        np.testing.assert_array_equal(g, [0, 1, 2, 2])
    with pytest.raises(ValueError, match="NaN"):  # a Python float argument: checked on every call
        dsl.compile(f)(np.arange(4, dtype=np.int32), float("nan"))
    with pytest.raises(ValueError, match="NaN"):  # a literal: at trace time
        dsl.compile(lambda x: x.masked_fill(x > 1, float("nan")))(np.arange(4, dtype=np.int32))


@pytest.mark.parametrize(
    "call",
    [
        lambda y, i, s: y.index_add_(dim=0, index=i, source=s),
        lambda y, i, s: y.index_add_(0, index=i, source=s),
        lambda y, i, s: y.index_add_(0, i, s * 0.5, alpha=2.0),
        lambda y, i, s: y.index_add_(dim=0, index=i, source=s * 0.5, alpha=2.0),
        lambda y, i, s: y.index_add_(i, 0, s),
        lambda y, i, s: y.index_add_(index=i, axis=0, value=s),
        lambda y, i, s: y.index_add_(i, axis=0, value=s),
        lambda y, i, s: y.index_add(dim=0, index=i, source=s),
    ],
)
def test_index_add_takes_pytorch_and_paddle_keywords(call) -> None:
    """PyTorch's ``(dim, index, source, *, alpha)`` and Paddle's ``(index, axis, value)``, by
    position or keyword (PyTorch's keywords were refused as Paddle's signature)."""
    i, s = np.array([0, 2, 0]), RNG.standard_normal((3, 4))
    want = X.copy()
    np.add.at(want, i, s)

    def f(x, i, s):
        y = x.copy()
        out = call(y, i, s)
        return out if out is not y else y

    close(dsl.compile(f)(X, i, s), want)


@pytest.mark.parametrize(
    "call",
    [
        lambda y, i, s: y.index_add_(dim=0, index=i, value=s),  # PyTorch's and Paddle's names mixed
        lambda y, i, s: y.index_add_(index=i, axis=0, value=s, alpha=2.0),
        lambda y, i, s: y.index_add_(0, i),
        lambda y, i, s: y.index_add_(0, i, s, 2.0),  # PyTorch's alpha is a keyword
        lambda y, i, s: y.index_add_(0, i, s, dim=0),
        lambda y, i, s: y.index_add_(index=i, source=s),
    ],
)
def test_index_add_with_a_wrong_or_mixed_signature_names_both_and_the_users_line(call) -> None:
    with pytest.raises(TypeError, match=rf"{HERE}:\d+: index_add_\(.*PyTorch's \(dim, index, source"):
        dsl.compile(lambda x, i, s: call(x.copy(), i, s))(X, np.array([0, 2, 0]), X[:3])


def test_float_updates_accumulated_into_an_int_array_raise_as_x_plus_equals() -> None:
    """``index_add_`` and ``scatter_(reduce='add')`` of float updates into an int array cast each
    update before the sum (``[1, 3, 3]`` for updates 0.6, 0.6, 1.5 at 0, 0, 1 of ``[1, 2, 3]``),
    an answer neither NumPy (``np.add.at`` raises: same_kind) nor PyTorch (one dtype) gives: they
    raise at the user's line, as ``x += v``; int64 updates into int32 and Python numbers are fine."""
    x, idx = np.array([1, 2, 3], np.int32), np.array([0, 0, 1])

    def index_add(x, i, v):
        x.index_add_(0, i, v)
        return x

    def scatter_add(x, i, v):
        x.scatter_(0, i, v, reduce="add")
        return x

    for fn in (index_add, scatter_add):
        with pytest.raises(TypeError, match=rf"{HERE}:\d+: .*float32 updates into an array of dtype int32"):
            dsl.compile(fn)(x.copy(), idx, np.array([0.6, 0.6, 1.5], np.float32))
        np.testing.assert_array_equal(dsl.compile(fn)(x.copy(), idx, np.array([1, 1, 2])), [3, 4, 3])
    np.testing.assert_array_equal(dsl.compile(lambda x, i: index_add(x, i, 2))(x.copy(), idx), [5, 4, 3])


@INPLACE
def test_gradients_against_jax(inplace: bool) -> None:
    i, j = np.array([3, 0, 4, 3, 1, 3]), np.array([1, 3, 0, 2])  # in range; j unique (set)
    v = RNG.standard_normal((6, 4))
    grad = dsl.compile(dsl.value_and_grad(loss, argnums=(0, 1)), inplace=inplace)
    close(grad(X, v, i, j), jax.value_and_grad(loss_jax, argnums=(0, 1))(X, v, i, j), rtol=1e-10)


def test_out_of_range_writes_drop_with_their_gradients_as_jax() -> None:
    """An update whose index is outside the axis after one wrap is dropped by every write form, its
    gradient zero, as JAX's ``.at[]`` (``mode="drop"``; padded index arrays rely on it). A read's
    gradient goes back to the clamped element read (JAX drops it: docs/semantics.md). Per example
    under ``vmap`` too: a dropped update lands in no other example."""
    i = np.array([3, -1, 9, -7, 3, 5])  # 9, -7 (-2 after the wrap) and 5 are outside an axis of 5
    v = RNG.standard_normal((6, 4))
    w = RNG.standard_normal((5, 4))
    forms = {
        "add": lambda x, v, i: x.at[i].add(v),
        "set": lambda x, v, i: x.at[i].set(v),
        "mul": lambda x, v, i: x.at[i].mul(v),
        "max": lambda x, v, i: x.at[i].max(v),
        "min": lambda x, v, i: x.at[i].min(v),
    }
    for name, form in forms.items():
        i_ = i if name != "mul" else np.array([3, -1, 9, -7, 2, 5])  # (JAX's mul refuses repeats)

        def loss(x, v, i, form=form, xp=dnp):
            return (xp.sin(form(x, v, i)) * w).sum()

        jax_form = (lambda x, v, i: x.at[i].mul(v, unique_indices=True)) if name == "mul" else form
        jax_loss = functools.partial(loss, form=jax_form, xp=jnp)
        want = jax.value_and_grad(jax_loss, argnums=(0, 1))(jnp.asarray(X), v, i_)
        got = dsl.compile(dsl.value_and_grad(loss, argnums=(0, 1)))(X, v, i_)
        close(got, want, rtol=1e-10)
        vs, idx = np.stack([v, -v]), np.stack([i_, i_[::-1]])
        batched = dsl.compile(dsl.vmap(form, in_axes=(None, 0, 0)))(X, vs, idx)
        close(batched, jax.vmap(form, in_axes=(None, 0, 0))(jnp.asarray(X), vs, idx))

    def index_add(x, v, i):
        y = x.copy()
        y.index_add_(0, i, v)
        y[i + 1] = 2.0 * y[i]  # reads clamp, writes drop
        return y

    want = X.copy()
    for k, r in landed(i, 5):
        want[r] += v[k]
    read = want[clamp(i, 5)]
    for k, r in landed(i + 1, 5):
        want[r] = 2.0 * read[k]
    close(dsl.compile(index_add)(X, v, i), want)
    g = dsl.compile(dsl.grad(lambda x, i: (x[i] * v).sum()))(X, i)
    want_g = np.zeros_like(X)
    np.add.at(want_g, clamp(i, 5), v)
    close(g, want_g)


@pytest.mark.parametrize("inplace", [True, False])
def test_setitem_with_several_index_items_drops_out_of_range_writes(inplace) -> None:
    """``x[a, b] = v``, ``x[k, a] += v`` and ``x[a, :, b] = v`` (several advanced items, merged into
    one position) drop an update whose index is outside its axis, as ``x[i] = v`` and JAX's
    ``.at[a, b]`` do, with the update's gradient zero; the read beside it clamps each index (it
    clamped the write too: an update meant for nowhere landed on the clamped element)."""
    a, b = np.array([0, 5, -1, 2, -4]), np.array([1, 1, 9, -2, 0])  # 5, 9 and -4 are outside
    v = RNG.standard_normal(5)

    def writes(x, y, a, b, v):
        x, y = x.copy(), y.copy()
        x[a, b] = v
        x[1, a[1:4]] += 2.0 * v[1:4]  # (unique: NumPy's += adds once per repeated index)
        y[a[:3], :, b[:3]] = v[:3, None]
        return x, y

    def writes_jax(x, y, a, b, v):
        x = x.at[a, b].set(v)
        x = x.at[1, a[1:4]].add(2.0 * v[1:4])
        return x, y.at[a[:3], :, b[:3]].set(v[:3, None])

    x, y = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 2, 4))
    f = dsl.compile(writes, inplace=inplace)
    close(f(x, y, a, b, v), writes_jax(jnp.asarray(x), jnp.asarray(y), a, b, v))

    def loss(xp, x, y, a, b, v):
        out = (writes if xp is dnp else writes_jax)(x, y, a, b, v)
        return sum((xp.sin(o) * (1.0 + k)).sum() for k, o in enumerate(out))

    grad = dsl.compile(dsl.grad(functools.partial(loss, dnp), argnums=(0, 1, 4)), inplace=inplace)
    got = grad(x, y, a, b, v)
    want = jax.grad(functools.partial(loss, jnp), argnums=(0, 1, 4))(x, y, a, b, v)
    close(got, want, rtol=1e-10)


@pytest.mark.parametrize("mode", [None, "drop", "fill", "clip"])
def test_at_modes_as_jax(mode) -> None:
    """``.at[...].add/set(v, mode=...)``: JAX's default for a scatter, ``"drop"`` and ``"fill"``
    drop an update out of range; ``"clip"`` clamps its indices (one array or several)."""
    kw = {} if mode is None else {"mode": mode}
    i, a, b = np.array([1, 7, -1, -9]), np.array([0, 5, 2]), np.array([1, -7, 3])
    v = RNG.standard_normal(4)

    def f(x, y, i, a, b, v):
        return x.at[i].add(v, **kw), y.at[a, b].set(9.0, **kw), y.at[:, b].add(v[:3], **kw)

    x, y = RNG.standard_normal(4), RNG.standard_normal((3, 3))
    close(dsl.compile(f)(x, y, i, a, b, v), f(jnp.asarray(x), jnp.asarray(y), i, a, b, v))


def test_scatter_and_put_along_axis_drop_out_of_range_writes() -> None:
    """``scatter_`` (set and ``reduce="add"``) and ``put_along_axis`` drop a write whose index is
    outside its axis after one wrap, as the other write forms do (they clamped it: 5 wrote row 3)."""
    idx = np.array([[0, 5, -1], [-5, 2, 3]])
    src = np.arange(1.0, 7.0).reshape(2, 3)

    def set_(x, i, s):
        x.scatter_(0, i, s)

    def add(x, i, s):
        x.scatter_(0, i, s, reduce="add")

    def put(x, i, s):
        dnp.put_along_axis(x, i, s, 0)

    want_set = np.array([[1.0, 0, 0], [0, 0, 0], [0, 5, 0], [0, 0, 6]])
    want_add = want_set + np.array([[0.0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 3]])
    for fn, want in ((set_, want_set), (add, want_add), (put, want_set)):
        x = np.zeros((4, 3))
        dsl.compile(fn)(x, idx, src)
        close(x, want)
    # dropped: [0, 1] and [1, 0]; overwritten by a later write to row 3: [0, 2]
    grad = dsl.compile(dsl.grad(lambda s, i: _put(i, s).sum()))
    close(grad(src, idx), np.array([[1.0, 0, 0], [0, 1, 1]]))


def _put(i, s):
    y = dnp.zeros((4, 3))
    y.scatter_(0, i, s)
    return y


def test_set_with_repeated_indices_gives_only_the_last_write_a_gradient() -> None:
    def f(x, v, i):
        return (x.at[i].set(v) ** 2).sum()

    i, v = np.array([1, 3, 1, 1]), RNG.standard_normal((4, 4))
    gx, gv = dsl.compile(dsl.grad(f, argnums=(0, 1)))(X, v, i)
    want_gx = 2 * X
    want_gx[[1, 3]] = 0.0
    want_gv = np.zeros_like(v)
    want_gv[[1, 3]] = 2 * v[[1, 3]]  # the last writes of rows 3 and 1
    close((gx, gv), (want_gx, want_gv))


def test_second_order_through_a_gather() -> None:
    def f(x, i):
        return (dnp.sin(x[i]) ** 2).sum()

    i = np.array([0, 2, 2])
    x = RNG.standard_normal(4)
    h = dsl.compile(dsl.hessian(f))(x, i)
    want = jax.hessian(lambda x: (jnp.sin(x[i]) ** 2).sum())(x)
    close(h, want, rtol=1e-10)


# ---- augmented writes, masks beside other indices, mixed advanced indexing --------------------


def augmented(x, i, v, r):
    a = x.copy()
    a[i] += v  # repeated rows: read once, the last sum written (NumPy), not accumulated
    b = x.copy()
    b[i] *= v
    c = x.copy()
    c[i, 1:3] -= v[:, :2]
    d = x.copy()
    d[x > 0] += 1.5  # a traced mask: a where
    e = x.copy()
    e[x[:, 0] < 0] -= r  # a row per selected element
    f = x.copy()
    f[:, x[0] > 0] *= 3.0  # the mask after a slice
    g = x.copy()
    g[1, x[0] > 0] += 2.0  # after an integer
    h = x.copy()
    h[x < 0] = (2.0 * x)[x < 0]  # the same mask read and written (traced twice)
    k = x.copy()
    k[x[:, 0] > 0, 1:3] -= r[:2]
    m = x.copy()
    m[m > 0] += m[m > 0]  # a selection by the same mask as the operand (it raised a TraceError)
    m[x < 0] -= (x * 3.0)[x < 0]
    return a, b, c, d, e, f, g, h, k, m


@INPLACE
def test_augmented_writes_against_numpy(inplace: bool) -> None:
    """``x[i] += v`` with repeated indices keeps one write per row, the last (NumPy's fancy ``+=``,
    unlike ``.at[i].add``); ``x[mask] op= v`` with a traced mask, alone or beside slices and
    integers, is NumPy's (before: a TraceError, the mask read)."""
    i = np.array([3, 0, 3, 1, 3])
    v, r = RNG.standard_normal((5, 4)), RNG.standard_normal(4)
    got = dsl.compile(augmented, inplace=inplace)(X, i, v, r)
    close(got, augmented(X.copy(), i, v, r))  # the same program run by NumPy


def test_augmented_write_gradients_against_jax() -> None:
    """Gradients through ``x[i] += v`` (only the last update of a repeated row reaches the row) and
    ``x[mask] op= v``, against JAX's same programs written with the winning updates and ``where``."""
    i = np.array([3, 0, 3, 1, 3])
    last = {row: k for k, row in enumerate(i)}  # the update each row keeps
    rows, winners = np.array(list(last)), np.array(list(last.values()))

    def f(x, v, r, s):
        a = x.copy()
        a[i] += v
        b = x.copy()
        b[x[:, 0] > 0.5] *= r
        b[:, x[1] < 0] -= 2.0 * s[:, None]
        return (dnp.sin(a) * b).sum()

    def f_jax(x, v, r, s):
        a = x.at[rows].add(v[winners])
        b = jnp.where((x[:, 0] > 0.5)[:, None], x * r, x)
        b = jnp.where((x[1] < 0)[None, :], b - 2.0 * s[:, None], b)
        return (jnp.sin(a) * b).sum()

    args = (X, RNG.standard_normal((5, 4)), RNG.standard_normal(4), RNG.standard_normal(5))
    got = dsl.compile(dsl.value_and_grad(f, argnums=(0, 1, 2, 3)))(*args)
    close(got, jax.value_and_grad(f_jax, argnums=(0, 1, 2, 3))(*args), rtol=1e-10)


def mixed(x, i, j, v):
    reads = (
        x[i, :, j],  # apart: the indexed axes first (NumPy)
        x[i, None, j],  # None between them: apart too
        x[None, i, 1:3],
        x[..., i, None],
        x[i, ..., j],
        x[0, :, j],  # an integer is an advanced index: apart from j
        x[i, 1:, 0],
        x[np.array([True, False, True, True])],  # a constant mask: its nonzero() positions
        x[1:, np.array([True, False, True, True, False]), 1:3],
    )
    a = x.copy()
    a[i, :, j] = v[:, None]
    b = x.copy()
    b[0, :, j] += 1.0
    c = x.copy()
    c[i, None, j] = -1.0
    d = x.copy()
    d[:, np.array([True, False, True, True, False])] = 5.0
    e = x.copy()
    e[..., x[0, 0] > 0] = v[:4, None, None]  # a traced mask after an ellipsis
    return reads, (a, b, c, d, e)


@INPLACE
def test_mixed_advanced_indexing_against_numpy(inplace: bool) -> None:
    """Array indices apart (a slice, None or an ellipsis between them), beside None and Ellipsis,
    constant and traced masks beside slices, read and written (before: IndexingError)."""
    x = RNG.standard_normal((4, 5, 6))
    i, j, v = np.array([0, 2, 2, 1]), np.array([1, 3, 3, -2]), RNG.standard_normal(4)
    got = dsl.compile(mixed, inplace=inplace)(x, i, j, v)
    want = mixed(x.copy(), i, j, v)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want), strict=True):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_array_equal(g, w)


def _random_index(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple:
    """An index NumPy takes: integers, slices, None, an ellipsis, integer arrays (in range) and
    boolean masks, in any order."""
    items, k, ellipsis = [], 0, False
    while k < len(shape):
        r, n = rng.random(), shape[k]
        if r < 0.3:
            items.append(rng.integers(-n, n, size=(2,) if rng.random() < 0.7 else (2, 2)))
        elif r < 0.45:
            items.append(int(rng.integers(-n, n)))
        elif r < 0.6:
            a, b = sorted(int(e) for e in rng.integers(0, n + 1, 2))
            items.append(slice(a, b if b > a else None))
        elif r < 0.7:
            items.append(None)
            continue
        elif r < 0.8 and not ellipsis:
            items.append(Ellipsis)
            ellipsis, k = True, len(shape) - int(rng.integers(0, len(shape) - k + 1))
            continue
        elif r < 0.9:
            items.append(rng.random(n) < 0.5)
        else:
            items.append(slice(None))
        k += 1
    return tuple(items)


def test_random_mixed_indices_against_numpy() -> None:
    """Random indices mixing every item kind, their arrays passed as traced arguments: x[index]
    (unless a mask makes its shape the data's), x[index] = 7 and x[index] += 1 as NumPy's."""
    rng, tested = np.random.default_rng(5), 0
    while tested < 12:
        shape = tuple(int(s) for s in rng.integers(2, 5, size=rng.integers(1, 4)))
        index, x = _random_index(rng, shape), rng.standard_normal(shape)
        arrays = [it for it in index if isinstance(it, np.ndarray)]
        masks = sum(a.dtype == np.bool_ for a in arrays)
        try:
            want = [x.copy(), x.copy()]
            want[0][index], want[1][index] = 7.0, want[1][index] + 1.0
            want = want if masks else [x[index], *want]
        except (IndexError, ValueError):
            continue
        if masks > 1 or (masks and len(arrays) > 1):  # data-dependent together: a TraceError
            continue

        def f(x, *traced, index=index, masks=masks):
            it = iter(traced)
            ix = tuple(next(it) if isinstance(i, np.ndarray) else i for i in index)
            a, b = x.copy(), x.copy()
            a[ix] = 7.0
            b[ix] += 1.0
            return (a, b) if masks else (x[ix], a, b)

        got = dsl.compile(f)(x, *arrays)
        for g, w in zip(got, want, strict=True):
            assert np.shape(g) == np.shape(w), index
            np.testing.assert_array_equal(g, w, err_msg=str(index))
        tested += 1


def test_mixed_advanced_indexing_gradients_against_jax() -> None:
    x = RNG.standard_normal((4, 5, 6))
    i, j = np.array([0, 2, 2, 1]), np.array([1, 3, 3, 4])

    def f(x, np=dnp):
        return (np.sin(x[i, :, j]) ** 2).sum() + (x[0, :, j] * x[i, None, j][:, :, :5]).sum()

    close(dsl.compile(dsl.grad(f))(x), jax.grad(lambda x: f(x, jnp))(x), rtol=1e-10)


# ---- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "index, message",
    [
        (lambda x, i: x[x > 0], "boolean mask"),
        (lambda x, i: x[x[0] > 0].sum(), "boolean mask"),
        (lambda x, i: x[x[0] > 0, i], "together with other boolean or integer arrays"),
        (lambda x, i: x[i > 0], "does not match"),
        (lambda x, i: x.at[i].divide(2.0), r"\.set, \.add, \.mul, \.min, \.max and \.get"),
        (lambda x, i: x[i.astype(np.float64)], "only integers"),
    ],
)
def test_errors_name_what_works(index, message: str) -> None:
    with pytest.raises(dsl.DSLError, match=message):
        dsl.compile(index)(np.zeros((3, 3, 3)), np.array([0, 1]))


def test_a_mask_read_names_the_line_of_the_selection() -> None:
    """``b = a[a > 0]`` read lines later (or returned) names the line of ``a[a > 0]``, the mistake:
    it named the line reading it, or the caller's line for a returned selection."""

    def later(a):
        b = a[a > 0]
        c = a * 2.0
        return c.sum() + b.sum()

    def returned(a):
        return a[a > 0]

    for fn in (later, returned):
        line = fn.__code__.co_firstlineno + 1
        with pytest.raises(dsl.TraceError, match=rf"^{re.escape(__file__)}:{line}: x\[mask\]"):
            dsl.compile(fn)(np.ones(3))


@pytest.mark.parametrize(
    "program",
    [
        lambda x: x[[0, 5]],
        lambda x: x[np.array([0, -4])],
        lambda x: x[[[1], [3]], 0],
        lambda x: x[:, [0, 3]],
        lambda x: x[3, [0, 1]],  # an integer among arrays is an advanced index: checked too
        lambda x: x.__setitem__([0, 5], 1.0),
        lambda x: x.__setitem__((slice(None), np.array([3])), 1.0),
        lambda x: x.__setitem__(([0, 5],), x[[0, 1]] + 1.0),
        lambda x: x[np.array(3)],  # a 0-d NumPy integer array
        lambda x: x.__setitem__((slice(None), np.array(-4)), 1.0),
    ],
)
def test_a_known_index_out_of_range_raises_as_numpy(program) -> None:
    """An index known at trace time (a list, a NumPy array or an int in the program) out of its
    axis raises as ``x[5]`` does, naming the user's line (it was clamped: ``x[[0, 5]]`` read x[0],
    x[2]); traced index arrays still clamp."""
    x = np.zeros((3, 3))
    with pytest.raises(IndexError):  # NumPy's error for the same index
        program(x)
    with pytest.raises(dsl.IndexingError, match=rf"{HERE}:\d+: index -?\d+ is out of bounds for axis \d"):
        dsl.compile(lambda x: program(x.copy()))(x)


def test_at_with_a_known_index_out_of_range_follows_jax() -> None:
    """``.at[]`` follows JAX's clamped reads and dropped writes (docs/semantics.md), known indices
    too; a traced index array clamps in ``x[i]`` and drops in ``x[i] = v``. (Writes once clamped:
    the update meant for nowhere overwrote the last element.)"""

    def f(x, i):
        y = x.copy()
        y[i] = 9.0
        return x.at[[0, 5]].get(), x.at[[0, 5]].set(9.0), x.at[[0, 5]].add(1.0), x[i], y

    i = np.array([0, 5])
    got = dsl.compile(f)(np.arange(3.0), i)
    x = jnp.arange(3.0)
    at = x.at[np.array([0, 5])]
    close(got[:3], (at.get(), at.set(9.0), at.add(1.0)))
    close(got[:3], (np.array([0.0, 2.0]), np.array([9.0, 1.0, 2.0]), np.array([1.0, 1.0, 2.0])))
    close(got[3:], (np.array([0.0, 2.0]), np.array([9.0, 1.0, 2.0])))


# ---- training programs -------------------------------------------------------------------------


def cross_entropy(w, x, labels):
    logits = x @ w
    m = logits.max(axis=1, keepdims=True)
    logp = logits - m - dnp.log(dnp.sum(dnp.exp(logits - m), axis=1, keepdims=True))
    return -dnp.mean(dnp.take_along_axis(logp, labels[:, None], axis=1))


def test_cross_entropy_with_integer_labels_matches_jax_and_trains() -> None:
    # Its own generator (the module's RNG depends on which tests ran before in this worker) and
    # labels a linear model can learn: random labels once left the loss at 0.87 of its start.
    rng = np.random.default_rng(41)
    x = rng.standard_normal((32, 6))
    labels = np.argmax(x @ rng.standard_normal((6, 5)), axis=1)
    w = rng.standard_normal((6, 5)) * 0.1

    def ce_jax(w, x, labels):
        logp = jax.nn.log_softmax(x @ w, axis=1)
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))

    step = dsl.compile(dsl.value_and_grad(cross_entropy))
    close(step(w, x, labels), jax.value_and_grad(ce_jax)(w, x, labels), rtol=1e-10)
    losses = []
    for _ in range(20):
        value, g = step(w, x, labels)
        losses.append(float(value))
        w = w - 0.5 * g
    assert losses[-1] < 0.8 * losses[0] and sorted(losses, reverse=True) == losses, losses


def test_embedding_lookup_trains() -> None:
    """Predict the next token id from an embedded token: the embedding's gradient is a scatter-add
    of the rows' gradients (repeated tokens accumulate), applied in place by index_add_."""
    vocab, dim, n = 7, 4, 40
    tokens = RNG.integers(0, vocab, n)
    targets = (tokens + 1) % vocab

    def loss(emb, out, tokens, targets):
        h = dnp.tanh(emb[tokens])
        logits = h @ out
        m = logits.max(axis=1, keepdims=True)
        logp = logits - m - dnp.log(dnp.sum(dnp.exp(logits - m), axis=1, keepdims=True))
        return -dnp.mean(dnp.take_along_axis(logp, targets[:, None], axis=1))

    grad = dsl.compile(dsl.value_and_grad(loss, argnums=(0, 1)))
    emb = RNG.standard_normal((vocab, dim)) * 0.5
    out = RNG.standard_normal((dim, vocab)) * 0.5
    want = jax.value_and_grad(
        lambda e, o: (
            -jnp.mean(
                jnp.take_along_axis(
                    jax.nn.log_softmax(jnp.tanh(e[tokens]) @ o, axis=1), targets[:, None], axis=1
                )
            )
        ),
        argnums=(0, 1),
    )(emb, out)
    close(grad(emb, out, tokens, targets), want, rtol=1e-10)
    losses = []
    for _ in range(20):
        value, (ge, go) = grad(emb, out, tokens, targets)
        losses.append(float(value))
        emb, out = emb - 1.0 * ge, out - 1.0 * go
    assert losses[-1] < 0.8 * losses[0], losses


def test_vmap_over_indices_arrays_and_both_against_jax() -> None:
    """Batching rules beside the primitives: per-example index arrays (100 examples, past the
    per-example fallback's limit) read and scatter as one op over the batch merged into the axis."""
    table, idx = RNG.standard_normal((7, 3)), RNG.integers(0, 7, (100, 5))
    xs, vs = RNG.standard_normal((100, 7, 3)), RNG.standard_normal((100, 5, 3))

    def f(x, i, v):
        return x[i] * 2.0, x.at[i].add(v), dnp.take(x, i % 3, axis=1)

    def fj(x, i, v):
        x = jnp.asarray(x)
        return x[i] * 2.0, x.at[i].add(v), jnp.take(x, i % 3, axis=1)

    close(
        dsl.vmap(f, in_axes=(None, 0, 0))(table, idx, vs), jax.vmap(fj, in_axes=(None, 0, 0))(table, idx, vs)
    )
    close(dsl.vmap(f)(xs, idx, vs), jax.vmap(fj)(xs, idx, vs))
    close(
        dsl.vmap(f, in_axes=(0, None, 0))(xs, idx[0], vs), jax.vmap(fj, in_axes=(0, None, 0))(xs, idx[0], vs)
    )


def test_an_empty_list_index_is_an_empty_integer_array_as_numpy() -> None:
    """``x[[]]`` (an IndexingError: NumPy reads ``np.asarray([])`` as float64 and indexes with it as
    an empty integer array) reads and writes nothing."""

    def f(y):
        c = y.copy()
        c[[]] = 5.0
        c[:, []] += 1.0
        return y[[]], y[:, []], y[[], 1], c

    close(dsl.compile(f)(X), f(X.copy()))
