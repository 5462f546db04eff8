"""Call-time safety: aliasing arguments are refused when one is written, inputs are written only when
the program says so, and a call that raises midway leaves every caller array as it was.

(The fuzzer, ``test_fuzz_programs.py``, also checks over 1,000 random programs that every input the
program does not write is bit-for-bit unchanged after each call.)
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from helpers import python_kernels

import dsl
import dsl.numpy as dnp


@dsl.compile
def accumulate(x, y):
    x += y
    return x.sum()


@pytest.mark.parametrize(
    "views",
    [
        lambda a: (a, a),
        lambda a: (a[:3], a[1:4]),  # overlapping slices of one base
        lambda a: (a.reshape(2, 4)[0], a[2:6]),
        lambda a: (a[::-1][:4], a[4:]),  # a reversed view ends where the other starts
    ],
)
def test_overlapping_arguments_are_refused_when_one_is_written(views) -> None:
    a = np.arange(8.0)
    x, y = views(a)
    with pytest.raises(dsl.DSLError, match="share memory"):
        accumulate(x, y)
    np.testing.assert_array_equal(a, np.arange(8.0))  # refused before anything ran


def test_disjoint_views_of_one_base_are_fine() -> None:
    a = np.arange(8.0)
    for x, y in ((a[:4], a[4:]), (a[::2], a[1::2])):  # interleaved: bounds overlap, bytes do not
        before_y = y.copy()
        want = x + y
        total = accumulate(x, y)
        np.testing.assert_array_equal(x, want)
        np.testing.assert_array_equal(y, before_y)
        assert float(total) == want.sum()


@pytest.mark.parametrize(
    "make",
    [
        lambda b: np.lib.stride_tricks.as_strided(b, (3, 2), (8, 8), writeable=True),  # row i: b[i:i + 2]
        lambda b: np.lib.stride_tricks.as_strided(b, (3, 4), (0, 8), writeable=True),  # three rows, one row
    ],
    ids=["windows", "zero-stride"],
)
def test_an_argument_whose_elements_share_memory_is_refused_when_written(make) -> None:
    """A written argument whose elements overlap each other would have one element written through
    several (NumPy applies the writes in order; the compiled program wrote each back from its own
    copy: ``w[0] += 1; w[1] += 1`` on ``b[i:i + 2]`` windows gave ``[1, 1, 0, 0]``, NumPy ``[1, 2, 1,
    0]``): refused before anything runs, as two overlapping arguments are; reading it is fine."""
    base = np.zeros(4)
    w = make(base)

    @dsl.compile
    def bump(w):
        w[0] += 1.0
        w[1] += 1.0
        return w.sum()

    with pytest.raises(dsl.DSLError, match=r"test_call_safety.py:\d+: .*'w' has elements that share memory"):
        bump(w)
    np.testing.assert_array_equal(base, np.zeros(4))
    assert float(dsl.compile(lambda v: (v * 2).sum())(w)) == 0.0
    a = np.arange(12.0).reshape(3, 4)
    for fine in (a, a.T, a[::2, ::-1], a[:, 1::2], a.reshape(-1)[::3], np.asfortranarray(a)):  # none overlap
        bump(fine.copy() if not fine.flags.writeable else fine)


def test_aliasing_read_only_arguments_are_fine() -> None:
    a = np.arange(6.0).reshape(2, 3)
    f = dsl.compile(lambda x, y: x @ y.T + y[:, :2])
    np.testing.assert_allclose(f(a, a), a @ a.T + a[:, :2])


def test_donated_argument_may_not_alias_another() -> None:
    f = dsl.compile(lambda x, y: dnp.exp(x) + y, donate_argnums=0)
    a = np.arange(4.0)
    with pytest.raises(dsl.DSLError, match="share memory"):
        f(a, a)
    np.testing.assert_allclose(f(np.arange(4.0), a), np.exp(a) + a)


def test_inputs_are_written_only_when_the_program_says_so() -> None:
    @dsl.compile
    def f(x, y, z):
        x[1:] *= 2.0  # the only write
        return y.T @ z + x.sum(), dnp.tanh(z)

    rng = np.random.default_rng(0)
    base = rng.standard_normal((4, 6))
    x, y, z = base[:, 0].copy(), base[:, 1:4], np.asfortranarray(base[:, 3:])  # y, z overlap: read-only
    before = base.copy(), z.copy()
    f(x, y, z)
    np.testing.assert_array_equal(base, before[0])
    np.testing.assert_array_equal(z, before[1])
    want = before[0][:, 0].copy()
    want[1:] *= 2.0
    np.testing.assert_array_equal(x, want)


def _program_with_writeback():
    def f(x, w):
        y = x * 2.0
        x.exp_()  # stored straight into the caller's x when nothing reads the old x later
        return dnp.tanh(x @ w) + 1.0, y

    return f


def test_a_driver_failing_midway_leaves_caller_arrays_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    # Plain-Python kernels let one kernel raise after the earlier ones ran (including the one
    # that writes the caller's x directly).
    x0, w = np.linspace(-1, 1, 9).reshape(3, 3), np.eye(3)
    with python_kernels():  # (the executable is built, its module imported, at its first use)
        f = dsl.compile(_program_with_writeback())
        f.lower(x0.copy(), w)
        (entry,) = f._cache.values()
        executable = entry.run
    assert executable.direct, "this program should write x directly (else the check proves less)"
    _fail_in_the_last_kernel(executable, monkeypatch, x0, w)


def _fail_in_the_last_kernel(executable, monkeypatch: pytest.MonkeyPatch, x0, w) -> None:
    """``executable`` (plain-Python kernels) called on a copy of ``x0`` with its last kernel raising:
    the error reaches the caller, and the copy holds ``x0`` again."""
    module = sys.modules[executable.driver.__module__]
    kernels = [name for name in vars(module) if name.startswith("k")]
    monkeypatch.setattr(module, sorted(kernels)[-1], _raise)
    x = x0.copy()
    with pytest.raises(RuntimeError, match="injected"):
        executable(x, w)
    np.testing.assert_array_equal(x, x0)


def test_numba_driver_failing_after_it_ran_leaves_write_backs_unwritten() -> None:
    @dsl.compile
    def f(x, w):
        y = x * 2.0  # fused into the last kernel: the old x is read after exp_ ran, so not direct
        x.exp_()
        return (x @ w) + y

    x0, w = np.linspace(-1, 1, 9).reshape(3, 3), np.eye(3)
    f.lower(x0.copy(), w)
    (entry,) = f._cache.values()
    executable = entry.run
    assert executable.writeback and not executable.direct
    real = executable.driver

    def failing(*args):
        real(*args)
        raise RuntimeError("injected failure after every kernel ran")

    executable.driver = failing
    x = x0.copy()
    with pytest.raises(RuntimeError, match="injected"):
        f(x, w)
    np.testing.assert_array_equal(x, x0)
    executable.driver = real
    f(x, w)
    np.testing.assert_allclose(x, np.exp(x0))


def _raise(*args) -> None:
    raise RuntimeError("injected failure in the last kernel")


# ---- argument layouts: NumPy decides view-or-copy from the caller's strides, and so does dslc -------
# The signature holds an argument's layout (C order, or its strides), so a Fortran-ordered, transposed,
# sliced or reversed argument is traced with its own strides; arguments it mutates are written back
# into the caller's strided arrays. Each function runs eagerly on NumPy and compiled, on the same layout.

LAYOUTS = {
    "c": lambda base: base.reshape(4, 6),
    "fortran": lambda base: np.asfortranarray(base.reshape(4, 6)),
    "transposed": lambda base: base.reshape(6, 4).T,
    "strided_columns": lambda base: np.concatenate([base.reshape(4, 6)] * 2, axis=1)[:, ::2],
    "strided_rows": lambda base: np.concatenate([base.reshape(4, 6)] * 2, axis=0)[::2],
    "reversed": lambda base: base.reshape(4, 6)[::-1, ::-1],
}


def reshape_then_write(x):
    r = x.reshape(-1)  # a view of C-ordered x only
    r[0] = 100.0
    s = x.reshape(4, 2, 3)  # splitting the last axis: a view for every layout here but transposed
    s[1, 1] = -1.0
    return r, s


def transposed_reshape_then_write(x):
    r = x.T.reshape(-1)  # a view of Fortran-ordered x
    r[1] = -3.0
    return r * 1.0


def ravel_and_flatten_then_write(x):
    r = x.ravel()  # a view of C-contiguous x only
    r[2] = 7.0
    f = x.flatten()  # always a copy
    f[3] = 8.0
    return r, f


def mutate_through_views(x):
    x[1:, ::2] *= 2.0
    x.T[0] += 1.0
    return x.sum()


LAYOUT_CASES = [reshape_then_write, transposed_reshape_then_write, ravel_and_flatten_then_write]
LAYOUT_CASES.append(mutate_through_views)


@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "no_inplace"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("fn", LAYOUT_CASES, ids=lambda f: f.__name__)
def test_argument_layouts_follow_numpy(fn, layout, inplace) -> None:
    def make():
        base = np.arange(24.0) - 5.5
        return base, LAYOUTS[layout](base)

    (want_base, want_x), (got_base, got_x) = make(), make()
    want = fn(want_x)
    with python_kernels():
        got = dsl.compile(fn, inplace=inplace)(got_x)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(got_x, want_x)  # the caller's array, written through its strides
    np.testing.assert_array_equal(got_base, want_base)  # and nothing else of its base


def test_each_layout_is_its_own_signature() -> None:
    f = dsl.compile(reshape_then_write)
    c = np.arange(24.0).reshape(4, 6)
    for x in (c.copy(), np.asfortranarray(c)):
        want_x = x.copy(order="K")
        want = reshape_then_write(want_x)
        got = f(x)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(x, want_x)
    assert f.trace_count == 2
    f(np.arange(24.0).reshape(4, 6))
    f(np.arange(24.0).reshape(1, 4, 6)[0])  # C order, whatever its base: no new trace
    assert f.trace_count == 2
    g = dsl.compile(lambda d: reshape_then_write(d["x"]))
    x = np.asfortranarray(c)
    g({"x": x})  # a leaf of a pytree argument has its layout too
    assert x[0, 0] == 0.0 and x[1, 3] == -1.0


def flat_copy_then_write(x):
    r = x.reshape(-1)
    r[0] = 100.0
    return r


def test_broadcast_argument_reshapes_to_a_copy() -> None:
    row = np.arange(6.0)
    x = np.broadcast_to(row, (4, 6))  # read-only, stride 0: NumPy's reshape(-1) copies, so no write
    got = dsl.compile(flat_copy_then_write)(x)
    np.testing.assert_array_equal(got, flat_copy_then_write(np.broadcast_to(np.arange(6.0), (4, 6))))
    np.testing.assert_array_equal(row, np.arange(6.0))
    with pytest.raises(ValueError, match="read-only"):  # a view of it written: NumPy raises too
        reshape_then_write(np.broadcast_to(np.arange(6.0), (4, 6)))
    with pytest.raises(dsl.ReadOnlyError, match="read-only") as err:  # before anything ran
        dsl.compile(reshape_then_write)(x)
    assert isinstance(err.value, ValueError)  # as NumPy's


def loss_with_a_buffer(w, buf):
    r = buf.reshape(-1)  # a view of C-ordered buf only: the write reaches buf (and the loss) only then
    r[0] = 10.0
    return (w * buf).sum()


@pytest.mark.parametrize("layout", ["c", "fortran"])
def test_gradient_sees_the_argument_as_numpy_leaves_it(layout) -> None:
    def make():
        buf = np.arange(24.0).reshape(4, 6) + 1.0
        return np.ones((4, 6)), (buf if layout == "c" else np.asfortranarray(buf))

    w, buf = make()
    value, grad = dsl.compile(dsl.value_and_grad(loss_with_a_buffer))(w, buf)
    want_w, want_buf = make()
    want_value = loss_with_a_buffer(want_w, want_buf)  # d/dw (w * buf).sum() is buf as it is then
    np.testing.assert_allclose(value, want_value)
    np.testing.assert_array_equal(grad, want_buf)
    np.testing.assert_array_equal(buf, want_buf)


def scaled_by_counts(x, counts):
    flat = counts.reshape(-1)  # a view of C-ordered counts only: the write changes the gradient then
    flat[0] = 50
    return (x * counts).sum()


@pytest.mark.parametrize("layout", ["c", "fortran"])
def test_vjp_backward_traces_the_arguments_layout(layout) -> None:
    def make():
        counts = np.arange(1, 7).reshape(2, 3)
        return np.ones((2, 3)), (counts if layout == "c" else np.asfortranarray(counts))

    x, counts = make()
    out, vjp_fn = dsl.vjp(scaled_by_counts, x, counts)
    grad_x, _ = vjp_fn(1.0)  # the saved primals keep the caller's layout: same reshapes as the forward
    want_x, want_counts = make()
    np.testing.assert_allclose(out, scaled_by_counts(want_x, want_counts))
    np.testing.assert_array_equal(grad_x, want_counts)  # d/dx (x * counts).sum(): counts as NumPy left it
    np.testing.assert_array_equal(counts, want_counts)


def test_a_driver_failing_midway_restores_an_argument_holding_intermediates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``x *= w`` is kept in x's own memory (the plan's rule 1 for a mutated argument), and ``x +=
    x.T`` is computed beside it and copied back: x is no direct write-back, but the driver writes
    into it before its last kernel. A driver that can raise midway snapshots it all the same."""

    def f(x, w):
        x *= w
        x += x.T
        return x.sum()

    x0, w = np.linspace(-1, 1, 9).reshape(3, 3), np.full((3, 3), 2.0)
    with python_kernels():
        compiled = dsl.compile(f)
        compiled.lower(x0.copy(), w)
        (entry,) = compiled._cache.values()
        executable = entry.run
    assert not executable.direct and executable._guarded == (0,), executable._guarded
    _fail_in_the_last_kernel(executable, monkeypatch, x0, w)


