"""Indexing with traced integer scalars (``c[i]``, ``c[i] = v``, ``c[i] += v``, ``c[i:i + k]``) against
``jax.lax.dynamic_slice`` / ``dynamic_update_slice`` in float64: values, out-of-range and negative
starts (wrapped once, then clamped, as JAX does), gradients, in-place on and off, a write that
overlaps what it reads, the errors at the user's line, loops, and the MLIR export.

The primitives themselves (``compiler/prims/dynamic.py``) are in the registry tables
(``tests/test_prims_registry.py``, ``tests/test_vjp_rules.py``, PTX and the CUDA simulator);
whole programs on the CUDA backend are in ``tests/cuda_sim/sim_dynamic_slice.py``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from mlir_tools import mlir_opt_or_skip

import dsl
import dsl.numpy as dnp
from compiler.codegen.mlir_export import export_module
from compiler.prims import REGISTRY

jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(0)
C = RNG.standard_normal((5, 4))
V = RNG.standard_normal(4)
W = RNG.standard_normal((2, 4))
STARTS = [0, 2, 3, 4, 5, 9, -1, -2, -5, -9]  # in range, past the end, negative, below -n


def close(got, want, rtol: float = 1e-12) -> None:
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves, strict=True):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=1e-14)


# ---- reads --------------------------------------------------------------------------------------


def reads(c, i):
    return c[i], c[i : i + 2], c[:, i], c[i, 1:3], c[i - 1 : i + 2, ::2], c[i, i]


def reads_jax(c, i):
    ds = lax.dynamic_slice
    return (
        ds(c, (at(i, 5), 0), (1, 4))[0],
        ds(c, (i, 0), (2, 4)),
        ds(c, (0, at(i, 4)), (5, 1))[:, 0],
        ds(c, (at(i, 5), 1), (1, 2))[0],
        ds(c, (i - 1, 0), (3, 4))[:, ::2],
        ds(c, (at(i, 5), at(i, 4)), (1, 1))[0, 0],
    )


@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "no-inplace"])
def test_reads_against_lax_dynamic_slice(inplace: bool) -> None:
    f = dsl.compile(reads, inplace=inplace)
    for i in STARTS:
        for index in (np.int64(i), np.int32(i), i):  # an int32 or int64 scalar, a Python int argument
            close(f(C, index), reads_jax(C, i))
    assert REGISTRY["dynamic_slice"] in {op.prim for op in f.lower(C, 0)._program.stages["traced"].ops}


def test_slice_bounds_are_one_traced_integer_plus_python_ints() -> None:
    def f(c, i):
        return c[i : i + 2], c[i - 1 : i + 2], c[1 + i : 3 + i], c[i + 1 - 1 : 2 + i], c[i : i + np.int64(2)]

    def f_jax(c, i):
        ds = lambda start, k: lax.dynamic_slice(c, (start, 0), (k, 4))  # noqa: E731
        return ds(i, 2), ds(i - 1, 3), ds(i + 1, 2), ds(i, 2), ds(i, 2)

    for i in (np.int32(1), np.int64(3), np.int32(-2), 7):
        close(dsl.compile(f)(C, i), f_jax(C, int(i)))


def test_slice_bounds_may_compute_the_start_twice() -> None:
    """``c[2 * i:2 * i + 2]`` traces ``2 * i`` twice (two values): the same computation is recognized,
    as ``j = 2 * i; c[j:j + 2]`` (it raised "its size must be known at trace time")."""

    def f(c, i):
        return c[2 * i : 2 * i + 2], c[i * 2 : i * 2 + 2], c[4 - i : 4 - i + 1], c[2 * i - 1 : 2 * i + 1, 1:3]

    def f_jax(c, i):
        ds = lambda start, k: lax.dynamic_slice(c, (start, 0), (k, 4))  # noqa: E731
        return ds(2 * i, 2), ds(i * 2, 2), ds(4 - i, 1), ds(2 * i - 1, 2)[:, 1:3]

    for i in (0, 1, 2, np.int32(3)):
        close(dsl.compile(f)(C, i), f_jax(C, int(i)))


def test_integer_index_matches_jax_numpy_indexing() -> None:
    f = dsl.compile(lambda c, i: (c[i], c[:, i], c[i, -1]))
    for i in STARTS:
        close(f(C, i), (jnp.asarray(C)[i], jnp.asarray(C)[:, i], jnp.asarray(C)[i, -1]))


def test_a_traced_integer_index_is_a_view_as_the_integer_it_stands_for() -> None:
    """``c[i]`` and ``c[i:i + 2]`` with a traced ``i`` (an int argument, a loop counter) are views, as
    with the Python int of the eager program: a write to ``c`` shows through them, and one through
    them reaches ``c`` (``row = c[i]`` was a copy, as of a 0-d array, and a loop's ``row += ...``
    was lost)."""

    def f(c, i):
        c = c * 1.0
        row, rows = c[i], c[i : i + 2]
        c[i] = 0.0
        return row, rows

    def g(c, i):
        c = c * 1.0
        row = c[i]
        row += 1.0
        c[:, i][0] = -5.0
        return c

    def h(a):
        def body(i, c):
            row = c[i]
            row += c[(i + 1) % 3]
            return c

        return dsl.fori_loop(0, 3, body, a * 1.0)

    i = 1
    c = C.copy()
    row, rows = c[i], c[i : i + 2]
    c[i] = 0.0
    close(dsl.compile(f)(C, i), (row, rows))
    c = C.copy()
    c[i] += 1.0
    c[0, i] = -5.0
    close(dsl.compile(g)(C, i), c)
    close(dsl.compile(g)(C, np.int64(i)), c)
    a, want = C[:3].copy(), C[:3].copy()
    for k in range(3):
        want[k] += want[(k + 1) % 3]
    close(dsl.compile(h)(a), want)


# ---- writes -------------------------------------------------------------------------------------


def writes(c, v, w, i):
    c = c * 1.0
    c[i] = v
    c[i + 1] += v
    c[i : i + 2] = w
    c[:, i] *= 2.0
    c[i - 1 : i + 1, 1:3] -= 1.0
    return c


def at(j: int, d: int, size: int = 1) -> int:
    """Where a window of ``size`` at ``j`` starts on an axis of ``d``: wrapped once, then clamped."""
    return min(max(j + d if j < 0 else j, 0), d - size)


def writes_jax(c, v, w, i):
    n, m = c.shape
    dus, ds = lax.dynamic_update_slice, lax.dynamic_slice
    c = dus(c, v[None], (at(i, n), 0))
    j = at(i + 1, n)
    c = dus(c, ds(c, (j, 0), (1, m)) + v, (j, 0))
    c = dus(c, w, (i, 0))
    k = at(i, m)
    c = dus(c, ds(c, (0, k), (n, 1)) * 2.0, (0, k))
    c = dus(c, ds(c, (i - 1, 1), (2, 2)) - 1.0, (i - 1, 1))
    return c


@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "no-inplace"])
def test_writes_against_lax_dynamic_update_slice(inplace: bool) -> None:
    f = dsl.compile(writes, inplace=inplace)
    for i in STARTS:
        close(f(C, V, W, np.int64(i)), writes_jax(C, V, W, i))


def test_write_into_an_argument_writes_the_callers_array() -> None:
    def step(c, v, i):
        c[i] += v

    for i in (0, 3, 7, -1):
        got, want = C.copy(), C.copy()
        dsl.compile(step)(got, V, i)
        want[at(i, 5)] += V
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("static", [False, True], ids=["traced-index", "static-index"])
def test_update_of_a_dying_array_is_in_place(static: bool) -> None:
    """``c[i] = v`` on a temporary nobody reads afterwards: computed over it (no second buffer). The
    update reads its base only at the element it writes (fusion's access record), for a traced and,
    since the same change, a static index (which was a copy: "reads the old value at other elements")."""

    def f(x, v, i):
        c = x @ x.T
        c[2 if static else i] = v
        return c @ x

    x, v = RNG.standard_normal((5, 5)), RNG.standard_normal(5)
    lowered = dsl.compile(f).lower(x, v, 2)
    update = [d for d in lowered.memory_plan().inplace if d.request == "setitem" and d.target != "-"]
    assert [d.outcome for d in update] == ["in place"], lowered.explain_inplace()
    for inplace in (True, False):
        for i in (2,) if static else (2, -1, 8):
            want = x @ x.T
            want[at(i, 5)] = v
            close(dsl.compile(f, inplace=inplace)(x, v, i), want @ x, rtol=1e-10)


def test_overlapping_shift_reads_the_old_values() -> None:
    """``c[i + 1:i + 3] = c[i:i + 2]`` reads elements the write replaces: a copy keeps them."""

    def shift(x, i):
        c = x * 1.0
        c[i + 1 : i + 3] = c[i : i + 2]
        return c

    for inplace in (True, False):
        f = dsl.compile(shift, inplace=inplace)
        for i in (0, 1, 2, -3):
            c = C.copy()
            c[i + 1 : (i + 3) or None] = c[i : (i + 2) or None]
            np.testing.assert_array_equal(f(C, i), c)


# ---- gradients ------------------------------------------------------------------------------------


def loss(np_, set_, x, w, i):
    h = np_.tanh(x * 1.5)
    h = set_(h, w * h[i], i)  # h[i] = w * h[i]
    return (h * h).sum() + (x[i : i + 2] * w).sum()


def set_dsl(h, value, i):
    h[i] = value
    return h


def set_jax(h, value, i):
    return lax.dynamic_update_slice(h, value[None], (at(i, h.shape[0]), 0))


def slice_jax(x, i, k):
    return lax.dynamic_slice(x, (i, 0), (k, x.shape[1]))


def loss_dsl(x, w, i):
    return loss(dnp, set_dsl, x, w, i)


def loss_jax(x, w, i):
    h = jnp.tanh(x * 1.5)
    h = set_jax(h, w * lax.dynamic_slice(h, (at(i, h.shape[0]), 0), (1, 4))[0], i)
    return (h * h).sum() + (slice_jax(x, i, 2) * w).sum()


@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "no-inplace"])
def test_gradients_against_jax(inplace: bool) -> None:
    x, w = RNG.standard_normal((5, 4)), RNG.standard_normal(4)
    grad = dsl.compile(dsl.value_and_grad(loss_dsl, argnums=(0, 1)), inplace=inplace)
    for i in (0, 2, 4, 7, -1, -4, -8):
        value, (gx, gw) = grad(x, w, np.int64(i))
        want_value, (wx, ww) = jax.value_and_grad(loss_jax, argnums=(0, 1))(x, w, i)
        close((value, gx, gw), (want_value, wx, ww), rtol=1e-10)


def test_second_order_through_a_dynamic_slice() -> None:
    def f(x, i):
        return (dnp.sin(x[i : i + 3]) ** 2).sum()

    def f_jax(x, i):
        return (jnp.sin(lax.dynamic_slice(x, (i,), (3,))) ** 2).sum()

    x = RNG.standard_normal(6)
    for i in (1, 5, -2):
        close(dsl.compile(dsl.hessian(f))(x, i), jax.hessian(f_jax)(x, i), rtol=1e-10)


def test_vmap_with_shared_and_per_example_starts() -> None:
    """A shared start batches into one window over the batch axis; per-example starts into one
    window per row of it (a start per row: ``prims/dynamic.py``), not the op once per example."""

    def f(c, i, v):
        c = c * 1.0
        c[i] += v
        return c[i : i + 2].sum(axis=0)

    def f_jax(c, i, v):
        j = at(i, c.shape[0])
        c = lax.dynamic_update_slice(c, lax.dynamic_slice(c, (j, 0), (1, 4)) + v, (j, 0))
        return lax.dynamic_slice(c, (i, 0), (2, 4)).sum(axis=0)

    cs, vs, starts = RNG.standard_normal((3, 5, 4)), RNG.standard_normal((3, 4)), np.array([1, -1, 7])
    close(
        dsl.vmap(f, in_axes=(0, None, 0))(cs, np.int64(3), vs), jax.vmap(lambda c, v: f_jax(c, 3, v))(cs, vs)
    )
    want = np.stack([f_jax(c, int(i), v) for c, i, v in zip(cs, starts, vs, strict=True)])
    close(dsl.vmap(f)(cs, starts, vs), want)
    close(
        dsl.vmap(f, in_axes=(None, 0, None))(cs[0], starts, vs[0]),
        np.stack([f_jax(cs[0], int(i), vs[0]) for i in starts]),
    )


def per_example(c, i, v):
    """Reads and writes at a start per example, negative and out-of-range ones among them."""
    c = c * 1.0
    c[i : i + 2] = c[i : i + 2] * 2.0 + v
    c[:, i] += 1.0
    return c, c[i - 1 : i + 2, ::2] + c[i + 1, 1:3]


def per_example_jax(c, i, v):
    ds, dus = lax.dynamic_slice, lax.dynamic_update_slice
    c = dus(c, ds(c, (i, 0), (2, 4)) * 2.0 + v, (i, 0))
    k = traced_at(i, 4)
    c = dus(c, ds(c, (0, k), (5, 1)) + 1.0, (0, k))
    return c, ds(c, (i - 1, 0), (3, 4))[:, ::2] + ds(c, (traced_at(i + 1, 5), 0), (1, 4))[0, 1:3]


def traced_at(j, d: int):
    """``at`` of a traced integer (a window of one)."""
    return jnp.clip(jnp.where(j < 0, j + d, j), 0, d - 1)


@pytest.mark.parametrize("inplace", [True, False])
def test_vmap_of_per_example_windows_against_jax(inplace: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Starts per example (jax lowers them to gathers and scatters) over 100 examples, more than a
    per-example unroll took: one window per row, the program's size independent of the batch; in
    place and not."""
    if not inplace:
        monkeypatch.setenv("DSL_NO_INPLACE", "1")
    n = 100
    cs, vs = RNG.standard_normal((n, 5, 4)), RNG.standard_normal((n, 2, 4))
    starts = RNG.integers(-8, 9, n)
    want = jax.vmap(per_example_jax)(cs, starts, vs)
    f = dsl.compile(dsl.vmap(per_example))
    close(f(cs, starts, vs), want)
    ir = f.lower(cs, starts, vs).ir("traced")
    assert ir.count("dsl.dynamic_update_slice") == 2 and "dsl.concatenate" not in ir
    shared = dsl.vmap(per_example, in_axes=(None, 0, None))(cs[0], starts, vs[0])
    close(shared, jax.vmap(per_example_jax, in_axes=(None, 0, None))(cs[0], starts, vs[0]))


def test_nested_vmap_and_gradients_of_per_example_windows_against_jax() -> None:
    """A start per row of two batch axes (vmap of vmap), and gradients both ways round."""

    def loss(c, i, v):
        new, read = per_example(c, i, v)
        return (new * new).sum() + (read * read).sum()

    def loss_jax(c, i, v):
        new, read = per_example_jax(c, i, v)
        return (new * new).sum() + (read * read).sum()

    cs, vs = RNG.standard_normal((3, 4, 5, 4)), RNG.standard_normal((3, 4, 2, 4))
    starts = RNG.integers(-6, 7, (3, 4))
    close(
        dsl.vmap(dsl.vmap(per_example))(cs, starts, vs), jax.vmap(jax.vmap(per_example_jax))(cs, starts, vs)
    )
    want = jax.vmap(jax.grad(loss_jax, argnums=(0, 2)))(cs[0], starts[0], vs[0])
    close(dsl.vmap(dsl.grad(loss, argnums=(0, 2)))(cs[0], starts[0], vs[0]), want)
    summed = jax.grad(lambda c, v: jax.vmap(loss_jax)(c, starts[0], v).sum(), argnums=(0, 1))(cs[0], vs[0])
    close(dsl.grad(lambda c, v: dsl.vmap(loss)(c, starts[0], v).sum(), argnums=(0, 1))(cs[0], vs[0]), summed)


def test_a_start_per_row_must_vary_along_axes_the_window_spans() -> None:
    from compiler.ir.types import DType, TensorType
    from compiler.prims import dynamic

    x, row, i = TensorType((3, 5), DType.f64), TensorType((3,), DType.i64), TensorType((), DType.i64)
    assert dynamic.dynamic_slice.shape_rule([x, i, row], {"sizes": (3, 2)}) == [TensorType((3, 2), DType.f64)]
    with pytest.raises(Exception, match="one per row"):
        dynamic.dynamic_slice.shape_rule([x, i, row], {"sizes": (2, 2)})  # the rows' axis is cut
    with pytest.raises(Exception, match="one per row"):
        dynamic.dynamic_slice.shape_rule([x, row, i], {"sizes": (3, 2)})  # a start per row of its own axis


# ---- loops, errors, export ------------------------------------------------------------------------


def test_loop_counter_indexes_the_carry() -> None:
    def prefix_sums(x):
        def body(i, c):
            c[i] = c[i - 1] + x[i]
            return c

        return dsl.fori_loop(1, x.shape[0], body, x * 1.0)

    def prefix_jax(x):
        x = jnp.asarray(x)

        def body(i, c):
            return c.at[i].set(c[i - 1] + x[i])

        return lax.fori_loop(1, x.shape[0], body, x)

    x = RNG.standard_normal((6, 3))
    close(dsl.compile(prefix_sums)(x), prefix_jax(x))
    close(
        dsl.compile(dsl.grad(lambda x: prefix_sums(x).sum()))(x), jax.grad(lambda x: prefix_jax(x).sum())(x)
    )


@pytest.mark.parametrize(
    ("index", "message"),
    [
        (lambda c, i, j: c[i:j], "slice i:j .*size must be known at trace time"),
        (lambda c, i, j: c[i : i + 2 : 2], "slice i:i [+] 2:2 .*takes no step"),  # it said i:i:2
        (lambda c, i, j: c[i:3], "slice i:3 .*size must be known at trace time"),
        (lambda c, i, j: c[2 * i : 2 * j], "slice i:j .*compute the start once"),
        (lambda c, i, j: c[i : i + 9], "slice i:i [+] 9 .*do not fit"),
        (lambda c, i, j: c[i : i - 1], "slice i:i - 1 .*do not fit"),
        (lambda c, i, j: c[i * 1.0], "only integers"),
    ],
)
def test_index_errors_name_the_users_line(index, message: str) -> None:
    def f(c, i, j):
        return index(c, i, j)

    with pytest.raises(dsl.IndexingError, match=message) as err:
        dsl.compile(f)(C, 1, 3)
    assert "test_dynamic_slice.py" in str(err.value)


def test_exported_mlir_verifies_and_bufferizes() -> None:
    mlir_opt_or_skip()
    import subprocess

    from mlir_tools import find_mlir_opt

    program = dsl.compile(writes).lower(C, V, W, np.int64(1))._program
    text = export_module([program.stages["optimized"]])
    assert "tensor.insert_slice" in text and "arith.minsi" in text
    cs, vs = RNG.standard_normal((3, 5, 4)), RNG.standard_normal((3, 2, 4))
    rows = dsl.compile(dsl.vmap(per_example)).lower(cs, np.array([1, -1, 7]), vs)._program
    text_rows = export_module([rows.stages["optimized"]])  # windows per row: generics
    assert "linalg.index" in text_rows and "tensor.insert_slice" not in text_rows
    for program_text in (text, text_rows):
        for flags in ([], ["--one-shot-bufferize=bufferize-function-boundaries"]):
            proc = subprocess.run(
                [find_mlir_opt(), *flags], input=program_text, capture_output=True, text=True, timeout=60
            )
            assert proc.returncode == 0, proc.stderr
