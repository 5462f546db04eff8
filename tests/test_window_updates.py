"""In-place window updates write only the window (issue 28, ``compiler/kernel/window.py``): an update
of a window computed over its base's buffer loops over the window's elements, on the CPU and on
CUDA (lowered with ``target="cuda"``: no GPU needed), read from the kernel IR; a loop's
``c[i] = c[i] * 2 + 1`` (static and traced ``i``) is a chain of such in-place updates, not one kernel
selecting through every earlier update at every element; values against NumPy with in-place on, off
and under the sanitizer (which poisons dead buffers). The CUDA simulator runs the same programs in
``tests/cuda_sim/sim_window_updates.py``."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
from compiler.compilation import option_defaults
from compiler.kernel.ir import For, Line, Stmt
from compiler.prims.dynamic import PARTIAL_UPDATES

RNG = np.random.default_rng(0)
X = RNG.standard_normal((64, 16)).astype(np.float32)
K = 4


def rows_static(x):
    c = x * 1.0
    for i in range(K):
        c[i] = c[i] * 2 + 1
    return c


def rows_traced(x):
    c = x * 1.0

    def body(i, c):
        c[i] = c[i] * 2 + 1
        return c

    return dsl.fori_loop(0, K, body, c)


def rows_want(x):
    want = x.copy()
    want[:K] = want[:K] * 2 + 1
    return want


def over_matmul(x, v, w, i):
    """Updates of a dying matmul result (in place): a traced row, a traced band of rows added to, and
    a strided static window."""
    c = x @ x.T
    c[i] = v
    c[i : i + 2] += w
    c[1:7:3, ::5] = 2.0 * v[:2]
    return c @ x


def over_matmul_want(x, v, w, i):
    c = x @ x.T
    n = c.shape[0]
    c[min(max(i + n if i < 0 else i, 0), n - 1)] = v
    lo = min(max(i + n if i < 0 else i, 0), n - 2)
    c[lo : lo + 2] += w
    c[1:7:3, ::5] = 2.0 * v[:2]
    return c @ x


def returned_after_updates(x, w):
    """A returned matmul result updated through views: ``y[0] += 1`` (getitem, ``+=`` on the view,
    setitem of that same view), a method on a row, a strided window."""
    y = x @ w
    y[0] += 1.0
    y[2].mul_(3.0)
    y[1::4, ::3] = y[1::4, ::3] * 2.0
    return y


def returned_after_updates_want(x, w):
    y = x @ w
    y[0] += 1.0
    y[2] *= 3.0
    y[1::4, ::3] = y[1::4, ::3] * 2.0
    return y


def through_transposes(x, w):
    """Updates through transposed views (each was a transposed array the result's layout copied):
    a row of the transpose, a strided window of it, a row of the transpose of a column band."""
    y = x @ w
    y.T[2] *= 3.0
    y.T[1:5:2, ::4] += 1.0
    y[:, 4:].T[0] = 0.5
    return y


def through_transposes_want(x, w):
    y = x @ w
    y[:, 2] *= 3.0
    y[::4, 1:5:2] += 1.0
    y[:, 4] = 0.5
    return y


def consecutive_setitems(x, w, a, b):
    """Window writes one after another, of arguments and of a constant: each its own window loop,
    the values read where they are (no staging copy of ``a`` or ``b`` first)."""
    y = x @ w
    y[0] = a
    y[5] = 2.0 * b
    y[7, ::2] = 3.0
    return y


def consecutive_setitems_want(x, w, a, b):
    y = x @ w
    y[0] = a
    y[5] = 2.0 * b
    y[7, ::2] = 3.0
    return y


def _enclosing(body: list[Stmt], outer: tuple[For, ...] = ()) -> list[tuple[For, ...]]:
    """For each statement that stores, the loops around it."""
    out = []
    for s in body:
        if isinstance(s, For):
            out += _enclosing(s.body, (*outer, s))
        elif isinstance(s, Line) and s.writes:
            out.append(outer)
    return out


def _update_kernels(fn, args, target: str) -> list[tuple[int, int, int]]:
    """Per update group computed over its base's own buffer: (iterations of its kernel's store, the
    window's size, the base's size)."""
    comp = dsl.compile(fn, target=target).lower(*args).program.compilation
    donor = {r.value: r.reused_from for r in comp.plan.buffers}
    donor.update(comp.plan.result_reuses)  # a result computed over a value kept in its memory
    out = []
    for group, kernel in comp.kernels.kernels.items():
        root = group.root
        if root.prim not in PARTIAL_UPDATES or donor.get(root.result) != comp.fusion.names[root.operands[0]]:
            continue
        (loops,) = _enclosing(kernel.ir.body)
        assert all(isinstance(f.stop, int) for f in loops)
        iterations = math.prod(int(f.stop) for f in loops)
        out.append((iterations, root.operands[1].type.size, root.result.type.size))
    return out


@pytest.mark.parametrize("target", ["cpu", "cuda"])
@pytest.mark.parametrize(
    ("fn", "args"),
    [
        (rows_static, (X,)),
        (rows_traced, (X,)),
        (over_matmul, (X[:10, :10].astype(np.float64), X[0, :10].astype(np.float64), X[:2, :10], 3)),
        (returned_after_updates, (X, X[:16, :16])),
        (through_transposes, (X, X[:16, :16])),
        (consecutive_setitems, (X, X[:16, :16], X[0], X[1])),
    ],
    ids=["loop-static", "loop-fori", "over-matmul", "returned", "transposed", "consecutive"],
)
def test_in_place_update_kernel_loops_over_the_window(fn, args, target: str) -> None:
    """Every update computed over its base's buffer loops over the update's elements only; a loop of
    K ``c[i] = c[i] * 2 + 1`` has K of them (``c = x * 1.0`` is the user's own array, which the
    requests write over: the optimizer keeps it apart from the argument ``x``, as
    ``inplace_report.overwritten`` says; the last update is computed over the value the plan keeps
    in the result's memory). Updates
    one after another (``c[i] = v; c[i:i + 2] += w``) are each a loop over their own window: not
    one loop over the whole array selecting through them (which they were, when the next update
    read the last at the element it writes)."""
    # (the fori_loop unrolled: natively its one update runs in the loop's body, over the carry)
    with option_defaults(native_loops=fn is not rows_traced):
        found = _update_kernels(fn, [np.asarray(a) for a in args], target)
    count = {rows_static: K, rows_traced: K, over_matmul: 3, returned_after_updates: 3}.get(fn, 3)
    assert len(found) == count, found
    for iterations, window, base in found:
        assert iterations == window < base, found


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "sanitized"])
@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "no-inplace"])
def test_values_against_numpy(inplace: bool, sanitize: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if sanitize:
        monkeypatch.setenv("DSL_SANITIZE", "1")
    else:
        monkeypatch.delenv("DSL_SANITIZE", raising=False)
    for fn in (rows_static, rows_traced):
        np.testing.assert_array_equal(dsl.compile(fn, inplace=inplace)(X), rows_want(X))
    for fn, want in (
        (returned_after_updates, returned_after_updates_want),
        (through_transposes, through_transposes_want),
    ):
        got = dsl.compile(fn, inplace=inplace)(X, X[:16, :16])
        np.testing.assert_allclose(got, want(X, X[:16, :16]), rtol=1e-6)
    x = RNG.standard_normal((10, 10))
    v, w = RNG.standard_normal(10), RNG.standard_normal((2, 10))
    f = dsl.compile(over_matmul, inplace=inplace)
    for i in (3, 0, -1, 12, -20):
        np.testing.assert_allclose(f(x, v, w, i), over_matmul_want(x, v, w, i), rtol=1e-12, atol=1e-12)


def test_an_update_whose_update_operand_is_its_base_itself() -> None:
    """``y[0::-1] = y`` updates an argument with itself: the update reads its base through its update
    operand as it is, not through a slice of its window (``FusionPlan.same_window`` crashed on that
    read: the fuzzer's campaign of seed 104, with an empty argument); ``y[::-1] = y`` reverses."""

    def f(x, y):
        y[0::-1] = y  # y is written back to the caller's array, directly where the plan can
        return dnp.exp(x + x)

    def g(y):
        y[::-1] = y
        return y * 1.0

    x = np.arange(4.0).reshape(2, 2)
    for y in (np.zeros(0), np.ones(1)):
        np.testing.assert_array_equal(dsl.compile(f)(x, y), np.exp(x + x))
        np.testing.assert_array_equal(y, np.ones(len(y)))
    for n in (0, 1, 4):
        y = np.arange(float(n))
        want = np.arange(float(n))[::-1].copy()
        np.testing.assert_array_equal(dsl.compile(g)(y), want)
        np.testing.assert_array_equal(y, want)  # the argument written back


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_a_native_loops_update_runs_over_the_window_of_its_carry(target: str) -> None:
    """Natively, the fori_loop's ``c[i] = c[i] * 2 + 1`` is one update in its body, written straight
    over the carry (a direct write-back) by a kernel that loops over the window only."""
    comp = dsl.compile(rows_traced, target=target).lower(np.asarray(X)).program.compilation
    ((loop,),) = [list(comp.loops.values())]
    (body,) = loop.bodies
    program = body.program
    updates = [g for g in program.kernels.kernels if g.root.prim in PARTIAL_UPDATES]
    assert updates and all(g.root.results[0] in program.plan.direct_writeback for g in updates)
    for group in updates:
        (loops,) = _enclosing(program.kernels.kernels[group].ir.body)
        assert math.prod(int(f.stop) for f in loops) == group.root.operands[1].type.size


def test_updates_through_transposed_views_copy_nothing() -> None:
    """``y.T[2] *= 3`` wrote a transposed array that the result's layout then copied whole (and
    ``y[:, 4:].T[0] = v`` computed the whole band first): now each is an update of ``y``'s own window
    (``simplify``: ``update_through_transpose``, ``nested_update``), in place."""
    report = dsl.compile(through_transposes).lower(X, X[:16, :16]).explain_inplace()
    requests = report.split("buffers reused")[0]
    assert "copy" not in requests and "3072 bytes" not in requests, report
    report = dsl.compile(consecutive_setitems).lower(X, X[:16, :16], X[0], X[1]).explain_inplace()
    assert "computed first" not in report and "copy" not in report, report  # no staging buffers


def test_a_value_read_before_an_earlier_update_is_computed_first() -> None:
    """``d = y[2] * 2; y[2] = 5; y[1] = d``: ``d`` reads ``y`` before the first update writes it, so
    it is computed first (128 bytes), not inside the second update's kernel, where it would keep
    the first update from being in place (a copy of the whole array)."""

    def later(x, w):
        y = x @ w
        d = y[2] * 2.0
        y[2] = 5.0
        y[1] = d
        return y

    x, w = X[:, :16].astype(np.float64), X[:16, :16].astype(np.float64)
    lowered = dsl.compile(later).lower(x, w)
    assert lowered.memory_plan().peak_bytes <= 128, str(lowered.memory_plan())
    assert "copy" not in lowered.explain_inplace()
    want = x @ w
    want[1], want[2] = want[2] * 2.0, 5.0
    np.testing.assert_allclose(dsl.compile(later)(x, w), want, rtol=1e-12)