def test_diagonal_is_a_read_only_view_as_numpys() -> None:
    """``dnp.diagonal`` (and ``x.diagonal()``, ``dnp.diag`` of a matrix) is NumPy's read-only view: it
    sees a later write to its base, its gradient reaches the base, and a write into it raises. It was
    a copy: a later ``h += 1`` left it stale (an outside probe, 2026-11-27), and ``d += 1`` changed
    nothing, silently."""

    def later_write(xp, x):
        h = x * 1.0
        d, e, f = xp.diagonal(h, 1), h.diagonal(-1), xp.diag(h)
        h += 1.0
        return d, e, f, xp.diagonal(x.reshape(2, 3, 2), 0, 2, 0)

    x = np.arange(12.0).reshape(3, 4)
    for got, want in zip(dsl.compile(lambda x: later_write(dnp, x))(x), later_write(np, x), strict=True):
        np.testing.assert_array_equal(got, want)

    def write_into(xp, x):
        h = x * 1.0
        d = xp.diagonal(h)
        d += 1.0
        return h

    with pytest.raises(ValueError, match="read-only"):
        write_into(np, x)
    with pytest.raises(dsl.ReadOnlyError, match="read-only"):
        dsl.compile(lambda x: write_into(dnp, x))(x)
    grad = dsl.grad(lambda x: (dnp.diagonal(x * x, 1) ** 2).sum())(x)
    want = np.zeros_like(x)
    want[[0, 1, 2], [1, 2, 3]] = 4 * x[[0, 1, 2], [1, 2, 3]] ** 3
    np.testing.assert_allclose(grad, want)
